"""``helix fleet [FOLDER]``: many operator workspaces at a glance (one agent per operator).

Each row comes from the same code as ``helix status`` and the cockpit: the workspace snapshot
(``find_workspaces`` / ``load_workspace``), whose promotion rule names the best round and its
geomean with its interval, and the jobs registry for what is running (on this machine or on a
cluster node). Nothing is computed here but the time of the last change (file times).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.perf.report import estimate_to_json
from helix_engine.perf.results import SpeedupEstimate
from helix_engine.sanitize import clean
from helix_engine.workspace import layout

#: Entries looked at per folder when finding the last change (a huge profile folder is skipped).
_MAX_ENTRIES = 2000


@dataclass
class FleetJob:
    id: str
    kind: str
    round: str | None
    status: str
    node: str | None = None  # the cluster node, for a cluster job
    device: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class FleetRow:
    """One workspace of the fleet."""

    name: str
    path: Path
    operator: str | None
    phase: str | None
    current_round: int | None
    rounds: int
    best_round: str  # the promotion rule's best: "round-N" or "baseline"
    best_geomean: SpeedupEstimate | None  # that round's geomean speedup vs the baseline, with its interval
    #: what ``best_geomean`` was measured on: "paired run" (both in one job) or "perf files" (separate jobs)
    best_geomean_measured: str | None = None
    running: list[FleetJob] = field(default_factory=list)
    last_change: float | None = None
    problems: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "operator": self.operator, "phase": self.phase,
                "current_round": self.current_round, "rounds": self.rounds, "best_round": self.best_round,
                "best_geomean": estimate_to_json(self.best_geomean),
                "best_geomean_measured": self.best_geomean_measured,
                "running_jobs": [j.to_json() for j in self.running], "last_change": self.last_change,
                "problems": self.problems}


def best_text(row: FleetRow) -> str:
    """The row's best geomean as the fleet table and the cockpit's picker show it: ``geomean_text``,
    then `` paired`` when the paired run measured it."""
    return geomean_text(row.best_geomean) + (" paired" if row.best_geomean_measured == "paired run" else "")


def geomean_text(estimate: SpeedupEstimate | None) -> str:
    """``1.23x [1.20x, 1.26x]``: the point, then the interval of the same statistic."""
    if estimate is None:
        return "—"
    shown = f"{estimate.point:.2f}x"
    if estimate.interval is not None:
        shown += f" [{estimate.interval.low:.2f}x, {estimate.interval.high:.2f}x]"
    return shown


def phase_text(row: FleetRow) -> str:
    if row.phase == "round_active" and row.current_round is not None:
        return f"round {row.current_round} active"
    return (row.phase or "no state yet").replace("_", " ")


def jobs_text(row: FleetRow) -> str:
    if not row.running:
        return "—"
    return ", ".join(f"{j.kind}{' on ' + j.node if j.node else ''}" for j in row.running)


def load_row(path: Path) -> FleetRow:
    """One workspace's row (never raises on workspace content)."""
    from helix_engine.jobs.registry import ACTIVE_STATUSES, list_jobs
    from helix_engine.workspace.snapshot import load_workspace

    snap = load_workspace(path)
    wf = snap.workflow
    promotion = snap.promotion
    running: list[FleetJob] = []
    for info in list_jobs(path):
        if info.status in ACTIVE_STATUSES:
            extra = info.model_extra or {}
            node = extra.get("node_ip") or extra.get("node")
            running.append(FleetJob(info.id, info.kind, info.round, info.status,
                                    str(node) if node else None, info.device))
    return FleetRow(
        name=snap.name, path=snap.root, operator=snap.operator_file.name if snap.operator_file else None,
        phase=wf.phase if wf else None, current_round=wf.current_round if wf else None, rounds=len(snap.rounds),
        best_round=promotion.best_label if promotion else "baseline",
        best_geomean=promotion.best_geomean() if promotion else None,
        best_geomean_measured=(None if promotion is None or promotion.best_geomean() is None
                               else "paired run" if promotion.best_geomean_paired() else "perf files"),
        running=running,
        last_change=last_change(path), problems=len(snap.problems))


def fleet(folder: Path) -> list[FleetRow]:
    """Every workspace in ``folder`` (or ``folder`` itself), most recently changed first."""
    from helix_engine.workspace.snapshot import find_workspaces

    rows = [load_row(p) for p in find_workspaces(Path(folder))]
    rows.sort(key=lambda r: (-(r.last_change or 0.0), r.name))
    return rows


def _entries(folder: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= _MAX_ENTRIES:
                    return
                yield entry
    except OSError:
        return


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def last_change(ws: Path) -> float | None:
    """The newest modification time among the workspace's contract files: the top folder,
    baseline/ and each opt-round-N/, .helix/ and each job folder (one level deep each).

    ``.helix/cache/`` is derived data that reading a workspace writes: it is no change, and
    neither is ``.helix/`` itself (its files are looked at one by one)."""
    newest = 0.0
    folders = [Path(ws), Path(ws) / layout.HELIX_DIR, Path(ws) / layout.HELIX_DIR / layout.JOBS_DIR]
    for entry in _entries(Path(ws)):
        if entry.name != layout.HELIX_DIR:
            newest = max(newest, _mtime(entry))
        if entry.is_dir(follow_symlinks=False) and (
                entry.name == layout.BASELINE_DIR or layout.round_number(entry.name) is not None):
            folders.append(Path(entry.path))
    for entry in _entries(Path(ws) / layout.HELIX_DIR / layout.JOBS_DIR):
        if entry.is_dir(follow_symlinks=False):
            folders.append(Path(entry.path))
    for folder in folders[1:]:
        for entry in _entries(folder):
            if folder == folders[1] and entry.name == layout.CACHE_DIR:
                continue
            newest = max(newest, _mtime(entry))
    return newest or None


def fleet_text(rows: list[FleetRow], now: float) -> str:
    """The table ``helix fleet`` prints (workspace text escaped)."""
    if not rows:
        return "no operator workspaces here"
    header = ("workspace", "phase", "best", "geomean vs baseline", "running jobs", "changed")
    table = [header] + [(clean(r.name), phase_text(r), r.best_round, best_text(r),
                         clean(jobs_text(r)), age_text(r.last_change, now)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def age_text(when: float | None, now: float) -> str:
    if when is None:
        return "—"
    seconds = max(0.0, now - when)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"
