"""Geomean intervals the promotion rule bootstrapped, kept between runs in .helix/cache/.

Why: with raw samples in the perf files, the promotion rule bootstraps each round's geomean
against the baseline and against the best before it (every case's distribution, 2000 resamples
each): seconds per hundred rounds, paid again by every `helix status` and every cockpit start.
The judged geomean is a pure function of the two sides' records, the metric, the noise margins,
the bootstrap's constants and the code that computes it, so a later run reads it back instead.

The key is a sha256 of all of those (the code as the sealed caches name it: every module's
name, size and mtime, code_identity.package_identity), so an entry is only ever used for the
exact inputs that produced it, and a change of any of them simply misses. The file is derived data, sealed under this user's key
(workspace/sealed.py): one that does not verify counts as empty, so a crafted verdict never
reaches the promotion rule; an entry that is not a valid judged geomean is ignored (and computed
again); it is written atomically, only into a .helix/ folder that already exists as a real folder
of the workspace (an upstream workspace gets no new folder from `helix status`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helix_engine.code_identity import package_identity
from helix_engine.perf.results import Interval, SpeedupEstimate
from helix_engine.workspace import sealed
from helix_engine.workspace.models import PerfRecord

CACHE_FILE = "intervals.sealed"
VERSION = 2  # 2: sealed (workspace/sealed.py)
#: Entries kept in the file beyond those the last run used (other metrics, older margins).
MAX_ENTRIES = 20000
_VERDICTS = ("faster", "slower", "within-noise", "unpaired")

_digests: dict[int, tuple[Sequence[PerfRecord], str]] = {}
_DIGESTS_KEPT = 256
_lock = threading.Lock()


def code_digest() -> str:
    """The code that computes the number: helix_engine's modules as the seal names them
    (code_identity.package_identity), with this file's format version."""
    return f"intervals {VERSION} {package_identity()}"


def records_digest(records: Sequence[PerfRecord]) -> str:
    """sha256 of what the status rule reads of each record (label, averages, error, bench mode,
    samples), once per list of records (loaded records are never changed)."""
    with _lock:
        hit = _digests.get(id(records))
        if hit is not None and hit[0] is records:
            return hit[1]
    parts: list[bytes] = []
    for record in records:  # one update of the bytes it always hashed, in the same order
        samples = record.samples_us or []
        parts.append(repr((record.case_label, record.kernel_avg_time_us, record.total_op_avg_time_us,
                           record.error_message, record.bench_mode, len(samples))).encode())
        parts.append(array("d", samples).tobytes())
    value = hashlib.sha256(b"".join(parts)).hexdigest()
    with _lock:
        if len(_digests) >= _DIGESTS_KEPT:
            del _digests[next(iter(_digests))]
        _digests[id(records)] = (records, value)
    return value


def _valid(value: Any) -> tuple[SpeedupEstimate, float] | None:
    """A stored ``[point, low, high, confidence, verdict, margin]`` as (estimate, margin)."""
    if not isinstance(value, list) or len(value) != 6:
        return None
    point, low, high, confidence, verdict, margin = value
    numbers = (point, low, high, confidence, margin)
    if not all(isinstance(v, float) and math.isfinite(v) for v in numbers) or verdict not in _VERDICTS:
        return None
    if not (0.0 < low <= point <= high and 0.0 < confidence < 1.0 and margin >= 0.0):
        return None
    try:
        estimate = SpeedupEstimate(statistic="mean", point=point, verdict=verdict,
                                   interval=Interval(low=low, high=high, confidence=confidence))
    except ValueError:
        return None
    return estimate, margin


class IntervalCache:
    """The judged geomeans of one workspace, by key (see the module docstring)."""

    def __init__(self, workspace: Path | None) -> None:
        """The cache of ``workspace`` (None: kept in memory only); its file is read on first use."""
        self.workspace = workspace
        self._entries: dict[str, Any] | None = None if workspace is not None else {}
        self._used: set[str] = set()
        self._dirty = False
        self._lock = threading.Lock()

    def _loaded(self) -> dict[str, Any]:
        """The entries as the file holds them: none when there is no file, or it cannot be read
        safely, or it is not ours (call with the lock held)."""
        if self._entries is None:
            self._entries = _read(Path(self.workspace)) if self.workspace is not None else {}
        return self._entries

    @staticmethod
    def key(reference: Sequence[PerfRecord], candidate: Sequence[PerfRecord], metric: str, margins: Any) -> str:
        margins_text = margins.model_dump_json() if hasattr(margins, "model_dump_json") else repr(margins)
        from helix_engine.perf import stats

        parts = [code_digest(), stats.DEFAULT_RESAMPLES, stats.DEFAULT_SEED, stats.DEFAULT_CONFIDENCE, metric,
                 margins_text, records_digest(reference), records_digest(candidate)]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get(self, key: str) -> tuple[SpeedupEstimate, float] | None:
        with self._lock:
            found = _valid(self._loaded().get(key))
            if found is not None:
                self._used.add(key)
            return found

    def put(self, key: str, estimate: SpeedupEstimate, margin: float) -> None:
        interval = estimate.interval
        if interval is None or estimate.verdict is None:
            return
        value = [float(estimate.point), float(interval.low), float(interval.high), float(interval.confidence),
                 estimate.verdict, float(margin)]
        if _valid(value) is None:
            return
        with self._lock:
            self._loaded()[key] = value
            self._used.add(key)
            self._dirty = True

    def save(self) -> None:
        """Write the entries (those used first) when something new was computed. Never raises:
        the cache only saves time."""
        with self._lock:
            if not self._dirty or self.workspace is None:
                return
            entries = self._loaded()
            kept = {k: v for k, v in entries.items() if k in self._used}
            for k, v in entries.items():
                if len(kept) >= MAX_ENTRIES:
                    break
                kept.setdefault(k, v)
            self._dirty = False
        try:
            _write(Path(self.workspace), {"version": VERSION, "entries": kept})
        except (OSError, ValueError):
            pass


def _read(workspace: Path) -> dict[str, Any]:
    data = sealed.read(workspace, CACHE_FILE)
    entries = data.get("entries") if isinstance(data, dict) and data.get("version") == VERSION else None
    return dict(entries) if isinstance(entries, dict) else {}


def _write(workspace: Path, data: dict[str, Any]) -> None:
    """Into .helix/cache/ of the workspace, sealed as every cache file is (workspace/sealed.py:
    atomic, only through real folders inside the workspace, no fsync: a lost write is a miss)."""
    sealed.write(workspace, CACHE_FILE, data)
