"""Lossless markdown sections: split a file at ``#``/``##`` headings (outside code fences) and
give the field lines (``Key: value``) of a section, so a writer can change one value in place
and leave every other byte as it was."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

ROUND_FIELDS: tuple[str, ...] = ("Parent", "Theme", "Result", "Best status", "Summary", "Attempts")
SUMMARY_FIELDS: tuple[str, ...] = (
    "Final best round",
    "Avg improvement",
    "Geomean speedup",
    "Validated branches",
    "Outcome",
    "Key optimization points",
    "Next step",
)
BEST_STATUSES: tuple[str, ...] = ("current best", "validated branch", "not promoted")
#: Lines the engine owns and refreshes from measured numbers (README "The ledger"); every other
#: line (Parent, Theme, Summary, Attempts, Next step, key points a person wrote, prose) is the
#: agent's: submit-round writes it only when it is missing.
ENGINE_ROUND_FIELDS: tuple[str, ...] = ("Result", "Best status")
ENGINE_SUMMARY_FIELDS: tuple[str, ...] = (
    "Final best round", "Avg improvement", "Geomean speedup", "Validated branches", "Outcome",
)

_HEADING_RE = re.compile(r"^#{1,2}(?!#)\s*\S")
_ROUND_RE = re.compile(r"^##\s+Round\s+([0-9]+)\s*$", re.IGNORECASE)
_OVERALL_RE = re.compile(r"^##\s+Overall\s+Summary\s*$", re.IGNORECASE)
_FENCE_RE = re.compile(r"^\s*(```|~~~)")


def fenced_lines(lines: list[str]) -> set[int]:
    """Indexes of lines inside closed code fences (fence lines included). An opening fence that
    is never closed fences nothing, so a stray ``` cannot hide the rest of the file."""
    text = "".join(lines)
    if "```" not in text and "~~~" not in text:  # the usual entry: no fence at all
        return set()
    marks = [i for i, line in enumerate(lines) if _FENCE_RE.match(line)]
    inside: set[int] = set()
    for start, end in zip(marks[0::2], marks[1::2]):
        inside.update(range(start, end + 1))
    return inside
_POINT_RE = re.compile(r"^\s+\S|^\s*(?:[-*+]|[0-9]+[.)])\s+\S")
_POINT_TEXT_RE = re.compile(r"^\s*(?:[-*+]|[0-9]+[.)])?\s*(.*?)\s*$")


def _field_re(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(
        r"^(?P<head>[ \t]*(?:[-*][ \t]+)?(?:\*\*)?(?P<key>" + alternatives + r")(?:\*\*)?[ \t]*:"
        r"(?:\*\*)?[ \t]*)(?P<value>.*?)[ \t]*$",
        re.IGNORECASE,
    )


_ROUND_FIELD_RE = _field_re(ROUND_FIELDS)
_SUMMARY_FIELD_RE = _field_re(SUMMARY_FIELDS)


def _split_eol(line: str) -> tuple[str, str]:
    last = line[-1:]
    if last == "\n":
        return (line[:-2], "\r\n") if line[-2:-1] == "\r" else (line[:-1], "\n")
    if last == "\r":
        return line[:-1], "\r"
    return line, ""


@functools.lru_cache(maxsize=256)
def _canonical(key: str, names: tuple[str, ...]) -> str:
    for name in names:
        if name.lower() == key.lower():
            return name
    return key


# --------------------------------------------------------------------------------- sections


@dataclass
class Section:
    """A run of lines: the preamble (no heading), a round entry, the summary, or other text."""

    kind: str  # "preamble" | "round" | "overall" | "other"
    lines: list[str]
    start_line: int  # 1-based line number of the first line in the source
    number: int | None = None

    def field_lines(self) -> dict[str, int]:
        """Canonical field name → index in ``lines`` of its first occurrence."""
        regex = _ROUND_FIELD_RE if self.kind == "round" else _SUMMARY_FIELD_RE
        names = ROUND_FIELDS if self.kind == "round" else SUMMARY_FIELDS
        found: dict[str, int] = {}
        fenced = fenced_lines(self.lines)
        for index, line in enumerate(self.lines[1:], start=1):
            body, _ = _split_eol(line)
            if index in fenced:
                continue
            match = regex.match(body)
            if match:
                found.setdefault(_canonical(match.group("key"), names), index)
        return found

    def values(self) -> dict[str, str | None]:
        """Every field's value (what ``get`` returns for it), from one scan of the section: the
        first unfenced line of each field, matched once (a 1000-entry ledger is parsed on every
        status)."""
        regex = _ROUND_FIELD_RE if self.kind == "round" else _SUMMARY_FIELD_RE
        names = ROUND_FIELDS if self.kind == "round" else SUMMARY_FIELDS
        out: dict[str, str | None] = {}
        fenced = fenced_lines(self.lines)
        for index, line in enumerate(self.lines[1:], start=1):
            if index in fenced:
                continue
            match = regex.match(_split_eol(line)[0])
            if match:
                name = _canonical(match.group("key"), names)
                if name not in out:
                    out[name] = match.group("value")
        return out

    def get(self, name: str) -> str | None:
        index = self.field_lines().get(name)
        if index is None:
            return None
        regex = _ROUND_FIELD_RE if self.kind == "round" else _SUMMARY_FIELD_RE
        match = regex.match(_split_eol(self.lines[index])[0])
        return match.group("value") if match else None

    def set(self, name: str, value: str, order: tuple[str, ...]) -> None:
        """Replace the value of field ``name`` in place, or insert the line after the
        nearest preceding known field (keeping ``order``)."""
        regex = _ROUND_FIELD_RE if self.kind == "round" else _SUMMARY_FIELD_RE
        fields = self.field_lines()
        eol = self._eol()
        if name in fields:
            index = fields[name]
            body, line_eol = _split_eol(self.lines[index])
            match = regex.match(body)
            assert match is not None
            self.lines[index] = match.group("head") + value + (line_eol or eol)
            return
        insert_at = 1
        position = order.index(name)
        for earlier in reversed(order[:position]):
            if earlier in fields:
                insert_at = fields[earlier] + 1
                if earlier == "Key optimization points":
                    insert_at = self.points_end(fields[earlier])
                break
        else:
            # no earlier field: put it right after the heading
            insert_at = 1
        if insert_at > 1 and not _split_eol(self.lines[insert_at - 1])[1]:
            self.lines[insert_at - 1] += eol
        self.lines.insert(insert_at, (f"{name}: {value}" if value else f"{name}:") + eol)

    def _eol(self) -> str:
        for line in self.lines:
            eol = _split_eol(line)[1]
            if eol:
                return eol
        return "\n"

    def points_end(self, key_index: int) -> int:
        """Index just past the list that follows ``Key optimization points:``."""
        index = key_index + 1
        while index < len(self.lines):
            body = _split_eol(self.lines[index])[0]
            if not body.strip() or _SUMMARY_FIELD_RE.match(body) or not _POINT_RE.match(body):
                break
            index += 1
        return index

    def key_points(self) -> list[str]:
        key_index = self.field_lines().get("Key optimization points")
        if key_index is None:
            return []
        points: list[str] = []
        inline = self.get("Key optimization points")
        if inline:
            points.append(inline)
        for line in self.lines[key_index + 1 : self.points_end(key_index)]:
            text = _POINT_TEXT_RE.match(_split_eol(line)[0])
            if text and text.group(1):
                points.append(text.group(1))
        return points

    def point_lines(self) -> list[int]:
        """Indexes in ``lines`` of the list items under ``Key optimization points:``."""
        key_index = self.field_lines().get("Key optimization points")
        if key_index is None:
            return []
        return list(range(key_index + 1, self.points_end(key_index)))

    def replace_point(self, index: int, point: str) -> None:
        """Rewrite the text of the list item at ``index``, keeping its marker and indentation."""
        body, eol = _split_eol(self.lines[index])
        match = re.match(r"^(\s*(?:[-*+]|[0-9]+[.)])?\s*)", body)
        head = match.group(1) if match else "  "
        self.lines[index] = head + point + (eol or self._eol())

    def add_key_point(self, point: str) -> None:
        """Append a numbered point under ``Key optimization points:`` (created if absent)."""
        fields = self.field_lines()
        if "Key optimization points" not in fields:
            self.set("Key optimization points", "", SUMMARY_FIELDS)
            fields = self.field_lines()
        key_index = fields["Key optimization points"]
        end = self.points_end(key_index)
        number = len(self.key_points()) + 1
        eol = self._eol()
        if not _split_eol(self.lines[end - 1])[1]:
            self.lines[end - 1] += eol
        self.lines.insert(end, f"  {number}. {point}{eol}")


def split_sections(text: str) -> list[Section]:
    """Split markdown into sections at level-1/2 headings that are not inside a code fence."""
    lines = text.splitlines(keepends=True)
    sections: list[Section] = [Section(kind="preamble", lines=[], start_line=1)]
    fenced = fenced_lines(lines)
    for number, line in enumerate(lines, start=1):
        if line[:1] != "#":  # every heading starts with one (_HEADING_RE): most lines are not looked at
            sections[-1].lines.append(line)
            continue
        body = _split_eol(line)[0]
        if number - 1 not in fenced and _HEADING_RE.match(body):
            round_match = _ROUND_RE.match(body)
            if round_match:
                sections.append(Section("round", [], number, int(round_match.group(1))))
            elif _OVERALL_RE.match(body):
                sections.append(Section("overall", [], number))
            else:
                sections.append(Section("other", [], number))
        sections[-1].lines.append(line)
    return sections


def render_sections(sections: list[Section]) -> str:
    return "".join("".join(s.lines) for s in sections)
