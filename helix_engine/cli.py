"""The engine command line: ``helix <subcommand>`` (and ``python -m helix_engine``).

Thin by design: each area registers its subcommands from ``helix_engine/commands/<area>.py``
(parse → call one engine function → print text or ``--json``). Modules here must not import
torch or triton at import time, so ``helix status`` stays fast and works on a broken GPU stack.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from helix_engine import __version__
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean, guarded_stdio

#: Areas, in the order their commands appear in ``helix --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "helix_engine.commands.status",
    "helix_engine.commands.perf",
    "helix_engine.commands.state",
    "helix_engine.commands.eval",
    "helix_engine.commands.jobs",
    "helix_engine.commands.profile",
    "helix_engine.commands.ir",
    "helix_engine.commands.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helix",
        description="Optimize one Triton operator round by round. Run `helix` with no "
        "subcommand (or `helix tui`) to open the cockpit.",
    )
    parser.add_argument("--version", action="version", version=f"helix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # area not built yet
                continue
            raise
        module.register(sub)
    return parser


def command_names() -> set[str]:
    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return set(action.choices)
    return set()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 1
    # Every text line goes out through the final guard (workspace fields are also escaped
    # where they are formatted); JSON is written past it, by console.print_json.
    with guarded_stdio():
        return _run(func, args)


def _run(func: Callable[[argparse.Namespace], Any], args: argparse.Namespace) -> int:
    try:
        return int(func(args) or 0)
    except HelixError as exc:  # its message may name workspace paths and values
        print(f"error: {clean(exc, multiline=True)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback by default
        if os.environ.get("HELIX_DEBUG", "").lower() in {"1", "true"}:
            raise
        print(
            f"error: helix failed unexpectedly ({type(exc).__name__}: {clean(exc, multiline=True)}). Run again "
            "with HELIX_DEBUG=1 for the traceback and report it.",
            file=sys.stderr,
        )
        return 1
