"""Workspace change events: watchfiles → typed, coalesced events.

The cockpit (and anything else that wants to follow a workspace live) turns raw file-system
changes into a few typed events so it can reload only what changed: one round, one perf file,
one job. Bursts (an agent rewriting ten files, a profiler dumping hundreds of CSVs) arrive as
one batch, deduplicated, so a slow SSH link is never flooded. No textual import here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from helix_engine.workspace import layout

#: Top-level files of the contract (besides the operator and its harnesses).
_TOP_FILES = {layout.OPT_NOTE, layout.LEARNED_LESSONS}
_IGNORED_PARTS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache"}


@dataclass(frozen=True)
class RoundChanged:
    """Something inside ``opt-round-N/`` changed (state, operator, summary, profile …)."""

    n: int


@dataclass(frozen=True)
class PerfChanged:
    """A ``*_perf.txt`` file in the baseline or a round was written."""

    path: Path


@dataclass(frozen=True)
class AttemptsAppended:
    """``opt-round-N/attempts.md`` grew (or was rewritten)."""

    n: int


@dataclass(frozen=True)
class BaselineChanged:
    """Something inside ``baseline/`` changed."""


@dataclass(frozen=True)
class JobEvent:
    """A file of ``.helix/jobs/<id>/`` changed (job.json, events.jsonl, output.log)."""

    id: str


@dataclass(frozen=True)
class WorkspaceChanged:
    """A top-level contract file changed: workflow state, opt-note.md, operator, harnesses."""

    path: Path


WatchEvent = RoundChanged | PerfChanged | AttemptsAppended | BaselineChanged | JobEvent | WorkspaceChanged


@dataclass
class WatchBatch:
    """One coalesced burst: the distinct events and the contract files they came from."""

    events: list[WatchEvent] = field(default_factory=list)
    paths: set[Path] = field(default_factory=set)

    @property
    def job_ids(self) -> set[str]:
        return {e.id for e in self.events if isinstance(e, JobEvent)}

    @property
    def rounds(self) -> set[int]:
        return {e.n for e in self.events if isinstance(e, (RoundChanged, AttemptsAppended))}

    @property
    def snapshot_paths(self) -> set[Path]:
        """Changed paths the workspace snapshot cares about (everything but job files)."""
        return {p for p in self.paths if not _is_job_path(p)}


def _is_job_path(path: Path) -> bool:
    parts = path.parts
    return any(parts[i] == layout.HELIX_DIR and parts[i + 1] == layout.JOBS_DIR for i in range(len(parts) - 1))


def _is_temp(name: str) -> bool:
    """Atomic-write temp files (``.name.xxxx.tmp``), editor swap files and backups."""
    return (name.startswith(".") and name.endswith(".tmp")) or name.endswith(("~", ".swp", ".swx", ".pyc"))


def classify(root: Path, path: Path) -> list[WatchEvent]:
    """The events one changed path means (empty for files outside the contract)."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        return []
    parts = rel.parts
    if not parts or _is_temp(parts[-1]) or _IGNORED_PARTS.intersection(parts):
        return []
    head = parts[0]
    if head == layout.HELIX_DIR:
        if len(parts) >= 3 and parts[1] == layout.JOBS_DIR:
            if len(parts) == 3 and parts[2].endswith(".log"):
                return []  # spawn-<ts>.log of a detached launch, not a job
            return [JobEvent(parts[2])]
        if len(parts) == 2 and parts[1] == layout.WORKFLOW_STATE:
            return [WorkspaceChanged(Path(path))]
        return []  # the lock, device leases, round timings: not shown
    if head == layout.BASELINE_DIR:
        events: list[WatchEvent] = [BaselineChanged()]
        if parts[-1].endswith("_perf.txt") or parts[-1] == "perf.txt":
            events.append(PerfChanged(Path(path)))
        return events
    n = layout.round_number(head)
    if n is not None:
        if len(parts) == 1:
            return [RoundChanged(n)]  # the folder itself appeared or vanished
        events = [RoundChanged(n)]
        if len(parts) == 2 and parts[1] == layout.ATTEMPTS:
            events.append(AttemptsAppended(n))
        elif parts[-1].endswith("_perf.txt") or parts[-1] == "perf.txt":
            events.append(PerfChanged(Path(path)))
        return events
    if head.startswith(layout.ROUND_PREFIX):
        return [WorkspaceChanged(Path(path))]  # a look-alike folder: a problem to show
    if len(parts) == 1 and (head in _TOP_FILES or head.endswith(".py")):
        return [WorkspaceChanged(Path(path))]
    return []


def coalesce(root: Path, paths: Iterable[Path]) -> WatchBatch:
    """Classify and deduplicate a burst of raw changes, keeping first-seen order."""
    batch = WatchBatch()
    seen: set[WatchEvent] = set()
    for path in paths:
        events = classify(root, Path(path))
        if not events:
            continue
        batch.paths.add(Path(path))
        for event in events:
            if event not in seen:
                seen.add(event)
                batch.events.append(event)
    return batch


def watch_filter(root: Path):  # noqa: ANN201 - watchfiles' callable type is private
    """A watchfiles filter that keeps only contract files and job files."""
    root = Path(root)

    def keep(_change: object, path: str) -> bool:
        return bool(classify(root, Path(path)))

    return keep


async def watch_workspace(
    root: Path,
    *,
    step_ms: int = 30,
    debounce_ms: int = 200,
    stop_event: asyncio.Event | None = None,
    force_polling: bool | None = None,
) -> AsyncIterator[WatchBatch]:
    """Yield one WatchBatch per burst of changes under ``root``.

    ``step_ms`` is how long the burst must be quiet before it is yielded and ``debounce_ms`` the
    longest a burst is held, so a change shows up within ~debounce_ms even under a constant
    stream of writes. Ends when ``stop_event`` is set or the workspace folder goes away.
    """
    import watchfiles  # lazy: `helix status` never pays for it

    root = Path(root).resolve()
    async for changes in watchfiles.awatch(
        root,
        watch_filter=watch_filter(root),
        step=step_ms,
        debounce=debounce_ms,
        stop_event=stop_event,
        force_polling=force_polling,
        ignore_permission_denied=True,
    ):
        batch = coalesce(root, (Path(p) for _change, p in changes))
        if batch.events:
            yield batch
        if not root.is_dir():
            return
