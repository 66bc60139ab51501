"""``helix compiler-source`` over small fake checkouts of the three layouts (tests/fixtures/
compiler_source: AscendNPU-IR, triton-ascend, triton), over the installed triton package with the
names of a real CPU IR capture (tests/fixtures/ir/triton-cpu-softmax), and against hostile trees:
links out of the checkout, FIFOs, build folders, file names and lines carrying terminal escapes."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.compiler_source import analysis
from helix_engine.compiler_source.ir_terms import terms_from_ir
from helix_engine.compiler_source.locate import Located, locate, show
from helix_engine.compiler_source.tree import walk
from helix_engine.errors import HelixError
from helix_engine.state.round_fill import evidence_found

from hostile import FORBIDDEN, PAYLOAD, hostile_name

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CHECKOUTS = FIXTURES / "compiler_source"
ASCEND_IR = FIXTURES / "ir" / "ascend"
CPU_CAPTURE = FIXTURES / "ir" / "triton-cpu-softmax"


def _scores(located: Located) -> dict[str, list[tuple[str, int]]]:
    return {area: [(h.path, h.score) for h in hits] for area, hits in located.areas.items()}


@pytest.fixture()
def ascend(tmp_path: Path) -> Path:
    """A copy of the AscendNPU-IR checkout the test may add hostile things to."""
    root = tmp_path / "AscendNPU-IR"
    shutil.copytree(CHECKOUTS / "ascendnpu-ir", root)
    return root


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            out[os.path.relpath(os.path.join(folder, name), root)] = (st.st_mtime_ns, st.st_size)
    return out


def test_the_three_layouts_are_read_in_their_areas() -> None:
    """Upstream's AscendNPU-IR folders, triton's lib/include/python/src/backends/third_party/test
    and triton-ascend's third_party/ascend; tools/ and docs outside developer_guide are not read."""
    assert [(f.area, f.rel) for f in walk(CHECKOUTS / "ascendnpu-ir").files] == [
        ("docs", "docs/source/en/developer_guide/passes/hivm-plan-memory.md"),
        ("docs", "docs/source/zh_cn/developer_guide/features/multi-buffer.md"),
        ("lib", "bishengir/lib/Conversion/HFusionToHIVM/HFusionToHIVM.cpp"),
        ("lib", "bishengir/lib/Dialect/HIVM/Transforms/PlanMemory.cpp"),
        ("include", "bishengir/include/bishengir/Dialect/HIVM/IR/HIVMOps.td"),
        ("include", "bishengir/include/bishengir/Dialect/HIVM/Transforms/Passes.td"),
        ("test", "bishengir/test/Dialect/HIVM/plan-memory.mlir")]
    assert [(f.area, f.rel) for f in walk(CHECKOUTS / "triton").files] == [
        ("lib", "lib/Dialect/Triton/Transforms/Combine.cpp"),
        ("lib", "python/src/passes.cc"),
        ("lib", "python/triton/backends/compiler.py"),
        ("lib", "third_party/nvidia/backend/compiler.py"),
        ("include", "include/triton/Dialect/Triton/IR/TritonOps.td"),
        ("include", "include/triton/Dialect/Triton/Transforms/Passes.td"),
        ("test", "test/Triton/combine.mlir")]
    assert [(f.area, f.rel) for f in walk(CHECKOUTS / "triton-ascend").files] == [
        ("lib", "third_party/ascend/backend/compiler.py"),
        ("lib", "third_party/ascend/triton-adapter/lib/TritonToLinalg/LoadStoreConverter.cpp"),
        ("include", "third_party/ascend/triton-adapter/include/TritonToLinalg/Passes.td"),
        ("test", "third_party/ascend/unittest/pytest_ut/test_load.py")]


def test_upstream_score_with_the_pass_hint() -> None:
    """6 x path hits + 2 x min(text hits, 5) + area bonus (docs 2, lib 1) + hint bonus ("pass": docs
    +5, "passes" in the path +3, and +2 more in include)."""
    located = locate(CHECKOUTS / "ascendnpu-ir", ["HIVM-Plan-Memory"], hint="pass")
    assert located.terms == ["hivm-plan-memory"]
    assert _scores(located) == {
        # path 1 hit (6) + text 1 (2) + docs 2 + pass hint: docs 5, passes/ 3
        "docs": [("docs/source/en/developer_guide/passes/hivm-plan-memory.md", 6 + 2 + 2 + 5 + 3)],
        # text 2 hits ("the hivm-plan-memory pass", "hivm-plan-memory-verbose") + lib 1
        "lib": [("bishengir/lib/Dialect/HIVM/Transforms/PlanMemory.cpp", 4 + 1)],
        # text 1 + include 0 + passes in path 3 + include with passes 2
        "include": [("bishengir/include/bishengir/Dialect/HIVM/Transforms/Passes.td", 2 + 3 + 2)],
        # text 1 ("--hivm-plan-memory"); "hivm/plan-memory.mlir" is no path hit
        "test": [("bishengir/test/Dialect/HIVM/plan-memory.mlir", 2)]}
    (docs,) = located.areas["docs"]
    assert (docs.why, docs.lines) == ("pass docs match", [(1, "# hivm-plan-memory")])


def test_text_hits_count_at_most_five_and_the_memory_hint(ascend: Path) -> None:
    (ascend / "bishengir/lib/Transforms").mkdir()
    (ascend / "bishengir/lib/Transforms/MultiBuffer.cpp").write_text("// multi-buffer\n" * 9)
    located = locate(ascend, ["multi-buffer"], hint="memory")
    assert _scores(located) == {
        # "features/multi-buffer.md" 1 path hit; "# Multi-buffer" and "enable-auto-multi-buffer"; docs 2; memory: docs 2
        "docs": [("docs/source/zh_cn/developer_guide/features/multi-buffer.md", 6 + 4 + 2 + 2)],
        # 9 text hits count as 5; lib 1; memory: lib 3
        "lib": [("bishengir/lib/Transforms/MultiBuffer.cpp", 10 + 1 + 3)],
        "include": [("bishengir/include/bishengir/Dialect/HIVM/Transforms/Passes.td", 2)],
        "test": []}
    assert locate(ascend, ["multi-buffer"], limit=0).areas == {"docs": [], "lib": [], "include": [], "test": []}


def test_definitions_follow_a_pass_to_its_options_constructor_and_bindings() -> None:
    ascend = locate(CHECKOUTS / "ascendnpu-ir", ["hivm-plan-memory", "hivm.load"])
    assert [(d.kind, d.label, d.path.rsplit("/", 1)[-1], d.line) for d in ascend.definitions] == [
        ("pass", 'PlanMemory "hivm-plan-memory"', "Passes.td", 1),
        ("option", 'enableMultiBuffer "enable-auto-multi-buffer"', "Passes.td", 5),
        ("cl::opt", 'clPlanMemoryVerbose "hivm-plan-memory-verbose"', "PlanMemory.cpp", 4),
        ("pass-constructor", "createPlanMemoryPass", "PlanMemory.cpp", 12),
        ("pass-constructor", "createPlanMemoryPass", "Passes.td", 3),
        ("tablegen", 'HIVM_LoadOp "load"', "HIVMOps.td", 1)]  # found by its mnemonic: "hivm.load" is not in it
    triton = locate(CHECKOUTS / "triton", ["triton-combine", "ttir"])
    assert [(d.kind, d.label, d.path) for d in triton.definitions] == [
        ("pass", 'TritonCombineOps "triton-combine"', "include/triton/Dialect/Triton/Transforms/Passes.td"),
        ("pass-constructor", "createTritonCombineOpsPass", "lib/Dialect/Triton/Transforms/Combine.cpp"),
        ("binding", 'add_combine "createTritonCombineOpsPass"', "python/src/passes.cc"),
        ("binding", 'add_reorder_broadcast "createTritonReorderBroadcastPass"', "python/src/passes.cc"),
        ("pipeline", 'passes.ttir.add_combine "add_combine"', "third_party/nvidia/backend/compiler.py"),
        ("pipeline", 'passes.ttir.add_reorder_broadcast "add_reorder_broadcast"', "third_party/nvidia/backend/compiler.py")]
    adapter = locate(CHECKOUTS / "triton-ascend", ["triton-to-linalg"])
    assert [(d.kind, d.name) for d in adapter.definitions] == [
        ("pass", "TritonToLinalg"), ("option", "namedOps"), ("cl::opt", "clMaskToPad"),
        ("pass-constructor", "createTritonToLinalgPass")]


def test_links_out_of_the_checkout_fifos_and_build_folders_are_never_read(ascend: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.cpp").write_text("hivm-plan-memory SECRET\n")
    lib = ascend / "bishengir/lib/Dialect"
    (lib / "Leak.cpp").symlink_to(outside / "secret.cpp")
    (lib / "LeakDir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(lib / "Pipe.cpp")
    (ascend / "bishengir/lib/build").mkdir()
    (ascend / "bishengir/lib/build/Gen.cpp").write_text("hivm-plan-memory generated\n")
    (ascend / ".git/refs/heads").mkdir(parents=True)
    (ascend / ".git/HEAD").write_text("ref: refs/heads/main\n")
    (ascend / ".git/refs/heads/main").write_text("0123456789abcdef0123456789abcdef01234567\n")
    (ascend / ".git/Passes.cpp").write_text("hivm-plan-memory in .git\n")
    before = _snapshot(ascend)
    located = locate(ascend, ["hivm-plan-memory"])
    paths = [h.path for hits in located.areas.values() for h in hits]
    assert not any("Leak" in p or "Pipe" in p or "build" in p or ".git" in p for p in paths)
    assert (located.tree["skipped_links"], located.tree["skipped_other"]) == (2, 1)
    assert located.commit == "0123456789abcdef0123456789abcdef01234567"
    assert _snapshot(ascend) == before  # nothing written into the checkout
    with pytest.raises(HelixError, match="not a readable text file"):
        show(ascend, "bishengir/lib/Dialect/Leak.cpp")
    with pytest.raises(HelixError, match="not a path inside the checkout"):
        show(ascend, "../outside/secret.cpp:1")


def test_show_prints_the_lines_around_a_location() -> None:
    data = show(CHECKOUTS / "ascendnpu-ir", "bishengir/include/bishengir/Dialect/HIVM/Transforms/Passes.td:5",
                context=1)
    assert [(r["line"], r["text"].strip()) for r in data["lines"]] == [
        (4, "let options = ["),
        (5, 'Option<"enableMultiBuffer", "enable-auto-multi-buffer", "bool", /*default=*/"true",'),
        (6, '"Double-buffer loads">')]
    with pytest.raises(HelixError, match="has 12 lines; line 99"):
        show(CHECKOUTS / "ascendnpu-ir", "bishengir/include/bishengir/Dialect/HIVM/Transforms/Passes.td:99")


def test_hostile_names_and_lines_are_escaped(ascend: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ascend / "bishengir/lib/Dialect" / hostile_name("Evil")
    folder.mkdir()
    (folder / (hostile_name("Pass") + ".cpp")).write_text(f"// hivm-plan-memory {PAYLOAD} ```` fence\n")
    assert main(["compiler-source", "locate", "--source-root", str(ascend), "--term", "hivm-plan-memory"]) == 0
    out = capsys.readouterr().out
    assert "\\x1b]0;TITLE" in out and not any(c in out for c in FORBIDDEN)
    ws = tmp_path / "ws"
    (ws / "opt-round-1").mkdir(parents=True)
    path = analysis.write_analysis(ws / "opt-round-1", locate(ascend, ["hivm-plan-memory"]), None, None, "helix x")
    text = path.read_text()
    assert "\\x1b]0;TITLE" in text and not any(c in text for c in FORBIDDEN)
    # the line's four backticks cannot close the fence around it
    assert "`````text" in text


def test_round_mode_searches_the_ir_names_and_keeps_the_agents_text(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    round_dir = ws / "opt-round-1"
    shutil.copytree(ASCEND_IR, round_dir / "ir")
    (round_dir / "attempts.md").write_text("# attempts\n")
    root = CHECKOUTS / "ascendnpu-ir"
    assert main(["compiler-source", "terms", "--round", "1", "--workspace", str(ws), "--json"]) == 0
    terms = json.loads(capsys.readouterr().out)["terms"]
    assert [(t["kind"], t["name"]) for t in terms if t["kind"] == "pass"] == [
        ("pass", "canonicalize"), ("pass", "hfusion-auto-vectorize-v2"), ("pass", "hivm-inject-sync"),
        ("pass", "hivm-plan-memory")]
    assert main(["compiler-source", "locate", "--round", "1", "--workspace", str(ws), "--source-root", str(root),
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    written = round_dir / "compiler-analysis.md"
    assert payload["analysis_file"] == str(written)
    assert [d["name"] for d in payload["definitions"] if d["kind"] == "pass"] == ["PlanMemory", "InjectSync"]
    text = written.read_text()
    assert text.startswith("# Compiler Source Analysis\n") and "## Conclusion From This Round's Evidence" in text
    # the skill's hard rule: no forward-looking plan is asked for
    assert "Recommended Next" not in text and "for the next round" not in text
    assert "pass      hivm-plan-memory" in text and "Passes.td:1" in text
    assert "compiler-source" in evidence_found(round_dir)
    # the agent writes its conclusion; a second search rewrites only helix's block (a file written
    # under the old skeleton keeps its heading and text)
    mine = "## Executive Summary\n\nPlanMemory double-buffers only when the loop is static: hoist the bound."
    old_heading = "## Recommended Next Operator Change\n\nThis round's change: fuse the loads.\n"
    written.write_text(text.replace("## Executive Summary\n\n<!-- " + analysis.AGENT_SECTIONS[0][1] + " -->", mine)
                       + old_heading)
    assert main(["compiler-source", "locate", "--round", "1", "--workspace", str(ws), "--source-root", str(root),
                 "--term", "enable-auto-multi-buffer"]) == 0
    again = written.read_text()
    assert mine in again and again.count(analysis.END) == 1 and "--term enable-auto-multi-buffer" in again
    assert again.endswith(old_heading)
    assert "given     enable-auto-multi-buffer" in again


def test_round_mode_inserts_the_block_into_an_analysis_written_by_hand(tmp_path: Path) -> None:
    round_dir = tmp_path / "ws" / "opt-round-2"
    round_dir.mkdir(parents=True)
    (round_dir / "compiler-analysis.md").write_text("# My analysis\n\nWritten by the agent.\n")
    analysis.write_analysis(round_dir, locate(CHECKOUTS / "triton", ["triton-combine"]), None, None, "helix x")
    text = (round_dir / "compiler-analysis.md").read_text()
    assert text.startswith("# My analysis\n\n" + analysis.BEGIN) and text.endswith("\n\nWritten by the agent.\n")


def test_sentences_for_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compiler-source", "locate", "--term", "x", "--source-root", str(tmp_path / "none")]) == 1
    assert "is not a folder; pass --source-root DIR" in capsys.readouterr().err
    assert main(["compiler-source", "locate", "--source-root", str(CHECKOUTS / "triton")]) == 1
    assert "no search term given; pass --term NAME" in capsys.readouterr().err
    (tmp_path / "opt-round-1").mkdir()
    assert main(["compiler-source", "locate", "--round", "1", "--workspace", str(tmp_path),
                 "--source-root", str(CHECKOUTS / "triton")]) == 1
    assert "has no IR capture" in capsys.readouterr().err


def test_names_of_a_real_cpu_capture_found_in_the_installed_triton_package() -> None:
    """The recorded capture's stages (ttir, ttgir), ops and attributes, searched in the installed
    triton package: the backend's pipelines (passes.ttir.add_...) and the ops' TableGen records."""
    spec = importlib.util.find_spec("triton")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    terms = terms_from_ir(CPU_CAPTURE)
    names = {(t.kind, t.name) for t in terms}
    assert {("stage", "ttir"), ("stage", "ttgir"), ("op", "tt.load"), ("op", "tt.reduce"),
            ("attribute", "tt.divisibility"), ("attribute", "ttg.num-warps"), ("layout", "ttg.blocked")} <= names
    assert not any("softmax.py" in t.name or t.name.startswith("/") for t in terms)  # loc(...) paths are no terms
    located = locate(package, [t.name for t in terms])
    lib = [h.path for h in located.areas["lib"]]
    assert "backends/nvidia/compiler.py" in lib
    pipelines = [d for d in located.definitions if d.kind == "pipeline"]
    assert any(d.name == "passes.ttir.add_combine" and d.path == "backends/nvidia/compiler.py" for d in pipelines)
    for d in located.definitions[:10]:  # each path:line names the line it quotes
        assert (package / d.path).read_text().splitlines()[d.line - 1].strip()[:200] == d.text
    load = [d for d in located.definitions if d.kind == "tablegen" and d.name == "TT_LoadOp"]
    assert load and load[0].path.endswith("TritonOps.td")


def test_round_state_ir_dir_is_used_only_inside_the_round(tmp_path: Path) -> None:
    from helix_engine.compiler_source.ir_terms import round_ir_dir

    ws = tmp_path / "ws"
    round_dir = ws / "opt-round-1"
    shutil.copytree(ASCEND_IR, round_dir / "ir-b")
    shutil.copytree(ASCEND_IR, tmp_path / "elsewhere")
    (round_dir / "round-state.json").write_text(json.dumps({"ir_dir": "ir-b"}))
    assert round_ir_dir(ws, 1) == round_dir / "ir-b"
    (round_dir / "round-state.json").write_text(json.dumps({"ir_dir": "../../elsewhere"}))
    with pytest.raises(HelixError, match="has no IR capture"):
        round_ir_dir(ws, 1)
