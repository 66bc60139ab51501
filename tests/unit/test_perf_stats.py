"""Sample statistics, bootstrap CIs, verdicts, and the CI lines compare-perf appends."""

from __future__ import annotations

import math

import pytest

from helix_engine.perf import stats
from helix_engine.perf.compare import (
    NO_SAMPLES_NOTE,
    UNUSABLE_SAMPLES_NOTE,
    compare_records,
    format_comparison,
)
from helix_engine.perf.margins import NoiseMargins
from helix_engine.workspace.models import PerfRecord

#: two files benched in separate jobs get a verdict only by a measured drift between jobs (issue
#: 28 item 5): 1% here, as `helix calibrate` would store it, so the verdict mechanics are what is tested
DRIFT = NoiseMargins(per_case_unpaired={f"latency-{x}": 0.01 for x in ("a", "fast", "noise", "slow")})


def noisy(center: float, n: int = 60, spread: float = 0.02) -> list[float]:
    """Deterministic samples around ``center`` (±spread relative, a fixed zig-zag pattern)."""
    return [center * (1.0 + spread * (((i * 7) % 11) - 5) / 5.0) for i in range(n)]


def case(label: str, samples: list[float] | None, mean: float | None = None) -> PerfRecord:
    value = mean if mean is not None else (sum(samples) / len(samples) if samples else 1.0)
    return PerfRecord(case_label=label, kernel_avg_time_us=value, total_op_avg_time_us=value,
                      bench_mode="perf-counter", samples_us=samples)


# ------------------------------------------------------------------------------ summarize


def test_summarize_against_hand_arithmetic() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.n == 5
    assert s.median == 3.0
    assert s.mean == 22.0  # 110 / 5
    # deviations -21 -20 -19 -18 78 → squares sum 7610 → /4 = 1902.5 → sqrt
    assert s.stdev == pytest.approx(math.sqrt(1902.5))
    # linear percentiles: p10 at index 0.4 → 1.4; p90 at index 3.6 → 4 + 0.6·96 = 61.6
    assert s.p10 == pytest.approx(1.4)
    assert s.p90 == pytest.approx(61.6)
    # Q1 = 2, Q3 = 4, IQR = 2, fences -1 and 7 → only 100 is an outlier
    assert s.n_outliers == 1


def test_summarize_single_sample_and_bad_input() -> None:
    s = stats.summarize([5.0])
    assert (s.median, s.mean, s.p10, s.p90, s.stdev, s.n, s.n_outliers) == (5.0, 5.0, 5.0, 5.0, 0.0, 1, 0)
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.summarize([1.0, math.nan])


def test_cap_samples_keeps_order_and_spreads_over_the_run() -> None:
    values = [float(i) for i in range(10)]
    assert stats.cap_samples(values, cap=20) == values
    # i·n//cap for i in 0..4 with n=10, cap=5 → indices 0, 2, 4, 6, 8
    assert stats.cap_samples(values, cap=5) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert len(stats.cap_samples([1.0] * 5000)) == 2000
    assert stats.cap_samples(values, cap=0) == []


# ------------------------------------------------------------------------------ bootstrap


def test_bootstrap_ci_is_deterministic_and_brackets_the_point() -> None:
    b, c = noisy(10.0), noisy(8.0)
    first = stats.bootstrap_speedup_ci(b, c)
    assert first == stats.bootstrap_speedup_ci(b, c)
    assert first.low <= first.point <= first.high
    # medians of the two zig-zags scale exactly: 10/8
    assert first.point == pytest.approx(1.25)
    assert 1.2 < first.low < 1.25 < first.high < 1.3


def test_identical_single_valued_samples_give_a_zero_width_ci() -> None:
    ci = stats.bootstrap_speedup_ci([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert ci == stats.SpeedupCI(2.0, 2.0, 2.0)


def test_bootstrap_rejects_non_positive_samples() -> None:
    with pytest.raises(ValueError):
        stats.bootstrap_speedup_ci([1.0, 0.0], [1.0, 1.0])


@pytest.mark.parametrize(
    ("ci", "expected"),
    [
        (stats.SpeedupCI(1.25, 1.20, 1.30), "faster"),
        (stats.SpeedupCI(0.80, 0.75, 0.85), "slower"),
        (stats.SpeedupCI(1.005, 1.001, 1.009), "within-noise"),  # significant but inside ±1%
        (stats.SpeedupCI(0.995, 0.991, 0.999), "within-noise"),
        (stats.SpeedupCI(1.10, 0.95, 1.25), "within-noise"),  # outside ±1% but CI spans 1
        (stats.SpeedupCI(0.90, 0.80, 1.02), "within-noise"),
    ],
)
def test_verdict_rule(ci: stats.SpeedupCI, expected: str) -> None:
    assert stats.verdict(ci) == expected


def test_geomean_ci_resamples_every_case() -> None:
    pairs = [(noisy(10.0), noisy(8.0)), (noisy(20.0), noisy(20.0))]
    geo = stats.bootstrap_geomean_ci(pairs)
    # point = sqrt(1.25 · 1.0)
    assert geo.point == pytest.approx(math.sqrt(1.25))
    assert geo.low < geo.point < geo.high
    assert geo == stats.bootstrap_geomean_ci(pairs)
    with pytest.raises(ValueError):
        stats.bootstrap_geomean_ci([])


# --------------------------------------------------------------------- compare-perf + CI


def test_clearly_faster_slower_and_noise_cases_get_their_verdicts() -> None:
    base = [case("fast", noisy(10.0)), case("noise", noisy(10.0, spread=0.05)), case("slow", noisy(10.0))]
    comp = [case("fast", noisy(7.0)), case("noise", noisy(10.0, spread=0.05)[::-1]), case("slow", noisy(13.0))]
    assert {c.mean.verdict for c in compare_records(base, comp).cases} == {"unpaired"}  # no drift measured
    result = compare_records(base, comp, noise_margin=DRIFT)
    expected = {"latency-fast": "faster", "latency-noise": "within-noise", "latency-slow": "slower"}
    for statistic in ("mean", "median"):  # each statistic has its own interval and verdict
        assert {c.latency_id: getattr(c, statistic).verdict for c in result.cases} == expected
        assert all(getattr(c, statistic).interval is not None for c in result.cases)
    assert result.geomean is not None and result.geomean.interval is not None
    assert result.geomean_median is not None and result.geomean_median.interval is not None
    # point geomean of median ratios: (10/7 · 1 · 10/13) ** (1/3) ≈ 1.0317
    assert result.geomean_median.point == pytest.approx((10 / 7 * 10 / 13) ** (1 / 3))
    low, high = result.geomean_median.ci95  # type: ignore[misc]
    assert low <= result.geomean_median.point <= high
    text = format_comparison(result)
    lines = text.splitlines()
    start = lines.index("Speedup 95% CI (bootstrap, ratio of means):")
    assert lines[: start][-1] == "PASS: compared 3 latency entries"  # upstream block untouched
    assert lines[start + 1].startswith("  latency-fast: 1.429x [") and lines[start + 1].endswith("] faster")
    assert lines[start + 3].endswith("] slower")
    assert lines[start + 4] == "Speedup 95% CI (bootstrap, ratio of medians):"
    geo_lines = [line for line in lines if line.startswith("Geomean speedup 95% CI")]
    # the upstream "Geomean speedup: 1.03x" is the ratio-of-means point printed beside its interval
    upstream = next(line for line in lines if line.startswith("Geomean speedup: "))
    assert geo_lines[0].startswith(f"Geomean speedup 95% CI (ratio of means): {result.geomean.point:.3f}x [")
    assert f"{result.geomean.point:.2f}x" in upstream
    assert geo_lines[1].startswith("Geomean speedup 95% CI (ratio of medians): 1.032x [")
    assert all(len(line) <= 80 for line in lines)


def test_no_samples_on_one_side_means_no_ci() -> None:
    base = [case("a", noisy(10.0))]
    comp = [case("a", None, mean=8.0)]
    result = compare_records(base, comp)
    assert result.cases[0].mean.interval is None and result.cases[0].mean.verdict is None
    assert result.cases[0].median is None
    assert result.ci_note == NO_SAMPLES_NOTE
    assert format_comparison(result).endswith(
        "PASS: compared 1 latency entries\n" + NO_SAMPLES_NOTE + "\n"
    )


def test_too_few_samples_give_no_ci() -> None:
    result = compare_records([case("a", [10.0, 10.0])], [case("a", [5.0, 5.0])])
    assert result.cases[0].mean.interval is None and result.ci_note == UNUSABLE_SAMPLES_NOTE


def test_some_cases_without_samples_get_no_geomean_ci() -> None:
    base = [case("a", noisy(10.0)), case("b", None, mean=5.0)]
    comp = [case("a", noisy(5.0)), case("b", None, mean=5.0)]
    result = compare_records(base, comp, noise_margin=DRIFT)
    assert result.cases[0].mean.verdict == "faster" and result.cases[1].mean.verdict is None
    assert result.geomean is not None and result.geomean.interval is None
    assert result.geomean_median is None  # case b has no samples, so no median
    assert result.ci_note == "No geomean CI: 1 of 2 cases lack usable samples."


def test_with_ci_false_skips_the_bootstrap() -> None:
    result = compare_records([case("a", noisy(10.0))], [case("a", noisy(5.0))], with_ci=False)
    assert result.cases[0].mean.interval is None and result.ci_note is None
    assert result.cases[0].median is not None and result.cases[0].median.point == pytest.approx(2.0)
    assert format_comparison(result).endswith("PASS: compared 1 latency entries\n")


def test_long_ids_wrap_to_stay_within_80_columns() -> None:
    label = "x" * 60
    result = compare_records([case(label, noisy(10.0))], [case(label, noisy(5.0))])
    lines = format_comparison(result).splitlines()
    start = lines.index("Speedup 95% CI (bootstrap, ratio of means):")
    assert lines[start + 1] == f"  latency-{label}:"
    assert lines[start + 2].startswith("    2.000x [") and len(lines[start + 2]) <= 80


@pytest.mark.parametrize("n", [1, 2, 5, 6, 51])
def test_order_statistic_bootstrap_matches_resampling(n: int) -> None:
    """The O(R) sampler of resample medians has the same distribution as brute resampling."""
    import numpy as np

    values = [float((i * 37) % 101) + 1.0 for i in range(n)]
    fast = stats._bootstrap_medians(values, 20_000, np.random.default_rng(1))
    slow = stats.bootstrap_medians_bruteforce(values, 20_000, seed=2)
    # Kolmogorov–Smirnov distance between the two empirical distributions (20k draws each:
    # sampling noise alone stays far below 0.02)
    grid = np.union1d(fast, slow)
    cdf_fast = np.searchsorted(np.sort(fast), grid, side="right") / fast.size
    cdf_slow = np.searchsorted(np.sort(slow), grid, side="right") / slow.size
    assert float(np.max(np.abs(cdf_fast - cdf_slow))) < 0.02


def _split(label: str, kernel_samples: list[float], total_extra: float) -> PerfRecord:
    """A profiler-style record: samples are the kernel sum; total-op adds another op."""
    kernel = sum(kernel_samples) / len(kernel_samples)
    return PerfRecord(case_label=label, kernel_avg_time_us=kernel,
                      total_op_avg_time_us=kernel + total_extra, bench_mode="torch-npu-profiler",
                      samples_us=kernel_samples)


def test_kernel_samples_are_not_used_for_a_total_op_comparison() -> None:
    base, comp = [_split("a", noisy(10.0), 5.0)], [_split("a", noisy(5.0), 5.0)]
    kernel = compare_records(base, comp, metric="kernel", noise_margin=DRIFT)
    assert kernel.cases[0].mean.verdict == "faster"
    total = compare_records(base, comp, metric="total-op")
    assert total.cases[0].mean.interval is None and total.ci_note == UNUSABLE_SAMPLES_NOTE


def test_samples_measure_both_metrics_when_kernel_equals_total_op() -> None:
    # perf-counter style: total_op = kernel, so the samples time both views
    result = compare_records([case("a", noisy(10.0))], [case("a", noisy(5.0))], metric="total-op",
                             noise_margin=DRIFT)
    assert result.cases[0].mean.verdict == "faster"


def test_fallback_case_uses_total_op_samples_only_when_both_sides_have_them() -> None:
    err = "no resolved kernels matched profiler kernel view"
    total_only = PerfRecord(case_label="a", kernel_avg_time_us=None, total_op_avg_time_us=8.0,
                            error_message=err, bench_mode="torch-npu-profiler", samples_us=noisy(8.0))
    # auto: the compare side has no kernel time, so both sides are read as total-op; the
    # baseline's samples are kernel samples (kernel 10 ≠ total 15), so there is no CI
    result = compare_records([_split("a", noisy(10.0), 5.0)], [total_only])
    assert result.cases[0].metric == "total-op" and result.cases[0].mean.interval is None
    both = PerfRecord(case_label="a", kernel_avg_time_us=None, total_op_avg_time_us=16.0,
                      error_message=err, bench_mode="torch-npu-profiler", samples_us=noisy(16.0))
    result = compare_records([both], [total_only], noise_margin=DRIFT)
    assert result.cases[0].median.verdict == "faster" and result.cases[0].median.point == 2.0
    assert result.cases[0].mean.point == 2.0  # 16/8: the records' averages


# ------------------------------------------------------------------ small-sample honesty


@pytest.mark.parametrize(("p", "df", "table"), [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 7, 2.3646), (0.975, 30, 2.0423), (0.995, 3, 5.8409),
    (0.995, 5, 4.0321), (0.995, 10, 3.1693), (0.9995, 4, 8.6103), (0.975, 5000, 1.9604)])
def test_t_quantile_matches_the_table(p: float, df: int, table: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(table, abs=2e-4)


def test_the_expanded_tail_shrinks_with_few_units_and_vanishes_with_many() -> None:
    assert stats.expanded_tail(0.95, None) == pytest.approx(0.025)
    assert stats.expanded_tail(0.95, 8) < 0.01 < stats.expanded_tail(0.95, 30) < 0.025
    assert stats.expanded_tail(0.95, 100_000) == pytest.approx(0.025, rel=1e-3)
