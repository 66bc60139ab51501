"""Property-based fuzz of hostile workspaces (issue 11): whatever the files hold, `helix status`,
a snapshot load plus a reload of the mutated files, and the cockpit's load path never raise,
never hang past 5 s, and never read outside the workspace.

Hypothesis mutates a copy of one realistic workspace: random bytes, JSON mutations (dropped,
retyped, repeated keys, a BOM, truncation), FIFOs, links to /dev/zero and /dev/urandom, a
character device node (as root), symlinks inside and out of the workspace, symlink loops,
dangling links and folders where files should be (and files where folders should be). Every
file outside the workspace that a link can reach holds a sentinel in a spot that status, the
snapshot or a pane would show; the sentinel must never appear in any output.

The base workspace is built once; each example restores only the paths it mutated.
``CI=1`` runs 1,000 examples, a local run 100.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helix_engine.status import collect, render
from helix_engine.workspace.snapshot import load_workspace, reload

from builders import RoundSpec, build_workspace

T = TypeVar("T")
LIMIT_S = 5.0
SENTINEL = "ELSEWHERE-SENTINEL-91c4"
JOB_ID = "20260101-000000-run-bench-0001"
BASE = {"a": 10.0, "b": 20.0}

#: Workspace files a mutation may target (relative paths), and folders.
FILES = [
    "opt-note.md", "add.py", "add_perf.txt", ".helix/state.json",
    "baseline/state.json", "baseline/add_perf.txt", "baseline/add.py",
    "opt-round-1/round-state.json", "opt-round-1/opt_add_perf.txt", "opt-round-1/opt_add.py",
    "opt-round-1/attempts.md", "opt-round-1/summary.md",
    "opt-round-2/round-state.json", "opt-round-2/opt_add_perf.txt", "opt-round-2/opt_add.py",
    "opt-round-2/attempts.md", "opt-round-2/summary.md",
    f".helix/jobs/{JOB_ID}/job.json", f".helix/jobs/{JOB_ID}/events.jsonl", f".helix/jobs/{JOB_ID}/output.log",
]
FOLDERS = ["opt-round-1", "opt-round-2", "opt-round-3", "baseline", ".helix", ".helix/jobs",
           f".helix/jobs/{JOB_ID}", "opt-verify"]
JSON_FILES = [f for f in FILES if f.endswith(".json")]


# ------------------------------------------------------------------------------ fixtures


def _write_job(ws: Path) -> None:
    folder = ws / ".helix" / "jobs" / JOB_ID
    folder.mkdir(parents=True)
    info = {"id": JOB_ID, "kind": "run-bench", "argv": ["helix", "run-bench"], "round": "opt-round-2",
            "created_at": 1.0, "started_at": 1.0, "ended_at": 2.0, "status": "passed", "exit_code": 0}
    (folder / "job.json").write_text(json.dumps(info), encoding="utf-8")
    events = [{"event": "progress", "done": 1, "total": 2}, {"event": "case_finished", "case": "a", "median_us": 9.0}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    (folder / "output.log").write_text("bench a\nbench b\n", encoding="utf-8")


def _elsewhere(root: Path, ws: Path) -> Path:
    """A folder outside the workspace mirroring it, every file carrying the sentinel where it
    would be shown (case labels, hypotheses, the logged best round, job fields, log lines)."""
    out = root / "elsewhere"
    shutil.copytree(ws, out, symlinks=True)
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".json":
            with contextlib.suppress(ValueError):
                data = json.loads(text)
                if isinstance(data, dict):
                    for key in ("hypothesis", "round", "parent_round", "message", "kind", "perf_artifact",
                                "baseline_kind", "phase"):
                        if key in data:
                            data[key] = SENTINEL
                    text = json.dumps(data)
        elif path.name.endswith("_perf.txt") or path.name == "events.jsonl":
            text = text.replace('"a"', f'"{SENTINEL}"')
        text = text.replace("Final best round: round-2", f"Final best round: {SENTINEL}")
        if path.suffix in (".md", ".py", ".log"):
            text = f"{SENTINEL}\n{text}\n{SENTINEL}\n"
        path.write_text(text, encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(pristine workspace, the workspace examples mutate, the outside mirror)."""
    root = tmp_path_factory.mktemp("fuzz")
    pristine = build_workspace(root / "pristine", name="add", baseline=BASE,
                               rounds=[{"a": 8.0, "b": 18.0}, RoundSpec({"a": 9.0, "b": 10.0}, parent="opt-round-1")])
    (pristine / "add_perf.txt").write_text((pristine / "baseline" / "add_perf.txt").read_text(encoding="utf-8"),
                                           encoding="utf-8")
    _write_job(pristine)
    outside = _elsewhere(root, pristine)
    assert SENTINEL in (outside / "opt-note.md").read_text(encoding="utf-8")
    work = root / "work" / "add"
    shutil.copytree(pristine, work, symlinks=True)
    return pristine, work, outside


# ----------------------------------------------------------------------------- mutations


def _remove(path: Path) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _same_kind(here: Path, there: Path) -> bool:
    """Both absent, or both present as the same kind of entry (file, folder, link, FIFO …)."""
    if not os.path.lexists(there):
        return not os.path.lexists(here)
    try:
        return stat.S_IFMT(os.lstat(here).st_mode) == stat.S_IFMT(os.lstat(there).st_mode)
    except FileNotFoundError:
        return False


def _restore(pristine: Path, work: Path, rel: str) -> None:
    """Put ``rel`` back as it is in the pristine copy: the first entry on its way that changed
    kind (a folder turned link, a file turned FIFO …) is replaced whole, else the file's bytes."""
    parts = Path(rel).parts
    for i in range(1, len(parts) + 1):
        here, there = work.joinpath(*parts[:i]), pristine.joinpath(*parts[:i])
        if not _same_kind(here, there):
            _remove(here)
            if there.is_dir():
                shutil.copytree(there, here, symlinks=True)
            elif os.path.lexists(there):
                shutil.copy2(there, here)
            return
    if (pristine / rel).is_file():
        shutil.copy2(pristine / rel, work / rel)


def _json_mutation(data: Any, choice: int, value: Any) -> str:
    if not isinstance(data, dict) or not data:
        return json.dumps(value)
    keys = list(data)
    key = keys[choice % len(keys)]
    text = json.dumps(data, indent=1)
    kind = choice % 6
    if kind == 0:
        del data[key]
        return json.dumps(data)
    if kind == 1:
        data[key] = value
        return json.dumps(data)
    if kind == 2:  # the same key twice
        return text.replace("{", "{" + json.dumps(key) + ": " + json.dumps(value) + ",", 1)
    if kind == 3:
        return "\ufeff" + text
    if kind == 4:
        return text[: max(1, len(text) * (choice % 7) // 7)]
    return json.dumps([data, value])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)

ACTIONS = ["bytes", "truncate", "json", "fifo", "dev_zero", "dev_urandom", "char_device", "link_in", "link_out",
           "loop", "dangling", "folder", "empty", "folder_link_out", "folder_loop", "folder_is_file",
           "folder_fifo"]


@st.composite
def mutations(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(ACTIONS))
        if action.startswith("folder_"):
            target = draw(st.sampled_from(FOLDERS))
        elif action == "json":
            target = draw(st.sampled_from(JSON_FILES))
        else:
            target = draw(st.sampled_from(FILES))
        if action == "bytes":
            arg: Any = draw(st.binary(max_size=200))
        elif action == "json":
            arg = (draw(st.integers(0, 1000)), draw(JSON_VALUES))
        elif action in ("truncate", "link_in"):
            arg = draw(st.integers(0, 1000))
        else:
            arg = None
        out.append((action, target, arg))
    return out


def _apply(work: Path, outside: Path, action: str, rel: str, arg: Any) -> None:
    path = work / rel
    if not os.path.isdir(path.parent) or os.path.islink(path.parent):
        return  # a folder above was replaced by an earlier mutation
    if action == "bytes":
        _remove(path)
        path.write_bytes(arg)
    elif action == "truncate":
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            path.write_bytes(data[: len(data) * arg // 1000])
    elif action == "json":
        data: Any = None
        with contextlib.suppress(OSError, ValueError):
            if path.is_file() and not path.is_symlink():
                data = json.loads(path.read_text(encoding="utf-8"))
        _remove(path)
        path.write_text(_json_mutation(data, *arg), encoding="utf-8")
    elif action in ("fifo", "folder_fifo"):
        _remove(path)
        os.mkfifo(path)
    elif action in ("dev_zero", "dev_urandom"):
        _remove(path)
        path.symlink_to("/dev/zero" if action == "dev_zero" else "/dev/urandom")
    elif action == "char_device":
        _remove(path)
        try:
            os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))
        except OSError:
            path.symlink_to("/dev/zero")
    elif action == "link_in":
        _remove(path)
        path.symlink_to(work / FILES[arg % len(FILES)])
    elif action in ("link_out", "folder_link_out"):
        _remove(path)
        path.symlink_to(outside / rel)
    elif action in ("loop", "folder_loop"):
        _remove(path)
        path.symlink_to(path.name)
    elif action == "dangling":
        _remove(path)
        path.symlink_to(path.name + ".gone")
    elif action == "folder":
        _remove(path)
        path.mkdir()
    elif action == "empty":
        _remove(path)
        path.write_bytes(b"")
    elif action == "folder_is_file":
        _remove(path)
        path.write_text("not a folder\n", encoding="utf-8")


# ------------------------------------------------------------------------------ checks


def _release_fifos(work: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(work):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def within(fn: Callable[[], T], work: Path, what: str) -> T:
    """``fn()`` under a 5 s watchdog (a blocked read fails the example, then is released)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    if thread.is_alive():
        for _ in range(100):
            _release_fifos(work)
            thread.join(0.1)
            if not thread.is_alive():
                break
        raise AssertionError(f"{what} did not return within {LIMIT_S:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _status(work: Path) -> str:
    statuses, missing = collect([work])
    return "".join(render(statuses, view="best", fmt=fmt) for fmt in ("text", "json")) + repr(missing)


def _snapshot_text(snap: Any) -> str:
    parts = [repr(snap.problems), repr(snap.extra.get("opt_note")), repr(snap.workflow), repr(snap.baseline)]
    parts += [repr(v) for v in snap.rounds.values()]
    return "".join(parts)


def _cockpit(work: Path, snap: Any) -> str:
    """What the cockpit reads after its snapshot: each round's note tails and operator diff, the
    submit form's start reason, and the jobs pane (events, output.log)."""
    from helix_tui import actions, views
    from helix_tui.jobs_state import JobTracker
    from helix_tui.widgets.file_tail import FileTail

    out = []
    tail = FileTail()  # one tail re-pointed at each note, as the cockpit re-points its panes' tails
    for key in ["baseline", *[f"opt-round-{n}" for n in sorted(snap.rounds)]]:
        out.append(views.diff_text(snap, key))
        folder = views.round_dir(snap, key)
        out.append(repr(actions.start_reason(folder)))
        for name in ("attempts.md", "summary.md", "perf-analysis.md"):
            tail._begin(folder / name, "", snap.root)  # noqa: SLF001 - FileTail.open without an app:
            tail._read_tail()  # noqa: SLF001 - its reset, then its read half
            out.append("\n".join(tail.lines) + tail.partial + tail.note)
    tracker = JobTracker(work)
    tracker.refresh()
    for live in tracker.jobs.values():
        out.append(repr(live.info) + "\n".join(live.log) + repr(live.problem))
    out.append(repr(tracker.error))
    return "".join(out)


@settings(max_examples=1000 if os.environ.get("CI") else 100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(changes=mutations())
def test_hostile_workspaces_never_raise_hang_or_read_outside(base: tuple[Path, Path, Path],
                                                             changes: list[tuple[str, str, Any]]) -> None:
    pristine, work, outside = base
    touched = [rel for _action, rel, _arg in changes]
    try:
        for action, rel, arg in changes:
            _apply(work, outside, action, rel, arg)
        status = within(lambda: _status(work), work, "helix status")
        snap = within(lambda: load_workspace(work), work, "the snapshot load")
        again = within(lambda: reload(snap, [work / touched[0]]), work, "a reload of one file")
        cockpit = within(lambda: _cockpit(work, again), work, "the cockpit's load path")
        for loaded in (snap, again):
            internal = [str(p) for p in loaded.problems if "internal error" in p.message]
            assert not internal, internal
        for text in (status, _snapshot_text(snap), _snapshot_text(again), cockpit):
            assert SENTINEL not in text, f"read outside the workspace after {changes}"
    finally:
        _release_fifos(work)
        for rel in set(touched):
            _restore(pristine, work, rel)


def test_restore_leaves_the_pristine_workspace(base: tuple[Path, Path, Path]) -> None:
    """The fuzz's cleanup is exact (else examples would leak into each other): mutate every
    target, restore, and compare the trees."""
    pristine, work, outside = base
    for rel in FILES:
        _apply(work, outside, "fifo", rel, None)
    for rel in FOLDERS:
        _apply(work, outside, "folder_link_out", rel, None)
    for rel in FILES + FOLDERS:
        _restore(pristine, work, rel)

    def tree(root: Path) -> dict[str, bytes | None]:
        return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
                for p in sorted(root.rglob("*")) if not p.is_symlink()}

    assert tree(work) == tree(pristine)
    assert not [p for p in work.rglob("*") if p.is_symlink()]
