"""The adaptive probe's stopping rule (perf/sequential.py), on seeded simulations of paired blocks.

Each trial measures like the adaptive probe does (adaptive.batch_blocks: MIN_BLOCKS blocks first,
then half as many as there are, one AB/BA block = one slot per side) and looks after each batch.
"""

from __future__ import annotations

import math
import random

import pytest

from helix_engine.eval.adaptive import batch_blocks
from helix_engine.perf.paired import MIN_BLOCKS, Block, block_order
from helix_engine.perf.sequential import ALPHA, decide, look_at, look_confidence


def trial(rng: random.Random, factor: float, *, n_cases: int = 3, reps: int = 3, sigma: float = 0.03,
          drift_sd: float = 0.02, p_outlier: float = 0.03, max_looks: int = 4, margin: float | None = None,
          alpha: float = ALPHA) -> tuple[str, int]:
    """(decision, looks) of one probe: the candidate takes ``factor`` times the reference's time;
    every block shares a random drift, samples carry log-normal noise and rare 2-20x outliers."""
    blocks: dict[str, list[Block]] = {f"latency-c{i}": [] for i in range(n_cases)}
    for look in range(1, max_looks + 1):
        for found in blocks.values():
            for _ in range(batch_blocks(look, len(found))):
                drift = math.exp(rng.gauss(0, drift_sd))
                block = Block([], [])
                for side in block_order(len(found), per_side=1):
                    for _ in range(reps):
                        value = 100.0 * drift * (factor if side == "candidate" else 1.0) * math.exp(rng.gauss(0, sigma))
                        if rng.random() < p_outlier:
                            value *= rng.uniform(2, 20)
                        getattr(block, side).append(value)
                found.append(block)
        seen = look_at(blocks, look, margins=margin, alpha=alpha)
        if seen.decision != "unsettled":
            return seen.decision, look
    return "unsettled", max_looks


def test_looks_share_the_error_probability() -> None:
    widths = [1 - look_confidence(j) for j in range(1, 10_000)]
    assert sum(widths) <= ALPHA and widths == sorted(widths, reverse=True)
    assert look_confidence(1) == pytest.approx(1 - ALPHA / 2)
    with pytest.raises(ValueError):
        look_confidence(0)


@pytest.mark.parametrize(("low", "high", "expected"), [
    (1.02, 1.10, "faster"), (0.90, 0.98, "slower"), (0.995, 1.005, "equivalent"),
    (0.999, 1.02, "unsettled"), (1.005, 1.03, "unsettled"), (0.98, 1.02, "unsettled")])
def test_settled_only_wholly_beyond_or_wholly_inside_the_margin(low: float, high: float, expected: str) -> None:
    assert decide(low, high, 0.01) == expected


def test_identical_sides_are_never_called_faster_or_slower() -> None:
    """A/A under drift, noise and outliers: 30 probes of up to 4 looks, none settles on a
    difference (each look alone would: see the next test)."""
    rng = random.Random(20261201)
    found = [trial(rng, 1.0)[0] for _ in range(30)]
    assert found.count("faster") + found.count("slower") == 0


def test_the_widening_per_look_is_what_keeps_a_a_false_verdicts_rare() -> None:
    """With no margin to hide behind, the rule's A/A false-verdict rate stays near its ALPHA; a rule
    that spends no alpha (every look at 50%, then 83%, ...) calls a difference far more often."""
    def false_rate(alpha: float) -> float:
        rng = random.Random(3)
        found = [trial(rng, 1.0, drift_sd=0.0, p_outlier=0.0, n_cases=2, max_looks=3, margin=0.0, alpha=alpha)[0]
                 for _ in range(30)]
        return (found.count("faster") + found.count("slower")) / len(found)

    assert false_rate(ALPHA) <= 2 / 30
    assert false_rate(1.0) >= 5 / 30


def test_a_real_five_percent_change_is_detected_in_one_or_two_looks() -> None:
    rng = random.Random(7)
    found = [trial(rng, 1 / 1.05, n_cases=4, max_looks=6) for _ in range(40)]
    assert sum(d == "faster" for d, _ in found) >= 0.95 * len(found)
    assert sum(looks for _, looks in found) / len(found) <= 2
    slower = [trial(rng, 1.05, n_cases=4, max_looks=6)[0] for _ in range(10)]
    assert slower.count("slower") >= 9


def test_a_quiet_a_a_pair_settles_as_equivalent_at_the_first_look() -> None:
    rng = random.Random(11)
    found = [trial(rng, 1.0, sigma=0.002, drift_sd=0.001, p_outlier=0.0) for _ in range(10)]
    assert found == [("equivalent", 1)] * 10


def test_too_few_blocks_never_settle() -> None:
    blocks = {"latency-a": [Block([100.0] * 3, [50.0] * 3)] * (MIN_BLOCKS - 1)}
    seen = look_at(blocks, 1)
    assert seen.decision == "unsettled" and seen.speedups == (pytest.approx(2.0),)
