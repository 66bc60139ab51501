"""Jobs registry, event stream and device list: pure file-level behaviour (no child jobs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.jobs.devices import device_holder, lease_device, parse_devices
from helix_engine.jobs.events import EventWriter
from helix_engine.jobs.registry import (
    JobInfo,
    job_dir,
    list_jobs,
    load_job,
    new_job_id,
    read_events,
    write_job,
)


def _job(ws: Path, job_id: str, **fields: object) -> Path:
    folder = ws / ".helix" / "jobs" / job_id
    folder.mkdir(parents=True)
    data = {"id": job_id, "kind": "bench", "created_at": time.time(), "status": "passed", **fields}
    write_job(folder, JobInfo.model_validate(data))
    return folder


# ----------------------------------------------------------------------------- events
def test_event_writer_from_env_writes_one_json_line_per_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_JOB_DIR", str(tmp_path))
    writer = EventWriter.from_env()
    assert writer is not None
    writer.case_started("c0", 0, 2)
    writer.case_finished("c0", {"median": float("nan"), "ok": True})
    writer.progress(1, 2)
    writer.log("x" * 10000)
    writer.result({"passed": True})
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    objs = [json.loads(line) for line in lines]
    assert [o["event"] for o in objs] == ["case_started", "case_finished", "progress", "log", "result"]
    assert all(isinstance(o["ts"], float) for o in objs)
    assert objs[1]["record"] == {"median": None, "ok": True}  # NaN is not JSON: becomes null
    assert len(objs[3]["msg"]) < 8100 and "characters cut" in objs[3]["msg"]
    assert objs[0] == {"event": "case_started", "ts": objs[0]["ts"], "case_id": "c0", "index": 0, "total": 2}


def test_event_writer_from_env_is_none_outside_a_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_JOB_DIR", raising=False)
    assert EventWriter.from_env() is None
    monkeypatch.setenv("HELIX_JOB_DIR", str(tmp_path / "missing"))
    assert EventWriter.from_env() is None


def test_read_events_leaves_a_partial_last_line_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first = json.dumps({"event": "progress", "ts": 1.0, "done": 1, "total": 3}) + "\n"
    half = '{"event": "progress", "ts": 2.0, "do'
    path.write_text(first + half)
    events, offset = read_events(tmp_path, 0)
    assert [e["done"] for e in events] == [1]
    assert offset == len(first.encode())
    again, same = read_events(tmp_path, offset)
    assert again == [] and same == offset
    with open(path, "a") as handle:
        handle.write('ne": 2, "total": 3}\n')
    events, offset2 = read_events(tmp_path, offset)
    assert [e["done"] for e in events] == [2]
    assert offset2 == path.stat().st_size


def test_read_events_skips_malformed_lines(tmp_path: Path) -> None:
    lines = [
        "not json",
        "[1, 2]",
        '{"no_event": 1}',
        '{"event": 5}',
        '{"event": "log", "ts": 1, "msg": "kept"}',
        "\xff\xfe garbage",
        "",
        '{"event": "result", "ts": 2, "payload": {}}',
    ]
    (tmp_path / "events.jsonl").write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
    events, offset = read_events(tmp_path, 0)
    assert [e["event"] for e in events] == ["log", "result"]
    assert offset == (tmp_path / "events.jsonl").stat().st_size


def test_read_events_missing_file_and_offset_past_end(tmp_path: Path) -> None:
    assert read_events(tmp_path, 0) == ([], 0)
    (tmp_path / "events.jsonl").write_text('{"event": "log", "ts": 1, "msg": "a"}\n')
    events, _ = read_events(tmp_path, 10_000)  # file was replaced by a shorter one: restart
    assert [e["msg"] for e in events] == ["a"]


def test_read_events_invalid_utf8_line_is_skipped(tmp_path: Path) -> None:
    good = b'{"event": "log", "ts": 1, "msg": "ok"}\n'
    (tmp_path / "events.jsonl").write_bytes(b'{"event": "log", "msg": "\xff"}\n' + good)
    events, _ = read_events(tmp_path, 0)
    assert [e["msg"] for e in events] == ["ok"]


# ----------------------------------------------------------------------------- registry
def test_list_jobs_newest_first_and_skips_damaged_records(tmp_path: Path) -> None:
    _job(tmp_path, "a-old", created_at=100.0)
    _job(tmp_path, "b-new", created_at=200.0, status="failed", message="exited with code 1")
    bad = tmp_path / ".helix" / "jobs" / "c-bad"
    bad.mkdir()
    (bad / "job.json").write_text("{ not json")
    wrong = tmp_path / ".helix" / "jobs" / "d-wrong"
    wrong.mkdir()
    (wrong / "job.json").write_text(json.dumps({"id": "d-wrong", "status": "exploded"}))
    (tmp_path / ".helix" / "jobs" / "spawn-1.log").write_text("log, not a job")
    jobs = list_jobs(tmp_path)
    assert [j.id for j in jobs] == ["b-new", "a-old"]
    assert jobs[0].status == "failed"


def test_list_jobs_on_a_workspace_without_jobs(tmp_path: Path) -> None:
    assert list_jobs(tmp_path) == []


def test_running_job_with_dead_pids_is_lost(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _job(tmp_path, "r1", status="running", pid=dead.pid, supervisor_pid=dead.pid)
    _job(tmp_path, "r2", status="running", pid=None, supervisor_pid=os.getpid())
    jobs = {j.id: j for j in list_jobs(tmp_path)}
    assert jobs["r1"].status == "lost"
    assert "run it again" in (jobs["r1"].message or "")
    assert jobs["r2"].status == "running"
    assert load_job(tmp_path, "r1").status == "lost"
    # the file itself is not rewritten by a reader
    raw = json.loads((tmp_path / ".helix/jobs/r1/job.json").read_text())
    assert raw["status"] == "running"


def test_reused_pid_with_other_start_time_is_not_alive(tmp_path: Path) -> None:
    _job(tmp_path, "r3", status="running", pid=None, supervisor_pid=os.getpid(), supervisor_start_ticks=1)
    assert load_job(tmp_path, "r3").status == "lost"


def test_load_job_by_prefix_and_errors(tmp_path: Path) -> None:
    _job(tmp_path, "20260101-000000-bench-aaaa")
    _job(tmp_path, "20260101-000000-bench-bbbb")
    assert load_job(tmp_path, "20260101-000000-bench-a").id == "20260101-000000-bench-aaaa"
    with pytest.raises(HelixError, match="matches 2 jobs"):
        load_job(tmp_path, "20260101")
    with pytest.raises(HelixError, match="helix jobs list"):
        load_job(tmp_path, "nope")
    with pytest.raises(HelixError, match="not a job id"):
        load_job(tmp_path, "../etc")
    bad = tmp_path / ".helix/jobs/broken"
    bad.mkdir()
    (bad / "job.json").write_text("[]")
    with pytest.raises(HelixError, match="damaged"):
        load_job(tmp_path, "broken")


def test_job_info_keeps_unknown_keys(tmp_path: Path) -> None:
    folder = _job(tmp_path, "x1", pgid=1234, future_field={"a": 1})
    info = load_job(tmp_path, "x1")
    write_job(folder, info)
    raw = json.loads((folder / "job.json").read_text())
    assert raw["pgid"] == 1234 and raw["future_field"] == {"a": 1}


def test_new_job_ids_are_unique_and_safe() -> None:
    ids = {new_job_id("bench / weird kind!") for _ in range(50)}
    assert len(ids) == 50
    for job_id in ids:
        assert "/" not in job_id and " " not in job_id
        job_dir(Path("/tmp"), job_id)  # accepted as an id


# ----------------------------------------------------------------------------- devices
@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", ["0"]), ("0,2,4-7", ["0", "2", "4", "5", "6", "7"]), (" 3 , 1 ", ["3", "1"]), ("5-5", ["5"])],
)
def test_parse_devices_valid(text: str, expected: list[str]) -> None:
    assert parse_devices(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("7-4", "descends"),
        ("0,1,1", "twice"),
        ("0-3,2", "twice"),
        ("a", "not a device"),
        ("-1", "not a device"),
        ("0,,1", "not a device"),
        ("1-2-3", "not a device"),
        ("0-99999", "out of range"),
    ],
)
def test_parse_devices_invalid(text: str, message: str) -> None:
    with pytest.raises(HelixError, match=message) as info:
        parse_devices(text)
    assert "0,2,4-7" in str(info.value)


def test_lease_device_takes_a_free_device_and_reports_the_holder(tmp_path: Path) -> None:
    with lease_device(tmp_path, "cpu", ["0", "1"], job_id="j1") as first:
        assert first == "0"
        assert device_holder(tmp_path, "cpu", "0")["job_id"] == "j1"  # type: ignore[index]
        with lease_device(tmp_path, "cpu", ["0", "1"], job_id="j2") as second:
            assert second == "1"
        assert device_holder(tmp_path, "cpu", "1") is None
    assert device_holder(tmp_path, "cpu", "0") is None
    assert (tmp_path / ".helix/devices/cpu-0.lock").exists()


def test_lease_device_waits_and_can_be_stopped(tmp_path: Path) -> None:
    waits: list[bool] = []
    with lease_device(tmp_path, "cuda", ["3"]):
        with lease_device(tmp_path, "cuda", ["3"], on_wait=lambda: waits.append(True),
                          should_stop=lambda: bool(waits)) as got:
            assert got is None
    assert waits == [True]


def test_lease_is_held_across_processes(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path\n"
        "from helix_engine.jobs.devices import lease_device\n"
        f"with lease_device(Path({str(tmp_path)!r}), 'npu', ['0']):\n"
        "    print('held', flush=True); time.sleep(30)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": root})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert device_holder(tmp_path, "npu", "0") is not None
    finally:
        proc.kill()
        proc.wait()
    # the flock dies with its holder, even on SIGKILL
    assert device_holder(tmp_path, "npu", "0") is None


def test_job_of_another_host_is_never_called_lost(tmp_path: Path) -> None:
    _job(tmp_path, "far", status="running", pid=999999, supervisor_pid=999999, host="some-other-host")
    assert load_job(tmp_path, "far").status == "running"


def test_limits_from_arguments_env_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.jobs.settings import resolve_rss_limit, resolve_timeout

    monkeypatch.delenv("HELIX_EVAL_TIMEOUT_SECONDS", raising=False)
    monkeypatch.delenv("HELIX_JOB_MAX_RSS_MB", raising=False)
    assert resolve_timeout(None) == (300.0, "the HELIX_EVAL_TIMEOUT_SECONDS default, 300 s")
    assert resolve_timeout(7)[0] == 7.0 and "HELIX_EVAL_TIMEOUT_SECONDS" in resolve_timeout(7)[1]
    monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", "12.5")
    assert resolve_timeout(None) == (12.5, "HELIX_EVAL_TIMEOUT_SECONDS=12.5")
    for bad in ("0", "-3", "nan", "inf", "ten"):
        monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", bad)
        with pytest.raises(HelixError, match="HELIX_EVAL_TIMEOUT_SECONDS"):
            resolve_timeout(None)
    with pytest.raises(HelixError):
        resolve_timeout(float("nan"))
    limit, source = resolve_rss_limit(None)
    assert limit is not None and limit > 0 and "75%" in source
    monkeypatch.setenv("HELIX_JOB_MAX_RSS_MB", "200")
    assert resolve_rss_limit(None) == (200 * 1024 * 1024, "HELIX_JOB_MAX_RSS_MB=200")
    monkeypatch.setenv("HELIX_JOB_MAX_RSS_MB", "0")
    assert resolve_rss_limit(None)[0] is None
    monkeypatch.setenv("HELIX_JOB_MAX_RSS_MB", "lots")
    with pytest.raises(HelixError, match="HELIX_JOB_MAX_RSS_MB"):
        resolve_rss_limit(None)


def test_group_memory_of_this_process_group() -> None:
    from helix_engine.jobs import procs

    pgid = os.getpgrp()
    rss = procs.group_memory_bytes(pgid)
    assert rss > 0
    assert procs.group_memory_bytes(pgid, limit=1) > 0  # PSS path
    assert procs.group_memory_bytes(2**22 + 12345) == 0  # no such group


def test_proven_job_group_refuses_a_reused_or_unproven_group() -> None:
    from helix_engine.jobs import procs

    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        ticks = procs.start_ticks(child.pid)
        assert ticks is not None
        assert procs.proven_job_group(child.pid, ticks, child.pid) == child.pid
        assert procs.proven_job_group(child.pid, ticks + 1, child.pid) is None  # pid reused
        assert procs.proven_job_group(child.pid, None, child.pid) is None  # no start time: no proof
        assert procs.proven_job_group(child.pid, ticks, child.pid + 1) is None  # not its group
        assert procs.proven_job_group(child.pid, True, child.pid) is None
        me = os.getpid()
        assert procs.proven_job_group(me, procs.start_ticks(me), os.getpgrp()) is None  # never us
    finally:
        child.kill()
        child.wait()
    assert procs.signal_group(os.getpgrp(), 0) is False  # never signals our own group


def test_prune_keeps_the_newest_and_every_active_job(tmp_path: Path) -> None:
    from helix_engine.jobs.registry import prune_jobs

    for i in range(5):
        _job(tmp_path, f"j{i}", created_at=100.0 + i)
    _job(tmp_path, "old-running", created_at=1.0, status="running", supervisor_pid=os.getpid())
    for i in range(4):
        (tmp_path / ".helix/jobs" / f"spawn-2026010{i}.log").write_text("x")
    removed = prune_jobs(tmp_path, keep=2)
    assert sorted(removed) == ["j0", "j1", "j2"]
    assert [j.id for j in list_jobs(tmp_path)] == ["j4", "j3", "old-running"]
    assert sorted(p.name for p in (tmp_path / ".helix/jobs").glob("spawn-*")) == [
        "spawn-20260102.log", "spawn-20260103.log"]
    assert prune_jobs(tmp_path / "nowhere", keep=0) == []


def test_damaged_pid_fields_never_crash_or_signal(tmp_path: Path) -> None:
    from helix_engine.jobs.runner import cancel_job

    _job(tmp_path, "huge", status="running", pid=2**40, supervisor_pid=2**40, pgid=2**40,
         pid_start_ticks="soon", supervisor_start_ticks=[1])
    job = load_job(tmp_path, "huge")
    assert job.status == "lost"
    assert cancel_job(tmp_path, "huge", grace_s=0.1).status == "lost"
