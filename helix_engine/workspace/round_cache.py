"""Per-round summaries kept between runs in ``.helix/cache/rounds.sealed`` (issue 12).

Why: `helix status` and the cockpit judged every round again on every start (read its perf file,
pair it with the baseline's, compare, promote): 1-3 s and 150 MiB at 1000 rounds. What the status
rules and the promotion rule keep of a round is small (its comparison's numbers without the cases,
the judged geomeans, the warnings and problems), and it is a pure function of a few files. So each
round's summary is stored under a key made of the identity (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)
of every file it was computed from: round-state.json, the perf file, its paired sidecar (and then
the baseline operator it pairs against), plus a context shared by all rounds (the code that
computes it, the noise margins, the baseline's records, the metric). A round whose key differs is
judged again; nothing else is. The identities are taken before a file is read, so a file written
while it was read only makes the next run miss. The perf file counts by its records' content once
read (interval_cache.records_digest, kept beside its problems under its identity): a rewrite with
the same records re-reads that file and judges nothing again, not even the rounds compared with it.
Beside the summaries: each round folder's validated round-state.json (a round whose names are all
plain is built from it without a read), and the parses of opt-note.md and .helix/state.json, each
under its file's identity.

The entries are the objects themselves, pickled and sealed under this user's key
(workspace/sealed.py): a file that does not verify is never unpickled and counts as no file, so
what comes back is what this user's helix computed, with no field to check again. It is written
atomically, only into a ``.helix/`` folder that already is a real folder of the workspace, and an
entry never changes a number (a hit yields what judging the same files again yields).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import field
from pathlib import Path
from typing import Any

from helix_engine.code_identity import package_identity
from helix_engine.record import record
from helix_engine.workspace import sealed
from helix_engine.workspace.models import Problem
from helix_engine.workspace.status_cache import RECENT_S

CACHE_FILE = "rounds.sealed"
#: The entries changed since rounds.sealed was written, on top of it (see RoundCache.save).
DELTA_FILE = "rounds.delta.sealed"
#: Past this many entries in the delta, rounds.sealed is written again whole.
DELTA_MAX = 64
VERSION = 9  # 2: the "reads" section (round folder reads); 3: reads as text; 4: perf entries keep the records'
# digest; 5: and their compact case values (values_out); 6: the values as four strings; 7: and whether
# the records carry samples; 8: sealed pickles of the objects (reads: the validated state; "files"); 9: the
# file identities hold the ctime
_MAX_BYTES = 256 * 1024 * 1024



def code_digest() -> str:
    """The code that computes a summary: helix_engine's modules as the seal names them
    (code_identity.package_identity), with this file's format version."""
    return f"rounds {VERSION} {package_identity()}"


@record
class RoundSummary:
    """What the status rules and the promotion rule keep of one round (no perf records): why it
    was skipped, its warnings, its comparison with the baseline (cases dropped), its rank for the
    best round, and ``judged``: the promotion rule's judged geomeans, vs the baseline (key
    "baseline") and vs a best before it (key: that round's number → its records' key, judged)."""

    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)
    result: Any = None  # status_pairing.RoundResult, its comparison without cases
    rank: tuple[float, float] | None = None  # best_round's key when the round is comparable
    judged: dict[Any, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------ encoding


def values_out(values: Any) -> list[Any] | None:
    """A round's compact case values (evaluation.CaseValues) as a perf entry keeps them: [bench
    mode, latency ids, kernel averages, total-op averages, sampled], each column one string, ``|``
    between cells ("" for an absent average), sampled a bool. Strings, not tuples of floats: a
    load never needs them (a reload judging rounds against a new best does,
    status_rules.view_values), and 1000 rounds' ~40k floats would be made on every load. None: not
    kept (a label with a ``|``: that round is compared from records)."""
    if values is None or any(SEP in lid for lid in values.ids):
        return None
    return [values.bench_mode, SEP.join(values.ids), _cells(values.kernel), _cells(values.total), values.sampled]


SEP = "|"


def _cells(column: tuple[float | None, ...]) -> str:
    return SEP.join("" if v is None else repr(v) for v in column)


def values_in(value: Any) -> Any:
    """A perf entry's stored values back as evaluation.CaseValues; None when they are not a
    whole, finite column (then the round is compared from its records)."""
    from helix_engine.perf.evaluation import CaseValues
    from helix_engine.workspace.status_pairing import shared_ids

    try:
        bench_mode, id_cells, kernel_cells, total_cells, sampled = value
        if not (isinstance(id_cells, str) and (bench_mode is None or isinstance(bench_mode, str))
                and type(sampled) is bool):
            return None
        ids = tuple(id_cells.split(SEP)) if id_cells else ()
        kernel, total = _column(kernel_cells, len(ids)), _column(total_cells, len(ids))
    except (ValueError, TypeError, AttributeError):
        return None
    if kernel is None or total is None or any(a >= b for a, b in zip(ids, ids[1:])):
        return None  # the pairing reads ids sorted and unique
    return CaseValues(shared_ids(ids), kernel, total, bench_mode, sampled)


def _column(cells: str, n: int) -> tuple[float | None, ...] | None:
    found = cells.split(SEP) if n else []
    if len(found) != n or (not n and cells):
        return None
    if all(found):  # the usual column, every average present: parsed and checked in C (a load reads 1000)
        out: tuple[float | None, ...] = tuple(map(float, found))
        return out if all(map(math.isfinite, out)) else None  # type: ignore[arg-type]  # no None in it
    out = tuple(float(cell) if cell else None for cell in found)
    return out if all(v is None or math.isfinite(v) for v in out) else None


def slim(comparison: Any) -> Any:
    """A comparison as a summary keeps it: every number status, the tree and the ledger read, but
    not the per-case results (the perf pane compares the records again when it shows a round)."""
    if comparison is None:
        return None
    paired = comparison.paired
    update: dict[str, Any] = {"cases": []}
    if paired is not None:
        update["paired"] = dataclasses.replace(paired, cases=[])
    return dataclasses.replace(comparison, **update)


# ---------------------------------------------------------------------------------- the file


class RoundCache:
    """The summaries of one workspace's rounds for one full load: entries are looked up while the
    load reads each round (its state, its perf-file problems), opt-note.md and .helix/state.json,
    and evaluates each round (summaries), then written back when anything was computed anew
    (``save``)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._base_id, self._data, self._delta = _read(workspace)
        self._hits: dict[int, tuple[RoundSummary, dict[Any, Any]]] = {}  # summaries as read, to save unchanged
        self.perf: dict[int, list[Any]] = {}  # round -> [key, problems, digest, values], every round asked
        self.reads: dict[int, list[Any]] = {}  # round -> [key, its validated RoundState]
        self.files: dict[str, list[Any]] = {}  # opt-note.md, state.json -> [key, what reading it gave]
        self.shared: dict[str, int | None] = {}  # signatures of names outside round folders, this load
        self.dirty = False

    @property
    def keeps(self) -> bool:
        """Whether a save can write (sealed.write_bytes's own condition)."""
        return sealed.can_keep(self.workspace)

    def read(self, n: int, key: list[Any]) -> Any:
        """round-state.json's validated state as round n's folder read found it last time
        (round_reading.load_round's memo), when its key (round-state.json's identity, the
        operator stem) is the stored one."""
        found = self._data["reads"].get(n)
        if found is None or found[0] != key:
            return None
        self.reads[n] = found
        return found[1]

    def put_read(self, n: int, key: list[Any], state: Any) -> None:
        if _settled(key[0]):
            self.reads[n] = [key, state]
            self.dirty = True

    def file(self, name: str, key: list[Any]) -> Any:
        """What reading the workspace file ``name`` gave last time (a parse, with its problems),
        when its key (the file's identity) is the stored one; None otherwise."""
        found = self._data["files"].get(name)
        if found is None or found[0] != key:
            return None
        self.files[name] = found
        return found[1]

    def put_file(self, name: str, key: list[Any], value: Any) -> None:
        if _settled(key):
            self.files[name] = [key, value]
            self.dirty = True

    def perf_problems(self, n: int, key: list[Any]) -> tuple[list[Problem], str, list[Any] | None] | None:
        """The problems reading round ``n``'s perf file gave, its records' content digest
        (interval_cache.records_digest: what the promotion rule's judgements are keyed by) and
        their compact values as stored (values_out; decoded when first used, values_in), when its
        key is the stored one."""
        found = self._data["perf"].get(n)
        if found is None or found[0] != key or not (found[3] is None or isinstance(found[3], list)):
            return None
        values = found[3]
        if values and isinstance(values[0], str) and isinstance(values[1], str):
            # one copy of the ids and the bench mode for every round with the same cases
            values[0], values[1] = sys.intern(values[0]), sys.intern(values[1])
        self.perf[n] = found
        return found[1], found[2], values

    def put_perf(self, n: int, key: list[Any], problems: list[Problem], digest: str, values: Any = None) -> None:
        if _settled(key[1]):
            self.perf[n] = [key, list(problems), digest, values_out(values)]
            self.dirty = True

    def summary(self, n: int, context: list[Any], key: list[Any]) -> RoundSummary | None:
        if self._data["context"] != context:
            return None
        found = self._data["rounds"].get(n)
        if found is None or found[0] != key:
            return None
        summary: RoundSummary = found[1]
        self._hits[n] = (summary, dict(summary.judged))
        return summary

    def save(self, context: list[Any], summaries: dict[int, tuple[list[Any], RoundSummary]]) -> None:
        """Write every current round's entry. Never raises: the cache only saves time. When a few
        entries changed since rounds.sealed was written (one perf file rewritten), only they are
        written, into rounds.delta.sealed under rounds.sealed's identity (the whole file rewritten
        costs more than the rest of a 1000-round status after one change); past DELTA_MAX, the
        whole file. A summary judged from a file changed in the last seconds is not kept (its key is
        that file's identity: RECENT_NS)."""
        if self._save_delta(context, summaries):
            self.dirty = False
            return
        summaries = {n: entry for n, entry in summaries.items() if _key_settled(entry[0])}
        data = {"version": VERSION, "context": context, "perf": dict(sorted(self.perf.items())),
                "reads": dict(sorted(self.reads.items())), "files": dict(self.files),
                "rounds": {n: [key, s] for n, (key, s) in sorted(summaries.items())}}
        if sealed.write(self.workspace, CACHE_FILE, data):
            sealed.remove(self.workspace, DELTA_FILE)
        self.dirty = False

    def _save_delta(self, context: list[Any], summaries: dict[int, tuple[list[Any], RoundSummary]]) -> bool:
        if self._base_id is None or self._data["context"] != context:
            return False
        delta: dict[str, dict[Any, Any]] = {part: dict(self._delta.get(part, {})) for part in _PARTS}
        for part, entries in (("perf", self.perf), ("reads", self.reads), ("files", self.files)):
            stored = self._data[part]
            for n, entry in entries.items():
                if entry is not stored.get(n):  # put anew this load (a hit is the stored object)
                    delta[part][n] = entry
        for n, (key, summary) in summaries.items():
            hit = self._hits.get(n)
            if hit is not None and hit[0] is summary and _same_judged(hit[1], summary.judged):
                continue
            if _key_settled(key):
                delta["rounds"][n] = [key, summary]
        if sum(len(v) for v in delta.values()) > DELTA_MAX:
            return False
        return sealed.write(self.workspace, DELTA_FILE, {"version": VERSION, "base": self._base_id,
                                                         "context": context, **delta})

    def release(self) -> None:
        """Drop what was read (a loaded snapshot keeps no copy of the file)."""
        self._data, self._delta, self._hits = _empty(), {}, {}
        self.perf, self.reads, self.files = {}, {}, {}


_PARTS = ("perf", "reads", "files", "rounds")
#: A file changed this recently is not kept by its identity: a second write of the same size within
#: one timestamp tick would look unchanged (the stored output's guard, status_cache.RECENT_S: some
#: filesystems keep whole or even two seconds).
RECENT_NS = int(RECENT_S * 1e9)


def _key_settled(key: Any) -> bool:
    """Whether every file identity in a summary's key (state, perf file, sidecar, operator) is
    settled (`_settled`); a None is no file."""
    if isinstance(key, list):
        if len(key) == 5 and all(type(v) is int for v in key):
            return _settled(key)
        return all(_key_settled(part) for part in key)
    return True


def _settled(ident: Any) -> bool:
    """Whether a file identity ([dev, ino, size, mtime_ns, ctime_ns]: records.file_id) is old enough to
    stand for the bytes."""
    import time

    return isinstance(ident, list) and len(ident) == 5 and max(ident[3], ident[4]) < time.time_ns() - RECENT_NS


def _empty() -> dict[str, Any]:
    return {"context": None, **{part: {} for part in _PARTS}}


def _same_judged(before: dict[Any, Any], now: dict[Any, Any]) -> bool:
    return len(before) == len(now) and all(now.get(k) is v for k, v in before.items())


def _read(workspace: Path) -> tuple[list[int] | None, dict[str, Any], dict[str, Any]]:
    """(rounds.sealed's identity, its entries with the delta's over them, the delta's entries)."""
    from helix_engine.workspace.records import file_id

    base_id = file_id(sealed.cache_path(workspace, CACHE_FILE))  # before reading: a file replaced
    data = _sections(sealed.read(workspace, CACHE_FILE, max_bytes=_MAX_BYTES))  # meanwhile makes the next delta a miss
    if data is None:
        return None, _empty(), {}
    delta = _sections(sealed.read(workspace, DELTA_FILE, max_bytes=_MAX_BYTES)) if base_id is not None else None
    if delta is None or delta.get("base") != base_id or delta["context"] != data["context"]:
        return base_id, data, {}
    for part in _PARTS:
        data[part].update(delta[part])
    return base_id, data, delta


def _sections(data: Any) -> dict[str, Any] | None:
    """A sealed cache of this version (sealed by this user's helix: its entries need no check)."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    for part in _PARTS:
        if not isinstance(data.get(part), dict):
            data[part] = {}
    data.setdefault("context", None)
    return data
