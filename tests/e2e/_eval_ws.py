"""Helpers for the eval end-to-end tests: build tiny operator workspaces from the kernel
fixtures and check that no job child is left running."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.conftest import FIXTURES

KERNELS = FIXTURES / "kernels"


def make_ws(root: Path, variant: str = "softmax", *, standalone: bool = True) -> Path:
    """A workspace with ``<op>.py`` (from ops/<variant>.py) and its harnesses."""
    op = "add" if variant == "add" else "softmax"
    ws = root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    shutil.copy(KERNELS / "ops" / f"{variant}.py", ws / f"{op}.py")
    for harness in (KERNELS / "harness").glob(f"*_{op}.py"):
        if harness.name.startswith("test_") and not standalone:
            continue
        shutil.copy(harness, ws / harness.name)
    return ws


def add_operator(ws: Path, variant: str, dest: str) -> Path:
    path = ws / dest
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(KERNELS / "ops" / f"{variant}.py", path)
    return path


def pid_gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # a zombie counts as gone (nobody runs it)
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(") ")[-1].startswith("Z")
    except OSError:
        return True


def assert_jobs_settled(ws: Path) -> list:
    """Every job of ``ws`` has a final status and no live process."""
    from helix_engine.jobs.registry import list_jobs

    jobs = list_jobs(ws)
    for job in jobs:
        assert job.status in ("passed", "failed", "timeout", "cancelled"), (job.id, job.status)
        assert job.ended_at is not None
        assert pid_gone(job.pid), f"job {job.id} left pid {job.pid} running"
    return jobs
