"""The cockpit's view of jobs: job.json plus the events and output tails, read incrementally.

A cache of files, nothing more: any cockpit (or a second one over a new SSH connection) builds
the same view from ``.helix/jobs/<id>/``. Blocking reads run in worker threads; this module has
no textual import. Output logs are capped so a chatty job never floods the link.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    done: int = 0
    total: int = 0
    cases: dict[str, CaseRow] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    log: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOG_LINES))
    events_offset: int = 0
    output_offset: int = -1  # -1: not read yet
    problem: str | None = None

    @property
    def status(self) -> str:
        return getattr(self.info, "status", None) or "unknown"

    @property
    def kind(self) -> str:
        return getattr(self.info, "kind", None) or "?"

    @property
    def round(self) -> str:
        return getattr(self.info, "round", None) or "baseline"

    def fold(self, event: dict[str, Any]) -> None:
        """Apply one events.jsonl line (unknown events are ignored, bad fields skipped)."""
        kind = event.get("event")
        case_id = str(event.get("case_id", ""))
        if kind == "case_started" and case_id:
            row = self.cases.setdefault(case_id, CaseRow(case_id))
            row.status = "running"
            row.index = _int(event.get("index"))
            total = _int(event.get("total"))
            if total:
                self.total = max(self.total, total)
        elif kind == "case_finished" and case_id:
            row = self.cases.setdefault(case_id, CaseRow(case_id))
            record = event.get("record")
            row.record = record if isinstance(record, dict) else {}
            row.evaluation, row.evaluated_against = None, None
            row.status = "error" if row.record.get("error_message") else "done"
            self.done = max(self.done, sum(1 for r in self.cases.values() if r.status != "running"))
        elif kind == "progress":
            self.done = _int(event.get("done")) or self.done
            self.total = _int(event.get("total")) or self.total
        elif kind == "log":
            self.log.append(str(event.get("msg", event.get("message", ""))))
        elif kind == "result":
            payload = event.get("payload", event)
            self.result = payload if isinstance(payload, dict) else {"value": payload}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class JobTracker:
    """Follows every job of one workspace; ``refresh`` and ``poll`` run in worker threads."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace)
        self.jobs: dict[str, JobLive] = {}
        self.order: list[str] = []
        self.error: str | None = None

    @property
    def jobs_dir(self) -> Path:
        return self.workspace / layout.HELIX_DIR / layout.JOBS_DIR

    def refresh(self) -> set[str]:
        """Re-list jobs (status, lost detection) and poll the ones that may have changed."""
        try:
            from helix_engine.jobs import registry
        except ImportError as exc:
            self.error = f"the jobs engine is not available ({exc})"
            return set()
        try:
            infos = registry.list_jobs(self.workspace)[:MAX_JOBS]
        except Exception as exc:  # noqa: BLE001 - a bad job folder must not stop the cockpit
            self.error = f"cannot list jobs: {exc}"
            return set()
        self.error = None
        changed: set[str] = set()
        self.order = [info.id for info in infos]
        for info in infos:
            live = self.jobs.get(info.id)
            if live is None:
                live = self.jobs[info.id] = JobLive(info.id)
            if live.info != info:
                changed.add(info.id)
            live.info = info
            if self._poll_files(live):
                changed.add(info.id)
        for gone in set(self.jobs) - set(self.order):
            del self.jobs[gone]
            changed.add(gone)
        return changed

    def poll(self, job_ids: set[str]) -> set[str]:
        """Read what is new for the named jobs (from the watcher); unknown ids trigger a re-list."""
        if any(job_id not in self.jobs for job_id in job_ids):
            return self.refresh() | job_ids
        changed: set[str] = set()
        for job_id in job_ids:
            live = self.jobs[job_id]
            try:
                from helix_engine.jobs import registry

                live.info = registry.load_job(self.workspace, job_id)
                live.problem = None
            except Exception as exc:  # noqa: BLE001 - half-written or vanished job.json
                live.problem = f"job.json unreadable: {exc}"
            self._poll_files(live)
            changed.add(job_id)
        return changed

    def evaluate_cases(self, baseline: list[PerfRecord]) -> None:
        """Each finished case against the baseline, through the engine's evaluation core (once
        per case and baseline), so the jobs pane shows the number compare-perf will print."""
        from helix_engine.perf.evaluation import live_case

        for live in self.jobs.values():
            for row in live.cases.values():
                if row.status == "running" or row.evaluated_against is baseline:
                    continue
                row.evaluation = live_case(baseline, row.record) if baseline else None
                row.evaluated_against = baseline

    def _poll_files(self, live: JobLive) -> bool:
        job_dir = self.jobs_dir / live.id
        grew = False
        try:
            from helix_engine.jobs import registry

            events, offset = registry.read_events(job_dir, live.events_offset)
        except Exception as exc:  # noqa: BLE001
            live.problem = f"events.jsonl unreadable: {exc}"
            events, offset = [], live.events_offset
        if offset < live.events_offset:  # the file was replaced: start over
            live.cases.clear()
            live.done = live.total = 0
        for event in events:
            if isinstance(event, dict):
                live.fold(event)
        grew |= bool(events)
        live.events_offset = offset
        grew |= self._tail_output(live, job_dir / "output.log")
        return grew

    def _tail_output(self, live: JobLive, path: Path) -> bool:
        try:
            size = path.stat().st_size
        except OSError:
            return False
        start = live.output_offset
        if start < 0 or size < start:
            start = max(0, size - FIRST_TAIL_BYTES)
        if size == start:
            live.output_offset = size
            return False
        try:  # the safe reader: output.log may be a FIFO or a link out of the workspace
            with open_workspace_file(path, self.workspace) as handle:
                handle.seek(start)
                data = handle.read(min(size - start, 4 * FIRST_TAIL_BYTES))
        except OSError:
            return False
        cut = data.rfind(b"\n")
        if cut < 0 and size - start < FIRST_TAIL_BYTES:
            return False  # wait for the line to end
        chunk = data[: cut + 1] if cut >= 0 else data
        live.output_offset = start + len(chunk)
        text = chunk.decode("utf-8", errors="replace")
        for line in text.splitlines():
            live.log.append(line[:500])
        return True
