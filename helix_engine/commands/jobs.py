"""``helix jobs [list|show ID|tail ID [--follow]|cancel ID|prune]`` and ``helix backend``.

Thin by design: parse, call the jobs registry/runner or the backend probe, print text that
fits 80 columns or ``--json``. Nothing here imports torch (the probe runs in a subprocess).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from helix_engine.console import print_json, write_json_text
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

WIDTH = 80
ID_WIDTH = 36  # 80 minus the other columns of `jobs list`


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default_ws: Any = argparse.SUPPRESS if suppress else "."
    default_json: Any = argparse.SUPPRESS if suppress else False
    parser.add_argument("--workspace", "-w", default=default_ws, metavar="W",
                        help="the operator workspace (default: the current folder)")
    parser.add_argument("--json", action="store_true", default=default_json, help="print JSON")


def register(sub: Any) -> None:
    from helix_engine.jobs.interrupts import install_interrupt_handlers

    # Every helix command: Ctrl-C/SIGTERM also stop jobs supervised from worker threads.
    install_interrupt_handlers()
    jobs = sub.add_parser("jobs", help="list, show, tail, cancel or prune the workspace's jobs",
                          description="Jobs are the test/bench/profile runs of a workspace "
                          "(.helix/jobs/<id>/). Without an action, lists them.")
    _add_common(jobs, suppress=False)
    jobs.set_defaults(func=cmd_list)
    actions = jobs.add_subparsers(dest="jobs_action", metavar="ACTION")
    p = actions.add_parser("list", help="every job, newest first")
    _add_common(p, suppress=True)
    p.add_argument("--limit", type=int, default=50, help="show at most N jobs (default 50)")
    p.set_defaults(func=cmd_list)
    p = actions.add_parser("show", help="one job's record, progress and output tail")
    p.add_argument("job_id", metavar="ID")
    _add_common(p, suppress=True)
    p.set_defaults(func=cmd_show)
    p = actions.add_parser("tail", help="a job's events; --follow keeps printing until it ends")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--follow", "-f", action="store_true", help="wait for new events until the job ends")
    p.add_argument("--output", action="store_true", help="tail output.log instead of the events")
    _add_common(p, suppress=True)
    p.set_defaults(func=cmd_tail)
    p = actions.add_parser("cancel", help="SIGTERM the job's process group, SIGKILL after a grace period")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--grace", type=float, default=5.0, metavar="S", help="seconds before SIGKILL (default 5)")
    _add_common(p, suppress=True)
    p.set_defaults(func=cmd_cancel)

    p = actions.add_parser("prune", help="delete the folders of finished jobs beyond the newest N")
    p.add_argument("--keep", type=int, default=100, metavar="N", help="jobs to keep (default 100)")
    _add_common(p, suppress=True)
    p.set_defaults(func=cmd_prune)

    backend = sub.add_parser("backend", help="which backend (npu, cuda, cpu) helix would use, and why")
    backend.add_argument("--json", action="store_true", help="print JSON")
    backend.add_argument("--refresh", action="store_true", help="probe again instead of using the cache")
    backend.set_defaults(func=cmd_backend)


# ----------------------------------------------------------------------------- helpers
def resolve_workspace(value: str | None) -> Path:
    """The workspace for a path: a ``baseline/`` or ``opt-round-N/`` folder means its parent."""
    from helix_engine.workspace.layout import BASELINE_DIR, round_number

    path = Path(value or ".").resolve()
    if not path.is_dir():
        raise HelixError(f"{path} is not a folder; pass --workspace with the operator workspace")
    if path.name == BASELINE_DIR or round_number(path.name) is not None:
        return path.parent
    return path


def _clock(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else "-"


def _duration(job: Any, folder: Path | None = None) -> str:
    """How long the job ran, as the cockpit's Jobs pane shows it (jobs/summary.py); a lost job
    ran until the last write in its ``folder``."""
    from helix_engine.jobs import summary

    last_seen = summary.last_activity(folder) if folder is not None and job.status == "lost" else None
    return summary.time_text(job, last_seen=last_seen)


def _peak(job: Any) -> str | None:
    peak = (job.model_extra or {}).get("peak_memory_mb")
    return f"peak {peak:.0f} MB" if isinstance(peak, (int, float)) else None


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def format_event(event: dict[str, Any]) -> str:
    """One event as one line of at most 80 columns."""
    kind = event.get("event")
    head = f"{_clock(event.get('ts') if isinstance(event.get('ts'), (int, float)) else None)} "
    if kind == "case_started":
        body = f"case {event.get('case_id')} started ({_num(event.get('index'), 1)}/{event.get('total')})"
    elif kind == "case_finished":
        body = f"case {event.get('case_id')} finished" + _record_summary(event.get("record"))
    elif kind == "progress":
        body = f"progress {event.get('done')}/{event.get('total')}"
    elif kind == "log":
        body = str(event.get("msg", ""))
    elif kind == "result":
        body = result_summary(event.get("payload"))
    else:
        body = json.dumps(event, ensure_ascii=False, default=str)
    return _cut(head + clean(" ".join(body.split())), WIDTH)


def _node(job: Any) -> str | None:
    """Where a cluster job ran: ``vm (192.0.2.2), NPU 0, cluster head:6379`` (None: a local job)."""
    extra = job.model_extra or {}
    if not extra.get("cluster"):
        return None
    parts = [str(extra.get("node") or "not placed yet")]
    if extra.get("node_ip") and extra.get("node_ip") != extra.get("node"):
        parts[0] += f" ({extra['node_ip']})"
    if job.device is not None:
        parts.append(f"{extra.get('cluster_resource') or 'device'} {job.device}")
    parts.append(f"cluster {extra['cluster']}")
    return ", ".join(parts)


def result_summary(payload: Any) -> str:
    """The worker's final ``result`` event in words (it used to print ``result {}``)."""
    if not isinstance(payload, dict):
        return "result: finished"
    if payload.get("error"):
        return f"result: error: {payload['error']}"
    parts: list[str] = []
    if isinstance(payload.get("cases"), int):
        errors = payload.get("case_errors") or 0
        parts.append(f"{payload['cases']} case(s) measured" + (f", {errors} with errors" if errors else ""))
    if payload.get("return_code") is not None:
        parts.append("test passed" if payload["return_code"] == 0 else f"test failed (return code {payload['return_code']})")
    if payload.get("accuracy"):
        parts.append(f"accuracy {payload['accuracy']}")
    if payload.get("archived_result"):
        parts.append(f"archived {Path(str(payload['archived_result'])).name}")
    known = {"error", "cases", "case_errors", "return_code", "accuracy", "archived_result"}
    parts += [f"{k} {v}" for k, v in payload.items() if k not in known]
    return "result: " + ("; ".join(parts) if parts else "finished")


def _num(value: Any, plus: int) -> str:
    return str(value + plus) if isinstance(value, int) else "?"


def _record_summary(record: Any) -> str:
    if not isinstance(record, dict):
        return ""
    if record.get("error_message"):
        return f": error: {record['error_message']}"
    metrics = record.get("metrics")
    if not isinstance(metrics, dict):
        metrics = {}
    for key in ("kernel_avg_time_us", "total_op_avg_time_us"):
        value = metrics.get(key, record.get(key))
        if isinstance(value, (int, float)):
            return f": {key.removesuffix('_avg_time_us').replace('_', '-')} {value:.2f} us"
    stats = record.get("stats")
    if isinstance(stats, dict) and isinstance(stats.get("median"), (int, float)):
        return f": median {stats['median']:.2f} us"
    if "passed" in record:
        return ": passed" if record.get("passed") else ": FAILED"
    return ""


def _progress(events: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(done, total) folded from the job's events as the cockpit folds them (jobs/summary.py);
    None when no event says anything about progress."""
    from helix_engine.jobs.summary import Progress

    progress = Progress()
    for event in events:
        progress.fold(event)
    return (progress.done, progress.total) if progress.text() else None


def _done_text(done: tuple[int, int] | None) -> str:
    from helix_engine.jobs.summary import Progress

    return Progress(done[0], done[1]).text() if done else ""


def _all_events(folder: Path) -> list[dict[str, Any]]:
    from helix_engine.jobs.registry import iter_events

    return list(iter_events(folder))


# ----------------------------------------------------------------------------- handlers
def cmd_list(args: argparse.Namespace) -> int:
    from helix_engine.jobs.registry import job_dir, scan_jobs
    from helix_engine.jobs.summary import started_text
    from helix_engine.sanitize import clean

    ws = resolve_workspace(args.workspace)
    found, problems = scan_jobs(ws)
    jobs = [info for _folder, info in found][: max(0, getattr(args, "limit", 50))]
    folders = {j.id: job_dir(ws, j.id) for j in jobs}
    progress = {j.id: _progress(_all_events(folders[j.id])) for j in jobs}  # finished jobs too: DONE 4/4
    if args.json:
        rows = [dict(j.to_json(), progress=progress.get(j.id)) for j in jobs]
        print_json({"workspace": str(ws), "jobs": rows, "problems": [p.to_json() for p in problems]})
        return 0
    for problem in problems:  # folders helix ignores (damaged or crafted records)
        print(clean(f"warning: {problem}"), file=sys.stderr)
    if not jobs:
        print(f"no jobs in {clean(ws)} yet (run-test, run-bench and profile runs appear here)")
        return 0
    # The id is what `jobs show/tail/cancel` take, so it is printed whole (it already names the
    # kind: 20261130-093455-run-bench-59de); the other columns fit the rest of 80.
    id_w = max(len("ID"), min(ID_WIDTH, max(len(j.id) for j in jobs)))
    print(f"{'ID':<{id_w}} {'STATUS':<9} {'DONE':>7} {'DEV':<4} {'STARTED':<8} {'TIME':>6} RND")
    for j in jobs:
        done = progress.get(j.id)
        line = (f"{_cut(clean(j.id), id_w):<{id_w}} {j.status:<9} "
                f"{_cut(_done_text(done), 7):>7} {_cut(clean(j.device or '-'), 4):<4} "
                f"{started_text(j):<8} {_duration(j, folders[j.id]):>6} {clean(_short_round(j.round))}")
        print(_cut(line.rstrip(), WIDTH))
    return 0


def _short_round(name: str | None) -> str:
    """``opt-round-12`` → ``r12``, ``baseline`` → ``base`` (the list must fit 80 columns), as the
    cockpit's Jobs pane shows it."""
    from helix_engine.jobs.summary import round_text

    return round_text(name)


def cmd_show(args: argparse.Namespace) -> int:
    from helix_engine.jobs.registry import OUTPUT_NAME, job_dir, load_job

    ws = resolve_workspace(args.workspace)
    job = load_job(ws, args.job_id)
    folder = job_dir(ws, job.id)
    events = _all_events(folder)
    progress = _progress(events)
    finished = [e for e in events if e.get("event") == "case_finished"]
    tail = _tail_text(folder / OUTPUT_NAME, 10)
    if args.json:
        print_json({"job": job.to_json(), "dir": str(folder), "progress": progress,
                    "cases_finished": len(finished), "events": len(events), "output_tail": tail})
        return 0
    rows = [("id", job.id), ("kind", job.kind), ("status", job.status), ("round", job.round),
            ("backend", job.backend), ("device", job.device), ("pid", job.pid), ("node", _node(job)),
            ("created", _clock(job.created_at)), ("started", _clock(job.started_at)),
            ("ended", _clock(job.ended_at)), ("duration", _duration(job, folder)), ("exit code", job.exit_code),
            ("memory", _peak(job))]
    for key, value in rows:
        if value is not None:
            print(_cut(f"{key + ':':<11}{clean(value)}", WIDTH))
    if progress:
        print(f"{'progress:':<11}{progress[0]}/{progress[1]} ({len(finished)} cases finished)")
    command = job.command
    if command:  # the user's helix command line; the worker's argv is in --json
        print(textwrap.fill(clean(command), WIDTH, initial_indent="command:   ", subsequent_indent=" " * 11,
                            break_long_words=False, break_on_hyphens=False))
    else:  # a job.json written before the command was recorded
        print(_cut(f"{'worker:':<11}{clean(' '.join(job.argv))}", WIDTH))
    if job.message:
        print(textwrap.fill(clean(job.message), WIDTH, initial_indent="message:   ", subsequent_indent=" " * 11))
    print(_cut(f"{'folder:':<11}{clean(folder)}", WIDTH))
    if tail:
        print("output (last lines):")
        for line in tail:
            print(_cut("  " + clean(line, multiline=True), WIDTH))
    return 0


def _tail_text(path: Path, n: int) -> list[str]:
    from helix_engine.workspace.reading import open_workspace_file

    try:  # the safe reader, inside the job folder: output.log may be a FIFO or a link elsewhere
        with open_workspace_file(path, path.parent) as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 16384))
            data = handle.read(16384)
    except OSError:
        return []
    return [ln.rstrip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()][-n:]


def cmd_tail(args: argparse.Namespace) -> int:
    from helix_engine.jobs.registry import ACTIVE_STATUSES, OUTPUT_NAME, job_dir, load_job, read_events

    ws = resolve_workspace(args.workspace)
    job = load_job(ws, args.job_id)
    folder = job_dir(ws, job.id)
    offset = 0
    out_offset = 0
    printed = 0
    while True:
        active = load_job(ws, job.id).status in ACTIVE_STATUSES
        if args.output:
            out_offset = _copy_output(folder / OUTPUT_NAME, out_offset)
        else:
            while True:
                events, new_offset = read_events(folder, offset)
                for event in events:
                    if args.json:
                        write_json_text(json.dumps(event, ensure_ascii=False) + "\n")
                    else:
                        print(format_event(event))
                    printed += 1
                if new_offset == offset:
                    break
                offset = new_offset
        sys.stdout.flush()
        if not args.follow or not active:
            break
        time.sleep(0.2)
    if not printed and not args.output and not args.json:
        print(textwrap.fill(f"no events from job {job.id} ({load_job(ws, job.id).status}); "
                            "`--output` shows its output.log", WIDTH))
    if args.follow:
        final = load_job(ws, job.id)
        if not args.json and not args.output:
            print(_cut(f"job {clean(final.id)} {final.status}" + (f": {clean(final.message)}" if final.message else ""),
                       WIDTH))
        return 0 if final.status == "passed" else 1
    return 0


def _copy_output(path: Path, offset: int) -> int:
    from helix_engine.workspace.reading import open_workspace_file

    try:  # the safe reader, inside the job folder
        with open_workspace_file(path, path.parent) as handle:
            handle.seek(offset)
            data = handle.read(1 << 20)
    except OSError:
        return offset
    if data:
        sys.stdout.write(clean(data.decode("utf-8", "replace").replace("\r\n", "\n"), multiline=True))
    return offset + len(data)


def cmd_cancel(args: argparse.Namespace) -> int:
    from helix_engine.jobs.registry import load_job
    from helix_engine.jobs.runner import cancel_job

    ws = resolve_workspace(args.workspace)
    before = load_job(ws, args.job_id)
    job = cancel_job(ws, before.id, grace_s=max(0.0, args.grace))
    if args.json:
        print_json({"job": job.to_json(), "was": before.status})
        return 0
    from helix_engine.jobs.summary import cancel_text  # the sentence the cockpit's x shows too

    print(textwrap.fill(clean(cancel_text(before, job)), WIDTH))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from helix_engine.jobs.registry import prune_jobs

    if args.keep < 0:
        raise HelixError("--keep must be 0 or more")
    ws = resolve_workspace(args.workspace)
    removed = prune_jobs(ws, keep=args.keep)
    if args.json:
        print_json({"removed": removed})
    else:
        print(f"removed {len(removed)} finished job folder(s); kept the newest {args.keep}")
    return 0


def cmd_backend(args: argparse.Namespace) -> int:
    from helix_engine.eval.backends import BACKEND_ENV, detect, get_backend, torch_missing

    report = detect(refresh=args.refresh)
    requested = os.environ.get(BACKEND_ENV, "").strip().lower() or None
    picked = requested if requested in report.devices else report.picked
    adapter = get_backend(picked)
    if args.json:
        data = report.model_dump(mode="json")
        data.update(selected=picked, requested=requested, adapter=adapter.describe())
        print_json(data)
        return 0
    how = f"{BACKEND_ENV}={requested}" if requested else "auto"
    print(f"backend: {picked} ({how}); default bench mode {adapter.default_bench_mode}")
    if requested and requested not in report.devices:
        print(_cut(f"warning: {BACKEND_ENV}={requested} is not usable: "
                   f"{report.reasons.get(requested, 'unknown backend')}", WIDTH))
    print(_cut(f"python:  {report.python or '?'} ({report.executable or '?'})", WIDTH))
    versions = [f"torch {report.torch_version or '-'}", f"triton {report.triton_version or '-'}",
                f"torch_npu {report.torch_npu_version or '-'}"]
    print("versions: " + ", ".join(versions))
    print("devices:")
    for name, devs in report.devices.items():
        label = ", ".join(f"{i}: {d}" for i, d in enumerate(devs)) if name != "cpu" else "cpu (Triton interpreter)"
        print(_cut(f"  {name}: {label}", WIDTH))
    print("not picked:")
    for name in ("npu", "cuda", "cpu"):
        if name != picked:
            reason = report.reasons.get(name, "available")
            print(textwrap.fill(f"{name}: {reason}", WIDTH, initial_indent="  ", subsequent_indent="    "))
    if report.probe_error:
        print(textwrap.fill(f"probe: {report.probe_error}", WIDTH))
    missing = torch_missing(report)
    if missing:
        print(textwrap.fill(f"warning: no job can run: {missing}", WIDTH, subsequent_indent="  "))
    age = time.time() - report.probed_at
    if age > 5:
        print(f"(probed {age:.0f} s ago and cached; --refresh probes again)")
    return 0
