"""Kernel coverage under a profiler (issue 27 item 6): the share of a call's device time spent in
the operator file's own kernels, from the profiler timings a slot returns; a candidate whose time
is mostly other kernels (ATen, cuBLAS) is a "pure PyTorch fallback" finding.

The NPU case reads a real Ascend profiler output (tests/fixtures/kernels/profiler/standalone, one
matmul_kernel per step) and the same output with an ATen op added to every step, as a fallback
would show; the CUDA case goes through the same grouping the torch-profiler timer uses."""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from helix_engine.eval import timing
from helix_engine.gate.sides import MIN_KERNEL_SHARE, kernel_share, kernel_share_finding

PROF = Path(__file__).resolve().parents[1] / "fixtures" / "kernels" / "profiler" / "standalone"
ATEN_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")


def _slot(res: timing.CaseTiming) -> dict[str, Any]:
    return dataclasses.asdict(res) if dataclasses.is_dataclass(res) else dict(vars(res))


def _cuda_slot(kernels_per_step: list[tuple[str, float]], names: list[str], steps: int = 3) -> dict[str, Any]:
    events, windows = [], []
    for s in range(steps):
        start = 1000.0 * s
        windows.append((start, start + 900.0))
        for i, (name, us) in enumerate(kernels_per_step):
            events.append((name, start + 10.0 + i, us))
    view = timing.group_by_steps(events, windows, repeats=steps)
    return _slot(timing.split_ops(view, names))


def test_a_dummy_kernel_beside_aten_softmax_is_a_fallback_under_the_cuda_profiler() -> None:
    cand = [_cuda_slot([("softmax_kernel", 0.8), (ATEN_SOFTMAX, 40.0)], ["softmax_kernel"])]
    ref = [_cuda_slot([("row_max_kernel", 20.0), ("exp_sum_kernel", 25.0), ("normalize_kernel", 20.0)],
                      ["row_max_kernel", "exp_sum_kernel", "normalize_kernel"])]
    share = kernel_share(cand)
    assert share is not None and share < 0.05
    (found,) = kernel_share_finding("c0", cand, ref, ["softmax_kernel"])
    assert found.kind == "pytorch-fallback" and "2%" in found.message and "cunn_SoftMaxForward" in found.message
    assert "reference's took 100%" in found.message


def test_an_honest_kernel_with_a_small_aten_copy_is_not_a_fallback() -> None:
    cand = [_cuda_slot([("softmax_kernel", 30.0), ("void at::native::vectorized_elementwise_kernel", 3.0)],
                       ["softmax_kernel"])]
    assert kernel_share(cand) == pytest.approx(30.0 / 33.0)
    assert kernel_share_finding("c0", cand, cand, ["softmax_kernel"]) == []


def test_no_finding_when_the_reference_is_mostly_other_kernels_too() -> None:
    """A baseline that itself calls a library (cuBLAS around a small Triton epilogue) sets the bar:
    the candidate doing the same is not a fallback of its own making."""
    both = [_cuda_slot([("epilogue_kernel", 2.0), ("sm90_xmma_gemm_f16f16_f32", 50.0)], ["epilogue_kernel"])]
    assert kernel_share_finding("c0", both, both, ["epilogue_kernel"]) == []


def _with_aten_rows(src: Path, dest: Path, name: str, us: float) -> Path:
    shutil.copytree(src, dest)
    details = dest / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(details, newline="") as fh:
        rows = list(csv.DictReader(fh))
        fields = list(rows[0].keys())
    extra = [dict(r, **{"Name": name, "Type": name, "Duration(us)": f"{us}"}) for r in rows]
    with open(details, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows + extra)
    (dest / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").unlink()
    return dest


def test_the_share_from_a_real_ascend_profiler_output(tmp_path: Path) -> None:
    honest = _slot(timing.timing_from_ascend_dir(shutil.copytree(PROF, tmp_path / "honest"), 10, ["matmul_kernel"]))
    assert kernel_share([honest]) == pytest.approx(1.0)
    fallback_dir = _with_aten_rows(PROF, tmp_path / "fallback", "MatMulV2", 900.0)
    fallback = _slot(timing.timing_from_ascend_dir(fallback_dir, 10, ["matmul_kernel"]))
    share = kernel_share([fallback])
    assert share is not None and share < MIN_KERNEL_SHARE
    (found,) = kernel_share_finding("case0", [fallback], [honest], ["matmul_kernel"])
    assert "MatMulV2" in found.message and "pure PyTorch fallback" in found.message


def test_unknown_totals_give_no_share_and_no_finding() -> None:
    assert kernel_share([{"kernel_avg_us": 3.0, "total_op_avg_us": None}]) is None
    assert kernel_share_finding("c", [{"kernel_avg_us": 3.0, "total_op_avg_us": None}], [], ["k"]) == []
