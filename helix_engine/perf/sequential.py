"""The adaptive probe's stopping rule: stop as soon as the verdict is statistically settled.

``probe-bench --adaptive`` measures candidate and reference in one job, in paired blocks (AB, then
BA), and looks at the data after each batch. A look asks the evaluation core for the geomean of
the per-case ratios of medians with its block-bootstrap interval (the same numbers compare-perf
prints for a paired run) and settles when that interval lies

* wholly above 1 + margin: ``faster``; wholly below 1 - margin: ``slower``;
* wholly inside [1 - margin, 1 + margin]: ``equivalent`` (no change worth the name);

otherwise it measures another batch, until the budget ends (``unsettled``).

Looking again and again at growing data and stopping at the first interval that excludes a
region would call a difference far more often than one look does. Each look j therefore uses a
wider interval, at confidence 1 - ALPHA / (j (j + 1)) (an alpha-spending rule: the looks' error
probabilities sum to at most ALPHA however many looks the budget allows), so an A/A probe calls
"faster" or "slower" with probability at most ALPHA / 2 per direction, before the margin
(which only lowers it). The margin is the case margins' mean (``helix calibrate``'s when the
workspace has them, else 1%), as for the geomean of a comparison.

Pure: the blocks in, a decision out (tests/unit/test_sequential.py simulates it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from helix_engine.perf.margins import NoiseMargins, as_margins
from helix_engine.perf.paired import MIN_BLOCKS, Block
from helix_engine.workspace.models import PerfRecord

Decision = Literal["faster", "slower", "equivalent", "unsettled"]
#: The probability, summed over every look, that a look settles on an interval that misses the
#: true geomean (the looks share it: ALPHA / (j (j + 1)) for look j).
ALPHA = 0.05


def look_confidence(look: int, alpha: float = ALPHA) -> float:
    """The confidence of look ``look`` (1-based): 1 - alpha / (look (look + 1))."""
    if look < 1:
        raise ValueError(f"looks count from 1, not {look}")
    return 1.0 - alpha / (look * (look + 1))


@dataclass(frozen=True)
class Look:
    """What one look saw and decided."""

    look: int
    decision: Decision
    n_blocks: int  # blocks per case (the fewest of any case)
    confidence: float
    margin: float
    geomean: float | None  # geomean of the per-case ratios of medians
    low: float | None
    high: float | None
    speedups: tuple[float, ...]  # per case, the ratio of medians (ratio of means without samples)


def decide(low: float, high: float, margin: float) -> Decision:
    """Settled when the interval [low, high] lies wholly beyond the margin or wholly inside it."""
    if low > 1.0 + margin:
        return "faster"
    if high < 1.0 - margin:
        return "slower"
    if low >= 1.0 - margin and high <= 1.0 + margin:
        return "equivalent"
    return "unsettled"


def _records(blocks: Mapping[str, Sequence[Block]], side: str, mode: str) -> list[PerfRecord]:
    out = []
    for lid, found in blocks.items():
        values = [v for b in found for v in (b.reference if side == "reference" else b.candidate)]
        mean = sum(values) / len(values)
        out.append(PerfRecord(case_label=lid.removeprefix("latency-"), kernel_avg_time_us=mean,
                              total_op_avg_time_us=mean, bench_mode=mode, samples_us=values))
    return out


def look_at(blocks: Mapping[str, Sequence[Block]], look: int, *,
            margins: float | NoiseMargins | None = None, mode: str = "perf-counter",
            alpha: float = ALPHA) -> Look:
    """One look: the geomean ratio of medians over the paired ``blocks`` (latency id → the case's
    blocks, reference and candidate samples each), its interval at this look's confidence, and
    the decision. Fewer than MIN_BLOCKS blocks in a case, or a case without a usable interval,
    leave the look unsettled (the point estimates are still given)."""
    from helix_engine.perf.evaluation import evaluate
    from helix_engine.perf.results import CaseEvaluation

    confidence = look_confidence(look, alpha)
    usable = {lid: found for lid, found in blocks.items() if found}
    n_blocks = min((len(found) for found in usable.values()), default=0)
    chosen = as_margins(margins)
    ev = evaluate(_records(usable, "reference", mode), _records(usable, "candidate", mode),
                  with_ci=n_blocks >= MIN_BLOCKS, noise_margin=chosen, ci_statistics=("median",),
                  blocks=usable, case_intervals=False, confidence=confidence, skip_latency_errors=True)

    def speedup(case: CaseEvaluation) -> float:
        return case.median.point if case.median is not None else case.speedup

    speedups = tuple(speedup(c) for c in ev.cases)
    margin = chosen.for_geomean([c.latency_id for c in ev.cases], "median")
    geo = ev.geomean_median
    interval = geo.interval if geo is not None else None
    if geo is None or interval is None or ev.errors or len(ev.cases) < len(usable):
        point = geo.point if geo is not None else None
        return Look(look, "unsettled", n_blocks, confidence, margin, point, None, None, speedups)
    return Look(look, decide(interval.low, interval.high, margin), n_blocks, confidence, margin, geo.point,
                interval.low, interval.high, speedups)
