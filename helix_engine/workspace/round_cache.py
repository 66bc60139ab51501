"""Per-round summaries kept between runs in ``.helix/cache/rounds.json`` (issue 12).

Why: `helix status` and the cockpit judged every round again on every start (read its perf file,
pair it with the baseline's, compare, promote): 1-3 s and 150 MiB at 1000 rounds. What the status
rules and the promotion rule keep of a round is small (its comparison's numbers without the cases,
the judged geomeans, the warnings and problems), and it is a pure function of a few files. So each
round's summary is stored under a key made of the identity (st_dev, st_ino, st_size, st_mtime_ns)
of every file it was computed from: round-state.json, the perf file, its paired sidecar (and then
the baseline operator it pairs against), plus a context shared by all rounds (the code that
computes it, the noise margins, the baseline's records, the metric). A round whose key differs is
judged again; nothing else is. The identities are taken before a file is read, so a file written
while it was read only makes the next run miss. The perf file counts by its records' content once
read (interval_cache.records_digest, kept beside its problems under its identity): a rewrite with
the same records re-reads that file and judges nothing again, not even the rounds compared with it.

The file is workspace data and only ever saves time: it is read through the safe reader, every
entry is checked (types, then the results' own checked reading, from_json), anything odd is a miss, it is
written atomically, only into a ``.helix/`` folder that already is a real folder of the workspace,
and an entry never changes a number (a hit yields what judging the same files again yields).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.code_identity import modules_digest
from helix_engine.workspace import layout
from helix_engine.workspace.models import Problem

CACHE_FILE = "rounds.json"
#: The entries changed since rounds.json was written, on top of it (see RoundCache.save).
DELTA_FILE = "rounds.delta.json"
#: Past this many entries in the delta, rounds.json is written again whole.
DELTA_MAX = 64
VERSION = 7  # 2: the "reads" section (round folder reads); 3: reads as text; 4: perf entries keep the records'
# digest; 5: and their compact case values (values_out); 6: the values as four strings; 7: and whether
# the records carry samples
#: The code whose output an entry holds: reading a round, pairing, the core, the promotion rule.
_CODE = ("workspace/round_cache.py", "workspace/status_rules.py", "workspace/status_pairing.py",
         "workspace/round_reading.py", "workspace/reading.py", "workspace/models.py", "perf/artifact.py",
         "perf/evaluation.py", "perf/formulas.py", "perf/margins.py", "perf/promotion.py", "perf/results.py",
         "perf/paired.py", "perf/stats.py")
_SEVERITIES = ("error", "warning")
_MAX_BYTES = 256 * 1024 * 1024



def code_digest() -> str:
    """sha256 of the modules that compute a summary (read once per process)."""
    return modules_digest(f"rounds {VERSION}", _CODE)


@dataclass
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


def _problem_out(p: Problem) -> list[Any]:
    return [p.file, p.message, p.line, p.severity]


def _problem_in(value: Any) -> Problem:
    file, message, line, severity = value
    if not (isinstance(file, str) and isinstance(message, str) and severity in _SEVERITIES
            and (line is None or (isinstance(line, int) and not isinstance(line, bool)))):
        raise ValueError("not a problem")
    return Problem(file, message, line, severity)


def problems_out(problems: list[Problem]) -> list[Any]:
    return [_problem_out(p) for p in problems]


def problems_in(value: Any) -> list[Problem]:
    if not isinstance(value, list):
        raise ValueError("not a list")
    return [_problem_in(v) for v in value]


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return list(value)


def _number(value: Any) -> float:
    if not isinstance(value, float) or not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _judged_out(judged: Any) -> list[Any]:
    geo = judged.geomean
    return [geo.to_json(exclude_defaults=True) if geo is not None else None, judged.margin]


def _judged_in(value: Any) -> Any:
    from helix_engine.perf.promotion import Judged
    from helix_engine.perf.results import SpeedupEstimate

    geo, margin = value
    return Judged(SpeedupEstimate.from_json(geo) if geo is not None else None, _number(margin))


def values_out(values: Any) -> list[Any] | None:
    """A round's compact case values (evaluation.CaseValues) as a perf entry keeps them: [bench
    mode, latency ids, kernel averages, total-op averages, sampled], each column one string, ``|``
    between cells ("" for an absent average), sampled a bool. Strings, not lists: 1000 rounds' values as JSON lists made
    rounds.json ~6x slower to parse, and a load never needs them (a reload judging rounds against
    a new best does, status_rules.view_values); ``|``, not a tab: an escaped character slows the
    parse of a string. None: not kept (a label with a ``|``: that round is compared from records)."""
    if values is None or any(SEP in lid for lid in values.ids):
        return None
    return [values.bench_mode, SEP.join(values.ids), _cells(values.kernel), _cells(values.total), values.sampled]


SEP = "|"


def _cells(column: tuple[float | None, ...]) -> str:
    return SEP.join("" if v is None else repr(v) for v in column)


def values_in(value: Any) -> Any:
    """A perf entry's stored values back as evaluation.CaseValues; None when they are not ours
    (then the round is compared from its records: never a wrong number from an odd entry)."""
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


def summary_out(summary: RoundSummary) -> dict[str, Any]:
    result = summary.result
    judged: dict[str, Any] = {}
    for key, value in summary.judged.items():
        if key == "baseline":
            judged["baseline"] = _judged_out(value)
        else:
            judged[str(key)] = [value[0], _judged_out(value[1])]
    return {
        "skipped": summary.skipped,
        "warnings": summary.warnings,
        "rank": list(summary.rank) if summary.rank is not None else None,
        "result": None if result is None else [
            result.comparable, result.warnings, problems_out(result.problems),
            result.comparison.to_json(exclude_defaults=True) if result.comparison else None],
        "judged": judged,
    }


def summary_in(value: Any) -> RoundSummary:
    """An entry back as a RoundSummary; raises ValueError (or TypeError) on anything odd."""
    from helix_engine.perf.results import RoundEvaluation
    from helix_engine.workspace.status_pairing import RoundResult

    if not isinstance(value, dict):
        raise ValueError("not an object")
    skipped = value["skipped"]
    if skipped is not None and not isinstance(skipped, str):
        raise ValueError("skipped")
    rank = value["rank"]
    if rank is not None:
        geo, mean = rank
        rank = (_number(geo), _number(mean))
    result = None
    raw = value["result"]
    if raw is not None:
        comparable, warnings, problems, comparison = raw
        if not isinstance(comparable, bool):
            raise ValueError("comparable")
        if isinstance(comparison, dict):  # rule, notes, margin text: the same few strings in every round
            for name, text in comparison.items():
                if isinstance(text, str):
                    comparison[name] = sys.intern(text)
        result = RoundResult(RoundEvaluation.from_json(comparison) if comparison is not None else None,
                             comparable, _strings(warnings), problems_in(problems))
    judged: dict[Any, Any] = {}
    raw_judged = value["judged"]
    if not isinstance(raw_judged, dict):
        raise ValueError("judged")
    for key, item in raw_judged.items():
        if key == "baseline":
            judged["baseline"] = _judged_in(item)
        else:
            records_key, inner = item
            judged[int(key)] = (records_key, _judged_in(inner))
    return RoundSummary(skipped, _strings(value["warnings"]), result, rank, judged)


# ---------------------------------------------------------------------------------- the file


class RoundCache:
    """The summaries of one workspace's rounds for one full load: entries are looked up while the
    load reads each round (perf-file problems) and evaluates it (summaries), then written back
    when anything was computed anew (``save``)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._base_id, self._data, self._delta = _read(workspace)
        self._hits: dict[int, tuple[RoundSummary, dict[Any, Any]]] = {}  # summaries as read, to save unchanged
        self.perf: dict[int, list[Any]] = {}  # round -> [key, problems as stored], every round asked
        self.reads: dict[int, list[Any]] = {}  # round -> [key, round-state.json's object as text]
        self.shared: dict[str, int | None] = {}  # signatures of names outside round folders, this load
        self.dirty = False

    @property
    def keeps(self) -> bool:
        """Whether a save can write (write_cache_text's own condition)."""
        return can_keep(self.workspace)

    def read(self, n: int, key: list[Any]) -> str | None:
        """round-state.json's object as JSON text, as round n's folder read found it last time
        (round_reading.load_round's memo), when its key (round-state.json's identity, the
        operator stem) is the stored one; the caller parses and validates it again. Text, not
        objects: 1000 rounds' state objects held while a load runs were ~3 MiB more peak memory."""
        found = self._data.get("reads", {}).get(str(n))
        if not (isinstance(found, list) and len(found) == 2 and found[0] == key and isinstance(found[1], str)):
            return None
        self.reads[n] = found
        return found[1]

    def put_read(self, n: int, key: list[Any], data: dict[str, Any]) -> None:
        try:  # an object save could not write (NaN, odd nesting) is not kept
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            return
        self.reads[n] = [key, text]
        self.dirty = True

    def perf_problems(self, n: int, key: list[Any]) -> tuple[list[Problem], str, list[Any] | None] | None:
        """The problems reading round ``n``'s perf file gave, its records' content digest
        (interval_cache.records_digest: what the promotion rule's judgements are keyed by) and
        their compact values as stored (values_out; checked when first used, values_in), when its
        key is the stored one."""
        found = self._data.get("perf", {}).get(str(n))
        if isinstance(found, list) and len(found) == 4 and found[0] == key and _is_digest(found[2]) \
                and (found[3] is None or isinstance(found[3], list)):
            try:
                problems = problems_in(found[1])
            except (ValueError, TypeError):
                return None
            values = found[3]
            if values is not None and len(values) == 5 and isinstance(values[0], str) and isinstance(values[1], str):
                values[0], values[1] = sys.intern(values[0]), sys.intern(values[1])  # one copy for every round
            self.perf[n] = found
            return problems, found[2], values
        return None

    def put_perf(self, n: int, key: list[Any], problems: list[Problem], digest: str, values: Any = None) -> None:
        self.perf[n] = [key, problems_out(problems), digest, values_out(values)]
        self.dirty = True

    def summary(self, n: int, context: list[Any], key: list[Any]) -> RoundSummary | None:
        if self._data.get("context") != context:
            return None
        found = self._data.get("rounds", {}).get(str(n))
        if not (isinstance(found, list) and len(found) == 2 and found[0] == key):
            return None
        try:
            summary = summary_in(found[1])
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError):
            return None
        self._hits[n] = (summary, dict(summary.judged))
        return summary

    def save(self, context: list[Any], summaries: dict[int, tuple[list[Any], RoundSummary]]) -> None:
        """Write every current round's entry. Never raises: the cache only saves time. When a few
        entries changed since rounds.json was written (one perf file rewritten), only they are
        written, into rounds.delta.json under rounds.json's identity (1.5 MB rewritten and 1000
        summaries encoded again cost ~35 ms at 1000 rounds); past DELTA_MAX, the whole file."""
        try:
            if self._save_delta(context, summaries):
                self.dirty = False
                return
        except (OSError, ValueError, TypeError, RecursionError):
            pass
        data = {"version": VERSION, "context": context,
                "perf": {str(n): entry for n, entry in sorted(self.perf.items())},
                "reads": {str(n): entry for n, entry in sorted(self.reads.items())},
                "rounds": {str(n): [key, summary_out(s)] for n, (key, s) in sorted(summaries.items())}}
        try:
            _write(self.workspace, data)
            _remove_delta(self.workspace)
        except (OSError, ValueError, TypeError, RecursionError):
            pass
        self.dirty = False

    def _save_delta(self, context: list[Any], summaries: dict[int, tuple[list[Any], RoundSummary]]) -> bool:
        if self._base_id is None or self._data.get("context") != context:
            return False
        delta = {part: dict(self._delta.get(part, {})) for part in ("perf", "reads", "rounds")}
        for part, entries in (("perf", self.perf), ("reads", self.reads)):
            stored = self._data.get(part, {})
            for n, entry in entries.items():
                if entry is not stored.get(str(n)):  # put anew this load (a hit is the stored object)
                    delta[part][str(n)] = entry
        for n, (key, summary) in summaries.items():
            hit = self._hits.get(n)
            if hit is not None and hit[0] is summary and _same_judged(hit[1], summary.judged):
                continue
            delta["rounds"][str(n)] = [key, summary_out(summary)]
        if sum(len(v) for v in delta.values()) > DELTA_MAX:
            return False
        write_cache_text(self.workspace, DELTA_FILE, json.dumps(
            {"version": VERSION, "base": self._base_id, "context": context, **delta},
            separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n")
        return True

    def release(self) -> None:
        """Drop what was read (a loaded snapshot keeps no copy of the file)."""
        self._data, self._delta, self._hits = {}, {}, {}
        self.perf = {}
        self.reads = {}


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _same_judged(before: dict[Any, Any], now: dict[Any, Any]) -> bool:
    return len(before) == len(now) and all(now.get(k) is v for k, v in before.items())


def _read(workspace: Path) -> tuple[list[int] | None, dict[str, Any], dict[str, Any]]:
    """(rounds.json's identity, its entries with the delta's over them, the delta's entries)."""
    from helix_engine.workspace.records import file_id

    path = workspace / layout.HELIX_DIR / layout.CACHE_DIR / CACHE_FILE
    base_id = file_id(path)  # before reading: a file replaced meanwhile makes the next delta a miss
    data = _read_json(workspace, CACHE_FILE)
    if data is None:
        return None, {}, {}
    delta = _read_json(workspace, DELTA_FILE) if base_id is not None else None
    if delta is None or delta.get("base") != base_id or delta.get("context") != data.get("context"):
        return base_id, data, {}
    for part in ("perf", "rounds", "reads"):
        data[part].update(delta[part])
    return base_id, data, delta


def _read_json(workspace: Path, name: str) -> dict[str, Any] | None:
    path = workspace / layout.HELIX_DIR / layout.CACHE_DIR / name
    if not os.path.lexists(path):
        return None
    from helix_engine.workspace.reading import read_text_safe

    text, problem = read_text_safe(path, workspace, max_bytes=_MAX_BYTES)
    if problem is not None or not text:
        return None
    try:
        data = json.loads(text, parse_constant=_no_constant)  # no NaN or Infinity: none is ever written
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    for part in ("perf", "rounds", "reads"):
        if not isinstance(data.get(part), dict):
            data[part] = {}
    return data


def _remove_delta(workspace: Path) -> None:
    """After rounds.json is written whole (a delta of the old one would be ignored anyway)."""
    path = workspace / layout.HELIX_DIR / layout.CACHE_DIR / DELTA_FILE
    helix = workspace / ".helix"
    if os.path.islink(helix) or os.path.islink(helix / layout.CACHE_DIR) or not os.path.lexists(path):
        return
    with contextlib.suppress(OSError):
        os.unlink(path)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a summary holds")


def _write(workspace: Path, data: dict[str, Any]) -> None:
    write_cache_text(workspace, CACHE_FILE,
                     json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n")


def can_keep(workspace: Path) -> bool:
    """Whether the workspace's ``.helix/`` is a real folder, the only place a cache is written."""
    helix = workspace / ".helix"
    return not os.path.islink(helix) and os.path.isdir(helix)


def write_cache_text(workspace: Path, name: str, text: str) -> None:
    """Atomically (temp file + rename), into .helix/cache/``name`` of the workspace, only through
    real folders inside it. Not the engine's durable write (no fsync, not one of a transition's
    writes): after a power loss the file may be empty or old, and then it is a miss. Also the
    writer of the stored status output (workspace/status_cache.py)."""
    from helix_engine.workspace.reading import inside

    if not can_keep(workspace):
        return
    helix = workspace / ".helix"
    folder = helix / layout.CACHE_DIR
    if os.path.islink(folder):
        return
    if not os.path.isdir(folder):
        os.mkdir(folder)
    target = folder / name
    if os.path.islink(target) or not inside(folder, workspace):
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
