"""compare-perf: upstream math and output, line for line, and every error path.

Perf files are written by hand in the upstream JSONL format (spec upstream-eval §3) and read
back with read_perf, so messages carry real ``file:line`` locations.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from helix_engine.perf.artifact import read_perf
from helix_engine.perf.compare import (
    avg_improvement_pct,
    compare_all,
    compare_records,
    comparisons_passed,
    format_comparison,
    format_comparisons,
    format_delta,
    format_value,
    geomean_speedup,
)
from helix_engine.workspace.models import PerfRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"
MODE = "torch-npu-profiler"
NO_CI = "No CI available: the perf files carry no raw samples (samples_us)."


def rec(label: str, kernel: float | None, total: float | None = None, *, error: str | None = None,
        mode: str | None = MODE, omit_mode: bool = False, **extra: Any) -> dict[str, Any]:
    """One upstream-format record; total defaults to the kernel time."""
    total = kernel if total is None and kernel is not None else total
    data: dict[str, Any] = {
        "case_label": label, "kernel_names": ["softmax_kernel"], "kernel_source": "metadata+operator",
        "kernel_avg_time_us": kernel,
        "ops": None if total is None else [{"op_type": "softmax_kernel", "avg_time_us": total}],
        "total_op_avg_time_us": total, "error_message": error, "case_wall_clock_seconds": 1.0,
        "bench_mode": mode,
    }
    if omit_mode:
        del data["bench_mode"]
    data.update(extra)
    return data


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(r, separators=(",", ":"), allow_nan=True) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path) -> list[PerfRecord]:
    records, problems = read_perf(path)
    assert all("duplicates case label" in p.message for p in problems)  # compare judges those
    return records


def run(tmp_path: Path, base: list[dict[str, Any]], comp: list[dict[str, Any]], metric: str = "auto",
        skip: bool = False) -> tuple[Any, Path, Path]:
    b = write(tmp_path / "base_perf.txt", base)
    c = write(tmp_path / "opt_perf.txt", comp)
    return compare_records(load(b), load(c), metric, skip), b, c


# ------------------------------------------------------------------------------ formulas


def test_formulas_against_hand_arithmetic() -> None:
    pairs = [(10.0, 8.0), (40.0, 25.0), (120.0, 100.0)]
    # improvements: 2/10 = 0.2, 15/40 = 0.375, 20/120 = 0.1666…; mean = 0.741666…/3 = 0.247222…
    assert avg_improvement_pct(pairs) == pytest.approx(24.7222222, abs=1e-6)
    # speedups 1.25, 1.6, 1.2; product 2.4; geomean = 2.4 ** (1/3) = 1.338865…
    assert geomean_speedup(pairs) == pytest.approx(2.4 ** (1 / 3), rel=1e-12)
    assert geomean_speedup(pairs) == pytest.approx(1.3388659, abs=1e-6)
    # a slower pair and a faster pair: improvements 0.5 and -1.0 → mean -0.25; speedups 2 and 0.5 → 1
    assert avg_improvement_pct([(10.0, 5.0), (10.0, 20.0)]) == pytest.approx(-25.0)
    assert geomean_speedup([(10.0, 5.0), (10.0, 20.0)]) == pytest.approx(1.0)
    assert avg_improvement_pct([]) is None and geomean_speedup([]) is None
    for bad in ([(0.0, 1.0)], [(1.0, -2.0)], [(math.nan, 1.0)], [(1.0, math.inf)]):
        assert avg_improvement_pct(bad) is None and geomean_speedup(bad) is None


def test_delta_and_value_display_follow_upstream_rounding() -> None:
    assert format_delta(10.0, 8.0) == "-20.00%"  # (8-10)/10 = -0.2
    assert format_delta(120.0, 100.0) == "-16.67%"  # -20/120 = -16.666…
    assert format_delta(10.0, 20.0) == "100.00%"  # upstream prints no '+' on the delta
    assert format_delta(3.0, 3.001) == "0.03%"  # 0.001/3 = 0.0333…%
    assert format_value(10) == "10.0"
    assert format_value(100.0) == "100.0"
    assert format_value(0.0038) == "0.0038"
    assert format_value(1.23456789) == "1.234568"  # 6 decimals, rounded
    assert format_value(2.5000001) == "2.5"
    assert format_value(1e-7) == "0.0"


# ----------------------------------------------------------------------- the spec block


def test_spec_example_block_line_for_line() -> None:
    base = load(FIXTURES / "spec_example_baseline_perf.txt")
    comp = load(FIXTURES / "spec_example_compare_perf.txt")
    result = compare_records(base, comp)
    expected = (FIXTURES / "spec_example_output.txt").read_text(encoding="utf-8")
    assert format_comparison(result) == expected + NO_CI + "\n"
    assert result.passed and result.metric_source == "mixed"
    assert [c.metric for c in result.cases] == ["kernel", "kernel", "total-op"]
    assert result.mean_latency_us == pytest.approx((8 + 25 + 100) / 3)
    assert result.cases[2].speedup == pytest.approx(1.2)


def test_cases_print_in_sorted_id_order(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("b", 2.0), rec("a", 1.0)], [rec("a", 1.0), rec("b", 1.0)])
    assert [c.latency_id for c in result.cases] == ["latency-a", "latency-b"]


def test_kernel_only_and_total_op_only_metric_lines(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("a", 10.0, 12.0)], [rec("a", 5.0, 6.0)])
    text = format_comparison(result)
    assert "latency-a: baseline=10.0, compare=5.0, delta=-50.00%\n" in text
    assert "Avg improvement: +50.0%\nGeomean speedup: 2.00x\nMetric source: kernel\n" in text
    result, _, _ = run(tmp_path, [rec("a", 10.0, 12.0)], [rec("a", 5.0, 6.0)], metric="total-op")
    text = format_comparison(result)
    # 12 → 6: improvement 0.5, speedup 2
    assert "latency-a: baseline=total-op=12.0, compare=total-op=6.0, delta=-50.00%\n" in text
    assert "Metric source: total-op\nPASS: compared 1 latency entries\n" in text


def test_auto_with_every_case_on_fallback_says_total_op(tmp_path: Path) -> None:
    err = "no resolved kernels matched profiler kernel view"
    result, _, _ = run(tmp_path, [rec("a", None, 9.0, error=err)], [rec("a", None, 3.0, error=err)])
    assert format_comparison(result).splitlines()[1:6] == [
        "latency-a: baseline=NA (total-op=9.0), compare=NA (total-op=3.0), delta=-66.67%",
        "Avg improvement: +66.7%",  # (9-3)/9 = 0.6666…
        "Geomean speedup: 3.00x",
        "Metric source: total-op",
        "PASS: compared 1 latency entries",
    ]


def test_fallback_on_the_baseline_side_rereads_the_compare_side_as_total_op(tmp_path: Path) -> None:
    err = "no resolved kernels matched op_statistic csv"
    result, _, _ = run(tmp_path, [rec("a", None, 20.0, error=err), rec("b", 4.0)],
                       [rec("a", 7.0, 10.0), rec("b", 2.0)])
    lines = format_comparison(result).splitlines()
    assert lines[1] == "latency-a: baseline=NA (total-op=20.0), compare=total-op=10.0, delta=-50.00%"
    assert lines[2] == "latency-b: baseline=4.0, compare=2.0, delta=-50.00%"
    assert lines[5] == "Metric source: mixed (kernel + total-op fallback)"


def test_kernel_mode_flags_a_case_without_kernel_time(tmp_path: Path) -> None:
    err = "no resolved kernels matched profiler kernel view"
    result, _, c = run(tmp_path, [rec("a", 1.0)], [rec("a", None, 1.0, error=err)], metric="kernel")
    assert result.errors == [
        f"{c}:1 requires kernel latency for 'latency-a' under --metric-source kernel"
    ]
    assert format_comparison(result) == f"FAIL: {result.errors[0]}\n"
    assert not result.passed and result.cases == []


def test_total_op_mode_needs_total_op(tmp_path: Path) -> None:
    result, b, _ = run(tmp_path, [rec("a", 1.0, None) | {"total_op_avg_time_us": None}],
                       [rec("a", 1.0)], metric="total-op")
    assert result.errors == [
        f"{b}:1 requires total-op for 'latency-a' under --metric-source total-op but "
        "total_op_avg_time_us is null"
    ]


def test_fallback_that_cannot_be_reread_is_an_error_or_a_skip(tmp_path: Path) -> None:
    err = "no resolved kernels matched profiler kernel view"
    base = [rec("a", 5.0) | {"total_op_avg_time_us": None}, rec("b", 2.0)]
    comp = [rec("a", None, 4.0, error=err), rec("b", 1.0)]
    result, b, _ = run(tmp_path, base, comp)
    assert result.errors == [
        f"{b}:1 requires total-op for 'latency-a' under --metric-source total-op but "
        "total_op_avg_time_us is null"
    ]
    result, _, _ = run(tmp_path, base, comp, skip=True)
    assert [c.latency_id for c in result.cases] == ["latency-b"]
    assert len(result.skipped) == 1 and not result.passed


# --------------------------------------------------------------------------- pre-checks


def test_bench_mode_mixed_inside_one_file(tmp_path: Path) -> None:
    result, b, _ = run(tmp_path, [rec("a", 1.0), rec("b", 1.0, mode="msprof")], [rec("a", 1.0)])
    assert result.errors == [
        f"cannot compare results: {b}: mixed bench_mode in same file: line 2 has "
        "bench_mode=msprof, but earlier records have bench_mode=torch-npu-profiler"
    ]


def test_bench_mode_present_on_one_side_only(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("a", 1.0, omit_mode=True)], [rec("a", 1.0)])
    assert result.errors == [
        "cannot compare results: candidate has bench_mode=torch-npu-profiler but baseline "
        "has no bench_mode (pre-perf-counter record)"
    ]
    result, _, _ = run(tmp_path, [rec("a", 1.0)], [rec("a", 1.0, mode=None)])
    assert result.errors == [
        "cannot compare results: baseline has bench_mode=torch-npu-profiler but candidate "
        "has no bench_mode (pre-perf-counter record)"
    ]
    result, _, _ = run(tmp_path, [rec("a", 2.0, omit_mode=True)], [rec("a", 1.0, omit_mode=True)])
    assert result.passed  # neither side has the key: old files still compare


def test_bench_mode_differs_between_files(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("a", 1.0, mode="msprof")], [rec("a", 1.0, mode="perf-counter")])
    assert result.errors == [
        "cannot compare results from different bench modes: baseline=msprof, candidate=perf-counter"
    ]


def test_every_baseline_id_must_exist_in_compare_and_extras_are_ignored(tmp_path: Path) -> None:
    result, _, c = run(tmp_path, [rec("a", 1.0), rec("b", 1.0), rec("c", 1.0)], [rec("b", 1.0)])
    assert result.errors == [f"{c} is missing required latency ids: ['latency-a', 'latency-c']"]
    result, _, _ = run(tmp_path, [rec("a", 2.0)], [rec("a", 1.0), rec("zzz", -5.0)])
    assert result.passed and [c.latency_id for c in result.cases] == ["latency-a"]


@pytest.mark.parametrize(("base_label", "comp_label"), [("1", "case-1"), ("case-2", "2")])
def test_latency_case_n_is_an_alias_of_latency_n(tmp_path: Path, base_label: str, comp_label: str) -> None:
    result, _, _ = run(tmp_path, [rec(base_label, 4.0)], [rec(comp_label, 2.0)])
    assert result.passed
    assert [c.latency_id for c in result.cases] == [f"latency-{base_label}"]
    assert format_comparison(result).splitlines()[1] == (
        f"latency-{base_label}: baseline=4.0, compare=2.0, delta=-50.00%"
    )


def test_alias_does_not_match_non_numeric_labels(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("x", 4.0)], [rec("case-x", 2.0)])
    assert result.errors and "missing required latency ids: ['latency-x']" in result.errors[0]


def test_duplicate_ids_and_empty_baseline(tmp_path: Path) -> None:
    result, b, _ = run(tmp_path, [rec("a", 1.0), rec("a", 2.0)], [rec("a", 1.0)])
    assert result.errors == [f"{b}:2 duplicates latency id 'latency-a'"]
    result, _, c = run(tmp_path, [rec("a", 1.0)], [rec("case-1", 1.0), rec("a", 1.0), rec("a", 3.0)])
    assert result.errors == [f"{c}:3 duplicates latency id 'latency-a'"]
    result = compare_records([], [PerfRecord(case_label="a", kernel_avg_time_us=1.0)])
    assert result.errors == ["baseline did not contain any latency-<id>: <value> entries"]


def test_a_case_with_no_metric_at_all(tmp_path: Path) -> None:
    result, b, _ = run(tmp_path, [rec("a", None, None)], [rec("a", 1.0)])
    assert result.errors == [f"{b}:1 has no usable metric for 'latency-a'"]


# --------------------------------------------------------------------- case errors, skip


def test_unrecoverable_error_message_fails_the_run(tmp_path: Path) -> None:
    base = [rec("a", 10.0), rec("b", 20.0)]
    comp = [rec("a", 5.0), rec("b", None, None, error="RuntimeError: launch failed")]
    result, _, c = run(tmp_path, base, comp)
    assert result.errors == [
        f"{c}:2 cannot compare 'latency-b' because 'error_message: RuntimeError: launch failed' is present"
    ]
    assert format_comparison(result) == f"FAIL: {result.errors[0]}\n"


def test_skip_latency_errors_lists_the_skipped_cases_and_still_fails(tmp_path: Path) -> None:
    base = [rec("a", 10.0), rec("b", 20.0), rec("c", 0.0), rec("d", 30.0, error="OOM")]
    comp = [rec("a", 5.0), rec("b", None, None, error="RuntimeError: launch failed"),
            rec("c", 1.0), rec("d", 3.0)]
    result, b, c = run(tmp_path, base, comp, skip=True)
    assert not result.passed and result.errors == []
    assert format_comparison(result) == "\n".join([
        "Perf comparison:",
        "latency-a: baseline=10.0, compare=5.0, delta=-50.00%",
        "Avg improvement: +50.0%",
        "Geomean speedup: 2.00x",
        "Metric source: kernel",
        "FAIL: skipped 3 latency entries due to latency errors",
        f"{c}:2 cannot compare 'latency-b' because 'error_message: RuntimeError: launch failed' is present",
        f"{b} cannot compare 'latency-c' because baseline timing 0.0 must be > 0",
        f"{b}:4 cannot compare 'latency-d' because 'error_message: OOM' is present",
        NO_CI,
    ]) + "\n"


@pytest.mark.parametrize(
    ("base_value", "comp_value", "side", "shown", "rule"),
    [
        (0.0, 1.0, "baseline", "0.0", "must be > 0"),
        (1.0, -2.5, "compare", "-2.5", "must be > 0"),
        (math.nan, 1.0, "baseline", "nan", "must be a finite number > 0"),
        (1.0, math.inf, "compare", "inf", "must be a finite number > 0"),
    ],
)
def test_bad_timing_values_are_case_errors(tmp_path: Path, base_value: float, comp_value: float,
                                           side: str, shown: str, rule: str) -> None:
    result, b, c = run(tmp_path, [rec("a", base_value), rec("b", 4.0)], [rec("a", comp_value), rec("b", 2.0)])
    file = b if side == "baseline" else c
    assert result.errors == [f"{file} cannot compare 'latency-a' because {side} timing {shown} {rule}"]
    skipped, _, _ = run(tmp_path, [rec("a", base_value), rec("b", 4.0)],
                        [rec("a", comp_value), rec("b", 2.0)], skip=True)
    assert [x.latency_id for x in skipped.cases] == ["latency-b"]
    assert skipped.skipped == result.errors
    assert skipped.geomean_speedup == pytest.approx(2.0)


def test_every_case_skipped_prints_unknown_summaries(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [rec("a", 1.0, error="boom")], [rec("a", 1.0)], skip=True)
    lines = format_comparison(result).splitlines()
    assert lines[:5] == ["Perf comparison:", "Avg improvement: unknown", "Geomean speedup: unknown",
                         "Metric source: unknown", "FAIL: skipped 1 latency entries due to latency errors"]
    assert NO_CI not in lines  # nothing was compared, so there is nothing to put a CI on


def test_records_built_in_memory_are_named_by_side_and_index() -> None:
    base = [PerfRecord(case_label="a", kernel_avg_time_us=1.0, error_message="bad")]
    result = compare_records(base, base, baseline_name="B.txt")
    assert result.errors == ["B.txt:1 cannot compare 'latency-a' because 'error_message: bad' is present"]


def test_unknown_metric_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        compare_records([], [], metric="all")


# ------------------------------------------------------------------------------ all mode


def test_all_mode_prints_both_sections_and_passes_only_if_both_pass(tmp_path: Path) -> None:
    b = write(tmp_path / "b.txt", [rec("a", 10.0, 12.0)])
    c = write(tmp_path / "c.txt", [rec("a", 5.0, 8.0)])
    results = compare_all(load(b), load(c))
    assert [r.requested for r in results] == ["kernel", "total-op"]
    assert comparisons_passed(results)
    text = format_comparisons(results)
    assert text.splitlines() == [
        "Metric source section: kernel",
        "Perf comparison:",
        "latency-a: baseline=10.0, compare=5.0, delta=-50.00%",
        "Avg improvement: +50.0%",
        "Geomean speedup: 2.00x",
        "Metric source: kernel",
        "PASS: compared 1 latency entries",
        NO_CI,
        "Metric source section: total-op",
        "Perf comparison:",
        "latency-a: baseline=total-op=12.0, compare=total-op=8.0, delta=-33.33%",
        "Avg improvement: +33.3%",  # 4/12
        "Geomean speedup: 1.50x",
        "Metric source: total-op",
        "PASS: compared 1 latency entries",
        NO_CI,
    ]


def test_all_mode_with_an_unavailable_section_fails(tmp_path: Path) -> None:
    err = "no resolved kernels matched profiler kernel view"
    b = write(tmp_path / "b.txt", [rec("a", 10.0, 12.0)])
    c = write(tmp_path / "c.txt", [rec("a", None, 8.0, error=err)])
    results = compare_all(load(b), load(c))
    assert not comparisons_passed(results)
    text = format_comparisons(results)
    assert text.startswith(
        "Metric source section: kernel\n"
        f"unavailable: {c}:1 requires kernel latency for 'latency-a' under --metric-source kernel\n"
        "Metric source section: total-op\nPerf comparison:\n"
    )
    assert results[1].passed


def test_all_mode_bench_mode_mismatch_is_one_fail_line(tmp_path: Path) -> None:
    b = write(tmp_path / "b.txt", [rec("a", 1.0, mode="msprof")])
    c = write(tmp_path / "c.txt", [rec("a", 1.0)])
    results = compare_all(load(b), load(c))
    assert len(results) == 1 and not comparisons_passed(results)
    assert format_comparisons(results) == (
        "FAIL: cannot compare results from different bench modes: baseline=msprof, "
        "candidate=torch-npu-profiler\n"
    )


def test_random_hostile_records_never_raise() -> None:
    """Deterministic fuzz: odd values, labels, modes and errors give a result, never an exception."""
    import random

    gen = random.Random(1234)
    values = [None, 0.0, -1.0, math.nan, math.inf, 1e-9, 1e300] + [1.0, 3.5, 2.0, 7.0] * 6
    labels = ["a", "1", "case-1", "x" * 90]
    errors = [None] * 12 + ["no resolved kernels matched profiler kernel view", "RuntimeError: boom", ""]
    modes = [MODE] * 12 + ["msprof", None]

    def side() -> list[PerfRecord]:
        out = []
        for _ in range(gen.randint(0, 3)):
            samples = gen.choice([None, [1.0, 2.0, 3.0], [1.0, math.nan, 2.0], [5.0] * 4, [0.0, 1.0, 2.0]])
            out.append(PerfRecord(case_label=gen.choice(labels), kernel_avg_time_us=gen.choice(values),
                                  total_op_avg_time_us=gen.choice(values), error_message=gen.choice(errors),
                                  bench_mode=gen.choice(modes), samples_us=samples))
        return out

    outcomes = set()
    for _ in range(400):
        base, comp = side(), side()
        for result in [compare_records(base, comp, gen.choice(["auto", "kernel", "total-op"]), gen.random() < 0.5),
                       *compare_all(base, comp, gen.random() < 0.5)]:
            text = format_comparison(result)
            assert text.endswith("\n")
            assert result.passed == (not result.errors and not result.skipped and bool(result.cases))
            assert ("PASS: compared" in text) == result.passed
            if result.passed:
                assert all(valid(c.baseline_us) and valid(c.compare_us) for c in result.cases)
            outcomes.add("pass" if result.passed else "skip" if result.skipped else "fail")
    assert outcomes == {"pass", "skip", "fail"}  # the fuzz reached every kind of outcome


def valid(value: float) -> bool:
    return math.isfinite(value) and value > 0
