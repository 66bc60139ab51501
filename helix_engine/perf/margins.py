"""The margin of practical equivalence: how far from 1.0x a speedup must be to count.

A verdict says "faster" or "slower" only when the interval excludes 1 *and* the point lies
outside ±margin (perf/stats.verdict). The default margin is 1%; ``helix calibrate`` measures each
case's noise floor on this box (an A/A run of the baseline against itself, perf/calibration.py)
and the evaluation core then judges each case by its own margin, never below 1%. The geomean is
judged by the mean of its cases' margins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from helix_engine.workspace.filemodel import FileModel, field

#: The default margin, and the floor of every calibrated one.
DEFAULT_MARGIN = 0.01
MarginSource = Literal["default", "calibrated"]
_CASE_ALIAS = re.compile(r"^latency-case-(\d+)$")


def canonical_id(latency_id: str) -> str:
    """``latency-case-N`` and ``latency-N`` name the same case (compare-perf's alias)."""
    match = _CASE_ALIAS.match(latency_id)
    return f"latency-{match.group(1)}" if match else latency_id


class NoiseMargins(FileModel):
    """Per-case margins (fractions, e.g. 0.023 = 2.3%) and where they came from."""

    _allow_extra = False
    default: float = DEFAULT_MARGIN
    per_case: dict[str, float] = field(default_factory=dict)  # canonical latency id → margin (ratio of means)
    per_case_median: dict[str, float] = field(default_factory=dict)  # … of the ratio of medians
    #: canonical latency id → the margin for two files measured in separate jobs: the A/A drift
    #: between calibrate's jobs (its first job's reference against each later job's candidate)
    per_case_unpaired: dict[str, float] = field(default_factory=dict)
    source: MarginSource = "default"
    file: str | None = None  # the calibration file the margins came from
    note: str | None = None  # why a calibration was not used, when one exists

    def for_case(self, latency_id: str, statistic: str = "mean") -> float:
        """The case's calibrated margin for ``statistic`` (never below 1%), else the default. Each
        statistic has its own floor: one slow outlier moves a mean far more than a median."""
        if not self.per_case and not self.per_case_median:  # not calibrated (no id to look up)
            return self.default
        table = self.per_case_median if statistic == "median" else self.per_case
        found = table.get(canonical_id(latency_id))
        if found is None and statistic == "median":
            found = self.per_case.get(canonical_id(latency_id))
        return self.default if found is None else max(DEFAULT_MARGIN, found)

    def for_unpaired(self, latency_id: str) -> float | None:
        """The margin for a case whose two sides ran in separate jobs: the measured drift between
        jobs (never below 1%), or None when none was measured (then there is no verdict)."""
        found = self.per_case_unpaired.get(canonical_id(latency_id))
        return None if found is None else max(DEFAULT_MARGIN, found)

    def for_geomean(self, latency_ids: Iterable[str], statistic: str = "mean") -> float:
        if not self.per_case and not self.per_case_median:  # the same sum, without a lookup per case
            count = len(latency_ids) if isinstance(latency_ids, (tuple, list)) else sum(1 for _ in latency_ids)
            values = [self.default] * count
        else:
            values = [self.for_case(lid, statistic) for lid in latency_ids]
        return sum(values) / len(values) if values else self.default

    def describe(self, latency_ids: Iterable[str] | None = None) -> str:
        """``default 1%`` or ``calibrated per case (1.0%-3.2%, .helix/calibration.json)``."""
        if self.source == "default":
            text = f"default {self.default:.0%}"
            return f"{text} ({self.note})" if self.note else text
        ids = list(latency_ids) if latency_ids is not None else list(self.per_case)
        values = [self.for_case(lid) for lid in ids] or [self.default]
        low, high = min(values), max(values)
        span = f"{low:.1%}" if abs(high - low) < 5e-4 else f"{low:.1%}-{high:.1%}"
        return f"calibrated per case ({span}, {self.file or 'calibration'})"


def as_margins(value: float | NoiseMargins | None) -> NoiseMargins:
    """A float (the old single margin) or margins, as margins."""
    if isinstance(value, NoiseMargins):
        return value
    return NoiseMargins(default=DEFAULT_MARGIN if value is None else float(value))
