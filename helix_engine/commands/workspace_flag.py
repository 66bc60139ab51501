"""One way to name the workspace on every command that takes one: the positional ``WORKSPACE``
where a command has it, and ``--workspace``/``-w`` everywhere (an agent that learned one form on
one command need not guess the other on the next).

The option is stored under its own name (argparse would let an absent positional overwrite it)
and folded in by `apply_workspace_flag` before the command runs: into ``workspace`` (typed as the
positional is), into the ``PATH`` list of ``status``, or, on the commands that name a round
folder, as the folder a relative ``--round-dir`` lies in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

if TYPE_CHECKING:
    import argparse

FLAG_DEST = "workspace_flag"
_DEFAULT = "_workspace_default"
#: The folder options a workspace holds (``--round-dir opt-round-N``, ``--baseline-dir baseline``).
FOLDER_ATTRS: tuple[str, ...] = ("round_dir", "baseline_dir")


def add_workspace_flag(parser: argparse.ArgumentParser, *, folder_flag: str | None = None) -> None:
    """``--workspace``/``-w`` on ``parser``: beside its positional WORKSPACE, or, with ``folder_flag``
    (``--round-dir``, ``--baseline-dir``), the workspace a relative folder of that flag lies in."""
    help_text = (f"the operator workspace; a relative {folder_flag} is taken inside it" if folder_flag else
                 "the operator workspace, as an option (the same as the positional workspace argument)")
    parser.add_argument("--workspace", "-w", dest=FLAG_DEST, metavar="WORKSPACE", default=None, help=help_text)
    default = next((a.default for a in parser._actions if a.dest == "workspace"), None)  # noqa: SLF001
    parser.set_defaults(**{_DEFAULT: default})


def apply_workspace_flag(args: Any) -> None:
    """Fold ``--workspace`` into what the command reads; a sentence when it contradicts the
    positional WORKSPACE or an absolute --round-dir."""
    flag = getattr(args, FLAG_DEST, None)
    if flag is None:
        return
    for attr in FOLDER_ATTRS:
        value = getattr(args, attr, None)
        if value is None:
            continue
        given = Path(value)
        if given.is_absolute():
            if given.resolve().parent != Path(flag).resolve():
                option = "--" + attr.replace("_", "-")
                raise HelixError(f"{option} {clean(given)} is not inside --workspace {clean(flag)}; pass the "
                                 "folder's name (opt-round-N, baseline) with --workspace, or drop --workspace")
            return
        joined = Path(flag) / given
        setattr(args, attr, joined if isinstance(value, Path) else str(joined))
        return
    if isinstance(getattr(args, "paths", None), list):
        args.paths.append(Path(flag))
        return
    current = getattr(args, "workspace", None)
    default = getattr(args, _DEFAULT, None)
    positional = current is not None and (default is None or Path(current) != Path(default))
    if current is not None and positional and Path(current).resolve() != Path(flag).resolve():
        raise HelixError(f"two workspaces given: {clean(current)} and --workspace {clean(flag)}; pass one of them")
    args.workspace = Path(flag) if isinstance(current if current is not None else default, Path) else flag
