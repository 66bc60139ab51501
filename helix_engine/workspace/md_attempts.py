"""attempts.md records: the script-written ``## State Update`` blocks and the analysis-ladder
lines (``Primary analysis level:``, ``Supporting evidence:``, ``Escalation: a -> b``,
``Escalation reason:``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ------------------------------------------------------------------- attempts.md State Update


_STATE_UPDATE_RE = re.compile(r"^##\s+State Update\s+(\S.*?)\s*$")
_BULLET_RE = re.compile(r"^-\s+([A-Za-z][A-Za-z ]*?):\s?(.*)$")


@dataclass
class StateUpdate:
    """One ``## State Update <ts>`` block of attempts.md."""

    timestamp: str
    source: str | None = None
    round_strategy: str | None = None
    analysis_policy: str | None = None
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    previous_round_strategy: str | None = None
    previous_analysis_policy: str | None = None
    line: int = 0


def render_state_update(update: StateUpdate) -> str:
    """The block exactly as upstream writes it (``old -> new`` when a previous value is set)."""
    lines = [f"## State Update {update.timestamp}", f"- Source: {update.source}"]
    if update.previous_round_strategy is None and update.previous_analysis_policy is None:
        lines.append(f"- Round strategy: {update.round_strategy}")
        lines.append(f"- Analysis policy: {update.analysis_policy}")
    else:
        lines.append(f"- Round strategy: {update.previous_round_strategy} -> {update.round_strategy}")
        lines.append(f"- Analysis policy: {update.previous_analysis_policy} -> {update.analysis_policy}")
    lines.append(f"- Reason: {update.reason}")
    lines.extend(f"- Warning: {w}" for w in update.warnings)
    return "\n".join(lines) + "\n"


def state_update_append_text(existing: str, update: StateUpdate) -> str:
    """What to append to a file holding ``existing`` so the block stands on its own lines."""
    separator = ""
    if existing:
        separator = "\n" if existing.endswith("\n") else "\n\n"
    return separator + render_state_update(update)


def parse_state_updates(text: str) -> list[StateUpdate]:
    """Every ``## State Update`` block, in file order (text between blocks is ignored)."""
    updates: list[StateUpdate] = []
    current: StateUpdate | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        heading = _STATE_UPDATE_RE.match(raw)
        if heading:
            current = StateUpdate(timestamp=heading.group(1), line=number)
            updates.append(current)
            continue
        if current is None:
            continue
        bullet = _BULLET_RE.match(raw)
        if not bullet:
            current = None  # the block ends at the first line that is not a bullet
            continue
        key, value = bullet.group(1).strip().lower(), bullet.group(2).strip()
        if key == "source":
            current.source = value
        elif key in ("round strategy", "analysis policy"):
            old, arrow, new = value.partition(" -> ")
            prev, now = (old, new) if arrow else (None, value)
            if key == "round strategy":
                current.previous_round_strategy, current.round_strategy = prev, now
            else:
                current.previous_analysis_policy, current.analysis_policy = prev, now
        elif key == "reason":
            current.reason = value
        elif key == "warning":
            current.warnings.append(value)
    return updates


# ------------------------------------------------------------------ analysis level / escalation


_LEVEL_RE = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*)?(Primary analysis level|Supporting evidence|Escalation reason|Escalation)"
    r"(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*(.*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class AnalysisLines:
    """The analysis-ladder lines of attempts.md / summary.md (all occurrences, in order)."""

    primary_levels: list[tuple[int, str]] = field(default_factory=list)
    supporting_evidence: list[tuple[int, str]] = field(default_factory=list)
    escalations: list[tuple[int, str, str]] = field(default_factory=list)  # (line, from, to)
    escalation_reasons: list[tuple[int, str]] = field(default_factory=list)

    @property
    def primary_level(self) -> str | None:
        return self.primary_levels[0][1] if self.primary_levels else None

    @property
    def final_level(self) -> str | None:
        if self.escalations:
            return self.escalations[-1][2]
        return self.primary_level


def parse_analysis_lines(text: str) -> AnalysisLines:
    """Find ``Primary analysis level:``, ``Supporting evidence:``, ``Escalation: a -> b`` and
    ``Escalation reason:`` lines anywhere in the text."""
    found = AnalysisLines()
    for match in _LEVEL_RE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        key, value = match.group(1).lower(), match.group(2)
        if key == "primary analysis level":
            found.primary_levels.append((line, value))
        elif key == "supporting evidence":
            found.supporting_evidence.append((line, value))
        elif key == "escalation reason":
            found.escalation_reasons.append((line, value))
        else:
            old, arrow, new = value.partition("->")
            if arrow:
                found.escalations.append((line, old.strip(), new.strip()))
            else:
                found.escalations.append((line, "", value.strip()))
    return found


def render_analysis_lines(primary_level: str, supporting_evidence: str,
                          escalation: tuple[str, str] | None = None, reason: str | None = None) -> str:
    """The lines an attempts.md entry uses to record its analysis depth."""
    lines = [f"Primary analysis level: {primary_level}", f"Supporting evidence: {supporting_evidence}"]
    if escalation is not None:
        lines.append(f"Escalation: {escalation[0]} -> {escalation[1]}")
        lines.append(f"Escalation reason: {reason or ''}".rstrip())
    return "\n".join(lines) + "\n"
