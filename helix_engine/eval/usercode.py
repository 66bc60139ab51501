"""User code that fails: a file that does not import (syntax error, missing module, exception
at import), and a case that raises (each distinct traceback printed once, user frames only).

The child raises ``UserCodeError`` where it imports user code, prints only the user's part
of the traceback into the job's output.log, and sends the error back in the result JSON;
the parent re-raises it, and every eval/profile command prints one sentence that names the
file and line (``FAIL: opt-round-1/opt_softmax.py:12: SyntaxError: invalid syntax — fix the
operator and run again``) instead of a traceback through helix's own frames.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.loader import HarnessContractError

_HELIX_ROOT = str(Path(__file__).resolve().parents[2])
_HELIX_PACKAGES = tuple(str(Path(_HELIX_ROOT) / p) for p in ("helix_engine", "helix_tui"))


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib", "platlib")
                         if paths.get(k)}))


def _is_user_frame(filename: str) -> bool:
    """Not helix's own code, not importlib's frozen frames, not the stdlib or an installed package."""
    if not filename or filename.startswith("<"):
        return False
    try:
        resolved = str(Path(filename).resolve())
    except OSError:
        return False
    return not resolved.startswith(_HELIX_PACKAGES) and not resolved.startswith(_library_dirs())


def display_path(path: Path | str) -> str:
    """``opt-round-1/opt_softmax.py`` (relative to the workspace), else relative to the
    current directory, else the absolute path."""
    from helix_engine.workspace import layout

    p = Path(path).resolve()
    for root in (layout.workspace_of(p), Path.cwd().resolve()):
        try:
            return p.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(p)


class UserCodeError(HarnessContractError):
    """A user file failed to import; ``str()`` is the sentence to show, with file and line."""

    def __init__(self, file: Path | str, line: int | None, error: str, user_traceback: str = "",
                 what: str = "the operator") -> None:
        self.file, self.hook = str(file), "import"
        self.line, self.error, self.user_traceback, self.what = line, error, user_traceback, what
        where = display_path(file) + (f":{line}" if line else "")
        HelixError.__init__(self, f"{where}: {error} — fix {what} and run again")

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "error": self.error, "what": self.what,
                "user_traceback": self.user_traceback}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserCodeError:
        line = data.get("line")
        return cls(str(data.get("file") or "?"), line if isinstance(line, int) else None,
                   str(data.get("error") or "error"), str(data.get("user_traceback") or ""),
                   str(data.get("what") or "the operator"))

    @classmethod
    def from_exception_text(cls, data: dict[str, Any], copy: Path, original: Path) -> UserCodeError:
        """An error raised importing a private copy of ``original`` (gate/opclient.py), named by
        the original file (its display path replaces the copy's wherever it appears)."""
        shown = display_path(original)

        def fix(value: Any) -> Any:
            return value.replace(str(copy), shown) if isinstance(value, str) else value

        same = str(data.get("file") or "") == str(copy)
        data = {k: fix(v) for k, v in data.items()}
        if same:
            data["file"] = str(original)
        return cls.from_json(data)

    @classmethod
    def from_exception(cls, exc: BaseException, imported: Path | str) -> UserCodeError:
        """File and line: a SyntaxError's own (it may be a module the file imports), else the
        innermost frame of user code, else the imported file."""
        imported = Path(imported).resolve()
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_user_frame(f.filename)]
        file: Path | str = imported
        line: int | None = None
        if isinstance(exc, SyntaxError) and exc.filename and not str(exc.filename).startswith("<"):
            file, line = exc.filename, exc.lineno
        elif frames:
            file, line = frames[-1].filename, frames[-1].lineno
        harness = Path(file).name.startswith(("bench_", "test_", "differential_test_"))
        what = "the harness" if harness else "the operator"
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        error = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        return cls(file, line, with_hint(error), user_traceback(exc), what)


#: Errors whose text does not say what to do, and the sentence that does: (words in the error, hint).
_HINTS = (
    ("active drivers", "Triton's autotuner times its configs on a GPU or NPU driver, and the CPU interpreter "
                       "(TRITON_INTERPRET=1) has none: run on --backend cuda or npu, or give the kernel one config "
                       "when TRITON_INTERPRET is set (the interpreter checks correctness; it cannot tune)"),
)


def hint_for(error: str) -> str | None:
    """For an error known not to say what to do, the sentence that does."""
    return next((hint for words, hint in _HINTS if words in error), None)


def with_hint(error: str) -> str:
    """``error`` and, where ``hint_for`` has one, its hint."""
    hint = hint_for(error)
    return f"{error} ({hint})" if hint and hint not in error else error


def user_traceback(exc: BaseException) -> str:
    """The traceback with helix's, importlib's and libraries' frames dropped (the part a user
    can act on), also in chained exceptions; a SyntaxError keeps its caret lines.
    ``HELIX_DEBUG=1`` keeps every frame (for a bug in helix itself)."""
    tb = traceback.TracebackException.from_exception(exc)
    if os.environ.get("HELIX_DEBUG", "").lower() in ("1", "true"):
        return "".join(tb.format())
    pending, seen = [tb], set()
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        part.stack = traceback.StackSummary.from_list([f for f in part.stack if _is_user_frame(f.filename)])
        pending += [p for p in (part.__cause__, part.__context__) if p is not None]
        pending += list(getattr(part, "exceptions", None) or [])
    return "".join(tb.format())


class CaseFailures:
    """Prints each distinct user traceback of a job's failing cases once.

    Why: an operator that raises fails every case the same way; N copies of one traceback
    bury everything else. A case whose traceback was already printed gets one line naming
    the case that printed it.
    """

    def __init__(self) -> None:
        self.first: dict[str, str] = {}  # traceback text → the case that printed it

    def report(self, case_id: str, exc: BaseException) -> None:
        text = user_traceback(exc)
        first = self.first.get(text)
        if first is None:
            self.first[text] = case_id
            sys.stderr.write(f"case {case_id} failed:\n{text}")
        else:
            sys.stderr.write(f"case {case_id} failed with the same error as case {first} (traceback above)\n")
        sys.stderr.flush()


def group_case_errors(errors: list[tuple[str, str]]) -> list[str]:
    """``[(case, error)]`` → one line per distinct error: ``error (the same error in cases a, b)``
    when several cases share it, else ``case: error``; in first-seen order."""
    cases: dict[str, list[str]] = {}
    for case, error in errors:
        cases.setdefault(with_hint(error), []).append(case)
    return [f"{error} (the same error in cases {', '.join(ids)})" if len(ids) > 1 else f"{ids[0]}: {error}"
            for error, ids in cases.items()]
