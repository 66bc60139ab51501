"""Every Python parse in helix holds one lock: CPython 3.11's AST constructor keeps its recursion
depth per interpreter, and two threads parsing at once (two benches started together) made one
raise ``SystemError: AST constructor recursion depth mismatch`` (seen in the cluster test)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from helix_engine import python_source

ENGINE = Path(__file__).resolve().parents[2] / "helix_engine"


def test_a_parse_waits_while_another_thread_parses() -> None:
    done = threading.Event()
    with python_source._LOCK:  # another parse in progress
        worker = threading.Thread(target=lambda: (python_source.parse("x = 1"), done.set()))
        worker.start()
        assert not done.wait(0.3)
    assert done.wait(10)
    worker.join(10)


def test_no_module_parses_python_around_the_lock() -> None:
    direct = [f"{path.relative_to(ENGINE)}:{n}" for path in ENGINE.rglob("*.py") if path.name != "python_source.py"
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\bast\.parse\(|compile\([^)]*ast\.PyCF_ONLY_AST", line)]
    assert direct == []
