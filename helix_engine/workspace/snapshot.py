"""Load a workspace into a WorkspaceSnapshot, and reload only what changed.

Reading is split by what a file-system event can name: the layout (operator, round folders),
the baseline, one round, opt-note.md, .helix/state.json and the latest verify. Each part keeps
its own problems; `_derive` then recomputes everything cheap that depends on several parts
(comparisons, best round, parent links, status warnings) from records already in memory, so a
reload after one perf file changes re-reads one file. Nothing here raises on file content.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from helix_engine.workspace import folder_listing, layout, leftovers, status_rules
from helix_engine.workspace.models import Problem, RoundView, WorkspaceSnapshot
from helix_engine.workspace.reading import (
    exists_dir,
    exists_file,
    list_dir,
    load_session,
    read_text_safe,
    real_path,
    seen,
    shown,
)
from helix_engine.workspace.records import file_id
from helix_engine.workspace.round_cache import RoundCache
from helix_engine.workspace.round_reading import (
    STATE_MISSING,
    load_baseline,
    load_round,
    load_verify,
    load_workflow,
)

T = TypeVar("T")
VERIFY_DIR = "opt-verify"
_FOREIGN_PERF = "foreign_perf"  # extra: round -> its perf file, when not directly in its own folder
_PER_ROUND = ("round_file_problems", "round_state_notes", "round_targets", _FOREIGN_PERF)
_SAME_FILE = "same_file_checks"  # extra: round -> (its paths, baseline perf and its identity), (results)
#: extra: (context, round -> (parent, source, workflow status, problems), round -> workflow status)
_ROUND_LINES = "round_lines"
_LISTED_MISSING = "listed_missing"  # extra: ((state, rounds, half-started), its problems)
_WITH_PROBLEMS = "rounds_with_problems"  # extra: (the rounds, those whose view has problems, in order)
_LISTING = "folder_listing"  # extra: folder_listing.Listing, what the last listing of the folder found


def _guard(snap_problems: list[Problem], what: str, fn: Callable[[], T], default: T) -> T:
    """Run one part of the load; an unexpected bug becomes a Problem, not a traceback."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the snapshot never raises on content
        if os.environ.get("HELIX_DEBUG", "").lower() in {"1", "true"}:
            raise
        snap_problems.append(Problem(what, f"helix hit an internal error while reading it "
                                     f"({type(exc).__name__}: {exc}); run with HELIX_DEBUG=1 and report it"))
        return default


# ----------------------------------------------------------------------------------- parts


def _load_layout(snap: WorkspaceSnapshot) -> dict[int, Path]:
    problems: list[Problem] = []
    kept = folder_listing.kept(snap.root, snap.extra.get(_LISTING))
    if kept is not None:  # the folder's entries are the ones listed last time: only its few files are looked at
        op, op_problems = layout.discover_operator(snap.root, kept.files)
        dirs, dir_problems = dict(kept.dirs), list(kept.dir_problems)
        perf_names: list[str] | None = kept.perf_names
    else:
        entries = layout.listing(snap.root)
        op, op_problems = layout.discover_operator(snap.root, entries)
        dirs, dir_problems = layout.list_round_dirs(snap.root, known={n: v.path for n, v in snap.rounds.items()},
                                                    listed=entries)
        perf_names = None if entries is None else sorted(e.name for e in entries if e.name.endswith("_perf.txt"))
        snap.extra.pop(_LISTING, None)
        found = folder_listing.keep(snap.root, entries, dirs, dir_problems, perf_names)
        if found is not None:
            snap.extra[_LISTING] = found
    snap.operator_file = op
    problems += op_problems
    problems += dir_problems
    perf_files = list_dir(snap.root, suffix="_perf.txt") if perf_names is None else \
        [snap.root / name for name in perf_names]
    top_perf = [p for p in perf_files if exists_file(p)]
    snap.extra["top_level_perf"] = top_perf
    snap.extra["has_artifacts"] = bool((snap.root / layout.OPT_NOTE).exists() or dirs or top_perf)
    snap.extra["layout_problems"] = problems
    return dirs


def _op_stem(snap: WorkspaceSnapshot) -> str | None:
    return snap.operator_file.stem if snap.operator_file else None


def _set_baseline(snap: WorkspaceSnapshot) -> None:
    view, warnings, failed = load_baseline(snap.root, _op_stem(snap), snap.extra.get("top_level_perf", []))
    snap.baseline = view
    snap.extra["baseline_warnings"] = warnings
    snap.extra["baseline_selection_failed"] = failed


def _set_round(snap: WorkspaceSnapshot, n: int, rdir: Path, reuse: bool = False) -> None:
    # ``reuse``: the view a reload replaces, when its read found nothing to report (its state is
    # then reused while round-state.json is the same file; a read with problems is repeated)
    before = snap.rounds.get(n) if reuse and not snap.extra.get("round_file_problems", {}).get(n) else None
    loaded = load_round(snap.root, n, rdir, _op_stem(snap), snap.extra.get(status_rules.CACHE_KEY), before)
    snap.rounds[n] = loaded.view
    snap.extra.setdefault("round_file_problems", {})[n] = loaded.problems
    snap.extra.setdefault("round_state_notes", {})[n] = loaded.state_note
    snap.extra.setdefault("round_targets", {})[n] = loaded.comparison_target
    # a perf file outside its own (unlinked) round folder: a reload finds its owner by resolving
    # it; every other one is found by the folder a changed path lies in
    perf, foreign = loaded.view.perf_file, snap.extra.setdefault(_FOREIGN_PERF, {})
    if perf is not None and (os.path.dirname(os.fspath(perf)) != os.fspath(rdir) or _is_link(rdir)):
        foreign[n] = perf
    else:
        foreign.pop(n, None)


def _is_link(path: Path) -> bool:
    """``os.path.islink``, from the walk the load was given (reading.seen)."""
    try:
        return stat.S_ISLNK(seen(os.fspath(path))[0])
    except (OSError, ValueError):
        return False


def _set_opt_note(snap: WorkspaceSnapshot) -> None:
    path = snap.root / layout.OPT_NOTE
    snap.extra["opt_note"] = None
    snap.extra["opt_note_problems"] = []
    if not (path.exists() or path.is_symlink()):
        return
    cache: RoundCache | None = snap.extra.get(status_rules.CACHE_KEY)  # a full load's: the last parse
    ident = file_id(path) if cache is not None and not path.is_symlink() else None  # before reading
    note = cache.file(layout.OPT_NOTE, ident) if cache is not None and ident is not None else None
    if note is None:
        text, problem = read_text_safe(path, snap.root)
        if problem is not None:
            snap.extra["opt_note_problems"] = [Problem(problem.file, f"{problem.message}; the logged best "
                                                       "round cannot be read until it is fixed", problem.line)]
            return
        from helix_engine.workspace.markdown import parse_opt_note

        note = _slim(parse_opt_note(text or "", layout.OPT_NOTE))  # ~16 ms for a 1000-round ledger
        if cache is not None and ident is not None:
            cache.put_file(layout.OPT_NOTE, ident, note)
    snap.extra["opt_note"] = note
    snap.extra["opt_note_problems"] = list(note.problems)


def _slim(note: Any) -> Any:
    """What a snapshot keeps of the parsed ledger: what the status rules read of it (the logged
    best, with the last round entry marked current best, its line, the problems), not every round
    entry and section (~2.5 MB at 1000 rounds, which the ledger's writer parses itself)."""
    marked = note.marked_entry()
    return dataclasses.replace(note, rounds=[marked] if marked is not None else [], sections=[])


def _set_workflow(snap: WorkspaceSnapshot) -> None:
    snap.workflow, snap.extra["workflow_problems"] = load_workflow(snap.root, snap.extra.get(status_rules.CACHE_KEY))


def _set_verify(snap: WorkspaceSnapshot) -> None:
    snap.extra["verify"], snap.extra["verify_problems"] = load_verify(snap.root / VERIFY_DIR, snap.root)


# ------------------------------------------------------------------------------ public API


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during a load: every object a load allocates stays alive
    (records, results), so the collector's passes over them free nothing and cost a third of a
    2000-round load. Re-enabled after, when it was on before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def load_workspace(path: Path) -> WorkspaceSnapshot:
    """Read the whole workspace at ``path``. Never raises on workspace content."""
    with load_session(), _gc_paused():
        return _load(path)


def _load(path: Path) -> WorkspaceSnapshot:
    root = Path(path)
    snap = WorkspaceSnapshot(root=root)
    if not exists_dir(root):
        what = "does not exist" if not root.exists() else "is not a folder"
        snap.problems = [Problem(str(root), f"{what}; point helix at an operator workspace folder")]
        snap.extra["has_artifacts"] = False
        return snap
    internal: list[Problem] = []
    snap.extra["internal_problems"] = internal
    snap.extra[status_rules.CACHE_KEY] = _guard(internal, ".helix/cache", lambda: RoundCache(root), None)
    dirs: dict[int, Path] = _guard(internal, ".", lambda: _load_layout(snap), {})
    _guard(internal, layout.BASELINE_DIR, lambda: _set_baseline(snap), None)
    for n, rdir in sorted(dirs.items()):
        _guard(internal, rdir.name, functools.partial(_set_round, snap, n, rdir), None)
    _guard(internal, layout.OPT_NOTE, lambda: _set_opt_note(snap), None)
    _guard(internal, ".helix/state.json", lambda: _set_workflow(snap), None)
    _guard(internal, VERIFY_DIR, lambda: _set_verify(snap), None)
    _guard(internal, ".", lambda: _derive(snap), None)
    cache = snap.extra.pop(status_rules.CACHE_KEY, None)
    if cache is not None:
        cache.release()  # evaluate saved what it computed anew
    _drop_records(snap)
    return snap


def _drop_records(snap: WorkspaceSnapshot, rounds: Iterable[int] | None = None) -> None:
    """The snapshot keeps each round's summary, not its records (read again on demand).
    ``rounds``: the only views that may hold some (a reload's re-read rounds); None: all."""
    views = snap.rounds
    for view in views.values() if rounds is None else (views[n] for n in rounds if n in views):
        view.records = None


def reload(snap: WorkspaceSnapshot, changed: Iterable[Path]) -> WorkspaceSnapshot:
    """A new snapshot with only the parts named by ``changed`` re-read (plus the round folder
    listing, one directory scan, so new and deleted rounds are always picked up)."""
    with load_session(), _gc_paused():
        return _reload(snap, changed)


def _reload(snap: WorkspaceSnapshot, changed: Iterable[Path]) -> WorkspaceSnapshot:
    # the RoundView objects are shared with the old snapshot until _derive changes one (it copies
    # it first): the old snapshot may still be on screen in another thread
    new = dataclasses.replace(snap, rounds=dict(snap.rounds), extra=dict(snap.extra), problems=[])
    for key in _PER_ROUND:
        new.extra[key] = dict(snap.extra.get(key, {}))
    root = new.root
    if not exists_dir(root):
        return load_workspace(root)
    internal: list[Problem] = []
    new.extra["internal_problems"] = internal
    parts: set[str] = set()
    rounds_to_read: set[int] = set()
    # rounds whose round-state.json the caller named: read again even when its identity (size,
    # mtime) looks unchanged, as a same-size rewrite within one timestamp tick would
    states_named: set[int] = set()
    perf_owner = {_safe_resolve(p): n for n, p in new.extra[_FOREIGN_PERF].items()}  # usually none
    perf_owner.pop(None, None)
    real_root = _safe_resolve(root)
    baseline_perf = _safe_resolve(snap.baseline.perf_file) if snap.baseline and snap.baseline.perf_file else None
    for raw in changed:
        rel = _relative(root, Path(raw))
        if rel is None:
            continue
        if not rel.parts:  # the workspace folder itself: everything may have changed
            return _load(root)
        head = rel.parts[0]
        n = layout.round_number(head)
        if n is not None:
            rounds_to_read.add(n)
            if rel.parts[1:] == (layout.ROUND_STATE,):
                states_named.add(n)
        elif head == layout.BASELINE_DIR:
            parts.add("baseline")
        elif head == layout.OPT_NOTE:
            parts.add("opt_note")
        elif head == layout.HELIX_DIR:
            if len(rel.parts) == 2 and rel.parts[1] == layout.WORKFLOW_STATE:
                parts.add("workflow")
        elif head == VERIFY_DIR:
            parts.add("verify")
        elif len(rel.parts) == 1 and (head.endswith("_perf.txt") or head.endswith(".py")):
            parts.add("baseline")  # top-level perf files and the operator feed the baseline lookup
        resolved = _safe_resolve(root / rel)
        if resolved is not None and resolved in perf_owner:
            rounds_to_read.add(perf_owner[resolved])
        if resolved is not None and real_root is not None:  # reached through a link: the round it lies in
            real_rel = _relative(real_root, resolved)
            m = layout.round_number(real_rel.parts[0]) if real_rel is not None and real_rel.parts else None
            if m is not None:
                rounds_to_read.add(m)
        if resolved is not None and resolved == baseline_perf:
            parts.add("baseline")
    old_stem = _op_stem(snap)
    dirs: dict[int, Path] = _guard(internal, ".", lambda: _load_layout(new), {})
    if _op_stem(new) != old_stem:  # the operator changed: every perf lookup may differ
        return load_workspace(root)
    if "baseline" in parts:
        _guard(internal, layout.BASELINE_DIR, lambda: _set_baseline(new), None)
    for n in list(new.rounds):
        if n not in dirs:
            del new.rounds[n]
            for key in _PER_ROUND:
                new.extra[key].pop(n, None)
    # rounds whose view this reload creates (the others are shared): those named and the new folders
    owned = {n for n in rounds_to_read if n in dirs} | (dirs.keys() - new.rounds.keys())
    for n in sorted(owned):
        _guard(internal, dirs[n].name, functools.partial(_set_round, new, n, dirs[n], n not in states_named), None)
    if "opt_note" in parts:
        _guard(internal, layout.OPT_NOTE, lambda: _set_opt_note(new), None)
    if "workflow" in parts:
        _guard(internal, ".helix/state.json", lambda: _set_workflow(new), None)
    if "verify" in parts:
        _guard(internal, VERIFY_DIR, lambda: _set_verify(new), None)
    _guard(internal, ".", lambda: _derive(new, owned), None)
    _drop_records(new, owned)  # every other view is shared with a snapshot that dropped its records
    return new


def _relative(root: Path, path: Path) -> Path | None:
    if not path.is_absolute():
        return path
    for base in (Path(os.path.abspath(root)), _safe_resolve(root)):
        if base is None:
            continue
        try:
            return Path(os.path.abspath(path)).relative_to(base)
        except ValueError:
            continue
    return None


def _file_key(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file a path leads to: one stat instead of a realpath walk (the
    walk's lstat when it saw the name and it is no link, reading.seen)."""
    try:
        mode, dev, ino = seen(os.fspath(path))[:3]
        if stat.S_ISLNK(mode):
            st = os.stat(path)
            dev, ino = st.st_dev, st.st_ino
    except (OSError, ValueError):
        return None
    return dev, ino


def _safe_resolve(path: Path) -> Path | None:
    """``path.resolve()`` (None on a link loop). An absolute path is first looked up through the
    load session's folder cache (a reload resolves the root, the baseline perf file and each
    changed path: one walk of their folders); one that may end on a link, or leads to nothing
    (missing, or a loop on its way), is left to ``resolve``."""
    try:
        if path.is_absolute():
            real, may_loop = real_path(os.fspath(path))
            if not may_loop and os.path.lexists(real):
                return Path(real)
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return None


_HARNESS_PREFIXES = ("bench_", "test_", "differential_test_")


def is_workspace(path: Path) -> bool:
    """Upstream's single-workspace rule, plus: a baseline/ folder, .helix/state.json, or an
    operator file with one of its harnesses (a fresh operator folder, before prepare-baseline)."""
    path = Path(path)
    if not exists_dir(path):
        return False
    if layout.looks_like_workspace(path):
        return True
    if exists_dir(path / layout.BASELINE_DIR) or exists_file(path / layout.HELIX_DIR / layout.WORKFLOW_STATE):
        return True
    op, _ = layout.discover_operator(path)
    return op is not None and any(exists_file(path / f"{prefix}{op.stem}.py") for prefix in _HARNESS_PREFIXES)


def find_workspaces(path: Path) -> list[Path]:
    """``path`` itself when it is a workspace, else its non-hidden subfolders that are workspaces;
    [] when there are none. Upstream listed every subfolder (a venv, an empty folder, a git clone
    showed as a NO-SESSION operator); `helix status FOLDER` and the cockpit's picker both read this."""
    path = Path(path)
    if not exists_dir(path):
        return []
    if is_workspace(path):
        return [path]
    return [p for p in list_dir(path) if not p.name.startswith(".") and is_workspace(p)]


# ----------------------------------------------------------------------------------- derive


def _normalize_parent(view: RoundView, existing: set[int] | dict[int, Any],
                      recorded: str | None = None) -> tuple[str, Problem | None]:
    """The declared parent as "baseline" or "opt-round-M" (M an existing earlier round); without
    round-state.json, the parent start-round ``recorded`` in .helix/state.json."""
    raw = view.state.parent_round if view.state is not None else recorded
    if raw is None:
        return "baseline", None
    text, m = _parent_ref(str(raw))
    if m == 0:
        return "baseline", None
    if m is not None and m < view.number and m in existing:
        return layout.round_dir_name(m), None
    where = f"{view.name}/{layout.ROUND_STATE}" if view.state is not None else ".helix/state.json"
    if m is None:
        return "baseline", Problem(where, f"parent_round {text!r} is neither 'baseline' nor 'opt-round-M'; "
                                   "the round is shown under baseline until it is fixed", severity="warning")
    if m >= view.number:
        return "baseline", Problem(where, f"parent_round {text!r} is not an earlier round; a round can only "
                                   "build on baseline or an earlier round (shown under baseline)",
                                   severity="warning")
    return "baseline", Problem(where, f"parent_round {text!r} names a round folder that does not exist; "
                               "shown under baseline until it is fixed", severity="warning")


@functools.lru_cache(maxsize=4096)
def _parent_ref(raw: str) -> tuple[str, int | None]:
    """(stripped text, round number): 0 for the baseline, None when it names neither."""
    text = raw.strip()
    if text.lower() in {"baseline", "round-0", "round 0", "opt-round-0", "original", "0"}:
        return text, 0
    return text, layout.parse_round_ref(text)


def _copied(view: RoundView) -> RoundView:
    """``copy.copy(view)`` (a plain dataclass: a new object with the same attributes) without the
    copy module's reduce protocol: ~5 -> ~1 µs a view."""
    new = object.__new__(type(view))
    new.__dict__.update(view.__dict__)
    return new


def _derive(snap: WorkspaceSnapshot, owned: set[int] | None = None) -> None:
    """Recompute everything that depends on several parts, from what is in memory. The file
    identity checks (a stat each) are redone for a round only when the round or the baseline perf
    file changed since the snapshot this one was reloaded from. ``owned``: the rounds whose view
    may be changed in place (None: all); any other view that changes is copied first."""
    existing = snap.rounds
    # taken out until it is made again at the end: a derive that stops halfway leaves none, so the
    # next reload looks at every view
    with_problems = snap.extra.pop(_WITH_PROBLEMS, None)
    wf = snap.workflow
    wf_rounds = wf.rounds if wf is not None else {}
    active_round = wf.current_round if wf is not None and wf.phase == "round_active" else None
    base_perf = snap.baseline.perf_file if snap.baseline else None
    base_key = _file_key(base_perf) if base_perf is not None else None
    file_problems = snap.extra.get("round_file_problems", {})
    notes = snap.extra.get("round_state_notes", {})
    targets = snap.extra.get("round_targets", {})
    previous_checks = snap.extra.get(_SAME_FILE, {})
    checks: dict[int, tuple[tuple[Any, ...], tuple[bool, bool]]] = {}
    derived: list[Problem] = []
    per_round: dict[int, tuple[str, str, str | None, list[Problem]]] = {}
    # what a round's line below reads besides its own files: unchanged (and the same rounds), a
    # reload reuses the lines of the rounds it did not re-read
    context = (wf, base_perf, base_key, frozenset(snap.rounds))
    before = snap.extra.get(_ROUND_LINES)
    reusable = before[1] if owned is not None and before is not None and _lines_hold(before[0], context) else {}
    todo: Iterable[int] = snap.rounds
    if reusable:  # the same rounds: every line is last time's but the re-read rounds'
        per_round, checks = dict(reusable), dict(previous_checks)
        todo = sorted(n for n in owned if n in snap.rounds) if owned is not None else snap.rounds
    for n in todo:
        view = snap.rounds[n]
        checks.pop(n, None)
        entry = wf_rounds.get(str(n)) if wf_rounds else None
        recorded = entry.parent_round if entry is not None else None
        parent, parent_problem = _normalize_parent(view, existing, recorded)
        workflow_status: str | None = entry.status if entry is not None else None
        problems = list(file_problems.get(n, ()))
        if parent_problem is not None:
            problems.append(parent_problem)
        if view.state is None and active_round != n and notes.get(n) == STATE_MISSING:
            problems.append(Problem(f"{view.name}/{layout.ROUND_STATE}", "is missing, so the round is "
                                    "not counted; write it when the round's benchmark is done",
                                    severity="warning"))
        if workflow_status == "passed" and not view.completed:
            # a second submit-round is refused (the round is recorded): mending the files is the way on
            rewrite = f"`helix round-state --round-dir {view.name} ...`"
            if view.state is None:
                mend = (f"fix {view.name}/{layout.ROUND_STATE} (or rewrite it with {rewrite})"
                        if notes.get(n) != STATE_MISSING else f"write {view.name}/{layout.ROUND_STATE} with {rewrite}")
            elif view.terminal:  # the package is whole: its statuses are what is not passed
                mend = (f"its round-state.json says correctness {view.state.correctness_status}, benchmark "
                        f"{view.state.benchmark_status}; fix them (or rewrite it with {rewrite})")
            else:
                mend = ("restore what its folder lacks (attempts.md, summary.md, the operator and the perf file "
                        "must all be there)")
            problems.append(Problem(".helix/state.json", f"marks round {n} passed but {view.name} is not a "
                                    f"completed round (artifacts or passed statuses missing); {mend}, and it "
                                    "counts again as submitted", severity="warning"))
        target = targets.get(n)
        if base_perf is not None and base_key is not None and (target is not None or view.perf_file is not None):
            inputs = (target, view.perf_file, base_perf, base_key)
            found = previous_checks.get(n)
            if found is None or found[0] != inputs:
                found = (inputs, (target is not None and _file_key(target) != base_key,
                                  view.perf_file is not None and _file_key(view.perf_file) == base_key))
            checks[n] = found
            target_elsewhere, perf_is_baseline = found[1]
            if target_elsewhere:
                problems.append(Problem(f"{view.name}/{layout.ROUND_STATE}", "comparison_target_path does not "
                                        f"point to the baseline perf file ({shown(base_perf, snap.root)}); "
                                        "canonical comparisons always use the baseline", severity="warning"))
            if perf_is_baseline:
                problems.append(Problem(f"{view.name}/{layout.ROUND_STATE}", "perf_artifact is the baseline's "
                                        "perf file, so the round compares the baseline with itself; bench "
                                        f"the round into {view.name}/", severity="warning"))
        source = "round-state" if view.state is not None else ("start-round" if recorded else "")
        per_round[n] = (parent, source, workflow_status, problems)
    snap.extra[_SAME_FILE] = checks
    # the workflow statuses the rules read: last time's dict when no re-read round's differs (the
    # promotion rule then compares it with the one it saw, in C, instead of building ~1000 entries)
    old_statuses = before[2] if reusable and before is not None else None
    if old_statuses is not None and len(old_statuses) == len(per_round) \
            and all(n in old_statuses and old_statuses[n] == per_round[n][2] for n in todo):
        statuses = old_statuses
    else:
        statuses = {n: d[2] for n, d in per_round.items()}
    snap.extra[_ROUND_LINES] = (context, per_round, statuses)
    # crash leftovers (a few stats): a half-done start-round explains its missing folder itself
    derived += [leftover.problem() for leftover in leftovers.detect(snap.root, wf)]
    half_started = leftovers.half_started_round(snap.root, wf)
    derived += _listed_missing(snap, wf, context[3], half_started)
    # reads the memo the snapshot it was reloaded from left; the statuses are the ones derived above
    before_results = snap.evaluation.results if snap.evaluation is not None and reusable else None
    evaluation = status_rules.evaluate(snap, statuses=statuses, reread=owned)
    snap.extra[status_rules.MEMO_KEY] = evaluation.memo
    snap.evaluation = evaluation
    snap.promotion = evaluation.promotion
    results = evaluation.results
    visit: Iterable[int] = list(snap.rounds)
    if before_results is not None and owned is not None:
        # a view whose line and result are the objects it was last given is unchanged (each
        # assigned below, or by the load before): only the others are looked at; the evaluation
        # says which results can differ from the ones it was made from, when those are these
        if evaluation.changed is not None and evaluation.results_before is before_results:
            differ: Iterable[int] = evaluation.changed
            evaluation.results_before = None  # read: the old results are not kept alive by the new
        else:
            differ = {*(n for n, r in results.items() if r is not before_results.get(n)),
                      *(n for n in before_results if n not in results)}
        visit = sorted({*owned, *differ} & snap.rounds.keys())
    for n in visit:
        view = snap.rounds[n]
        parent, source, workflow_status, problems = per_round[n]
        result = results.get(n)
        comparison = result.comparison if result is not None else None
        if result is not None and result.problems:
            problems = problems + result.problems  # a new list: the line above is kept for the next reload
        if (view.parent == parent and view.parent_source == source and view.workflow_status == workflow_status
                and view.comparison is comparison and view.problems == problems):
            continue  # unchanged: the view stays shared with the snapshot this one was reloaded from
        if owned is not None and n not in owned:
            view = snap.rounds[n] = _copied(view)
        view.parent, view.parent_source, view.workflow_status = parent, source, workflow_status
        view.comparison, view.problems = comparison, problems
    snap.best_round = evaluation.best_round
    snap.logged_best = evaluation.logged.value
    problems = []
    problems += snap.extra.get("layout_problems", [])
    if snap.baseline is not None:
        problems += snap.baseline.problems
    rounds = snap.rounds
    for n in _with_problems(snap, context[3], None if before_results is None or owned is None else set(visit),
                            with_problems):
        problems += rounds[n].problems
    problems += snap.extra.get("opt_note_problems", [])
    problems += snap.extra.get("workflow_problems", [])
    problems += snap.extra.get("verify_problems", [])
    problems += derived + evaluation.problems + snap.extra.get("internal_problems", [])
    snap.problems = list(dict.fromkeys(problems))


def _with_problems(snap: WorkspaceSnapshot, rounds: frozenset[int], visited: set[int] | None,
                   before: tuple[frozenset[int], list[int]] | None) -> list[int]:
    """The rounds whose view has problems, in order. ``visited``: the only rounds whose view may
    differ from the one of the snapshot this one was reloaded from (the same rounds), whose list
    is ``before``: the others keep their problems, so only these are looked at (a reload: not
    ~1000 views)."""
    views = snap.rounds
    if visited is not None and before is not None and before[0] == rounds:
        found = sorted({*(n for n in before[1] if n not in visited), *(n for n in visited if views[n].problems)})
    else:
        found = [n for n in sorted(views) if views[n].problems]
    snap.extra[_WITH_PROBLEMS] = (rounds, found)
    return found


def _lines_hold(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Whether round lines made under context ``before`` hold under ``now``: the same state,
    baseline perf file and rounds, or the same but for rounds added after every earlier one (a new
    round folder). A round's parent is an earlier round, so no earlier round's line can name one
    added after it."""
    if before == now:
        return True
    old, new = before[3], now[3]
    return before[:3] == now[:3] and old < new and (not old or min(new - old) > max(old))


def _listed_missing(snap: WorkspaceSnapshot, wf: Any, rounds: frozenset[int], half_started: int | None,
                    ) -> list[Problem]:
    """A problem for each round .helix/state.json lists whose folder does not exist (but the one a
    half-done start-round explains): last time's list when the state and the rounds are the same
    objects and set (a reload after a perf file: ~1000 entries not looked at again)."""
    key = (wf, rounds, half_started)
    before = snap.extra.get(_LISTED_MISSING)
    if before is not None and before[0][0] is wf and before[0][1:] == key[1:]:
        return before[1]
    found: list[Problem] = []
    if wf is not None:
        for name, entry in wf.rounds.items():
            if name.isdigit() and int(name) not in rounds and int(name) != half_started:
                found.append(Problem(".helix/state.json", f"lists round {name} ({entry.status}) but "
                                     f"{entry.round_dir} does not exist; restore the folder or start the "
                                     "round again", severity="warning"))
    snap.extra[_LISTED_MISSING] = (key, found)
    return found


def snapshot_summary(snap: WorkspaceSnapshot) -> dict[str, Any]:
    """A small dict for logs and debugging: counts, best round, problems."""
    return {"root": str(snap.root), "rounds": len(snap.rounds), "best_round": snap.best_round,
            "promoted_best_round": snap.promoted_best_round, "logged_best": snap.logged_best,
            "problems": len(snap.problems)}
