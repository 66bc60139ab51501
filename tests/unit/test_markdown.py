"""opt-note.md / attempts.md parsing and writing: lossless round trips, hand text survives."""

from __future__ import annotations

import pytest

from helix_engine.workspace.markdown import (
    OverallFields,
    RoundEntryFields,
    StateUpdate,
    parse_analysis_lines,
    parse_opt_note,
    parse_pct_text,
    parse_result_numbers,
    parse_speedup_text,
    parse_state_updates,
    refresh_overall_summary,
    render_analysis_lines,
    render_state_update,
    set_best_status,
    state_update_append_text,
    upsert_round,
)

HAND_WRITTEN = """\
# Optimization notes for softmax

Written by a person: the baseline was measured on a busy machine.
Keep this paragraph.

## Round 1
Parent: baseline
Theme: hoist the mask
Result: correctness passed; 1.82→1.57 ms
Best status: current best
Summary: [opt-round-1/summary.md](opt-round-1/summary.md)
Attempts: [opt-round-1/attempts.md](opt-round-1/attempts.md)
A note typed inside the entry — with unicode ✓ and trailing spaces   

### A sub heading stays inside round 1
- bullet

```md
## Round 99
Best status: current best
## Overall Summary
```

## Round 2
**Parent:** round-1
- Theme: bigger block
Result: correctness failed
Best status: not promoted

## Side notes
free text, unknown to the parser

## Overall Summary
Final best round: round-1
Avg improvement: +13.7%
Geomean speedup: 1.16x
Validated branches: none
Outcome: faster
Key optimization points:
  1. mask hoisting: fewer ops (round 1)
  - a hand-written point without a round
Next step: profile the reduction
Closing hand text.
"""


def test_round_trip_is_byte_for_byte() -> None:
    note = parse_opt_note(HAND_WRITTEN)
    assert note.render() == HAND_WRITTEN
    crlf = HAND_WRITTEN.replace("\n", "\r\n")
    assert parse_opt_note(crlf).render() == crlf
    no_newline = HAND_WRITTEN.rstrip("\n")
    assert parse_opt_note(no_newline).render() == no_newline


def test_parse_fields_and_ignore_fenced_headings() -> None:
    note = parse_opt_note(HAND_WRITTEN)
    assert [r.number for r in note.rounds] == [1, 2]  # "## Round 99" is inside a code fence
    one, two = note.rounds
    assert (one.parent, one.theme, one.best_status, one.line) == ("baseline", "hoist the mask", "current best", 6)
    assert one.result == "correctness passed; 1.82→1.57 ms"
    assert (two.parent, two.theme, two.best_status) == ("round-1", "bigger block", "not promoted")
    assert note.final_best_round == "round-1"
    assert note.geomean_text == "1.16x"
    assert note.avg_improvement_text == "+13.7%"
    assert note.overall_summary_count == 1
    assert note.key_points == ["mask hoisting: fewer ops (round 1)", "a hand-written point without a round"]
    assert note.next_step == "profile the reduction"
    assert note.logged_best == "round-1"
    assert note.problems == []


def test_two_overall_summaries_are_a_problem_with_line() -> None:
    text = HAND_WRITTEN + "\n## Overall Summary\nFinal best round: round-2\nSecond hand line.\n"
    note = parse_opt_note(text)
    assert note.overall_summary_count == 2
    [problem] = [p for p in note.problems if "Overall Summary" in p.message]
    assert problem.file == "opt-note.md"
    assert problem.line == text.splitlines().index("## Overall Summary", 40) + 1
    assert note.final_best_round == "round-1"  # the first one is read, as upstream's search does


def test_writer_collapses_two_summaries_keeping_hand_text() -> None:
    text = HAND_WRITTEN + "\n## Overall Summary\nFinal best round: round-2\nSecond hand line.\n"
    note = parse_opt_note(text)
    refresh_overall_summary(note, OverallFields("round-1", "+13.7%", "1.16x", "none", "faster"))
    out = note.render()
    again = parse_opt_note(out)
    assert again.overall_summary_count == 1
    assert "Closing hand text." in out and "Second hand line." in out
    assert "Final best round: round-2" not in out
    assert "Written by a person" in out and "free text, unknown to the parser" in out
    assert again.key_points[:2] == ["mask hoisting: fewer ops (round 1)", "a hand-written point without a round"]
    assert again.problems == []


def test_upsert_new_round_goes_after_its_predecessor_and_keeps_text() -> None:
    note = parse_opt_note(HAND_WRITTEN)
    upsert_round(note, RoundEntryFields(3, "round-1", "vectorize", "correctness passed; geomean speedup 1.30x", "current best"))
    set_best_status(note, 1, "validated branch")
    out = note.render()
    lines = out.splitlines()
    assert lines.index("## Round 3") > lines.index("## Round 2")
    assert lines.index("## Round 3") < lines.index("## Side notes")
    again = parse_opt_note(out)
    assert [(r.number, r.best_status) for r in again.rounds] == [
        (1, "validated branch"), (2, "not promoted"), (3, "current best")]
    assert again.round(3).summary == "[opt-round-3/summary.md](opt-round-3/summary.md)"
    # Every original line except the changed Best status survives in order.
    kept = [line for line in HAND_WRITTEN.splitlines() if line != "Best status: current best"]
    remaining = iter(lines)
    assert all(any(line == other for other in remaining) for line in kept)


def test_upsert_existing_round_edits_in_place_and_is_idempotent() -> None:
    note = parse_opt_note(HAND_WRITTEN)
    entry = RoundEntryFields(2, "round-1", "bigger block", "correctness failed; benchmark not_run", "not promoted")
    upsert_round(note, entry)
    first = note.render()
    assert "**Parent:** round-1" in first  # the person's formatting of the key is kept
    assert "- Theme: bigger block" in first
    assert "Summary: [opt-round-2/summary.md](opt-round-2/summary.md)" in first
    note2 = parse_opt_note(first)
    upsert_round(note2, entry)
    assert note2.render() == first
    assert first.count("## Round 2") == 1


def test_refresh_adds_fields_and_key_points_once() -> None:
    note = parse_opt_note("# notes\n\n## Round 1\nParent: baseline\n")
    fields = OverallFields("round-1", "+20.0%", "1.25x", "none", "faster", key_points=[(1, "mask: 1.25x geomean")])
    refresh_overall_summary(note, fields)
    out = note.render()
    refresh_overall_summary(parse_opt_note(out), fields)
    again = parse_opt_note(out)
    assert again.overall_summary_count == 1
    assert again.key_points == ["mask: 1.25x geomean (round 1)"]
    assert out.endswith("  1. mask: 1.25x geomean (round 1)\n")
    assert "Key optimization points:\n" in out  # no trailing space on an empty value
    note3 = parse_opt_note(out)
    refresh_overall_summary(note3, fields)
    assert note3.render() == out


def test_logged_best_falls_back_to_last_current_best_marker() -> None:
    note = parse_opt_note("## Round 1\nBest status: current best\n## Round 2\nBest status: current best\n")
    assert note.logged_best == "round-2"
    note = parse_opt_note("## Round 1\nBest status: current best\n## Overall Summary\nFinal best round: opt-round-1\n")
    assert note.logged_best == "round-1"


def test_disagreeing_best_markers_and_duplicate_rounds_are_problems() -> None:
    text = "## Round 1\nBest status: current best\n\n## Round 1\nTheme: again\n\n## Overall Summary\nFinal best round: round-2\n"
    note = parse_opt_note(text)
    messages = [p.message for p in note.problems]
    assert any("appears twice" in m for m in messages)
    assert any("make them agree" in m for m in messages)
    assert [p.line for p in note.problems if "appears twice" in p.message] == [4]


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "no headings at all", "## Round 0\n", "## Round x\nParent: y\n", "\ufeff## Round 1\n",
     "## Overall Summary\n" * 3, "```\n## Round 1\n", "## Round 1\r\nParent: baseline\r\n", "#" * 10000],
)
def test_hostile_inputs_never_raise_and_round_trip(text: str) -> None:
    note = parse_opt_note(text)
    assert note.render() == text
    upsert_round(note, RoundEntryFields(1, "baseline", "t", "r", "not promoted"))
    refresh_overall_summary(note, OverallFields("round-1", "+1.0%", "1.01x", "none", "ok"))
    again = parse_opt_note(note.render())
    assert again.overall_summary_count == 1
    assert sum(1 for r in again.rounds if r.number == 1) >= 1


def test_state_update_render_parse_round_trip() -> None:
    first = StateUpdate("2026-07-20T08:05:00Z", "start-round", "exploration", "pattern_entry", "try mask",
                        ["The combination is unusual."])
    second = StateUpdate("2026-07-20T08:06:00Z", "set-current-round-state", "structural_change", "ir_required",
                         "need IR", [], previous_round_strategy="exploration", previous_analysis_policy="<unset>")
    assert render_state_update(first) == (
        "## State Update 2026-07-20T08:05:00Z\n- Source: start-round\n- Round strategy: exploration\n"
        "- Analysis policy: pattern_entry\n- Reason: try mask\n- Warning: The combination is unusual.\n"
    )
    text = "# attempts\nHypothesis: x"
    text += state_update_append_text(text, first)
    text += "Attempt 1: hand text\n"
    text += state_update_append_text(text, second)
    assert "\n\n## State Update 2026-07-20T08:05:00Z" in text
    parsed = parse_state_updates(text)
    assert len(parsed) == 2
    assert parsed[0].warnings == ["The combination is unusual."]
    assert (parsed[1].previous_round_strategy, parsed[1].round_strategy) == ("exploration", "structural_change")
    assert (parsed[1].previous_analysis_policy, parsed[1].analysis_policy) == ("<unset>", "ir_required")
    assert parsed[1].line == text.splitlines().index("## State Update 2026-07-20T08:06:00Z") + 1
    assert state_update_append_text("", first) == render_state_update(first)


def test_analysis_lines() -> None:
    text = "Primary analysis level: pattern triage\nSupporting evidence: benchmark\n" + render_analysis_lines(
        "profiling diagnosis", "profile", ("pattern triage", "profiling diagnosis"), "pattern gave no lead")
    found = parse_analysis_lines(text)
    assert found.primary_level == "pattern triage"
    assert [v for _, v in found.supporting_evidence] == ["benchmark", "profile"]
    assert found.escalations == [(5, "pattern triage", "profiling diagnosis")]
    assert found.escalation_reasons == [(6, "pattern gave no lead")]
    assert found.final_level == "profiling diagnosis"


def test_number_parsers() -> None:
    assert parse_result_numbers("correctness passed; geomean speedup 1.25x, avg improvement +20.0% vs") == (1.25, 20.0)
    assert parse_result_numbers("correctness failed") == (None, None)
    assert parse_speedup_text("1.16x") == 1.16 and parse_speedup_text("unknown") is None
    assert parse_pct_text("-3.5%") == -3.5


def test_section_values_are_what_get_returns_field_by_field() -> None:
    """values() scans a section once (the ledger is parsed on every status); it must give what
    get() gives for each field: the first unfenced occurrence, fences and line ends included."""
    import random

    from helix_engine.workspace.md_sections import Section

    rng = random.Random(7)
    pieces = ["- Parent: x\n", "**Result**: ok\r\n", "```\n", "~~~\n", "Best status: current best\n",
              "  * theme: t\n", "Summary:\n", "text\n", "- Parent: y\n", "Final best round: round-3\n",
              "Geomean speedup: 1.2x\n", "Result: second\r"]
    for _ in range(500):
        kind = rng.choice(["round", "overall"])
        section = Section(kind, ["## head\n", *(rng.choice(pieces) for _ in range(rng.randint(0, 10)))], 1)
        assert section.values() == {name: section.get(name) for name in section.field_lines()}, section.lines


def test_engine_key_points_with_an_interval_are_refreshed_not_kept_stale() -> None:
    """The engine writes ``1.50x [1.45x, 1.55x] geomean`` (the interval before the word, and
    "(paired run)" / "(perf files)" when the numbers are two measurements): such a point is the
    engine's, refreshed when the numbers change and removed when its round stops qualifying. The
    pattern used to expect the interval after "geomean", so these points were kept as a person's."""
    from helix_engine.workspace.markdown import OverallFields, parse_opt_note, refresh_overall_summary

    def fields(points: list[tuple[int, str]]) -> OverallFields:
        return OverallFields("round-1", "+20.0%", "1.25x", "none", "round-1 is the current best", points)

    old = "fuse: 1.25x [1.20x, 1.30x] (paired run) geomean, +20.0% (perf files) avg vs baseline"
    note = parse_opt_note("# notes\n")
    refresh_overall_summary(note, fields([(1, old)]))
    note = parse_opt_note(note.render())
    new = "fuse: 1.40x [1.35x, 1.45x] (paired run) geomean, +28.0% (perf files) avg vs baseline"
    refresh_overall_summary(note, fields([(1, new)]))
    text = note.render()
    assert f"{new} (round 1)" in text and old not in text and text.count("(round 1)") == 1
    refresh_overall_summary(note, fields([]))  # round 1 no longer qualifies
    assert "(round 1)" not in note.render()
    from helix_engine.workspace.markdown import ENGINE_POINT_RE  # the same, written without the labels

    assert ENGINE_POINT_RE.search("fuse: 1.25x [1.20x, 1.30x] geomean, +20.0% avg vs baseline (round 1)")
