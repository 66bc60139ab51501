"""A job as people read it: when it started, how long it ran, how far it got, what a case that
never finished means, what a cancel did. One implementation for `helix jobs` and the cockpit's
Jobs pane, so both show the same columns with the same numbers.

Times: *started* is the local clock time the child started (``HH:MM:SS``; a queued job shows
when it was queued); *time* is how long it ran: to its end for a finished job, to now for a
running one, and to its last sign of life (the newest write in its folder) for a lost one,
whose end nobody recorded (counting on to now would make a dead job look ever longer).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ACTIVE = frozenset({"queued", "running"})
#: Files of a job folder whose writes show the job was alive (see ``last_activity``).
ACTIVITY_FILES = ("job.json", "events.jsonl", "output.log")


def round_text(name: str | None) -> str:
    """``opt-round-12`` → ``r12``, ``baseline`` → ``base``: a job's round in a narrow column."""
    from helix_engine.workspace.layout import round_number

    if not name:
        return ""
    n = round_number(name)
    return f"r{n}" if n is not None else ("base" if name == "baseline" else name[:6])


def now() -> float:
    """The one clock the job views read (tests freeze it to make screens deterministic)."""
    return time.time()


def started_text(info: Any) -> str:
    """``HH:MM:SS`` (local time) the job started, else when it was queued; ``-`` without either."""
    ts = getattr(info, "started_at", None) or getattr(info, "created_at", None)
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else "-"


def last_activity(folder: Path) -> float | None:
    """The newest modification time among the job folder's files (no file is read or followed)."""
    newest: float | None = None
    for name in ACTIVITY_FILES:
        try:
            mtime = os.lstat(Path(folder) / name).st_mtime
        except OSError:
            continue
        newest = mtime if newest is None else max(newest, mtime)
    return newest


def run_seconds(info: Any, at: float | None = None, last_seen: float | None = None) -> float | None:
    """How long the job ran (None: it never started). ``at`` is now (default: ``now()``);
    ``last_seen`` is ``last_activity`` of its folder, the end of a lost job."""
    start = getattr(info, "started_at", None)
    if not start:
        return None
    status = getattr(info, "status", None)
    end = getattr(info, "ended_at", None)
    if end is None:
        if status in ACTIVE:
            end = now() if at is None else at
        else:  # lost (or final without an end time): its last sign of life, else nothing known
            end = last_seen if last_seen is not None else start
    return max(0.0, end - start)


def duration_text(seconds: float | None) -> str:
    """``6.0s``, ``2m05s``, ``1h02m`` (at most 6 columns); ``-`` when there is no run time."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def time_text(info: Any, at: float | None = None, last_seen: float | None = None) -> str:
    return duration_text(run_seconds(info, at, last_seen))


@dataclass
class Progress:
    """done/total folded from events.jsonl, one event at a time (the cockpit folds as lines
    arrive, `helix jobs` folds the whole file): a ``progress`` event sets both, a case counts
    as done once it finished (with a record or an error), a ``case_started`` names the total."""

    done: int = 0
    total: int = 0
    finished: set[str] = field(default_factory=set)

    def fold(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        case_id = str(event.get("case_id", ""))
        if kind == "case_started":
            total = _int(event.get("total"))
            if total:
                self.total = max(self.total, total)
        elif kind == "case_finished" and case_id:
            self.finished.add(case_id)
            self.done = max(self.done, len(self.finished))
        elif kind == "progress":
            self.done = _int(event.get("done")) or self.done
            self.total = _int(event.get("total")) or self.total

    def text(self) -> str:
        """``3/4``; ``3`` when the total is unknown; empty before anything was done or known."""
        if self.total:
            return f"{self.done}/{self.total}"
        return str(self.done) if self.done else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def unfinished_case(job_status: str) -> str:
    """What a case that started and never finished is, once its job ended: it was not measured."""
    return {"cancelled": "cancelled", "timeout": "timed out", "lost": "lost"}.get(job_status, "not finished") \
        if job_status not in ACTIVE else "running"


def cancel_text(before: Any, after: Any) -> str:
    """The sentence a cancel prints: what happened, or why nothing did."""
    job_id, was = getattr(before, "id", "?"), getattr(before, "status", "?")
    if was not in ACTIVE:
        return f"job {job_id} already finished ({was}); nothing to cancel"
    message = getattr(after, "message", None)
    return f"job {job_id} {getattr(after, 'status', '?')}" + (f": {message}" if message else "")


#: Lines a profiler prints by itself (kineto's ``USDT:``/``STAGE:`` markers and its warnings):
#: they stay in output.log (the job log), never in the sentence that says how a job ended.
_TOOL_NOISE = re.compile(r"^(USDT:|STAGE:)|ActivityProfi|kineto|\bCUPTI")


def is_tool_noise(line: str) -> bool:
    return bool(_TOOL_NOISE.search(line.strip()))
