"""`helix status`: upstream text/JSON/markdown, trend view, folders of workspaces, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.status import collect, operator_status, render_best_text
from helix_engine.workspace.snapshot import load_workspace
from tests.builders import RoundSpec, build_workspace, write_operator

ROOT = Path(__file__).resolve().parents[2]
BASE = {"a": 10.0, "b": 20.0}
R1 = {"a": 8.0, "b": 18.0}
R2 = {"a": 9.0, "b": 10.0}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["status", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """gamma: best round-2 but round-1 logged; beta: clean; zeta: no comparable round; empty: an
    operator with its harnesses, before prepare-baseline; a venv, which is no workspace."""
    build_workspace(tmp_path, name="gamma", baseline=BASE, rounds=[R1, R2], final_best="round-1",
                    geomean_text="1.16x")
    build_workspace(tmp_path, name="beta", op="mul", baseline={"x": 10.0}, rounds=[{"x": 8.0}])
    build_workspace(tmp_path, name="zeta", baseline=BASE, rounds=[RoundSpec(R1, correctness="failed")])
    write_operator(tmp_path / "empty", "sub")
    venv.create(tmp_path / "venv", with_pip=False)  # not listed (helix_engine.workspace.snapshot.is_workspace)
    return tmp_path


def test_text_block_matches_upstream(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder / "gamma"))
    assert rc == 0
    assert out == (
        "[OK] gamma\n"
        "  Avg improvement: +30.0%\n"
        "  Geomean speedup: 1.49x\n"
        "  Best round: round-2\n"
        "  Logged best: round-1\n"
        "  Warning: numeric best round != logged best. computed speedup: 1.49x; logged\n"
        "    speedup: 1.16x\n"
        "  Promoted best: round-2, geomean speedup (ratio of means) 1.49x\n"  # ours, after upstream's
        "  Noise margin: default 1%\n"  # ours: which margin the promotion rule used
        "  Phase: awaiting_round_start, no active round\n"
        "  Next: helix start-round --round-dir opt-round-3 ... (see start-round -h)\n"
        "Summary: 1 ok, 0 warning, 0 no-session workspaces; 1 warning above\n"  # ours after "workspaces"
    )
    assert "\033[" not in out  # no colour when stdout is not a terminal


def test_run_inside_the_workspace_names_it(folder: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder / "gamma")
    rc, out, _ = _run(capsys)
    assert rc == 0 and out.splitlines()[0] == "[OK] gamma"
    rc, out, _ = _run(capsys, "--json")
    assert json.loads(out)["operators"][0]["name"] == "gamma"


def test_text_for_a_folder_sorts_no_session_first(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder))
    assert rc == 0
    heads = [line for line in out.splitlines() if line.startswith("[")]
    assert heads == ["[NO-SESSION] empty", "[OK] beta", "[OK] gamma", "[WARN] zeta"]
    assert out.count("  Warning: ") == 3 and "  Problem: " not in out
    assert out.splitlines()[-1] == "Summary: 2 ok, 1 warning, 1 no-session workspaces; 3 warnings above"
    assert "  Warning: skipping opt-round-1 because correctness_status is failed" in out
    assert "  Warning: missing comparable round perf data" in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_json_has_upstream_keys_then_ours(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder), "--json")
    assert rc == 0
    ops = json.loads(out)["operators"]
    assert [o["name"] for o in ops] == ["empty", "beta", "gamma", "zeta"]
    gamma = ops[2]
    assert list(gamma)[:9] == ["name", "state", "avg_improvement", "geomean_speedup", "best_round",
                               "logged_best", "verified", "verified_geomean_speedup", "warnings"]
    assert gamma["state"] == "ok"
    assert gamma["avg_improvement"] == pytest.approx(0.30)  # a fraction, like upstream
    assert gamma["geomean_speedup"] == pytest.approx((10 / 9 * 20 / 10) ** 0.5)
    assert gamma["best_round"] == "round-2" and gamma["logged_best"] == "round-1"
    assert gamma["verified"] is False and gamma["verified_geomean_speedup"] is None
    assert gamma["warnings"] == [
        "numeric best round != logged best. computed speedup: 1.49x; logged speedup: 1.16x"]
    assert gamma["phase"] == "awaiting_round_start" and gamma["current_round"] is None
    assert [(r["round"], r["status"], r["parent"]) for r in gamma["rounds"]] == [
        (1, "completed", "baseline"), (2, "completed", "baseline")]
    assert gamma["rounds"][0]["geomean_speedup"] == pytest.approx(1.178511, abs=1e-6)
    assert gamma["rounds"][0]["avg_improvement"] == pytest.approx(0.15)
    assert gamma["problems"] and gamma["problems"][0]["file"] == "opt-note.md"
    assert ops[1]["problems"] == []
    assert ops[0]["state"] == "no-session" and ops[0]["best_round"] is None


def test_format_json_equals_json_flag_and_input_alias(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc_a, a, _ = _run(capsys, "-i", str(folder), "--format", "json")
    rc_b, b, _ = _run(capsys, str(folder), "--json")
    assert rc_a == rc_b == 0
    assert [o["name"] for o in json.loads(a)["operators"]] == ["empty", "beta", "gamma", "zeta"]
    assert a == b


def test_markdown_table(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder), "--format", "markdown")
    assert rc == 0
    assert out.splitlines() == [
        "| 名称 | Geomean speedup | Verified | Verified Geomean speedup | Notes |",
        "| --- | --- | --- | --- | --- |",
        "| beta | 1.25x | - |  | - |",
        "| gamma | 1.49x | - |  | best≠log |",
        "| zeta | - | - |  | warn |",
    ]


def test_trend_views(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder), "--view", "trend")
    assert rc == 0
    assert out.splitlines() == [
        "Name   round-1  round-2",
        "beta   1.25x    -",
        "gamma  1.18x    1.49x",
        "zeta   -        -",
    ]
    _, md, _ = _run(capsys, str(folder), "--view", "trend", "--format", "markdown")
    assert md.splitlines()[0] == "| Name | round-1 | round-2 |"
    assert "| gamma | 1.18x | 1.49x |" in md.splitlines()
    _, js, _ = _run(capsys, str(folder), "--view", "trend", "--json")
    data = json.loads(js)["operators"]
    assert [d["name"] for d in data] == ["beta", "gamma", "zeta"]
    assert data[0]["round_speedups"] == {"round-1": pytest.approx(1.25), "round-2": None}
    assert data[2]["round_speedups"] == {"round-1": None, "round-2": None}


def test_trend_text_wraps_to_80_columns(tmp_path: Path) -> None:
    rounds = [{"a": 10.0 - 0.01 * i, "b": 20.0} for i in range(30)]
    ws = build_workspace(tmp_path, name="long_operator_name", baseline=BASE, rounds=rounds)
    from helix_engine.status import render_trend_text

    text = render_trend_text([operator_status(load_workspace(ws))])
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert sum(1 for line in lines if line.startswith("Name")) > 1
    assert "round-30" in text


def test_metric_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_workspace(tmp_path, name="op", baseline={"a": (10.0, 20.0)},
                    rounds=[RoundSpec({"a": (5.0, 20.0)}, metric="total-op")])
    _, out, _ = _run(capsys, str(tmp_path / "op"), "--json")
    shown = json.loads(out)["operators"][0]
    assert shown["upstream_geomean_speedup"] == pytest.approx(1.0)  # the perf files' number, under its name
    assert shown["geomean_speedup"] is None and shown["best_round"] is None  # 1.0x: no round promoted
    _, out, _ = _run(capsys, str(tmp_path / "op"), "--json", "-m", "kernel")
    assert json.loads(out)["operators"][0]["geomean_speedup"] == pytest.approx(2.0)
    assert json.loads(out)["operators"][0]["avg_improvement"] == pytest.approx(0.5)


def test_verified_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = build_workspace(tmp_path, name="op", baseline=BASE, rounds=[R2])
    vdir = ws / "opt-verify" / "verify-20260421-120000"
    vdir.mkdir(parents=True)
    result = {k: {"status": "passed"} for k in ("test", "rerun_baseline_bench", "rerun_best_bench", "compare_perf")}
    result["speedup"] = {"geomean_speedup": 1.22}
    (vdir / "verify-state.json").write_text(json.dumps({"verify-result": result}))
    _, out, _ = _run(capsys, str(ws))
    assert "  Latest verify: " in out and "verify-state.json" in out
    _, md, _ = _run(capsys, str(ws), "--format", "markdown")
    assert "| op | 1.49x | Verified | 1.22x | - |" in md


def test_no_workspace_is_exit_1_with_a_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, str(tmp_path / "missing"))
    assert rc == 1 and out == ""
    assert "does not exist" in err and "Point `helix status` at an operator workspace" in err
    (tmp_path / "bare").mkdir()
    rc, _, err = _run(capsys, str(tmp_path / "bare"))
    assert rc == 1 and "none of its subfolders is one" in err


def test_one_good_path_and_one_missing(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, str(folder / "beta"), str(folder / "nope"))
    assert rc == 0 and "[OK] beta" in out and "nope does not exist; skipped" in err


def test_collect_dedupes_the_same_workspace(folder: Path) -> None:
    statuses, missing = collect([folder / "beta", folder / "beta"])
    assert [s.name for s in statuses] == ["beta"] and missing == []


def test_problems_are_listed_in_text(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, name="op", baseline=BASE, rounds=[R2])
    (ws / ".helix" / "state.json").write_text("{not json")
    text = render_best_text([operator_status(load_workspace(ws))])
    assert "  Problem: .helix/state.json:1: is not valid JSON" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_colour_only_when_asked() -> None:
    from helix_engine.status import OperatorStatus

    item = OperatorStatus(name="x", path=Path("x"), state="ok", avg_improvement=0.1, geomean_speedup=1.1,
                          best_round="round-1", logged_best=None, verified=False,
                          verified_geomean_speedup=None, warnings=["w"])
    assert "\033[32m[OK] x" in render_best_text([item], color=True)
    assert "\033[" not in render_best_text([item], color=False)


def test_cli_subprocess_json(folder: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "status", str(folder), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(json.loads(proc.stdout)["operators"]) == 4


def test_trend_html(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder), "--view", "trend", "--format", "html")
    assert rc == 0
    assert "<title>Operator Speedup Trends</title>" in out
    assert out.count('<div class="card">') == 2  # beta, gamma (zeta has no comparable round)
    assert "max 1.49x</span> · start 1.18x" in out
    assert '<svg viewBox="0 0 440 230"' in out
    rc, _, err = _run(capsys, str(folder), "--format", "html")
    assert rc == 1 and "only available with --view trend" in err


def test_status_imports_no_torch_triton_or_textual(folder: Path) -> None:
    code = ("import sys, io, contextlib\nfrom helix_engine.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): rc = main(['status', {str(folder)!r}, '--json'])\n"
            "print(rc, sorted(m for m in ('torch', 'triton', 'textual', 'torch_npu') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "0 []", proc.stderr


def test_prepared_baseline_without_rounds_says_what_to_run_next(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """After prepare-baseline, upstream's [NO-SESSION] alone read as a dead end."""
    from tests.builders import workflow_state, write_workflow_state

    ws = build_workspace(tmp_path, name="fresh", baseline=BASE, rounds=[], opt_note=False)
    write_workflow_state(ws, workflow_state())  # what submit-baseline leaves
    rc, out, _ = _run(capsys, str(ws))
    assert rc == 0
    assert out == (
        "[NO-SESSION] fresh\n"
        "  Phase: awaiting_round_start, no active round\n"
        "  Next: helix start-round --round-dir opt-round-1 ... (see start-round -h)\n"
        "Summary: 0 ok, 0 warning, 1 no-session\n"
    )
    rc, out, _ = _run(capsys, str(ws), "--json")
    op = json.loads(out)["operators"][0]
    assert op["state"] == "no-session" and op["next_step"].startswith("helix start-round --round-dir opt-round-1")


def test_active_round_shows_phase_and_round_and_no_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.builders import workflow_state, write_workflow_state

    ws = build_workspace(tmp_path, name="busy", baseline=BASE, rounds=[R1])
    write_workflow_state(ws, workflow_state(phase="round_active", current_round=2, rounds={1: "passed", 2: "active"}))
    rc, out, _ = _run(capsys, str(ws))
    assert rc == 0 and "  Phase: round_active, current round opt-round-2\n" in out
    assert "Next:" not in out and all(len(line) <= 80 for line in out.splitlines())


def test_operator_without_baseline_is_told_to_prepare_it(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, str(folder))
    assert rc == 0 and out.splitlines()[:3] == [
        "[NO-SESSION] empty", "  Phase: no workflow state (.helix/state.json)",
        "  Next: helix prepare-baseline (snapshot, test and bench the operator)"]


def test_established_but_unsubmitted_baseline_is_told_to_submit(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    ws = build_workspace(tmp_path, name="unsubmitted", baseline=BASE, rounds=[], opt_note=False, workflow=False)
    rc, out, _ = _run(capsys, str(ws))
    assert rc == 0 and "  Next: helix submit-baseline --baseline-dir baseline\n" in out


def test_next_step_mends_a_round_start_round_would_refuse(tmp_path: Path) -> None:
    """Next never proposes a start-round that start-round refuses: with the last round's
    round-state.json unreadable or missing, a piece of its package missing, or its folder gone, it
    says what to mend first in start-round's own words; the submitted round's warning says how."""
    import shutil

    from helix_engine.state.lifecycle import start_round
    from tests.builders import generate_large_workspace

    ws = generate_large_workspace(tmp_path / "gen", rounds=3, cases=2)
    assert collect([ws])[0][0].next_step.startswith("helix start-round --round-dir opt-round-4")

    def refused() -> str:
        payload, code = start_round(ws / "opt-round-4", "exploration", "pattern_entry", "r")
        assert code == 1
        return str(payload["issues"][0])

    def marked(item: object) -> str:
        [text] = [p.message for p in item.problems if p.message.startswith("marks round 3 passed")]  # type: ignore[attr-defined]
        assert "submit-round" not in text  # a second submit-round is refused for a recorded round
        return text

    state = ws / "opt-round-3" / "round-state.json"
    good = state.read_text()
    state.write_text("{ broken")
    item = collect([ws])[0][0]
    assert item.next_step.startswith("mend opt-round-3 first (its round-state.json does not load: round-state.json "
                                     "is not valid JSON")
    assert item.next_step.endswith("or rewrite it with `helix round-state --round-dir opt-round-3 ...`), then "
                                   "helix start-round --round-dir opt-round-4")
    assert "fix opt-round-3/round-state.json (or rewrite it with `helix round-state" in marked(item)
    assert "its round-state.json does not load" in refused() and "helix round-state --round-dir opt-round-3" in refused()
    state.unlink()
    item = collect([ws])[0][0]
    assert item.next_step.startswith("mend opt-round-3 first (missing round-state.json")
    assert "write opt-round-3/round-state.json with `helix round-state" in marked(item)
    state.write_text(good)
    (ws / "opt-round-3" / "attempts.md").unlink()
    item = collect([ws])[0][0]
    assert item.next_step.startswith("mend opt-round-3 first (missing attempts.md)")
    assert "restore what its folder lacks (attempts.md" in marked(item)
    assert "(missing attempts.md)" in refused()
    (ws / "opt-round-3" / "attempts.md").write_text("# attempts\n")
    state.write_text(good.replace('"benchmark_status": "passed"', '"benchmark_status": "failed"'))
    assert "says correctness passed, benchmark failed" in marked(collect([ws])[0][0])
    state.write_text(good)
    shutil.move(ws / "opt-round-3", tmp_path / "away")
    item = collect([ws])[0][0]
    assert item.next_step.startswith("mend opt-round-3 first (its folder is missing)")
    assert "its folder is missing" in refused()


def test_a_round_slower_than_the_baseline_names_no_previous_best(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Only a round judged against a best names it: round-1 became the first best (over the
    baseline), round-2 is faster than round-1 and names it, round-3 never got past the baseline
    (null, not "baseline": round-2 was the best then)."""
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, RoundSpec({"a": 6.0, "b": 12.0}, parent="opt-round-1"),
                                                          RoundSpec({"a": 12.0, "b": 24.0}, parent="opt-round-2")])
    rc, out, _ = _run(capsys, str(ws), "--json")
    rounds = {r["round"]: r["promotion"] for r in json.loads(out)["operators"][0]["rounds"]}
    assert rc == 0 and rounds[1]["previous_best"] == "baseline"
    assert rounds[2]["previous_best"] == "round-1" and rounds[2]["status"] == "current best"
    assert rounds[3]["previous_best"] is None and rounds[3]["status"] != "current best"
