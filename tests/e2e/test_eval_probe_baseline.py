"""probe-bench and prepare-baseline end to end on the CPU backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.eval.baseline import prepare_baseline
from helix_engine.eval.probe import probe_bench
from helix_engine.perf.artifact import read_perf
from helix_engine.workspace.models import BaselineState
from tests.conftest import ROOT
from tests.e2e._eval_ws import add_operator, assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow
VERDICTS = ("likely_gain", "likely_regression", "inconclusive")


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def test_probe_lines_cache_and_candidate_copy(tmp_path: Path) -> None:
    """Upstream's probe (--unpaired): a cached baseline probe, then the candidate."""
    ws = make_ws(tmp_path, "softmax")
    slow = add_operator(ws, "softmax_slow", "baseline/softmax.py")
    out = probe_bench(ws / "softmax.py", slow, verbose=True, paired=False)
    assert out.exit_code == 0, out.text
    lines = out.text.splitlines()
    assert lines[0].removeprefix("Probe classification: ") in VERDICTS
    assert lines[1] == "Metric source: kernel"
    assert lines[2].startswith("Advisory geomean speedup: ") and lines[2].endswith("x")
    assert lines[3].startswith("Advisory avg improvement: ")
    assert lines[4].startswith("Advisory improved cases: ") and lines[5].startswith("Advisory regressed cases: ")
    assert lines[6].startswith("Summary: ") and "canonical run-bench" in lines[6]
    assert "Baseline cache: miss" in lines and "Cache miss reason: no cached baseline probe" in lines
    assert "Warnings:" in lines  # perf-counter runs canonically, with a warning
    cand = Path(out.candidate_probe_perf)
    assert cand.parent == ws / ".helix" and cand.name.startswith("candidate_probe_perf.")
    assert read_perf(cand)[1] == [] and len(read_perf(cand)[0]) == 2
    assert not (ws / "softmax_perf.txt").exists()  # a probe never overwrites the canonical perf file
    meta = json.loads((ws / ".helix" / "baseline_probe_perf.meta.json").read_text())
    assert meta["key"]["measurement_profile"] == "probe" and meta["key"]["bench_mode"] == "perf-counter"
    again = probe_bench(ws / "softmax.py", slow, verbose=True, paired=False)
    assert "Baseline cache: hit" in again.text.splitlines()
    slow.write_text(slow.read_text() + "\n# edited\n")
    third = probe_bench(ws / "softmax.py", slow, verbose=True, paired=False)
    assert "Cache miss reason: key changed: baseline_operator_sha256" in third.text.splitlines()
    assert not (ws / ".helix" / "baseline_probe_perf.lock").exists()
    jobs = assert_jobs_settled(ws)
    assert len(jobs) == 5
    assert {j.kind for j in jobs} == {"probe-bench"}  # never listed as a canonical run-bench


def test_probe_failure_is_a_fail_line(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_raises")
    base = add_operator(ws, "softmax", "baseline/softmax.py")
    out = probe_bench(ws / "softmax.py", base)
    assert out.exit_code == 1
    assert out.text.startswith("FAIL: ") and "deliberate failure" in out.text


def test_adaptive_probe_reaches_a_stable_verdict_or_budget(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    slow = add_operator(ws, "softmax_slow", "baseline/softmax.py")
    out = probe_bench(ws / "softmax.py", slow, adaptive=True, budget_s=25)
    assert out.exit_code == 0, out.text
    assert out.classification in VERDICTS
    assert [b["batch"] for b in out.batches] == list(range(1, len(out.batches) + 1))
    assert [j.kind for j in assert_jobs_settled(ws)] == ["probe-adaptive"]  # one process, all batches
    assert out.ready_s is not None and 0 < out.ready_s < out.batches[0]["elapsed_s"]
    assert out.batches[0]["blocks"] == 3 and all(b["decision"] for b in out.batches)
    if out.stable:  # the last look's interval settled the verdict; the earlier ones did not
        assert out.decision in ("faster", "slower", "equivalent") and out.decision == out.batches[-1]["decision"]
        assert all(b["decision"] == "unsettled" for b in out.batches[:-1])
        assert out.interval is not None and out.interval[0] <= (out.geomean_speedup or 0) <= out.interval[1]
        assert out.time_to_verdict_s == out.batches[-1]["elapsed_s"]
        assert f"Time to verdict: {out.time_to_verdict_s:.1f} s" in out.text
    else:  # the budget ended first: no time to verdict is claimed
        assert out.batches[-1]["elapsed_s"] >= 25 and out.time_to_verdict_s is None
        assert "Time to verdict: none" in out.text
    short = probe_bench(ws / "softmax.py", slow, adaptive=True, budget_s=0.001)
    assert len(short.batches) == 1 and short.time_to_verdict_s == (
        short.batches[0]["elapsed_s"] if short.stable else None)
    if not short.stable:
        assert "budget ended before the geomean's interval settled the verdict" in short.text


def test_prepare_baseline_passes_and_submits(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax", standalone=False)
    env = {"HELIX_BACKEND": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "prepare-baseline", str(ws)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = BaselineState.model_validate_json((ws / "baseline" / "state.json").read_text())
    assert state.baseline_established and state.correctness_status == "passed" == state.benchmark_status
    assert state.test_file == "../differential_test_softmax.py" and state.test_mode == "differential"
    assert state.source_operator == "../softmax.py" and state.baseline_operator == "softmax.py"
    assert state.bench_mode == "perf-counter" and state.perf_artifact == "softmax_perf.txt"
    assert (ws / "baseline" / "softmax.py").read_text() == (ws / "softmax.py").read_text()
    records, problems = read_perf(ws / "baseline" / "softmax_perf.txt")
    assert problems == [] and len(records) == 2
    assert "submit-baseline: pass" in proc.stdout
    workflow = json.loads((ws / ".helix" / "state.json").read_text())
    assert workflow["baseline"]["status"] == "passed" and workflow["phase"] == "awaiting_round_start"


def test_failing_baseline_is_recorded_honestly(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_raises", standalone=False)
    payload = prepare_baseline(ws)
    assert payload["exit_code"] == 1
    state = BaselineState.model_validate(payload["state"])
    assert state.correctness_status == "failed" and state.benchmark_status == "failed"
    assert state.baseline_established is False
    assert "deliberate failure" in (state.preparation_notes or "")
    assert "FAIL: the baseline is not established: test failed" in payload["text"]
    on_disk = json.loads((ws / "baseline" / "state.json").read_text())
    assert on_disk["baseline_established"] is False
    assert payload["submit"]["status"] == "fail"
    assert not (ws / ".helix" / "state.json").exists() or json.loads(
        (ws / ".helix" / "state.json").read_text())["baseline"]["status"] != "passed"


def test_prepare_baseline_refuses_to_replace_a_baseline_that_rounds_use(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """An agent re-running prepare-baseline at the start of a session re-snapshotted and
    re-measured baseline/ under submitted rounds (their speedups changed) and reset the phase."""
    from helix_engine.cli import main
    from helix_engine.errors import HelixError

    ws = make_ws(tmp_path, "softmax", standalone=False)
    base = ws / "baseline"
    base.mkdir()
    (base / "softmax.py").write_text("# the canonical snapshot\n")
    (base / "softmax_perf.txt").write_text('{"case_label": "kept"}\n')
    (base / "state.json").write_text("{}\n")
    (ws / "opt-round-1").mkdir()
    with pytest.raises(HelixError, match=r"anchors 1 round folder\(s\) \(opt-round-1\).*--force"):
        prepare_baseline(ws)
    assert main(["prepare-baseline", str(ws)]) == 1
    assert "--force" in capsys.readouterr().err
    assert (base / "softmax.py").read_text() == "# the canonical snapshot\n"
    assert (base / "softmax_perf.txt").read_text() == '{"case_label": "kept"}\n'
    assert not (ws / ".helix" / "jobs").exists()


def test_a_changed_baseline_is_refused_until_prepare_baseline_force_re_seals_it(tmp_path: Path) -> None:
    """Issue 27, item 5, as an agent meets it: the accepted baseline's perf file edited, every round
    command refused with the changed file and the fix, status still answering; `prepare-baseline
    --force` measures it again and seals what it measured."""
    import os

    ws = make_ws(tmp_path, "softmax", standalone=False)
    env = dict(os.environ, HELIX_BACKEND="cpu", PYTHONPATH=str(ROOT))

    def helix(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=ws, capture_output=True, text=True,
                              env=env, timeout=300, check=False)

    assert helix("prepare-baseline", ".").returncode == 0
    perf = ws / "baseline" / "softmax_perf.txt"
    perf.write_text(perf.read_text().replace('"kernel_avg_time_us":', '"kernel_avg_time_us":1'))
    start = ("start-round", "--round-dir", "opt-round-1", "--round-strategy", "exploration", "--analysis-policy",
             "pattern_entry", "--reason", "r")
    proc = helix(*start)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert "baseline/softmax_perf.txt changed" in payload["issues"][0]
    assert "helix prepare-baseline --force" in payload["issues"][0] and not (ws / "opt-round-1").exists()
    proc = helix("status", "--json")
    assert proc.returncode == 0, proc.stderr
    [item] = json.loads(proc.stdout)["operators"]
    assert any("baseline/softmax_perf.txt changed" in w for w in item["warnings"]), item["warnings"]
    proc = helix("submit-baseline", "--baseline-dir", "baseline")  # accepting it as it is would launder the edit
    assert proc.returncode == 1 and "baseline/softmax_perf.txt changed" in proc.stdout, proc.stdout
    assert helix("prepare-baseline", ".", "--force").returncode == 0
    assert helix(*start).returncode == 0
    [item] = json.loads(helix("status", "--json").stdout)["operators"]
    assert not any("not what was accepted" in w for w in item["warnings"]), item["warnings"]
