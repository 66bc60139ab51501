"""Issue 28 item 5: two files measured in separate jobs get no faster/slower verdict from an
interval within each job, unless calibrate measured the drift between jobs; a paired run keeps its
verdicts; the comparison says what to run instead."""

from __future__ import annotations

from helix_engine.perf import evaluation
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.paired import Block
from helix_engine.perf.report import UNPAIRED_NOTE, format_ci_lines
from helix_engine.workspace.models import PerfRecord

SLOW = [200.0 + i % 5 for i in range(40)]
FAST = [100.0 + i % 5 for i in range(40)]


def _file(samples: list[float]) -> list[PerfRecord]:
    return [PerfRecord.model_validate({"case_label": "c", "kernel_names": ["k"], "bench_mode": "perf-counter",
                                       "kernel_avg_time_us": sum(samples) / len(samples), "samples_us": samples})]


def test_separate_jobs_give_no_verdict_however_tight_their_intervals() -> None:
    ev = evaluation.evaluate(_file(SLOW), _file(FAST))
    (case,) = ev.cases
    assert case.mean.interval is not None and case.mean.interval.low > 1.9  # each job steady...
    assert case.mean.verdict == "unpaired" and case.median is not None and case.median.verdict == "unpaired"
    assert ev.geomean is not None and ev.geomean.verdict == "unpaired"  # ...but drift between them is unknown
    assert UNPAIRED_NOTE in format_ci_lines(ev)


def test_a_measured_drift_between_jobs_makes_it_a_verdict_again() -> None:
    margins = NoiseMargins(per_case={"latency-c": 0.02}, per_case_unpaired={"latency-c": 0.05}, source="calibrated")
    ev = evaluation.evaluate(_file(SLOW), _file(FAST), noise_margin=margins)
    assert ev.cases[0].mean.verdict == "faster" and ev.geomean is not None and ev.geomean.verdict == "faster"
    # a drift as large as the change leaves it undecided, not unpaired
    wide = NoiseMargins(per_case={"latency-c": 0.02}, per_case_unpaired={"latency-c": 1.5}, source="calibrated")
    assert evaluation.evaluate(_file(SLOW), _file(FAST), noise_margin=wide).cases[0].mean.verdict == "within-noise"
    assert UNPAIRED_NOTE not in format_ci_lines(ev)


def test_a_paired_run_keeps_its_verdicts() -> None:
    blocks = {"latency-c": [Block(reference=SLOW[i:i + 8], candidate=FAST[i:i + 8]) for i in range(0, 40, 8)]}
    ev = evaluation.evaluate(_file(SLOW), _file(FAST), blocks=blocks)
    assert ev.cases[0].n_blocks == 5 and ev.cases[0].mean.verdict == "faster"
    assert ev.geomean is not None and ev.geomean.verdict == "faster"


def test_calibrate_turns_its_separate_jobs_into_the_unpaired_margin() -> None:
    from helix_engine.perf.calibration import CaseNoise, add_unpaired

    base = [100.0 + i % 3 for i in range(20)]
    later = [[v * 1.02 for v in base], [v * 0.99 for v in base]]  # two later jobs' candidate, drifted
    noise = {"latency-c": CaseNoise(latency_id="latency-c", noise_floor=0.01, margin=0.01)}
    add_unpaired(noise, [evaluation.evaluate(_file(base), _file(c), with_ci=False) for c in later])
    item = noise["latency-c"]
    assert [round(p, 4) for p in item.unpaired_points] == [round(1 / 1.02, 4), round(1 / 0.99, 4)]
    assert item.unpaired_margin is not None and item.unpaired_margin > 0.02  # over the largest drift seen
    one = {"latency-c": CaseNoise(latency_id="latency-c", noise_floor=0.01, margin=0.01)}
    add_unpaired(one, [evaluation.evaluate(_file(base), _file(later[0]), with_ci=False)])
    assert one["latency-c"].unpaired_margin is None  # one point bounds nothing


def test_the_promotion_rule_judges_separate_jobs_by_the_drift_calibrate_measured() -> None:
    """A round 4% faster than the baseline by two perf files from separate jobs: with the drift
    between jobs measured at 8%, the rule does not call it faster; with none measured it keeps its
    answer for such files (submit-round's paired evidence makes them the exception) and says so."""
    from helix_engine.perf.promotion import beyond_noise, judge_vs_baseline

    base = [100.0 + (i % 5) * 0.1 for i in range(40)]
    faster = [v / 1.04 for v in base]
    records_b, records_c = _file(base), _file(faster)
    ev = evaluation.evaluate(records_b, records_c, rule="status", with_ci=False)
    measured = NoiseMargins(per_case={"latency-c": 0.02}, per_case_unpaired={"latency-c": 0.08}, source="calibrated")
    judged = judge_vs_baseline(ev, records_b, records_c, "auto", measured)
    assert judged is not None and judged.margin == 0.08 and not beyond_noise(judged.geomean, judged.margin)
    assert "separate jobs: judged by the 8.0% drift calibrate measured between jobs" in judged.text()
    legacy = judge_vs_baseline(ev, records_b, records_c, "auto", NoiseMargins())
    assert legacy is not None and legacy.margin == 0.01 and beyond_noise(legacy.geomean, legacy.margin)
