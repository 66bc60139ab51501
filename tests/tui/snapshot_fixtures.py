"""A fixed workspace for the SVG snapshots: the same screen on every machine and every run.

Everything time-dependent is pinned: job times are fixed epoch values, the one clock the job
views read (``helix_engine.jobs.summary.now``) is frozen by ``freeze_clock``, clock times are
shown in UTC, and file modification times are set. Nothing on screen names the temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from cockpit_helpers import make_workspace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: 2026-07-20 09:00:00 UTC: "now" for every snapshot.
NOW = 1_784_538_000.0
DEAD_PID = 2**22 + 11  # no process has it (pid_max defaults to 2**22)


def freeze_clock(monkeypatch) -> None:  # noqa: ANN001 - pytest's MonkeyPatch
    """Job times relative to a fixed now, clock times in UTC."""
    from helix_engine.jobs import summary

    monkeypatch.setattr(summary, "now", lambda: NOW)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def _job(ws: Path, job_id: str, *, kind: str, status: str, round_name: str | None, created: float,
         started: float | None = None, ended: float | None = None, exit_code: int | None = None,
         message: str | None = None, events: list[dict] | None = None, output: str = "", alive: bool = False,
         device: str | None = None) -> Path:
    folder = ws / ".helix" / "jobs" / job_id
    folder.mkdir(parents=True)
    info = {"id": job_id, "kind": kind, "argv": [], "round": round_name, "device": device, "backend": "cpu",
            "created_at": created, "started_at": started, "ended_at": ended, "status": status,
            "exit_code": exit_code, "message": message,
            "pid": os.getpid() if alive else DEAD_PID, "supervisor_pid": os.getpid() if alive else DEAD_PID + 1}
    (folder / "job.json").write_text(json.dumps(info))
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events or []))
    (folder / "output.log").write_text(output)
    last = ended or (started or created) + 6.0
    for name in ("job.json", "events.jsonl", "output.log"):
        os.utime(folder / name, (last, last))
    return folder


def _case(case: str, index: int, total: int, us: float | None = None, error: str | None = None) -> list[dict]:
    events = [{"event": "case_started", "ts": NOW, "case_id": case, "index": index, "total": total}]
    if us is not None or error is not None:
        record = {"case_label": case, "bench_mode": "torch-npu-profiler"}
        if error:
            record["error_message"] = error
        else:
            record.update(kernel_avg_time_us=us, stats={"median": us, "mean": us, "p10": us, "p90": us,
                                                        "stdev": 0.0, "n": 50})
        events.append({"event": "case_finished", "ts": NOW, "case_id": case, "record": record})
    return events


def make_snapshot_workspace(root: Path) -> Path:
    """baseline → round-1 → round-2 (passed), round 3 active; a profile and IR stages for round 2;
    four jobs: a finished bench, a running bench, a lost test and a cancelled bench."""
    ws = make_workspace(root, active_round=True)
    shutil.copytree(FIXTURES / "ascend-profiler" / "standalone_real_output", ws / "opt-round-2" / "profile")
    stages = FIXTURES / "ir" / "ascend" / "bishengir_stages"
    shutil.copytree(stages, ws / "opt-round-1" / "ir")
    shutil.copytree(stages, ws / "opt-round-2" / "ir")
    changed = ws / "opt-round-2" / "ir" / "2_hivm-inject-sync.mlir"
    changed.write_text(changed.read_text() + "// one more sync\n")
    with (ws / "opt-round-3" / "opt_add_perf.txt").open("a") as perf:  # a problem for `!` to list
        perf.write('{"case_label": "fp16_8192", "kernel_avg_time_us": \n')
    t0 = NOW - 3600.0
    _job(ws, "20260720-080000-run-bench-0001", kind="run-bench", status="passed", round_name="opt-round-2",
         created=t0, started=t0 + 1, ended=t0 + 13.5, exit_code=0,
         events=[e for i, (c, us) in enumerate((("fp16_1024", 9.0), ("fp16_4096", 10.0), ("fp32_4096", 30.0)))
                 for e in _case(c, i, 3, us)] + [{"event": "progress", "ts": NOW, "done": 3, "total": 3}],
         output="running fp16_1024\nrunning fp16_4096\nrunning fp32_4096\n")
    _job(ws, "20260720-081000-run-test-0002", kind="run-test", status="running", round_name="opt-round-1",
         created=t0 + 600, started=t0 + 601, events=[], output="", alive=False)  # lost: no process left
    _job(ws, "20260720-082000-run-bench-0003", kind="run-bench", status="cancelled", round_name="opt-round-3",
         created=t0 + 1200, started=t0 + 1201, ended=t0 + 1230, exit_code=-15,
         message="cancelled on request; the job ended on SIGTERM",
         events=_case("fp16_1024", 0, 3, 7.0) + _case("fp16_4096", 1, 3), output="measuring fp16_4096\n")
    _job(ws, "20260720-085900-run-bench-0004", kind="run-bench", status="running", round_name="opt-round-3",
         created=NOW - 60, started=NOW - 42, alive=True,
         events=_case("fp16_1024", 0, 3, 7.0) + _case("fp16_4096", 1, 3)
         + [{"event": "progress", "ts": NOW, "done": 1, "total": 3}],
         output="running fp16_1024\nrunning fp16_4096\n")
    return ws
