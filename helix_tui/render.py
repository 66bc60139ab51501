"""Pure text helpers shared by the panes (no textual import, so they are cheap to test).

Speedups are written as upstream writes them: ``1.23x`` (two decimals).
"""

from __future__ import annotations

import math

from helix_engine.workspace.models import Problem, RoundView, WorkspaceSnapshot

ICON_PASSED = "✔"
ICON_FAILED = "✘"
ICON_ACTIVE = "●"
ICON_OPEN = "○"
STAR = "★"
BASELINE = "baseline"


def round_key(n: int) -> str:
    return f"opt-round-{n}"


def key_round(key: str | None) -> int | None:
    """``opt-round-3`` → 3; ``baseline`` (or anything else) → None."""
    if key and key.startswith("opt-round-"):
        tail = key.removeprefix("opt-round-")
        return int(tail) if tail.isdigit() else None
    return None


def speedup(value: float | None) -> str:
    """``1.23x``, or ``—`` when there is no number."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.2f}x"


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:+.1f}%"


def micros(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 1000:
        return f"{value / 1000:.3f} ms"
    return f"{value:.2f} µs"


def ci(bounds: tuple[float, float] | None) -> str:
    if not bounds:
        return ""
    lo, hi = bounds
    return f"[{lo:.2f}–{hi:.2f}]"


def round_status(view: RoundView) -> str:
    """The workflow status of a round, falling back to what round-state.json says."""
    if view.workflow_status:
        return view.workflow_status
    if view.state is not None:
        ok = view.state.correctness_status == "passed" and view.state.benchmark_status == "passed"
        return "passed" if ok and view.completed else "open"
    return "open"


def status_icon(status: str) -> str:
    return {"passed": ICON_PASSED, "failed": ICON_FAILED, "active": "▶"}.get(status, ICON_OPEN)


def round_geomean(view: RoundView) -> float | None:
    return view.comparison.geomean_speedup if view.comparison is not None else None


def error_count(problems: list[Problem]) -> int:
    return sum(1 for p in problems if p.severity == "error")


def problem_badge(problems: list[Problem]) -> str:
    """``!2`` for errors, ``?1`` for warnings only, empty when clean."""
    errors = error_count(problems)
    if errors:
        return f"!{errors}"
    if problems:
        return f"?{len(problems)}"
    return ""


def current_round(snap: WorkspaceSnapshot) -> int | None:
    return snap.workflow.current_round if snap.workflow is not None else None


def phase(snap: WorkspaceSnapshot) -> str:
    return snap.workflow.phase if snap.workflow is not None else "no workflow state"


def best_geomean(snap: WorkspaceSnapshot) -> float | None:
    if snap.best_round is not None and snap.best_round in snap.rounds:
        return round_geomean(snap.rounds[snap.best_round])
    return None


def all_problems(snap: WorkspaceSnapshot) -> list[tuple[str, Problem]]:
    """Every problem in the snapshot, once, with the place it belongs to (workspace, baseline,
    round). The workspace list repeats the baseline's and rounds' problems: those are shown
    under their baseline or round only."""
    placed: list[tuple[str, Problem]] = []
    if snap.baseline is not None:
        placed.extend(("baseline", p) for p in snap.baseline.problems)
    for n in sorted(snap.rounds):
        placed.extend((f"opt-round-{n}", p) for p in snap.rounds[n].problems)
    seen = {p for _, p in placed}
    out: list[tuple[str, Problem]] = []
    for where, p in [("workspace", p) for p in snap.problems] + placed:
        if where == "workspace" and p in seen:
            continue
        out.append((where, p))
    return list(dict.fromkeys(out))


def progress_bar(done: int, total: int, width: int = 10) -> str:
    """A text bar for table cells: ``████░░░░░░ 4/10``."""
    if total <= 0:
        return f"{done}/?"
    filled = max(0, min(width, round(width * done / total)))
    return "█" * filled + "░" * (width - filled) + f" {done}/{total}"
