"""Bench-mode parsing that cannot run here (NPU profilers, CUDA profiler) tested on recorded
CSVs and synthetic event lists; perf-counter tested for real."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helix_engine.eval import timing
from tests.conftest import FIXTURES

PROF = FIXTURES / "kernels" / "profiler"


def test_kernel_details_per_step_average() -> None:
    view = timing.kernel_details_view(PROF / "standalone/ASCEND_PROFILER_OUTPUT/kernel_details.csv", repeats=3)
    # 10 rows of matmul_kernel summing to 888.42 µs over 10 distinct Step Ids
    assert list(view.op_avgs) == ["matmul_kernel"]
    assert view.op_avgs["matmul_kernel"] == pytest.approx(88.842)
    assert len(view.steps) == 10
    res = timing.split_ops(view, ["matmul"])  # `<name>_kernel` matches too
    assert res.kernel_avg_us == pytest.approx(88.842) and res.error_message is None
    assert res.samples_us[0] == pytest.approx(88.162) and len(res.samples_us) == 10


def test_kernel_details_without_step_column_divides_by_repeats(tmp_path: Path) -> None:
    csv = tmp_path / "kernel_details.csv"
    csv.write_text("Name,Duration(us)\nk,10\nk,20\nCast,3\nbad,\n", encoding="utf-8")
    view = timing.kernel_details_view(csv, repeats=2)
    assert view.op_avgs == {"k": 15.0, "Cast": 1.5}
    res = timing.split_ops(view, ["k"])
    assert (res.kernel_avg_us, res.total_op_avg_us) == (15.0, 16.5)
    assert res.ops == [{"op_type": "k", "avg_time_us": 15.0}, {"op_type": "Cast", "avg_time_us": 1.5}]


def test_no_kernel_match_is_the_recoverable_error() -> None:
    view = timing.kernel_details_view(PROF / "standalone/ASCEND_PROFILER_OUTPUT/kernel_details.csv", repeats=3)
    res = timing.split_ops(view, ["softmax_kernel"])
    assert res.kernel_avg_us is None and res.total_op_avg_us == pytest.approx(88.842)
    assert res.error_message == "no resolved kernels matched profiler kernel view"


def test_op_statistic_fallback_and_msprof_gcd(tmp_path: Path) -> None:
    stat = PROF / "msprof/mindstudio_profiler_output/op_statistic_20260511093035.csv"
    # Counts 5, 2, 2 → gcd 1 → the native Avg Time(us)
    view = timing.op_statistic_view(stat, None)
    assert view.op_avgs == {"matmul_kernel": 6.028, "Cast": 3.12, "DSARandomNormal": 2.11}
    res = timing.split_ops(view, ["matmul_kernel"], timing.NO_MATCH_MSPROF)
    assert res.kernel_avg_us == 6.028 and res.total_op_avg_us == pytest.approx(11.258)
    # torch-npu fallback: Total ÷ repeats
    assert timing.op_statistic_view(stat, 2).op_avgs["matmul_kernel"] == pytest.approx(15.072)
    gcd = tmp_path / "op_statistic_1.csv"
    gcd.write_text("OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
                   "k,AI_CORE,8,80,9,10,11,90\nCast,AI_VECTOR_CORE,4,8,1,2,3,10\n", encoding="utf-8")
    # Counts 8, 4 → gcd 4 → Total ÷ 4 (not the native Avg 10 / 2)
    assert timing.op_statistic_view(gcd, None).op_avgs == {"k": 20.0, "Cast": 2.0}
    assert timing.split_ops(timing.op_statistic_view(gcd, None), ["x"],
                            timing.NO_MATCH_MSPROF).error_message == "no resolved kernels matched op_statistic csv"


def test_ascend_dir_prefers_kernel_details_then_falls_back(tmp_path: Path) -> None:
    shutil.copytree(PROF / "standalone", tmp_path / "run")
    res = timing.timing_from_ascend_dir(tmp_path / "run", 10, ["matmul_kernel"])
    assert res.kernel_avg_us == pytest.approx(88.842)
    (tmp_path / "run/ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_text("Name,Duration(us),Step Id\n")
    res = timing.timing_from_ascend_dir(tmp_path / "run", 10, ["matmul_kernel"])
    assert res.kernel_avg_us == pytest.approx(88.842)  # op_statistic: 888.42 / 10
    (tmp_path / "run/ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_bytes(b"Name,Duration(us)\n\x00\xff garbage\n")
    res = timing.timing_from_ascend_dir(tmp_path / "run", 10, ["matmul_kernel"])
    assert res.kernel_avg_us == pytest.approx(88.842)  # a damaged kernel_details also falls back
    (tmp_path / "run/ASCEND_PROFILER_OUTPUT/op_statistic.csv").write_text("OP Type,Count\nmatmul_kernel,3\n")
    res = timing.timing_from_ascend_dir(tmp_path / "run", 10, ["matmul_kernel"])
    assert res.kernel_avg_us is None and "Total Time(us)" in (res.error_message or "")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "neither kernel_details.csv nor op_statistic" in timing.timing_from_ascend_dir(empty, 1, ["k"]).error_message


def test_group_kernels_by_profiler_steps() -> None:
    kernels = [("softmax_kernel", 105.0, 30.0), ("Memset", 101.0, 1.0),
               ("softmax_kernel", 205.0, 34.0), ("Memset", 201.0, 1.0)]
    view = timing.group_by_steps(kernels, [(100.0, 190.0), (200.0, 290.0)], repeats=2)
    assert view.op_avgs == {"Memset": 1.0, "softmax_kernel": 32.0}
    res = timing.split_ops(view, ["softmax_kernel"])
    assert res.samples_us == [30.0, 34.0]
    assert (res.kernel_avg_us, res.total_op_avg_us) == (32.0, 33.0)


def test_group_kernels_falls_back_to_equal_chunks_on_clock_skew() -> None:
    kernels = [("k", 5000.0, 10.0), ("k", 6000.0, 12.0), ("k", 7000.0, 14.0)]
    view = timing.group_by_steps(kernels, [(0.0, 1.0), (2.0, 3.0), (4.0, 5.0)], repeats=3)
    assert timing.split_ops(view, ["k"]).samples_us == [10.0, 12.0, 14.0]


def test_perf_counter_counts_calls_and_syncs() -> None:
    calls: list[str] = []
    res = timing.time_perf_counter(lambda: calls.append("fn"), 2, 3, lambda: calls.append("sync"))
    assert calls == ["fn", "sync"] * 5
    assert len(res.samples_us) == 3 and res.ops == []
    assert res.kernel_avg_us == res.total_op_avg_us == pytest.approx(sum(res.samples_us) / 3)


def test_gpu_user_annotations_are_not_device_ops() -> None:
    # Seen on an H200 (torch 2.11): each ProfilerStep also appears on the GPU timeline as
    # 'ProfilerStep*' with is_user_annotation=True and the kernel's duration.
    class Ev:
        def __init__(self, name: str, ann: bool) -> None:
            self.name, self.is_user_annotation = name, ann

    assert timing._is_annotation(Ev("ProfilerStep*", True))
    assert timing._is_annotation(Ev("ProfilerStep#3", False))
    assert not timing._is_annotation(Ev("softmax_kernel", False))


def test_device_event_asks_do_bench_again_when_it_gave_too_few_reps(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls: list[tuple[float, float, str]] = []

    def fake_do_bench(fn, warmup=25, rep=100, return_mode="mean"):  # type: ignore[no-untyped-def]
        calls.append((warmup, rep, return_mode))
        if return_mode == "median":
            return 0.01  # the closure alone: 10 µs
        return [0.01] * max(1, int(rep / 0.08))  # do_bench's own estimate includes an 80 µs flush

    fake = types.ModuleType("triton.testing")
    fake.do_bench = fake_do_bench  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton.testing", fake)
    res = timing.time_device_event(lambda: None, 5, 100, lambda: None)
    assert [c[2] for c in calls] == ["median", "all", "all"]
    assert len(res.samples_us) >= 100 and res.kernel_avg_us == pytest.approx(10.0)
    assert res.ops == [] and res.total_op_avg_us == res.kernel_avg_us
