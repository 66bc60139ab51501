"""A full disk (ENOSPC) or an exhausted quota (EDQUOT), said as what to do: free space where.

Any command can hit it (a state write, a job's log, a perf file); the CLI's one handler
(commands/run.py) turns it into ``disk full: free space on <where> and run again`` instead of
"failed unexpectedly … report it", since nothing is wrong with helix. Writers in
workspace/files.py name the file they were writing on the error, so ``<where>`` can say
which file system (mount point and device) filled up.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

DISK_FULL_ERRNOS: frozenset[int] = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The ENOSPC/EDQUOT error ``exc`` is or was raised from (``__cause__``/``__context__``)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def name_the_file(exc: OSError, path: Path | str) -> None:
    """Record on a disk-full error which file was being written (os.write names none)."""
    if is_disk_full(exc):
        with contextlib.suppress(AttributeError, TypeError):
            exc.filename = str(path)


def mount_point(path: Path | str) -> Path | None:
    """The mount point of the file system holding ``path`` (its nearest existing folder)."""
    try:
        here = Path(os.path.abspath(path))
        while not here.exists() and here != here.parent:
            here = here.parent
        while not os.path.ismount(here) and here != here.parent:
            here = here.parent
    except (OSError, ValueError):
        return None
    return here


def _device_of(mount: Path) -> str | None:
    """The device mounted at ``mount`` (``/dev/nvme0n1p2``), from /proc/self/mounts; None off Linux."""
    found = None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) >= 2 and _unescape(fields[1]) == str(mount):
                    found = _unescape(fields[0])  # the last mount on a point is the one in use
    return found


def _unescape(field: str) -> str:
    """/proc/self/mounts writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def where_text(path: Path | str | None) -> str:
    """``/data (device /dev/sdb1, which holds /data/ws/opt-round-1/perf.json)``, as much as known."""
    if not path:
        return "the disk helix was writing to"
    mount = mount_point(path)
    if mount is None:
        return str(path)
    device = _device_of(mount)
    details = [f"device {device}"] if device and device.startswith("/") else []
    if Path(os.path.abspath(path)) != mount:
        details.append(f"which holds {path}" if details else f"the file system holding {path}")
    return f"{mount} ({', '.join(details)})" if details else str(mount)


def disk_full_text(exc: OSError, path: Path | str | None = None) -> str:
    """``disk full: free space on <where>``, without the ``and run again`` the caller may add."""
    what = "disk full (your disk quota is used up)" if exc.errno == errno.EDQUOT else "disk full"
    named = path or exc.filename
    return f"{what}: free space on {where_text(os.fsdecode(named) if isinstance(named, (str, bytes, Path)) else None)}"
