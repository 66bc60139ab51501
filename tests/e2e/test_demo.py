"""`helix demo DIR --no-tui` end to end on the CPU backend: a real baseline, a real improvement
recorded as the current best, and a real regression recorded as not promoted.

The demo runs once per module (about 20 s on 2 cores: six jobs through the Triton
interpreter). Outcomes are read back the way a user would: `helix status --json` and
opt-note.md, plus the round files the agent-side steps wrote. The improvement (~10x) and the
regression (~0.05x vs round 1) are structural gaps in the interpreter, far outside noise;
no absolute time is asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine import demo
from helix_engine.errors import HelixError
from helix_engine.perf.artifact import read_perf
from helix_engine.workspace.markdown import parse_opt_note

ROOT = Path(__file__).resolve().parents[2]


def _helix(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HELIX_BACKEND="cpu", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    ws = tmp_path_factory.mktemp("demo") / "softmax-demo"
    proc = _helix("demo", str(ws), "--no-tui", "--backend", "cpu")
    return ws, proc


@pytest.mark.slow
def test_demo_runs_and_shows_progress(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    ws, proc = demo_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for step in ("prepare-baseline", "round 1: start-round", "round 1: run-test", "round 1: run-bench",
                 "round 1: submit-round: pass", "round 2: submit-round: pass", "final best round: round-1"):
        assert step in out, f"missing progress line {step!r}"
    assert "1/4 fp32_8x64:" in out and "µs" in out  # live per-case lines from job events
    assert "[OK]" in out and "Best round: round-1" in out  # the `helix status` it ends with
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_status_json_reports_round_1_as_best(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    ws, _ = demo_run
    proc = _helix("status", str(ws), "--json")
    assert proc.returncode == 0, proc.stderr
    (op,) = json.loads(proc.stdout)["operators"]
    assert op["state"] == "ok"
    assert op["best_round"] == "round-1" and op["logged_best"] == "round-1"
    assert op["geomean_speedup"] > 1.0  # a real improvement over the baseline
    assert not [w for w in op["warnings"] if "best" in w]


@pytest.mark.slow
def test_ledger_records_improvement_and_regression(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    ws, proc = demo_run
    out = proc.stdout
    note = parse_opt_note((ws / "opt-note.md").read_text())
    by_number = {r.number: r for r in note.rounds}
    assert set(by_number) == {1, 2}
    assert by_number[1].best_status == "current best" and by_number[1].parent == "baseline"
    assert by_number[2].best_status == "not promoted" and by_number[2].parent == "round-1"
    assert note.final_best_round == "round-1"
    # the demo's read-back of the ledger quotes the ledger's own geomean (with its interval), not the
    # run-bench headline, which is another measurement (the round's perf file vs the baseline's)
    for n, status in ((1, "current best"), (2, "not promoted")):
        recorded = re.search(r"geomean speedup ([0-9.]+x \[[^\]]*\])", by_number[n].result or "")
        assert recorded, by_number[n].result
        assert f"opt-note.md: round-{n}: {status} ({recorded.group(1)} geomean vs baseline, as recorded)" in out
        # one source for both numbers (issue 28 item 4): the paired run's geomean and average, said once
        assert re.search(r"\], avg improvement [+-][0-9.]+% vs baseline \(paired run, kernel\)$", by_number[n].result)
        assert "perf files" not in by_number[n].result
    workflow = json.loads((ws / ".helix" / "state.json").read_text())
    assert workflow["baseline"]["status"] == "passed"
    assert {k: v["status"] for k, v in workflow["rounds"].items()} == {"1": "passed", "2": "passed"}
    assert workflow["phase"] == "awaiting_round_start"


@pytest.mark.slow
def test_round_files_follow_the_contract(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    ws, _ = demo_run
    assert sorted(p.name for p in ws.iterdir() if not p.name.startswith(".")) == [
        "baseline", "bench_softmax.py", "differential_test_softmax.py", "opt-note.md", "opt-round-1",
        "opt-round-2", "softmax.py"]
    for n, parent in ((1, "baseline"), (2, "opt-round-1")):
        rd = ws / f"opt-round-{n}"
        state = json.loads((rd / "round-state.json").read_text())
        assert state["parent_round"] == parent and state["correctness_status"] == "passed"
        assert state["benchmark_status"] == "passed" and state["perf_artifact"] == "opt_softmax_perf.txt"
        assert state["comparison_target_path"] == "../baseline/softmax_perf.txt"
        assert state["effective_metric_source"] == "kernel" and state["opt_note_updated"] is True
        attempts = (rd / "attempts.md").read_text()
        assert "## State Update" in attempts and "Primary analysis level: pattern triage" in attempts
        assert "Hypothesis:" in attempts and "Geomean speedup:" in attempts
        assert "Current best:" in (rd / "summary.md").read_text()
        candidate = demo.examples_root() / "softmax" / "candidates" / f"round-{n}.py"
        assert (rd / "opt_softmax.py").read_text() == candidate.read_text()
    records, problems = read_perf(ws / "baseline" / "softmax_perf.txt")
    assert not problems and len(records) == 4
    for r in records + read_perf(ws / "opt-round-2" / "opt_softmax_perf.txt")[0]:
        assert r.backend == "cpu" and r.method and r.bench_mode == "perf-counter" and r.samples_us


def test_refuses_a_non_empty_dir_with_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = _helix("demo", str(tmp_path), "--no-tui")
    assert proc.returncode == 1
    assert "not empty" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_unknown_example_is_a_clear_error(tmp_path: Path) -> None:
    proc = _helix("demo", str(tmp_path / "x"), "--example", "nope", "--no-tui")
    assert proc.returncode == 1 and "no example named 'nope'" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_list_names_the_shipped_examples() -> None:
    proc = _helix("demo", "--list")
    assert proc.returncode == 0
    assert {"softmax", "layernorm", "matmul"} <= set(proc.stdout.split())


def test_copy_example_copies_only_the_workspace_contract(tmp_path: Path) -> None:
    ws = demo.copy_example("layernorm", tmp_path / "ln")
    assert sorted(p.name for p in ws.iterdir()) == ["bench_layernorm.py", "differential_test_layernorm.py", "layernorm.py"]
    with pytest.raises(HelixError, match="not empty"):
        demo.copy_example("layernorm", ws)


def test_read_note_rejects_an_incomplete_note(tmp_path: Path) -> None:
    bad = tmp_path / "round-1.md"
    bad.write_text("theme: x\nround-strategy: exploration\n\nno hypothesis here\n")
    with pytest.raises(HelixError, match="analysis-policy"):
        demo.read_note(bad)
    bad.write_text("theme: x\nround-strategy: exploration\nanalysis-policy: pattern_entry\n"
                   "primary-analysis-level: pattern triage\nexpect: improvement\n\nnothing\n")
    with pytest.raises(HelixError, match="Hypothesis"):
        demo.read_note(bad)


def test_every_shipped_note_parses() -> None:
    assert {"softmax", "layernorm", "matmul"} <= set(demo.list_examples())
    for name in demo.list_examples():
        notes = [demo.read_note(demo.examples_root() / name / "candidates" / f"round-{n}.md") for n in (1, 2)]
        assert [n.expect for n in notes] == ["improvement", "regression"]
        assert all(n.primary_level == "pattern triage" for n in notes)
