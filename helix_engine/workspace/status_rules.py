"""The upstream `helix status` rules over a whole workspace, on records already read (spec
upstream-state §4–§5): each round judged against the baseline (status_pairing), the best round
(highest geomean, ties to the lower mean latency), the logged best of opt-note.md (logged_best),
the promotion rule's ledger and the warnings upstream prints. Every warning upstream would print
is kept verbatim in ``Evaluation.warnings`` (the JSON ``warnings`` list); each also gets a
Problem that says what to do, for the UI and ``problems``. ``evaluate`` keeps a memo, so a
reload judges again only the rounds it re-read and those judged against a changed best.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import field
from typing import Any

from helix_engine.perf import evaluation
from helix_engine.perf.evaluation import CaseValues
from helix_engine.perf.interval_cache import IntervalCache
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.promotion import Candidate, PromotionMemo, judge_vs_baseline, promote
from helix_engine.perf.results import LaterPromotion, Promotion, RoundEvaluation
from helix_engine.record import record
from helix_engine.workspace.logged_best import LOGGED_DISAGREE, LoggedBest, best_mismatch_warning, logged_best_from_note
from helix_engine.workspace.models import PerfRecord, Problem, RoundView
from helix_engine.workspace.records import LazyRecords, file_id
from helix_engine.workspace.round_cache import RoundSummary, slim
from helix_engine.workspace.status_pairing import (
    MISSING_BASELINE,
    MISSING_COMPARABLE,
    RoundResult,
    case_values,
    compare_with_baseline,
    metric_for_round,
)


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


@record
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
    #: the rounds whose ``results`` entry may not be the one in ``results_before``, the results of
    #: the evaluation this one was made from (a reload's: its memo's); None: any round's
    changed: list[int] | None = field(default=None, compare=False, repr=False)
    results_before: dict[int, RoundResult] | None = field(default=None, compare=False, repr=False)

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
        judged = [n for n in looked_at if (s := seen_before.get(n)) is None or s[0] is not rounds[n].inputs
                  or s[1] != rounds[n].records_digest or s[2] != notes.get(n)]
        for n in judged:  # in round order: the added rounds (each judged: not seen before) go last
            judge(n)
        assert len(memo.rounds) == len(order)
        changed = _changed_entries(memo, previous, judged)
    else:
        for n in order:
            judge(n)
        changed = _changed_entries(memo, previous)
    results, skipped, round_warnings, best = _outcomes(memo, previous, changed)
    # _outcomes changed the previous memo's results at the changed rounds only (when it had them)
    results_before = previous.outcomes[0] if previous is not None and previous.outcomes is not None \
        and changed is not None else None
    memo.outcomes = (results, skipped, round_warnings, best)
    damage = baseline_damage(snap)
    if damage is not None:  # a damaged baseline is the baseline's problem, not the rounds' (see below)
        warnings = _blame_the_baseline(warnings, damage)
        round_warnings = _blame_the_baseline(round_warnings, damage)
        problems.append(Problem(damage.file, f"is damaged ({damage.message}), so no round can be compared with it; "
                                f"{REESTABLISH}", damage.line, "error"))
    warnings += round_warnings
    if reread is not None and changed is not None:
        reread = {*reread, *changed}  # a round judged anew (another baseline operator …) is looked at too
    else:
        reread = None
    judged_before = sum(len(entry[1].judged) for entry in memo.rounds.values()) if cache is not None else 0
    promotion = _promote(snap, metric, results, skipped, base_records, statuses or {}, noise_margin, memo,
                         previous, reread)
    if cache is not None and previous is None and cache.keeps:
        _settle(promotion)
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
                      promotion=promotion, memo=memo, changed=changed if results_before is not None else None,
                      results_before=results_before)


#: ``snapshot.extra`` key of the memo its evaluation left, which the evaluation of its reload reads.
MEMO_KEY = "evaluation_memo"
#: ``snapshot.extra`` key of the round cache (workspace/round_cache.py) during a full load.
CACHE_KEY = "round_cache"

_RoundOutcome = RoundSummary


@record
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
    statuses: Mapping[int, str | None] = field(default_factory=dict)
    #: what ``_outcomes`` made of ``rounds``: results, skipped, the rounds' warnings, upstream's best
    outcomes: tuple[dict[int, RoundResult], dict[int, str], list[str], int | None] | None = None
    #: the ranked rounds as (rank, -number), sorted (the last is upstream's best), made the first
    #: time a reload's best fell and kept up to date after: the next best is then the last entry,
    #: not a ranking of every round again (None: not made)
    ranking: list[tuple[tuple[float, float], int]] | None = None


def _extends(before: Mapping[int, Any], order: list[int]) -> bool:
    """Whether the rounds in ``order`` are those of ``before`` (in order), then maybe more."""
    return len(before) <= len(order) and list(before) == order[:len(before)]


def _changed_entries(memo: EvaluationMemo, previous: EvaluationMemo | None,
                     among: list[int] | None = None) -> list[int] | None:
    """The rounds whose entry in ``memo.rounds`` is not the previous memo's, the rounds added
    after the previous memo's included; None when the rounds differ otherwise or there is no
    previous memo. ``among``: the only rounds whose entry was set again (a reload's judged
    rounds; the others are the previous memo's, copied, and the rounds those of the previous)."""
    if previous is None:
        return None
    old_entries = previous.rounds
    if among is not None:
        return [n for n in among if memo.rounds[n] is not old_entries.get(n)]
    if not _extends(old_entries, list(memo.rounds)):
        return None
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
        memo.ranking = _ranking_after(previous.ranking, changed, old_entries, entries)

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
        if best is None or best not in changed or keeps_best(best):
            # the best did not fall, so every round not changed still ranks below it or ties later:
            # the best is among the changed rounds and it (a reload: a mid round that became the best)
            pool = sorted({*changed, *([best] if best is not None else [])})
            return results, skipped, round_warnings, _best_of((n, entries[n][1].rank) for n in pool)
        if memo.ranking is None:  # the best fell: every round is ranked, once
            memo.ranking = sorted((entry[1].rank, -n) for n, entry in entries.items() if entry[1].rank is not None)
        return results, skipped, round_warnings, -memo.ranking[-1][1] if memo.ranking else None
    outcomes = [entry[1] for entry in entries.values()]  # in round order
    results = {n: o.result for n, o in zip(entries, outcomes) if o.result is not None}
    skipped = {n: o.skipped for n, o in zip(entries, outcomes) if o.skipped is not None}
    round_warnings = [w for o in outcomes if o.warnings for w in o.warnings]
    return results, skipped, round_warnings, _best_of((n, o.rank) for n, o in zip(entries, outcomes))


def _ranking_after(ranking: list[tuple[tuple[float, float], int]] | None, changed: list[int],
                   old_entries: Mapping[int, tuple[list[Any], RoundSummary]],
                   entries: Mapping[int, tuple[list[Any], RoundSummary]]) -> list[tuple[tuple[float, float], int]] | None:
    """``ranking`` (EvaluationMemo.ranking) with the ``changed`` rounds at their new ranks: a
    copy, the previous memo's is left as it was; None when there is none, or it does not hold a
    changed round's old rank (then it is made again when needed)."""
    if ranking is None:
        return None
    ranking = list(ranking)
    for n in changed:
        old = old_entries[n][1].rank if n in old_entries else None
        if old is not None:
            at = bisect.bisect_left(ranking, (old, -n))
            if at == len(ranking) or ranking[at] != (old, -n):
                return None
            del ranking[at]
        new = entries[n][1].rank
        if new is not None:
            bisect.insort(ranking, (new, -n))
    return ranking


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


def _settle(promotion: Promotion) -> None:
    """Compute, on a full load, the comparisons with the best the bound stood in for
    (LaterPromotion), so the round cache keeps them: `status` reads every round's reason, and what
    is computed after the cache is saved was computed again by every run (~800 comparisons, a
    fifth of a computed `status` at 1000 rounds). Kept, they are the rule's known judgements and
    the bound is not tried again. A reload stays lazy: it re-decides rounds a screen may never show."""
    for entry in promotion.rounds.values():
        if isinstance(entry, LaterPromotion) and entry.pending:
            entry.reason  # noqa: B018 - reading it makes the comparison and keeps it in the round's judgements


#: What re-establishes a damaged baseline perf file (prepare-baseline measures it again).
REESTABLISH = ("re-establish the baseline with `helix prepare-baseline --force`, then refill each round it failed "
               "with `helix round-state --round-dir opt-round-N ...`")
#: Round skip reasons a damaged baseline causes: `helix round-state` derives benchmark_status=not_run
#: (an older helix: failed), and no effective_metric_source, when the round's perf file does not
#: compare with the baseline's because of the baseline's damage.
_BASELINE_CAUSED = ("benchmark_status is failed", "benchmark_status is not_run", "effective_metric_source is null")


def baseline_damage(snap: Any) -> Problem | None:
    """The baseline perf file's first error (unreadable, an invalid or duplicate line, empty, no
    readable record), or None when it reads cleanly or there is none (that is "missing", not damage)."""
    baseline = snap.baseline
    if baseline is None or baseline.perf_file is None:
        return None
    name = _shown_file(snap, baseline.perf_file, "baseline")
    for problem in baseline.problems:
        if problem.file == name and problem.severity == "error":
            return problem
    return None if baseline.perf else Problem(name, "has no readable perf record")


def _blame_the_baseline(warnings: list[str], damage: Problem) -> list[str]:
    """``warnings`` with the ones a damaged baseline perf file causes said as its doing: upstream's
    "skipping opt-round-N because benchmark_status is failed" (what `helix round-state` derives
    when the round cannot be compared with the baseline) names the baseline perf file and what
    re-establishes it, and "cannot parse baseline perf file X" says what to do."""
    out = []
    for text in warnings:
        head, sep, reason = text.partition(" because ")
        if text.startswith("skipping opt-round-") and sep and reason in _BASELINE_CAUSED:
            name = head.removeprefix("skipping ")
            text = (f"skipping {name} because it cannot be compared with the baseline: the baseline perf file "
                    f"{damage.file} is damaged (round-state.json's \"{reason}\" is what `helix round-state` "
                    "derives when a round does not compare with the baseline); re-establish the baseline with "
                    f"`helix prepare-baseline --force`, then refill the round with `helix round-state --round-dir "
                    f"{name} ...`")
        elif text == f"cannot parse baseline perf file {damage.file}":
            text += "; re-establish it with `helix prepare-baseline --force`"
        out.append(text)
    if not any(damage.file in text for text in out):
        out.append(f"baseline perf file {damage.file} is damaged; re-establish it with `helix prepare-baseline --force`")
    return out


#: Why a compared round is not promoted when submit-round never accepted it (the promotion
#: rule's reason; the round's comparison with the baseline is still shown).
NOT_ACCEPTED = "submit-round has not accepted it (never submitted)"
NOT_ACCEPTED_ACTIVE = "submit-round has not accepted it yet (the active round)"


def _promote(snap: Any, metric: str | None, results: dict[int, RoundResult], skipped: dict[int, str],
             base_records: list[PerfRecord], statuses: Mapping[int, str | None],
             noise_margin: float | NoiseMargins, memo: EvaluationMemo | None = None,
             previous: EvaluationMemo | None = None, reread: Collection[int] | None = None) -> Promotion:
    """The promotion rule over every round: eligible when the status rules compared it and
    submit-round accepted it (its workflow status, or the one ``statuses`` gives, is passed: a
    round never submitted, or still active, is measured but never the promoted best).
    ``reread``: as for ``evaluate``."""
    rounds = snap.rounds
    order = sorted(rounds)
    # every round's status given (the snapshot's own, in a load): those statuses, the same dict
    in_effect = statuses if statuses.keys() == rounds.keys() \
        else {n: statuses.get(n, rounds[n].workflow_status) for n in order}
    kept = previous.candidates if previous is not None and memo is not None else {}
    made: dict[int, tuple[tuple[Any, ...], Candidate]] = {}

    def candidate(n: int) -> None:
        view = rounds[n]
        result = results.get(n)
        why = skipped.get(n)
        if in_effect[n] == "failed":
            why = "submit-round rejected it"
        elif in_effect[n] != "passed" and why is None:  # only a round submit-round accepted is promoted
            why = NOT_ACCEPTED_ACTIVE if in_effect[n] == "active" else NOT_ACCEPTED
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
