"""A round decided against the best before it by a bound, its comparison computed when read
(perf/bound.py, perf/results.py ``LaterPromotion``): the same entries, field
for field, as the rule computing every comparison at once, and the bound never decides a round
near the noise limit."""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from helix_engine.perf import bound
from helix_engine.perf.results import VALIDATED, LaterPromotion, RoundPromotion, SpeedupEstimate
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import RoundSpec, build_workspace, uncached_load, write_perf

BASE = {f"c{i}": 10.0 * (i + 1) for i in range(5)}


def _entries(snap: Any) -> dict[int, dict[str, Any]]:
    return {n: dataclasses.asdict(p) for n, p in sorted(snap.promotion.rounds.items())}


def _eager(ws: Path, monkeypatch: pytest.MonkeyPatch) -> dict[int, dict[str, Any]]:
    """A fresh load, no cache, with every comparison against a best computed at once."""
    return uncached_load(ws, monkeypatch, bound, "decides", lambda *args: False, _entries)


def test_a_later_promotion_computes_once_when_read_and_equals_its_eager_entry() -> None:
    calls: list[int] = []

    def make(point: float) -> tuple[SpeedupEstimate, str]:
        calls.append(1)
        return SpeedupEstimate(statistic="mean", point=point), "not faster than round-2"

    lazy = LaterPromotion((make, 0.5), 3, VALIDATED, None, 2, "point")
    assert lazy.pending and lazy.round == 3 and lazy.previous_best == 2 and not calls
    eager = RoundPromotion(round=3, status=VALIDATED, reason="not faster than round-2",
                           vs_previous_best=SpeedupEstimate(statistic="mean", point=0.5), previous_best=2, basis="point")
    assert lazy == eager and eager == lazy and calls == [1] and not lazy.pending
    assert lazy.reason == "not faster than round-2" and lazy.vs_previous_best.point == 0.5 and calls == [1]
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert LaterPromotion((make, 0.25), 3, VALIDATED, None, 2, "point") != eager


def _times(rng: random.Random, factor: float, spread: float = 0.03) -> dict[str, float]:
    return {lab: round(v * factor * rng.uniform(1 - spread, 1 + spread), 4) for lab, v in BASE.items()}


@pytest.mark.parametrize("seed", range(6))
def test_bound_decisions_equal_the_eager_rule_on_random_workspaces(tmp_path: Path, seed: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of random speed, a few of them just at the best's noise limit, one missing a case,
    one on another metric; then a mid round made the best, reloaded: every entry equals the eager
    rule's, on a fresh load and after the reload (each compared field by field, so read)."""
    rng = random.Random(seed)
    specs: list[Any] = []
    for n in range(1, 13):
        cases = _times(rng, rng.uniform(0.6, 1.0))
        if n == 9:
            cases.pop("c4")
        specs.append(RoundSpec(cases, metric="total-op" if n == 10 else "kernel"))
    ws = build_workspace(tmp_path, baseline=BASE, rounds=specs)
    fresh = load_workspace(ws)
    assert _entries(fresh) == _eager(ws, monkeypatch)
    snap = load_workspace(ws)
    best = {lab: v * 0.5 for lab, v in BASE.items()}
    write_perf(ws / "opt-round-4" / "opt_add_perf.txt", best)
    # later rounds at the limit of the new best (1% margin) on either side, and well inside it
    for n, factor in ((6, 0.5 / 1.01), (7, 0.5 / 1.0100001), (8, 0.5 / 1.00999999), (11, 0.55)):
        write_perf(ws / f"opt-round-{n}" / "opt_add_perf.txt", {lab: v * factor for lab, v in BASE.items()})
    after = reload(snap, [ws / "opt-round-4" / "opt_add_perf.txt",
                          *(ws / f"opt-round-{n}" / "opt_add_perf.txt" for n in (6, 7, 8, 11))])
    pending = [n for n, p in after.promotion.rounds.items() if isinstance(p, LaterPromotion) and p.pending]
    assert 11 in pending or after.promotion.rounds[11].previous_best != 4
    assert _entries(after) == _eager(ws, monkeypatch) == _entries(load_workspace(ws))


def test_the_bound_leaves_a_round_near_the_noise_limit_to_the_comparison(tmp_path: Path) -> None:
    """A round whose ratio of geomeans lies within the rounding slack of the limit is compared,
    never bounded; one clearly below it is bounded (and its number read later)."""
    near = {lab: v * 0.5 / (1.01 * (1 - 1e-12)) for lab, v in BASE.items()}  # 1.01x the best, minus a hair
    clear = {lab: v * 0.6 for lab, v in BASE.items()}
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{lab: v * 0.5 for lab, v in BASE.items()}, near, clear])
    decided: list[tuple[int, bool]] = []
    original = bound.decides

    def spy(cand, *args):  # noqa: ANN001, ANN202
        found = original(cand, *args)
        decided.append((cand.number, found))
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bound, "decides", spy)
        snap = load_workspace(ws)
        assert dict(decided) == {2: False, 3: True}
        three = snap.promotion.rounds[3]
        # a full load that can keep the round cache makes the comparison before saving it ...
        assert isinstance(three, LaterPromotion) and not three.pending
        assert math.isclose(three.vs_previous_best.point, 0.5 / 0.6)
        assert snap.promotion.rounds[2].status == VALIDATED and snap.promotion.best_round == 1
        decided.clear()
        again = load_workspace(ws)  # ... so the next load knows it: the bound is not asked again
        assert 3 not in dict(decided) and again.promotion.rounds[3] == three


def test_a_full_load_that_cannot_keep_the_cache_leaves_the_comparison_to_be_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a real .helix/ folder nothing is kept, so nothing is computed before it is read.
    (.helix/state.json stays: only rounds submit-round accepted are promoted; the cache is what
    cannot be kept, as when .helix/ is no real folder.)"""
    from helix_engine.workspace import sealed

    clear = {lab: v * 0.6 for lab, v in BASE.items()}
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{lab: v * 0.5 for lab, v in BASE.items()}, clear])
    for item in (ws / ".helix").iterdir():
        if item.name != "state.json":
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    monkeypatch.setattr(sealed, "can_keep", lambda _ws: False)
    two = load_workspace(ws).promotion.rounds[2]
    assert isinstance(two, LaterPromotion) and two.pending
    assert math.isclose(two.vs_previous_best.point, 0.5 / 0.6) and not two.pending


def test_a_reader_in_another_thread_never_sees_the_pending_fields_unset() -> None:
    """The cockpit's screen may read an entry while a worker thread is computing it: the second
    reader computes it too (the same values), never reads the empty reason left before."""
    import threading

    first_started, second_done = threading.Event(), threading.Event()
    calls: list[str] = []

    def make() -> tuple[SpeedupEstimate, str]:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            first_started.set()
            assert second_done.wait(10)
        return SpeedupEstimate(statistic="mean", point=0.5), "not faster than round-2"

    lazy = LaterPromotion((make,), 3, VALIDATED, None, 2, "point")
    seen: list[str] = []
    worker = threading.Thread(target=lambda: seen.append(lazy.reason), name="worker")
    worker.start()
    assert first_started.wait(10)
    seen.append(lazy.reason)  # while the worker is inside make()
    second_done.set()
    worker.join(10)
    assert seen == ["not faster than round-2"] * 2 and len(calls) == 2 and not lazy.pending
