"""Read and write the markdown records of a workspace: the opt-note.md ledger, the
``## State Update`` blocks of attempts.md and the analysis-level lines.

The opt-note parser splits the file into sections at ``#``/``##`` headings (outside fenced code)
and keeps every line as it was read, so ``render`` of an unchanged document gives the input back
byte for byte. The writer edits only the field lines it owns (``Parent:``, ``Result:``, ...) and
inserts or collapses whole sections; any text a person wrote around them survives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from helix_engine.workspace.layout import parse_round_ref
from helix_engine.workspace.ledger_note import OptNote, OptNoteRound  # noqa: F401 - re-exported
from helix_engine.workspace.md_attempts import (  # noqa: F401 - re-exported: the contract names them here
    AnalysisLines,
    StateUpdate,
    parse_analysis_lines,
    parse_state_updates,
    render_analysis_lines,
    render_state_update,
    state_update_append_text,
)
from helix_engine.workspace.md_sections import (  # noqa: F401 - re-exported
    _SUMMARY_FIELD_RE,
    BEST_STATUSES,
    ENGINE_ROUND_FIELDS,
    ENGINE_SUMMARY_FIELDS,
    ROUND_FIELDS,
    SUMMARY_FIELDS,
    Section,
    _canonical,
    _split_eol,
    render_sections,
    split_sections,
)
from helix_engine.workspace.models import Problem

# ------------------------------------------------------------------------------ opt-note.md

def parse_opt_note(text: str, file: str = "opt-note.md") -> OptNote:
    """Parse opt-note.md. Never raises; malformed structure becomes Problems (file, line)."""
    sections = split_sections(text)
    problems: list[Problem] = []
    rounds: list[OptNoteRound] = []
    seen: dict[int, int] = {}
    overall = [s for s in sections if s.kind == "overall"]
    for section in sections:
        if section.kind != "round":
            continue
        number = section.number or 0
        if number < 1:
            problems.append(Problem(file, "round numbers start at 1; rename this entry", section.start_line, "warning"))
            continue
        if number in seen:
            problems.append(
                Problem(
                    file,
                    f"## Round {number} appears twice (first at line {seen[number]}); keep one "
                    "entry per round and merge the text",
                    section.start_line,
                    "warning",
                )
            )
        else:
            seen[number] = section.start_line
        fields = section.values()  # one scan of the entry, not one per field
        rounds.append(
            OptNoteRound(
                number=number,
                parent=fields.get("Parent"),
                theme=fields.get("Theme"),
                result=fields.get("Result"),
                best_status=fields.get("Best status"),
                line=section.start_line,
                summary=fields.get("Summary"),
                attempts=fields.get("Attempts"),
            )
        )
    for extra in overall[1:]:
        problems.append(
            Problem(
                file,
                f"a second ## Overall Summary (the first is at line {overall[0].start_line}); keep "
                "exactly one. The next submit-round merges them into one.",
                extra.start_line,
            )
        )
    # Like upstream (a first-match search), the first summary is the one that is read.
    main = overall[0] if overall else None
    note = OptNote(
        rounds=rounds,
        final_best_round=main.get("Final best round") if main else None,
        geomean_text=main.get("Geomean speedup") if main else None,
        overall_summary_count=len(overall),
        problems=problems,
        avg_improvement_text=main.get("Avg improvement") if main else None,
        validated_branches=main.get("Validated branches") if main else None,
        outcome=main.get("Outcome") if main else None,
        key_points=main.key_points() if main else [],
        next_step=main.get("Next step") if main else None,
        overall_line=main.start_line if main else None,
        sections=sections,
        file=file,
    )
    if note.final_best_round and parse_round_ref(note.final_best_round) is None:
        if note.final_best_round.strip().lower() not in {"none", "unknown", "baseline", "-", "n/a"}:
            problems.append(
                Problem(
                    file,
                    f"Final best round: {note.final_best_round!r} names no round; write round-N",
                    _field_line(main, "Final best round") if main else None,
                    "warning",
                )
            )
    marked, logged = note.marked_best, note.final_best_round
    logged_ref = parse_round_ref(logged) if logged else None
    if marked and logged_ref is not None and marked != f"round-{logged_ref}":
        problems.append(
            Problem(
                file,
                f"Final best round says round-{logged_ref} but the last 'Best status: current best' "
                f"marker is on {marked}; make them agree",
                note.overall_line,
                "warning",
            )
        )
    return note


def _field_line(section: Section, name: str) -> int | None:
    index = section.field_lines().get(name)
    return None if index is None else section.start_line + index


# ---------------------------------------------------------------------------- opt-note writer

#: A key point the engine wrote: ``<theme>: 1.50x[ [1.45x, 1.55x]][ (paired run)] geomean, +33.3%[ (perf
#: files)] avg vs baseline (round N)`` (the labels when the geomean is the paired run's).
ENGINE_POINT_RE = re.compile(
    r"[0-9]+(?:\.[0-9]+)?x(?: \[[^\]]*\])?(?: \(paired run\))? geomean(?: \[[^\]]*\])?, \S+(?: \(perf files\))? "
    r"avg vs baseline \(round ([0-9]+)\)\s*$")


@dataclass
class RoundEntryFields:
    """The values the engine writes into a ``## Round N`` entry."""

    number: int
    parent: str
    theme: str
    result: str
    best_status: str

    def summary_link(self) -> str:
        return f"[opt-round-{self.number}/summary.md](opt-round-{self.number}/summary.md)"

    def attempts_link(self) -> str:
        return f"[opt-round-{self.number}/attempts.md](opt-round-{self.number}/attempts.md)"


def _eol_of(sections: list[Section]) -> str:
    for section in sections:
        for line in section.lines:
            eol = _split_eol(line)[1]
            if eol:
                return eol
    return "\n"


def _ensure_blank_before(sections: list[Section], index: int, eol: str) -> None:
    """Make the section before ``index`` end with a blank line (or be empty)."""
    if index == 0:
        return
    prev = sections[index - 1]
    if not prev.lines:
        return
    last_body, last_eol = _split_eol(prev.lines[-1])
    if not last_eol:
        prev.lines[-1] += eol
    if last_body.strip():
        prev.lines.append(eol)


def upsert_round(note: OptNote, entry: RoundEntryFields) -> None:
    """Write ``entry`` into its ``## Round N`` section (created in number order if absent).

    Only the engine's lines (Result, Best status) are rewritten; Parent, Theme, Summary and
    Attempts are the agent's and are written only when missing; other lines are kept. When the
    file holds the same round twice, the first entry is updated (the parser reports the duplicate).
    """
    sections = note.sections
    eol = _eol_of(sections)
    values = {
        "Parent": entry.parent,
        "Theme": entry.theme,
        "Result": entry.result,
        "Best status": entry.best_status,
        "Summary": entry.summary_link(),
        "Attempts": entry.attempts_link(),
    }
    for section in sections:
        if section.kind == "round" and section.number == entry.number:
            for name in ROUND_FIELDS:
                current = section.get(name)
                if name in ENGINE_ROUND_FIELDS:  # measured: refreshed
                    if current != values[name]:
                        section.set(name, values[name], ROUND_FIELDS)
                elif current is None or not current.strip():  # the agent's: filled only when missing
                    section.set(name, values[name], ROUND_FIELDS)
            return
    lines = [f"## Round {entry.number}{eol}"] + [f"{name}: {values[name]}{eol}" for name in ROUND_FIELDS]
    lines.append(eol)
    new = Section("round", lines, 0, entry.number)
    index = _round_insert_index(sections, entry.number)
    _ensure_blank_before(sections, index, eol)
    sections.insert(index, new)


def _round_insert_index(sections: list[Section], number: int) -> int:
    after: int | None = None
    for i, section in enumerate(sections):
        if section.kind == "round" and (section.number or 0) < number:
            after = i
    if after is not None:
        return after + 1
    for i, section in enumerate(sections):
        if section.kind == "round" or section.kind == "overall":
            return i
    return len(sections)


def set_best_status(note: OptNote, number: int, status: str) -> bool:
    """Rewrite the ``Best status:`` of round ``number`` (first entry); False if absent."""
    for section in note.sections:
        if section.kind == "round" and section.number == number:
            if section.get("Best status") != status:
                section.set("Best status", status, ROUND_FIELDS)
            return True
    return False


@dataclass
class OverallFields:
    """The measured values the engine refreshes in ``## Overall Summary``."""

    final_best_round: str
    avg_improvement: str
    geomean_speedup: str
    validated_branches: str
    outcome: str
    key_points: list[tuple[int, str]] = field(default_factory=list)  # (round, "point: impact")


def refresh_overall_summary(note: OptNote, values: OverallFields) -> None:
    """Keep exactly one ``## Overall Summary`` and refresh its measured fields.

    Several summaries are merged into the last one's position (it should end the file): the
    first summary's field lines are kept (upstream reads the first), every other line a person
    wrote in any of them is kept in order, and key points are de-duplicated. ``key_points`` are
    the promoted and validated rounds: a point the engine wrote earlier (``ENGINE_POINT_RE``) is
    refreshed, or removed when its round no longer qualifies; a new one is added only when no
    point already names ``(round N)``; a point a person wrote is never touched.
    """
    sections = note.sections
    eol = _eol_of(sections)
    summaries = [i for i, s in enumerate(sections) if s.kind == "overall"]
    if not summaries:
        index = len(sections)
        _ensure_blank_before(sections, index, eol)
        sections.append(Section("overall", [f"## Overall Summary{eol}"], 0))
        summaries = [index]
    if len(summaries) > 1:
        _merge_summaries(sections, summaries)
        summaries = [i for i, s in enumerate(sections) if s.kind == "overall"]
    section = sections[summaries[0]]
    for name, value in (
        ("Final best round", values.final_best_round),
        ("Avg improvement", values.avg_improvement),
        ("Geomean speedup", values.geomean_speedup),
        ("Validated branches", values.validated_branches),
        ("Outcome", values.outcome),
    ):
        if section.get(name) != value:
            section.set(name, value, SUMMARY_FIELDS)
    wanted = dict(values.key_points)
    done: set[int] = set()
    stale: list[int] = []
    for index in section.point_lines():  # the engine's own points: refreshed, or dropped
        match = ENGINE_POINT_RE.search(_split_eol(section.lines[index])[0])
        if match is None:
            continue  # a person's point: never touched
        number = int(match.group(1))
        if number in wanted and number not in done:
            section.replace_point(index, f"{wanted[number]} (round {number})")
            done.add(number)
        else:
            stale.append(index)
    for index in reversed(stale):
        del section.lines[index]
    existing = section.key_points()
    for number, point in values.key_points:
        tag = f"(round {number})"
        if number in done or any(tag in p.lower().replace("round-", "round ") for p in existing):
            continue
        section.add_key_point(f"{point} {tag}")
        existing.append(f"{point} {tag}")


def _merge_summaries(sections: list[Section], indexes: list[int]) -> None:
    first = sections[indexes[0]]
    merged = list(first.lines)
    first_fields = set(first.field_lines())
    seen_points = set(p.strip().lower() for p in first.key_points())
    for i in indexes[1:]:
        other = sections[i]
        fields = other.field_lines()
        skip: set[int] = set()
        for name, idx in fields.items():
            if name == "Key optimization points":
                end = other.points_end(idx)
                skip.update(range(idx, end))
                for p in other.key_points():
                    if p.strip().lower() not in seen_points:
                        seen_points.add(p.strip().lower())
                        merged_section = Section("overall", merged, 0)
                        merged_section.add_key_point(_strip_number(p))
                        merged = merged_section.lines
            elif name in first_fields:
                skip.add(idx)
        for j, line in enumerate(other.lines[1:], start=1):
            if j in skip:
                continue
            merged_section = Section("overall", merged, 0)
            body = _split_eol(line)[0]
            match = _SUMMARY_FIELD_RE.match(body)
            if match and _canonical(match.group("key"), SUMMARY_FIELDS) not in merged_section.field_lines():
                merged_section.set(_canonical(match.group("key"), SUMMARY_FIELDS), match.group("value"), SUMMARY_FIELDS)
                merged = merged_section.lines
                continue
            if not _split_eol(merged[-1])[1]:
                merged[-1] += "\n"
            merged.append(line)
    last_index = indexes[-1]
    result = Section("overall", merged, first.start_line)
    for i in reversed(indexes):
        del sections[i]
    insert_at = last_index - (len(indexes) - 1)
    sections.insert(insert_at, result)
    # A removed summary may have left two blank runs touching; that is harmless text.


def _strip_number(point: str) -> str:
    return re.sub(r"^\s*(?:[-*+]|[0-9]+[.)])\s+", "", point)


# ---------------------------------------------------------------------------- result numbers

_GEOMEAN_RE = re.compile(r"geomean(?:\s+speedup)?\s*[:=]?\s*([0-9]+(?:\.[0-9]+)?)\s*x", re.IGNORECASE)
_AVG_RE = re.compile(r"avg(?:\s+improvement)?\s*[:=]?\s*([+-]?[0-9]+(?:\.[0-9]+)?)\s*%", re.IGNORECASE)


def parse_result_numbers(text: str | None) -> tuple[float | None, float | None]:
    """(geomean speedup, avg improvement %) written in a ``Result:`` line, when present."""
    if not text:
        return None, None
    geo = _GEOMEAN_RE.search(text)
    avg = _AVG_RE.search(text)
    return (float(geo.group(1)) if geo else None, float(avg.group(1)) if avg else None)


def parse_speedup_text(text: str | None) -> float | None:
    """``1.23x`` → 1.23 (the Overall Summary's ``Geomean speedup:`` value)."""
    if not text:
        return None
    match = re.search(r"([0-9]+(?:\.[0-9]+)?)\s*x", text)
    return float(match.group(1)) if match else None


def parse_pct_text(text: str | None) -> float | None:
    """``+13.7%`` → 13.7."""
    if not text:
        return None
    match = re.search(r"([+-]?[0-9]+(?:\.[0-9]+)?)\s*%", text)
    return float(match.group(1)) if match else None
