"""Measured numbers of rounds against the canonical baseline, for the state commands.

No formula lives here: a round's comparison comes from the evaluation core (perf/evaluation.py),
and the best round from the promotion rule (perf/promotion.py) over the same snapshot that
`helix status` and the cockpit load, so the ledger, the submit guideline, `helix round-state`
and status name the same best round with the same number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from helix_engine.perf.results import Promotion, RoundEvaluation, RoundPromotion
from helix_engine.perf.round_number import round_number
from helix_engine.state import baseline as base
from helix_engine.state import checks
from helix_engine.workspace import layout, status_rules
from helix_engine.workspace.models import PerfRecord, RoundState, WorkspaceSnapshot

#: effective_metric_source → compare-perf metric (mixed is compared as auto, as upstream).
METRIC_FOR: dict[str, str] = {"kernel": "kernel", "total-op": "total-op", "mixed": "auto"}


@dataclass
class RoundMeasure:
    number: int
    state: RoundState
    metric: str
    comparison: RoundEvaluation | None
    completed: bool

    @property
    def geomean(self) -> float | None:
        c = self.comparison
        if c is None or c.errors or c.skipped:
            return None
        number = round_number(c)  # the number every screen shows (paired when measured so)
        return number.point if number is not None else None


def baseline_records(workspace: Path) -> list[PerfRecord] | None:
    from helix_engine.perf.artifact import read_perf

    path = base.baseline_perf_path(workspace)
    if path is None:
        return None
    records, _ = read_perf(path, workspace)
    return records or None


def measure_round(workspace: Path, n: int, baseline: list[PerfRecord] | None) -> RoundMeasure | None:
    """The round's compare-perf comparison with the baseline (the local-optimum window reads it,
    whatever the round's status); None when it is not terminal."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.evaluation import evaluate

    round_dir = Path(workspace) / layout.round_dir_name(n)
    if not round_dir.is_dir():
        return None
    found = checks.inspect_round(round_dir)
    if found.issues or found.state is None:
        return None
    state = found.state
    completed = state.correctness_status == "passed" and state.benchmark_status == "passed"
    metric = METRIC_FOR.get(state.effective_metric_source or "", "auto")
    comparison: RoundEvaluation | None = None
    if baseline and found.perf_path is not None and state.benchmark_status == "passed":
        records, _ = read_perf(found.perf_path, workspace)
        if records:
            from helix_engine.perf.paired import attach_paired

            comparison = evaluate(baseline, records, rule="compare-perf", metric=metric, with_ci=False)
            attach_paired(comparison, found.perf_path, base.inspect_baseline(workspace).operator_path, records,
                          workspace=workspace, ci_statistics=("mean",))
    return RoundMeasure(n, state, metric, comparison, completed)


def round_numbers(workspace: Path) -> list[int]:
    rounds, _ = layout.list_round_dirs(workspace)
    return sorted(rounds)


def evaluated(workspace: Path, *, statuses: dict[int, str] | None = None,
              exclude: Iterable[int] = ()) -> tuple[WorkspaceSnapshot, status_rules.Evaluation]:
    """The workspace through the status rules and the promotion rule. ``statuses`` overrides
    workflow statuses (submit-round records round N before .helix/state.json says it);
    ``exclude`` leaves rounds out of the promotion (a round asking who its parent is)."""
    from helix_engine.workspace.snapshot import load_workspace

    snap = load_workspace(Path(workspace))
    wanted = dict(statuses or {})
    for n in exclude:
        wanted[n] = "failed"
    ev = snap.evaluation if not wanted and snap.evaluation is not None \
        else status_rules.evaluate(snap, statuses=wanted)
    return snap, ev


def promotion(workspace: Path, *, statuses: dict[int, str] | None = None,
              exclude: Iterable[int] = ()) -> Promotion:
    return evaluated(workspace, statuses=statuses, exclude=exclude)[1].promotion


def promoted_best(workspace: Path, *, exclude: Iterable[int] = (),
                  statuses: dict[int, str] | None = None) -> RoundPromotion | None:
    """The current best round's promotion (its geomean vs the baseline), None for the baseline.
    Only a round submit-round accepted can be it; ``statuses`` as for ``evaluated`` (the round
    being submitted counts as passed before .helix/state.json says so)."""
    found = promotion(workspace, statuses=statuses, exclude=exclude)
    return found.rounds[found.best_round] if found.best_round is not None else None
