"""Compact case values (issue 12, goal 2): when a mid round becomes the best, every later round is
judged against it again; a round whose point against the new best cannot pass is judged from the
two rounds' compact values (evaluation.compare_values: the status rule's one pairing and the
core's point geomean, no record read), one whose point could pass from its records, with the
bootstrap, as before. Either way the numbers are the core's: a reload ends exactly where a fresh
load with no compact path and no cache does."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from helix_engine.perf import calibration, evaluation, promotion
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.results import LaterPromotion
from helix_engine.status import operator_status, render
from helix_engine.workspace import round_cache, sealed, status_pairing, status_rules
from helix_engine.workspace.models import PerfRecord
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import DEFAULT_BENCH_MODE, Case, RoundSpec, build_workspace, uncached_load, write_perf

BASE = {"a": 100.0, "b": 200.0, "c": 300.0, "d": 400.0}
CACHE = Path(".helix") / "cache" / round_cache.CACHE_FILE


# ------------------------------------------------------------------------- the core, on values


_ODD = (0.0, -3.0, 5e-4, 1e-3, 1e306, float("nan"), float("inf"), None)


def _record(label: str, kernel: float | None, total: float | None, mode: str | None) -> PerfRecord:
    return PerfRecord(case_label=label, kernel_avg_time_us=kernel, total_op_avg_time_us=total, bench_mode=mode)


def _records(rng: random.Random, odd: float) -> list[PerfRecord]:
    labels = [lab for lab in "abcdef" if rng.random() < 0.9]
    rng.shuffle(labels)
    mode = DEFAULT_BENCH_MODE if rng.random() < 0.95 else "perf-counter"

    def value() -> float | None:
        return rng.choice(_ODD) if rng.random() < odd else round(rng.uniform(1.0, 500.0), 3)

    return [_record(lab, value(), value(), mode) for lab in labels]


@pytest.mark.parametrize("odd", [0.0, 0.05, 0.3])
def test_compare_values_gives_the_cores_geomean_and_cases(odd: float) -> None:
    """On random record pairs (missing and extra cases, absent averages, values ≤ 0, below 1 ns,
    overflowing ratios, another bench mode; every metric choice): compare_values' geomean and
    cases are those of evaluate(rule="status"); records with a non-finite average have no values."""
    rng = random.Random(int(odd * 100))
    seen = {"geomean": 0, "none": 0, "no values": 0}
    margins = NoiseMargins(per_case={"latency-a": 0.03, "latency-c": 0.021}, source="calibrated")
    for _ in range(600):
        base, cand = _records(rng, odd), _records(rng, odd)
        metric = rng.choice(("auto", "kernel", "total-op"))
        b_values, c_values = status_pairing.case_values(base), status_pairing.case_values(cand)
        if b_values is None or c_values is None:
            seen["no values"] += 1
            assert any(v is not None and not math.isfinite(v) for r in base + cand
                       for v in (r.kernel_avg_time_us, r.total_op_avg_time_us))
            continue
        ev = evaluation.evaluate(base, cand, rule="status", metric=metric, with_ci=False, noise_margin=margins)
        found = evaluation.compare_values(b_values, c_values, metric)
        assert found.geomean == ev.geomean
        assert found.latency_ids == tuple(case.latency_id for case in ev.cases)
        assert margins.for_geomean(found.latency_ids) == margins.for_geomean(c.latency_id for c in ev.cases)
        seen["geomean" if found.geomean is not None else "none"] += 1
    assert seen["geomean"] > 30 and seen["none"] > 30, seen
    assert (seen["no values"] > 0) == (odd > 0)


def _same_as_core(base: list[PerfRecord], cand: list[PerfRecord], metric: str, margins: NoiseMargins) -> Any:
    b_values, c_values = status_pairing.case_values(base), status_pairing.case_values(cand)
    assert b_values is not None and c_values is not None
    ev = evaluation.evaluate(base, cand, rule="status", metric=metric, with_ci=False, noise_margin=margins)
    found = evaluation.compare_values(b_values, c_values, metric)
    assert (found.geomean, found.latency_ids) == (ev.geomean, tuple(case.latency_id for case in ev.cases))
    return found


EDGES = {  # (reference's (kernel, total) per case, candidate's, metric, what the core makes of it)
    "overflowing ratio": ({"a": (1e306, 1e306), "b": (2.0, 2.0)}, {"a": (1e-3, 1e-3), "b": (1.0, 1.0)}, "kernel", 2.0),
    "auto, one kernel absent": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (2.0, 2.0), "b": (None, 1.0)}, "auto",
                                6 ** 0.5),  # a on kernel (2x, 4x on total-op), b on total-op (3x)
    "auto, every kernel": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (1.0, 4.0), "b": (2.0, 3.0)}, "auto", 2.0),
    "total-op": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (1.0, 2.0), "b": (2.0, 0.75)}, "total-op", 4.0),
    "a time at 0": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (1.0, 2.0), "b": (0.0, 3.0)}, "kernel", 4.0),
    "below 1 ns": ({"a": (4.0, 8.0), "b": (5e-4, 3.0)}, {"a": (1.0, 2.0), "b": (1.0, 3.0)}, "kernel", 4.0),
    "a kernel absent": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (1.0, 2.0), "b": (None, 3.0)}, "kernel", None),
    "a case missing": ({"a": (4.0, 8.0), "b": (2.0, 3.0)}, {"a": (1.0, 2.0)}, "kernel", None),
    "an extra case": ({"a": (4.0, 8.0)}, {"a": (1.0, 2.0), "b": (9.0, 9.0)}, "kernel", 4.0),
    "every time dropped": ({"a": (-1.0, 8.0)}, {"a": (1.0, 2.0)}, "kernel", None),
    "no cases": ({}, {"a": (1.0, 2.0)}, "kernel", None),
}


@pytest.mark.parametrize("edge", EDGES)
def test_compare_values_on_the_pairings_edges(edge: str) -> None:
    ref, cand, metric, point = EDGES[edge]
    found = _same_as_core([_record(lab, k, t, "m") for lab, (k, t) in ref.items()],
                          [_record(lab, k, t, "m") for lab, (k, t) in cand.items()], metric, NoiseMargins())
    assert (found.geomean.point if found.geomean is not None else None) == pytest.approx(point)


def test_another_bench_mode_is_not_compared_on_either_path() -> None:
    base = [_record("a", 4.0, 5.0, "torch-npu-profiler")]
    cand = [_record("a", 2.0, 3.0, "perf-counter")]
    found = _same_as_core(base, cand, "kernel", NoiseMargins())
    assert found.geomean is None
    pairing = status_pairing.pair_for_status(base, cand, "kernel", round_name="opt-round-2", baseline_file="b",
                                           round_file="r")
    assert pairing.refused and pairing.warnings == [
        "cannot compare opt-round-2: bench_mode differs (baseline=torch-npu-profiler, opt-round-2=perf-counter)"]


def _sampled(rng: random.Random, label: str, value: float, samples: bool) -> PerfRecord:
    return PerfRecord(case_label=label, kernel_avg_time_us=value, bench_mode="m",
                      samples_us=[round(value * rng.gauss(1.0, 0.01), 4) for _ in range(12)] if samples else None)


@pytest.mark.parametrize("calibrated", [False, True])
@pytest.mark.parametrize("sides", ["neither sampled", "both sampled", "only the best sampled", "only the round sampled"])
def test_the_promotion_rules_compact_judgement_is_the_full_paths(calibrated: bool, sides: str) -> None:
    """promotion._on_values (geomean and margin) equals what the rule's full path judges from the
    records whenever it answers, and it answers exactly when the point cannot pass or a side
    carries no samples (no interval then: the full path judges the point too)."""
    rng = random.Random(7)
    margins = NoiseMargins(per_case={"latency-a": 0.04, "latency-c": 0.021}, source="calibrated") \
        if calibrated else NoiseMargins()
    best_sampled, round_sampled = sides in ("both sampled", "only the best sampled"), \
        sides in ("both sampled", "only the round sampled")
    answered = passing = 0
    for _ in range(300):
        base = [_sampled(rng, lab, round(rng.uniform(50, 60), 2), best_sampled) for lab in "abcd"]
        cand = [_sampled(rng, r.case_label, round(r.kernel_avg_time_us * rng.uniform(0.95, 1.06), 2), round_sampled)
                for r in base if rng.random() < 0.97]
        best = promotion.Candidate(1, True, records=base, values=status_pairing.case_values(base))
        later = promotion.Candidate(2, True, metric="kernel", records=cand, values=status_pairing.case_values(cand))
        quick = promotion._on_values(best, later, margins)
        ev = evaluation.evaluate(base, cand, rule="status", metric="kernel", with_ci=False, noise_margin=margins)
        full = promotion._judged_geomean(ev, base, cand, "kernel", margins, None)
        could_pass = ev.geomean is not None and ev.geomean.point > 1.0 + full.margin
        passing += could_pass
        assert (quick is None) == (could_pass and best_sampled and round_sampled)
        if quick is not None:
            answered += 1
            assert (quick.geomean, quick.margin) == (full.geomean, full.margin)
            assert full.geomean is None or full.geomean.interval is None  # no interval was due
    assert 10 < passing < 290  # both branches of the rule exercised
    assert (answered == 300) == (sides != "both sampled")


def test_records_the_rule_refuses_on_their_own_have_no_values() -> None:
    ok = [_record("a", 1.0, 2.0, "m"), _record("b", 3.0, None, "m")]
    assert status_pairing.case_values(ok) == evaluation.CaseValues(("latency-a", "latency-b"), (1.0, 3.0), (2.0, None),
                                                                   "m", False)
    assert status_pairing.case_values([*ok, _record("a", 1.0, 2.0, "m")]) is None  # a repeated id
    assert status_pairing.case_values([ok[0], _record("b", 3.0, None, "other")]) is None  # two bench modes
    failed = PerfRecord(case_label="b", kernel_avg_time_us=3.0, error_message="timeout", bench_mode="m")
    assert status_pairing.case_values([ok[0], failed]) is None


# ------------------------------------------------------------------------------ a workspace


def _case(value: float, seed: int, samples: bool) -> Case:
    rng = random.Random(seed)
    return Case(kernel_us=value, total_op_us=value + 2.0,
                samples_us=[round(value * rng.gauss(1.0, 0.005), 4) for _ in range(12)] if samples else None)


def _cases(scale: float, seed: int, samples: bool, **changes: Case | None) -> dict[str, Any]:
    out: dict[str, Any] = {lab: _case(round(v * scale, 3), seed + i, samples) for i, (lab, v) in enumerate(BASE.items())}
    for lab, case in changes.items():
        if case is None:
            out.pop(lab)
        else:
            out[lab] = case
    return out


def _workspace(root: Path, samples: bool = True) -> Path:
    """Rounds 1-12 at 0.8-0.95 of the baseline (round 1 the best, now and then another); round 9
    has a case at 0 (dropped, with a warning, from every comparison), round 10 is judged on
    total-op, round 11 lacks case d (not compared), round 12 carries an extra case."""
    rng = random.Random(5)
    specs = []
    for n in range(1, 13):
        changes: dict[str, Case | None] = {}
        if n == 9:
            changes["b"] = Case(kernel_us=0.0, total_op_us=2.0)
        if n == 11:
            changes["d"] = None
        if n == 12:
            changes["e"] = _case(50.0, 99, samples)
        specs.append(RoundSpec(_cases(round(rng.uniform(0.8, 0.95), 3), n * 10, samples, **changes),
                               parent="baseline" if n == 1 else f"opt-round-{n - 1}",
                               metric="total-op" if n == 10 else "kernel"))
    return build_workspace(root, baseline=_cases(1.0, 0, samples), rounds=specs)


def _derived(snap: Any) -> dict[str, Any]:
    """What the snapshot derives from several files, and `helix status --json` of it."""
    ev = snap.evaluation
    return json.loads(json.dumps({
        "rounds": {n: {"comparison": dataclasses.asdict(v.comparison) if v.comparison else None,
                       "problems": sorted(map(str, v.problems))} for n, v in sorted(snap.rounds.items())},
        "promotion": dataclasses.asdict(snap.promotion), "best": snap.best_round, "warnings": ev.warnings,
        "skipped": ev.skipped, "problems": sorted(map(str, snap.problems)),
    }, default=str)) | {"status": render([operator_status(snap)], fmt="json")}


def _full_path(ws: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A fresh load with no cache and no compact comparison: every judgement from records."""
    return uncached_load(ws, monkeypatch, promotion, "_on_values", lambda *args: None, _derived)


@pytest.fixture()
def compact_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    original = evaluation.compare_values
    monkeypatch.setattr(evaluation, "compare_values", lambda *args: calls.append(args) or original(*args))
    return calls


def _perf(ws: Path, n: int) -> Path:
    return ws / f"opt-round-{n}" / "opt_add_perf.txt"


@pytest.mark.parametrize("samples", [True, False])
def test_a_mid_round_made_the_best_judges_later_rounds_from_values_as_a_fresh_load_does(
        tmp_path: Path, samples: bool, monkeypatch: pytest.MonkeyPatch, perf_reads: list[Path],
        compact_calls: list[tuple[Any, ...]]) -> None:
    ws = _workspace(tmp_path, samples)
    load_workspace(ws)  # writes the cache: the next load keeps the values as text
    snap = load_workspace(ws)
    assert snap.promotion.best_round != 4
    write_perf(_perf(ws, 4), _cases(0.5, 4, samples))
    perf_reads.clear()
    compact_calls.clear()
    after = reload(snap, [_perf(ws, 4)])
    assert after.promotion.best_round == 4
    later = {n: after.promotion.rounds[n] for n in range(5, 13)}
    # round 5 holds the baseline's cases, as round 4 does: decided by the bound, compared when read
    five = status_rules.view_values(snap.rounds[5])
    assert isinstance(later[5], LaterPromotion) and later[5].pending
    assert all(args[1] is not five for args in compact_calls)
    assert all(p.previous_best == 4 and p.status == "validated branch" for n, p in later.items() if n != 11)
    assert later[11].status == "not promoted"  # lacks case d: not compared with the baseline
    assert "not comparable with round-4" not in later[12].reason  # its extra case is not the best's
    assert later[9].vs_previous_best is not None and later[10].vs_previous_best is not None
    assert later[5].reason and not later[5].pending and any(args[1] is five for args in compact_calls)
    assert {args[1] for args in compact_calls} >= {status_rules.view_values(snap.rounds[n]) for n in (5, 9, 10, 12)}
    assert not set(perf_reads) & {_perf(ws, n) for n in range(5, 13)}  # no later round's records read
    assert _derived(after) == _derived(load_workspace(ws)) == _full_path(ws, monkeypatch)


def test_a_later_round_whose_point_could_pass_is_judged_from_its_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, perf_reads: list[Path],
        compact_calls: list[tuple[Any, ...]]) -> None:
    ws = _workspace(tmp_path)
    write_perf(_perf(ws, 7), _cases(0.4, 7, True))  # faster than 0.5 beyond the margin
    load_workspace(ws)
    snap = load_workspace(ws)
    assert snap.promotion.best_round == 7
    write_perf(_perf(ws, 4), _cases(0.5, 4, True))
    perf_reads.clear()
    after = reload(snap, [_perf(ws, 4)])
    seven = after.promotion.rounds[7]
    assert after.promotion.best_round == 7 and seven.previous_best == 4 and seven.status == "current best"
    assert seven.vs_previous_best is not None and seven.vs_previous_best.interval is not None  # bootstrapped
    assert _perf(ws, 7) in perf_reads and after.promotion.rounds[4].status == "validated branch"
    assert after.promotion.rounds[5].vs_previous_best is not None  # decided by the bound; compared when read
    assert status_rules.view_values(snap.rounds[5]) in {args[1] for args in compact_calls}
    assert _derived(after) == _derived(load_workspace(ws)) == _full_path(ws, monkeypatch)


def test_calibrated_per_case_margins_judge_the_compact_comparison(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, perf_reads: list[Path]) -> None:
    """Per-case margins (.helix/calibration.json): the geomean's margin is the mean of its cases',
    in the core's case order. Round 6 at 0.985 of the new best is within round 4's noise on the
    calibrated margins, beyond the default 1%."""
    ws = _workspace(tmp_path)
    noise = {f"latency-{lab}": calibration.CaseNoise(latency_id=f"latency-{lab}", noise_floor=m, margin=m)
             for lab, m in zip(BASE, (0.02, 0.035, 0.01, 0.028))}
    calibration.write(ws, calibration.Calibration(
        created_at="2026-12-01T10:00:00Z", baseline_operator="baseline/add.py", bench_file="bench_add.py",
        bench_mode=DEFAULT_BENCH_MODE, backend="npu", rounds=3, cases=noise))
    write_perf(_perf(ws, 6), _cases(0.5 * 0.985, 6, True))
    snap = load_workspace(ws)
    assert snap.promotion.margin_source == "calibrated"
    write_perf(_perf(ws, 4), _cases(0.5, 4, True))
    perf_reads.clear()
    after = reload(snap, [_perf(ws, 4)])
    assert after.promotion.best_round == 4 and after.promotion.rounds[6].status == "validated branch"
    assert after.promotion.rounds[6].vs_previous_best.point > 1.01
    assert after.promotion.rounds[6].vs_previous_best.interval is None  # its point cannot pass
    assert _perf(ws, 6) not in perf_reads  # judged from its values, by the calibrated margins
    assert _derived(after) == _derived(load_workspace(ws)) == _full_path(ws, monkeypatch)


def test_a_sequence_of_best_changes_ends_where_the_full_path_does(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewrites that move the best back and forth (the benchmark's flip), one that makes round 4
    slower than every later round (each is then judged from records: its point could pass), and
    one that drops a case of round 4 (later rounds lack nothing of it) or adds one (they lack it)."""
    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    for cases in (_cases(0.5, 4, True), _cases(0.55, 4, True), _cases(0.5, 4, True), _cases(0.99, 4, True),
                  _cases(0.5, 4, True, d=None), _cases(0.5, 4, True, x=_case(10.0, 1, True))):
        write_perf(_perf(ws, 4), cases)
        snap = reload(snap, [_perf(ws, 4)])
        assert _derived(snap) == _full_path(ws, monkeypatch)
    assert all("not comparable with round-4" in snap.promotion.rounds[n].reason for n in (5, 6, 7, 8))


# ------------------------------------------------------------------------------- the cache


def _stored_values(ws: Path, n: int) -> list[Any]:
    return sealed.unseal((ws / CACHE).read_bytes(), CACHE.name)["perf"][n]


VALUE_TAMPERS = {
    "ids not text": lambda entry: entry[3].__setitem__(1, ["latency-a"]),
    "mode not text": lambda entry: entry[3].__setitem__(0, 5),
    "a column missing": lambda entry: entry[3].pop(),
    "a value short": lambda entry: entry[3].__setitem__(2, entry[3][2].rsplit("|", 1)[0]),
    "a value too many": lambda entry: entry[3].__setitem__(3, entry[3][3] + "|1.0"),
    "not a number": lambda entry: entry[3].__setitem__(2, entry[3][2][:-2] + "xx"),
    "infinite": lambda entry: entry[3].__setitem__(3, entry[3][3].rsplit("|", 1)[0] + "|inf"),
    "ids out of order": lambda entry: entry[3].__setitem__(1, "latency-d|latency-c|latency-b|latency-a"),
    "not a list": lambda entry: entry.__setitem__(3, "x"),
}


@pytest.mark.parametrize("tamper", VALUE_TAMPERS)
def test_tampered_stored_values_are_a_miss(tmp_path: Path, tamper: str, monkeypatch: pytest.MonkeyPatch,
                                           compact_calls: list[tuple[Any, ...]]) -> None:
    """Stored values that are not a whole column are not used: that round is judged from its
    records (the file is sealed as helix seals it: what values_in itself refuses)."""
    ws = _workspace(tmp_path)
    load_workspace(ws)
    data = sealed.unseal((ws / CACHE).read_bytes(), CACHE.name)
    VALUE_TAMPERS[tamper](data["perf"][6])
    (ws / CACHE).write_bytes(sealed.seal(data, CACHE.name))
    snap = load_workspace(ws)
    found = status_rules.view_values(snap.rounds[6])
    if tamper == "not a list":  # the whole perf entry is a miss: the round's records are read again
        assert found == status_pairing.case_values(snap.rounds[6].perf) is not None
    else:
        assert found is None
    assert status_rules.view_values(snap.rounds[5]) is not None
    write_perf(_perf(ws, 4), _cases(0.5, 4, True))
    compact_calls.clear()
    after = reload(snap, [_perf(ws, 4)])
    assert all(p.reason for p in after.promotion.rounds.values())  # a comparison the bound decided is made now
    assert (found in {args[1] for args in compact_calls}) == (tamper == "not a list")
    assert _derived(after) == _full_path(ws, monkeypatch)


def test_stored_values_are_the_records_values(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    snap = load_workspace(ws)  # read the records
    entry = _stored_values(ws, 9)
    assert entry[3][0] == DEFAULT_BENCH_MODE and len(entry) == 4
    warm = load_workspace(ws)  # the values as stored
    for n in snap.rounds:
        assert status_rules.view_values(warm.rounds[n]) == status_rules.view_values(snap.rounds[n]) \
            == status_pairing.case_values(snap.rounds[n].perf)
    assert round_cache.values_in(round_cache.values_out(status_rules.view_values(snap.rounds[9]))) \
        == status_rules.view_values(snap.rounds[9])
    assert status_rules.view_values(snap.rounds[9]).kernel[1] == 0.0  # case b at 0, kept: the pairing drops it
    piped = evaluation.CaseValues(("latency-a|b",), (1.0,), (None,), None)
    assert round_cache.values_out(piped) is None  # not kept: that round is compared from its records
    empty = evaluation.CaseValues((), (), (), None)
    assert round_cache.values_in(round_cache.values_out(empty)) == empty


from hypothesis import given  # noqa: E402 - the property test below only
from hypothesis import strategies as st  # noqa: E402

_VALUE = st.one_of(st.none(), st.floats(), st.integers(-3, 3), st.booleans(),
                   st.sampled_from([evaluation.MIN_TIME_US, evaluation.MIN_TIME_US / 2, 0.0, -0.0, 1e-300]))


@given(st.lists(_VALUE, max_size=8))
def test_a_column_is_whole_exactly_when_time_rule_takes_every_value(column: list[Any]) -> None:
    """CaseValues.kernel_ok / total_ok (checked in C over the column) say what time_rule says of
    each value: a float, finite, and at least MIN_TIME_US."""
    assert evaluation._column_ok(tuple(column)) \
        == all(type(v) is float and evaluation.time_rule(v) is None for v in column)
