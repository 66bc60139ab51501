"""``helix profile-bench``: profile one bench case as a job, then report on it (parent side).

The run writes ``<out>/PROF_<case>_<epoch_ms>/`` (upstream's folder name; ``<out>`` defaults to
``<operator dir>/profile``) so a re-profile never overwrites the previous one, and
`build_report` on ``<out>`` picks the newest run. The child writes into a staging folder beside
it (workspace/staging.py) that becomes ``PROF_*`` only when the job passed: a cancelled,
timed-out or crashed profile leaves no folder that "the newest run" could pick up. The child is
``python -m helix_engine.profile.worker`` under `jobs.runner.run_job` (kind ``profile``), so
every helix process sees it in ``.helix/jobs/`` and a crash or hang in user code ends the job,
not helix. Time limit: ``HELIX_PROFILE_TIMEOUT_SECONDS`` (default 900, as upstream).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.jobrun import resolve_bench_inputs, round_name_of, run_child_job
from helix_engine.profile.report import ProfileReport
from helix_engine.workspace import layout, staging

TIMEOUT_ENV = "HELIX_PROFILE_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_S = 900.0


def profile_timeout() -> float:
    from helix_engine.jobs.settings import env_seconds

    from_env = env_seconds(TIMEOUT_ENV, example=900)
    return from_env[0] if from_env else DEFAULT_TIMEOUT_S


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
                  on_event: Callable[[dict[str, Any]], None] | None = None,
                  target_op: str | None = None) -> ProfileOutcome:
    """Profile ``case_id`` of the operator's bench harness and build the report (of
    ``target_op`` when given, else of the op with the largest total time)."""
    from helix_engine.eval.backends import select_backend
    from helix_engine.profile.report import build_report

    if not case_id or not str(case_id).strip():
        raise HelixError("--case-id is required (even with one case); `helix run-bench` lists the case ids.")
    operator_file, bench_file = resolve_bench_inputs(operator_file, bench_file)
    be = select_backend(backend)
    out = Path(out_dir).resolve() if out_dir else operator_file.parent / "profile"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(case_id))[:80]
    run_dir = out / f"PROF_{safe}_{int(time.time() * 1000)}"
    staged = staging.staging_dir(run_dir)
    staging.remove_leftovers(out)
    ws = layout.workspace_of(operator_file)
    request = {"operator_file": str(operator_file), "bench_file": str(bench_file), "case_id": case_id,
               "run_dir": str(staged), "final_dir": str(run_dir)}
    try:
        done = run_child_job(ws, "profile", "helix_engine.profile.worker", request, backend=be,
                             cwd=operator_file.parent, round_name=round_name_of(operator_file),
                             timeout_s=profile_timeout(), on_event=on_event)
    except BaseException:
        staging.discard(staged)
        raise
    result = done.result or {}
    rc = int(result.get("return_code", 1)) if done.job.status in ("passed", "failed") else 1
    if rc != 0 or done.job.status != "passed":
        staging.discard(staged)  # a failed run leaves nothing behind
        why = str(result.get("error") or done.job.message or f"the profile job ended with status {done.job.status}")
        if why.startswith("HelixError: "):  # a sentence for the user: no class name before it
            why = why[len("HelixError: "):]
        # the output's last lines, less the child's own report of the same error
        tail = [line for line in done.output.strip().splitlines()[-15:] if why not in line]
        message = f"profile failed: {why}" + ("\n" + "\n".join(tail) if tail else "")
        return ProfileOutcome(rc or 1, None, be.name, None, message, done.job.id)
    try:
        staging.promote(staged, run_dir)
    except OSError as exc:
        staging.discard(staged)
        return ProfileOutcome(1, None, be.name, None, f"the profile ran but cannot be kept: {exc}", done.job.id)
    try:
        report = build_report(run_dir, target_op=target_op, top=top)
    except HelixError as exc:
        return ProfileOutcome(1, run_dir, be.name, None, f"the profile ran but cannot be read: {exc}", done.job.id)
    return ProfileOutcome(0, run_dir, be.name, report, None, done.job.id)
