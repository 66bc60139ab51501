"""Roofline end to end on the CPU backend: `helix calibrate --peak` measures for real (small sizes,
never asserted for speed) and a bench whose harness declares its work (build_bench_case_work)
writes records carrying it, the achieved figures and the measured peak they are a fraction of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.perf import peaks
from tests.e2e._eval_ws import assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow  # two real jobs (torch import in each child)

WORK_HOOK = """

def build_bench_case_work(case):
    return {"bytes": 3 * case["n"] * 4, "flops": case["n"], "dtype": torch.float32}
"""


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def test_calibrate_peak_then_a_bench_reports_fractions_of_the_measured_peak(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ws = make_ws(tmp_path, "add")
    with (ws / "bench_add.py").open("a") as bench:
        bench.write(WORK_HOOK)
    assert main(["calibrate", str(ws), "--peak", "--backend", "cpu", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    stored = peaks.load(ws)[0].devices[payload["device"]]
    assert stored.backend == "cpu" and stored.copy_gbps is not None and stored.copy_gbps > 0
    assert set(stored.matmul_tflops) <= {"fp16", "bf16", "fp32"} and stored.matmul_tflops.get("fp32", 0) > 0
    assert stored.copy_bytes == 2 * (32 << 20) and stored.matmul_n["fp32"] == 256
    assert {j.kind for j in assert_jobs_settled(ws)} == {"calibrate-peak"}

    assert main(["run-bench", "--operator-file", str(ws / "add.py"), "--backend", "cpu"]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (ws / "add_perf.txt").read_text().splitlines()]
    first = records[0]
    assert first["case_label"] == "n256"
    roof = first["roofline"]
    assert (roof["flops"], roof["bytes"], roof["dtype"]) == (256, 3 * 256 * 4, "fp32")
    assert roof["time_us"] == first["kernel_avg_time_us"] and roof["metric"] == "kernel"
    assert roof["gbps"] == pytest.approx(roof["bytes"] / roof["time_us"] / 1e3, rel=1e-5)
    assert roof["tflops"] == pytest.approx(roof["flops"] / roof["time_us"] / 1e6, rel=1e-5)
    assert roof["peak_gbps"] == stored.copy_gbps and roof["peak_gbps_source"] == "measured"
    assert roof["peak_tflops"] == stored.matmul_tflops["fp32"]
    assert roof["bw_fraction"] == pytest.approx(roof["gbps"] / stored.copy_gbps, rel=1e-5)
    assert list(first)[:9] == ["case_label", "kernel_names", "kernel_source", "kernel_avg_time_us", "ops",
                               "total_op_avg_time_us", "error_message", "case_wall_clock_seconds", "bench_mode"]
