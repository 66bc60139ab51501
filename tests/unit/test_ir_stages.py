"""IR stage tools on small hand-written stage files (Ascend bishengir layout and Triton files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.ir import stages as st

IR = Path(__file__).resolve().parents[1] / "fixtures" / "ir"
ASCEND = IR / "ascend"
TRITON = IR / "triton"


def test_ascend_order_numeric_then_unnumbered_and_subdirs() -> None:
    names = [s.rel_path for s in st.list_stages(ASCEND)]
    assert names == ["bishengir_stages/1_hivm-plan-memory.mlir", "bishengir_stages/2_hivm-inject-sync.mlir",
                     "bishengir_stages/sub/10_hfusion-auto-vectorize-v2.mlir", "bishengir_stages/canonicalize.mlir"]


def test_keyword_counts_and_interesting_score() -> None:
    stage = st.select_stage(st.list_stages(ASCEND), "inject")
    # wait 2 (wait_flag ×2), set_flag 2, barrier 1, alloc 1, for 1, vector 1, load 1, store 1, if 0
    assert stage.keywords == {"alloc": 1, "copy": 0, "matmul": 0, "for": 1, "if": 0, "vector": 1, "load": 1,
                              "store": 1, "dma": 0, "wait": 2, "set_flag": 2, "barrier": 1}
    assert stage.interesting == 3 + 1 + 3 + 2 + 2 + 12 + 12 + 6  # = 41
    assert (stage.sync_ops, stage.transfer_ops, stage.vector_ops) == (5, 2, 1)
    assert stage.lines == 14


def test_sort_grep_and_limit() -> None:
    stages = st.list_stages(ASCEND)
    assert st.sort_stages(stages, "interesting")[0].stem == "2_hivm-inject-sync"
    assert st.sort_stages(stages, "size")[-1].stem == "canonicalize"
    assert [s.stem for s in st.filter_stages(stages, r"hivm-")] == ["1_hivm-plan-memory", "2_hivm-inject-sync"]
    with pytest.raises(HelixError, match="not a valid regular expression"):
        st.filter_stages(stages, "(")
    with pytest.raises(HelixError, match="unknown --sort-by"):
        st.sort_stages(stages, "bogus")


def test_selection_rules() -> None:
    stages = st.list_stages(ASCEND)
    assert st.select_stage(stages, "bishengir_stages/canonicalize.mlir").stem == "canonicalize"
    assert st.select_stage(stages, "10_hfusion-auto-vectorize-v2").order == 10
    with pytest.raises(HelixError, match="matches 2 stages"):
        st.select_stage(stages, "hivm")
    with pytest.raises(HelixError, match="no stage matches"):
        st.select_stage(stages, "zzz")


def test_summary_highlights_heaviest_lines_first() -> None:
    summary = st.stage_summary(st.select_stage(st.list_stages(ASCEND), "inject"))
    assert len(summary["highlights"]) == 8
    assert summary["highlights"][0] == "5: hivm.set_flag[MTE2, V, 0]"
    assert summary["highlights"][4] == "12: hivm.barrier"


def test_diff_and_find_changes_scores() -> None:
    stages = st.list_stages(ASCEND)
    a, b = stages[0], stages[1]
    d = st.diff_stages(a, b)
    assert d["line_delta"] == 5 and d["size_delta"] == 137
    assert d["keyword_deltas"] == {"wait": 2, "set_flag": 2, "barrier": 1}
    assert "+    hivm.set_flag[MTE2, V, 0]" in d["diff"]
    changes = st.find_changes(stages)
    # score = |Δlines| + |Δbytes|//64 + Σ|Δkw|: 1→2: 5 + 137//64 (2) + 5 = 12
    by_pair = {(c["from_stage"].split("/")[-1], c["to_stage"].split("/")[-1]): c["score"] for c in changes}
    assert by_pair[("1_hivm-plan-memory.mlir", "2_hivm-inject-sync.mlir")] == 12
    assert changes[0]["score"] == max(by_pair.values())
    assert len(st.find_changes(stages, limit=1)) == 1


def test_performance_signals_json_keys_and_transitions() -> None:
    data = st.performance_signals(st.list_stages(ASCEND), limit=5)
    assert list(data) == ["stage_summaries", "vector_heavy_stages", "transfer_heavy_stages", "sync_heavy_stages",
                          "suspicious_transitions"]
    assert data["sync_heavy_stages"] == [{"stage": "bishengir_stages/2_hivm-inject-sync.mlir", "sync_ops": 5}]
    first = data["suspicious_transitions"][0]
    assert first["signal_score"] == 5 and first["sync_delta"] in (5, -5)
    assert set(first) == {"from_stage", "to_stage", "signal_score", "vector_delta", "transfer_delta", "sync_delta",
                          "line_delta", "size_delta"}


def test_triton_stage_files_in_pipeline_order_with_ptx_keywords() -> None:
    stages = st.list_stages(TRITON)
    assert [s.path.suffix for s in stages] == [".ttir", ".ttgir", ".ptx"]
    assert {s.group for s in stages} == {"add_kernel"}
    ptx = stages[-1]
    assert ptx.keywords["load"] == 1 and ptx.keywords["store"] == 1  # ld.global / st.global
    assert st.select_stage(stages, "ttgir").path.name == "add_kernel.ttgir"
    with pytest.raises(HelixError, match="matches 3 stages"):
        st.select_stage(stages, "add_kernel")


def test_pairs_never_cross_kernels(tmp_path: Path) -> None:
    shutil.copytree(TRITON / "add_kernel", tmp_path / "a_kernel")
    shutil.copytree(TRITON / "add_kernel", tmp_path / "b_kernel")
    pairs = st.adjacent_pairs(st.list_stages(tmp_path))
    assert len(pairs) == 4 and all(a.group == b.group for a, b in pairs)


def test_missing_or_empty_ir_dir(tmp_path: Path) -> None:
    with pytest.raises(HelixError, match="does not exist"):
        st.list_stages(tmp_path / "nope")
    with pytest.raises(HelixError, match="no stage files"):
        st.list_stages(tmp_path)


def _round(ws: Path, n: int, parent: str, ir_from: Path | None) -> None:
    folder = ws / f"opt-round-{n}"
    folder.mkdir(parents=True)
    (folder / "round-state.json").write_text(json.dumps({"round": f"round-{n}", "parent_round": parent}))
    if ir_from is not None:
        shutil.copytree(ir_from, folder / "ir")


def test_diff_round_against_baseline_and_parent_round(tmp_path: Path) -> None:
    ws = tmp_path
    shutil.copytree(TRITON, ws / "baseline" / "ir")
    _round(ws, 1, "baseline", TRITON)
    ttgir = ws / "opt-round-1" / "ir" / "add_kernel" / "add_kernel.ttgir"
    ttgir.write_text(ttgir.read_text().replace("sizePerThread = [4]", "sizePerThread = [8]"))
    whole = st.diff_round(ws, 1)
    assert whole["parent"] == "baseline"
    assert [(p["to_stage"], p["changed"]) for p in whole["stages"]][0] == ("add_kernel/add_kernel.ttgir", True)
    assert sum(p["changed"] for p in whole["stages"]) == 1
    one = st.diff_round(ws, 1, "ttgir")
    assert "-#blocked = #ttg.blocked<{sizePerThread = [4]" in one["diff"]
    assert one["diff"].splitlines()[0] == "--- baseline/add_kernel/add_kernel.ttgir"
    _round(ws, 2, "round-1", TRITON)
    (ws / "opt-round-2" / "ir" / "add_kernel" / "add_kernel.ptx").unlink()
    second = st.diff_round(ws, 2)
    assert second["parent"] == "round-1" and second["only_in_parent"] == ["add_kernel/add_kernel.ptx"]


def test_diff_round_errors(tmp_path: Path) -> None:
    with pytest.raises(HelixError, match="does not exist"):
        st.diff_round(tmp_path, 3)
    _round(tmp_path, 1, "round-7x", None)
    with pytest.raises(HelixError, match="names no round"):
        st.diff_round(tmp_path, 1)
    _round(tmp_path, 2, "baseline", TRITON)
    with pytest.raises(HelixError, match="baseline has no IR folder"):
        st.diff_round(tmp_path, 2)
    (tmp_path / "add.py").write_text("import triton\n")
    # the hint is a command that runs as printed, not `--ir-dir baseline/ir ...`
    with pytest.raises(HelixError, match=r"--ir-dir \S*baseline/ir --operator-file \S*baseline/add\.py`"):
        st.diff_round(tmp_path, 2)
    (tmp_path / "opt-round-3").mkdir()
    (tmp_path / "opt-round-3" / "round-state.json").write_text("{broken")
    with pytest.raises(HelixError, match="not valid JSON"):
        st.diff_round(tmp_path, 3)


def test_cli_ir_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.cli import main

    assert main(["ir", "list-stages", "--ir-dir", str(ASCEND), "--sort-by", "interesting", "--limit", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].endswith("bishengir_stages/2_hivm-inject-sync.mlir")
    assert main(["ir", "performance-signals", "--ir-dir", str(ASCEND), "--format", "json"]) == 0
    assert "suspicious_transitions" in json.loads(capsys.readouterr().out)
    assert main(["ir", "diff-stages", "--ir-dir", str(ASCEND), "--from", "1_hivm-plan-memory",
                 "--to", "2_hivm-inject-sync"]) == 0
    assert "keywords: wait +2, set_flag +2, barrier +1" in capsys.readouterr().out
    assert main(["ir", "stage-summary", "--ir-dir", str(ASCEND), "--stage", "hivm"]) == 1
    assert "give the full relative path" in capsys.readouterr().err
    assert main(["ir", "find-changes", "--ir-dir", str(TRITON), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["changes"]) == 2


def test_round_diff_text_for_the_cockpit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.cli import main

    shutil.copytree(TRITON, tmp_path / "baseline" / "ir")
    _round(tmp_path, 1, "baseline", TRITON)
    ptx = tmp_path / "opt-round-1" / "ir" / "add_kernel" / "add_kernel.ptx"
    ptx.write_text(ptx.read_text().replace("ret;", "bar.sync 0;\n\tret;"))
    names = [s.name for s in st.list_stages(tmp_path / "opt-round-1" / "ir")]
    one = st.diff_round(tmp_path, 1, names[-1])
    assert one.text.splitlines()[:3] == [
        "IR diff baseline -> round-1", "add_kernel/add_kernel.ptx -> add_kernel/add_kernel.ptx: lines +1, bytes +13",
        "keywords: barrier +1"]
    assert main(["ir", "diff", "--round", "1", "--workspace", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "IR diff baseline -> round-1" and out[1].split()[0] == "changed"
    assert main(["ir", "diff", "--round", "1", "--workspace", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"][0]["to_stage"] == "add_kernel/add_kernel.ptx"
