"""JSON text as helix reads it from a workspace: a value or a Problem, never an exception.

Why: ``json.loads`` silently keeps the last of two equal keys, so a hand-edited or merged
state file can say one thing to a person and another to helix (and other readers pick the
first). A repeated key is a Problem naming the key and its line instead.
"""

from __future__ import annotations

import json
from typing import Any

from helix_engine.sanitize import clean_name
from helix_engine.workspace.problem import Problem


class DuplicateKey(ValueError):
    """A key given twice in one JSON object (raised by `no_duplicates`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key
        self.start: int | None = None  # index just after the "{" of the object holding it


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a repeated key instead of keeping the last."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _ in pairs:  # the first key given twice, in the order written
        if key in seen:
            raise DuplicateKey(key)
        seen.add(key)
    return obj  # not reached: a shorter dict means a key was repeated


_DECODER = json.JSONDecoder(object_pairs_hook=no_duplicates)


def loads(text: str) -> Any:
    """``json.loads(text, object_pairs_hook=no_duplicates)`` with one decoder for every document
    (json.loads builds a new one per call when given a hook: a tenth of reading a perf line)."""
    if text.startswith("\ufeff"):  # json.loads' own check, with its message
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def _duplicate_line(text: str, key: str) -> int | None:
    """The line of the second ``key`` in the object that repeats it (rare path: a pure-Python
    parse to learn where that object starts, then a scan of its top level)."""
    from json.scanner import py_make_scanner  # type: ignore[attr-defined]  # pure-Python scanner, not in typeshed

    decoder = json.JSONDecoder(object_pairs_hook=no_duplicates)

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> Any:
        try:
            return json.decoder.JSONObject(s_and_end, *args)  # type: ignore[attr-defined]  # not in typeshed
        except DuplicateKey as exc:
            if exc.start is None:
                exc.start = s_and_end[1]
            raise

    decoder.parse_object = parse_object  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in typeshed
    decoder.scan_once = py_make_scanner(decoder)  # type: ignore[attr-defined]  # as parse_object
    try:
        decoder.decode(text)
    except DuplicateKey as exc:
        start = exc.start
    except (ValueError, RecursionError):
        return None
    else:
        return None
    depth, seen, i, n = 0, 0, start or 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            try:
                value, end = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]  # not in typeshed
            except ValueError:
                return None
            j = end
            while j < n and text[j] in " \t\r\n":
                j += 1
            if depth == 0 and value == key and j < n and text[j] == ":":
                seen += 1
                if seen == 2:
                    return text.count("\n", 0, i) + 1
            i = end
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            if depth == 0:
                break
            depth -= 1
        i += 1
    return None


def parse_json(text: str, name: str, fix: str = "fix it") -> tuple[Any, Problem | None]:
    """A JSON value, or a Problem: a syntax error (with its line and column), a key given twice
    in one object (which value wins differs between readers, so helix refuses to guess), or
    nesting too deep to read."""
    try:
        return loads(text), None
    except DuplicateKey as exc:
        line = _duplicate_line(text, exc.key)
        where = f" (line {line})" if line else ""
        return None, Problem(name, f"has the key {clean_name(exc.key)!r} twice in one object{where}; JSON "
                             f"readers disagree on which value counts, so keep one; {fix}", line)
    except json.JSONDecodeError as exc:
        return None, Problem(name, f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); {fix}",
                             exc.lineno)
    except (RecursionError, ValueError) as exc:
        return None, Problem(name, f"is not valid JSON ({clean_name(exc)}); {fix}")
