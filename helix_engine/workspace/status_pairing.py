"""The status rule's pairing of one round with the baseline (spec upstream-state §4), on records
already read: the metric choice, exact latency ids, one bench mode, values <= 0 dropped with
upstream's warning, and the round's comparison from the core (perf/evaluation.py). Also the
compact values (evaluation.CaseValues) a round is kept as, so that a later comparison reads no
record. status_rules judges the whole workspace with these.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any, Literal

from helix_engine.perf import evaluation
from helix_engine.perf.evaluation import CaseValues, Metric, Pair, Paired
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.results import RoundEvaluation
from helix_engine.record import record
from helix_engine.workspace.models import PerfRecord, Problem

#: An error message starting like this is the recoverable "kernel not matched" case.
RECOVERABLE_ERROR_PREFIX = "no resolved kernels matched"
MISSING_BASELINE = "missing baseline perf data"
MISSING_COMPARABLE = "missing comparable round perf data"


def metric_for_round(requested: str | None, effective: str | None) -> str:
    """``-m`` when given, else the round's effective_metric_source with mixed → auto."""
    if requested in ("auto", "kernel", "total-op"):
        return requested
    if effective in ("kernel", "total-op"):
        return effective
    return "auto"


@record
class PerfIssues:
    """What makes a perf file unusable for comparison (upstream's parser would refuse it)."""

    failed: list[str] = field(default_factory=list)  # "latency-x (message)"
    duplicates: list[str] = field(default_factory=list)
    bench_modes: set[str | None] = field(default_factory=set)

    @property
    def mixed_modes(self) -> bool:
        return len(self.bench_modes) > 1


def perf_issues(records: Iterable[PerfRecord]) -> PerfIssues:
    issues = PerfIssues()
    seen: set[str] = set()
    for rec in records:
        if rec.latency_id in seen:
            issues.duplicates.append(rec.latency_id)
        seen.add(rec.latency_id)
        issues.bench_modes.add(rec.bench_mode)
        msg = rec.error_message
        if msg and not str(msg).startswith(RECOVERABLE_ERROR_PREFIX):
            issues.failed.append(f"{rec.latency_id} ({str(msg).strip()[:120]})")
    return issues


_ISSUES_CACHE: dict[int, tuple[list[PerfRecord], PerfIssues, CaseValues]] = {}
_ISSUES_CACHED = 64


def _cached_issues(records: list[PerfRecord]) -> tuple[PerfIssues, CaseValues]:
    """perf_issues of a list of records and its values as the pairing reads them, computed once
    per list object (loaded records are never changed): the baseline's are asked for by every
    round, a round's by its comparison with the baseline, with the best before it, and, once it
    is the best, by every later round's."""
    hit = _ISSUES_CACHE.get(id(records))
    if hit is not None and hit[0] is records:
        return hit[1], hit[2]
    issues = perf_issues(records)
    ordered = sorted(records, key=lambda r: r.latency_id)
    values = CaseValues(shared_ids(tuple(r.latency_id for r in ordered)),
                        tuple(r.kernel_avg_time_us for r in ordered),
                        tuple(r.total_op_avg_time_us for r in ordered),
                        next(iter(issues.bench_modes), None), any(r.samples_us for r in records))
    if len(_ISSUES_CACHE) >= _ISSUES_CACHED:
        del _ISSUES_CACHE[next(iter(_ISSUES_CACHE))]  # the oldest
    _ISSUES_CACHE[id(records)] = (records, issues, values)
    return issues, values


_IDS: dict[tuple[str, ...], tuple[str, ...]] = {}
_IDS_KEPT = 256


def shared_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple per distinct list of latency ids (rounds share the baseline's): a 1000-round
    snapshot holds one copy of the labels, and the pairing sees equal ids as the same object."""
    found = _IDS.get(ids)
    if found is not None:
        return found
    if len(_IDS) >= _IDS_KEPT:
        del _IDS[next(iter(_IDS))]
    _IDS[ids] = ids
    return ids


def case_values(records: list[PerfRecord]) -> CaseValues | None:
    """The records' compact values (evaluation.CaseValues) when the status rule would pair them
    (no repeated id, no failed case, one bench mode) and every average is a finite number or
    absent (what .helix/cache/rounds.sealed can hold); None: the round is compared from its records."""
    issues, values = _cached_issues(records)
    if issues.duplicates or issues.failed or issues.mixed_modes:
        return None
    for value in (*values.kernel, *values.total):
        if value is not None and not (type(value) is float and math.isfinite(value)):
            return None
    return values


@record
class RoundResult:
    """One round judged by the status rules."""

    comparison: RoundEvaluation | None
    comparable: bool
    warnings: list[str]
    problems: list[Problem]


@record
class StatusPairing:
    """The status rule's pairing of a round with the baseline, and what upstream warns about."""

    paired: Paired
    warnings: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    refused: bool = False


@record
class ValuePairs:
    """``pair_values``' answer: the pairs as columns (latency ids, metrics, baseline µs, compare
    µs) and the dropped cases (latency id, side, that side's value, reason), each in latency id
    order, and what refused the comparison: ("bench_mode",), ("missing", ids) or ("field",
    latency id, metric, "baseline" | "compare"); the pairs and drops before a missing value are
    kept. Columns: a round's whole column is paired as it is kept (no tuple per case)."""

    ids: Sequence[str] = field(default_factory=list)
    metrics: Sequence[Metric] = field(default_factory=list)
    baseline: Sequence[float] = field(default_factory=list)
    compare: Sequence[float] = field(default_factory=list)
    dropped: list[tuple[str, Literal["baseline", "compare", "both"], float, str]] = field(default_factory=list)
    refusal: tuple[Any, ...] | None = None


def pair_values(base: CaseValues, cand: CaseValues, metric: str) -> ValuePairs:
    """The status rule's pairing, on values (pair_for_status runs it on records' values, the
    promotion rule's compact comparison on a round's kept ones): one bench mode on both sides,
    every baseline id in the round, each case on ``metric`` (auto: kernel when both sides have
    it, else total-op), a missing value refuses the comparison, a pair that cannot give a speedup
    (evaluation.pair_problem) is dropped."""
    out = ValuePairs()
    if base.ids and cand.ids and base.bench_mode != cand.bench_mode:
        out.refusal = ("bench_mode",)
        return out
    where: dict[str, int] | None = None
    if cand.ids != base.ids:
        where = {lid: i for i, lid in enumerate(cand.ids)}
        missing = [lid for lid in base.ids if lid not in where]  # in order: base.ids is sorted
        if missing:
            out.refusal = ("missing", missing)
            return out
    b_kernel, b_total, c_kernel, c_total = base.kernel, base.total, cand.kernel, cand.total
    if where is None:  # the same cases: a column both sides hold whole and valid pairs at once
        whole: Metric = "kernel" if metric == "kernel" or (metric == "auto" and base.kernel_ok and cand.kernel_ok) \
            else "total-op"
        b_col, c_col = (b_kernel, c_kernel) if whole == "kernel" else (b_total, c_total)
        if (metric != "auto" or whole == "kernel") and \
                (base.kernel_ok and cand.kernel_ok if whole == "kernel" else base.total_ok and cand.total_ok):
            # pair_problem finds none: every ratio is at most max/min, so finite when that is
            if math.isfinite(base.bounds(whole)[1] / cand.bounds(whole)[0]) \
                    or all(map(math.isfinite, map(operator.truediv, b_col, c_col))):
                out.ids, out.metrics = base.ids, (whole,) * len(base.ids)
                out.baseline, out.compare = b_col, c_col  # type: ignore[assignment]  # no None: *_ok
                return out
    ids: list[str] = []
    metrics: list[Metric] = []
    b_out: list[float] = []
    c_out: list[float] = []
    out.ids, out.metrics, out.baseline, out.compare = ids, metrics, b_out, c_out  # filled below
    for i, lid in enumerate(base.ids):
        j = i if where is None else where[lid]
        use: Metric
        if metric == "auto":  # upstream: if either side is on total-op, both are
            use = "kernel" if b_kernel[i] is not None and c_kernel[j] is not None else "total-op"
        else:
            use = "kernel" if metric == "kernel" else "total-op"
        b, c = (b_kernel[i], c_kernel[j]) if use == "kernel" else (b_total[i], c_total[j])
        if b is None or c is None:
            out.refusal = ("field", lid, use, "baseline" if b is None else "compare")
            return out
        found = evaluation.pair_problem(b, c)
        if found is not None:
            out.dropped.append((lid, found[0], b if found[0] == "baseline" else c, found[1]))
            continue
        ids.append(lid)
        metrics.append(use)
        b_out.append(float(b))
        c_out.append(float(c))
    return out


def pair_for_status(
    baseline: list[PerfRecord],
    candidate: list[PerfRecord],
    metric: str,
    *,
    round_name: str,
    baseline_file: str,
    round_file: str,
) -> StatusPairing:
    """Pair every baseline case with the round's case of the same latency id, as upstream."""
    out = StatusPairing(Paired(requested=metric))
    warnings, problems = out.warnings, out.problems

    def refuse(warning: str, problem: Problem) -> StatusPairing:
        out.paired.errors.append(warning)
        out.warnings, out.problems, out.refused = [warning], [problem], True
        return out

    (b_issues, b_values), (c_issues, c_values) = _cached_issues(baseline), _cached_issues(candidate)
    if b_issues.duplicates:
        return refuse(f"duplicate latency ids in baseline perf data: {', '.join(b_issues.duplicates)}",
                      Problem(baseline_file, "repeats case labels ("
                              + ", ".join(b_issues.duplicates) + "); give every bench case a unique id "
                              "and re-run the baseline bench", severity="warning"))
    if c_issues.duplicates:
        return refuse(f"duplicate latency ids in {round_name} perf data: {', '.join(c_issues.duplicates)}",
                      Problem(round_file, "repeats case labels (" + ", ".join(c_issues.duplicates)
                              + f"); {round_name} is not compared until its bench is re-run", severity="warning"))
    if b_issues.failed:
        return refuse(f"baseline perf data has failed cases: {'; '.join(b_issues.failed)}",
                      Problem(baseline_file, "has failed cases (" + "; ".join(b_issues.failed)
                              + "); fix the baseline and re-run its bench, no round can be compared "
                              "until then", severity="warning"))
    if c_issues.failed:
        return refuse(f"{round_name} perf data has failed cases: {'; '.join(c_issues.failed)}",
                      Problem(round_file, "has failed cases (" + "; ".join(c_issues.failed)
                              + f"); {round_name} is not compared", severity="warning"))
    if b_issues.mixed_modes or c_issues.mixed_modes:
        bad = baseline_file if b_issues.mixed_modes else round_file
        return refuse(f"mixed bench_mode in {bad}",
                      Problem(bad, "mixes bench modes ("
                              + ", ".join(sorted(str(m) for m in (b_issues.bench_modes if bad == baseline_file
                                                                    else c_issues.bench_modes)))
                              + "); re-run the bench with one --bench-mode", severity="warning"))
    b_mode, c_mode = b_values.bench_mode, c_values.bench_mode
    found = pair_values(b_values, c_values, metric)
    base = {r.latency_id: r for r in baseline}
    cand = {r.latency_id: r for r in candidate}
    for latency_id, side, value, reason in found.dropped:
        # upstream drops a value ≤ 0 with a warning; so do we, and one below 1 ns
        warnings.append(_drop_warning(side, value, latency_id, round_name))
        where = baseline_file if side == "baseline" else round_file
        problems.append(Problem(where, f"cannot compare {latency_id}: {reason}. A time must be a positive "
                                "number of at least 1 ns, so the case is dropped from every comparison; "
                                f"re-run the {'baseline' if side == 'baseline' else round_name} bench.",
                                severity="warning"))
        out.paired.problems.append(evaluation.case_problem(latency_id, side, value, f"in {where}, {reason}"))
    for latency_id, use, b_val, c_val in zip(found.ids, found.metrics, found.baseline, found.compare):
        out.paired.pairs.append(Pair(latency_id=latency_id, baseline_us=b_val, compare_us=c_val, metric=use,
                                     baseline_record=base[latency_id], compare_record=cand[latency_id]))
    refusal = found.refusal
    if refusal is not None and refusal[0] == "bench_mode":
        return refuse(
            f"cannot compare {round_name}: bench_mode differs (baseline={b_mode}, {round_name}={c_mode})",
            Problem(round_file, f"was measured with bench_mode={c_mode} but the baseline with {b_mode}; "
                    f"re-run the {round_name} bench with --bench-mode {b_mode}", severity="warning"))
    if refusal is not None and refusal[0] == "missing":
        missing = refusal[1]
        shown = ", ".join(missing[:5]) + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else "")
        return refuse("latency ids do not match for comparable perf data",
                      Problem(round_file, f"lacks cases the baseline has ({shown}); latency ids must "
                              f"match exactly, so {round_name} is not compared. Bench the round with "
                              "the baseline's bench file.", severity="warning"))
    if refusal is not None:  # ("field", latency id, metric, side): a value the metric needs is absent
        _, latency_id, use, side = refusal
        field_name = "kernel_avg_time_us" if use == "kernel" else "total_op_avg_time_us"
        who, file = ("baseline", baseline_file) if side == "baseline" else (round_name, round_file)
        return refuse(f"missing {field_name} for {latency_id} in {who} perf data",
                      Problem(file, f"has no {field_name} for {latency_id}; {round_name} cannot be "
                              f"compared on the {use} metric (try -m "
                              f"{'total-op' if use == 'kernel' else 'kernel'})", severity="warning"))
    if not out.paired.pairs:
        out.paired.errors.append("no case with positive times on both sides")
    return out


def _drop_warning(side: str, value: float, latency_id: str, round_name: str) -> str:
    """Upstream's warning for a dropped case (``… latency must be > 0 …``), and ours for a time
    below 1 ns or a speedup that overflows."""
    who = "baseline latency" if side == "baseline" else "round latency"
    where = latency_id if side == "baseline" else f"{round_name}:{latency_id}"
    if side == "both":
        return f"round speedup is not a finite number for {where}"
    if evaluation.time_rule(value) in ("must be > 0", "must be a finite number > 0"):
        return f"{who} must be > 0 for {where}"
    return f"{who} is below 1 ns for {where}"


def compare_with_baseline(
    baseline: list[PerfRecord],
    candidate: list[PerfRecord],
    metric: str,
    *,
    round_name: str,
    baseline_file: str,
    round_file: str,
    with_ci: bool = False,
    noise_margin: float | NoiseMargins = evaluation.DEFAULT_NOISE_MARGIN,
) -> RoundResult:
    """The status rule's comparison of one round with the baseline (numbers from the core)."""
    pairing = pair_for_status(baseline, candidate, metric, round_name=round_name,
                              baseline_file=baseline_file, round_file=round_file)
    comp = evaluation.from_pairs(pairing.paired, rule="status", with_ci=with_ci, noise_margin=noise_margin)
    if pairing.refused:
        return RoundResult(comp, False, pairing.warnings, pairing.problems)
    if not with_ci:
        comp.ci_note = "status rules: no confidence interval (compare-perf gives one when samples exist)"
    return RoundResult(comp, comp.geomean_speedup is not None and not comp.errors, pairing.warnings,
                       pairing.problems)
