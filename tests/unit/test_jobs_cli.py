"""`helix jobs` and `helix backend` text and JSON, in-process (fast), on real job folders."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.commands.jobs import format_event
from helix_engine.eval import backends as be
from helix_engine.jobs.events import EventWriter
from helix_engine.jobs.registry import JobInfo, write_job


def _job(ws: Path, job_id: str, **fields: object) -> Path:
    folder = ws / ".helix" / "jobs" / job_id
    folder.mkdir(parents=True)
    data = {"id": job_id, "kind": "bench", "created_at": time.time(), "status": "passed", **fields}
    write_job(folder, JobInfo.model_validate(data))
    return folder


def test_list_shows_live_progress_of_a_running_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _job(tmp_path, "20260101-000000-bench-live", status="running", supervisor_pid=os.getpid(),
                  started_at=time.time() - 3, round="opt-round-12", device="3")
    writer = EventWriter.for_job_dir(folder)
    for i in range(3):
        writer.progress(i + 1, 128)
    _job(tmp_path, "20260101-000000-bench-done", created_at=1.0, round="baseline")
    assert main(["jobs", "-w", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "STATUS", "DONE", "DEV", "STARTED", "TIME", "RND"]
    assert out[1].split()[0] == "20260101-000000-bench-live"  # whole, so it can be pasted into `jobs show`
    assert "running" in out[1] and "3/128" in out[1] and out[1].endswith("r12") and " 3 " in out[1]
    assert out[2].endswith("base")
    assert all(len(line) <= 80 for line in out)
    _job(tmp_path, "20260101-000001-probe-bench-0a1b", created_at=2.0, round="opt-round-123")
    assert main(["jobs", "-w", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == ["20260101-000000-bench-live",
                                                       "20260101-000001-probe-bench-0a1b", "20260101-000000-bench-done"]
    assert all(len(line) <= 80 for line in out)
    assert main(["jobs", "list", "--json", "-w", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["jobs"][0]["progress"] == [3, 128] and data["jobs"][1]["progress"] is None


def test_empty_workspace_and_bad_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "-w", str(tmp_path)]) == 0
    assert "no jobs" in capsys.readouterr().out
    assert main(["jobs", "-w", str(tmp_path / "nope")]) == 1
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "event",
    [
        {"event": "case_started", "ts": 1.0, "case_id": "x" * 200, "index": 0, "total": 9},
        {"event": "case_finished", "ts": 1.0, "case_id": "c", "record": {"error_message": "boom\n" * 50}},
        {"event": "case_finished", "ts": 1.0, "case_id": "c", "record": {"stats": {"median": 3.25}}},
        {"event": "case_finished", "ts": 1.0, "case_id": "c", "record": "not a dict"},
        {"event": "progress", "ts": "yesterday", "done": 1, "total": 2},
        {"event": "log", "ts": 1.0, "msg": "line1\nline2\t" + "y" * 300},
        {"event": "result", "ts": 1.0, "payload": {"nested": [1, 2, {"a": None}]}},
        {"event": "mystery", "ts": 1.0, "blob": "z" * 500},
        {"event": "case_started", "ts": 1.0},
    ],
)
def test_format_event_is_one_line_within_80_columns(event: dict[str, object]) -> None:
    line = format_event(event)
    assert "\n" not in line and 0 < len(line) <= 80


def test_format_event_content() -> None:
    started = format_event({"event": "case_started", "ts": 0, "case_id": "m1024", "index": 2, "total": 8})
    assert started.endswith("case m1024 started (3/8)")
    done = format_event({"event": "case_finished", "ts": 0, "case_id": "m1024",
                         "record": {"metrics": {"kernel_avg_time_us": 12.345}}})
    assert done.endswith("case m1024 finished: kernel 12.35 us")
    failed = format_event({"event": "case_finished", "ts": 0, "case_id": "m", "record": {"passed": False}})
    assert failed.endswith("FAILED")


def test_show_of_a_queued_job_and_cancel_of_a_finished_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _job(tmp_path, "q1", status="queued", supervisor_pid=os.getpid(),
         message="waiting for a free device among 0,1")
    assert main(["jobs", "show", "q1", "-w", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "status:    queued" in out and "waiting for a free device" in out
    _job(tmp_path, "p1")
    assert main(["jobs", "cancel", "p1", "--json", "-w", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["was"] == "passed" and data["job"]["status"] == "passed"


def _fake_python(tmp_path: Path, payload: dict[str, object]) -> str:
    path = tmp_path / "fakepython"
    path.write_text("#!/bin/sh\necho '" + json.dumps(payload) + "'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_backend_text_names_what_was_found_and_why_not_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(be, "_CACHE", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("HELIX_BACKEND", raising=False)
    monkeypatch.setenv("HELIX_PYTHON", _fake_python(tmp_path, {
        "python": "3.12.3", "executable": "/opt/py", "torch_version": "2.11.0+cu130", "triton_version": "3.6.0",
        "npu_error": "torch_npu is not installed", "cuda_available": True,
        "cuda_devices": ["NVIDIA H200", "NVIDIA H200"]}))
    assert main(["backend", "--refresh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("backend: cuda (auto); default bench mode torch-profiler")
    assert "torch 2.11.0+cu130, triton 3.6.0, torch_npu -" in out
    assert "cuda: 0: NVIDIA H200, 1: NVIDIA H200" in out
    assert "npu: torch_npu is not installed" in out and "cpu: available, but auto prefers cuda" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    monkeypatch.setenv("HELIX_BACKEND", "npu")
    assert main(["backend", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["picked"] == "cuda" and data["requested"] == "npu" and data["selected"] == "cuda"
    assert data["adapter"]["visible_devices_var"] == "CUDA_VISIBLE_DEVICES"
    assert main(["backend"]) == 0
    assert "warning: HELIX_BACKEND=npu is not usable: torch_npu is not installed" in capsys.readouterr().out


def test_show_prints_the_users_command_and_old_job_json_still_loads(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.jobs.registry import load_job, user_command

    long_argv = ["/usr/bin/python3", "-m", "helix_engine.eval.worker", "/w/.helix/tmp/" + "x" * 80 + "/request.json"]
    cmd = "helix run-bench --operator-file opt-round-12/opt_softmax.py --baseline-operator-file baseline/softmax.py"
    _job(tmp_path, "c1", argv=long_argv, command=cmd)
    assert main(["jobs", "show", "c1", "-w", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    shown = " ".join(line[11:] for line in out.splitlines() if line.startswith(("command:", "           ")))
    assert shown.split() == cmd.split()  # whole, wrapped at 80 columns, not the worker's argv
    assert "helix_engine.eval.worker" not in out and all(len(line) <= 80 for line in out.splitlines())
    old = tmp_path / ".helix" / "jobs" / "old1"
    old.mkdir(parents=True)
    (old / "job.json").write_text(json.dumps({"id": "old1", "kind": "run-bench", "argv": long_argv,
                                              "created_at": 1.0, "status": "passed"}))
    assert load_job(tmp_path, "old1").command is None
    assert main(["jobs", "show", "old1", "-w", str(tmp_path)]) == 0
    assert "worker:    /usr/bin/python3 -m helix_engine.eval.worker" in capsys.readouterr().out
    assert user_command(["/venv/bin/helix", "run-bench", "--operator-file", "a b.py"]) == \
        "helix run-bench --operator-file 'a b.py'"
    assert user_command(["/x/helix_engine/__main__.py", "run-test", "--json"]) == "helix run-test --json"
    assert user_command(["/usr/bin/pytest", "-q"]) is None


@pytest.mark.parametrize(("payload", "expected"), [
    ({}, "result: finished"),
    ({"cases": 4, "case_errors": 0}, "result: 4 case(s) measured"),
    ({"cases": 4, "case_errors": 1}, "result: 4 case(s) measured, 1 with errors"),
    ({"return_code": 0, "accuracy": "passed", "archived_result": "/w/softmax_result.pt"},
     "result: test passed; accuracy passed; archived softmax_result.pt"),
    ({"return_code": 1}, "result: test failed (return code 1)"),
    ({"error": "opt_x.py:3: SyntaxError: invalid syntax"}, "result: error: opt_x.py:3: SyntaxError: invalid syntax"),
])
def test_tail_prints_the_result_event_in_words(payload: dict[str, object], expected: str) -> None:
    line = format_event({"event": "result", "ts": 0, "payload": payload})
    assert line.split(" ", 1)[1] == expected


def test_list_fills_done_for_finished_jobs_and_times_a_lost_job_to_its_last_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13 finding 8: DONE was empty for finished jobs, and a lost job showed TIME 0.0s while
    the cockpit showed it counting; both now read jobs/summary.py (a lost job ran until the last
    write in its folder)."""
    from helix_engine.jobs import summary

    done = _job(tmp_path, "20260101-000000-bench-done", created_at=1.0, started_at=100.0, ended_at=112.5)
    writer = EventWriter.for_job_dir(done)
    for case in ("a", "b", "c"):
        writer.case_started(case, 0, 4)
        writer.case_finished(case, {"kernel_avg_time_us": 1.0})
    lost = _job(tmp_path, "20260101-000001-bench-lost", created_at=2.0, status="running", started_at=200.0,
                pid=2 ** 22 + 7, supervisor_pid=2 ** 22 + 9)  # pids that are not alive: lost
    for name in ("job.json", "events.jsonl", "output.log"):
        (lost / name).touch()
        os.utime(lost / name, (206.0, 206.0))
    assert main(["jobs", "-w", str(tmp_path)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["20260101-000000-bench-done"][1:3] == ["passed", "3/4"]
    assert rows["20260101-000000-bench-done"][5] == "12.5s"
    assert rows["20260101-000001-bench-lost"][1] == "lost" and rows["20260101-000001-bench-lost"][-1] == "6.0s"
    from helix_engine.jobs.registry import load_job

    info = load_job(tmp_path, "20260101-000001-bench-lost")  # the cockpit's number: the same function
    assert summary.time_text(info, last_seen=summary.last_activity(lost)) == "6.0s"


def test_cancel_of_a_finished_job_is_a_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _job(tmp_path, "20260101-000000-bench-over", started_at=1.0, ended_at=2.0)
    assert main(["jobs", "cancel", "20260101-000000-bench-over", "-w", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "job 20260101-000000-bench-over already finished (passed); nothing to cancel"
