"""The engine-kept ledger: hand-written text survives, the numbers parse back, one entry per
round, one Overall Summary, learned_lessons.md untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_engine.state.ledger import parent_label, result_text, update_ledger
from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.workspace.markdown import parse_opt_note, parse_result_numbers, parse_speedup_text

from builders import expected_avg_improvement_pct, expected_geomean
from state_fixtures import BASELINE, new_workspace, put_round, scaled

AGENT_NOTE = """\
# Optimization notes for add

Context written by the agent before helix took over the ledger.

## Round 1
Parent: baseline
Theme: my own words for round 1
Result: (to be filled)
Best status: current best
Observation typed by hand under round 1.

## Overall Summary
Final best round: round-1
Key optimization points:
  1. mask hoisting: the agent's own point (round 1)
Next step: look at the profile
Hand line at the very end.

## Overall Summary
Outcome: a duplicated summary a person pasted
Another hand line.
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_OPTIMIZE_MIN_SPEEDUP", raising=False)
    monkeypatch.delenv("HELIX_BACKEND", raising=False)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    return ws


def submit(ws: Path, n: int, factor: float, parent: str = "baseline") -> dict:
    assert start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", "r")[1] == 0
    put_round(ws, n, scaled(factor), parent=parent, hypothesis=f"idea {n}\nspread over two lines")
    payload, code = submit_round(ws / f"opt-round-{n}")
    assert code == 0, payload
    return payload


def test_ledger_keeps_hand_text_and_parses_back_to_the_measured_numbers(ws: Path) -> None:
    (ws / "opt-note.md").write_text(AGENT_NOTE, encoding="utf-8")
    lessons = ws / "learned_lessons.md"
    lessons.write_text("# Lessons\n- hoisting masks helps elementwise kernels\n", encoding="utf-8")
    before = lessons.stat().st_mtime_ns, lessons.read_bytes()
    submit(ws, 1, 0.8)
    submit(ws, 2, 0.5, parent="opt-round-1")
    text = (ws / "opt-note.md").read_text(encoding="utf-8")
    for hand in ("Context written by the agent before helix took over the ledger.",
                 "Observation typed by hand under round 1.", "Hand line at the very end.", "Another hand line.",
                 "Next step: look at the profile", "1. mask hoisting: the agent's own point (round 1)"):
        assert hand in text, hand
    note = parse_opt_note(text)
    assert note.problems == [] and note.overall_summary_count == 1
    assert [r.number for r in note.rounds] == [1, 2]
    one, two = note.rounds
    assert one.theme == "my own words for round 1"  # the agent's Theme survives submit-round
    assert two.theme == "idea 2 spread over two lines"  # a missing Theme is filled, on one line
    assert one.result.startswith("correctness passed; benchmark passed; geomean speedup 1.25x")  # measured
    assert "vs baseline (perf files, kernel)" in one.result  # which measurement the numbers are
    assert (one.best_status, two.best_status) == ("validated branch", "current best")
    assert (two.parent, two.summary) == ("round-1", "[opt-round-2/summary.md](opt-round-2/summary.md)")
    g1, a1 = parse_result_numbers(one.result)
    assert g1 == round(expected_geomean(BASELINE, scaled(0.8)), 2)
    assert a1 == round(expected_avg_improvement_pct(BASELINE, scaled(0.8)), 1)
    assert note.final_best_round == "round-2" and note.logged_best == "round-2"
    assert parse_speedup_text(note.geomean_text) == round(expected_geomean(BASELINE, scaled(0.5)), 2)
    assert note.avg_improvement_text == f"{expected_avg_improvement_pct(BASELINE, scaled(0.5)):+.1f}%"
    assert note.validated_branches == "round-1"
    # The agent's own round-1 point stays the only round-1 point; the engine adds round 2's.
    assert sum("(round 1)" in p for p in note.key_points) == 1
    assert any(p.endswith("(round 2)") and "2.00x geomean" in p for p in note.key_points)
    assert (lessons.stat().st_mtime_ns, lessons.read_bytes()) == before


def test_ledger_is_idempotent(ws: Path) -> None:
    submit(ws, 1, 0.8)
    first = (ws / "opt-note.md").read_text()
    assert update_ledger(ws, 1, passed=True) == []
    assert (ws / "opt-note.md").read_text() == first


def test_a_slower_round_is_not_promoted(ws: Path) -> None:
    submit(ws, 1, 0.8)
    submit(ws, 2, 1.25)
    note = parse_opt_note((ws / "opt-note.md").read_text())
    assert [r.best_status for r in note.rounds] == ["current best", "not promoted"]
    assert note.round(2).result.startswith("correctness passed; benchmark passed; geomean speedup 0.80x")
    assert note.validated_branches == "none"
    assert note.outcome.startswith("round-1 is the current best: 1.25x geomean speedup")


def test_unreadable_ledger_is_left_alone_and_reported(ws: Path) -> None:
    (ws / "opt-note.md").write_bytes(b"\x00\x01binary")
    payload = submit(ws, 1, 0.8)
    assert (ws / "opt-note.md").read_bytes() == b"\x00\x01binary"
    assert any("the ledger was not updated" in issue for issue in payload["issues"])
    assert "Notes: opt-note.md" in payload["guideline"]


def test_result_text_and_parent_label() -> None:
    assert parent_label("opt-round-3") == "round-3" and parent_label("Baseline") == "baseline"
    assert parent_label("whatever") == "whatever"
    assert result_text(None, ["missing attempts.md"]) == (
        "correctness not_run; benchmark not_run; rejected: missing attempts.md")


def test_a_ledger_crash_never_blocks_the_outcome(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.state import ledger

    def boom(*args: object, **kwargs: object) -> list:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ledger, "update_ledger", boom)
    payload = submit(ws, 1, 0.8)
    assert payload["issues"] == ["opt-note.md: the ledger could not be updated (RuntimeError: disk on fire)"]


AGENT_ROUND_2 = """\
## Round 2
Parent: round-1 (the agent's note on why)
Theme: **vectorize the loads**, written by the agent
Result: agent's guess: probably 2x
Best status: current best
Summary: see [my summary](opt-round-2/summary.md)
Attempts: [opt-round-2/attempts.md](opt-round-2/attempts.md)
Prose the agent wrote under its own entry.
"""


def test_agent_written_entries_survive_submit_round(ws: Path) -> None:
    """The issue: submit-round rewrote the Theme, Result and Best status lines the agent wrote.
    The agent's lines (Parent, Theme, Summary, Attempts, prose) survive; the engine's measured
    lines (Result, Best status) follow the measurement; one entry per round."""
    submit(ws, 1, 0.5)
    note_path = ws / "opt-note.md"
    text = note_path.read_text(encoding="utf-8")
    head, tail = text.split("## Overall Summary", 1)
    note_path.write_text(head + AGENT_ROUND_2 + "\n## Overall Summary" + tail, encoding="utf-8")
    submit(ws, 2, 1.0 / 0.17, parent="opt-round-1")  # 0.17x: slower than the baseline
    text = note_path.read_text(encoding="utf-8")
    for kept in ("Parent: round-1 (the agent's note on why)", "Theme: **vectorize the loads**, written by the agent",
                 "Summary: see [my summary](opt-round-2/summary.md)", "Prose the agent wrote under its own entry."):
        assert kept in text, kept
    assert "agent's guess" not in text  # Result is measured
    note = parse_opt_note(text)
    assert [r.number for r in note.rounds] == [1, 2] and note.problems == []
    two = note.round(2)
    assert two.best_status == "not promoted"  # 0.17x is never current best
    assert two.result.startswith("correctness passed; benchmark passed; geomean speedup 0.17x")
    assert note.final_best_round == "round-1" and note.round(1).best_status == "current best"
    assert not any("(round 2)" in p for p in note.key_points)  # only promoted/validated rounds
    assert update_ledger(ws, 2, passed=True) == []  # again: still one entry, nothing rewritten
    assert note_path.read_text(encoding="utf-8") == text


def test_final_best_is_baseline_when_no_round_qualifies_and_stale_engine_points_go(ws: Path) -> None:
    """A no-op round (1.0x) and a slower one are never current best; an engine-written key point
    for a round that no longer qualifies is removed, a person's point is kept."""
    submit(ws, 1, 1.0)
    note_path = ws / "opt-note.md"
    text = note_path.read_text(encoding="utf-8")
    assert "Key optimization points:" not in text  # a 1.0x round has no point
    note_path.write_text(text + "Key optimization points:\n"
                         "  1. old idea: 1.30x geomean, +23.1% avg vs baseline (round 1)\n"  # the engine's format
                         "  2. my own view of round 1 (round 1)\n", encoding="utf-8")
    submit(ws, 2, 1.25)
    note = parse_opt_note(note_path.read_text(encoding="utf-8"))
    assert [r.best_status for r in note.rounds] == ["not promoted", "not promoted"]
    assert note.final_best_round == "baseline" and note.logged_best is None
    assert note.validated_branches == "none"
    assert note.key_points == ["my own view of round 1 (round 1)"]
    assert note.outcome.startswith("no round is faster than the baseline beyond the 1% noise margin")
