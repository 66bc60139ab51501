"""build_report on the real fixtures: classification after the unit fix, JSON keys, routing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.profile import routing, signals
from helix_engine.profile.ascend import RunningStat
from helix_engine.profile.report import build_report

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend-profiler"
UPSTREAM_KEYS = ["profile_dir", "op_statistic_file", "op_summary_file", "task_time_file", "api_statistic_file",
                 "msprof_json_file", "target_operator", "selection", "target_row", "op_summary", "core_type_totals",
                 "data_movement_hotspots", "top_ops", "operator_type_guess", "bound_analysis", "pipeline_signals",
                 "task_timeline_signals", "host_api_signals", "msprof_timeline_signals", "binary_signals"]


@pytest.mark.parametrize(("fixture", "memory_pct", "compute_pct"), [
    ("msprof_real_output", 44.18, 1.46),       # mte1 2.14 + mte2 42.04; mac 1.46
    ("realistic_parent_layout", 99.04, 20.3),  # mte1 11.06 + mte2 87.98 + mte3 0; mac 20.3
    ("standalone_real_output", 101.05, 7.27),  # mte1 10.52 + mte2 90.53; mac 7.27
])
def test_fixtures_classify_as_their_ratios_say(fixture: str, memory_pct: float, compute_pct: float) -> None:
    report = build_report(FIX / fixture)
    assert report.target_operator == "matmul_kernel" and report.selection == "inferred"
    scores = report.bound_analysis["scores"]
    assert scores["memory_pct"] == pytest.approx(memory_pct, abs=0.01)
    assert scores["compute_pct"] == pytest.approx(compute_pct, abs=0.01)
    # MTE pipes busy far more than compute (≥ compute + 5 points): memory-bound, not upstream's "mixed"
    assert report.bound == "memory-bound"
    assert report.operator_type_guess["kind"] == "cube"
    assert report.pipeline_signals["ratio_scale_in_file"] == "fraction"
    assert [s["symptom"] for s in report.symptoms][0] == "high-transfer-pressure"


def test_realistic_parent_layout_reads_as_saturated_cores_starved_by_transfer() -> None:
    report = build_report(FIX / "realistic_parent_layout")
    assert report.pipeline_signals["cube_utilization_percent"]["avg"] == pytest.approx(94.9536)
    reasoning = " ".join(report.bound_analysis["reasoning"])
    assert "core occupancy" in reasoning and "saturated" in reasoning
    assert report.op_summary["sum_us"] == pytest.approx(1749.438)
    assert report.op_summary["avg_us"] == pytest.approx(349.8876)
    assert not report.op_summary["matches_op_statistic"]  # op_summary covers 5 of 2234 launches


def test_weak_overlap_only_when_no_pipe_is_saturated() -> None:
    small = [s["symptom"] for s in build_report(FIX / "msprof_real_output").symptoms]
    big = [s["symptom"] for s in build_report(FIX / "standalone_real_output").symptoms]
    assert "weak-pipeline-overlap" in small  # busiest pipe mte2 at 42%
    assert "weak-pipeline-overlap" not in big  # mte2 at 90.5%


def test_percent_scale_files_are_not_scaled_twice() -> None:
    fraction = {"aic_mte2_ratio": RunningStat(), "aic_mac_ratio": RunningStat()}
    percent = {"aic_mte2_ratio": RunningStat(), "aic_mac_ratio": RunningStat()}
    for v in (0.8, 0.9):
        fraction["aic_mte2_ratio"].add(v)
        percent["aic_mte2_ratio"].add(v * 100)
    fraction["aic_mac_ratio"].add(0.1)
    percent["aic_mac_ratio"].add(10.0)
    a, scale_a = signals.percent_ratios(fraction)
    b, scale_b = signals.percent_ratios(percent)
    assert (scale_a, scale_b) == ("fraction", "percent")
    assert a == pytest.approx(b) and a["aic_mte2_ratio"] == pytest.approx(85.0)


@pytest.mark.parametrize(("pct", "label"), [
    ({"aic_mac_ratio": 80.0, "aic_mte2_ratio": 10.0, "aic_scalar_ratio": 5.0}, "compute-bound"),
    ({"aiv_vec_ratio": 30.0, "aiv_scalar_ratio": 45.0, "aiv_mte2_ratio": 20.0}, "scalar-overhead"),
    ({"aiv_vec_ratio": 50.0, "aiv_mte2_ratio": 40.0, "aiv_scalar_ratio": 10.0}, "mixed"),
    ({"aiv_vec_ratio": 20.0, "aiv_mte2_ratio": 25.0}, "memory-bound"),
])
def test_bound_thresholds_on_percent_scale(pct: dict[str, float], label: str) -> None:
    assert signals.bound_analysis(pct, None)["classification"] == label


def test_core_buckets_and_host_apis() -> None:
    report = build_report(FIX / "msprof_real_output")
    buckets = report.core_type_totals
    assert buckets["cube"]["total_time_us"] == pytest.approx(30.144)
    assert buckets["vector"]["total_time_us"] == pytest.approx(6.24)
    assert buckets["other"]["total_time_us"] == pytest.approx(4.22)  # DSA_SQE
    assert report.total_time_us == pytest.approx(40.604)
    assert report.host_api_signals["launch_related_present"] is True
    assert report.host_api_signals["top_apis"][0]["name"] == "aclnnInplaceNormalGetWorkspaceSize"
    assert len(report.host_api_signals["top_apis"]) == 10
    assert report.task_timeline_signals["max_gap_us"] == pytest.approx(210.75)
    assert report.msprof_timeline_signals == {"stream_like_tracks": 8}


def test_json_has_every_upstream_key_in_order_and_ours() -> None:
    data = build_report(FIX / "standalone_real_output", top=1).to_json()
    assert list(data)[: len(UPSTREAM_KEYS)] == UPSTREAM_KEYS
    assert data["binary_signals"] == {}
    assert data["top_ops"] == [{"OP Type": "matmul_kernel", "Core Type": "AI_CORE", "Count": 10,
                                "Total Time(us)": 888.42, "Avg Time(us)": 88.842, "Ratio(%)": 100.0}]
    assert data["pipeline_signals"]["block_dim"] == {"observed_values": [256]}
    assert {"source", "backend", "symptoms", "suggested_patterns", "problems"} <= set(data)
    json.dumps(data)  # serializable


def test_explicit_target_and_unknown_target(tmp_path: Path) -> None:
    report = build_report(FIX / "msprof_real_output", target_op="Cast")
    assert report.selection == "explicit" and report.op_summary["count"] == 2
    assert report.operator_type_guess["kind"] == "vector"  # aiv_vec ... falls back to the core bucket
    with pytest.raises(HelixError, match="matmul_kernel, Cast, DSARandomNormal"):
        build_report(FIX / "msprof_real_output", target_op="matmul")


def test_data_movement_hotspots(tmp_path: Path) -> None:
    out = tmp_path / "mindstudio_profiler_output"
    out.mkdir()
    (out / "op_statistic_1.csv").write_text(
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "0,my_kernel,AI_VECTOR_CORE,10,60.0,5,6,7,60\n0,TransData,AI_VECTOR_CORE,10,30.0,3,3,3,30\n"
        "0,MemcpyAsync,AI_CPU,10,10.0,1,1,1,10\n")
    report = build_report(tmp_path)
    assert [d["op_type"] for d in report.data_movement_hotspots] == ["TransData", "MemcpyAsync"]
    assert report.bound == signals.NO_COUNTERS  # no per-invocation file
    assert report.symptoms[0]["symptom"] == "high-transfer-pressure"  # 40% of time in movement ops
    assert "per-invocation" in " ".join(report.notes)


def test_damaged_files_in_a_report(tmp_path: Path) -> None:
    shutil.copytree(FIX / "msprof_real_output", tmp_path / "p")
    out = tmp_path / "p" / "mindstudio_profiler_output"
    (out / "op_summary_20260511093035.csv").write_bytes(b"\x00\x01garbage")
    report = build_report(tmp_path / "p")
    assert report.hotspots and report.problems and report.problems[0]["severity"] == "error"
    assert "Problems" in report.to_markdown()
    (out / "op_statistic_20260511093035.csv").write_text("not,a,profile\n1,2,3\n")
    with pytest.raises(HelixError, match="lacks the column"):
        build_report(tmp_path / "p")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HelixError, match="no profiler output"):
        build_report(tmp_path / "empty")
    with pytest.raises(HelixError, match="does not exist"):
        build_report(tmp_path / "nope")


def test_markdown_sections() -> None:
    text = build_report(FIX / "realistic_parent_layout").to_markdown()
    for heading in ("# Profile report: matmul_kernel", "## Hotspots", "## Core buckets", "## Data-movement hotspots",
                    "## Target cross-check", "## Bound: memory-bound", "## Suggested patterns"):
        assert heading in text
    assert "slice-coalesce → slice_coalesce" in text and "cache-use → on-chip-reuse" in text
    assert "symptom card memory-bound" in text and "(no card)" not in text
    assert "sum 1749.438 µs, avg 349.888 µs, min 346.544 µs, max 355.962 µs" in text


def test_routing_aliases_and_pattern_files() -> None:
    assert len(routing.PATTERN_FILES) == 34
    assert routing.resolve_pattern("slice-coalesce").pattern_file == "slice_coalesce"
    assert routing.resolve_pattern("slice-intermediate").pattern_file == "slice_intermediate"
    # upstream names no file for these two: helix's knowledge base has a card that covers each
    assert routing.resolve_pattern("cache-use").pattern_file == "on-chip-reuse"
    assert routing.resolve_pattern("gather-load").pattern_file == "discrete_memory_access"
    assert routing.resolve_pattern("bogus").note == "unknown pattern name"
    unresolved = {p.name for s in routing.SYMPTOMS for p in routing.candidates(s) if p.pattern_file is None}
    assert unresolved == set()  # every routed name names a shipped card (tests/unit/test_knowledge.py)
    rows = routing.route(["weak-pipeline-overlap", "nonsense"])
    assert [r["symptom"] for r in rows] == ["weak-pipeline-overlap"]
    assert rows[0]["symptom_card"] == "transfer-pipeline-imbalance"
    assert [p["name"] for p in rows[0]["patterns"]] == ["software-pipeline", "reorder-load", "classic-matmul"]


def test_cli_profile_report_json_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.cli import main

    assert main(["profile-report", "--profile-dir", str(FIX / "standalone_real_output"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bound_analysis"]["classification"] == "memory-bound"
    assert main(["profile-report", "--profile-dir", str(FIX / "msprof_real_output"), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "top 2 of 3 ops" in out
    assert main(["profile-report", "--profile-dir", str(FIX / "msprof_real_output"), "--target-op", "x"]) == 1
    assert "is not in this profile" in capsys.readouterr().err


def test_report_for_round_uses_declared_or_default_profile_dir(tmp_path: Path) -> None:
    from helix_engine.profile.report import report_for_round, round_profile_dir

    rnd = tmp_path / "opt-round-1"
    rnd.mkdir()
    assert report_for_round(rnd) is None
    shutil.copytree(FIX / "msprof_real_output", rnd / "profile")
    assert report_for_round(rnd).target_operator == "matmul_kernel"
    shutil.copytree(FIX / "standalone_real_output", rnd / "prof2")
    (rnd / "round-state.json").write_text(json.dumps({"profile_dir": "prof2"}))
    assert round_profile_dir(rnd) == rnd / "prof2"
    assert report_for_round(rnd).source == "torch-npu-profiler"
