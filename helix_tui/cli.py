"""The ``helix`` console script.

Engine subcommands (and ``--help`` / ``--version``) go straight to ``helix_engine.cli`` without
importing textual, so ``helix status`` stays fast; ``helix``, ``helix WORKSPACE``,
``helix --no-watch WORKSPACE`` and ``helix tui [WORKSPACE]`` open the cockpit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_ENGINE_FLAGS = {"-h", "--help", "--version"}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "tui":
        args = args[1:]
    elif args and (args[0] in _ENGINE_FLAGS or not args[0].startswith("-")):
        from helix_engine import cli as engine_cli

        if args[0] in _ENGINE_FLAGS or args[0] in engine_cli.command_names():
            return engine_cli.main(args)
    from helix_tui.app import run_cockpit

    return run_cockpit(args)


if __name__ == "__main__":
    sys.exit(main())
