"""The job record a supervising process keeps: one implementation for local and cluster jobs.

A supervisor (jobs/runner.py for a child process here, cluster/dispatch.py for a Ray task)
writes ``job.json`` under the job's lock, forwards new events to its caller, ends the record
with a status and a sentence, and answers "should I stop now?" the same way for both.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.jobs.registry import JobInfo, JobStatus, cancel_requested, job_lock, read_events, write_job


class JobRecord:
    """The state of one job in the process that supervises it."""

    def __init__(self, folder: Path, info: JobInfo, on_event: Callable[[dict[str, Any]], None] | None) -> None:
        self.folder, self.info, self.on_event = folder, info, on_event
        self.offset = 0
        self.stop_event = threading.Event()
        self.stop_reason: list[str] = []

    @property
    def extra(self) -> dict[str, Any]:
        return self.info.model_extra if self.info.model_extra is not None else {}

    def write(self) -> None:
        with job_lock(self.folder):
            write_job(self.folder, self.info)

    def pump(self) -> None:
        """Hand the events written since the last pump to ``on_event`` (its errors are not ours)."""
        if self.on_event is None:
            return
        events, self.offset = read_events(self.folder, self.offset)
        for event in events:
            with contextlib.suppress(Exception):
                self.on_event(event)

    def before_finish(self) -> None:
        """Add what only this kind of supervisor knows to the final record."""

    def finish(self, status: JobStatus, message: str | None, exit_code: int | None = None) -> JobInfo:
        self.info.status = status
        self.info.message = message
        self.info.exit_code = exit_code
        self.info.ended_at = time.time()
        self.before_finish()
        self.write()
        self.pump()
        return self.info

    def stop_requested(self) -> str | None:
        """Why to stop now (a process-wide stop or a cancel marker), else None."""
        if self.stop_event.is_set():
            return f"interrupted: {self.stop_reason[-1] if self.stop_reason else 'stop requested'}"
        if cancel_requested(self.folder):
            return "cancelled on request"
        return None
