"""The best round opt-note.md logs (spec upstream-state §5): the Overall Summary's ``Final best
round:``, else the last ``Best status: current best`` entry, and the logged ``Geomean speedup:``
text; and upstream's warning when the computed best differs from it.
"""

from __future__ import annotations

import re
from typing import Any

from helix_engine.record import record

BEST_MISMATCH_PREFIX = "numeric best round != logged best"
LOGGED_DISAGREE = "overall summary best round differs from legacy current best marker"
_LOGGED_PATTERNS = (r"round-(\d+)", r"round\s+(\d+)", r"opt-round-(\d+)")


def normalize_logged_round(text: str | None) -> str | None:
    """Upstream's reading of ``Final best round:``: round-N, "round N" or opt-round-N."""
    if not text:
        return None
    value = text.strip()
    for pattern in _LOGGED_PATTERNS:
        match = re.fullmatch(pattern, value, flags=re.IGNORECASE)
        if match:
            return f"round-{int(match.group(1))}"
    return None


@record
class LoggedBest:
    summary_best: str | None
    marker_best: str | None
    geomean_text: str | None

    @property
    def value(self) -> str | None:
        return self.summary_best or self.marker_best

    @property
    def disagree(self) -> bool:
        return bool(self.summary_best and self.marker_best and self.summary_best != self.marker_best)


def logged_best_from_note(note: Any) -> LoggedBest:
    """From a parsed OptNote: Overall Summary ``Final best round:`` else the last
    ``Best status: current best`` round; plus the logged ``Geomean speedup:`` text. The last
    note's answer is kept (a reload that did not read opt-note.md again has the same note)."""
    if note is None:
        return LoggedBest(None, None, None)
    global _LOGGED
    kept = _LOGGED  # one read: another thread may replace it meanwhile
    if kept[0] is note:
        return kept[1]
    found = _logged_best(note)
    _LOGGED = (note, found)
    return found


_LOGGED: tuple[Any, Any] = (None, None)  # the last note asked about and its LoggedBest


def _logged_best(note: Any) -> LoggedBest:
    marker: str | None = None
    for entry in getattr(note, "rounds", []) or []:
        status = getattr(entry, "best_status", None)
        if status and "current best" in status.lower():
            marker = f"round-{entry.number}"
    geomean = getattr(note, "geomean_text", None)
    geomean = geomean.strip() if isinstance(geomean, str) and geomean.strip() else None
    return LoggedBest(normalize_logged_round(getattr(note, "final_best_round", None)), marker, geomean)


def best_mismatch_warning(computed_geomean: float, logged_geomean_text: str | None) -> str:
    return (f"{BEST_MISMATCH_PREFIX}. computed speedup: {computed_geomean:.2f}x; "
            f"logged speedup: {logged_geomean_text or 'missing'}")
