"""The cockpit's view of jobs: job.json plus the events and output tails, read incrementally.

A cache of files, nothing more: any cockpit (or a second one over a new SSH connection) builds
the same view from ``.helix/jobs/<id>/``. Blocking reads run in worker threads; this module has
no textual import. Output logs are capped so a chatty job never floods the link.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.jobs import summary
from helix_engine.jobs.summary import Progress
from helix_engine.perf.results import CaseEvaluation
from helix_engine.workspace import layout
from helix_engine.workspace.models import PerfRecord
from helix_engine.workspace.reading import open_workspace_file

#: Lines of output.log kept per job, and bytes read when a job is first seen.
MAX_LOG_LINES = 500
FIRST_TAIL_BYTES = 64 * 1024
#: Jobs kept in the pane (newest first).
MAX_JOBS = 200


@dataclass
class CaseRow:
    case_id: str
    status: str = "running"  # running | done | error
    index: int | None = None
    record: dict[str, Any] = field(default_factory=dict)
    #: the case against the baseline, as the evaluation core computes it (compare-perf's number)
    evaluation: CaseEvaluation | None = None
    evaluated_against: list[PerfRecord] | None = None  # the baseline records it was evaluated with

    @property
    def median_us(self) -> float | None:
        stats = self.record.get("stats") or {}
        for value in (stats.get("median"), self.record.get("kernel_avg_time_us"), self.record.get("total_op_avg_time_us")):
            if isinstance(value, (int, float)):
                return float(value)
        return None


@dataclass
class JobLive:
    """One job as the pane shows it."""

    id: str
    info: Any = None  # helix_engine.jobs.registry.JobInfo
    progress: Progress = field(default_factory=Progress)  # done/total, folded as `helix jobs` folds them
    cases: dict[str, CaseRow] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    log: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOG_LINES))
    events_offset: int = 0
    output_offset: int = -1  # -1: not read yet
    problem: str | None = None
    last_seen: float | None = None  # a lost job: the last write in its folder (its run time ends there)

    @property
    def done(self) -> int:
        return self.progress.done

    @property
    def total(self) -> int:
        return self.progress.total

    @property
    def status(self) -> str:
        return getattr(self.info, "status", None) or "unknown"

    @property
    def kind(self) -> str:
        return getattr(self.info, "kind", None) or "?"

    @property
    def round(self) -> str:
        return getattr(self.info, "round", None) or "baseline"

    def case_status(self, row: CaseRow) -> str:
        """A case's state; one that started and never finished says why once the job ended
        (``cancelled``, ``timed out``…), never ``running`` after a cancel."""
        return summary.unfinished_case(self.status) if row.status == "running" else row.status

    def fold(self, event: dict[str, Any]) -> None:
        """Apply one events.jsonl line (unknown events are ignored, bad fields skipped)."""
        self.progress.fold(event)
        kind = event.get("event")
        case_id = str(event.get("case_id", ""))
        if kind == "case_started" and case_id:
            row = self.cases.setdefault(case_id, CaseRow(case_id))
            row.status = "running"
            row.index = _int(event.get("index"))
        elif kind == "case_finished" and case_id:
            row = self.cases.setdefault(case_id, CaseRow(case_id))
            record = event.get("record")
            row.record = record if isinstance(record, dict) else {}
            row.evaluation, row.evaluated_against = None, None
            row.status = "error" if row.record.get("error_message") else "done"
        elif kind == "log":
            self.log.append(str(event.get("msg", event.get("message", ""))))
        elif kind == "result":
            payload = event.get("payload", event)
            self.result = payload if isinstance(payload, dict) else {"value": payload}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class FileRead:
    """What one read of a job folder found (made off the lock, folded in under it)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    events_offset: int = 0
    lines: list[str] = field(default_factory=list)
    output_offset: int = -1
    problem: str | None = None
    last_seen: float | None = None


class JobTracker:
    """Follows every job of one workspace; ``refresh`` and ``poll`` run in worker threads.

    Two locks, so the UI thread never waits on a disk read: ``_reading`` serializes the readers
    (the poll timer and the watcher), which read files holding only it; ``lock`` guards the view
    (``jobs``, ``order``, ``error``) and is held only to fold what was read into memory, and by
    the UI while it renders from it."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace)
        self.jobs: dict[str, JobLive] = {}
        self.order: list[str] = []
        self.error: str | None = None
        self.lock = threading.Lock()
        self._reading = threading.Lock()

    @property
    def jobs_dir(self) -> Path:
        return self.workspace / layout.HELIX_DIR / layout.JOBS_DIR

    def refresh(self) -> set[str]:
        """Re-list jobs (status, lost detection) and poll the ones that may have changed."""
        with self._reading:
            try:
                from helix_engine.jobs import registry
            except ImportError as exc:
                with self.lock:
                    self.error = f"the jobs engine is not available ({exc})"
                return set()
            try:
                infos = registry.list_jobs(self.workspace)[:MAX_JOBS]
            except Exception as exc:  # noqa: BLE001 - a bad job folder must not stop the cockpit
                with self.lock:
                    self.error = f"cannot list jobs: {exc}"
                return set()
            reads = {info.id: self._read(info.id, info) for info in infos}  # disk, off the lock
            changed: set[str] = set()
            with self.lock:
                self.error = None
                self.order = [info.id for info in infos]
                for info in infos:
                    live = self.jobs.get(info.id)
                    if live is None:
                        live = self.jobs[info.id] = JobLive(info.id)
                    if live.info != info:
                        changed.add(info.id)
                    live.info = info
                    if self._apply(live, reads[info.id]):
                        changed.add(info.id)
                for gone in set(self.jobs) - set(self.order):
                    del self.jobs[gone]
                    changed.add(gone)
            return changed

    def poll(self, job_ids: set[str]) -> set[str]:
        """Read what is new for the named jobs (from the watcher); unknown ids trigger a re-list."""
        if any(job_id not in self.jobs for job_id in job_ids):
            return self.refresh() | job_ids
        with self._reading:
            from helix_engine.jobs import registry

            infos: dict[str, Any] = {}
            problems: dict[str, str | None] = {}
            for job_id in job_ids:
                try:
                    infos[job_id], problems[job_id] = registry.load_job(self.workspace, job_id), None
                except Exception as exc:  # noqa: BLE001 - half-written or vanished job.json
                    problems[job_id] = f"job.json unreadable: {exc}"
            reads = {job_id: self._read(job_id, infos.get(job_id)) for job_id in job_ids}
            with self.lock:
                for job_id in job_ids:
                    live = self.jobs.get(job_id)
                    if live is None:
                        continue
                    if job_id in infos:
                        live.info = infos[job_id]
                    live.problem = problems[job_id]
                    self._apply(live, reads[job_id])
            return set(job_ids)

    def evaluate_cases(self, baseline: list[PerfRecord]) -> set[str]:
        """Each finished case against the baseline, through the engine's evaluation core (once
        per case and baseline), so the jobs pane shows the number compare-perf will print.
        Computed off the lock (a bootstrap takes a while); returns the jobs whose rows changed."""
        from helix_engine.perf.evaluation import live_case

        with self.lock:
            todo = [(live.id, row, row.record) for live in self.jobs.values() for row in live.cases.values()
                    if row.status != "running" and row.evaluated_against is not baseline
                    and live.kind != "calibrate"]  # A/A: a noise floor, not a speedup
        results = [(job_id, row, record, live_case(baseline, record) if baseline else None)
                   for job_id, row, record in todo]
        changed: set[str] = set()
        with self.lock:
            for job_id, row, record, found in results:
                if row.record is record:  # not replaced by a newer case_finished meanwhile
                    row.evaluation, row.evaluated_against = found, baseline
                    changed.add(job_id)
        return changed

    def _poll_files(self, live: JobLive) -> bool:
        """Read and fold one job's new events and output (tests use it without job.json)."""
        with self._reading:
            read = self._read(live.id, live.info)
            with self.lock:
                return self._apply(live, read)

    def _read(self, job_id: str, info: Any) -> FileRead:
        """New events and output lines of one job, from the offsets the view holds (only readers
        change those, and they hold ``_reading``)."""
        job_dir = self.jobs_dir / job_id
        live = self.jobs.get(job_id)
        events_offset = live.events_offset if live is not None else 0
        output_offset = live.output_offset if live is not None else -1
        read = FileRead(events_offset=events_offset, output_offset=output_offset)
        try:
            from helix_engine.jobs import registry

            read.events, read.events_offset = registry.read_events(job_dir, events_offset)
        except Exception as exc:  # noqa: BLE001
            read.problem = f"events.jsonl unreadable: {exc}"
        read.lines, read.output_offset = self._tail_output(job_dir / "output.log", output_offset)
        if getattr(info, "status", None) == "lost":
            read.last_seen = summary.last_activity(job_dir)
        return read

    @staticmethod
    def _apply(live: JobLive, read: FileRead) -> bool:
        """Fold one read into the view (in memory only; the caller holds ``lock``)."""
        if read.problem:
            live.problem = read.problem
        if read.events_offset < live.events_offset:  # the file was replaced: start over
            live.cases.clear()
            live.progress = Progress()
        for event in read.events:
            if isinstance(event, dict):
                live.fold(event)
        live.events_offset = read.events_offset
        for line in read.lines:
            live.log.append(line)
        live.output_offset = read.output_offset
        live.last_seen = read.last_seen
        return bool(read.events) or bool(read.lines)

    def _tail_output(self, path: Path, start: int) -> tuple[list[str], int]:
        """Complete new lines of output.log after ``start`` (the last 64 KB on a first read), and
        the offset to read from next."""
        try:
            size = path.stat().st_size
        except OSError:
            return [], start
        if start < 0 or size < start:
            start = max(0, size - FIRST_TAIL_BYTES)
        if size == start:
            return [], size
        try:  # the safe reader: output.log may be a FIFO or a link out of the workspace
            with open_workspace_file(path, self.workspace) as handle:
                handle.seek(start)
                data = handle.read(min(size - start, 4 * FIRST_TAIL_BYTES))
        except OSError:
            return [], start
        cut = data.rfind(b"\n")
        if cut < 0 and size - start < FIRST_TAIL_BYTES:
            return [], start  # wait for the line to end
        chunk = data[: cut + 1] if cut >= 0 else data
        text = chunk.decode("utf-8", errors="replace")
        return [line[:500] for line in text.splitlines()], start + len(chunk)
