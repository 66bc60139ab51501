"""The promotion rule as a table: each row is a workspace's rounds (speedup of every case vs the
baseline, whether it passed) and the status the rule must give each round, plus the best.

A no-op round (~1.0x) and a round slower than the baseline are never "current best"; with no
qualifying round the best is ``baseline``. Rounds with raw samples are judged on the interval
of their geomean, rounds without (upstream files) on the point."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from helix_engine.perf import evaluation
from helix_engine.perf.promotion import Candidate, promote
from helix_engine.workspace.models import PerfRecord
from helix_engine.workspace.snapshot import load_workspace
from tests.builders import RoundSpec, build_workspace, workflow_state

BASE = {"a": 10.0, "b": 20.0}
CUR, VAL, NOT = "current best", "validated branch", "not promoted"


def scaled(speedup: float) -> dict[str, float]:
    return {k: v / speedup for k, v in BASE.items()}


@dataclass
class Row:
    rounds: list[tuple[float, str]]  # (speedup vs baseline, "passed" | "failed" correctness)
    expected: list[str]
    best: str


TABLE = {
    "no-op round at 1.0x": Row([(1.0, "passed")], [NOT], "baseline"),
    "inside the 1% margin": Row([(1.009, "passed")], [NOT], "baseline"),
    "a 0.17x round": Row([(0.17, "passed")], [NOT], "baseline"),
    "faster beyond noise": Row([(1.5, "passed")], [CUR], "round-1"),
    "failed correctness is never promoted": Row([(3.0, "failed")], [NOT], "baseline"),
    "a no-op copy of the best stays a branch": Row([(1.5, "passed"), (1.505, "passed")], [CUR, VAL], "round-1"),
    "a faster round supersedes the best": Row([(1.5, "passed"), (1.8, "passed")], [VAL, CUR], "round-2"),
    "slower than the best but faster than baseline": Row([(1.8, "passed"), (1.3, "passed")], [CUR, VAL], "round-1"),
    "a 0.17x round after a best": Row([(1.3, "passed"), (0.17, "passed")], [CUR, NOT], "round-1"),
    "a 0.06x-of-its-parent round": Row([(2.0, "passed"), (0.12, "passed"), (2.2, "passed")],
                                       [VAL, NOT, CUR], "round-3"),
}


@pytest.mark.parametrize("name", list(TABLE))
def test_promotion_table(tmp_path: Path, name: str) -> None:
    row = TABLE[name]
    specs = [RoundSpec(scaled(s), correctness=c) for s, c in row.rounds]
    ws = build_workspace(tmp_path, baseline=BASE, rounds=specs)
    snap = load_workspace(ws)
    assert snap.promotion is not None
    assert [snap.promotion.status_of(n) for n in range(1, len(row.rounds) + 1)] == row.expected
    assert snap.promotion.best_label == row.best
    for n in range(1, len(row.rounds) + 1):
        promoted = snap.promotion.rounds.get(n)
        assert promoted is not None and promoted.status == row.expected[n - 1] and promoted.reason
        if promoted.vs_baseline is not None:
            assert promoted.basis == "point"  # builders write no samples: upstream files


def test_a_round_failed_by_submit_round_is_not_promoted(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[scaled(2.0)],
                         workflow=workflow_state(rounds={1: "failed"}))
    snap = load_workspace(ws)
    assert snap.promotion is not None and snap.promotion.status_of(1) == NOT
    assert snap.promotion.rounds[1].reason == "submit-round rejected it"
    assert snap.best_round == 1  # upstream's numeric best stays as upstream computes it


# --------------------------------------------------------------------- with samples: intervals


def zigzag(center: float, spread: float, n: int = 40) -> list[float]:
    return [center * (1.0 + spread * (((i * 7) % 11) - 5) / 5.0) for i in range(n)]


def records(centers: dict[str, float], spread: float) -> list[PerfRecord]:
    out = []
    for label, center in centers.items():
        samples = zigzag(center, spread)
        avg = sum(samples) / len(samples)
        out.append(PerfRecord(case_label=label, kernel_avg_time_us=avg, total_op_avg_time_us=avg,
                              bench_mode="perf-counter", samples_us=samples))
    return out


def candidate(n: int, base: list[PerfRecord], cand: list[PerfRecord]) -> Candidate:
    ev = evaluation.evaluate(base, cand, rule="status", with_ci=False)
    return Candidate(number=n, eligible=True, records=cand, vs_baseline=ev)


def test_with_samples_a_noisy_small_gain_is_not_promoted_and_a_tight_one_is() -> None:
    base = records(BASE, 0.01)
    noisy = records({k: v / 1.03 for k, v in BASE.items()}, 0.30)  # 3% faster, ±30% noise
    tight = records({k: v / 1.03 for k, v in BASE.items()}, 0.005)  # 3% faster, ±0.5% noise
    result = promote([candidate(1, base, noisy)], base)
    verdict = result.rounds[1]
    assert verdict.status == NOT and verdict.basis == "interval"
    assert verdict.vs_baseline is not None and verdict.vs_baseline.point > 1.01  # the point alone would pass
    assert verdict.vs_baseline.interval is not None and verdict.vs_baseline.interval.low <= 1.01
    result = promote([candidate(1, base, tight)], base)
    assert result.rounds[1].status == CUR and result.rounds[1].basis == "interval"
    assert result.best_label == "round-1"


def test_with_samples_a_copy_of_the_best_is_not_significantly_faster_than_it() -> None:
    """The issue's case: a copy of round 1 with an ineffective change measured faster against
    its parent only by noise; it must not become the current best."""
    base = records(BASE, 0.01)
    best = records({k: v / 1.5 for k, v in BASE.items()}, 0.02)
    copy = records({k: v / 1.5 / 1.03 for k, v in BASE.items()}, 0.30)  # 3% "faster", ±30% noise
    result = promote([candidate(1, base, best), candidate(2, base, copy)], base)
    assert result.status_of(1) == CUR and result.status_of(2) == VAL
    second = result.rounds[2]
    assert second.previous_best == 1 and second.vs_previous_best is not None
    assert second.vs_previous_best.point > 1.01  # the point alone would have promoted it
    assert second.vs_previous_best.interval is not None and second.vs_previous_best.interval.low <= 1.01
    assert second.basis == "interval"
    # a copy within the margin is decided on the point: its interval could only agree
    within = records({k: v / 1.5 * (1 - 0.004) for k, v in BASE.items()}, 0.05)
    result = promote([candidate(1, base, best), candidate(2, base, within)], base)
    assert result.status_of(2) == VAL and result.rounds[2].basis == "point"


def test_noise_margin_is_a_parameter() -> None:
    base = records(BASE, 0.001)
    three = records({k: v / 1.03 for k, v in BASE.items()}, 0.001)
    assert promote([candidate(1, base, three)], base).status_of(1) == CUR
    assert promote([candidate(1, base, three)], base, noise_margin=0.05).status_of(1) == NOT


def test_an_ineligible_round_gives_its_reason() -> None:
    result = promote([Candidate(number=4, eligible=False, why_not="correctness_status is failed")], [])
    assert result.rounds[4].status == NOT and result.rounds[4].reason == "correctness_status is failed"
    assert result.best_round is None and result.best_label == "baseline" and result.best_geomean() is None


def test_status_does_not_flag_a_ledger_that_logs_the_promoted_best(tmp_path: Path) -> None:
    """Round 2 tops the geomean by noise (upstream's best_round), the ledger logs round 1 (the
    promotion rule's best): no 'numeric best round != logged best' warning; a ledger naming a
    round that is neither still gets it."""
    from helix_engine.status import operator_status

    for logged, warned in (("round-1", False), ("round-2", False), ("round-3", True)):
        ws = build_workspace(tmp_path / logged, baseline=BASE,
                             rounds=[scaled(1.5), scaled(1.505), scaled(1.2)], final_best=logged)
        item = operator_status(load_workspace(ws))
        assert (item.upstream_best_round, item.best_round, item.promoted_best_round) == \
            ("round-2", "round-1", "round-1")
        assert any(w.startswith("numeric best round != logged best") for w in item.warnings) is warned
