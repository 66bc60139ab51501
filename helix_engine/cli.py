"""The engine command line: ``helix <subcommand>`` (and ``python -m helix_engine``).

Thin by design: each area registers its subcommands from ``helix_engine/commands/<area>.py``
(parse → call one engine function → print text or ``--json``). Modules here must not import
torch or triton at import time, so ``helix status`` stays fast and works on a broken GPU stack.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from helix_engine import __version__
from helix_engine.commands.run import run_command
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean, guarded_stdio

#: Areas, in the order their commands appear in ``helix --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "helix_engine.commands.status",
    "helix_engine.commands.perf",
    "helix_engine.commands.state",
    "helix_engine.commands.lint",
    "helix_engine.commands.selftest",
    "helix_engine.commands.eval",
    "helix_engine.commands.jobs",
    "helix_engine.commands.cluster",
    "helix_engine.commands.fleet",
    "helix_engine.commands.profile",
    "helix_engine.commands.patterns",
    "helix_engine.commands.ir",
    "helix_engine.commands.compiler_source",
    "helix_engine.commands.demo",
    "helix_engine.commands.agent",
    "helix_engine.commands.worker",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helix",
        description="Optimize one Triton operator round by round. Run `helix` with no "
        "subcommand (or `helix tui`) to open the cockpit.",
    )
    parser.add_argument("--version", action="version", version=f"helix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_cockpit(sub)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # area not built yet
                continue
            raise
        module.register(sub)
    _remember_parsers(parser)
    return parser


def _register_cockpit(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    """``tui`` in ``helix --help``: the console script (``helix_tui.cli``) opens the cockpit before
    this parser sees the word; here it only documents it and explains ``python -m helix_engine tui``."""
    parser = sub.add_parser(
        "tui",
        help="open the cockpit on a workspace, or a picker for a folder of them (same as `helix`)",
        description="Open the helix cockpit. The `helix` console script handles this command; "
        "`python -m helix_engine` is the CLI without the cockpit.",
    )
    parser.add_argument("workspace", nargs="?", default=".", help="workspace folder, or a folder of workspaces")
    parser.add_argument("--no-watch", action="store_true", help="do not follow file changes (refresh with r)")
    parser.add_argument("--cluster", metavar="ADDRESS", help="send the cockpit's jobs to this Ray cluster")
    parser.set_defaults(func=_cockpit_elsewhere)


def _cockpit_elsewhere(args: argparse.Namespace) -> int:
    raise HelixError("the cockpit is part of the `helix` console script, not of `python -m helix_engine`; "
                     f"run `helix tui {clean(args.workspace)}`")


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's parser records itself, so a flag it does not know is reported with its
    own usage (argparse hands unknown flags up to the top-level parser otherwise)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in action.choices.values():
                child.set_defaults(_helix_parser=child)
                _remember_parsers(child)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def close_matches(word: str, choices: Sequence[str]) -> list[str]:
    """The choices a mistyped ``word`` probably meant: near spellings first, then those it begins."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    if len(word) >= 3:
        found += [c for c in sorted(choices) if c.startswith(word) and c not in found]
    return found[:3]


def unknown_command_message(word: str) -> str:
    """The sentence for ``helix WORD`` when WORD is no subcommand: what it probably meant, then
    helix's command list (an agent reading the error needs no second call to find the name)."""
    names = sorted(command_names())
    guess = close_matches(word, names)
    hint = ("did you mean " + " or ".join(f"`helix {g}`" for g in guess) + "? ") if guess else ""
    return (f"{clean(word)!r} is not a helix command; {hint}`helix --help` lists every command: "
            + ", ".join(names))


def _unknown_flags_message(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    flags = [s for a in parser._actions for s in a.option_strings]  # noqa: SLF001
    shown = []
    for word in extra:
        guess = close_matches(word.split("=", 1)[0], flags) if word.startswith("-") else []
        shown.append(clean(word) + (f" (did you mean {' or '.join(guess)}?)" if guess else ""))
    return f"unrecognized arguments: {' '.join(shown)}; `{parser.prog} --help` lists its options"


#: Commands ``main`` may answer before building the parser (helix_tui.cli routes them here
#: without asking ``command_names``): `status --json` of an unchanged workspace (issue 12).
FAST_COMMANDS = frozenset({"status"})

_built: list[argparse.ArgumentParser] = []  # the parser command_names built, for the main() after it


def command_names() -> set[str]:
    parser = build_parser()
    _built[:] = [parser]
    return set(_subcommands(parser))


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] == "status":
        from helix_engine.commands.status import stored_output

        answered = stored_output(words[1:])
        if answered is not None:
            return answered
    parser = _built.pop() if _built else build_parser()  # built once per command, not twice
    if words and not words[0].startswith("-") and words[0] not in _subcommands(parser):
        parser.error(unknown_command_message(words[0]))  # exits 2, like every usage error
    args, extra = parser.parse_known_args(words)
    if extra:
        own: argparse.ArgumentParser = getattr(args, "_helix_parser", parser)
        own.error(_unknown_flags_message(own, extra))
    if getattr(args, "cluster", None):  # --cluster on an eval, profile or IR command: its jobs go there
        from helix_engine.cluster import use_cluster

        use_cluster(args.cluster)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 1
    # Every text line goes out through the final guard (workspace fields are also escaped
    # where they are formatted); JSON is written past it, by console.print_json.
    with guarded_stdio():
        return _run(func, args)


def _run(func: Callable[[argparse.Namespace], Any], args: argparse.Namespace) -> int:
    return run_command(func, args)
