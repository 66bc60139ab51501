"""What every job child (the eval, profile and IR workers) does around its own work.

Read the request named on the command line, set the environment upstream sets and import
torch through the backend adapter, load one bench case, talk to the job's events.jsonl,
and write the result JSON. One implementation, so the three workers cannot drift apart.
It lives in eval/ because it needs the backends and the harness loader (jobs/ must not
import eval/).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMPAT_DIR = Path(__file__).resolve().parent / "compat"


class JobEvents:
    """The job's EventWriter when inside a job, else a no-op (workers also run by hand)."""

    def __init__(self) -> None:
        from helix_engine.jobs.events import EventWriter

        self.writer = EventWriter.from_env()

    def __getattr__(self, name: str) -> Any:
        if self.writer is None:
            return lambda *a, **k: None
        return getattr(self.writer, name)


def read_request(path: Path) -> dict[str, Any]:
    """The request JSON the parent wrote for this child."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Atomically write the result JSON the parent reads (non-JSON values become strings)."""
    from helix_engine.workspace.files import atomic_write_text

    sys.stdout.flush()
    atomic_write_text(Path(path), json.dumps(result, default=str, ensure_ascii=False) + "\n")


def setup_backend(request: dict[str, Any]) -> Any:
    """Environment as upstream sets it, then the backend adapter (imports torch)."""
    os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")
    if os.environ.get("TRITON_ALL_BLOCKS_PARALLEL") == "1":
        os.environ["TRITON_ALL_BLOCKS_PARALLEL"] = "0"
    name = request.get("backend") or "cpu"
    os.environ["HELIX_DEVICE"] = request.get("device_str") or name
    if name == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    if name == "npu":
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    if str(COMPAT_DIR) not in sys.path:
        sys.path.append(str(COMPAT_DIR))
    from helix_engine.eval.backends import get_backend

    backend = get_backend(name)
    backend.import_torch()
    backend.l2 = str(request.get("l2") or "warm")  # what the parent resolved (eval/jobrun.py)
    return backend


def load_case(request: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(harness, case, closure) for the requested ``case_id`` (the first case when none)."""
    from helix_engine.errors import HelixError
    from helix_engine.eval.loader import load_bench_harness

    harness = load_bench_harness(Path(request["bench_file"]), Path(request["operator_file"]))
    wanted = request.get("case_id")
    case = harness.cases[0] if not wanted else next((c for c in harness.cases if c.id == wanted), None)
    if case is None:
        ids = ", ".join(c.id for c in harness.cases)
        raise HelixError(f"case {wanted!r} is not in {harness.bench_file.name}; the cases are: {ids}")
    return harness, case, harness.build_fn(case)


def run_contained(main: Callable[[], int]) -> int:
    """Run a worker's ``main`` as a child subreaper and end whatever it started before it exits.

    Why: an operator may start processes that setsid() and whose parent dies at once; as a
    subreaper the worker adopts them, so they stay its descendants (which the supervisor's
    scans see, jobs/tree.py) and are ended here when the job's work is done, also after a
    sys.exit() in user code.
    """
    from helix_engine.jobs.procs import become_subreaper
    from helix_engine.jobs.tree import JobTree

    become_subreaper()
    try:
        return main()
    finally:
        sys.stdout.flush()
        JobTree(os.getpid(), None).terminate(1.0)  # its descendants (complete: it is their subreaper)


def child_main(argv: list[str] | None, usage: str, run: Callable[[dict[str, Any]], dict[str, Any]],
               failed: Callable[[dict[str, Any], str], dict[str, Any]]) -> int:
    """``python -m <worker> REQUEST.json``: run, write the result, exit with its return_code.

    An exception from user code is printed (the job's output.log keeps it) and becomes
    ``failed(request, "Type: message")``, a result with ``return_code`` 1. The job's final
    ``result`` event says the work is done (a job that ends without one exited early).
    """
    return run_contained(lambda: _child_main(argv, usage, run, failed))


def _child_main(argv: list[str] | None, usage: str, run: Callable[[dict[str, Any]], dict[str, Any]],
                failed: Callable[[dict[str, Any], str], dict[str, Any]]) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    request = read_request(Path(args[0]))
    from helix_engine.eval.usercode import UserCodeError, user_traceback

    try:
        result = run(request)
    except UserCodeError as exc:  # the user's frames only, and the sentence the parent shows
        sys.stderr.write(exc.user_traceback)
        print(f"FAIL: {exc}", file=sys.stderr)
        result = dict(failed(request, str(exc)), user_code_error=exc.to_json())
    except Exception as exc:  # noqa: BLE001 - user code: report, never hide
        sys.stderr.write(user_traceback(exc))  # the user's frames only (HELIX_DEBUG=1: all)
        result = failed(request, f"{type(exc).__name__}: {exc}")
    write_result(Path(request["result_path"]), result)
    rc = int(result["return_code"])
    summary: dict[str, Any] = {"return_code": rc}
    if rc != 0:
        summary["failure"] = str(result.get("error") or f"the worker's work failed (return code {rc})")
    JobEvents().result(summary)
    return rc
