"""``helix worker start|stop|status [WORKSPACE]``: the warm worker that probes run in (eval/warm.py).

``serve`` is what ``start`` runs detached: the supervising helix process of the worker's job.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from helix_engine.commands.workspace_flag import add_workspace_flag
from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

BACKEND_CHOICES = ("auto", "npu", "cuda", "cpu")


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    worker = sub.add_parser(
        "worker", help="a warm worker for probe-bench: torch and Triton imported once, each probe a fork of it",
        description="probe-bench's job starts in a fork of a process that already imported torch, Triton and "
        "helix's eval code, instead of a fresh Python (seconds saved per probe on a GPU host). run-bench, "
        "run-test, profiles and IR capture always start cold. The worker stops after --idle-minutes without a "
        "probe, or with `helix worker stop`.")
    actions = worker.add_subparsers(dest="worker_action", metavar="ACTION", required=True)
    for name, text in (("start", "start it (or show the running one)"), ("stop", "stop it"),
                       ("status", "is one running, and does it match this shell's settings")):
        p = actions.add_parser(name, help=text)
        _common(p)
        if name == "start":
            p.add_argument("--idle-minutes", type=float, default=30.0,
                           help="stop after this long without a probe (default 30)")
        p.set_defaults(func={"start": _start, "stop": _stop, "status": _status}[name])
    p = actions.add_parser("serve", help=argparse.SUPPRESS)
    _common(p)
    p.add_argument("--idle-s", type=float, default=1800.0)
    p.set_defaults(func=_serve)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("workspace", nargs="?", default=".", type=Path)
    add_workspace_flag(p)
    p.add_argument("--backend", choices=BACKEND_CHOICES, default=None,
                   help="the backend its probes run on (default: $HELIX_BACKEND, else auto-detect)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _workspace(args: argparse.Namespace) -> Path:
    ws = Path(args.workspace).expanduser()
    if not ws.is_dir():
        raise HelixError(f"{clean(ws)} is not a folder; pass the operator workspace")
    return ws.resolve()


def _backend(args: argparse.Namespace) -> str | None:
    return None if args.backend in (None, "auto") else str(args.backend)


def _line(info: dict[str, Any]) -> str:
    up = time.time() - float(info.get("started_at") or time.time())
    return (f"warm worker pid {info.get('pid')} ({clean(info.get('backend'))}) for {clean(info.get('workspace'))}: "
            f"up {up:.0f} s, {info.get('served', 0)} probe(s) served, {info.get('probes_running', 0)} running")


def _start(args: argparse.Namespace) -> int:
    from helix_engine.eval import warm

    if not args.idle_minutes > 0:
        raise HelixError("--idle-minutes must be a positive number of minutes, e.g. 30")
    info = warm.start(_workspace(args), _backend(args), idle_s=args.idle_minutes * 60.0)
    if args.json:
        print_json({k: v for k, v in info.items() if k != "fingerprint"})
        return 0
    print(("already running: " if info.get("already") else "started: ") + _line(info))
    print("probe-bench now runs in it (add --cold for a fresh process); stop it with `helix worker stop`")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from helix_engine.eval import warm

    info = warm.stop(_workspace(args), _backend(args))
    if args.json:
        print_json({"stopped": info is not None, "pid": info.get("pid") if info else None})
    else:
        if info is None:
            print("no warm worker was running for this workspace")
        else:
            ended = info.get("probes_running") or 0
            print(f"stopped: {_line(info)}" + (f"; the {ended} running probe(s) were ended" if ended else ""))
    return 0


def _status(args: argparse.Namespace) -> int:
    import os
    import sys

    from helix_engine.eval import warm
    from helix_engine.eval.jobrun import resolve_backend

    ws = _workspace(args)
    be = resolve_backend(_backend(args))
    try:
        info = warm.hello(ws, be.name)
    except warm.WarmError as exc:
        if args.json:
            print_json({"running": False, "why": str(exc)})
        else:
            print(clean(str(exc)))
        return 0
    from helix_engine.jobs.settings import child_environment

    env = child_environment(be, None, None, ws)
    why = warm.difference(warm.fingerprint(env, os.environ.get("HELIX_PYTHON") or sys.executable),
                          info.get("fingerprint") or {})
    if args.json:
        print_json({"running": True, "matches": why is None, "why": why,
                    **{k: v for k, v in info.items() if k != "fingerprint"}})
        return 0
    print(_line(info))
    print("probes from this shell use it" if why is None else
          f"probes from this shell start cold: {clean(why)}; restart it (helix worker stop, then start)")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from helix_engine.eval import warm

    return warm.serve(_workspace(args), _backend(args), idle_s=args.idle_s)
