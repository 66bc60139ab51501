"""The cache state is part of the measurement (issue 28 item 2): which states each bench mode can
measure in, the flush kept out of the timed repetition and out of the profiler's steps, and files
measured in different states never compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.eval.backends import get_backend
from helix_engine.eval.timing import group_by_steps, split_ops, time_perf_counter, without_flush
from helix_engine.perf.compare import check_bench_modes
from helix_engine.workspace.models import PerfRecord


def test_each_backend_says_which_states_a_mode_measures_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_L2", raising=False)
    cuda, npu, cpu = get_backend("cuda"), get_backend("npu"), get_backend("cpu")
    assert cuda.l2_for("torch-profiler") == "flushed" and cuda.l2_for("device-event") == "flushed"
    assert cuda.l2_for("torch-profiler", "warm") == "warm"
    assert npu.l2_for("torch-npu-profiler") == "warm" and cpu.l2_for("perf-counter") == "warm"
    with pytest.raises(HelixError, match="device-event on the cuda backend measures with the L2 flushed, not 'warm'"):
        cuda.l2_for("device-event", "warm")
    with pytest.raises(HelixError, match="not 'flushed'; device-event, perf-counter can measure flushed"):
        npu.l2_for("msprof", "flushed")
    monkeypatch.setenv("HELIX_L2", "flushed")  # what --l2 sets for the command's jobs
    assert cpu.l2_for("perf-counter") == "flushed"


def test_the_flush_runs_before_each_timed_repetition_and_outside_its_time() -> None:
    calls: list[str] = []
    timing = time_perf_counter(lambda: calls.append("fn"), 2, 3, lambda: calls.append("sync"),
                               flush=lambda: calls.append("flush"))
    assert calls == ["fn", "sync"] * 2 + ["flush", "sync", "fn", "sync"] * 3  # warm-ups are not flushed
    assert len(timing.samples_us) == 3


def test_a_profiled_step_holds_its_timed_range_only() -> None:
    """(name, start µs, duration µs) as torch.profiler reports device ops; ranges as the flushed
    session opens them: flush, timed, flush, timed. The operator's kernel of the second step
    starts 0.5 µs before its range opens (the device clock a little off the host's): still its."""
    ranges = [(0.0, 60.0, False), (61.0, 75.0, True), (76.0, 140.0, False), (141.0, 160.0, True)]
    kernels = [("fill_flush", 1.0, 55.0), ("my_kernel", 62.0, 10.0), ("fill_flush", 77.0, 55.0),
               ("my_kernel", 140.5, 12.0), ("helper", 153.0, 2.0)]
    kept, steps = without_flush(kernels, ranges)
    assert [k[0] for k in kept] == ["my_kernel", "my_kernel", "helper"]
    timing = split_ops(group_by_steps(kept, steps, 2), ["my_kernel"])
    assert timing.samples_us == [10.0, 12.0] and timing.kernel_avg_us == 11.0 and timing.total_op_avg_us == 12.0
    assert {op["op_type"] for op in timing.ops or []} == {"my_kernel", "helper"}


def _records(bench_mode: str, l2: str | None) -> list[PerfRecord]:
    data = {"case_label": "c", "kernel_avg_time_us": 1.0, "bench_mode": bench_mode}
    if l2 is not None:
        data["l2"] = l2
    return [PerfRecord.model_validate(data)]


def test_files_measured_in_different_cache_states_are_never_compared() -> None:
    problem = check_bench_modes(_records("torch-profiler", "flushed"), _records("torch-profiler", "warm"))
    assert problem is not None and problem.startswith("cannot compare results measured with the L2 flushed (baseline) "
                                                      "and warm (candidate)")
    # a record from before the key: torch-profiler ran warm, do_bench always flushed
    assert check_bench_modes(_records("torch-profiler", None), _records("torch-profiler", "flushed")) is not None
    assert check_bench_modes(_records("torch-profiler", None), _records("torch-profiler", "warm")) is None
    assert check_bench_modes(_records("device-event", None), _records("device-event", "flushed")) is None


def test_a_calibration_of_another_cache_state_is_not_used(tmp_path: Path) -> None:
    from helix_engine.perf.calibration import margins_for

    (tmp_path / ".helix").mkdir()
    (tmp_path / ".helix" / "calibration.json").write_text(json.dumps({
        "schema_version": 1, "created_at": "2026-12-04T00:00:00Z", "baseline_operator": "baseline/op.py",
        "bench_file": "bench_op.py", "bench_mode": "torch-profiler", "l2": "flushed", "backend": "cuda",
        "rounds": 3, "cases": {}}))
    flushed = margins_for(tmp_path, _records("torch-profiler", "flushed"))
    warm = margins_for(tmp_path, _records("torch-profiler", "warm"))
    assert flushed.source == "calibrated"
    assert warm.source == "default" and "measured with the L2 flushed, these files with it warm" in (warm.note or "")


def test_a_flush_buffer_shrunk_by_the_operator_stops_the_run() -> None:
    """A cheat that resizes the flush buffer (found through gc) would leave its side warm."""
    from helix_engine.eval.timing import l2_flusher

    cpu = get_backend("cpu")
    cpu.l2_flush_bytes = 4096  # this instance only: a small buffer for the test
    flush = l2_flusher(cpu)
    flush()
    tensors = [c.cell_contents for c in flush.__closure__ or () if type(c.cell_contents).__name__ == "Tensor"]
    assert len(tensors) == 1
    tensors[0].resize_(1)
    with pytest.raises(RuntimeError, match="the L2 flush buffer was changed"):
        flush()


def test_the_operator_process_sizes_its_flush_before_the_operator_is_imported() -> None:
    import inspect

    from helix_engine.gate.opproc import OperatorProcess

    start = inspect.getsource(OperatorProcess.start)
    hello = inspect.getsource(OperatorProcess.hello)
    assert "l2_flusher(self.backend)" in start and "import_file" in hello and "l2_flusher" not in hello


def test_a_flush_that_ran_no_device_work_is_found() -> None:
    """The flush made a no-op in the operator's process (its side would run warm): the profiled
    repetitions whose flush range holds no kernel are counted, and the case fails on them."""
    from helix_engine.eval.timing import flushes_without_work

    ranges = [(0.0, 60.0, False), (61.0, 75.0, True), (76.0, 140.0, False), (141.0, 160.0, True)]
    kernels = [("fill", 1.0, 55.0), ("my_kernel", 62.0, 10.0), ("my_kernel", 142.0, 12.0)]  # 2nd flush: nothing
    kept, _ = without_flush(kernels, ranges)
    assert flushes_without_work(kernels, kept, ranges) == 1
    kernels.insert(2, ("fill", 77.0, 55.0))
    kept, _ = without_flush(kernels, ranges)
    assert flushes_without_work(kernels, kept, ranges) == 0


def test_the_profiler_ranges_carry_a_name_the_operator_cannot_know() -> None:
    from helix_engine.eval import timing

    assert timing.TIMED_RANGE.startswith("helix::timed-") and len(timing.TIMED_RANGE) > len("helix::timed-") + 8
    assert timing.FLUSH_RANGE.endswith(timing.TIMED_RANGE.rsplit("-", 1)[1])
    # a kernel the operator launched inside a range it named like the flush's is still timed
    ranges = [(0.0, 60.0, False), (61.0, 90.0, True)]
    kept, _ = without_flush([("fill", 1.0, 55.0), ("hidden", 70.0, 15.0)], ranges + [(65.0, 89.0, False)])
    assert [k[0] for k in kept] == ["hidden"]


def test_a_calibration_from_before_the_cache_state_says_to_calibrate_again(tmp_path: Path) -> None:
    from helix_engine.perf.calibration import margins_for

    (tmp_path / ".helix").mkdir()
    (tmp_path / ".helix" / "calibration.json").write_text(json.dumps({
        "schema_version": 1, "created_at": "2026-12-01T00:00:00Z", "baseline_operator": "baseline/op.py",
        "bench_file": "bench_op.py", "bench_mode": "torch-profiler", "backend": "cuda", "rounds": 3, "cases": {}}))
    assert margins_for(tmp_path, _records("torch-profiler", None)).source == "calibrated"  # it ran warm, as these
    now = margins_for(tmp_path, _records("torch-profiler", "flushed"))
    assert now.source == "default" and "run `helix calibrate` again" in (now.note or "")
