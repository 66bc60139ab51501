"""Measured numbers of rounds against the canonical baseline, through perf.compare only (no
formula copies here): the min-speedup best B, the local-optimum window and the ledger all use
these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helix_engine.state import baseline as base
from helix_engine.state import checks
from helix_engine.workspace import layout
from helix_engine.workspace.models import Comparison, PerfRecord, RoundState

#: effective_metric_source → compare-perf metric (mixed is compared as auto, as upstream).
METRIC_FOR: dict[str, str] = {"kernel": "kernel", "total-op": "total-op", "mixed": "auto"}


@dataclass
class RoundMeasure:
    number: int
    state: RoundState
    metric: str
    comparison: Comparison | None
    completed: bool

    @property
    def geomean(self) -> float | None:
        c = self.comparison
        if c is None or c.errors or c.skipped:
            return None
        return c.geomean_speedup

    @property
    def avg_improvement(self) -> float | None:
        c = self.comparison
        if c is None or c.errors or c.skipped:
            return None
        return c.avg_improvement_pct

    @property
    def mean_latency(self) -> float | None:
        return None if self.comparison is None else self.comparison.mean_latency_us


def baseline_records(workspace: Path) -> list[PerfRecord] | None:
    from helix_engine.perf.artifact import read_perf

    path = base.baseline_perf_path(workspace)
    if path is None:
        return None
    records, _ = read_perf(path, workspace)
    return records or None


def measure_round(workspace: Path, n: int, baseline: list[PerfRecord] | None) -> RoundMeasure | None:
    """The round's comparison with the baseline; None when it is not terminal."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.compare import compare_records

    round_dir = Path(workspace) / layout.round_dir_name(n)
    if not round_dir.is_dir():
        return None
    found = checks.inspect_round(round_dir)
    if found.issues or found.state is None:
        return None
    state = found.state
    completed = state.correctness_status == "passed" and state.benchmark_status == "passed"
    metric = METRIC_FOR.get(state.effective_metric_source or "", "auto")
    comparison: Comparison | None = None
    if baseline and found.perf_path is not None and state.benchmark_status == "passed":
        records, _ = read_perf(found.perf_path, workspace)
        if records:
            comparison = compare_records(baseline, records, metric=metric, with_ci=False)
    return RoundMeasure(n, state, metric, comparison, completed)


def round_numbers(workspace: Path) -> list[int]:
    rounds, _ = layout.list_round_dirs(workspace)
    return sorted(rounds)


def completed_measures(workspace: Path, baseline: list[PerfRecord] | None,
                       exclude: set[int] | None = None) -> list[RoundMeasure]:
    """Completed rounds (file rule) that have a usable geomean against the baseline."""
    out: list[RoundMeasure] = []
    for n in round_numbers(workspace):
        if exclude and n in exclude:
            continue
        measure = measure_round(workspace, n, baseline)
        if measure is not None and measure.completed and measure.geomean is not None:
            out.append(measure)
    return out


def best_geomean(measures: list[RoundMeasure]) -> float | None:
    """B: the highest geomean speedup over completed rounds."""
    values = [m.geomean for m in measures if m.geomean is not None]
    return max(values) if values else None


def best_round(measures: list[RoundMeasure]) -> RoundMeasure | None:
    """Upstream status rule: the max of (geomean, −mean latency)."""
    usable = [m for m in measures if m.geomean is not None]
    if not usable:
        return None
    return max(usable, key=lambda m: (m.geomean or 0.0, -(m.mean_latency or 0.0)))
