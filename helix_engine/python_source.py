"""Parse Python source into an AST, one thread at a time.

CPython 3.11 keeps the AST constructor's recursion depth in per-interpreter state, not per
thread: two threads parsing at once (two benches started from the cockpit or the cluster
client, each reading its operator's kernels) corrupt it and one of them raises ``SystemError:
AST constructor recursion depth mismatch`` (python/cpython#106905). Every parse in helix goes
through ``parse``, which holds one lock; parses are small and rare, so nothing waits long.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` under the process-wide parse lock."""
    with _LOCK:
        return ast.parse(source, filename=filename)
