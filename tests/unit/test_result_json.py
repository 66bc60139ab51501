"""The evaluation core's results in their JSON form (what compare-perf --json and the reports
print): every field, defaults left out when asked, a non-finite time by its name, a promotion's
rounds. (The round cache keeps the objects themselves, sealed: workspace/sealed.py.)"""

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
def test_a_dump_has_every_field_or_only_those_set(exclude_defaults: bool) -> None:
    data = json.loads(json.dumps(_evaluation().to_json(exclude_defaults=exclude_defaults)))
    assert data["geomean"]["interval"]["low"] == 1.1 and data["pairing"]["reference_operator"] == "baseline/add.py"
    assert data["paired"]["geomean"]["point"] == 1.25 and data["problems"][0]["latency_id"] == "latency-a"
    if exclude_defaults:
        assert "errors" not in data and "confidence" not in data["geomean"]["interval"]
    else:
        assert data["errors"] == [] and data["geomean"]["interval"]["confidence"] == 0.95


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_case_problem_names_a_non_finite_time_in_strict_json(value: float) -> None:
    """The time that stopped a case may be NaN or infinite; strict JSON has no such number."""
    problem = CaseProblem(latency_id="latency-a", side="compare", value=value, message="m")
    assert json.loads(json.dumps(problem.to_json(), allow_nan=False))["value"] == repr(value)


def test_a_promotion_dumps_to_json() -> None:
    entry = RoundPromotion(round=2, status=VALIDATED, reason="r", vs_baseline=SpeedupEstimate(statistic="mean", point=1.5))
    data = json.loads(json.dumps(Promotion(noise_margin=0.01, rounds={2: entry}, best_round=2).to_json()))
    assert data["rounds"]["2"]["vs_baseline"]["point"] == 1.5 and data["best_round"] == 2
