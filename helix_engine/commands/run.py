"""How every command function runs: ``--workspace`` folded in, errors as sentences, exit codes.

Its own module, importing no argparse, so the `helix status` fast path (commands/status.py) runs a
command the way the CLI does without building it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from helix_engine.commands.workspace_flag import apply_workspace_flag
from helix_engine.diskfull import disk_full_cause, disk_full_text
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def run_command(func: Callable[[Any], Any], args: Any) -> int:
    """``func(args)`` as an exit code: a HelixError is its sentence on stderr (1), Ctrl-C 130, a
    closed pipe 0, a full disk (ENOSPC/EDQUOT, however deep) where to free space (1), any other
    exception one line that says how to get the traceback (1)."""
    try:
        apply_workspace_flag(args)  # --workspace/-w into what the command reads (commands/workspace_flag.py)
        return int(func(args) or 0)
    except HelixError as exc:  # its message may name workspace paths and values
        full = disk_full_cause(exc)
        if full is not None and "disk full" not in str(exc):
            print(f"error: {clean(disk_full_text(full), multiline=True)} and run again ({clean(exc, multiline=True)})",
                  file=sys.stderr)
        else:
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
        full = disk_full_cause(exc)
        if full is not None:  # nothing for helix to fix: say where to make room
            print(f"error: {clean(disk_full_text(full), multiline=True)} and run again", file=sys.stderr)
            return 1
        print(
            f"error: helix failed unexpectedly ({type(exc).__name__}: {clean(exc, multiline=True)}). Run again "
            "with HELIX_DEBUG=1 for the traceback and report it.",
            file=sys.stderr,
        )
        return 1
