"""``Problem``: something wrong with workspace content, as every reader reports it.

Its own module, without pydantic, so the safe reader (`reading.py`) and the stored-status
fast path (`status_cache.py`) import no model schema; `models.py` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Problem:
    """Something wrong with workspace content: where, and a sentence saying what to do."""

    file: str
    message: str
    line: int | None = None
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "severity": self.severity, "message": self.message}
