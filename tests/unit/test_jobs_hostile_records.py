"""Crafted job records (issue 11, findings 1 and 2): prune deletes and cancel signals
nothing that helix cannot prove is its own, whatever job.json says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.jobs import procs
from helix_engine.jobs.registry import list_jobs, load_job, prune_jobs, scan_jobs
from helix_engine.jobs.runner import cancel_job


def _raw_job(ws: Path, folder_name: str, **fields: object) -> Path:
    """A job.json written as an attacker would: any id, any pids, no validation."""
    folder = ws / ".helix" / "jobs" / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    data = {"id": folder_name, "kind": "bench", "created_at": 1.0, "status": "passed", **fields}
    (folder / "job.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder outside the workspace that must survive every prune."""
    outside = tmp_path / "victim"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "precious.txt").write_text("keep me")
    return outside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process group that belongs to no job: crafted records name it."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_prune_ignores_an_absolute_id_read_from_job_json(ws: Path, victim: Path) -> None:
    _raw_job(ws, "20260101-000000-bench-0001", id=str(victim))
    for i in range(3):
        _raw_job(ws, f"20260101-00000{i}-bench-aaa{i}", created_at=10.0 + i)
    prune_jobs(ws, keep=0)
    assert (victim / "sub" / "precious.txt").read_text() == "keep me"


def test_prune_ignores_a_relative_escape_in_the_id(ws: Path, victim: Path) -> None:
    _raw_job(ws, "20260101-000000-bench-0002", id="../../../victim")
    removed = prune_jobs(ws, keep=0)
    assert victim.is_dir() and (victim / "sub" / "precious.txt").exists()
    assert "../../../victim" not in removed


def test_a_record_whose_id_is_not_its_folder_is_a_problem_not_a_job(ws: Path, victim: Path) -> None:
    _raw_job(ws, "20260101-000000-bench-0003", id="../../../victim")
    _raw_job(ws, "20260101-000000-bench-0004")
    jobs, problems = scan_jobs(ws)
    assert [info.id for _folder, info in jobs] == ["20260101-000000-bench-0004"]
    assert len(problems) == 1
    assert "20260101-000000-bench-0003" in problems[0].file
    assert "not its folder" in problems[0].message
    with pytest.raises(HelixError, match="damaged"):
        load_job(ws, "20260101-000000-bench-0003")


def test_prune_never_follows_a_symlinked_job_folder(ws: Path, victim: Path) -> None:
    (ws / ".helix" / "jobs").mkdir(parents=True)
    (victim / "job.json").write_text(json.dumps(
        {"id": "20260101-000000-bench-0005", "kind": "bench", "created_at": 1.0, "status": "passed"}))
    (ws / ".helix" / "jobs" / "20260101-000000-bench-0005").symlink_to(victim, target_is_directory=True)
    assert list_jobs(ws) == []
    _jobs, problems = scan_jobs(ws)
    assert any("symbolic link" in p.message for p in problems)
    assert prune_jobs(ws, keep=0) == []
    assert (victim / "sub" / "precious.txt").exists()


def test_prune_refuses_a_jobs_folder_linked_outside_the_workspace(ws: Path, victim: Path) -> None:
    (victim / "20260101-000000-bench-0006").mkdir()
    (victim / "20260101-000000-bench-0006" / "job.json").write_text(json.dumps(
        {"id": "20260101-000000-bench-0006", "kind": "bench", "created_at": 1.0, "status": "passed"}))
    (ws / ".helix").mkdir()
    (ws / ".helix" / "jobs").symlink_to(victim, target_is_directory=True)
    assert prune_jobs(ws, keep=0) == []
    assert (victim / "20260101-000000-bench-0006" / "job.json").exists()
    _jobs, problems = scan_jobs(ws)
    assert problems and "not a real folder" in problems[0].message


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.2)
    return proc.poll() is None


def test_cancel_of_a_lost_job_signals_nothing(ws: Path, bystander: subprocess.Popen[bytes]) -> None:
    # The red team's record: a running job whose pids are dead, naming someone else's group.
    dead = subprocess.Popen(["true"])
    dead.wait()
    _raw_job(ws, "20260101-000000-bench-0007", status="running", pid=dead.pid,
             supervisor_pid=dead.pid, pgid=bystander.pid)
    assert load_job(ws, "20260101-000000-bench-0007").status == "lost"
    assert cancel_job(ws, "20260101-000000-bench-0007", grace_s=0.1).status == "lost"
    assert _alive(bystander)


def test_cancel_without_start_ticks_signals_nothing(ws: Path, bystander: subprocess.Popen[bytes]) -> None:
    # pid and pgid name a live group, but no start time proves it is the job's
    _raw_job(ws, "20260101-000000-bench-0008", status="running", pid=bystander.pid,
             supervisor_pid=None, pgid=bystander.pid)
    job = cancel_job(ws, "20260101-000000-bench-0008", grace_s=0.1)
    assert job.status == "cancelled"
    assert _alive(bystander)


def test_cancel_with_the_wrong_start_ticks_signals_nothing(ws: Path, bystander: subprocess.Popen[bytes]) -> None:
    ticks = procs.start_ticks(bystander.pid)
    assert ticks is not None
    _raw_job(ws, "20260101-000000-bench-0009", status="running", pid=bystander.pid,
             pid_start_ticks=ticks - 1, pgid=bystander.pid)
    cancel_job(ws, "20260101-000000-bench-0009", grace_s=0.1)
    assert _alive(bystander)


def test_cancel_of_a_pgid_that_is_not_the_pids_group_signals_nothing(
        ws: Path, bystander: subprocess.Popen[bytes]) -> None:
    # The job's child is really alive (a process of ours) but the record names another group.
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _raw_job(ws, "20260101-000000-bench-0010", status="running", pid=child.pid,
                 pid_start_ticks=procs.start_ticks(child.pid), pgid=bystander.pid)
        cancel_job(ws, "20260101-000000-bench-0010", grace_s=0.1)
        assert _alive(bystander)
    finally:
        child.kill()
        child.wait()


def test_cancel_signals_a_group_it_can_prove(ws: Path) -> None:
    # The control: a record with the launch facts right is cancelled for real.
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _raw_job(ws, "20260101-000000-bench-0011", status="running", pid=child.pid,
                 pid_start_ticks=procs.start_ticks(child.pid), pgid=child.pid)
        job = cancel_job(ws, "20260101-000000-bench-0011", grace_s=0.5)
        assert job.status == "cancelled"
        assert child.wait(timeout=5) is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_jobs_list_warns_about_the_records_it_ignores(ws: Path, victim: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.cli import main

    _raw_job(ws, "20260101-000000-bench-0012", id="../../../victim\x1b[2J")
    assert main(["jobs", "list", "--workspace", str(ws)]) == 0
    out = capsys.readouterr()
    assert "20260101-000000-bench-0012" in out.err and "not its folder" in out.err
    assert "\x1b" not in out.err + out.out
