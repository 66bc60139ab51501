"""Read one part of a workspace: the baseline, one round, the workflow state, the latest verify.

Each reader returns what it found plus Problems (file, line where known, what to do). Path
fields resolve relative to the file that declares them, then workspace-relative; a path that
leaves the workspace (``..``, absolute, or a symlink) is a Problem and is not read. attempts.md
and summary.md are only stat'ed here (they can be huge); the UI reads them on demand.
"""

from __future__ import annotations

import os
import stat
from dataclasses import field
from pathlib import Path
from typing import Any

from helix_engine.perf.interval_cache import records_digest
from helix_engine.perf.paired import sidecar_of
from helix_engine.record import record
from helix_engine.workspace import layout, status_pairing, status_rules
from helix_engine.workspace.models import (
    BaselineState,
    BaselineView,
    Problem,
    RoundState,
    RoundView,
    WorkflowState,
)
from helix_engine.workspace.reading import (
    exists_dir,
    exists_file,
    inside,
    link_problem,
    list_dir,
    load_model,
    read_json_object,
    read_perf_safe,
    seen,
    shown,
)
from helix_engine.workspace.records import file_id
from helix_engine.workspace.round_cache import RoundCache

STATE_MISSING = "round-state.json is missing"
MULTIPLE_BASELINE = "found multiple baseline perf files"


def resolve_declared(root: Path, declared_in: Path, value: Any, file: str,
                     field_name: str) -> tuple[Path | None, Problem | None]:
    """A declared path, resolved by the contract (as `files.resolve_inside`: relative to the
    declaring folder, then to the workspace; the first that exists wins), with the root
    resolved once per load. (None, Problem) when it is empty, absolute or leaves the workspace."""
    if not isinstance(value, str) or not value.strip():
        return None, Problem(file, f"{field_name} is empty; give a path inside the workspace")
    outside = Problem(file, f"{field_name} {value!r} points outside the workspace, so it was not "
                      "read; copy the file into the workspace and point to it there")
    raw = Path(value)
    if raw.is_absolute():
        return None, outside
    candidates = [declared_in / raw, root / raw]
    chosen = next((c for c in candidates if os.path.lexists(c)), candidates[0])
    try:
        if not inside(chosen, root):
            return None, outside
    except (ValueError, OSError, RuntimeError) as exc:
        return None, Problem(file, f"{field_name} {value!r} cannot be resolved ({exc}); fix the path")
    return chosen, None


def _exists(path: Path) -> bool:
    return exists_file(path) or path.is_symlink()


# ----------------------------------------------------------------------------------- baseline


def _fallback_baseline_perf(root: Path, bdir: Path, stem: str | None,
                            top_perf: list[Path]) -> tuple[Path | None, bool]:
    """Upstream's lookup when baseline/state.json is missing or invalid → (file, failed)."""
    if _exists(bdir / "perf.txt"):
        return bdir / "perf.txt", False
    in_baseline = [p for p in list_dir(bdir) if p.name.endswith("_perf.txt") and _exists(p)]
    if len(in_baseline) == 1:
        return in_baseline[0], False
    if len(in_baseline) > 1:
        return None, True
    if not top_perf:
        return None, False
    if stem is not None:
        for p in top_perf:
            if p.name == f"{stem}_perf.txt":
                return p, False
    for p in top_perf:
        if p.name == "baseline_perf.txt":
            return p, False
    if len(top_perf) == 1:
        return top_perf[0], False
    non_opt = [p for p in top_perf if not p.stem.startswith("opt_")]
    if len(non_opt) == 1:
        return non_opt[0], False
    return None, True


def load_baseline(root: Path, stem: str | None,
                  top_perf: list[Path]) -> tuple[BaselineView, list[str], bool]:
    """The baseline view, the upstream warnings of its perf lookup, and whether selection failed."""
    bdir = root / layout.BASELINE_DIR
    view = BaselineView(path=bdir, state=None, operator_file=None, perf_file=None)
    problems: list[Problem] = []
    warnings: list[str] = []
    failed = False
    state_file = f"{layout.BASELINE_DIR}/{layout.BASELINE_STATE}"
    state_path = bdir / layout.BASELINE_STATE
    linked = link_problem(bdir, root) if os.path.islink(bdir) else None
    if linked is not None:  # not "state.json is missing": say where the folder really leads
        view.problems = [linked]
        return view, [], False
    if _exists(state_path):
        view.state, _, found = load_model(state_path, root, BaselineState, what="baseline state",
                                          fix="fix it and run `helix submit-baseline` again")
        problems += found
    elif exists_dir(bdir):
        problems.append(Problem(state_file, "is missing; write it (see the baseline contract) and run "
                                "`helix submit-baseline`", severity="warning"))
    state = view.state
    if state is not None:
        perf, problem = resolve_declared(root, bdir, state.perf_artifact, state_file, "perf_artifact")
        if problem is not None:
            problems.append(problem)
            outside = "outside the workspace" in problem.message
            warnings.append("perf_artifact points outside the workspace" if outside
                            else "perf_artifact cannot be resolved")
            failed = True
        elif perf is not None and not _exists(perf):
            problems.append(Problem(state_file, f"perf_artifact {state.perf_artifact!r} points to a missing "
                                    "file; run the baseline bench or fix the path"))
            warnings.append("perf_artifact points to a missing file")
            failed = True
        else:
            view.perf_file = perf
        op, problem = resolve_declared(root, bdir, state.baseline_operator, state_file, "baseline_operator")
        if problem is not None:
            problems.append(problem)
        elif op is not None and not exists_file(op):
            problems.append(Problem(state_file, f"baseline_operator {state.baseline_operator!r} points to a "
                                    "missing file; copy the operator into baseline/", severity="warning"))
        else:
            view.operator_file = op
        if not state.baseline_established or state.correctness_status != "passed" \
                or state.benchmark_status != "passed":
            problems.append(Problem(state_file, "the baseline is not established (baseline_established="
                                    f"{state.baseline_established}, correctness={state.correctness_status}, "
                                    f"benchmark={state.benchmark_status}); fix it and run "
                                    "`helix submit-baseline`", severity="warning"))
    else:
        view.perf_file, failed = _fallback_baseline_perf(root, bdir, stem, top_perf)
        if failed:
            warnings.append(MULTIPLE_BASELINE)
            problems.append(Problem(layout.BASELINE_DIR, "several perf files could be the baseline's; keep one "
                                    "(<op>_perf.txt) or name it in baseline/state.json perf_artifact",
                                    severity="warning"))
        if stem is not None and exists_file(bdir / f"{stem}.py"):
            view.operator_file = bdir / f"{stem}.py"
    if view.perf_file is not None:
        view.perf, found = read_perf_safe(view.perf_file, root)
        problems += found
        if not view.perf:
            warnings.append(f"cannot parse baseline perf file {shown(view.perf_file, root)}")
        elif state is not None:
            modes = {r.bench_mode for r in view.perf}
            if len(modes) == 1 and state.bench_mode not in modes:
                problems.append(Problem(state_file, f"bench_mode is {state.bench_mode} but the perf file was "
                                        f"measured with {modes.pop()}; make them agree", severity="warning"))
    view.problems = problems
    return view, warnings, failed


# -------------------------------------------------------------------------------------- rounds


@record
class LoadedRound:
    view: RoundView
    problems: list[Problem] = field(default_factory=list)
    state_note: str | None = None
    comparison_target: Path | None = None


def _round_perf_lookup(rdir: Path, stem: str | None) -> Path | None:
    """The checker's lookup when no perf_artifact is declared: opt_<stem>_perf.txt, perf.txt,
    then a single *_perf.txt."""
    if stem is not None and _exists(rdir / f"opt_{stem}_perf.txt"):
        return rdir / f"opt_{stem}_perf.txt"
    if _exists(rdir / "perf.txt"):
        return rdir / "perf.txt"
    found = [p for p in list_dir(rdir) if p.name.endswith("_perf.txt")]
    return found[0] if len(found) == 1 else None


def _round_operator(rdir: Path, stem: str | None) -> Path | None:
    if stem is not None:
        for name in (f"opt_{stem}.py", f"{stem}.py"):
            if exists_file(rdir / name):
                return rdir / name
    found = [p for p in list_dir(rdir) if p.suffix == ".py" and exists_file(p)]
    return found[0] if found else None


def load_round(root: Path, n: int, rdir: Path, stem: str | None, cache: RoundCache | None = None,
               previous: RoundView | None = None) -> LoadedRound:
    """One ``opt-round-N``: its state, perf records, operator and artifact completeness. With
    ``cache``, a perf file whose identity is the one a summary was made from is not read: its
    problems come from the summary and its records are read when something asks for them; and
    a round folder whose every looked-at name is as last time is not read again (`_remembered`).
    ``previous``: the round's view as a reload's snapshot holds it; when its round-state.json is
    the file it was read from, its state is not read and validated again (a perf file rewritten:
    the usual reload)."""
    state_id = file_id(f"{os.fspath(rdir)}/{layout.ROUND_STATE}")  # before reading: a write in between
    # makes the next load miss
    if cache is not None and state_id is not None:
        hit = _remembered(root, n, rdir, stem, cache, state_id)
        if hit is not None:
            return hit
    if previous is not None and previous.state is not None and state_id is not None and previous.inputs \
            and previous.inputs[0] == state_id and previous.path == rdir:
        hit = _built(root, n, rdir, stem, previous.state, state_id, None, {})
        if hit is not None:
            return hit
    out, data = _read_round(root, n, rdir, stem, cache, state_id)
    state = out.view.state
    if cache is not None and state_id is not None and data is not None and state is not None and not out.problems:
        if out.view.terminal and _keepable(rdir, stem, state, cache.shared):
            cache.put_read(n, [state_id, stem], state)
    return out


# A round folder read again costs a JSON read, a validation, a realpath walk per declared path
# and a dozen stats (0.2 ms a round, the largest part of a 1000-round status after one file
# changed). Its outcome is a function of round-state.json's bytes and of what the names it looks
# at are (exists, regular file, link or not). So the cache keeps, per round, round-state.json's
# validated state (under the file's identity), and a round whose every name on the way to
# the files its completeness and paths depend on exists and is no link (then a realpath is the
# plain path, and the first candidate of resolve_declared is the one chosen) is built from it as
# _read_round would build it: one lstat per name instead of a read, a realpath walk and stats.


def _kind(path: str) -> int | None:
    """The st_mode of ``path``'s own entry; None when it is missing or a link."""
    try:
        mode = seen(path)[0]
    except (OSError, ValueError):
        return None
    return None if stat.S_ISLNK(mode) else mode


def _plain(root: str, folder: str, value: Any, shared: dict[str, int | None], *, file: bool) -> bool:
    """Whether ``value``, relative to the round folder (``root``/``folder``), is a plain path inside
    the workspace whose every name exists and is no link (``file``: the last a regular file).
    Names split as pathlib does. A name outside the round folder (``../baseline/...``, the same for
    every round) is looked at once per load (``shared``)."""
    if not isinstance(value, str) or not value.strip() or "\0" in value or value.startswith("/"):
        return False
    if "/" not in value and value not in (".", ".."):  # one name in the round folder (the usual value)
        kind = _kind(f"{root}/{folder}/{value}" if root else f"{folder}/{value}")
        return kind is not None and (not file or stat.S_ISREG(kind))
    stack = [folder]
    mode: int | None = None
    for part in value.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return False
            stack.pop()
            continue
        stack.append(part)
        path = os.path.join(root, *stack)
        if stack[0] == folder:
            mode = _kind(path)
        else:
            if path not in shared:
                shared[path] = _kind(path)
            mode = shared[path]
        if mode is None:
            return False
    return mode is not None and (not file or stat.S_ISREG(mode))


def _keepable(rdir: Path, stem: str | None, state: RoundState, shared: dict[str, int | None]) -> bool:
    """Whether round ``rdir`` with ``state`` is built by `_remembered` as `_read_round` builds it:
    a declared perf file, and the round folder, perf file, summary, operator, attempts.md, any
    analysis and comparison target plain (see `_plain`)."""
    if stem is None or not state.perf_artifact:
        return False
    path = os.fspath(rdir)
    root, name = os.path.split(path)
    mode = _kind(path)
    if mode is None or not stat.S_ISDIR(mode) or not name:
        return False
    return (_plain(root, name, state.perf_artifact, shared, file=True)
            and _plain(root, name, state.summary_path or layout.SUMMARY, shared, file=True)
            and _plain(root, name, f"opt_{stem}.py", shared, file=True)
            and _plain(root, name, layout.ATTEMPTS, shared, file=True)
            and (not state.perf_analysis_path or _plain(root, name, state.perf_analysis_path, shared, file=True))
            and (not state.comparison_target_path
                 or _plain(root, name, state.comparison_target_path, shared, file=False)))


def _remembered(root: Path, n: int, rdir: Path, stem: str | None, cache: RoundCache,
                state_id: list[int]) -> LoadedRound | None:
    """Round ``n`` as `_read_round` would read it, from the cache's memo; None on any doubt."""
    state = cache.read(n, [state_id, stem])
    if not isinstance(state, RoundState):
        return None
    return _built(root, n, rdir, stem, state, state_id, cache, cache.shared)


def _built(root: Path, n: int, rdir: Path, stem: str | None, state: RoundState, state_id: list[int],
           cache: RoundCache | None, shared: dict[str, int | None]) -> LoadedRound | None:
    """Round ``n`` as `_read_round` would read it with round-state.json's object ``state``
    (validated), when every name it looks at is plain (`_keepable`); None otherwise."""
    if not _keepable(rdir, stem, state, shared):
        return None
    view = RoundView(number=n, path=rdir, state=state)
    out = LoadedRound(view)
    _check_round_name(out, rdir, n, state)
    view.perf_file = layout.child(rdir, str(state.perf_artifact))
    _perf_inputs(out, root, n, state_id, cache)
    if state.comparison_target_path:
        out.comparison_target = rdir / state.comparison_target_path
    view.operator_file = layout.child(rdir, f"opt_{stem}.py")
    view.terminal = True
    view.completed = state.correctness_status == "passed" and state.benchmark_status == "passed"
    return out


def _check_round_name(out: LoadedRound, rdir: Path, n: int, state: RoundState) -> None:
    if state.round == f"opt-round-{n}":  # what start-round writes: no pattern to match
        return
    if layout.parse_round_ref(state.round) not in (None, n):
        out.problems.append(Problem(f"{rdir.name}/{layout.ROUND_STATE}", f"round is {state.round!r} but the "
                                    f"folder is {rdir.name}; make them agree", severity="warning"))


def _perf_inputs(out: LoadedRound, root: Path, n: int, state_id: list[int] | None,
                 cache: RoundCache | None) -> None:
    """The round's input identities, and its perf file's problems (the cache's, when current)."""
    view = out.view
    view.inputs = (state_id,)
    if view.perf_file is not None:
        perf = os.fspath(view.perf_file)
        perf_key = [shown(view.perf_file, root), file_id(perf)]
        view.inputs = (state_id, *perf_key, file_id(sidecar_of(perf)))
        found = cache.perf_problems(n, perf_key) if cache is not None else None
        if found is None:
            view.perf, kept = read_perf_safe(view.perf_file, root)
            view.records_digest = records_digest(view.perf)
            view.values = status_pairing.case_values(view.perf)
            if cache is not None:
                cache.put_perf(n, perf_key, kept, view.records_digest, view.values)
        else:
            kept, view.records_digest, view.values = found
        out.problems += kept


def _read_round(root: Path, n: int, rdir: Path, stem: str | None, cache: RoundCache | None,
                state_id: list[int] | None) -> tuple[LoadedRound, dict[str, Any] | None]:
    """Read round ``n``'s folder: (the round, round-state.json's object when it was one)."""
    view = RoundView(number=n, path=rdir)
    out = LoadedRound(view)
    state_file = f"{rdir.name}/{layout.ROUND_STATE}"
    state_path = rdir / layout.ROUND_STATE
    data: dict[str, Any] | None = None
    if _exists(state_path):
        view.state, data, found = load_model(state_path, root, RoundState, what="round state",
                                             fix=f"fix it so {rdir.name} can be counted")
        out.problems += found
        if view.state is None:
            reason = found[0].message.split(";")[0].split(" (")[0] if found else "cannot be read"
            out.state_note = f"round-state.json {reason}"
    else:
        out.state_note = STATE_MISSING
    state = view.state
    if state is not None:
        _check_round_name(out, rdir, n, state)
    perf_ok = True
    if state is not None and state.perf_artifact:
        perf, problem = resolve_declared(root, rdir, state.perf_artifact, state_file, "perf_artifact")
        if problem is not None:
            out.problems.append(problem)
            perf_ok = False
        elif perf is not None and not _exists(perf):
            out.problems.append(Problem(state_file, f"perf_artifact {state.perf_artifact!r} points to a "
                                        f"missing file; run the round bench (opt_{stem or '<op>'}_perf.txt)"))
            perf_ok = False
        else:
            view.perf_file = perf
    else:
        view.perf_file = _round_perf_lookup(rdir, stem)
        perf_ok = view.perf_file is not None or (state is not None and state.benchmark_status != "passed")
    _perf_inputs(out, root, n, state_id, cache)
    if state is not None and state.comparison_target_path:
        target, problem = resolve_declared(root, rdir, state.comparison_target_path, state_file,
                                           "comparison_target_path")
        if problem is not None:
            out.problems.append(problem)
        out.comparison_target = target
    view.operator_file = _round_operator(rdir, stem)
    complete = perf_ok and view.operator_file is not None and exists_file(rdir / layout.ATTEMPTS)
    summary = state.summary_path if state is not None else layout.SUMMARY
    summary_path, problem = resolve_declared(root, rdir, summary or layout.SUMMARY, state_file, "summary_path")
    if problem is not None:
        out.problems.append(problem)
    complete = complete and summary_path is not None and exists_file(summary_path)
    if state is not None and state.perf_analysis_path:
        analysis, problem = resolve_declared(root, rdir, state.perf_analysis_path, state_file,
                                             "perf_analysis_path")
        if problem is not None:
            out.problems.append(problem)
        complete = complete and analysis is not None and exists_file(analysis)
    view.terminal = bool(complete and state is not None)
    view.completed = bool(view.terminal and state is not None and state.correctness_status == "passed"
                          and state.benchmark_status == "passed")
    return out, data


# ---------------------------------------------------------------------------- workflow, verify


def load_workflow(root: Path, cache: RoundCache | None = None) -> tuple[WorkflowState | None, list[Problem]]:
    """.helix/state.json, validated; with ``cache``, what reading the same file gave last time
    (1000 rounds' entries checked again were ~8 ms of a status)."""
    path = root / layout.HELIX_DIR / layout.WORKFLOW_STATE
    linked = link_problem(path, root)
    if linked is not None:
        return None, [linked]
    if not _exists(path):
        return None, []
    ident = file_id(path)  # before reading: a write in between makes the next load miss
    if cache is not None and ident is not None:
        found = cache.file(layout.WORKFLOW_STATE, ident)
        if found is not None:
            return found
    state, _, problems = load_model(path, root, WorkflowState, what="workflow state",
                                    fix="fix it, or delete it and run `helix submit-baseline` to rebuild it")
    if cache is not None and ident is not None:
        cache.put_file(layout.WORKFLOW_STATE, ident, (state, problems))
    return state, problems


def load_verify(vdir: Path, root: Path) -> tuple[dict[str, Any], list[Problem]]:
    """The latest ``opt-verify/verify-*/verify-state.json`` (name order) and its verdict."""
    info: dict[str, Any] = {"path": None, "verified": False, "geomean": None}
    linked = link_problem(vdir, root) if os.path.islink(vdir) else None
    if linked is not None:
        return info, [linked]
    if not exists_dir(vdir):
        return info, []
    candidates = [p / "verify-state.json" for p in list_dir(vdir)
                  if p.name.startswith("verify-") and exists_dir(p) and _exists(p / "verify-state.json")]
    if not candidates:
        return info, []
    latest = candidates[-1]
    info["path"] = latest
    payload, problems = read_json_object(latest, root, what="verify state",
                                         fix="re-run the verification; it counts as not verified")
    info["verified"], info["geomean"] = status_rules.verify_summary(payload)
    return info, problems
