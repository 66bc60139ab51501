"""Crash leftovers (issue 11, finding 8): what a killed command leaves is reported by
`helix status` (which writes nothing) and cleaned up by the next state-changing command.

Each crash is reproduced exactly: the transition runs with the engine's writers wrapped so the
process "dies" (a BaseException nothing may swallow) right after the Nth write, leaving on disk
what a kill -9 at that point leaves.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.state.lifecycle import (
    set_current_round_state,
    start_round,
    submit_baseline,
    submit_round,
)
from helix_engine.workspace import files
from helix_engine.workspace.markdown import parse_opt_note
from helix_engine.workspace.md_attempts import parse_state_updates

from state_fixtures import new_workspace, put_round, scaled, workflow_json

OLD = time.time() - 3600  # an hour: past files.TEMP_MAX_AGE_S
START_ARGS = ("exploration", "pattern_entry", "tile the reduction")


class Crash(BaseException):
    """Stands for the process dying."""


def _die_after(monkeypatch: pytest.MonkeyPatch, count: int) -> list[str]:
    """Let ``count`` engine writes (atomic writes and appends) happen, then die."""
    calls: list[str] = []
    real_write, real_append = files.atomic_write_text, files.append_text

    def wrap(real, kind):
        def inner(path, text):
            if len(calls) == count:
                raise Crash
            calls.append(f"{kind}:{Path(path).name}")
            real(path, text)
        return inner

    monkeypatch.setattr(files, "atomic_write_text", wrap(real_write, "write"))
    monkeypatch.setattr(files, "append_text", wrap(real_append, "append"))
    return calls


def _tree(ws: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``ws`` (links not followed) with its mode, size and mtime; not
    .helix/cache/, the derived summaries status keeps (workspace/round_cache.py)."""
    found = {}
    for folder, dirs, names in os.walk(ws):
        if os.path.relpath(folder, ws) == ".helix":
            dirs[:] = [d for d in dirs if d != "cache"]
        for name in dirs + names:
            st = os.lstat(os.path.join(folder, name))
            rel = os.path.relpath(os.path.join(folder, name), ws)
            found[rel] = (st.st_mode, 0, 0) if rel == ".helix" else (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def _status_problems(ws: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    """`helix status --json` problems, checking the command changed nothing on disk."""
    before = _tree(ws)
    capsys.readouterr()
    assert main(["status", str(ws), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert _tree(ws) == before, "helix status wrote to the workspace"
    return out["operators"][0]["problems"]


def _leftover_messages(ws: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [f"{p['file']}: {p['message']}" for p in _status_problems(ws, capsys)
            if "interrupted" in p["message"]]


def _baseline_ready(root: Path) -> Path:
    ws = new_workspace(root)
    assert submit_baseline(ws / "baseline")[1] == 0
    return ws


def _round_ready(root: Path) -> Path:
    """Round 1 started and its artifacts written, ready to submit."""
    ws = _baseline_ready(root)
    assert start_round(ws / "opt-round-1", *START_ARGS)[1] == 0
    put_round(ws, 1, scaled(0.8), state_overrides={"opt_note_updated": False})  # submit-round sets it
    return ws


@pytest.fixture(autouse=True)
def _no_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_OPTIMIZE_MIN_SPEEDUP", raising=False)


# ----------------------------------------------------------------------------- temp files


def _temp(folder: Path, target: str, *, old: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".{target}.k3_x9q2a.tmp"
    path.write_text('{"half": ', encoding="utf-8")
    if old:
        os.utime(path, (OLD, OLD))
    return path


def test_old_temp_files_are_removed_by_the_next_transition_fresh_ones_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _round_ready(tmp_path)
    old = [_temp(ws, "opt-note.md", old=True), _temp(ws / "baseline", "add_perf.txt", old=True),
           _temp(ws / "opt-round-1", "round-state.json", old=True), _temp(ws / ".helix", "state.json", old=True),
           _temp(ws / ".helix" / "jobs" / "20260720-080000-bench-ab12", "job.json", old=True)]
    fresh = ws / ".helix" / ".state.json.zz99zz99.tmp"  # a live writer's: younger than the age
    fresh.write_text("{", encoding="utf-8")
    kept = []
    for name in (".state.json.tmp", ".state.json.ABCDEFGH.tmp", "notes.k3_x9q2a.tmp", ".x.k3_x9q2a.tmp.bak",
                 ".x.k3_x9q2.tmp"):  # near misses of the mkstemp pattern
        path = ws / ".helix" / name
        path.write_text("mine", encoding="utf-8")
        os.utime(path, (OLD, OLD))
        kept.append(path)
    kept.append(_temp(ws / "opt-round-1" / "profile", "trace.json", old=True))  # not a contract folder
    assert sorted(files.orphan_temps(ws)) == sorted(old)

    problems = [p for p in _status_problems(ws, capsys) if "temp file" in p["message"]]
    assert len(problems) == 1 and problems[0]["severity"] == "warning"
    assert "5 temp files left by interrupted writes" in problems[0]["message"]
    assert "`helix repair`" in problems[0]["message"]

    payload, code = set_current_round_state(ws, "profile first", analysis_policy="profile_required")
    assert code == 0, payload
    assert payload["recovered"] == [payload["recovered"][0]]
    assert payload["recovered"][0].startswith("removed 5 temp file(s) left by interrupted writes")
    assert [p for p in old if os.path.lexists(p)] == []
    assert fresh.exists() and all(p.exists() for p in kept)
    assert [p for p in _status_problems(ws, capsys) if "temp file" in p["message"]] == []


def _walked_temps(ws: Path) -> list[Path]:
    """orphan_temps in a load given the walk `helix status` makes (from its listing, no folder opened)."""
    from helix_engine.workspace import reading, status_cache

    found = status_cache.fingerprint(ws, ("json", "best", "None"))
    assert found.listing is not None
    with reading.walked(found.listing):
        return files.orphan_temps(ws)


def test_the_walks_listing_finds_the_temp_files_the_folder_scan_finds(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _round_ready(tmp_path)
    for folder in (ws, ws / "baseline", ws / "opt-round-1", ws / ".helix", ws / ".helix" / "jobs" / "j1",
                   ws / "opt-round-1" / "profile", ws / "notes"):  # the last two: not contract folders
        _temp(folder, "a.json", old=True)
        _temp(folder, "b.json", old=True)
    (ws / ".helix" / ".state.json.zz99zz99.tmp").write_text("{", encoding="utf-8")  # young: a live writer's
    link = ws / "opt-round-1" / ".c.json.abcdefgh.tmp"
    link.symlink_to(ws / "opt-note.md")  # a link named like one: never listed
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    scanned = files.orphan_temps(ws)
    assert len(scanned) == 10 and not any("profile" in str(p) or "notes" in str(p) for p in scanned)
    assert _walked_temps(ws) == scanned  # the same files, in the same order

    monkeypatch.chdir(ws)  # `cd workspace && helix status .`: the walk lists "." as ""
    here = Path(".")
    scanned = files.orphan_temps(here)
    monkeypatch.setattr(files, "_orphan_temps", lambda *a, **k: pytest.fail("the listing was not used"))
    assert _walked_temps(here) == scanned and len(scanned) == 10


def test_a_symlink_named_like_a_temp_file_is_never_followed_or_removed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _round_ready(tmp_path / "w")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    os.utime(victim, (OLD, OLD))
    outside_temp = _temp(outside, "state.json", old=True)
    link = ws / ".helix" / ".state.json.abcdefgh.tmp"
    link.symlink_to(victim)
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    (ws / "opt-round-7").symlink_to(outside, target_is_directory=True)  # a linked round folder
    (ws / ".helix" / "jobs").mkdir(parents=True, exist_ok=True)
    (ws / ".helix" / "jobs" / "20260720-080000-bench-ab12").symlink_to(outside, target_is_directory=True)
    (ws / "baseline").rename(ws / "baseline-real")
    (ws / "baseline").symlink_to(outside, target_is_directory=True)

    assert files.orphan_temps(ws) == [] == _walked_temps(ws)
    assert [p for p in _status_problems(ws, capsys) if "temp file" in p["message"]] == []
    assert main(["repair", str(ws)]) == 0
    assert "Nothing to repair" in capsys.readouterr().out
    assert link.is_symlink() and victim.read_text(encoding="utf-8") == "precious"
    assert outside_temp.exists()


# ------------------------------------------------------------------------ half-done start-round


@pytest.mark.parametrize("writes", [1, 2], ids=["after-state", "after-timing"])
def test_half_done_start_round_is_explained_then_finished_by_the_next_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], writes: int) -> None:
    ws = _baseline_ready(tmp_path)
    with monkeypatch.context() as m:
        calls = _die_after(m, writes)
        with pytest.raises(Crash):
            start_round(ws / "opt-round-1", *START_ARGS)
    assert calls == ["write:state.json", "append:opt-round-1.jsonl"][:writes]
    assert workflow_json(ws)["current_round"] == 1 and not (ws / "opt-round-1").exists()

    messages = _leftover_messages(ws, capsys)
    assert messages == [("opt-round-1/attempts.md: start-round of opt-round-1 was interrupted after "
                         ".helix/state.json made the round active and before it wrote this file; run `helix "
                         "repair` (or start-round again with the same arguments) to finish it")]
    assert not any("does not exist" in p["message"] for p in _status_problems(ws, capsys))

    payload, code = start_round(ws / "opt-round-1", *START_ARGS)  # the agent repeats its command
    assert code == 0, payload
    assert payload["recovered"] == ["finished the interrupted start-round of opt-round-1: wrote its State Update "
                                    "block to opt-round-1/attempts.md"
                                    + (" and its round_start timing" if writes == 1 else "")
                                    + " and created its candidate operator from baseline"]
    assert (ws / "opt-round-1" / "opt_add.py").read_bytes() == (ws / "baseline" / "add.py").read_bytes()
    state = workflow_json(ws)["rounds"]["1"]
    [update] = parse_state_updates((ws / "opt-round-1" / "attempts.md").read_text(encoding="utf-8"))
    assert (update.timestamp, update.source, update.round_strategy, update.analysis_policy, update.reason) == (
        state["strategy_state"]["updated_at"], "start-round", *START_ARGS)
    timings = (ws / ".helix" / "round-timings" / "opt-round-1.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(t)["event"] for t in timings] == ["round_start"]
    assert _leftover_messages(ws, capsys) == []


def test_helix_repair_finishes_a_half_done_start_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _baseline_ready(tmp_path)
    with monkeypatch.context() as m:
        _die_after(m, 1)
        with pytest.raises(Crash):
            start_round(ws / "opt-round-1", *START_ARGS)
    capsys.readouterr()
    assert main(["repair", str(ws), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "pass" and payload["unresolved"] == []
    assert payload["repaired"][0].startswith("finished the interrupted start-round of opt-round-1")
    assert (ws / "opt-round-1" / "attempts.md").is_file()
    assert main(["repair", str(ws)]) == 0
    assert capsys.readouterr().out == "Nothing to repair: no crash leftovers.\n"


# ----------------------------------------------------------------------- half-done submit-round


def test_half_done_submit_round_is_explained_and_the_repeat_finishes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _round_ready(tmp_path)
    with monkeypatch.context() as m:
        calls = _die_after(m, 2)  # the marker and opt-note.md are written, state.json is not
        with pytest.raises(Crash):
            submit_round(ws / "opt-round-1")
    assert calls == ["write:transition.json", "write:opt-note.md"]
    assert [r.number for r in parse_opt_note((ws / "opt-note.md").read_text(encoding="utf-8")).rounds] == [1]
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"

    sentence = ("submit-round of opt-round-1 was interrupted before .helix/state.json recorded the round; run "
                "`helix submit-round --round-dir opt-round-1` again to finish it (its opt-note.md entry is not "
                "written twice)")
    assert _leftover_messages(ws, capsys) == [f".helix/transition.json: {sentence}"]

    payload, code = start_round(ws / "opt-round-2", *START_ARGS)  # the next command refuses, with the sentence
    assert code == 1
    assert payload["crash_leftovers"] == [f".helix/transition.json: {sentence}"]
    assert payload["guideline"].startswith(f".helix/transition.json: {sentence}. ")
    capsys.readouterr()
    assert main(["repair", str(ws)]) == 1
    assert capsys.readouterr().out == f"to do: .helix/transition.json: {sentence}\n"

    payload, code = submit_round(ws / "opt-round-1")
    assert code == 0, payload
    assert "crash_leftovers" not in payload
    assert workflow_json(ws)["rounds"]["1"]["status"] == "passed"
    assert [r.number for r in parse_opt_note((ws / "opt-note.md").read_text(encoding="utf-8")).rounds] == [1]
    assert not (ws / ".helix" / "transition.json").exists()
    assert _leftover_messages(ws, capsys) == []


def test_submit_round_killed_after_recording_gets_its_round_end_from_the_next_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _round_ready(tmp_path)
    with monkeypatch.context() as m:
        calls = _die_after(m, 4)  # everything but the round_end timing (and the marker's removal)
        with pytest.raises(Crash):
            submit_round(ws / "opt-round-1")
    assert calls == ["write:transition.json", "write:opt-note.md", "write:round-state.json", "write:state.json"]
    ended = workflow_json(ws)["rounds"]["1"]["ended_at"]
    assert _leftover_messages(ws, capsys) == [(
        ".helix/transition.json: submit-round of opt-round-1 was interrupted after it recorded the round passed; "
        "run `helix repair` to write its round_end timing and remove this marker")]

    payload, code = start_round(ws / "opt-round-2", *START_ARGS)
    assert code == 0, payload
    assert payload["recovered"] == [("finished the interrupted submit-round of opt-round-1 (recorded passed): "
                                     "wrote its round_end timing")]
    lines = (ws / ".helix" / "round-timings" / "opt-round-1.jsonl").read_text(encoding="utf-8").splitlines()
    assert [(json.loads(x)["event"], json.loads(x)["timestamp"]) for x in lines][-1] == ("round_end", ended)
    assert not (ws / ".helix" / "transition.json").exists()
    assert _leftover_messages(ws, capsys) == []


def test_an_agent_written_ledger_entry_of_the_active_round_is_not_a_crash_leftover(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Agents write their own ``## Round N`` before submitting; only the marker means a crash."""
    ws = _round_ready(tmp_path)
    (ws / "opt-note.md").write_text("# Notes\n\n## Round 1\n- Parent: baseline\n- Theme: tiling\n", encoding="utf-8")
    assert _leftover_messages(ws, capsys) == []
    payload, code = submit_round(ws / "opt-round-1")
    assert code == 0 and "crash_leftovers" not in payload and "recovered" not in payload


def test_an_unreadable_marker_is_reported_and_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _round_ready(tmp_path)
    marker = ws / ".helix" / "transition.json"
    marker.write_text("{not json", encoding="utf-8")
    [problem] = [p for p in _status_problems(ws, capsys) if p["file"] == ".helix/transition.json"]
    assert problem["severity"] == "warning" and "`helix repair`" in problem["message"]
    assert main(["repair", str(ws)]) == 0
    assert "removed .helix/transition.json, an unreadable submit-round marker" in capsys.readouterr().out
    assert not marker.exists()
