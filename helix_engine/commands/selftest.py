"""``helix selftest [--backend B]``: helix's adversarial pack through the real workflow.

Each cheat of selftest/pack.py (a cached output, torch behind a dummy kernel, a lazy tensor, a
patched timer, an edited baseline, a swap between test and submit, …) runs in its own copy of
the softmax example; the command prints whether each was caught and by what, and exits 1 when
one was promoted or when the honest round was not.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from helix_engine.console import print_json


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    p = sub.add_parser(
        "selftest", help="run helix's own cheating operators through the gate; each must be caught",
        description="Run the adversarial pack (one cheating round operator or workflow per known way to fool a "
        "harness) through start-round, run-test, a paired run-bench, round-state and submit-round, each in a "
        "fresh copy of the softmax example. Exit 1 when a cheat is promoted or the honest round is not.")
    p.add_argument("--backend", default=None, help="cpu (default here), cuda or npu")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this cheat (repeatable)")
    p.add_argument("--jobs", type=int, default=None, help="cheats run at once (default: 2, or 1 on one core)")
    p.add_argument("--keep", type=Path, default=None, help="keep the workspaces in this folder")
    p.add_argument("--list", action="store_true", help="list the pack and exit")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_selftest)


def _selftest(args: argparse.Namespace) -> int:
    from helix_engine.eval.jobrun import resolve_backend
    from helix_engine.selftest.pack import PACK
    from helix_engine.selftest.run import report, selftest

    if args.list:
        for cheat in PACK:
            print(f"{cheat.name}: {cheat.what}")
        return 0
    backend = resolve_backend(args.backend).name
    outcomes = selftest(backend, args.only, args.jobs, args.keep)
    if args.json:
        print_json({"backend": backend, "outcomes": [o.to_json() for o in outcomes],
                    "ok": all(o.ok for o in outcomes)})
    else:
        print(report(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1
