"""Checked reads of the small JSON files of a workspace (state.json, round-state.json …).

Each read returns a value *and* problems: a missing, huge, binary, non-UTF-8, truncated or
wrongly typed file becomes a Problem naming the file (and the line, for JSON syntax errors)
with a sentence saying what to do. Nothing here raises on file content.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from helix_engine.workspace.files import MAX_TEXT_BYTES, read_text_checked
from helix_engine.workspace.models import PerfRecord, Problem

#: JSON state files are a few hundred bytes; anything over this is not a state file.
MAX_JSON_BYTES = 1024 * 1024

M = TypeVar("M", bound=BaseModel)


_SESSION = threading.local()  # .roots: workspace abspath -> realpath, during one load (per thread)


@contextlib.contextmanager
def load_session() -> Iterator[None]:
    """Resolve each workspace root once for the duration of one load or reload (hot path:
    every declared path and every read checks it stays inside the workspace)."""
    outer = getattr(_SESSION, "roots", None)
    _SESSION.roots = {} if outer is None else outer
    try:
        yield
    finally:
        _SESSION.roots = outer


def root_real(workspace: Path) -> str:
    key = os.path.abspath(workspace)
    roots: dict[str, str] | None = getattr(_SESSION, "roots", None)
    if roots is None:
        return os.path.realpath(key)
    found = roots.get(key)
    if found is None:
        found = roots[key] = os.path.realpath(key)
    return found


def inside(path: Path, workspace: Path) -> bool:
    """True when ``path`` (symlinks followed) lies inside ``workspace``; raises on symlink loops
    like ``Path.resolve`` does (callers turn that into a Problem)."""
    root = root_real(workspace)
    real = os.path.realpath(path, strict=False)
    if os.path.islink(real):  # realpath stops on a link only when the links loop
        raise OSError(f"symlink loop at {real}")
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        return False
    return True


def shown(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace when it lies inside it (for Problem.file)."""
    full, root = os.path.abspath(path), os.path.abspath(workspace)
    if full.startswith(root.rstrip(os.sep) + os.sep):
        return full[len(root.rstrip(os.sep)) + 1:]
    return str(path)


def read_text_safe(path: Path, workspace: Path, *,
                   max_bytes: int = MAX_TEXT_BYTES) -> tuple[str | None, Problem | None]:
    """`files.read_text_checked` with the workspace check done once per root, plus symlink
    loops as a Problem instead of an exception."""
    name = shown(path, workspace)
    try:
        if not inside(path, workspace):
            return None, Problem(name, "points outside the workspace (through a symlink); it was not "
                                 "read. Copy the file into the workspace instead.")
        text, problem = read_text_checked(path, None, max_bytes=max_bytes)
    except (RuntimeError, OSError, ValueError) as exc:
        return None, Problem(name, f"cannot be read ({exc}); replace it with a regular file")
    if problem is not None:
        problem = Problem(name, problem.message, problem.line, problem.severity)
    return text, problem


def read_perf_safe(path: Path, workspace: Path) -> tuple[list[PerfRecord], list[Problem]]:
    """Read a perf file (``perf.artifact.parse_perf_text``); never raises."""
    from helix_engine.perf.artifact import parse_perf_text

    text, problem = read_text_safe(path, workspace)
    if problem is not None:
        return [], [problem]
    return parse_perf_text(text or "", shown(path, workspace))


def read_json_object(path: Path, workspace: Path, *, what: str, fix: str,
                     max_bytes: int = MAX_JSON_BYTES) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Read a JSON object file. ``what`` names it in messages; ``fix`` says how to repair it."""
    text, problem = read_text_safe(path, workspace, max_bytes=max_bytes)
    if problem is not None:
        return None, [Problem(problem.file, f"{problem.message} ({what}); {fix}", problem.line, problem.severity)]
    assert text is not None
    name = shown(path, workspace)
    if not text.strip():
        return None, [Problem(name, f"is empty, expected {what}; {fix}")]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [Problem(name, f"is not valid JSON ({exc.msg}, column {exc.colno}); {fix}", exc.lineno)]
    except (RecursionError, ValueError) as exc:
        return None, [Problem(name, f"is not valid JSON ({exc}); {fix}")]
    if not isinstance(data, dict):
        return None, [Problem(name, f"holds a JSON {type(data).__name__}, expected an object ({what}); {fix}")]
    return data, []


def describe_validation(exc: ValidationError, limit: int = 3) -> str:
    """The first few field errors of a pydantic error, as one readable clause."""
    parts: list[str] = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "missing":
            parts.append(f"{loc} is missing")
        elif loc:
            parts.append(f"{loc}: {msg}")
        else:
            parts.append(msg)
    extra = exc.error_count() - limit
    if extra > 0:
        parts.append(f"and {extra} more")
    return "; ".join(parts)


def load_model(path: Path, workspace: Path, model: type[M], *, what: str,
               fix: str) -> tuple[M | None, dict[str, Any] | None, list[Problem]]:
    """Read ``path`` and validate it as ``model``: (model or None, raw dict or None, problems)."""
    data, problems = read_json_object(path, workspace, what=what, fix=fix)
    if data is None:
        return None, None, problems
    try:
        return model.model_validate(data), data, []
    except ValidationError as exc:
        message = f"is not a valid {what} ({describe_validation(exc)}); {fix}"
        return None, data, [Problem(shown(path, workspace), message)]
    except (ValueError, TypeError, RecursionError) as exc:  # odd nested values
        return None, data, [Problem(shown(path, workspace), f"is not a valid {what} ({exc}); {fix}")]


def exists_file(path: Path) -> bool:
    """``is_file`` that never raises (permission errors, over-long names …)."""
    try:
        return path.is_file()
    except OSError:
        return False


def exists_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def list_dir(path: Path) -> list[Path]:
    """Sorted entries of a folder, or [] when it cannot be listed."""
    try:
        return sorted(path.iterdir())
    except OSError:
        return []
