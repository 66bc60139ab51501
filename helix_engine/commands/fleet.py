"""``helix fleet [FOLDER]``: every operator workspace in a folder, at a glance (thin: parse →
helix_engine.fleet → print text or ``--json``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="many workspaces at a glance: best round, phase, running jobs, last change",
                       description="One line per operator workspace in FOLDER (or FOLDER itself): the "
                       "promotion rule's best round and its geomean speedup with its interval, the workflow "
                       "phase, the jobs running (here or on a cluster node) and when a file last changed. "
                       "Most recently changed first.")
    p.add_argument("folder", nargs="?", default=".", type=Path, help="a folder of workspaces (default: .)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_fleet)


def cmd_fleet(args: argparse.Namespace) -> int:
    from helix_engine.fleet import fleet, fleet_text

    if not Path(args.folder).is_dir():
        raise HelixError(f"{clean(args.folder)} is not a folder; give a folder of operator workspaces")
    rows = fleet(args.folder)
    if args.json:
        print_json({"folder": str(Path(args.folder).resolve()), "workspaces": [r.to_json() for r in rows]})
    else:
        print(fleet_text(rows, time.time()))
    return 0
