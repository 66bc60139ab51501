"""The ``helix`` console script.

Engine subcommands (and ``--help`` / ``--version``) go straight to ``helix_engine.cli`` without
importing textual, so ``helix status`` stays fast; ``helix``, ``helix WORKSPACE``,
``helix --no-watch WORKSPACE`` and ``helix tui [WORKSPACE]`` open the cockpit. A first word that
is neither a command nor a path (``helix statsu``) goes to the engine, which suggests the command.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

_ENGINE_FLAGS = {"-h", "--help", "--version"}


def looks_like_path(word: str) -> bool:
    """Whether ``helix WORD`` means a folder: it exists, or is spelled like a path (``./x``,
    ``~/x``, ``a/b``). Any other word is a mistyped command, answered with "did you mean"."""
    if word in {".", ".."} or word.startswith("~") or "/" in word or os.sep in word:
        return True
    return os.path.lexists(word)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "status":  # answered without importing the engine's CLI (argparse) when it can
        from helix_engine.commands.status import stored_output

        answered = stored_output(args[1:])
        if answered is not None:
            return answered
    if args and args[0] == "tui":
        args = args[1:]
    elif args and (args[0] in _ENGINE_FLAGS or not args[0].startswith("-")):
        from helix_engine import cli as engine_cli

        if (args[0] in _ENGINE_FLAGS or args[0] in engine_cli.FAST_COMMANDS or args[0] in engine_cli.command_names()
                or not looks_like_path(args[0])):
            return engine_cli.main(args)  # a word that is no command: the engine says what it meant
    from helix_tui.app import run_cockpit

    return run_cockpit(args)


if __name__ == "__main__":
    sys.exit(main())
