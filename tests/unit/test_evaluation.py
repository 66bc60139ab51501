"""The evaluation core: every interval contains its own point (text, JSON, every statistic), even
with outliers; times no device can measure and speedups that are not finite are case errors
with a sentence, never ``infx`` and never a best round."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helix_engine.perf import evaluation, stats
from helix_engine.perf.compare import (
    compare_records,
    comparison_to_json,
    format_comparison,
)
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.results import Interval, SpeedupEstimate
from helix_engine.workspace.models import PerfRecord
from tests.builders import Case, build_workspace

ESTIMATE_RE = re.compile(r"(\d+\.\d+)x \[(\d+\.\d+)x, (\d+\.\d+)x\]")


def record(label: str, samples: list[float] | None, value: float | None = None) -> PerfRecord:
    """A perf-counter record: the average is the mean of the samples unless ``value`` is given."""
    avg = value if value is not None else (sum(samples) / len(samples) if samples else 1.0)
    return PerfRecord(case_label=label, kernel_avg_time_us=avg, total_op_avg_time_us=avg,
                      bench_mode="perf-counter", samples_us=samples)


# ----------------------------------------------------------------- intervals contain points


def _outlier_samples(center: float, n: int, outliers: list[float], jitter: list[float]) -> list[float]:
    body = [center * (1.0 + jitter[i % len(jitter)]) for i in range(n)]
    return body + outliers


sample_sets = st.builds(
    _outlier_samples,
    center=st.floats(min_value=0.5, max_value=5000.0),
    n=st.integers(min_value=3, max_value=40),
    outliers=st.lists(st.floats(min_value=0.01, max_value=1e6), min_size=0, max_size=6),
    jitter=st.lists(st.floats(min_value=-0.05, max_value=0.05), min_size=1, max_size=7),
)


def _check_estimate(estimate: SpeedupEstimate | None) -> None:
    if estimate is not None and estimate.interval is not None:
        assert estimate.interval.low <= estimate.point <= estimate.interval.high


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(st.tuples(sample_sets, sample_sets, st.floats(min_value=0.5, max_value=2.0)),
                      min_size=1, max_size=3))
def test_every_printed_point_lies_inside_its_own_interval(cases: list[tuple[list[float], list[float], float]]) -> None:
    """Outlier-laden samples, and record averages that differ from the sample means (capped or
    profiler samples): the text lines, the JSON and the typed fields all keep each point inside
    its own interval, for the ratio of means and the ratio of medians, per case and geomean."""
    base = [record(f"c{i}", b) for i, (b, _, _) in enumerate(cases)]
    comp = [record(f"c{i}", c, value=sum(c) / len(c) * skew) for i, (_, c, skew) in enumerate(cases)]
    result = compare_records(base, comp)
    assert result.passed
    for case in result.cases:
        assert case.mean.interval is not None and case.median is not None
        _check_estimate(case.mean)
        _check_estimate(case.median)
        assert case.mean.point == pytest.approx(case.baseline_us / case.compare_us)  # upstream's number
    _check_estimate(result.geomean)
    _check_estimate(result.geomean_median)
    assert result.geomean is not None and result.geomean.point == result.geomean_speedup
    text = format_comparison(result)
    printed = ESTIMATE_RE.findall(text)
    assert len(printed) == 2 * len(cases) + 2  # each case twice (mean, median), both geomeans
    for point, low, high in printed:
        assert float(low) <= float(point) <= float(high)  # rounding is monotone: holds printed too
    data = comparison_to_json(result)
    estimates = [data["geomean_mean"], data["geomean_median"]]
    estimates += [c[k] for c in data["cases"] for k in ("speedup_mean", "speedup_median")]  # type: ignore[union-attr]
    for est in estimates:
        low, high = est["ci95"]  # type: ignore[index]
        assert low <= est["point"] <= high  # type: ignore[index,operator]
    json.dumps(data)


def test_a_percentile_interval_that_misses_its_point_is_widened_to_reach_it() -> None:
    """The ratio of record averages (the printed point) can sit outside the percentile interval
    of the sample bootstrap; the core moves the interval onto the point, then widens it."""
    import numpy as np

    dist = np.array([1.04, 1.05, 1.05, 1.06])
    low, high = stats.interval_around(dist, point=0.99, sample_point=0.99 * 0 + 1.05)
    assert low <= 0.99 <= high
    low, high = stats.interval_around(np.array([1.05] * 10), point=0.99, sample_point=0.99)
    assert (low, high) == (0.99, 1.05)  # no sample info to move it by: widened, never narrowed


def test_the_old_mixed_statistics_row_cannot_be_built() -> None:
    """``0.99x [1.05–1.05] faster``: a point beside an interval that excludes it is refused."""
    with pytest.raises(ValueError):
        SpeedupEstimate(statistic="mean", point=0.99, interval=Interval(low=1.05, high=1.05), verdict="faster")


def test_each_statistic_keeps_its_own_point_with_a_skewed_outlier() -> None:
    """One slow outlier in the candidate moves the mean far more than the median: the two rows
    differ, and each interval holds its own point."""
    base = [10.0] * 20
    cand = [5.0] * 19 + [500.0]
    drift = NoiseMargins(per_case_unpaired={"latency-a": 0.01})  # measured between jobs (calibrate)
    result = compare_records([record("a", base)], [record("a", cand)], noise_margin=drift)
    case = result.cases[0]
    assert case.mean.point == pytest.approx(10.0 / (95.0 + 500.0) * 20)  # 10 / 29.75
    assert case.median.point == pytest.approx(2.0)
    assert case.median.verdict == "faster"
    _check_estimate(case.mean)
    _check_estimate(case.median)


# ------------------------------------------------------------- times no device can measure


@pytest.mark.parametrize("tiny", [1e-308, 5e-4, 0.0])
def test_a_time_below_one_nanosecond_is_a_case_error_with_a_sentence(tmp_path: Path, tiny: float) -> None:
    base = [PerfRecord(case_label="a", kernel_avg_time_us=10.0, bench_mode="perf-counter"),
            PerfRecord(case_label="b", kernel_avg_time_us=10.0, bench_mode="perf-counter")]
    comp = [PerfRecord(case_label="a", kernel_avg_time_us=tiny, bench_mode="perf-counter"),
            PerfRecord(case_label="b", kernel_avg_time_us=5.0, bench_mode="perf-counter")]
    result = compare_records(base, comp)
    assert result.geomean is None and not result.passed
    text = format_comparison(result)
    assert "infx" not in text and "inf" not in text.lower().replace("info", "")
    rule = "must be > 0" if tiny == 0 else "is below 1 ns"
    assert text.startswith(f"FAIL: compare cannot compare 'latency-a' because compare timing {tiny} {rule}")
    skipped = compare_records(base, comp, skip_latency_errors=True)
    assert [c.latency_id for c in skipped.cases] == ["latency-b"]
    assert skipped.geomean_speedup == pytest.approx(2.0)
    assert len(skipped.problems) == 1 and skipped.problems[0].side == "compare"
    assert skipped.problems[0].message.startswith("latency-a is not compared: ")
    assert skipped.problems[0].message.endswith(".")


def test_a_speedup_that_overflows_is_a_case_error() -> None:
    base = [PerfRecord(case_label="a", kernel_avg_time_us=1e308, bench_mode="perf-counter")]
    comp = [PerfRecord(case_label="a", kernel_avg_time_us=1e-2, bench_mode="perf-counter")]
    result = compare_records(base, comp)
    assert result.geomean is None
    assert result.errors and "is not a finite number" in result.errors[0]


def test_status_never_prints_infx_nor_a_best_round_from_1e_308_times(tmp_path: Path) -> None:
    """The issue's reproduction: times of 1e-308 gave `Geomean speedup: infx` and a best round."""
    from helix_engine.status import operator_status
    from helix_engine.workspace.snapshot import load_workspace

    ws = build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0},
                         rounds=[{"a": Case(kernel_us=1e-308, total_op_us=1e-308), "b": Case(1e-308, 1e-308)}])
    snap = load_workspace(ws)
    item = operator_status(snap)
    assert item.geomean_speedup is None and item.best_round is None
    assert item.promoted_best_round == "baseline"
    assert any("is below 1 ns for opt-round-1:latency-a" in w for w in item.warnings)
    problem = next(p for p in snap.problems if "latency-a" in p.message and "1 ns" in p.message)
    assert problem.message.endswith("bench.")


# ------------------------------------------------------------------------------- live case


def test_live_case_gives_the_number_compare_perf_prints() -> None:
    base = [record("a", [10.0, 11.0, 12.0]), record("b", [4.0, 4.0, 4.0])]
    cand = {"case_label": "a", "kernel_avg_time_us": 8.0, "total_op_avg_time_us": 8.0,
            "bench_mode": "perf-counter", "samples_us": [8.0, 8.0, 8.0]}
    live = evaluation.live_case(base, cand)
    full = compare_records(base[:1], [PerfRecord.model_validate(cand)])
    assert live is not None and live.mean.point == full.cases[0].mean.point == pytest.approx(11.0 / 8.0)
    assert evaluation.live_case(base, {"case_label": "zzz", "kernel_avg_time_us": 1.0}) is None
    assert evaluation.live_case(base, {"case_label": "a", "kernel_avg_time_us": "x"}) is None
    assert evaluation.live_case(base, {"case_label": "a", "kernel_avg_time_us": 1e-308,
                                       "bench_mode": "perf-counter"}) is None


def test_intervals_are_deterministic_and_do_not_depend_on_the_other_cases() -> None:
    a_b, a_c = [10.0 + (i % 5) * 0.1 for i in range(30)], [8.0 + (i % 7) * 0.1 for i in range(30)]
    alone = compare_records([record("a", a_b)], [record("a", a_c)])
    together = compare_records([record("a", a_b), record("z", [3.0, 3.1, 3.2])],
                               [record("a", a_c), record("z", [3.0, 3.05, 3.1])])
    assert alone.cases[0].mean == together.cases[0].mean
    assert alone.cases[0].median == together.cases[0].median
    assert math.isfinite(together.geomean.interval.low)  # type: ignore[union-attr]
