"""Job outputs that are folders (a profile run, an IR capture) are written to a staging folder
beside their final place and renamed onto it only when the job passed, so a cancelled, timed-out
or crashed run never leaves a partial folder that a reader (profile-report's "newest run",
ir list-stages) would take for a real one. The rename is atomic because both names are in the
same folder.

A staging folder is ``.<final name>.helix-<host>-<pid>.partial``; one whose writer is gone (same
host, pid no longer alive) is a leftover of a killed helix and is removed by the next run that
stages into the same folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
from pathlib import Path

_STAGED = re.compile(r"\.(?P<name>.+)\.helix-(?P<host>[A-Za-z0-9-]*)-(?P<pid>[0-9]+)\.partial")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:40]


def staging_dir(final: Path) -> Path:
    """The staging folder for ``final`` (same parent, hidden name, this process's mark)."""
    final = Path(final)
    return final.parent / f".{final.name}.helix-{_host()}-{os.getpid()}.partial"


def promote(staged: Path, final: Path) -> None:
    """Rename ``staged`` onto ``final`` (which must not exist); then the folder is durable."""
    staged, final = Path(staged), Path(final)
    if final.exists() or final.is_symlink():
        raise FileExistsError(f"{final} appeared while the job ran; the output stays in {staged}")
    os.rename(staged, final)
    with contextlib.suppress(OSError):
        fd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def discard(staged: Path) -> None:
    """Remove a staging folder of a failed run (never following a symlink)."""
    staged = Path(staged)
    if staged.is_symlink() or staged.is_file():
        with contextlib.suppress(OSError):
            staged.unlink()
    elif staged.is_dir():
        shutil.rmtree(staged, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove staging folders in ``folder`` whose writer (this host, that pid) is gone."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    host = _host()
    for entry in entries:
        match = _STAGED.fullmatch(entry.name)
        if match is None or match["host"] != host or _alive(int(match["pid"])):
            continue
        if entry.is_symlink() or not entry.is_dir():
            continue
        discard(entry)
        removed.append(entry)
    return removed
