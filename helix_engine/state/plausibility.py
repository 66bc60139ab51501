"""Plausibility (issue 27, item 7): a round whose numbers are too good to be true is held for review.

Two measurements hold a round that every other check passed: its geomean speedup above a bound
(default 10x, 100x on the CPU backend's interpreter; `helix goals --max-plausible-speedup X`),
and a case whose achieved bandwidth is above the device's copy peak while its working set is
larger than the device's L2 (no kernel reads DRAM faster than a copy; a working set that fits
the L2 can, so that case is left alone, as compare-perf's roofline block names it cache-
resident). submit-round then records nothing until the submitter says why the numbers are real:
``--accept-implausible REASON``, which the ledger keeps (state/lifecycle.py, state/ledger.py).

No number is computed here: the geomean is the promotion rule's (the round's ``vs_baseline``,
as `helix status` and the ledger print it), and the bandwidth, the peak (measured by `helix
calibrate --peak`, else the datasheet table) and the L2 (perf/peaks.py; known only for the parts
in its table) are perf/roofline.py's, from the bytes each perf record declares.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helix_engine.state.goals import Goals

DEFAULT_MAX_PLAUSIBLE_SPEEDUP = 10.0
#: the default per backend where it differs: under the CPU backend Triton runs in its interpreter,
#: where a fused kernel's speedup is mostly Python overhead removed (the examples' honest round 1
#: measured 7x, 13x and 52x on 2 cores), so only a far larger figure is implausible there
BACKEND_DEFAULTS = {"cpu": 100.0}
ACCEPT_FLAG = "--accept-implausible"
BOUND_FLAG = "--max-plausible-speedup"


def speedup_bound(workspace: Path, goals: Goals | None = None, backend: str | None = None) -> float:
    """The bound on a round's geomean: the session goals' (``goals``, else .helix/goals.json),
    else the default for ``backend`` (the round's perf records'). An unreadable goals file gives
    the default (submit-round refuses it first)."""
    if goals is None:
        from helix_engine.state.goals import load_goals

        goals, _problem = load_goals(workspace)
    found = goals.max_plausible_speedup if goals is not None else None
    if found is not None:
        return found
    return BACKEND_DEFAULTS.get(backend or "", DEFAULT_MAX_PLAUSIBLE_SPEEDUP)


def _backend(workspace: Path, perf_path: Path | None) -> str | None:
    """The backend the round's perf file was measured on (its first record's)."""
    if perf_path is None:
        return None
    from helix_engine.perf.artifact import read_perf

    records, _problems = read_perf(perf_path, workspace)
    for record in records or []:
        value = getattr(record, "backend", None)
        if isinstance(value, str):
            return value
    return None


def round_geomean(workspace: Path, n: int) -> float | None:
    """Round ``n``'s geomean speedup against the baseline as the ledger records it when the round
    is submitted: the promotion rule's judged geomean (the paired run's when there is one), else
    the status comparison's. None when there is none (no comparable perf file)."""
    from helix_engine.state import measure
    from helix_engine.workspace import sealed

    with sealed.kept_as_is():  # the checker writes nothing, not even a cache
        _snap, ev = measure.evaluated(workspace, statuses={n: "passed"})
    promoted = ev.promotion.rounds.get(n)
    if promoted is not None and promoted.vs_baseline is not None:
        return promoted.vs_baseline.point
    result = ev.results.get(n)
    geomean = result.comparison.geomean if result is not None and result.comparison is not None else None
    return geomean.point if geomean is not None else None


def _bandwidth(workspace: Path, perf_path: Path | None) -> tuple[list[str], list[str]]:
    """(findings, why the test did not apply): per case of the round's perf file, its achieved
    bandwidth against the copy peak and its working set against the L2."""
    if perf_path is None:
        return [], ["the round has no perf file"]
    from helix_engine.perf import roofline
    from helix_engine.perf.artifact import read_perf

    records, _problems = read_perf(perf_path, workspace)
    findings: list[str] = []
    missing: dict[str, set[str]] = {}  # device → what is not known of it: "copy peak", "L2 size"
    above: dict[str, list[str]] = {}  # device → cases above its copy peak whose L2 is not known
    declared = False
    for record in records or []:
        fig = roofline.for_record(record, workspace)
        if fig is None or not fig.work.bytes or fig.gbps is None:
            continue
        declared = True
        device = fig.device or "this device"
        lacks = {what for what, known in (("copy peak", fig.bw_peak is not None and fig.bw_fraction is not None),
                                          ("L2 size", bool(fig.cache_bytes))) if not known}
        if lacks:  # the test does not apply to this case
            missing.setdefault(device, set()).update(lacks)
            if fig.bw_fraction is not None and fig.bw_fraction > 1.0:
                above.setdefault(device, []).append(str(record.case_label))
            continue
        assert fig.bw_peak is not None and fig.bw_fraction is not None and fig.cache_bytes
        if fig.bw_fraction > 1.0 and fig.work.bytes > fig.cache_bytes:
            findings.append(
                f"case {record.case_label} achieved {fig.gbps:.0f} GB/s, above the copy peak "
                f"{fig.bw_peak.value:.0f} GB/s ({fig.bw_peak.label}), with a working set of "
                f"{fig.work.bytes / 1e6:.3g} MB, larger than the {fig.cache_bytes / 1e6:.0f} MB L2 of {device}: "
                "no kernel reads DRAM faster than a copy")
    notes: list[str] = []
    if not declared:
        notes.append("no case of its perf file declares the bytes it moves")
    hints = {"copy peak": "`helix calibrate --peak` measures the copy peak",
             "L2 size": "perf/peaks.py has the L2 only of the parts in its table"}
    for device, lacks in sorted(missing.items()):
        what = [w for w in hints if w in lacks]
        cases = above.get(device)
        notes.append(f"the {' and the '.join(what)} of {device} {'are' if len(what) > 1 else 'is'} not known "
                     f"({'; '.join(hints[w] for w in what)})"
                     + (f"; case(s) {', '.join(cases[:3])} read above its copy peak" if cases else ""))
    return findings, notes


def findings(workspace: Path, round_dir: Path, perf_path: Path | None, goals: Goals | None = None) -> list[str]:
    """Why round ``round_dir`` is implausible, one sentence each ([] when it is not): its geomean
    above the bound, each case above the copy peak with a working set larger than the L2. When
    the round is held and the bandwidth test did not apply (no declared bytes, an unknown L2 or
    peak), the geomean's sentence says why."""
    from helix_engine.console import fmt_speedup
    from helix_engine.workspace import layout

    workspace, n = Path(workspace), layout.round_number(Path(round_dir).name)
    if n is None:
        return []
    found: list[str] = []
    bound = speedup_bound(workspace, goals, _backend(workspace, perf_path))
    geomean = round_geomean(workspace, n)
    if geomean is not None and geomean > bound:
        found.append(f"geomean {fmt_speedup(geomean)} is above the plausibility bound {bound:g}x "
                     f"(helix goals {BOUND_FLAG})")
    by_bandwidth, not_applied = _bandwidth(workspace, perf_path)
    found.extend(by_bandwidth)
    if found and not by_bandwidth and not_applied:  # held by its geomean alone: say what was not tested
        found[-1] += "; the bandwidth test did not apply: " + "; ".join(not_applied)
    return found


def accepted_text(reason: str, held: list[str]) -> str:
    """The sentence the ledger and the payload keep for an accepted hold: the reason first (a long
    ledger line is cut at its end), then what was held."""
    return f"{reason} (implausible, accepted by the submitter with {ACCEPT_FLAG}; held for: {'; '.join(held)})"


def hold_issues(held: list[str]) -> list[str]:
    """The issues of a round held for review, with the way out."""
    return [f"held for review: {p}" for p in held[:5]] + [
        f"submit it with `{ACCEPT_FLAG} \"why these numbers are real\"` if it is"]

