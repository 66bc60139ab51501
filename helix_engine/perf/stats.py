"""Sample statistics and bootstrap confidence intervals for perf comparisons.

Upstream compares one average per case and cannot tell a real speedup from noise. When both
perf files carry raw samples (``samples_us``) we bootstrap the speedup (ratio of medians:
robust to the occasional slow outlier) and call a verdict with Criterion's rule: significant
at 0.05 (the 95% CI excludes 1) *and* outside ±1%.

numpy is imported inside the functions so importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

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

Verdict = Literal["faster", "slower", "within-noise"]


class SpeedupCI(NamedTuple):
    """Speedup b/c as the ratio of medians, with its bootstrap CI."""

    point: float
    low: float
    high: float


def _clean(samples: Sequence[float], what: str = "samples") -> list[float]:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError(f"no {what}: need at least one timing value")
    if not all(math.isfinite(v) for v in values):
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


def _bootstrap_medians(values: list[float], n_resamples: int, rng: object) -> object:
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
    u1 = rng.beta(k, n - k + 1, size=n_resamples)  # type: ignore[attr-defined]
    low = x[np.minimum((u1 * n).astype(np.int64), n - 1)]
    if n % 2:
        return low
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k, size=n_resamples)  # type: ignore[attr-defined]
    high = x[np.minimum((u2 * n).astype(np.int64), n - 1)]
    return (low + high) / 2.0


def bootstrap_medians_bruteforce(values: Sequence[float], n_resamples: int, seed: int) -> object:
    """The textbook resampling version of ``_bootstrap_medians`` (tests compare the two)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arr = np.asarray(values, dtype=float)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    return np.median(arr[idx], axis=1)


def bootstrap_ratio_distribution(
    b_samples: Sequence[float],
    c_samples: Sequence[float],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    rng: object | None = None,
    seed: int = DEFAULT_SEED,
) -> object:
    """Bootstrap distribution (numpy array) of median(b*)/median(c*)."""
    import numpy as np

    b = _clean(b_samples, "baseline samples")
    c = _clean(c_samples, "compare samples")
    if min(b) <= 0 or min(c) <= 0:
        raise ValueError("samples must all be > 0")
    gen = rng if rng is not None else np.random.default_rng(seed)
    return _bootstrap_medians(b, n_resamples, gen) / _bootstrap_medians(c, n_resamples, gen)


def _percentile_ci(dist: object, confidence: float) -> tuple[float, float]:
    import numpy as np

    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def median_ratio(b_samples: Sequence[float], c_samples: Sequence[float]) -> float:
    import numpy as np

    return float(np.median(_clean(b_samples)) / np.median(_clean(c_samples)))


def bootstrap_speedup_ci(
    b_samples: Sequence[float],
    c_samples: Sequence[float],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> SpeedupCI:
    """Percentile-bootstrap CI of the speedup median(b)/median(c) (deterministic)."""
    dist = bootstrap_ratio_distribution(b_samples, c_samples, n_resamples=n_resamples, seed=seed)
    low, high = _percentile_ci(dist, confidence)
    return SpeedupCI(median_ratio(b_samples, c_samples), low, high)


def bootstrap_geomean_ci(
    sample_pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> SpeedupCI:
    """CI of the geomean of per-case median ratios, every case resampled in each iteration.

    One bootstrap iteration resamples every case's baseline and compare samples and takes
    the geomean of the resampled ratios; the CI is the percentile interval of those geomeans.
    """
    import numpy as np

    if not sample_pairs:
        raise ValueError("no cases with samples")
    rng = np.random.default_rng(seed)
    logs = np.zeros(n_resamples, dtype=float)
    point_logs = 0.0
    for b, c in sample_pairs:
        dist = bootstrap_ratio_distribution(b, c, n_resamples=n_resamples, rng=rng)
        logs += np.log(dist)
        point_logs += math.log(median_ratio(b, c))
    k = len(sample_pairs)
    low, high = _percentile_ci(np.exp(logs / k), confidence)
    return SpeedupCI(math.exp(point_logs / k), low, high)


def verdict(ci: SpeedupCI, noise_band: float = NOISE_BAND) -> Verdict:
    """faster / slower only when the CI excludes 1 *and* the point is outside ±noise_band."""
    if ci.low > 1.0 and ci.point > 1.0 + noise_band:
        return "faster"
    if ci.high < 1.0 and ci.point < 1.0 - noise_band:
        return "slower"
    return "within-noise"
