"""A crash at every write boundary of submit-round (deterministic, in process): the files stay
whole, and repeating the call finishes the round with its ledger entry written once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.workspace import files
from helix_engine.workspace.markdown import parse_opt_note

from state_fixtures import new_workspace, put_round, scaled, workflow_json


class Crash(BaseException):
    """Stands for the process dying (BaseException: nothing in the engine may swallow it)."""


def _counting(monkeypatch: pytest.MonkeyPatch, crash_at: int | None, after: bool) -> list[str]:
    calls: list[str] = []
    real_write, real_append = files.atomic_write_text, files.append_text

    def wrap(real, kind):  # noqa: ANN001, ANN202
        def inner(path, text):  # noqa: ANN001, ANN202
            calls.append(f"{kind}:{Path(path).name}")
            if crash_at is not None and len(calls) == crash_at and not after:
                raise Crash
            real(path, text)
            if crash_at is not None and len(calls) == crash_at and after:
                raise Crash
        return inner

    monkeypatch.setattr(files, "atomic_write_text", wrap(real_write, "write"))
    monkeypatch.setattr(files, "append_text", wrap(real_append, "append"))
    return calls


def _ready(root: Path) -> Path:
    ws = new_workspace(root)
    assert submit_baseline(ws / "baseline")[1] == 0
    for n in (1, 2):
        assert start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", "r")[1] == 0
        put_round(ws, n, scaled(0.9 - 0.1 * n), state_overrides={"opt_note_updated": False})
        if n == 1:
            assert submit_round(ws / "opt-round-1")[1] == 0
    return ws


def test_crash_at_every_write_boundary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_OPTIMIZE_MIN_SPEEDUP", raising=False)
    probe = _ready(tmp_path / "probe")
    with monkeypatch.context() as m:
        calls = _counting(m, None, False)
        assert submit_round(probe / "opt-round-2")[1] == 0
    assert calls == ["write:transition.json", "write:opt-note.md", "write:round-state.json", "write:state.json",
                     "append:opt-round-2.jsonl", "write:opt-round-2.submitted.json"]
    for index in range(1, len(calls) + 1):
        for after in (False, True):
            ws = _ready(tmp_path / f"c{index}{after}")
            with monkeypatch.context() as m:
                _counting(m, index, after)
                with pytest.raises(Crash):
                    submit_round(ws / "opt-round-2")
            for path in ws.rglob("*.json"):
                json.loads(path.read_text())
            payload, code = submit_round(ws / "opt-round-2")
            assert code == 0 or "already submitted" in payload["issues"][0], (index, after, payload)
            assert workflow_json(ws)["rounds"]["2"]["status"] == "passed"
            note = parse_opt_note((ws / "opt-note.md").read_text())
            assert [r.number for r in note.rounds] == [1, 2], (index, after)
            assert note.final_best_round == "round-2" and note.overall_summary_count == 1
            assert json.loads((ws / "opt-round-2" / "round-state.json").read_text())["opt_note_updated"] is True
            # the repeat (or its recovery) also finished the timings and removed the submit marker
            timings = (ws / ".helix" / "round-timings" / "opt-round-2.jsonl").read_text()
            assert timings.count('"round_end"') == 1, (index, after)
            assert not (ws / ".helix" / "transition.json").exists(), (index, after)
