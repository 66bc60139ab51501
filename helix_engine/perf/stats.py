"""Sample statistics and bootstrap confidence intervals for perf comparisons.

Upstream compares one average per case and cannot tell a real speedup from noise. When both
perf files carry raw samples (``samples_us``) the evaluation core (perf/evaluation.py)
bootstraps each speedup statistic it prints (the ratio of means, upstream's number, and the
ratio of medians, robust to the occasional slow outlier) with these functions, and calls a
verdict with Criterion's rule: significant at 0.05 (the 95% CI excludes 1) *and* outside ±1%.

numpy is imported inside the functions so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from helix_engine.workspace.models import SampleStats

#: Bootstrap resamples; 2000 keeps the 2.5/97.5 percentiles stable to ~1e-3 relative.
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
#: Fixed seed: the same inputs always give the same CI (reports must not flicker).
DEFAULT_SEED = 20260720
#: Noise band of the verdict: a speedup within ±1% is never called faster/slower.
NOISE_BAND = 0.01
#: Samples kept per case in a perf file.
DEFAULT_SAMPLE_CAP = 2000

Verdict = Literal["faster", "slower", "within-noise", "unpaired"]
Statistic = Literal["mean", "median"]
#: Resamples drawn per numpy call when bootstrapping means (bounds the index matrix's memory).
_MEAN_CHUNK_VALUES = 2_000_000


class SpeedupCI(NamedTuple):
    """Speedup b/c as the ratio of medians, with its bootstrap CI."""

    point: float
    low: float
    high: float


def _clean(samples: Sequence[float], what: str = "samples") -> list[float]:
    values = list(map(float, samples))
    if not values:
        raise ValueError(f"no {what}: need at least one timing value")
    if not all(map(math.isfinite, values)):
        raise ValueError(f"{what} contain NaN or infinite values")
    return values


def summarize(samples_us: Sequence[float]) -> SampleStats:
    """Median, mean, p10, p90, sample stdev and Tukey outliers (outside 1.5·IQR of Q1/Q3).

    Percentiles use linear interpolation (numpy's default). Raises ValueError on an empty or
    non-finite list (writers must not produce one).
    """
    import numpy as np

    values = np.asarray(_clean(samples_us), dtype=float)
    q1, q3 = np.percentile(values, [25, 75])
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    outliers = int(np.count_nonzero((values < low_fence) | (values > high_fence)))
    stdev = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return SampleStats(
        median=float(np.median(values)),
        mean=float(np.mean(values)),
        p10=float(np.percentile(values, 10)),
        p90=float(np.percentile(values, 90)),
        stdev=stdev,
        n=int(values.size),
        n_outliers=outliers,
    )


def cap_samples(samples: Sequence[float], cap: int = DEFAULT_SAMPLE_CAP) -> list[float]:
    """At most ``cap`` samples, taken evenly across the run (keeps drift visible, keeps order)."""
    values = [float(v) for v in samples]
    n = len(values)
    if cap <= 0:
        return []
    if n <= cap:
        return values
    return [values[(i * n) // cap] for i in range(cap)]


def _bootstrap_medians(values: list[float], n_resamples: int, rng: Any) -> Any:
    """Medians of ``n_resamples`` bootstrap resamples (size n, with replacement) of ``values``.

    Exact and O(n_resamples) instead of O(n·n_resamples): with x sorted, a resample drawn as
    indices floor(n·U_j) (U_j uniform) has its k-th smallest value at x[floor(n·U_(k))], and
    the k-th order statistic of n uniforms is Beta(k, n−k+1). For even n the median averages
    order statistics k and k+1; given U_(k)=u, U_(k+1) = u + (1−u)·Beta(1, n−k).
    """
    import numpy as np

    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    k = (n + 1) // 2 if n % 2 else n // 2
    u1 = rng.beta(k, n - k + 1, size=n_resamples)
    low = x[np.minimum((u1 * n).astype(np.int64), n - 1)]
    if n % 2:
        return low
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k, size=n_resamples)
    high = x[np.minimum((u2 * n).astype(np.int64), n - 1)]
    return (low + high) / 2.0


def bootstrap_medians_bruteforce(values: Sequence[float], n_resamples: int, seed: int) -> Any:
    """The textbook resampling version of ``_bootstrap_medians`` (tests compare the two)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arr = np.asarray(values, dtype=float)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    return np.median(arr[idx], axis=1)


def _percentile_ci(dist: Any, confidence: float, tail: float | None = None) -> tuple[float, float]:
    """The percentile interval; ``tail`` (each end's probability) overrides (1 - confidence)/2."""
    import numpy as np

    alpha = (1.0 - confidence) / 2.0 if tail is None else tail
    low, high = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def median_ratio(b_samples: Sequence[float], c_samples: Sequence[float]) -> float:
    return statistic_of(b_samples, "median") / statistic_of(c_samples, "median")


def bootstrap_speedup_ci(
    b_samples: Sequence[float],
    c_samples: Sequence[float],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> SpeedupCI:
    """Bootstrap CI of the speedup median(b)/median(c) (deterministic; contains its point)."""
    dist = ratio_bootstrap(b_samples, c_samples, "median", seed=seed, n_resamples=n_resamples)
    point = median_ratio(b_samples, c_samples)
    low, high = interval_around(dist, point, point, confidence)
    return SpeedupCI(point, low, high)


def bootstrap_geomean_ci(
    sample_pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> SpeedupCI:
    """CI of the geomean of per-case median ratios, every case resampled in each iteration."""
    if not sample_pairs:
        raise ValueError("no cases with samples")
    dists = [ratio_bootstrap(b, c, "median", seed=seed, n_resamples=n_resamples) for b, c in sample_pairs]
    point = math.exp(sum(math.log(median_ratio(b, c)) for b, c in sample_pairs) / len(sample_pairs))
    low, high = interval_around(geomean_distribution(dists), point, point, confidence)
    return SpeedupCI(point, low, high)


def verdict(ci: SpeedupCI, noise_band: float = NOISE_BAND) -> Verdict:
    """faster / slower only when the CI excludes 1 *and* the point is outside ±noise_band."""
    if ci.low > 1.0 and ci.point > 1.0 + noise_band:
        return "faster"
    if ci.high < 1.0 and ci.point < 1.0 - noise_band:
        return "slower"
    return "within-noise"


# ------------------------------------------------------------ small-sample honesty


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3/26.7.4)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df == 1:
        return 2.0 * theta / math.pi
    if df % 2:
        term = acc = c
        for k in range(3, df - 1, 2):
            term *= c * c * (k - 1) / k
            acc += term
        return 2.0 / math.pi * (theta + s * acc)
    term = acc = 1.0
    for k in range(2, df - 1, 2):
        term *= c * c * (k - 1) / k
        acc += term
    return s * acc


@functools.lru_cache(maxsize=512)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``df`` degrees of freedom: exact (bisection
    on the closed-form CDF) up to 1000 df, the normal quantile's Cornish-Fisher series beyond.
    numpy has no t distribution and scipy is not a dependency."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df >= 1, not p={p}, df={df}")
    if df > 1000:
        import statistics  # where used: ~5 ms of every `helix status`'s imports, most never need it

        z = statistics.NormalDist().inv_cdf(p)
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    target, low, high = 2.0 * p - 1.0, 0.0, 1.0
    while _t_two_sided(high, df) < target:
        high *= 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        low, high = (mid, high) if _t_two_sided(mid, df) < target else (low, mid)
    return (low + high) / 2.0


def expanded_tail(confidence: float, n_units: int | None, df: int | None = None) -> float:
    """The tail probability to cut from each end of a bootstrap distribution built from
    ``n_units`` independent units (blocks, or samples), so the interval covers as a t interval
    would (Hesterberg's expanded percentile interval: alpha'/2 = Phi(-sqrt(n/(n-1)) t_{alpha/2,df})).

    Why: a plain percentile bootstrap is too narrow with few units (it uses the plug-in variance,
    n-1 over n of the unbiased one, and normal instead of t quantiles). Simulated on A/A data
    with 8 ABBA blocks it excluded the true 1.0 in 15% (ratio of means) and 9% (ratio of
    medians) of cases instead of 5%; with 3 blocks in a quarter of them. ``df`` defaults to n-1."""
    alpha = (1.0 - confidence) / 2.0
    if n_units is None or n_units < 2:
        return alpha
    dof = max(1, df if df is not None else n_units - 1)
    z = math.sqrt(n_units / (n_units - 1)) * t_quantile(1.0 - alpha, dof)
    import statistics

    return statistics.NormalDist().cdf(-z)


# ------------------------------------------------------------ the evaluation core's bootstrap


def content_seed(values: Sequence[float], statistic: Statistic, seed: int = DEFAULT_SEED) -> int:
    """A fixed seed per sample set and statistic: the same samples always resample the same way
    (a case's interval never depends on which other cases or rounds it is compared with, and a
    cache can share one side's distribution between comparisons), while two different sample
    sets resample independently."""
    import numpy as np

    digest = zlib.crc32(np.asarray(values, dtype=float).tobytes(), zlib.crc32(statistic.encode()))
    return (seed ^ digest) & 0xFFFFFFFF


#: Distinct sample sets whose checked values, statistics and seeds are remembered (a case's
#: samples recur in every comparison it is part of: the baseline's in every round's).
_SAMPLE_SETS = 2048


@functools.lru_cache(maxsize=_SAMPLE_SETS)
def _checked(values: tuple[float, ...], what: str) -> tuple[float, ...]:
    """``_clean`` once per distinct sample set (an error is raised again on every call)."""
    return tuple(_clean(values, what))


_seed_of = functools.lru_cache(maxsize=_SAMPLE_SETS)(content_seed)


def statistic_of(samples: Sequence[float], statistic: Statistic) -> float:
    """The median or mean of ``samples`` (pure Python: faster than numpy for a case's few
    hundred samples), computed once per distinct sample set and statistic."""
    return _statistic_of(tuple(samples), statistic)


@functools.lru_cache(maxsize=_SAMPLE_SETS)
def _statistic_of(samples: tuple[float, ...], statistic: Statistic) -> float:
    values = _clean(samples)
    if statistic == "median":
        import statistics

        return statistics.median(values)
    return math.fsum(values) / len(values)


def _bootstrap_means(values: list[float], n_resamples: int, rng: Any) -> Any:
    """Means of ``n_resamples`` bootstrap resamples (size n, with replacement), in chunks."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    n = x.size
    out = np.empty(n_resamples, dtype=float)
    chunk = max(1, _MEAN_CHUNK_VALUES // n)
    for start in range(0, n_resamples, chunk):
        k = min(chunk, n_resamples - start)
        out[start:start + k] = x[rng.integers(0, n, size=(k, n), dtype=np.int32)].mean(axis=1)
    return out


@functools.lru_cache(maxsize=4096)
def _side_distribution(values: tuple[float, ...], statistic: Statistic, n_resamples: int, seed: int) -> Any:
    """Bootstrap distribution of one side's statistic (float32: 8 kB per side at 2000 resamples,
    precise to 1e-7, far below what is printed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draw = _bootstrap_medians if statistic == "median" else _bootstrap_means
    dist = np.asarray(draw(list(values), n_resamples, rng), dtype=np.float32)
    dist.setflags(write=False)  # shared by every caller through the cache
    return dist


def ratio_bootstrap(b_samples: Sequence[float], c_samples: Sequence[float], statistic: Statistic, *,
                    seed: int = DEFAULT_SEED, n_resamples: int = DEFAULT_RESAMPLES) -> Any:
    """Bootstrap distribution (numpy array) of stat(b*)/stat(c*), stat = mean or median, the two
    sides resampled independently. Each side's distribution is cached on its samples: the
    snapshot, the panes and the promotion rule compare the same baseline and rounds again and
    again (a round against the baseline, then against the best before it)."""
    b = _checked(tuple(b_samples), "baseline samples")
    c = _checked(tuple(c_samples), "compare samples")
    if min(b) <= 0 or min(c) <= 0:
        raise ValueError("samples must all be > 0")
    b_dist = _side_distribution(b, statistic, n_resamples, _seed_of(b, statistic, seed))
    c_dist = _side_distribution(c, statistic, n_resamples, _seed_of(c, statistic, seed))
    return b_dist.astype(float) / c_dist


def interval_around(dist: Any, point: float, sample_point: float,
                    confidence: float = DEFAULT_CONFIDENCE, n_units: int | None = None,
                    df: int | None = None) -> tuple[float, float]:
    """The 95% interval of the printed ``point``, from a bootstrap ``dist`` of the same statistic.

    ``n_units``: how many independent units (blocks, or samples) the bootstrap resampled; the
    interval is then expanded for their number (``expanded_tail``). ``sample_point`` is the
    statistic of the kept samples (the ratio of sample means may differ a little from the ratio
    of the records' averages when the samples were capped); the percentile interval is moved by
    point/sample_point so it describes the printed number. A percentile interval can still miss
    its own point when a few outliers make the distribution lumpy; it is then widened to reach
    the point: never narrower, so a verdict can only get more careful.
    """
    low, high = _percentile_ci(dist, confidence, expanded_tail(confidence, n_units, df))
    if n_units is not None and n_units >= 2 and math.isfinite(sample_point) and sample_point > 0:
        # a percentile interval cannot reach past its most extreme resample: with 3 or 4 units
        # that is far narrower than a t interval; take the t interval of the bootstrap's log
        # spread as well (the wider of the two)
        half = _t_half_width(dist, confidence, n_units, df)
        low, high = min(low, sample_point * math.exp(-half)), max(high, sample_point * math.exp(half))
    scale = point / sample_point if sample_point > 0 and math.isfinite(sample_point) else 1.0
    low, high = low * scale, high * scale
    return min(low, point), max(high, point)


def _t_half_width(dist: Any, confidence: float, n_units: int, df: int | None) -> float:
    """sqrt(n/(n-1)) * t_{df} * s: the half-width, in log space, of a t interval whose standard
    error s the bootstrap estimated, robustly: half the distance between the 15.9th and 84.1st
    percentiles of log(dist) (the standard deviation for a normal distribution; a few extreme
    resamples, e.g. one preempted block drawn three times, do not inflate it)."""
    import numpy as np

    logs = np.log(np.asarray(dist, dtype=float))
    low, high = np.percentile(logs, [15.865525393145708, 84.13447460685429]) if logs.size > 1 else (0.0, 0.0)
    sd = float(high - low) / 2.0
    dof = max(1, df if df is not None else n_units - 1)
    return math.sqrt(n_units / (n_units - 1)) * t_quantile(1.0 - (1.0 - confidence) / 2.0, dof) * sd


def geomean_distribution(dists: Sequence[Any]) -> Any:
    """exp(mean(log r_i)) per bootstrap iteration: every case resampled in each iteration."""
    import numpy as np

    if not dists:
        raise ValueError("no cases with samples")
    logs = np.zeros(len(dists[0]), dtype=float)
    for dist in dists:
        logs += np.log(dist)
    return np.exp(logs / len(dists))
