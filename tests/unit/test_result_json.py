"""The evaluation core's results read back from their JSON form (the round cache's entries are
workspace data): every field checked against its declared type, unknown keys refused, and a
dump read back equal to what was dumped."""

from __future__ import annotations

import json
import math

import pytest

from helix_engine.perf.results import (
    VALIDATED,
    CaseProblem,
    Interval,
    Pairing,
    Promotion,
    RoundEvaluation,
    RoundPromotion,
    SpeedupEstimate,
)


def _evaluation() -> RoundEvaluation:
    geo = SpeedupEstimate(statistic="mean", point=1.25, interval=Interval(low=1.1, high=1.4), verdict="faster")
    return RoundEvaluation(rule="status", requested="kernel", metric_source="kernel", avg_improvement_pct=20.0,
                           geomean=geo, problems=[CaseProblem(latency_id="latency-a", side="compare", message="m")],
                           pairing=Pairing(reference_operator="baseline/add.py"),
                           paired=RoundEvaluation(requested="kernel", geomean=geo), margin_text="default 1%")


@pytest.mark.parametrize("exclude_defaults", [False, True])
def test_a_dump_reads_back_equal(exclude_defaults: bool) -> None:
    ev = _evaluation()
    data = ev.to_json(exclude_defaults=exclude_defaults)
    assert RoundEvaluation.from_json(data) == ev
    if exclude_defaults:
        assert "errors" not in data and "confidence" not in data["geomean"]["interval"]


def test_an_integer_is_taken_for_a_float() -> None:
    geo = SpeedupEstimate.from_json({"statistic": "mean", "point": 2})
    assert geo.point == 2.0 and type(geo.point) is float


@pytest.mark.parametrize("data, why", [
    ({"statistic": "mean"}, "point is missing"),
    ({"statistic": "mean", "point": 1.0, "extra": 1}, "unknown keys"),
    ({"statistic": "mode", "point": 1.0}, "is not one of"),
    ({"statistic": "mean", "point": True}, "not a finite number"),
    ({"statistic": "mean", "point": "1.0"}, "not a finite number"),
    ({"statistic": "mean", "point": math.inf}, "not a finite number"),
    ({"statistic": "mean", "point": 10 ** 400}, "not a finite number"),  # past a float's range
    ({"statistic": "mean", "point": "inf"}, "not a finite number"),
    ({"statistic": "mean", "point": 1.0, "interval": {"low": 0.5}}, "high is missing"),
    ({"statistic": "mean", "point": 1.0, "interval": {"low": 1.5, "high": 2.0}}, "excludes its point"),
    ({"statistic": "mean", "point": 1.0, "verdict": 3}, "is not one of"),
    (["mean", 1.0], "not an object"),
])
def test_an_odd_estimate_is_refused(data: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        SpeedupEstimate.from_json(data)


def test_odd_nested_values_are_refused() -> None:
    data = _evaluation().to_json()
    for key, value in (("errors", "no list"), ("errors", [1]), ("problems", [{"latency_id": "a"}]),
                       ("paired", {"requested": 5}), ("noise_margin", None), ("pairing", [])):
        with pytest.raises(ValueError):
            RoundEvaluation.from_json({**data, key: value})


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_case_problem_keeps_a_non_finite_time_in_strict_json(value: float) -> None:
    """The time that stopped a case may be NaN or infinite; the round cache writes strict JSON."""
    problem = CaseProblem(latency_id="latency-a", side="compare", value=value, message="m")
    text = json.dumps(problem.to_json(), allow_nan=False)
    back = CaseProblem.from_json(json.loads(text))
    assert back.message == "m" and repr(back.value) == repr(value)


def test_a_promotion_dumps_to_json() -> None:
    entry = RoundPromotion(round=2, status=VALIDATED, reason="r", vs_baseline=SpeedupEstimate(statistic="mean", point=1.5))
    data = json.loads(json.dumps(Promotion(noise_margin=0.01, rounds={2: entry}, best_round=2).to_json()))
    assert data["rounds"]["2"]["vs_baseline"]["point"] == 1.5 and data["best_round"] == 2
