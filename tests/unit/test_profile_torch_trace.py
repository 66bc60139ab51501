"""Reports from torch.profiler Chrome traces (cuda device time, cpu interpreter time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.profile.report import build_report
from helix_engine.profile.torch_trace import CPU_LABEL, find_trace


def _write(folder: Path, events: list[dict], manifest: dict | None = None, name: str = "trace.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    if manifest is not None:
        (folder / "profile-manifest.json").write_text(json.dumps(manifest))
    return folder


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def test_cuda_kernel_hotspots_in_device_time(tmp_path: Path) -> None:
    events = [_x("softmax_rows", "kernel", 10 * i, 8.0 + i % 2, tid=7) for i in range(6)]
    events += [_x("add_kernel", "kernel", 100 + i, 2.0, tid=7) for i in range(3)]
    events += [_x("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 300, 4.0, tid=8)]
    events += [_x("aten::empty", "cpu_op", 0, 50.0), _x("ProfilerStep#1", "user_annotation", 0, 500.0),
               _x("ProfilerStep#1", "gpu_user_annotation", 0, 500.0, tid=7),
               _x("ProfilerStep#2", "user_annotation", 500, 500.0)]
    report = build_report(_write(tmp_path / "p", events))
    assert report.backend == "cuda" and report.time_label == "device time"
    assert [h.op_type for h in report.hotspots] == ["softmax_rows", "add_kernel", "Memcpy HtoD (Pageable -> Device)"]
    hot = report.hotspots[0]
    assert hot.count == 6 and hot.total_us == pytest.approx(51.0) and hot.avg_us == pytest.approx(8.5)
    assert (hot.min_us, hot.max_us) == (8.0, 9.0)
    assert report.total_time_us == pytest.approx(51 + 6 + 4)
    assert hot.ratio_pct == pytest.approx(51 / 61 * 100, abs=1e-3)
    assert report.op_summary["per_step_avg_us"] == pytest.approx(25.5)  # 2 distinct steps
    assert report.bound == "unknown (no hardware counters)"
    assert report.data_movement_hotspots[0]["op_type"].startswith("Memcpy")
    # movement is 6.6% of device time: no transfer symptom; 5 launches per step of kernels of 2-9 µs
    assert [x["symptom"] for x in report.symptoms] == ["many-launches", "short-kernels"]


def test_cpu_trace_uses_kernel_annotations_labelled_as_interpreter_time(tmp_path: Path) -> None:
    events = [_x("triton:add_kernel", "user_annotation", 0, 3000.0), _x("triton:add_kernel", "user_annotation", 5000, 3500.0),
              _x("triton:scale_kernel", "user_annotation", 9000, 1000.0), _x("aten::add", "cpu_op", 1, 10.0)]
    report = build_report(_write(tmp_path / "p", events, {"backend": "cpu", "trace_file": "trace.json"}))
    assert report.backend == "cpu" and report.time_label == CPU_LABEL
    assert [(h.op_type, h.count) for h in report.hotspots] == [("add_kernel", 2), ("scale_kernel", 1)]
    assert any("interpreter" in n for n in report.notes)
    assert "CPU time of the Triton interpreter" in report.to_markdown()


def test_cpu_ops_without_annotations_count_only_top_level(tmp_path: Path) -> None:
    events = [_x("aten::matmul", "cpu_op", 0, 100.0), _x("aten::mm", "cpu_op", 10, 80.0),  # nested in matmul
              _x("aten::add", "cpu_op", 200, 20.0), _x("aten::add", "cpu_op", 300, 30.0, tid=2)]
    report = build_report(_write(tmp_path / "p", events, {"backend": "cpu"}))
    assert [(h.op_type, h.total_us) for h in report.hotspots] == [("aten::matmul", 100.0), ("aten::add", 50.0)]


def test_newest_trace_is_found_and_target_selection(tmp_path: Path) -> None:
    _write(tmp_path / "p" / "PROF_a_1", [_x("old_kernel", "kernel", 0, 1.0)], name="x.pt.trace.json")
    newer = _write(tmp_path / "p" / "PROF_a_2", [_x("new_kernel", "kernel", 0, 1.0), _x("k2", "kernel", 2, 0.5)])
    import os

    os.utime(tmp_path / "p" / "PROF_a_1" / "x.pt.trace.json", (1, 1))
    assert find_trace(tmp_path / "p") == newer / "trace.json"
    report = build_report(tmp_path / "p", target_op="k2")
    assert report.target_operator == "k2" and report.selection == "explicit"
    with pytest.raises(HelixError, match="new_kernel, k2"):
        build_report(tmp_path / "p", target_op="nope")


def test_garbled_and_truncated_traces(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "trace.json").write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "na')
    with pytest.raises(HelixError, match="truncated or garbled"):
        build_report(folder)
    (folder / "trace.json").write_text('{"traceEvents": 5}')
    with pytest.raises(HelixError, match="no traceEvents list"):
        build_report(folder)
    (folder / "trace.json").write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": "bad"}, 3]}')
    report = build_report(folder)  # malformed events are skipped, not fatal
    assert report.hotspots == [] and report.target_operator is None
