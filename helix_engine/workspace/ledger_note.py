"""The parsed opt-note.md ledger (``OptNote``), apart from its parser (markdown.py).

Its own module so that a snapshot's ledger facts, kept in the sealed round cache, come back without
importing the markdown parser and writer (~4 ms of a computed `helix status`, issue 12).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from helix_engine.record import record
from helix_engine.workspace.layout import parse_round_ref
from helix_engine.workspace.problem import Problem

if TYPE_CHECKING:
    from helix_engine.workspace.md_sections import Section


@record
class OptNoteRound:
    """One ``## Round N`` entry as written in opt-note.md (values verbatim, None if absent)."""

    number: int
    parent: str | None
    theme: str | None
    result: str | None
    best_status: str | None
    line: int
    summary: str | None = None
    attempts: str | None = None


@record
class OptNote:
    """The parsed ledger. ``sections`` is what the writer edits; ``render`` gives the text."""

    rounds: list[OptNoteRound]
    final_best_round: str | None
    geomean_text: str | None
    overall_summary_count: int
    problems: list[Problem]
    avg_improvement_text: str | None = None
    validated_branches: str | None = None
    outcome: str | None = None
    key_points: list[str] = field(default_factory=list)
    next_step: str | None = None
    overall_line: int | None = None
    sections: list[Section] = field(default_factory=list)
    file: str = "opt-note.md"

    def render(self) -> str:
        from helix_engine.workspace.md_sections import render_sections

        return render_sections(self.sections)

    def round(self, number: int) -> OptNoteRound | None:
        for entry in self.rounds:
            if entry.number == number:
                return entry
        return None

    @property
    def logged_best(self) -> str | None:
        """``round-N`` from ``Final best round:``, else the last ``current best`` marker."""
        ref = parse_round_ref(self.final_best_round) if self.final_best_round else None
        if ref is not None:
            return f"round-{ref}"
        return self.marked_best

    @property
    def marked_best(self) -> str | None:
        entry = self.marked_entry()
        return f"round-{entry.number}" if entry is not None else None

    def marked_entry(self) -> OptNoteRound | None:
        """The last round entry whose ``Best status`` says current best."""
        found: OptNoteRound | None = None
        for entry in self.rounds:
            if entry.best_status and "current best" in entry.best_status.lower():
                found = entry
        return found
