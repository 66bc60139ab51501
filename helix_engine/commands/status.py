"""`helix status [PATH ...]`: where each operator workspace stands (upstream-compatible).

Imports only the workspace reader (no torch, no triton), so it answers fast on any machine; the
usual invocations are parsed without argparse (`_plain_args`: importing it and defining the
options was ~7 ms of a ~75 ms computed status).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from helix_engine.console import write_json_text
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

if TYPE_CHECKING:
    import argparse


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    parser = sub.add_parser(
        "status",
        help="best round, geomean speedup and problems of one workspace or a folder of them",
        description="Report each operator workspace: avg improvement, geomean speedup, best round "
        "(highest geomean, ties to the lower mean latency), the best round logged in opt-note.md, "
        "warnings and problems. PATH is one workspace or a folder of workspaces (default: .).",
    )
    _arguments(parser)
    parser.set_defaults(func=run_status)


def _arguments(parser: argparse.ArgumentParser) -> None:
    import argparse

    from helix_engine.commands.workspace_flag import add_workspace_flag

    parser.add_argument("paths", nargs="*", metavar="PATH", type=Path,
                        help="a workspace, or a folder whose subfolders are workspaces")
    parser.add_argument("-i", "--input", dest="inputs", action="append", type=Path, default=[],
                        metavar="PATH", help="same as PATH (upstream spelling); may be repeated")
    add_workspace_flag(parser)
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--format", choices=("text", "markdown", "json", "html"),
                        default=None, help="output format (default text; html only with --view trend)")
    parser.add_argument("--view", choices=("best", "trend"), default="best",
                        help="best: one block per workspace; trend: geomean speedup per round")
    parser.add_argument("-m", "--metric-source", dest="metric", choices=("auto", "kernel", "total-op"),
                        default=None, help="compare every round on this metric (default: each round's "
                        "effective_metric_source, mixed → auto)")
    parser.add_argument("--verbose", action="store_true", help=argparse.SUPPRESS)  # upstream no-op


class _Refused(Exception):
    pass


def _argparsed(words: list[str]) -> Any:
    """The status arguments parsed by argparse alone, as the full CLI would (None on any usage
    error, which is left to the full CLI, or an argument it does not know)."""
    import argparse

    class QuietParser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:
            raise _Refused(message)

    parser = QuietParser(prog="helix status", add_help=False)
    _arguments(parser)
    try:
        args, extra = parser.parse_known_args(words)
    except _Refused:
        return None
    return None if extra else args


#: The options `_plain_args` reads: option string -> (dest, choices; None: any value).
_VALUED: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "-i": ("inputs", None), "--input": ("inputs", None), "-w": ("workspace_flag", None),
    "--workspace": ("workspace_flag", None), "--format": ("format", ("text", "markdown", "json", "html")),
    "--view": ("view", ("best", "trend")), "-m": ("metric", ("auto", "kernel", "total-op")),
    "--metric-source": ("metric", ("auto", "kernel", "total-op"))}
_SWITCHES = {"--json": "json", "--verbose": "verbose"}


def _plain_args(words: list[str]) -> Any:
    """The arguments argparse would give for the usual spellings (whole option names, each value
    as the next word, the paths in one run), without importing it; None for anything else, which
    argparse then parses (`_argparsed`). A test holds the two equal on every such invocation."""
    args: dict[str, Any] = {"paths": [], "inputs": [], "workspace_flag": None, "_workspace_default": None,
                            "json": False, "format": None, "view": "best", "metric": None, "verbose": False}
    paths_ended = False
    it = iter(words)
    for word in it:
        if word in _SWITCHES:
            args[_SWITCHES[word]] = True
        elif word in _VALUED:
            dest, choices = _VALUED[word]
            value = next(it, None)
            if value is None or value.startswith("-") or not value or (choices is not None and value not in choices):
                return None
            if dest == "inputs":
                args["inputs"].append(Path(value))
            else:
                args[dest] = value
        elif word.startswith("-") or not word:
            return None
        else:
            if paths_ended:  # argparse takes one run of positionals: a second is an extra argument
                return None
            args["paths"].append(Path(word))
            continue
        paths_ended = paths_ended or bool(args["paths"])
    return SimpleNamespace(**args)


def _stored_key(args: Any) -> tuple[Path, tuple[str, ...]] | None:
    """(workspace path, options) when the invocation can be answered from a stored output: JSON of
    exactly one PATH (the output of a folder of workspaces is not stored), --workspace counted."""
    flag = getattr(args, "workspace_flag", None)
    paths = [*args.paths, *args.inputs, *([Path(flag)] if flag is not None else [])] or [Path(".")]
    if not (args.json or args.format == "json") or len(paths) != 1:
        return None
    return paths[0], ("json", args.view, str(args.metric))


def stored_output(words: list[str]) -> int | None:
    """`helix status [PATH] --json` of a workspace unchanged since the run that stored its output
    (workspace/status_cache.py): printed without building the CLI or loading the workspace. On a
    miss the status is computed from the arguments parsed here, as the CLI runs a command (the
    full parser of every command is ~30 ms, issue 12). None: run the command as usual (anything
    else, a usage error)."""
    args = _plain_args(words)
    if args is None:
        args = _argparsed(words)
    key = _stored_key(args) if args is not None else None
    if key is None:
        return None
    from helix_engine.workspace import status_cache

    try:
        found = status_cache.fingerprint(*key)
        text = status_cache.stored(found)
    except Exception:  # noqa: BLE001 - only ever saves time: the full run reports what is wrong
        return None
    if text is None:
        _walked[key] = found  # the computed run stores under this walk, taken before its load
        from helix_engine.commands.run import run_command
        from helix_engine.sanitize import guarded_stdio

        with guarded_stdio():
            return run_command(run_status, args)
    try:
        write_json_text(text)
    except BrokenPipeError:
        pass
    return 0


_walked: dict[tuple[Path, tuple[str, ...]], Any] = {}


def _use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(callable(isatty) and isatty())


def run_status(args: Any) -> int:
    # One shot: everything it loads stays alive until it prints, so the cyclic collector would
    # only walk it again and again (a full pass over every record after the load). Off for the
    # command; on return the survivors are frozen (never walked again) and collection resumes.
    was_on = gc.isenabled()
    gc.disable()
    try:
        return _status(args)
    finally:
        if was_on:
            gc.freeze()
            gc.enable()


def _status(args: Any) -> int:
    from helix_engine.status import collect, json_chunks, render

    fmt = "json" if args.json else (args.format or "text")
    if fmt == "html" and args.view != "trend":
        raise HelixError("--format html is only available with --view trend; add --view trend, or use "
                         "--format text, markdown or json")
    paths = [*args.paths, *args.inputs] or [Path(".")]
    key = _stored_key(args)
    walked = None
    if key is not None:
        from helix_engine.workspace import status_cache

        walked = _walked.pop(key, None) or status_cache.fingerprint(*key)  # before the load
    from helix_engine.workspace.reading import walked as walked_listing

    with walked_listing(walked.listing if walked is not None else None):  # the load's lstats: the walk's
        statuses, missing = collect(paths, args.metric)
    if not statuses:
        reason = "; ".join(missing) if missing else "no workspace found"
        raise HelixError(f"{reason}. Point `helix status` at an operator workspace (a folder with "
                         "baseline/, opt-round-N/, opt-note.md, or an <op>.py with its test_ or bench_ "
                         "harness) or at a folder of such workspaces.")
    for sentence in missing:
        print(f"warning: {clean(sentence)}; skipped", file=sys.stderr)
    if fmt == "json":
        keep = walked is not None and walked.digest is not None and not missing and len(statuses) == 1
        pieces: list[str] = []
        for piece in json_chunks(statuses, view=args.view):  # written as encoded (render's text, in pieces)
            write_json_text(piece)
            if keep:
                pieces.append(piece)
        if keep and walked is not None and statuses[0].path == walked.workspace:
            from helix_engine.workspace import status_cache

            status_cache.store(walked, pieces)
        return 0
    text = render(statuses, view=args.view, fmt=fmt, color=fmt == "text" and _use_color())
    sys.stdout.write(text)  # text, markdown and html escape each workspace field (helix_engine.sanitize)
    return 0
