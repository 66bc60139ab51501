"""Ascend profiler parsing on the real fixtures: sums checked against hand-worked totals,
and damaged copies (truncated, garbled, missing columns) give problems, never crashes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helix_engine.profile import ascend
from helix_engine.profile.csvstream import CsvReadReport, read_table

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend-profiler"
STANDALONE = FIX / "standalone_real_output"
MSPROF = FIX / "msprof_real_output"
REALISTIC = FIX / "realistic_parent_layout"
KD = STANDALONE / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
MSPROF_OUT = MSPROF / "mindstudio_profiler_output"
REAL_OUT = REALISTIC / "mindstudio_profiler_output"


def test_layout_detection_picks_mode_and_files() -> None:
    torch_layout = ascend.find_layout(STANDALONE)
    assert torch_layout is not None and torch_layout.mode == ascend.MODE_TORCH
    assert torch_layout.op_summary is not None and torch_layout.op_summary.name == "kernel_details.csv"
    assert torch_layout.task_time is None and torch_layout.timeline_json.name == "trace_view.json"
    msprof = ascend.find_layout(MSPROF)
    assert msprof is not None and msprof.mode == ascend.MODE_MSPROF
    assert msprof.op_statistic.name == "op_statistic_20260511093035.csv"
    assert msprof.task_time.name == "task_time_20260511093035.csv"
    assert msprof.timeline_json.name == "msprof_20260511093035.json"
    # the output dir itself and a parent two levels up are accepted too
    assert ascend.find_layout(MSPROF_OUT).root == MSPROF_OUT
    assert ascend.find_layout(FIX / "realistic_parent_layout").root == REAL_OUT


def test_torch_layout_wins_when_both_exist(tmp_path: Path) -> None:
    shutil.copytree(STANDALONE, tmp_path / "run", dirs_exist_ok=True)
    shutil.copytree(MSPROF_OUT, tmp_path / "run" / "PROF_1" / "mindstudio_profiler_output")
    layout = ascend.find_layout(tmp_path)
    assert layout is not None and layout.mode == ascend.MODE_TORCH


def test_newest_stamped_csv_wins(tmp_path: Path) -> None:
    out = tmp_path / "mindstudio_profiler_output"
    shutil.copytree(MSPROF_OUT, out)
    old = out / "op_statistic_20250101000000.csv"
    old.write_text((MSPROF_OUT / "op_statistic_20260511093035.csv").read_text())
    import os

    os.utime(old, (1, 1))
    assert ascend.pick_csv(out, "op_statistic").name == "op_statistic_20260511093035.csv"


def test_standalone_kernel_details_sum_888_42_over_10_steps() -> None:
    summary = ascend.summarize_invocations(KD, ascend.MODE_TORCH, "matmul_kernel")
    d = summary.durations
    # 88.162+88.522+87.822+89.082+89.022+89.122+88.842+89.222+89.942+88.682 = 888.42
    assert d.count == 10 and d.total == pytest.approx(888.42)
    assert d.min == pytest.approx(87.822) and d.max == pytest.approx(89.942)
    assert len(summary.step_ids) == 10
    assert "aic_mte3_ratio" not in summary.ratios  # absent optional column
    assert summary.ratios["aic_mte2_ratio"].avg == pytest.approx(0.9053)
    assert summary.cube_util.avg == pytest.approx(95.5179)
    assert summary.block_dims == [256]
    assert ascend.op_averages_from_kernel_details(KD, repeats=50) == {"matmul_kernel": pytest.approx(88.842)}


def test_kernel_details_without_step_id_divides_by_repeats(tmp_path: Path) -> None:
    lines = KD.read_text().splitlines()
    stripped = [",".join(line.split(",")[1:]) for line in lines]  # drop the Step Id column
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join(stripped) + "\n")
    assert ascend.op_averages_from_kernel_details(path, repeats=4)["matmul_kernel"] == pytest.approx(888.42 / 4)


def test_realistic_parent_layout_matmul_cross_check() -> None:
    op_summary = REAL_OUT / "op_summary_20260402160352.csv"
    d = ascend.summarize_invocations(op_summary, ascend.MODE_MSPROF, "matmul_kernel").durations
    # 355.962+348.697+346.544+350.332+347.903 = 1749.438
    assert d.count == 5 and d.total == pytest.approx(1749.438)
    assert d.avg == pytest.approx(349.8876) and round(d.avg, 3) == 349.888
    assert (d.min, d.max) == (pytest.approx(346.544), pytest.approx(355.962))
    s = ascend.summarize_invocations(op_summary, ascend.MODE_MSPROF, "matmul_kernel")
    assert s.ratios["aic_mte3_ratio"].count == 5  # present in this layout
    assert s.ratios["aic_mte2_ratio"].avg == pytest.approx(0.8798)


def test_msprof_op_summary_tabs_and_na_cells() -> None:
    op_summary = MSPROF_OUT / "op_summary_20260511093035.csv"
    s = ascend.summarize_invocations(op_summary, ascend.MODE_MSPROF, "matmul_kernel")
    # 6.560+6.200+5.780+6.122+5.482 = 30.144 (the start-time cells end in TAB)
    assert s.durations.total == pytest.approx(30.144) and s.durations.count == 5
    assert s.per_name["Cast"].total == pytest.approx(4.26 + 1.98)
    dsa = ascend.summarize_invocations(op_summary, ascend.MODE_MSPROF, "DSARandomNormal")
    assert dsa.durations.total == pytest.approx(2.78 + 1.44)
    assert all(r.total == 0.0 for r in dsa.ratios.values())  # every counter N/A → 0
    assert dsa.wait.count == 1  # only waits > 0 count (0 and 728.74)


def test_op_statistic_averages_msprof_and_torch_fallback() -> None:
    msprof = ascend.op_averages_from_op_statistic(MSPROF_OUT / "op_statistic_20260511093035.csv", None)
    # counts 5,2,2 → GCD 1 → the file's own Avg Time(us)
    assert msprof == {"matmul_kernel": 6.028, "Cast": 3.12, "DSARandomNormal": 2.11}
    real = ascend.op_averages_from_op_statistic(REAL_OUT / "op_statistic_20260402160352.csv", None)
    # counts 2234,4,4,4 → GCD 2 → Total / 2
    assert real["matmul_kernel"] == pytest.approx(3071868.138 / 2) and real["Add"] == pytest.approx(11.816 / 2)
    torch_stat = STANDALONE / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    assert ascend.op_averages_from_op_statistic(torch_stat, 10) == {"matmul_kernel": pytest.approx(88.842)}


def test_task_timeline_gaps_and_tracks() -> None:
    timeline, report = ascend.task_timeline(MSPROF_OUT / "task_time_20260511093035.csv", "matmul_kernel")
    assert report.problems == []
    assert timeline["matched_rows"] == 5 and timeline["max_gap_us"] == pytest.approx(210.75)
    assert timeline["overlap_count"] == 0
    assert ascend.count_tracks(MSPROF_OUT / "msprof_20260511093035.json") == (8, None)
    assert ascend.count_tracks(STANDALONE / "ASCEND_PROFILER_OUTPUT" / "trace_view.json") == (8, None)


def test_api_statistic_sorted_and_launch_detected() -> None:
    apis, _ = ascend.read_api_statistic(STANDALONE / "ASCEND_PROFILER_OUTPUT" / "api_statistic.csv")
    assert [a.name for a in apis] == ["aclrtSynchronizeDeviceWithTimeout", "launch"]
    assert apis[0].time_us == 604.9 and apis[0].count == 11


# ----------------------------------------------------------------------------- damaged files


def test_truncated_csv_skips_the_short_row_with_a_warning(tmp_path: Path) -> None:
    text = KD.read_text()
    cut = tmp_path / "kernel_details.csv"
    cut.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 40])  # last row cut after 40 chars
    s = ascend.summarize_invocations(cut, ascend.MODE_TORCH, "matmul_kernel")
    assert s.durations.count == 9 and s.durations.total == pytest.approx(888.42 - 88.682)
    assert [p.severity for p in s.report.problems] == ["warning"]
    assert "truncated" in s.report.problems[0].message and s.report.problems[0].line == 11


def test_garbled_binary_csv_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "kernel_details.csv"
    bad.write_bytes(b"Name,Duration(us)\n\x00\xff\xfe garbage \x00\n")
    s = ascend.summarize_invocations(bad, ascend.MODE_TORCH, "matmul_kernel")
    assert s.durations.count == 0
    assert s.report.problems and s.report.problems[0].severity == "error"
    with pytest.raises(ascend.ProfileDataError, match="not"):
        ascend.op_averages_from_kernel_details(bad, 10)


def test_missing_required_columns_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "op_statistic.csv"
    bad.write_text("OP Type,Count\nmatmul,3\n")
    rows, report = ascend.read_op_statistic(bad)
    assert rows == [] and "Total Time(us)" in report.problems[0].message
    with pytest.raises(ascend.ProfileDataError, match="Core Type"):
        ascend.op_averages_from_op_statistic(bad, None)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    report = CsvReadReport(tmp_path / "nope.csv")
    assert read_table(tmp_path / "nope.csv", report, ["Name"]) is None and "missing" in report.problems[0].message
    (tmp_path / "empty.csv").write_text("")
    report = CsvReadReport(tmp_path / "empty.csv")
    assert read_table(tmp_path / "empty.csv", report, ["Name"]) is None and "empty" in report.problems[0].message
    with pytest.raises(ascend.ProfileDataError, match="missing"):
        ascend.op_averages_from_kernel_details(tmp_path / "nope.csv", 5)


def test_truncated_timeline_json_is_a_warning(tmp_path: Path) -> None:
    src = (MSPROF_OUT / "msprof_20260511093035.json").read_text()
    bad = tmp_path / "msprof_1.json"
    bad.write_text(src[: len(src) // 2])
    tracks, problem = ascend.count_tracks(bad)
    assert tracks is None and problem is not None and problem.severity == "warning"
    assert "truncated" in problem.message


def test_bom_header_and_extra_cells(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("\ufeffStep Id,Name,Duration(us)\n1,k,2.5,extra\n2,k,3.5\n", encoding="utf-8")
    assert ascend.op_averages_from_kernel_details(path, 9) == {"k": pytest.approx(3.0)}


def test_large_timeline_json_is_scanned_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ascend, "MAX_JSON_LOAD_BYTES", 10)
    src = MSPROF_OUT / "msprof_20260511093035.json"
    assert ascend.count_tracks(src) == (8, None)  # same answer as json.load


def test_csv_benchmark_runs_small(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_profile_csv

    rows = bench_profile_csv.run(rows=2000, repeats=1)  # raises if the aggregations disagree
    assert [r["unit"] for r in rows] == ["s", "s", "MiB", "s", "s"]
    assert all(r["compare_to"] and r["ratio"] is not None and r["value"] > 0 for r in rows)
