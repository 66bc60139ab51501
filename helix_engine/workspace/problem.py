"""``Problem``: something wrong with workspace content, as every reader reports it.

Its own module, without pydantic, so the safe reader (`reading.py`) and the stored-status
fast path (`status_cache.py`) import no model schema; `models.py` re-exports it.
"""

from __future__ import annotations

from typing import Any, Literal

Severity = Literal["error", "warning"]


class Problem:
    """Something wrong with workspace content: where, and a sentence saying what to do.

    Immutable, compared and hashed by its four fields. A plain slotted class rather than a
    dataclass: the stored-status fast path imports this module, and `dataclasses` (with the
    `inspect` it imports) was 7 ms of that 55 ms command."""

    __slots__ = ("file", "message", "line", "severity")
    __match_args__ = ("file", "message", "line", "severity")
    file: str
    message: str
    line: int | None
    severity: Severity

    def __init__(self, file: str, message: str, line: int | None = None, severity: Severity = "error") -> None:
        set_field = object.__setattr__
        set_field(self, "file", file)
        set_field(self, "message", message)
        set_field(self, "line", line)
        set_field(self, "severity", severity)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Problem is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Problem is immutable: cannot delete {name!r}")

    def _key(self) -> tuple[str, str, int | None, str]:
        return (self.file, self.message, self.line, self.severity)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Problem(file={self.file!r}, message={self.message!r}, line={self.line!r}, "
                f"severity={self.severity!r})")

    def __reduce__(self) -> tuple[type[Problem], tuple[str, str, int | None, str]]:
        return (Problem, self._key())  # pickle and copy: through __init__ (no attribute setting)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "severity": self.severity, "message": self.message}
