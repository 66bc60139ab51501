"""Parent side of an eval job: write the request, run the worker as a job, read the result.

Every eval command goes through ``run_worker`` so the child is registered under the
workspace's ``.helix/jobs/`` (any other helix process sees live per-case progress) and the
round timing log is kept while a round is active. Never imports torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from helix_engine.cluster import cluster_address
from helix_engine.errors import HelixError
from helix_engine.workspace import layout
from helix_engine.workspace.files import append_text, atomic_write_json
from helix_engine.workspace.reading import open_workspace_file, read_json_object

OUTPUT_TAIL_CHARS = 12000


@dataclass
class WorkerRun:
    job: Any  # helix_engine.jobs.registry.JobInfo
    result: dict[str, Any] | None
    output: str
    job_dir: Path
    #: "warm" when the warm worker's fork ran it (eval/warm.py), else "cold"; ``worker_note`` says why
    worker: str = "cold"
    worker_note: str = ""

    @property
    def finished_cleanly(self) -> bool:
        return self.result is not None and self.job.status in ("passed", "failed")

    def failure_text(self) -> str:
        """Why the job produced no usable result (timeout, crash, memory), in one sentence."""
        if self.result is not None and self.result.get("error"):
            return str(self.result["error"])
        return self.job.message or f"the worker ended with status {self.job.status}"


def round_name_of(path: Path) -> str | None:
    folder = Path(path).resolve().parent
    if folder.name == layout.BASELINE_DIR:
        return layout.BASELINE_DIR
    if layout.round_number(folder.name) is not None:
        return folder.name
    return None


def resolve_backend(name: str | None) -> Any:
    from helix_engine.eval.backends import select_backend

    return select_backend(name)


def bench_mode_for(backend: Any, mode: str | None) -> str:
    if mode == "standalone":  # legacy upstream name
        mode = "torch-npu-profiler"
    mode = backend.check_bench_mode(mode)
    backend.l2_for(mode)  # a cache state this mode cannot measure in is refused before any job starts
    return mode


def run_child_job(
    ws: Path,
    kind: str,
    module: str,
    request: dict[str, Any],
    *,
    backend: Any,
    cwd: Path,
    device_pool: list[str] | None = None,
    round_name: str | None = None,
    env: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    extra_argv: list[str] | None = None,
    output_tail_chars: int = OUTPUT_TAIL_CHARS,
    warm: bool = False,
) -> WorkerRun:
    """Write ``request`` (+ backend, device_str, result_path), run ``python -m <module>
    request.json`` as a job of ``ws`` and read back its result and output tail. Every child
    (eval, profile, IR) starts here. ``warm``: let the workspace's warm worker run it when one
    matches this job (eval/warm.py; probes only), else cold as always."""
    from helix_engine.jobs.registry import job_dir
    from helix_engine.jobs.runner import run_job

    ws = Path(ws)
    tmp = ws / layout.HELIX_DIR / "tmp" / f"{kind}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir(parents=True, exist_ok=True)
    request = dict(request, backend=backend.name, device_str=backend.device_str,
                   result_path=str(tmp / "result.json"))
    if isinstance(request.get("bench_mode"), str):  # the cache state is part of what is measured
        request.setdefault("l2", backend.l2_for(request["bench_mode"]))
    request_path = tmp / "request.json"
    python = os.environ.get("HELIX_PYTHON") or sys.executable
    argv = [python, "-m", module, str(request_path), *(extra_argv or [])]
    worker, note = "cold", ""
    if warm and not cluster_address():
        from helix_engine.eval import warm as warm_worker
        from helix_engine.jobs.settings import child_environment

        sock, note = warm_worker.usable(ws, backend.name, child_environment(backend, None, env, tmp), python)
        if sock is not None:
            worker = "warm"
            argv = [python, "-m", "helix_engine.eval.warmclient", str(sock), module, str(request_path),
                    *(extra_argv or [])]
    try:
        atomic_write_json(request_path, request)
        if cluster_address():  # the same job, run by a node of the Ray cluster (helix_engine/cluster/)
            from helix_engine.cluster.dispatch import run_cluster_job

            job = run_cluster_job(ws, kind, module, request, argv=argv, backend=backend, cwd=cwd,
                                  round_name=round_name, env=env, on_event=on_event, timeout_s=timeout_s,
                                  extra_argv=extra_argv, device_pool=device_pool)
        else:
            job = run_job(ws, kind, argv, round_name=round_name, cwd=cwd, env=env, timeout_s=timeout_s,
                          device_pool=device_pool, backend=backend, on_event=on_event, expect_result=True)
        folder = job_dir(ws, job.id)
        result = None
        with contextlib.suppress(OSError, ValueError):
            result = json.loads((tmp / "result.json").read_text(encoding="utf-8"))
        output = ""
        with contextlib.suppress(OSError), open_workspace_file(folder / "output.log", ws) as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - 4 * output_tail_chars))
            output = log.read().decode("utf-8", errors="replace")[-output_tail_chars:]
        if isinstance(result, dict) and isinstance(result.get("user_code_error"), dict):
            from helix_engine.eval.usercode import UserCodeError

            raise UserCodeError.from_json(result["user_code_error"])  # the job keeps output.log
        return WorkerRun(job, result, output, folder, worker, note)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_worker(
    ws: Path,
    kind: str,
    request: dict[str, Any],
    *,
    backend: Any,
    cwd: Path,
    device_pool: list[str] | None = None,
    round_name: str | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    warm: bool = False,
) -> WorkerRun:
    """Run ``python -m helix_engine.eval.worker`` on ``request`` as a job of ``ws`` (``warm``: see
    run_child_job)."""
    # informational (the worker ignores them): lets `helix jobs` and the cockpit show what runs
    shown = ["--operator", str(request.get("operator_file", "")), "--mode",
             str(request.get("bench_mode") or request.get("test_mode") or request.get("action"))]
    return run_child_job(ws, kind, "helix_engine.eval.worker", request, backend=backend, cwd=cwd,
                         device_pool=device_pool, round_name=round_name, on_event=on_event,
                         timeout_s=timeout_s, extra_argv=shown, warm=warm)


def finished_records(run: WorkerRun) -> list[dict[str, Any]]:
    """Records of the cases that finished before a job died (from its events.jsonl)."""
    from helix_engine.jobs.registry import iter_events

    return [e["record"] for e in iter_events(run.job_dir)
            if e.get("event") == "case_finished" and isinstance(e.get("record"), dict)]


# ----------------------------------------------------------------------------- round timing


def _active_round(ws: Path) -> tuple[int, str] | None:
    path = Path(ws) / layout.HELIX_DIR / layout.WORKFLOW_STATE
    data, _ = read_json_object(path, ws, what="workflow state", fix="")
    if not isinstance(data, dict) or data.get("phase") != "round_active":
        return None
    current = data.get("current_round")
    if not isinstance(current, int):
        return None
    return current, str(data.get("run_id") or "")


@contextlib.contextmanager
def round_timing(ws: Path, prefix: str) -> Iterator[None]:
    """Append ``<prefix>_start``/``<prefix>_end`` to .helix/round-timings/opt-round-N.jsonl
    while a round is active (upstream's optimize timing log)."""
    active = _active_round(ws)
    if active is None:
        yield
        return
    number, run_id = active
    path = Path(ws) / layout.HELIX_DIR / layout.ROUND_TIMINGS_DIR / f"{layout.round_dir_name(number)}.jsonl"

    def emit(event: str, **extra: Any) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        obj = {"event": event, "timestamp": stamp, "run_id": run_id, "round": number, **extra}
        with contextlib.suppress(OSError):
            append_text(path, json.dumps(obj) + "\n")

    emit(f"{prefix}_start")
    start = time.monotonic()
    status = "error"
    try:
        yield
        status = "done"
    finally:
        emit(f"{prefix}_end", status=status, seconds=round(time.monotonic() - start, 3))


def check_file(path: Path | str | None, what: str, flag: str) -> Path:
    if path is None:
        raise HelixError(f"{flag} is required: give the {what}")
    p = Path(path).expanduser()
    if not p.is_file():
        raise HelixError(f"{what} {p} does not exist; check {flag}")
    return p.resolve()


def resolve_bench_inputs(operator_file: Path | str | None, bench_file: Path | str | None) -> tuple[Path, Path]:
    """The operator file and its bench harness (given, else found beside it / in the workspace),
    both checked to exist. run-bench, probe-bench's candidate, profile-bench and ir capture."""
    from helix_engine.eval.discovery import find_bench_file

    op = check_file(operator_file, "operator file", "--operator-file")
    bench = check_file(bench_file, "bench file", "--bench-file") if bench_file else find_bench_file(op)
    return op, bench
