"""`helix demo [DIR]`: a real baseline and two real rounds on a shipped example, then the cockpit.

Imports nothing heavy at module import: the demo's engine calls (and torch, in child jobs only)
load when the command runs; the cockpit (textual) loads only when it is opened.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helix_engine.errors import HelixError


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    parser = sub.add_parser(
        "demo",
        help="copy an example operator, run a baseline and two real rounds, open the cockpit",
        description="Copy a shipped example operator workspace into DIR and optimize it exactly as an "
        "agent would: prepare-baseline, then two rounds (start-round, candidate, run-test, run-bench, "
        "summary, submit-round). Round 1 improves the kernel, round 2 regresses and is recorded as not "
        "promoted. Then opens the cockpit on DIR (or prints `helix status` with --no-tui).",
    )
    parser.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR",
                        help="new or empty folder for the workspace (default: ./helix-demo-<example>)")
    parser.add_argument("--example", default=None, metavar="NAME",
                        help="which example to optimize: softmax (default), layernorm or matmul")
    parser.add_argument("--backend", choices=("auto", "npu", "cuda", "cpu"), default=None,
                        help="where kernels run (default: HELIX_BACKEND, else auto-detect)")
    parser.add_argument("--no-tui", action="store_true",
                        help="print `helix status` for the result instead of opening the cockpit")
    parser.add_argument("--list", action="store_true", help="list the examples and exit")
    parser.set_defaults(func=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    from helix_engine import demo

    if args.list:
        for name in demo.list_examples():
            print(name)
        return 0
    example = args.example or demo.DEFAULT_EXAMPLE
    if example not in demo.list_examples():
        raise HelixError(f"there is no example named {example!r}; choose one of: {', '.join(demo.list_examples())}")
    dest = args.dir if args.dir is not None else Path(f"helix-demo-{example}")
    result = demo.run_demo(dest, example=example, backend=args.backend, out=_print)
    failed = [r.number for r in result.rounds if r.correctness != "passed"]
    if args.no_tui or not sys.stdout.isatty():
        _print("")
        from helix_engine import cli

        cli.main(["status", str(result.workspace)])
        _print(f"\nOpen the cockpit on it with: helix {result.workspace}")
    else:
        try:
            from helix_tui.app import run_cockpit  # lazy: the engine never imports textual itself
        except ImportError as exc:
            raise HelixError(f"the cockpit cannot start ({exc}); run `helix status {result.workspace}` "
                             "or reinstall helix with its dependencies") from None
        run_cockpit([str(result.workspace)])
    return 1 if failed else 0


def _print(line: str) -> None:
    print(line, flush=True)
