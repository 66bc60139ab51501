"""What each read-only pane shows, computed from the snapshot and the files (no textual here).

These run in worker threads: each reads files and calls the engine (compare, profile report,
IR stages), then the App posts the result. Every function returns text or data and a sentence
instead of raising, so a malformed or vanished file shows as a message in the pane.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.perf.results import SpeedupEstimate
from helix_engine.workspace.models import (
    Comparison,
    PerfRecord,
    RoundView,
    WorkspaceSnapshot,
)
from helix_engine.workspace.reading import read_text_safe
from helix_tui.render import BASELINE, key_round

METRICS: tuple[str, ...] = ("auto", "kernel", "total-op", "all")
MAX_DIFF_LINES = 5000


@dataclass
class PerfView:
    """What the perf pane shows for one selection: comparisons, or the raw baseline records."""

    key: tuple[Any, ...]
    comparisons: list[Comparison]
    against: str
    note: str = ""
    #: per comparison, the cases' roofline figures (perf/roofline.py); empty when none declares work
    roofline: list[list[Any]] = field(default_factory=list)


def parent_records(snap: WorkspaceSnapshot, view: RoundView) -> tuple[list[PerfRecord], str]:
    """The perf records of a round's parent (the baseline when the parent is unknown)."""
    parent = view.parent or BASELINE
    n = key_round(parent)
    if n is not None and n in snap.rounds:
        return snap.rounds[n].perf, parent
    return (snap.baseline.perf if snap.baseline else []), BASELINE


def perf_view(snap: WorkspaceSnapshot, key: str, metric: str, against: str) -> PerfView:
    """Compare the selected round with its parent or the baseline, with the chosen metric."""
    state_key = (key, metric, against)
    n = key_round(key)
    if n is None or n not in snap.rounds:
        from helix_tui.actions import baseline_missing

        if n is None and baseline_missing(snap):
            return PerfView(state_key, [], BASELINE, note="no baseline yet: press B to prepare it (helix "
                            "prepare-baseline copies the operator into baseline/, tests, benches and submits it)")
        if n is None and not (snap.baseline and snap.baseline.perf):
            return PerfView(state_key, [], BASELINE, note="the baseline has no perf records yet: bench it (b)")
        return PerfView(state_key, [], BASELINE, note="baseline records (select a round to compare)")
    view = snap.rounds[n]
    if not view.perf:
        why = "no perf file yet: run a benchmark (b)" if view.perf_file is None else "the perf file has no readable records"
        return PerfView(state_key, [], against, note=why)
    if against == "parent":
        base, name = parent_records(snap, view)
    else:
        base, name = (snap.baseline.perf if snap.baseline else []), BASELINE
    if not base:
        return PerfView(state_key, [], name, note=f"{name} has no perf records to compare with")
    m = key_round(name)
    base_file = snap.rounds[m].perf_file if m is not None and m in snap.rounds else \
        (snap.baseline.perf_file if snap.baseline else None)
    from helix_engine.perf.filecompare import compare_perf_files

    try:  # the engine's compare-perf: calibrated margins, and a paired result's verdicts (judged)
        comparisons = [c.judged for c in compare_perf_files(base_file or snap.root / name,
                                                            view.perf_file or view.path, base, view.perf, metric)]
    except Exception as exc:  # noqa: BLE001 - a bad record must not stop the pane
        return PerfView(state_key, [], name, note=f"cannot compare: {exc}")
    return PerfView(state_key, comparisons, name, roofline=_roofline(comparisons, base, view.perf, snap.root))


def _roofline(comparisons: list[Comparison], base: list[PerfRecord], perf: list[PerfRecord], root: Path) -> list[list[Any]]:
    """Each comparison's roofline rows (the engine computes them; a failure only hides them)."""
    from helix_engine.perf.roofline import comparison_figures

    try:
        return [comparison_figures(c, base, perf, root) for c in comparisons]
    except Exception:  # noqa: BLE001 - a nice-to-have line must not stop the pane
        return []


#: The speedup column: the ratio of means (upstream's number), then its own 95% interval when the
#: perf files carry samples; the verdict column judges that interval.
SPEEDUP_COLUMN = "speedup (mean)"


def comparison_rows(c: Comparison) -> list[tuple[str, ...]]:
    """Table rows: case, speedup (ratio of means) ± its CI, its verdict, delta, baseline, round,
    all read from the engine's typed result. What decides comes first so it stays on screen at
    80 columns; times are shortened (4 significant digits)."""
    from helix_tui import render

    rows: list[tuple[str, ...]] = []
    for case in c.cases:
        rows.append(
            (
                case.latency_id.removeprefix("latency-"),
                render.estimate(case.mean),
                case.mean.verdict or "",
                render.pct(case.delta_pct),
                render.display_time(case.baseline_display, case.baseline_us),
                render.display_time(case.compare_display, case.compare_us),
            )
        )
    return rows


def _exact(label: str, estimate: SpeedupEstimate | None) -> str:
    if estimate is None:
        return ""
    text = f", speedup ({label})={estimate.point:.4f}x"
    if estimate.interval is not None:
        text += f" [{estimate.interval.low:.4f}x, {estimate.interval.high:.4f}x] {estimate.verdict}"
    return text


def exact_row(c: Comparison, index: int) -> str:
    """One case with the exact numbers (the upstream compare-perf text), then each speedup
    statistic beside its own interval."""
    case = c.cases[index]
    return (f"{case.latency_id}: baseline={case.baseline_display or case.baseline_us}, "
            f"compare={case.compare_display or case.compare_us}, delta={case.delta_pct:.2f}%"
            + _exact("mean", case.mean) + _exact("median", case.median))


def record_roofline(records: list[PerfRecord], root: Path) -> list[str]:
    """Each baseline record's roofline figures (achieved GB/s, TFLOP/s, % of peak), "" without."""
    from helix_engine.perf.roofline import record_text

    try:
        return [record_text(r, root) for r in records]
    except Exception:  # noqa: BLE001
        return ["" for _ in records]


def record_rows(records: list[PerfRecord]) -> list[tuple[str, ...]]:
    """Raw rows for the baseline: case, kernel µs, total-op µs, method, error."""
    from helix_tui import render

    return [
        (
            r.case_label,
            render.micros(r.kernel_avg_time_us),
            render.micros(r.total_op_avg_time_us),
            r.method or r.bench_mode or "",
            (r.error_message or "")[:80],
        )
        for r in records
    ]


def operator_of(snap: WorkspaceSnapshot, key: str) -> Path | None:
    n = key_round(key)
    if n is None:
        return snap.baseline.operator_file if snap.baseline else snap.operator_file
    view = snap.rounds.get(n)
    return view.operator_file if view else None


def diff_text(snap: WorkspaceSnapshot, key: str, against: str = "parent") -> str:
    """Unified diff of the round operator against its parent's (``against="parent"``, the
    default: the round's own change) or the baseline's (capped). The first line says which."""
    n = key_round(key)
    if n is None or n not in snap.rounds:
        return "# select a round to see its operator diff against its parent"
    view = snap.rounds[n]
    parent = view.parent or BASELINE
    reference = parent if against == "parent" else BASELINE
    what = f"its parent {reference}" if against == "parent" else "the baseline"
    other = "baseline" if against == "parent" else "parent"
    header = f"# {view.name} vs {what} (c: vs the {other})"
    if against == "parent" and not view.parent_source:
        header += "; no round-state.json or start-round names its parent yet"
    new_path = view.operator_file
    old_path = operator_of(snap, reference)
    if new_path is None:
        return f"# {view.name} has no operator file yet"
    if old_path is None:
        return f"# {reference} has no operator file to diff against"
    new, p1 = read_text_safe(new_path, snap.root)
    old, p2 = read_text_safe(old_path, snap.root)
    if new is None or old is None:
        return "# " + "; ".join(str(p) for p in (p1, p2) if p)
    lines = list(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile=_rel(snap, old_path),
            tofile=_rel(snap, new_path),
            lineterm="",
        )
    )
    if not lines:
        return f"{header}\n# {view.name} is byte-identical to {reference}" + (
            ": edit it (a rollback is not an optimization)" if against == "parent" else "")
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"# … {len(lines) - MAX_DIFF_LINES} more lines (open in $EDITOR: e)"]
    return "\n".join([header, *lines])


def _rel(snap: WorkspaceSnapshot, path: Path) -> str:
    try:
        return str(Path(path).relative_to(snap.root))
    except ValueError:
        return Path(path).name


def round_dir(snap: WorkspaceSnapshot, key: str) -> Path:
    n = key_round(key)
    return snap.root / (key if n is not None else BASELINE)


def _declared_dir(snap: WorkspaceSnapshot, key: str, field: str, default: str) -> Path | None:
    """The folder a round's state declares in ``field``, else ``default``, when it exists."""
    n = key_round(key)
    folder = round_dir(snap, key)
    declared = None
    if n is not None and n in snap.rounds and snap.rounds[n].state is not None:
        declared = getattr(snap.rounds[n].state, field)
    for cand in ([folder / declared] if declared else []) + [folder / default]:
        if cand.is_dir():
            return cand
    return None


def profile_dir(snap: WorkspaceSnapshot, key: str) -> Path | None:
    """The round's declared profile_dir, else ``profile/`` when it exists."""
    return _declared_dir(snap, key, "profile_dir", "profile")


def hotspots_text(snap: WorkspaceSnapshot, key: str) -> str:
    """The profile report as markdown (top ops, core buckets, bound, suggested patterns)."""
    return hotspots_view(snap, key)[0]


def hotspots_view(snap: WorkspaceSnapshot, key: str, width: int | None = None) -> tuple[str, list[str]]:
    """(report markdown, knowledge cards to read): the cards `helix patterns route` names for
    this profile, in reading order, then the index (always there, so a key opens something).
    ``width``: the pane's columns (the hotspot table keeps the columns that fit whole)."""
    folder = profile_dir(snap, key)
    if folder is None:
        return f"No profile for {key} yet. Press f to profile it (writes {key}/profile/).", ["index"]
    try:
        from helix_engine.knowledge.cards import route_report
        from helix_engine.profile import report
    except ImportError as exc:
        return f"The profile engine is not available ({exc}).", []
    try:
        built = report.build_report(folder)
    except Exception as exc:  # noqa: BLE001 - half-written profiler output
        return f"Cannot read the profile in {_rel(snap, folder)}: {exc}", ["index"]
    built.profile_dir = _rel(snap, folder)  # the pane names it inside the workspace (80 columns)
    return built.to_markdown(width), [*route_report(built)["cards"], "index"]


def ir_dir(snap: WorkspaceSnapshot, key: str) -> Path | None:
    """The round's declared ir_dir, else ``ir/`` when it exists."""
    return _declared_dir(snap, key, "ir_dir", "ir")


def ir_text(snap: WorkspaceSnapshot, key: str, stage: str | None) -> tuple[list[str], str]:
    """(stage names, text): the stage list, and the diff of ``stage`` against the parent's."""
    folder = ir_dir(snap, key)
    if folder is None:
        return [], f"No IR captured for {key} (helix ir capture writes {key}/ir/)."
    try:
        from helix_engine.ir import stages as ir_stages
    except ImportError as exc:
        return [], f"The IR engine is not available ({exc})."
    try:
        found = ir_stages.list_stages(folder)
    except Exception as exc:  # noqa: BLE001
        return [], f"Cannot list IR stages in {_rel(snap, folder)}: {exc}"
    names = [str(getattr(s, "name", s)) for s in found]
    if not names:
        return [], f"{_rel(snap, folder)} holds no IR stages."
    chosen = stage if stage in names else names[0]
    n = key_round(key)
    if n is None:
        return names, f"Stage {chosen} of the baseline (stage diffs are shown for rounds)."
    try:
        result = ir_stages.diff_round(snap.root, n, chosen)
    except Exception as exc:  # noqa: BLE001
        return names, f"Cannot diff stage {chosen} against the parent: {exc}"
    if isinstance(result, str):
        return names, result
    text = getattr(result, "text", None)
    text = text() if callable(text) else text
    return names, str(text if text is not None else result)
