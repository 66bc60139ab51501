"""A round's perf records, read when something asks for them, not kept by the snapshot.

Why (issue 12): a 1000-round snapshot that held every round's records kept ~20k pydantic records
alive (150 MiB in `helix status`, the cockpit's RSS). The snapshot keeps a small summary per
round (workspace/round_cache.py); a pane or a comparison that needs a round's records reads them
here, through the safe reader. The last few lists read are kept (a pane asks again while it is
shown), keyed by the file's identity, so a file rewritten since is read again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from helix_engine.workspace.models import PerfRecord
from helix_engine.workspace.reading import seen

#: Record lists kept (a pane's round, its parent, the baseline's comparisons in flight).
KEPT = 8

#: [st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns], compared as a whole. The ctime because no one
#: can set it: a file written back in place with its old size and mtime (cp -p, touch -r) has a new one.
FileId = list[int]

_lock = threading.Lock()
_kept: OrderedDict[tuple[str, tuple[int, ...]], list[PerfRecord]] = OrderedDict()


def file_id(path: Path | str | None) -> FileId | None:
    """The identity of the file a name leads to now (the name itself, a final link not followed):
    any write, replace or truncate changes it. None when there is no such file."""
    if path is None:
        return None
    try:
        _, dev, ino, size, mtime_ns, ctime_ns = seen(os.fspath(path))
    except (OSError, ValueError):
        return None
    return [dev, ino, size, mtime_ns, ctime_ns]


def read_records(path: Path, workspace: Path) -> list[PerfRecord]:
    """The records of the perf file at ``path`` as it is now ([] when unreadable; the snapshot
    already holds the file's problems)."""
    ident = file_id(path)
    key = (os.path.abspath(path), tuple(ident) if ident is not None else ())
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found
    from helix_engine.workspace.reading import load_session, read_perf_safe

    with load_session():
        records, _ = read_perf_safe(path, workspace)
    if ident is None:
        return records
    with _lock:
        _kept[key] = records
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return records


def forget() -> None:
    """Drop the kept lists (tests; a cockpit that closes a workspace)."""
    with _lock:
        _kept.clear()


class LazyRecords(Sequence[PerfRecord]):
    """A round's records as a sequence that reads them on first use (the promotion rule passes
    every round's records and reads only those of a round it must compare again)."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def resolve(self) -> list[PerfRecord]:
        """The records as a list, read now."""
        return self._view.perf

    @overload
    def __getitem__(self, index: int) -> PerfRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[PerfRecord]: ...

    def __getitem__(self, index: int | slice) -> PerfRecord | Sequence[PerfRecord]:
        return self._view.perf[index]

    def __len__(self) -> int:
        return len(self._view.perf)

    def __iter__(self) -> Iterator[PerfRecord]:
        return iter(self._view.perf)
