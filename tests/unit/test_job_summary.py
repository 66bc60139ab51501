"""jobs/summary.py: the times, progress and sentences `helix jobs` and the cockpit's Jobs pane
share (issue 13, finding 8), and profiler noise kept out of a failed job's sentence."""

from __future__ import annotations

import sys
from pathlib import Path

from helix_engine.jobs import summary
from helix_engine.jobs.registry import JobInfo


def _info(**fields: object) -> JobInfo:
    return JobInfo.model_validate({"id": "j", "kind": "bench", "created_at": 50.0, **fields})


def test_run_time_ends_at_the_end_now_or_the_last_write() -> None:
    assert summary.run_seconds(_info(status="queued")) is None
    assert summary.time_text(_info(status="queued")) == "-"
    assert summary.run_seconds(_info(status="passed", started_at=100.0, ended_at=106.0), at=1e9) == 6.0
    assert summary.run_seconds(_info(status="running", started_at=100.0), at=130.0) == 30.0
    lost = _info(status="lost", started_at=100.0)
    assert summary.run_seconds(lost, at=10_000.0, last_seen=106.0) == 6.0  # not 9900 s and counting
    assert summary.run_seconds(lost, at=10_000.0) == 0.0  # nothing known about its end


def test_duration_text_fits_six_columns() -> None:
    assert [summary.duration_text(s) for s in (0.04, 6.0, 59.94, 125.0, 3599.0, 3720.0, 360_000.0)] == \
        ["0.0s", "6.0s", "59.9s", "2m05s", "59m59s", "1h02m", "100h00m"]


def test_started_text_is_the_local_clock(monkeypatch) -> None:  # noqa: ANN001
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert summary.started_text(_info(started_at=3600 * 5 + 61.0)) == "05:01:01"
        assert summary.started_text(_info()) == "00:00:50"  # queued: when it was queued
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_progress_folds_progress_events_and_finished_cases() -> None:
    progress = summary.Progress()
    for event in ({"event": "case_started", "case_id": "a", "total": 4}, {"event": "case_finished", "case_id": "a"},
                  {"event": "case_started", "case_id": "b", "total": 4}, {"event": "case_finished", "case_id": "b"},
                  {"event": "case_finished", "case_id": "b"}, {"event": "log", "msg": "x"}):
        progress.fold(event)
    assert (progress.done, progress.total, progress.text()) == (2, 4, "2/4")
    progress.fold({"event": "progress", "done": 7, "total": 7})
    assert progress.text() == "7/7"
    assert summary.Progress().text() == ""


def test_a_case_that_never_finished_says_why_once_the_job_ended() -> None:
    assert summary.unfinished_case("running") == "running"
    assert summary.unfinished_case("cancelled") == "cancelled"
    assert summary.unfinished_case("timeout") == "timed out"
    assert summary.unfinished_case("passed") == "not finished"


def test_cancel_sentences() -> None:
    done = _info(status="passed")
    assert summary.cancel_text(done, done) == "job j already finished (passed); nothing to cancel"
    running, after = _info(status="running"), _info(status="cancelled", message="cancelled on request")
    assert summary.cancel_text(running, after) == "job j cancelled: cancelled on request"


def test_a_failed_job_quotes_its_own_last_line_not_the_profiler_markers(tmp_path: Path) -> None:
    """A profile job's output ends with kineto's `USDT:… SyncActivityProfilerHandler` markers: they
    stay in output.log, and the failure sentence quotes the child's own last line."""
    from helix_engine.jobs.runner import run_job

    code = ("import sys; print('ValueError: shapes do not match', flush=True); "
            "print('USDT:2026-12-01 03:40:17 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start', flush=True); "
            "print('STAGE:2026-12-01 03:40:17 1:1 ActivityProfilerController.cpp:314] Completed Stage', flush=True); "
            "sys.exit(1)")
    info = run_job(tmp_path, "profile", [sys.executable, "-c", code], cwd=tmp_path, timeout_s=60, backend="cpu")
    assert info.status == "failed"
    assert info.message.endswith("last output: ValueError: shapes do not match"), info.message
    log = (tmp_path / ".helix" / "jobs" / info.id / "output.log").read_text()
    assert "USDT:" in log and "STAGE:" in log
