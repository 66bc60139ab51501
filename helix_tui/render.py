"""Pure text helpers shared by the panes (no textual import, so they are cheap to test).

Workspace text reaches a widget only through :func:`plain` (or ``clean`` inside a ``Text``).

Speedups are written as upstream writes them: ``1.23x`` (two decimals).
"""

from __future__ import annotations

import math

from rich.text import Text

from helix_engine.perf.results import RoundPromotion, SpeedupEstimate
from helix_engine.perf.round_number import RoundNumber
from helix_engine.perf.round_number import round_number as number_of
from helix_engine.sanitize import clean
from helix_engine.workspace.models import Problem, RoundView, WorkspaceSnapshot

ICON_PASSED = "✔"
ICON_FAILED = "✘"
ICON_ACTIVE = "●"
ICON_OPEN = "○"
STAR = "★"
BASELINE = "baseline"


def plain(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """Workspace text for a widget: escaped with the engine's ``clean`` (no escape sequence or
    bidi override reaches the terminal) and wrapped in a ``Text``, so Textual never reads it as
    markup (``[bold]``, ``[@click=app.quit]`` show as typed). The one way panes show file text."""
    return Text(clean(value, multiline=multiline), style=style)


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
    """A time in µs for a table cell: 4 significant digits with a unit that fits
    (``512.3 ns``, ``6.720 µs``, ``25.79 ms``, ``1.234 s``); exact values stay in compare-perf."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0 µs"
    units = ((1e-3, "ns"), (1.0, "µs"), (1e3, "ms"), (1e6, "s"))
    index = max([0] + [i for i, (scale, _) in enumerate(units) if abs(value) >= scale])
    shown, digits = _four_digits(value / units[index][0])
    if abs(shown) >= 1000 and index < len(units) - 1:  # 999.96 µs rounds to 1000 µs: 1.000 ms
        index += 1
        shown, digits = _four_digits(value / units[index][0])
    return f"{shown:.{digits}f} {units[index][1]}"


def _four_digits(x: float) -> tuple[float, int]:
    """``x`` rounded to 4 significant digits, and the decimals that shows them."""
    digits = max(0, 3 - math.floor(math.log10(abs(x))))
    rounded = round(x, digits)
    if digits and rounded and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(x))):
        digits -= 1  # 9.9996 → 10.00, not 10.000
    return rounded, digits


def display_time(display: str, value: float | None) -> str:
    """An upstream perf display text (``25790.949167``, ``total-op=12.5``, ``NA (total-op=9.0)``)
    shortened for a table cell; ``t:`` marks a total-op time standing in for a missing kernel time."""
    if display.startswith("NA"):
        return "t:" + micros(value)
    return micros(value)


def ci(bounds: tuple[float, float] | None) -> str:
    if not bounds:
        return ""
    lo, hi = bounds
    return f"[{lo:.2f}–{hi:.2f}]"


def estimate(value: SpeedupEstimate | None) -> str:
    """A speedup statistic as the engine computed it: its point, then its own interval."""
    if value is None:
        return "—"
    return (speedup(value.point) + " " + ci(value.ci95)).strip()


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


def round_number(snap: WorkspaceSnapshot, n: int) -> RoundNumber | None:
    """Round ``n``'s speedup against the baseline as every screen and file shows it
    (perf/round_number.py: paired when measured so, with the promotion rule's interval)."""
    view = snap.rounds.get(n)
    if view is None:
        return None
    return number_of(view.comparison, promotion_entry(snap, n))


def promotion_entry(snap: WorkspaceSnapshot, n: int) -> RoundPromotion | None:
    return snap.promotion.rounds.get(n) if snap.promotion is not None else None


def round_geomean(snap: WorkspaceSnapshot, n: int) -> float | None:
    found = round_number(snap, n)
    return found.point if found is not None else None


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
    """The geomean of the promotion rule's current best (the round the tree stars)."""
    n = snap.promoted_best_round
    if n is not None and n in snap.rounds:
        return round_geomean(snap, n)
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


def job_progress(done: int, total: int, active: bool) -> str:
    """A job's progress cell: the bar while cases are known, the final count once finished,
    ``—`` for a finished job that had no cases (a probe, a profile, a test without cases)."""
    if total > 0:
        return progress_bar(done, total)
    if done > 0:
        return f"{done} case{'s' if done != 1 else ''}"
    return "…" if active else "—"


def progress_bar(done: int, total: int, width: int = 10) -> str:
    """A text bar for table cells: ``████░░░░░░ 4/10``."""
    if total <= 0:
        return f"{done}/?"
    filled = max(0, min(width, round(width * done / total)))
    return "█" * filled + "░" * (width - filled) + f" {done}/{total}"


def fit_columns(widths: list[int], available: int, drop_order: list[int]) -> list[int]:
    """Indices of the columns to show: all when their widths fit ``available``, else drop the
    columns of ``drop_order`` one by one (first first) until they fit or none is left to drop.
    A table then never cuts what decides (case, speedup and interval, verdict) off screen."""
    keep = list(range(len(widths)))
    for index in drop_order:
        if sum(widths[i] for i in keep) <= available:
            break
        if index in keep:
            keep.remove(index)
    return keep


def fit_segments(segments: list[tuple[str, str, int]], width: int, sep: str = " · ") -> Text:
    """One line from (text, style, priority) segments: every segment when they fit ``width``,
    else the lowest priority ones (highest number) go first, so what matters stays in view."""
    from rich.cells import cell_len

    shown = list(segments)

    def length(items: list[tuple[str, str, int]]) -> int:
        return sum(cell_len(t) for t, _, _ in items) + cell_len(sep) * max(0, len(items) - 1)

    while length(shown) > width and len(shown) > 1:
        worst = max(range(len(shown)), key=lambda i: (shown[i][2], i))
        if shown[worst][2] == 0:
            break  # only what must stay is left: the line is cut at its end
        shown.pop(worst)
    line = Text(no_wrap=True, overflow="ellipsis")
    for i, (text, style, _) in enumerate(shown):
        if i:
            line.append(sep)
        line.append(text, style=style)
    return line
