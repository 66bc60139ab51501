"""probe-bench classifier thresholds (spec §5) on synthetic speedups, and the cache lock."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.eval import probe


@pytest.mark.parametrize(
    ("speedups", "label"),
    [
        ([1.10, 1.10, 1.10], "likely_gain"),          # geomean exactly 1.10
        ([1.30, 1.20, 0.92], "likely_gain"),          # min exactly 0.92
        ([1.30, 1.30, 0.919], "inconclusive"),        # min just below 0.92, geomean > 0.95
        ([1.09, 1.09, 1.09], "inconclusive"),         # geomean below 1.10
        ([0.95, 0.95], "likely_regression"),          # geomean exactly 0.95
        ([1.5, 1.5, 0.85], "likely_regression"),      # min exactly 0.85 wins over a big geomean
        ([0.96, 1.0, 0.97], "inconclusive"),
        ([1.4, 1.0, 1.0], "likely_gain"),             # geomean 1.119, improved 1 > regressed 0
        ([], "inconclusive"),
    ],
)
def test_classifier_thresholds(speedups: list[float], label: str) -> None:
    assert probe.classify(speedups).label == label


def test_improved_must_outnumber_regressed() -> None:
    # geomean ≥ 1.10 and min ≥ 0.92, but improved (1) == regressed (1) → not a gain
    got = probe.classify([1.5, 0.98])
    assert (got.improved, got.regressed) == (1, 1)
    assert got.geomean == pytest.approx((1.5 * 0.98) ** 0.5)
    assert got.label == "inconclusive"


def test_improved_regressed_bands_and_avg() -> None:
    got = probe.classify([1.01, 1.011, 0.99, 0.989])
    assert (got.improved, got.regressed) == (1, 1)  # 1.01 and 0.99 are inside the ±1% band
    assert got.avg_improvement_pct == pytest.approx((1 - 1 / 1.01 + 1 - 1 / 1.011 + 1 - 1 / 0.99 + 1 - 1 / 0.989) / 4 * 100)
    # compare-perf's mean time reduction mean(1 - 1/s), not upstream probe's mean(s - 1) (+25.0)
    assert probe.classify([2.0, 0.5]).avg_improvement_pct == pytest.approx(-25.0)


def test_probe_and_compare_perf_print_one_avg_improvement_for_the_same_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent walk: compare-perf printed +53.6% beside 2.18x, probe-bench +77.1% beside 1.75x (its
    mean(s-1)) for the same round. The probe's line is now the core's number, compare-perf's."""
    from helix_engine.cli import main

    from builders import Case, write_perf

    def case(samples: list[float]) -> Case:
        return Case(kernel_us=sum(samples) / len(samples), samples_us=samples, bench_mode="perf-counter")

    base = write_perf(tmp_path / "base_perf.txt", {"a": case([40.0, 44.0, 48.0]), "b": case([20.0, 22.0, 21.0]),
                                                  "c": case([10.0, 11.0, 12.0])})
    cand = write_perf(tmp_path / "cand_perf.txt", {"a": case([10.0, 12.0, 30.0]), "b": case([12.0, 11.0, 13.0]),
                                                  "c": case([9.0, 9.5, 10.0])})
    assert main(["compare-perf", "--baseline", str(base), "--compare", str(cand)]) == 0
    compared = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Avg improvement:"))
    out = probe.ProbeOutcome(0, None, None)
    probe._classified(out, probe._evaluate(base, cand, "auto"))
    text = probe._render(out, False)
    assert f"Advisory avg improvement: {compared.split(': ')[1]}" in text.splitlines()
    assert "the avg improvement is compare-perf's over the ratio of means" in text
    means = [(44.0, 52 / 3), (21.0, 12.0), (11.0, 9.5)]
    assert compared == f"Avg improvement: +{sum((b - c) / b for b, c in means) / 3 * 100:.1f}%"
    assert out.avg_improvement_pct != pytest.approx(sum(b / c - 1 for b, c in means) / 3 * 100, rel=0.05)


def test_lock_is_exclusive_and_released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "LOCK_RETRY_S", 0.01)
    lock = tmp_path / ".helix" / "baseline_probe_perf.lock"
    order: list[str] = []

    def second() -> None:
        with probe.probe_lock(lock):
            order.append("second")

    with probe.probe_lock(lock):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.1)
        order.append("first")
    t.join(5)
    assert order == ["first", "second"]
    assert not lock.exists()


def test_stale_lock_is_taken_over_and_busy_lock_gives_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "LOCK_RETRY_S", 0.01)
    monkeypatch.setattr(probe, "LOCK_RETRIES", 3)
    lock = tmp_path / "x.lock"
    lock.write_text("{}")
    old = time.time() - probe.LOCK_STALE_S - 5
    os.utime(lock, (old, old))
    with probe.probe_lock(lock):
        pass
    lock.write_text("{}")  # fresh: busy
    with pytest.raises(HelixError, match="stayed busy"):
        with probe.probe_lock(lock):
            pass


def test_cache_key_and_miss_reason(tmp_path: Path) -> None:
    op = tmp_path / "op.py"
    bench = tmp_path / "bench_op.py"
    op.write_text("a")
    bench.write_text("b")
    key = probe.cache_key(op, bench, "torch-profiler", "cuda", ["0"])
    assert key["probe_contract"] == {"name": "fast-probe", "warmup": 1, "repeats": 3}
    assert key["bench_fingerprint_sha256"] is None
    meta, perf = tmp_path / "m.json", tmp_path / "p.txt"
    assert probe._miss_reason(meta, perf, key) == "no cached baseline probe"
    meta.write_text(json.dumps({"key": key}))
    perf.write_text("")
    assert probe._miss_reason(meta, perf, key) is None
    op.write_text("changed")
    (tmp_path / "bench_op.json").write_text("{}")
    new = probe.cache_key(op, bench, "torch-profiler", "cuda", ["0"])
    assert probe._miss_reason(meta, perf, new) == "key changed: baseline_operator_sha256, bench_fingerprint_sha256"


def test_adaptive_speedups_are_the_cores_ratio_of_medians() -> None:
    """The adaptive probe's per-case speedup comes from the evaluation core: the ratio of sample
    medians (a slow outlier in a 3-sample batch does not flip it), the ratio of means below 3
    samples, and no number for a time no device can measure."""
    from helix_engine.eval.adaptive import _median_speedups

    samples = {"b": {"x": [10.0, 10.0, 100.0], "y": [4.0, 4.0], "z": [1.0, 1.0, 1.0], "w": [1.0]},
               "c": {"x": [5.0, 5.0, 5.0], "y": [2.0, 2.0], "z": [1e-308] * 3}}
    got = _median_speedups(samples, ["x", "y", "z", "w"], "perf-counter")
    assert got == [pytest.approx(2.0), pytest.approx(2.0)]  # x by medians (means: 8.0), y by means; z, w dropped


def test_a_settled_interval_that_the_classification_does_not_follow_is_explained() -> None:
    """On an H200 an adaptive probe settled "faster" ([1.14x, 1.32x]) while one small case at
    0.88x kept the classification inconclusive: the output says why the two differ."""
    from helix_engine.eval.probe import ProbeOutcome, _render

    batch = {"blocks": 19, "decision": "faster", "verdict": "inconclusive", "geomean": 1.276, "low": 1.139,
             "high": 1.315, "confidence": 0.9988, "margin": 0.106, "improved": 8, "regressed": 1,
             "min_speedup": 0.88, "avg_improvement_pct": 20.0, "elapsed_s": 10.1}
    out = ProbeOutcome(0, "inconclusive", "kernel", geomean_speedup=1.276, batches=[batch], decision="faster",
                       interval=(1.139, 1.315), interval_confidence=0.9988, margin=0.106, time_to_verdict_s=10.1,
                       stable=True)
    text = _render(out, verbose=False)
    assert "Why they differ: the interval judges the geomean only" in text
    assert "the slowest case is at 0.88x, 8 improved, 1 regressed" in text
    agreeing = ProbeOutcome(0, "likely_gain", "kernel", geomean_speedup=1.276, batches=[batch], decision="faster",
                            interval=(1.139, 1.315), interval_confidence=0.9988, margin=0.106, stable=True,
                            time_to_verdict_s=10.1)
    assert "Why they differ" not in _render(agreeing, verbose=False)
