"""The upstream `helix status` rules, on records already read (spec upstream-state §4–§5).

Pure functions: a round against the baseline (metric choice, exact latency ids, values ≤ 0
dropped with a warning), the best round (highest geomean, ties to the lower mean latency), the
logged best of opt-note.md and the warnings upstream prints. Every warning upstream would print
is kept verbatim in ``Evaluation.warnings`` (the JSON ``warnings`` list); each also gets a
Problem that says what to do, for the UI and ``problems``.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from helix_engine.perf import evaluation
from helix_engine.perf.evaluation import CaseValues, Metric, Pair, Paired
from helix_engine.perf.interval_cache import IntervalCache
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.promotion import Candidate, PromotionMemo, judge_vs_baseline, promote
from helix_engine.perf.results import Promotion, RoundEvaluation
from helix_engine.workspace.models import PerfRecord, Problem, RoundView
from helix_engine.workspace.records import LazyRecords, file_id
from helix_engine.workspace.round_cache import RoundSummary, slim

#: An error message starting like this is the recoverable "kernel not matched" case.
RECOVERABLE_ERROR_PREFIX = "no resolved kernels matched"
BEST_MISMATCH_PREFIX = "numeric best round != logged best"
LOGGED_DISAGREE = "overall summary best round differs from legacy current best marker"
MISSING_BASELINE = "missing baseline perf data"
MISSING_COMPARABLE = "missing comparable round perf data"


def metric_for_round(requested: str | None, effective: str | None) -> str:
    """``-m`` when given, else the round's effective_metric_source with mixed → auto."""
    if requested in ("auto", "kernel", "total-op"):
        return requested
    if effective in ("kernel", "total-op"):
        return effective
    return "auto"


@dataclass
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
                        next(iter(issues.bench_modes), None))
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
    absent (what .helix/cache/rounds.json can hold); None: the round is compared from its records."""
    issues, values = _cached_issues(records)
    if issues.duplicates or issues.failed or issues.mixed_modes:
        return None
    for value in (*values.kernel, *values.total):
        if value is not None and not (type(value) is float and math.isfinite(value)):
            return None
    return values


@dataclass
class RoundResult:
    """One round judged by the status rules."""

    comparison: RoundEvaluation | None
    comparable: bool
    warnings: list[str]
    problems: list[Problem]


@dataclass
class StatusPairing:
    """The status rule's pairing of a round with the baseline, and what upstream warns about."""

    paired: Paired
    warnings: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    refused: bool = False


@dataclass
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


def best_round(results: dict[int, RoundEvaluation]) -> int | None:
    """Highest geomean; a tie goes to the lower mean latency; then to the earlier round."""
    return _best_of((n, _rank(results[n])) for n in sorted(results))


def _rank(comp: RoundEvaluation | None) -> tuple[float, float] | None:
    """A round's place in the best-round order, (geomean, −mean latency); None: not ranked."""
    if comp is None or comp.geomean_speedup is None or comp.mean_latency_us is None:
        return None
    return (comp.geomean_speedup, -comp.mean_latency_us)


def _best_of(ranked: Iterable[tuple[int, tuple[float, float] | None]]) -> int | None:
    """The first round (in the given order) with the highest rank."""
    best: tuple[float, float] | None = None
    chosen: int | None = None
    for n, key in ranked:
        if key is not None and (best is None or key > best):
            best, chosen = key, n
    return chosen


_LOGGED_PATTERNS = (r"round-(\d+)", r"round\s+(\d+)", r"opt-round-(\d+)")


def normalize_logged_round(text: str | None) -> str | None:
    """Upstream's reading of ``Final best round:``: round-N, "round N" or opt-round-N."""
    if not text:
        return None
    value = text.strip()
    for pattern in _LOGGED_PATTERNS:
        match = re.fullmatch(pattern, value, flags=re.IGNORECASE)
        if match:
            return f"round-{int(match.group(1))}"
    return None


@dataclass
class LoggedBest:
    summary_best: str | None
    marker_best: str | None
    geomean_text: str | None

    @property
    def value(self) -> str | None:
        return self.summary_best or self.marker_best

    @property
    def disagree(self) -> bool:
        return bool(self.summary_best and self.marker_best and self.summary_best != self.marker_best)


def logged_best_from_note(note: Any) -> LoggedBest:
    """From a parsed OptNote: Overall Summary ``Final best round:`` else the last
    ``Best status: current best`` round; plus the logged ``Geomean speedup:`` text. The last
    note's answer is kept (a reload that did not read opt-note.md again has the same note)."""
    if note is None:
        return LoggedBest(None, None, None)
    global _LOGGED
    kept = _LOGGED  # one read: another thread may replace it meanwhile
    if kept[0] is note:
        return kept[1]
    found = _logged_best(note)
    _LOGGED = (note, found)
    return found


_LOGGED: tuple[Any, Any] = (None, None)  # the last note asked about and its LoggedBest


def _logged_best(note: Any) -> LoggedBest:
    marker: str | None = None
    for entry in getattr(note, "rounds", []) or []:
        status = getattr(entry, "best_status", None)
        if status and "current best" in status.lower():
            marker = f"round-{entry.number}"
    geomean = getattr(note, "geomean_text", None)
    geomean = geomean.strip() if isinstance(geomean, str) and geomean.strip() else None
    return LoggedBest(normalize_logged_round(getattr(note, "final_best_round", None)), marker, geomean)


def best_mismatch_warning(computed_geomean: float, logged_geomean_text: str | None) -> str:
    return (f"{BEST_MISMATCH_PREFIX}. computed speedup: {computed_geomean:.2f}x; "
            f"logged speedup: {logged_geomean_text or 'missing'}")


def verify_summary(payload: Any) -> tuple[bool, float | None]:
    """verified / verified_geomean_speedup from a verify-state.json payload (upstream rule)."""
    if not isinstance(payload, dict):
        return False, None
    result = payload.get("verify-result")
    if not isinstance(result, dict):
        return False, None
    for key in ("test", "rerun_baseline_bench", "rerun_best_bench", "compare_perf"):
        entry = result.get(key)
        if not isinstance(entry, dict) or entry.get("status") != "passed":
            return False, None
    speedup = result.get("speedup")
    if not isinstance(speedup, dict):
        return True, None
    value = speedup.get("geomean_speedup")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True, None
    return True, float(value)


def round_skip_reason(view: RoundView, state_note: str | None) -> str | None:
    """Why upstream skips a round before comparing it (state missing/invalid, not passed …)."""
    if view.state is None:
        return state_note or "round-state.json is missing"
    state = view.state
    if state.correctness_status != "passed":
        return f"correctness_status is {state.correctness_status}"
    if state.benchmark_status != "passed":
        return f"benchmark_status is {state.benchmark_status}"
    if not state.perf_artifact:
        return "perf_artifact is null"
    if not state.effective_metric_source:
        return "effective_metric_source is null"
    return None


# ----------------------------------------------------------------------------- whole workspace


@dataclass
class Evaluation:
    """`helix status` for one workspace under one metric choice."""

    metric: str | None
    state: str  # ok | warning | no-session
    results: dict[int, RoundResult]
    skipped: dict[int, str]
    best_round: int | None  # upstream's: the highest geomean
    logged: LoggedBest
    warnings: list[str]
    problems: list[Problem]
    promotion: Promotion = field(default_factory=lambda: Promotion(noise_margin=evaluation.DEFAULT_NOISE_MARGIN))
    memo: EvaluationMemo | None = None  # what this evaluation computed, for the next (see EvaluationMemo)

    @property
    def best(self) -> RoundEvaluation | None:
        if self.best_round is None:
            return None
        return self.results[self.best_round].comparison


def evaluate(snap: Any, metric: str | None = None, *, statuses: Mapping[int, str | None] | None = None,
             noise_margin: float | NoiseMargins | None = None, reread: Collection[int] | None = None) -> Evaluation:
    """Apply the upstream status rules to a loaded snapshot (``metric`` = the ``-m`` value), then
    the promotion rule. ``statuses`` overrides workflow statuses (submit-round records round N's
    outcome before .helix/state.json says it). ``reread``: the only rounds whose views (and
    per-round notes) may differ from the ones the snapshot's memo saw (a reload's re-read rounds);
    None: any. ``noise_margin`` None: the workspace's margins
    (``helix calibrate``'s, else 1%). A round whose perf file has a current paired result against
    the baseline operator (``*.paired.json``) is judged on it."""
    extra = snap.extra
    warnings: list[str] = list(extra.get("baseline_warnings", []))
    problems: list[Problem] = []
    logged = logged_best_from_note(extra.get("opt_note"))
    if logged.disagree:
        warnings.append(LOGGED_DISAGREE)
    baseline = snap.baseline
    base_records = baseline.perf if baseline is not None else []
    base_file = _shown_file(snap, baseline.perf_file if baseline is not None else None, "baseline")
    if noise_margin is None:
        from helix_engine.perf.calibration import margins_for

        noise_margin = margins_for(snap.root, base_records)
    previous = extra.get(MEMO_KEY)
    previous = previous if isinstance(previous, EvaluationMemo) else None
    if previous is not None and previous.margins == noise_margin:
        noise_margin = previous.margins  # the same margins: the same object, so memo keys match at once
    context = _context(base_records, base_file, metric, noise_margin)
    if previous is not None and previous.context != context:
        previous = None  # another baseline, metric or margins: no round is judged as before
    memo = EvaluationMemo(margins=noise_margin, context=context)
    memo.promotion.store = previous.promotion.store if previous is not None else IntervalCache(snap.root)
    cache = extra.get(CACHE_KEY) if metric is None else None  # the file keeps the status rules' own view
    notes = extra.get("round_state_notes", {})
    operator_file = baseline.operator_file if baseline is not None else None
    operator_key = [_shown_file(snap, operator_file, ""), file_id(operator_file)] if operator_file else None
    memo.operator_key = operator_key
    same_operator = previous is not None and previous.operator_key == operator_key
    computed = False

    def judge(n: int) -> None:
        """Round ``n``'s entry in ``memo``: last time's when what it is judged from is the same."""
        nonlocal computed
        view = snap.rounds[n]
        note = notes.get(n)
        found = previous.rounds.get(n) if previous is not None else None
        seen = previous.seen.get(n) if previous is not None and found is not None and same_operator else None
        if seen is None or seen[0] is not view.inputs or seen[1] != view.records_digest or seen[2] != note:
            seen = (view.inputs, view.records_digest, note)  # what _round_key reads besides the operator's
            key = _round_key(view, note, operator_key)
            if found is None or found[0] != key:
                summary = cache.summary(n, context, key) if cache is not None else None
                if summary is None:
                    computed = True
                    summary = _judge_round(snap, view, note, base_records, base_file, metric, noise_margin,
                                           memo.promotion.store)
                found = (key, summary)
        assert found is not None
        memo.rounds[n] = found
        memo.seen[n] = seen

    order = sorted(snap.rounds)
    if previous is not None and same_operator and _extends(previous.rounds, order):
        # a reload: the same rounds (or more, after them), most with the same inputs object as last
        # time (a round not read again keeps its view's). Their entries are last time's, copied at
        # once; only the others are looked at one by one (~3 µs a round in the loop below, at 1000
        # rounds of which one changed)
        rounds, seen_before = snap.rounds, previous.seen
        memo.rounds, memo.seen = dict(previous.rounds), dict(seen_before)
        looked_at = order if reread is None else sorted({*(n for n in reread if n in rounds),
                                                          *order[len(previous.rounds):]})
        for n in [n for n in looked_at if (s := seen_before.get(n)) is None or s[0] is not rounds[n].inputs
                  or s[1] != rounds[n].records_digest or s[2] != notes.get(n)]:
            judge(n)
        memo.rounds = {n: memo.rounds[n] for n in order}  # in round order, the added rounds last
    else:
        for n in order:
            judge(n)
    changed = _changed_entries(memo, previous)
    results, skipped, round_warnings, best = _outcomes(memo, previous, changed)
    memo.outcomes = (results, skipped, round_warnings, best)
    warnings += round_warnings
    if reread is not None and changed is not None:
        reread = {*reread, *changed}  # a round judged anew (another baseline operator …) is looked at too
    else:
        reread = None
    judged_before = sum(len(entry[1].judged) for entry in memo.rounds.values()) if cache is not None else 0
    promotion = _promote(snap, metric, results, skipped, base_records, statuses or {}, noise_margin, memo,
                         previous, reread)
    memo.promotion.store.save()  # when it bootstrapped something new
    if cache is not None and (computed or cache.dirty or judged_before
                              != sum(len(entry[1].judged) for entry in memo.rounds.values())):
        cache.save(context, memo.rounds)
    has_artifacts = bool(extra.get("has_artifacts"))
    if best is not None:
        state = "ok"
        label = f"round-{best}"
        ranked_by = results[best].comparison  # a ranked round has one
        best_geo = ranked_by.geomean_speedup if ranked_by is not None else None
        # upstream warns when the logged best is not the highest geomean; helix's ledger logs the
        # promotion rule's best (a noise-level round can top the geomean), so that is no mismatch
        if logged.value is not None and logged.value not in (label, promotion.best_label) and best_geo is not None:
            warnings.append(best_mismatch_warning(best_geo, logged.geomean_text))
            note = extra.get("opt_note")
            problems.append(Problem("opt-note.md", f"logs {logged.value} as the best round but {label} measures "
                                    f"best ({best_geo:.2f}x vs logged {logged.geomean_text or 'missing'}); "
                                    "update Final best round, or re-check the measurements",
                                    getattr(note, "overall_line", None), "warning"))
    elif not has_artifacts:
        state = "no-session"
    else:
        state = "warning"
        if (baseline is None or baseline.perf_file is None) and not extra.get("baseline_selection_failed"):
            warnings.append(MISSING_BASELINE)
            problems.append(Problem("baseline", "has no perf data; run the baseline bench "
                                    "(`helix run-bench` on baseline/<op>.py) so rounds can be compared",
                                    severity="warning"))
        elif base_records and snap.rounds:
            warnings.append(MISSING_COMPARABLE)
    return Evaluation(metric=metric, state=state, results=results, skipped=skipped, best_round=best,
                      logged=logged, warnings=list(dict.fromkeys(warnings)), problems=problems,
                      promotion=promotion, memo=memo)


#: ``snapshot.extra`` key of the memo its evaluation left, which the evaluation of its reload reads.
MEMO_KEY = "evaluation_memo"
#: ``snapshot.extra`` key of the round cache (workspace/round_cache.py) during a full load.
CACHE_KEY = "round_cache"

_RoundOutcome = RoundSummary


@dataclass
class EvaluationMemo:
    """What one ``evaluate`` computed, kept by the snapshot for the evaluation of its reload: a
    round whose key (the identities of the files it was judged from, ``_round_key``) is the one
    of last time reuses its summary, under the same context (baseline records, metric, margins);
    the promotion rule re-decides only what can have changed. The memo never changes a result."""

    margins: Any = None
    context: list[Any] = field(default_factory=list)
    rounds: dict[int, tuple[list[Any], RoundSummary]] = field(default_factory=dict)
    promotion: PromotionMemo = field(default_factory=PromotionMemo)
    #: per round, what its key was built from (its view's inputs object, records digest, round-state
    #: note), and the baseline operator's key: the same again, the key is not built again (a reload
    #: of 1000 rounds builds only the changed rounds' keys)
    seen: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    operator_key: list[Any] | None = None
    #: per round, its promotion Candidate and what it was built from (``_promote``)
    candidates: dict[int, tuple[tuple[Any, ...], Candidate]] = field(default_factory=dict)
    #: per round, the workflow status the promotion rule read (``_promote``)
    statuses: dict[int, str | None] = field(default_factory=dict)
    #: what ``_outcomes`` made of ``rounds``: results, skipped, the rounds' warnings, upstream's best
    outcomes: tuple[dict[int, RoundResult], dict[int, str], list[str], int | None] | None = None


def _extends(before: Mapping[int, Any], order: list[int]) -> bool:
    """Whether the rounds in ``order`` are those of ``before`` (in order), then maybe more."""
    return len(before) <= len(order) and list(before) == order[:len(before)]


def _changed_entries(memo: EvaluationMemo, previous: EvaluationMemo | None) -> list[int] | None:
    """The rounds whose entry in ``memo.rounds`` is not the previous memo's, the rounds added
    after the previous memo's included; None when the rounds differ otherwise or there is no
    previous memo."""
    if previous is None or not _extends(previous.rounds, list(memo.rounds)):
        return None
    old_entries = previous.rounds
    return [n for n, entry in memo.rounds.items() if entry is not old_entries.get(n)]


def _outcomes(memo: EvaluationMemo, previous: EvaluationMemo | None, changed: list[int] | None,
              ) -> tuple[dict[int, RoundResult], dict[int, str], list[str], int | None]:
    """The rounds' results and skip reasons, their warnings in round order and upstream's best round
    (the first with the highest rank), from ``memo.rounds``; from the previous memo's, changed at
    the ``changed`` rounds (``_changed_entries``; a reload: usually one of 1000)."""
    entries = memo.rounds
    before = previous.outcomes if previous is not None else None
    if before is not None and previous is not None and changed is not None:
        old_entries = previous.rounds
        results, skipped, round_warnings, best = dict(before[0]), dict(before[1]), before[2], before[3]
        for n in changed:
            outcome, old = entries[n][1], (old_entries[n][1] if n in old_entries else None)
            if outcome.result is None:
                results.pop(n, None)
            else:
                results[n] = outcome.result
            if outcome.skipped is None:
                skipped.pop(n, None)
            else:
                skipped[n] = outcome.skipped
            if outcome.warnings != (old.warnings if old is not None else []):
                round_warnings = [w for e in entries.values() if e[1].warnings for w in e[1].warnings]
        top = old_entries[best][1].rank if best is not None and best in old_entries else None  # its rank before

        def keeps_best(n: int) -> bool:
            """The best stays the best after round ``n`` changed: ``n`` is the best and did not fall
            (every other round ranked below it or tied later, and still does), or ``n`` is not the
            best and does not outrank it now."""
            rank = entries[n][1].rank
            if n == best:
                return rank is not None and top is not None and rank >= top
            if rank is None:
                return True
            return top is not None and best is not None and (rank < top or (rank == top and n > best))

        if all(map(keeps_best, changed)):
            return results, skipped, round_warnings, best
        return results, skipped, round_warnings, _best_of((n, entry[1].rank) for n, entry in entries.items())
    outcomes = [entry[1] for entry in entries.values()]  # in round order
    results = {n: o.result for n, o in zip(entries, outcomes) if o.result is not None}
    skipped = {n: o.skipped for n, o in zip(entries, outcomes) if o.skipped is not None}
    round_warnings = [w for o in outcomes if o.warnings for w in o.warnings]
    return results, skipped, round_warnings, _best_of((n, o.rank) for n, o in zip(entries, outcomes))


def _context(base_records: list[PerfRecord], base_file: str, metric: str | None, margins: Any) -> list[Any]:
    """What every round's summary depends on besides its own files."""
    from helix_engine.perf.interval_cache import records_digest
    from helix_engine.workspace.round_cache import code_digest

    margins_text = margins.model_dump_json() if hasattr(margins, "model_dump_json") else repr(margins)
    return [code_digest(), records_digest(base_records), base_file, metric, margins_text]


def _round_key(view: RoundView, note: str | None, operator_key: list[Any] | None) -> list[Any]:
    """The identities of the files round ``view`` is judged from (taken when it was read): its
    round-state.json, perf file and paired sidecar, and, when it has a sidecar, the baseline
    operator the sidecar must have been measured against. The perf file counts by its records'
    content when it was read (a rewrite with the same records keeps the round's summary)."""
    inputs = list(view.inputs)
    if len(inputs) >= 3 and view.records_digest is not None:
        inputs[2] = ["records", view.records_digest]
    has_sidecar = len(inputs) == 4 and inputs[3] is not None
    return [view.name, note, inputs, operator_key if has_sidecar else None]


def _judge_round(snap: Any, view: RoundView, note: str | None, base_records: list[PerfRecord], base_file: str,
                 metric: str | None, noise_margin: float | NoiseMargins,
                 store: IntervalCache | None = None, *, keep_cases: bool = False) -> RoundSummary:
    """The status rules for one round (its comparison with the baseline, or why it is skipped),
    and the promotion rule's judged geomean against the baseline; the comparison is kept without
    its cases (the summary a snapshot holds)."""
    reason = round_skip_reason(view, note)
    if reason is None and view.perf_file is None:
        reason = "its perf artifact is missing"
    if reason is not None:
        return RoundSummary(reason, [f"skipping {view.name} because {reason}"])
    if not base_records:
        return RoundSummary(MISSING_BASELINE)
    chosen = metric_for_round(metric, view.state.effective_metric_source if view.state else None)
    records = view.perf
    if not records:
        return RoundSummary("its perf file has no readable records", [f"cannot parse perf file for {view.name}"])
    result = compare_with_baseline(base_records, records, chosen, round_name=view.name,
                                   baseline_file=base_file,
                                   round_file=_shown_file(snap, view.perf_file, view.name),
                                   noise_margin=noise_margin)
    baseline = snap.baseline
    if result.comparison is not None and view.perf_file is not None and baseline is not None:
        from helix_engine.perf.paired import attach_paired

        attach_paired(result.comparison, view.perf_file, baseline.operator_file, records,
                      workspace=snap.root, noise_margin=noise_margin, ci_statistics=("mean",))
    skipped = None
    if not result.comparable:
        skipped = result.comparison.errors[0] if result.comparison and result.comparison.errors \
            else "not comparable"
    comparable = result.comparison if result.comparable else None
    judged: dict[Any, Any] = {}
    if keep_cases:
        return RoundSummary(skipped, list(result.warnings), result, _rank(comparable), judged)
    if comparable is not None:
        found = judge_vs_baseline(comparable, base_records, records, chosen, noise_margin, store)
        if found is not None:
            judged["baseline"] = found
    result.comparison = slim(result.comparison)
    return RoundSummary(skipped, list(result.warnings), result, _rank(comparable), judged)


def round_comparison(snap: Any, n: int, metric: str | None = None) -> RoundEvaluation | None:
    """Round ``n``'s comparison with the baseline under the status rules, with its per-case
    results (a snapshot keeps it without them): judged again from the round's records."""
    view = snap.rounds.get(n)
    baseline = snap.baseline
    if view is None:
        return None
    base_records = baseline.perf if baseline is not None else []
    from helix_engine.perf.calibration import margins_for

    base_file = _shown_file(snap, baseline.perf_file if baseline is not None else None, "baseline")
    summary = _judge_round(snap, view, snap.extra.get("round_state_notes", {}).get(n), base_records, base_file,
                           metric, margins_for(snap.root, base_records), keep_cases=True)
    return summary.result.comparison if summary.result is not None else None


def _promote(snap: Any, metric: str | None, results: dict[int, RoundResult], skipped: dict[int, str],
             base_records: list[PerfRecord], statuses: Mapping[int, str | None],
             noise_margin: float | NoiseMargins, memo: EvaluationMemo | None = None,
             previous: EvaluationMemo | None = None, reread: Collection[int] | None = None) -> Promotion:
    """The promotion rule over every round: eligible when the status rules compared it and no
    submit-round failed it. ``reread``: as for ``evaluate``."""
    rounds = snap.rounds
    order = sorted(rounds)
    in_effect = {n: statuses.get(n, rounds[n].workflow_status) for n in order}
    kept = previous.candidates if previous is not None and memo is not None else {}
    made: dict[int, tuple[tuple[Any, ...], Candidate]] = {}

    def candidate(n: int) -> None:
        view = rounds[n]
        result = results.get(n)
        why = skipped.get(n)
        if in_effect[n] == "failed":
            why = "submit-round rejected it"
        summary = memo.rounds[n][1] if memo is not None and n in memo.rounds else None
        # a view copied by the snapshot's _derive keeps its inputs object: the candidate of last
        # time holds the same records, values and judgements (same metric: previous is the same context)
        made_from = (view.inputs, view.records_digest, view.state, result, why, summary)
        found = kept.get(n)
        if found is None or found[0] != made_from:
            eligible = why is None and result is not None and result.comparable
            found = (made_from, Candidate(
                number=n, eligible=eligible, why_not=why,
                metric=metric_for_round(metric, view.state.effective_metric_source if view.state else None),
                records=LazyRecords(view), vs_baseline=result.comparison if result is not None else None,
                records_key=_records_key(view),
                judged=summary.judged if summary is not None else None,
                values=functools.partial(view_values, view)))
        made[n] = found

    if memo is not None and previous is not None and _extends(kept, order) \
            and (previous.statuses == in_effect if len(kept) == len(order)
                 else all(in_effect[n] == status for n, status in previous.statuses.items())):
        # a reload: a round whose status, view and judged entry are last time's has last time's
        # candidate (copied at once); only the others are made again (see evaluate), and the rounds
        # added after the last time's
        made.update(kept)
        before = previous.rounds
        # reread: the rounds whose view may differ and those whose judged entry changed (evaluate)
        looked_at = order if reread is None else sorted({*(n for n in reread if n in rounds), *order[len(kept):]})
        for n in [n for n in looked_at if memo.rounds.get(n) is not before.get(n)
                  or (k := kept[n][0])[0] is not rounds[n].inputs or k[2] is not rounds[n].state]:
            candidate(n)
    else:
        for n in order:
            candidate(n)
    if memo is not None:
        memo.candidates, memo.statuses = made, in_effect
    candidates = [entry[1] for entry in made.values()]
    return promote(candidates, base_records, noise_margin=noise_margin,
                   memo=memo.promotion if memo is not None else None,
                   previous=previous.promotion if previous is not None else None,
                   baseline_values=case_values(base_records) if base_records else None)


def view_values(view: RoundView) -> CaseValues | None:
    """Round ``view``'s compact case values (RoundView.values), decoded from their stored form on
    first use (a load keeps the text; most rounds are never compared from their values)."""
    found = view.values
    if isinstance(found, list):
        from helix_engine.workspace.round_cache import values_in

        found = values_in(found)
        view.values = found  # the same values for the old snapshot that shares the view
    return found if isinstance(found, CaseValues) else None


def _records_key(view: RoundView) -> list[Any] | None:
    """What identifies the round's records for the promotion rule's judgements: their content
    digest (a rewrite with the same bytes, or the same records, keeps every judgement), else the
    perf file's identity."""
    if view.perf_file is None:
        return None
    if view.records_digest is not None:
        return ["records", view.records_digest]
    return list(view.inputs[1:3])


def _shown_file(snap: Any, path: Any, default: str) -> str:
    if path is None:
        return default
    from helix_engine.workspace.reading import shown

    return shown(path, snap.root)
