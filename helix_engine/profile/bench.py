"""``helix profile-bench``: profile one bench case as a job, then report on it (parent side).

The run writes ``<out>/PROF_<case>_<epoch_ms>/`` (upstream's folder name; ``<out>`` defaults to
``<operator dir>/profile``) so a re-profile never overwrites the previous one, and
`build_report` on ``<out>`` picks the newest run. The child is
``python -m helix_engine.profile.worker`` under `jobs.runner.run_job` (kind ``profile``), so
every helix process sees it in ``.helix/jobs/`` and a crash or hang in user code ends the job,
not helix. Time limit: ``HELIX_PROFILE_TIMEOUT_SECONDS`` (default 900, as upstream).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.profile.report import ProfileReport
from helix_engine.workspace import layout
from helix_engine.workspace.files import atomic_write_json

TIMEOUT_ENV = "HELIX_PROFILE_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_S = 900.0
OUTPUT_TAIL_CHARS = 4000


@dataclass
class JobResult:
    """What a helix child job left: its JobInfo, the result JSON it wrote, the output tail."""

    job: Any
    result: dict[str, Any] | None
    output: str


def profile_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise HelixError(f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds; set it like 900")
    return value


def run_child_job(ws: Path, kind: str, module: str, request: dict[str, Any], *, backend: Any, cwd: Path,
                  round_name: str | None, timeout_s: float, env: dict[str, str] | None = None,
                  on_event: Callable[[dict[str, Any]], None] | None = None,
                  output_tail_chars: int = OUTPUT_TAIL_CHARS) -> JobResult:
    """Write ``request`` (+ result_path), run ``python -m <module> request.json`` as a job, read back."""
    from helix_engine.jobs.registry import job_dir
    from helix_engine.jobs.runner import run_job

    tmp = Path(ws) / layout.HELIX_DIR / "tmp" / f"{kind}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        request = dict(request, backend=backend.name, device_str=backend.device_str,
                       result_path=str(tmp / "result.json"))
        atomic_write_json(tmp / "request.json", request)
        argv = [os.environ.get("HELIX_PYTHON") or sys.executable, "-m", module, str(tmp / "request.json")]
        job = run_job(Path(ws), kind, argv, round_name=round_name, cwd=cwd, env=env, timeout_s=timeout_s,
                      device_pool=None, backend=backend, on_event=on_event)
        result = None
        try:
            result = json.loads((tmp / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
        output = ""
        try:
            output = (job_dir(Path(ws), job.id) / "output.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
        return JobResult(job, result, output[-output_tail_chars:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def round_name_of(path: Path) -> str | None:
    folder = Path(path).resolve().parent
    if folder.name == layout.BASELINE_DIR:
        return layout.BASELINE_DIR
    return folder.name if layout.round_number(folder.name) is not None else None


def resolve_inputs(operator_file: Path, bench_file: Path | None) -> tuple[Path, Path]:
    operator_file = Path(operator_file).resolve()
    if not operator_file.is_file():
        raise HelixError(f"operator file {operator_file} does not exist; pass --operator-file <op>.py.")
    if bench_file is None:
        from helix_engine.eval.loader import find_bench_file

        bench_file = find_bench_file(operator_file)
    bench_file = Path(bench_file).resolve()
    if not bench_file.is_file():
        raise HelixError(f"bench file {bench_file} does not exist; pass --bench-file bench_<op>.py.")
    return operator_file, bench_file


@dataclass
class ProfileOutcome:
    return_code: int
    profile_dir: Path | None
    backend: str
    report: ProfileReport | None = None
    message: str | None = None
    job_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"return_code": self.return_code, "profile_dir": str(self.profile_dir) if self.profile_dir else None,
                "backend": self.backend, "job_id": self.job_id, "message": self.message,
                "report": self.report.to_json() if self.report else None}


def profile_bench(operator_file: Path, case_id: str, bench_file: Path | None = None, out_dir: Path | None = None,
                  backend: str | None = None, top: int = 5,
                  on_event: Callable[[dict[str, Any]], None] | None = None) -> ProfileOutcome:
    """Profile ``case_id`` of the operator's bench harness and build the report."""
    from helix_engine.eval.backends import select_backend
    from helix_engine.profile.report import build_report

    if not case_id or not str(case_id).strip():
        raise HelixError("--case-id is required (even with one case); `helix run-bench` lists the case ids.")
    operator_file, bench_file = resolve_inputs(operator_file, bench_file)
    be = select_backend(backend)
    out = Path(out_dir).resolve() if out_dir else operator_file.parent / "profile"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(case_id))[:80]
    run_dir = out / f"PROF_{safe}_{int(time.time() * 1000)}"
    ws = layout.workspace_of(operator_file)
    request = {"operator_file": str(operator_file), "bench_file": str(bench_file), "case_id": case_id,
               "run_dir": str(run_dir)}
    done = run_child_job(ws, "profile", "helix_engine.profile.worker", request, backend=be,
                         cwd=operator_file.parent, round_name=round_name_of(operator_file),
                         timeout_s=profile_timeout(), on_event=on_event)
    result = done.result or {}
    rc = int(result.get("return_code", 1)) if done.job.status in ("passed", "failed") else 1
    if rc != 0 or done.job.status != "passed":
        why = result.get("error") or done.job.message or f"the profile job ended with status {done.job.status}"
        tail = done.output.strip().splitlines()[-15:]
        message = f"profile failed: {why}" + ("\n" + "\n".join(tail) if tail else "")
        return ProfileOutcome(rc or 1, run_dir if run_dir.exists() else None, be.name, None, message, done.job.id)
    try:
        report = build_report(run_dir, top=top)
    except HelixError as exc:
        return ProfileOutcome(1, run_dir, be.name, None, f"the profile ran but cannot be read: {exc}", done.job.id)
    return ProfileOutcome(0, run_dir, be.name, report, None, done.job.id)
