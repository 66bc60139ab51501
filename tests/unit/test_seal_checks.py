"""Tamper evidence where it is acted on (issue 27, items 4 and 5; state/seals.py): every command
that acts on a round or judges it against the accepted baseline (start-round, run-test, run-bench,
round-state, submit-round, submit-baseline) refuses once the baseline's sealed files changed, with
the changed files and `helix prepare-baseline --force`; `helix status` says so and still answers. A
submitted round whose sealed files changed is refused as a parent, as the best round a round is
judged against, and as a bench reference, and status marks it. round-state's --correctness and
--benchmark are recorded as self-reported and never promote.

The seals here are real: submit-baseline and submit-round write them in-process. The round's
run-test / run-bench evidence is the conftest's fixture record (the gate's own tests are
test_seals.py), except in the ``real_gate`` test below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.errors import HelixError
from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round

from builders import write_perf
from state_fixtures import new_workspace, put_round, scaled, workflow_json

FIX = "helix prepare-baseline --force"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out + err


def _accepted(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    assert (ws / ".helix" / "gate" / "baseline.json").is_file()
    return ws


def _edit(path: Path) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n# edited after the baseline was accepted\n")


def _start(ws: Path, n: int, parent: str | None = None) -> tuple[dict, int]:
    return start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", f"round {n}", parent_round=parent)


def _submitted(ws: Path, n: int, factor: float, parent: str = "baseline") -> None:
    assert _start(ws, n, parent)[1] == 0
    put_round(ws, n, scaled(factor), parent=parent)
    payload, code = submit_round(ws / f"opt-round-{n}")
    assert code == 0, payload
    assert (ws / ".helix" / "gate" / f"opt-round-{n}.submitted.json").is_file()


# ------------------------------------------------------------------------------ the baseline


@pytest.mark.parametrize("edit", ["baseline/add_perf.txt", "baseline/add.py", "bench_add.py",
                                  "differential_test_add.py"])
def test_start_round_refuses_a_changed_baseline_and_changes_nothing(tmp_path: Path, edit: str) -> None:
    ws = _accepted(tmp_path)
    _edit(ws / edit)
    payload, code = _start(ws, 1)
    assert code == 1 and payload["status"] == "fail"
    assert f"{edit} changed" in payload["issues"][0] and FIX in payload["issues"][0]
    assert FIX in payload["guideline"]
    assert workflow_json(ws)["phase"] == "awaiting_round_start" and not (ws / "opt-round-1").exists()


def test_every_round_command_refuses_a_changed_baseline(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.eval.bench import run_bench
    from helix_engine.eval.test import run_test

    ws = _accepted(tmp_path)
    assert _start(ws, 1)[1] == 0
    rdir = put_round(ws, 1, scaled(0.8), correctness="failed", benchmark="not_run")
    state_before = (rdir / "round-state.json").read_bytes()
    perf = ws / "baseline" / "add_perf.txt"
    perf.write_text(perf.read_text(encoding="utf-8").replace("10.0", "100.0"), encoding="utf-8")  # 10x the baseline
    op, base = rdir / "opt_add.py", ws / "baseline" / "add.py"

    with pytest.raises(HelixError, match="baseline/add_perf.txt changed") as raised:
        run_test(op, ref_operator_file=base)
    assert FIX in str(raised.value)
    with pytest.raises(HelixError, match="baseline/add_perf.txt changed"):
        run_bench(op, baseline_operator_file=base)
    with pytest.raises(HelixError, match="baseline/add_perf.txt changed"):
        run_bench(op, against="baseline", paired=False)
    assert not (ws / ".helix" / "jobs").exists() or not any((ws / ".helix" / "jobs").iterdir())  # no job ran

    monkeypatch.chdir(ws)
    rc, text = _cli(capsys, "round-state", "--round-dir", "opt-round-1", "--hypothesis", "h", "--evidence",
                    "benchmark")
    assert rc == 1 and "baseline/add_perf.txt changed" in text and FIX in text, text
    assert (rdir / "round-state.json").read_bytes() == state_before

    # refused, not recorded: its round-state says failed, yet the round is not closed on a changed baseline
    payload, code = submit_round(rdir)
    assert code == 1 and "baseline/add_perf.txt changed" in payload["issues"][0] and FIX in payload["guideline"]
    state = workflow_json(ws)
    assert (state["phase"], state["rounds"]["1"]["status"]) == ("round_active", "active")
    assert not (ws / "opt-note.md").exists()

    # status only reads: it answers, with the broken seal as a warning
    rc, text = _cli(capsys, "status", str(ws), "--json")
    assert rc == 0, text
    [item] = json.loads(text)["operators"]
    assert any("the accepted baseline is not what was accepted: baseline/add_perf.txt changed" in w and FIX in w
               for w in item["warnings"]), item["warnings"]
    rc, text = _cli(capsys, "status", str(ws))
    assert rc == 0 and "Warning: the accepted baseline is not what was accepted" in " ".join(text.split()), text


def test_submit_baseline_does_not_launder_a_change_and_prepare_baseline_reseals(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _edit(ws / "baseline" / "add_perf.txt")
    payload, code = submit_baseline(ws / "baseline")  # `helix submit-baseline`: would accept the edit as it is
    assert code == 1 and "baseline/add_perf.txt changed" in payload["issues"][0] and FIX in payload["guideline"]
    assert _start(ws, 1)[1] == 1
    # prepare-baseline (which snapshots, tests and benches it again) submits it with reseal=True
    assert submit_baseline(ws / "baseline", reseal=True)[1] == 0
    assert _start(ws, 1)[1] == 0


def test_an_unsealed_baseline_is_not_refused_by_the_commands(tmp_path: Path) -> None:
    """A baseline accepted by an older helix has no seal: the commands go on (submit-round's gate
    asks for `prepare-baseline --force`, test_seals.py)."""
    from helix_engine.state import seals

    ws = _accepted(tmp_path)
    (ws / ".helix" / "gate" / "baseline.json").unlink()
    _edit(ws / "baseline" / "add_perf.txt")
    assert seals.baseline_problem(ws) is None
    assert _start(ws, 1)[1] == 0


def test_a_seal_edited_by_hand_is_refused(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    path = ws / ".helix" / "gate" / "baseline.json"
    data = json.loads(path.read_text())
    data["files"]["baseline/add_perf.txt"] = "0" * 64
    path.write_text(json.dumps(data))
    payload, code = _start(ws, 1)
    assert code == 1 and "does not verify" in payload["issues"][0] and FIX in payload["issues"][0]


# ------------------------------------------------------------------------------ submitted rounds


def test_a_submitted_parent_whose_perf_file_changed_is_refused_and_marked(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's race: a run-bench finishing after submit-round rewrote the round's perf file
    (ledger 7.86x, status 16.7x)."""
    ws = _accepted(tmp_path)
    _submitted(ws, 1, 0.8)
    assert _start(ws, 2, "opt-round-1")[1] == 0
    put_round(ws, 2, scaled(0.7), parent="opt-round-1")
    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", scaled(0.05))  # rewritten after it was submitted

    payload, code = submit_round(ws / "opt-round-2")
    assert code == 1, payload
    issue = payload["issues"][0]
    assert issue.startswith("opt-round-1 (the parent of opt-round-2) is not what was submitted: "
                            "opt-round-1/opt_add_perf.txt changed since opt-round-1 was submitted"), issue
    assert workflow_json(ws)["rounds"]["2"]["status"] == "active"  # refused, not closed: it can be submitted later
    assert "## Round 2" not in (ws / "opt-note.md").read_text()

    # the same round named as a bench reference
    from helix_engine.eval.bench import run_bench

    with pytest.raises(HelixError, match="opt-round-1 \\(the reference of this run-bench\\) is not what was"):
        run_bench(ws / "opt-round-2" / "opt_add.py", against="parent")

    rc, text = _cli(capsys, "status", str(ws), "--json")
    assert rc == 0, text
    [item] = json.loads(text)["operators"]
    rounds = {r["dir"]: r for r in item["rounds"]}
    assert rounds["opt-round-1"]["changed_since_submit"] == [
        "opt-round-1/opt_add_perf.txt changed since opt-round-1 was submitted"]
    assert rounds["opt-round-2"]["changed_since_submit"] == []
    assert any(w.startswith("opt-round-1 is not what was submitted: opt-round-1/opt_add_perf.txt changed")
               for w in item["warnings"]), item["warnings"]

    # put back as submitted: accepted again
    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", scaled(0.8))
    payload, code = submit_round(ws / "opt-round-2")
    assert code == 0, payload


def test_start_round_refuses_a_changed_submitted_parent(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _submitted(ws, 1, 0.8)
    (ws / "opt-round-1" / "opt_add.py").write_text("# swapped after submit\n", encoding="utf-8")
    payload, code = _start(ws, 2)  # the default parent: the promoted best, opt-round-1
    assert code == 1, payload
    assert ("opt-round-1 (the parent of opt-round-2) is not what was submitted: opt-round-1/opt_add.py changed"
            in payload["issues"][0] and "--parent-round" in payload["issues"][0])
    assert "submitted" in payload["guideline"]
    assert not (ws / "opt-round-2").exists()
    assert _start(ws, 2, "baseline")[1] == 0  # another parent: the round opens


def test_the_best_round_a_round_is_judged_against_is_checked_too(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _submitted(ws, 1, 0.5)  # the promoted best
    assert _start(ws, 2, "baseline")[1] == 0
    put_round(ws, 2, scaled(0.8))
    write_perf(ws / "opt-round-1" / "opt_add_perf.txt", scaled(0.1))  # still the best, now by far
    payload, code = submit_round(ws / "opt-round-2")
    assert code == 1, payload
    assert payload["issues"][0].startswith("opt-round-1 (the promoted best round, which opt-round-2 is judged "
                                           "against) is not what was submitted"), payload["issues"]


def test_a_submitted_file_that_is_gone_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _accepted(tmp_path)
    _submitted(ws, 1, 0.8)
    (ws / "opt-round-1" / "opt_add_perf.txt").unlink()
    rc, text = _cli(capsys, "status", str(ws), "--json")
    [item] = json.loads(text)["operators"]
    assert any("opt-round-1/opt_add_perf.txt is gone since opt-round-1 was submitted" in w
               for w in item["warnings"]), item["warnings"]


# ------------------------------------------------------------------------------ self-reported statuses


@pytest.mark.real_gate
def test_self_reported_statuses_are_recorded_as_such_and_never_promote(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's row: zeros, never tested, `round-state --correctness passed`."""
    ws = _accepted(tmp_path)
    assert _start(ws, 1)[1] == 0
    rdir = put_round(ws, 1, scaled(0.5))
    (rdir / "round-state.json").unlink()
    monkeypatch.chdir(ws)
    argv = ("round-state", "--round-dir", "opt-round-1", "--hypothesis", "h", "--evidence", "benchmark")
    rc, text = _cli(capsys, *argv, "--correctness", "passed", "--benchmark", "passed", "--json")
    assert rc == 0, text
    out = json.loads(text)
    state = out["round_state"]
    assert (state["correctness_status"], state["benchmark_status"]) == ("passed", "passed")  # upstream's fields
    assert state["self_reported_statuses"] == ["correctness_status", "benchmark_status"]
    assert any("correctness_status=passed is self-reported (--correctness; the round's jobs say not_run)" in n
               and "never promotes" in n for n in out["notes"]), out["notes"]
    on_disk = json.loads((rdir / "round-state.json").read_text())
    assert on_disk["self_reported_statuses"] == ["correctness_status", "benchmark_status"]

    payload, code = submit_round(rdir)  # no run-test or run-bench went through the gate
    assert code == 1 and any("has no run-test through the gate" in i for i in payload["issues"]), payload
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"

    rc, text = _cli(capsys, *argv, "--json")  # statuses from the jobs again: the mark goes with the flags
    state = json.loads(text)["round_state"]
    assert state["self_reported_statuses"] == [] and state["correctness_status"] == "not_run"


def test_a_ledger_whose_best_is_not_the_promoted_one_is_said(tmp_path: Path) -> None:
    """submit-round writes the promoted best into opt-note.md; a ledger edited to log another best
    (the baseline here, or a round the promotion rule did not promote) is a status warning, and
    the promoted best is what status reports."""
    from helix_engine.status import LEDGER_EDITED, operator_status
    from helix_engine.workspace.snapshot import load_workspace

    ws = _accepted(tmp_path)
    _submitted(ws, 1, 0.5)
    status = operator_status(load_workspace(ws))
    assert not any(w.startswith(LEDGER_EDITED) for w in status.warnings), status.warnings
    note = ws / "opt-note.md"
    text = note.read_text(encoding="utf-8")
    assert "Final best round: round-1" in text, text
    note.write_text(text.replace("Final best round: round-1", "Final best round: baseline"), encoding="utf-8")
    status = operator_status(load_workspace(ws))
    said = [w for w in status.warnings if w.startswith(LEDGER_EDITED)]
    assert len(said) == 1 and "logs baseline as the best round but the promotion rule's best is" in said[0], \
        status.warnings
