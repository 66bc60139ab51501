"""The one safe reader (issue 11, findings 4, 5 and 10), each finding with its exact reproduction.

4: a FIFO as ``opt-note.md`` hung ``helix status``, ``submit-round`` and the cockpit (``q``
   ignored); a character device (a symlink to /dev/zero, or a device node) was read until
   MemoryError.
5: swapping ``opt-note.md`` between a file and a symlink to a file outside the workspace let
   status print a line of that outside file (5 runs in 120).
10: a symlink loop read "is a file"; a round folder linked to /etc read "round-state.json is
   missing"; duplicate JSON keys silently took the last value; a UTF-8 BOM was invalid JSON;
   invalid UTF-8 names printed raw.

A read that blocks would hang the test run, so every call that could block runs under
`within`: a watchdog thread that fails the test after 5 s and then opens the FIFOs for writing
so the stuck reader returns and the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from helix_engine.sanitize import is_clean
from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.status import collect, render
from helix_engine.workspace.reading import open_workspace_file, read_bytes_safe, read_text_safe
from helix_engine.workspace.snapshot import load_workspace, reload

from builders import RoundSpec, build_workspace
from state_fixtures import new_workspace, put_round, scaled

T = TypeVar("T")
LIMIT_S = 5.0
BASE = {"a": 10.0, "b": 20.0}
R1 = {"a": 8.0, "b": 18.0}
R2 = {"a": 9.0, "b": 10.0}
SENTINEL = "OUTSIDE-SENTINEL-7f3a"


def _release(fifos: Iterable[Path]) -> None:
    """Open each FIFO for writing and close it: a reader blocked on it gets EOF and returns."""
    for fifo in fifos:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def within(fn: Callable[[], T], *, fifos: Iterable[Path] = (), seconds: float = LIMIT_S) -> T:
    """``fn()`` in a watchdog thread: its value, its exception, or a failure when it blocks."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        fifos = list(fifos)
        for _ in range(100):
            _release(fifos)
            thread.join(0.1)
            if not thread.is_alive():
                break
        pytest.fail(f"did not return within {seconds:.0f} s: a read blocked (FIFO or device)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _status_text(ws: Path) -> str:
    statuses, _ = collect([ws])
    return "".join(render(statuses, view=view, fmt=fmt) for view in ("best", "trend") for fmt in ("text", "json"))


def _problems(snap: Any) -> list[str]:
    return [str(p) for p in snap.problems]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return build_workspace(tmp_path, name="add", baseline=BASE, rounds=[R1, RoundSpec(R2, parent="opt-round-1")])


# ----------------------------------------------------------------------------- finding 4


def test_fifo_opt_note_status_returns_with_a_problem(ws: Path) -> None:
    note = ws / "opt-note.md"
    note.unlink()
    os.mkfifo(note)
    text = within(lambda: _status_text(ws), fifos=[note])
    assert "opt-note.md: is a FIFO (named pipe), not a regular file" in text
    snap = within(lambda: load_workspace(ws), fifos=[note])
    assert any("FIFO" in p for p in _problems(snap)) and snap.best_round == 2
    again = within(lambda: reload(snap, [note]), fifos=[note])
    assert any("FIFO" in p for p in _problems(again))


def test_fifo_opt_note_submit_round_returns(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    assert start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")[1] == 0
    put_round(ws, 1, scaled(0.8))
    note = ws / "opt-note.md"
    os.mkfifo(note)
    payload, _code = within(lambda: submit_round(ws / "opt-round-1"), fifos=[note])
    assert "FIFO" in json.dumps(payload), payload
    assert stat.S_ISFIFO(os.lstat(note).st_mode)  # left alone, never replaced


def test_fifo_files_do_not_stop_the_cockpit(ws: Path) -> None:
    """The cockpit's load path (snapshot, note tails, diff) returns and ``q`` quits."""
    from helix_tui.app import HelixApp

    fifos = [ws / "opt-note.md", ws / "opt-round-2" / "attempts.md", ws / "opt-round-2" / "summary.md",
             ws / "opt-round-2" / "opt_add.py"]
    for fifo in fifos:
        fifo.unlink()
        os.mkfifo(fifo)

    async def session() -> tuple[list[str], bool]:
        app = HelixApp(ws, watch=False, job_poll_s=0)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(200):
                if app.snapshot is not None:
                    break
                await pilot.pause(0.02)
            assert app.snapshot is not None, "the snapshot never loaded"
            problems = _problems(app.snapshot)
            await pilot.pause(0.3)  # tails and the diff of the selected round run now
            await pilot.press("q")
            await pilot.pause(0.1)
            return problems, app.return_code is not None or app._exit  # noqa: SLF001

    problems, quit_ = within(lambda: asyncio.run(session()), fifos=fifos, seconds=3 * LIMIT_S)
    assert any(p.startswith("opt-note.md: is a FIFO") for p in problems), problems
    assert quit_


def test_dev_zero_symlink_is_not_read(ws: Path) -> None:
    note = ws / "opt-note.md"
    note.unlink()
    note.symlink_to("/dev/zero")
    text, problem = within(lambda: read_text_safe(note, ws))
    assert text is None and problem is not None and "/dev/zero" in problem.message
    assert "opt-note.md: is linked outside the workspace (to /dev/zero)" in within(lambda: _status_text(ws))


def test_character_device_node_is_not_read(ws: Path) -> None:
    note = ws / "opt-note.md"
    note.unlink()
    try:
        os.mknod(note, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # the node of /dev/zero
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here ({exc})")
    data, problem = within(lambda: read_bytes_safe(note, ws))
    assert data is None and problem is not None and problem.message.startswith("is a character device")
    assert "opt-note.md: is a character device" in within(lambda: _status_text(ws))


def test_bytes_are_capped_at_the_descriptor(ws: Path) -> None:
    path = ws / "opt-round-1" / "summary.md"
    path.write_bytes(b"x" * 64)
    assert read_bytes_safe(path, ws, max_bytes=64) == (b"x" * 64, None)
    data, problem = read_bytes_safe(path, ws, max_bytes=63)
    assert data is None and problem is not None and "over the" in problem.message


def test_open_workspace_file_refuses_what_read_refuses(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SENTINEL)
    (ws / "link.txt").symlink_to(outside)
    os.mkfifo(ws / "pipe")
    for name, words in (("link.txt", "outside the workspace"), ("pipe", "FIFO"),
                        ("opt-round-1", "is a directory"), ("nothing", "is missing")):
        with pytest.raises(OSError) as info:
            within(lambda name=name: open_workspace_file(ws / name, ws), fifos=[ws / "pipe"])
        assert words in str(info.value.problem)  # type: ignore[attr-defined]
    with open_workspace_file(ws / "opt-round-1" / "attempts.md", ws) as handle:
        handle.seek(2)
        assert handle.read(3)


# ----------------------------------------------------------------------------- finding 5


@pytest.fixture()
def swap_setup(ws: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(opt-note.md, a regular copy of it to hard-link from, an outside opt-note.md whose Final best
    round names the sentinel), after checking that reading the outside text shows the sentinel."""
    note = ws / "opt-note.md"
    good = note.read_text(encoding="utf-8")
    assert "Final best round: round-2" in good
    outside = tmp_path / "outside" / "opt-note.md"
    outside.parent.mkdir()
    outside.write_text(good.replace("Final best round: round-2", f"Final best round: {SENTINEL}"), encoding="utf-8")
    control = build_workspace(tmp_path / "control", name="add", baseline=BASE,
                              rounds=[R1, RoundSpec(R2, parent="opt-round-1")])
    (control / "opt-note.md").write_text(outside.read_text(encoding="utf-8"), encoding="utf-8")
    assert SENTINEL in _status_text(control)  # so "never in the output" below can fail
    master = ws / ".opt-note.master"
    master.write_text(good, encoding="utf-8")
    return note, master, outside


def _to_link(note: Path, outside: Path) -> None:
    link = note.with_name(".swap-link")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    os.symlink(outside, link)
    os.replace(link, note)


def _to_file(note: Path, master: Path) -> None:
    copy = note.with_name(".swap-file")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(copy)
    os.link(master, copy)
    os.replace(copy, note)


def _assert_never_outside(ws: Path, note: Path, runs: int, reads: int) -> None:
    for _ in range(runs):
        assert SENTINEL not in _status_text(ws)
        snap = load_workspace(ws)
        assert SENTINEL not in repr(snap.extra.get("opt_note")) + repr(snap.problems)
    for _ in range(reads):
        assert SENTINEL not in repr(read_text_safe(note, ws))


def test_file_symlink_swap_in_a_thread_never_reads_outside(ws: Path, swap_setup: tuple[Path, Path, Path]) -> None:
    """The red team's reproduction: a thread swaps opt-note.md between a regular file and a
    symlink to an outside file, while status runs in a loop."""
    note, master, outside = swap_setup
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # let the swapper run between any two steps of a read
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            _to_link(note, outside)
            _to_file(note, master)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        _assert_never_outside(ws, note, runs=60, reads=2000)
    finally:
        stop.set()
        swapper.join(5)
        sys.setswitchinterval(interval)


def test_every_check_sees_a_file_every_open_a_link(ws: Path, swap_setup: tuple[Path, Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The worst-case swap, made deterministic: opt-note.md is a regular file while anything
    stats it and a symlink to the outside file otherwise. A reader that checks the path and then
    opens it reads the outside file every time; one that checks the opened file never does."""
    note, master, outside = swap_setup
    real_stat, real_lstat = os.stat, os.lstat

    def checked(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
            target = not isinstance(path, int) and os.path.abspath(os.fspath(path)) == str(note)
            if not target:
                return fn(path, *args, **kwargs)
            _to_file(note, master)
            try:
                return fn(path, *args, **kwargs)
            finally:
                _to_link(note, outside)
        return wrapper

    _to_link(note, outside)
    monkeypatch.setattr(os, "stat", checked(real_stat))
    monkeypatch.setattr(os, "lstat", checked(real_lstat))
    _assert_never_outside(ws, note, runs=3, reads=20)


# ---------------------------------------------------------------------------- finding 10


def test_round_folder_linked_to_etc_says_so(ws: Path) -> None:
    (ws / "opt-round-3").symlink_to("/etc")
    snap = load_workspace(ws)
    problems = _problems(snap)
    assert "opt-round-3: is linked outside the workspace (to /etc); it was not read. Copy what it should hold " \
           "into the workspace instead" in problems, problems
    assert not any("round-state.json is missing" in p or p.startswith("opt-round-3/") for p in problems)
    assert 3 not in snap.rounds
    assert "opt-round-3: is linked outside the workspace (to /etc)" in _status_text(ws)


def test_symlink_loop_is_a_loop_not_a_file(ws: Path) -> None:
    (ws / "opt-round-3").symlink_to("opt-round-4")
    (ws / "opt-round-4").symlink_to("opt-round-3")
    problems = _problems(load_workspace(ws))
    assert any(p.startswith("opt-round-3: is a symlink loop") for p in problems), problems
    assert not any("is a file" in p for p in problems)
    note = ws / "opt-note.md"
    note.unlink()
    note.symlink_to("opt-note.md")
    assert read_text_safe(note, ws)[1].message.startswith("is a symlink loop")  # type: ignore[union-attr]


def test_final_symlink_is_named_as_a_link(ws: Path) -> None:
    summary = ws / "opt-round-1" / "summary.md"
    real = ws / "opt-round-1" / "summary-real.md"
    summary.rename(real)
    summary.symlink_to(real.name)
    text, problem = read_text_safe(summary, ws)
    assert text is None and problem is not None and problem.file == "opt-round-1/summary.md"
    assert problem.message == ("is a symbolic link, so it was not read (helix does not follow links in a "
                               "workspace; replace it with the file)")


def test_duplicate_json_key_names_the_key_and_its_line(ws: Path) -> None:
    path = ws / "opt-round-2" / "round-state.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = json.dumps(data, indent=2).splitlines()
    lines.insert(3, '  "correctness_status": "failed",')  # after 2 keys: line 4 repeats a key given later
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    later = next(i for i, line in enumerate(lines, 1) if line.strip().startswith('"correctness_status": "passed"'))
    snap = load_workspace(ws)
    found = [p for p in snap.problems if p.file == "opt-round-2/round-state.json" and "twice" in p.message]
    assert found, _problems(snap)
    assert found[0].line == later and "'correctness_status'" in found[0].message
    assert f"line {later}" in found[0].message
    assert 2 not in {n for n, v in snap.rounds.items() if v.state is not None}


def test_duplicate_key_in_a_perf_line_names_the_key_and_its_line(ws: Path) -> None:
    path = ws / "opt-round-2" / "opt_add_perf.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"case_label":', '"case_label": "shadow", "case_label":', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [p for p in load_workspace(ws).problems if p.file == "opt-round-2/opt_add_perf.txt" and p.line == 2]
    assert found and "'case_label' twice" in found[0].message, found


def test_utf8_bom_is_accepted(ws: Path) -> None:
    before = load_workspace(ws)
    for path in (ws / "opt-round-2" / "round-state.json", ws / "baseline" / "state.json", ws / "opt-note.md",
                 ws / "opt-round-2" / "opt_add_perf.txt"):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    after = load_workspace(ws)
    assert _problems(after) == _problems(before)
    assert after.best_round == before.best_round == 2
    assert after.rounds[2].state is not None and after.logged_best == before.logged_best


def test_invalid_utf8_folder_name_is_escaped(ws: Path) -> None:
    os.mkdir(os.fsencode(ws) + b"/opt-round-\xff\x1b[2J")
    snap = load_workspace(ws)
    assert all(is_clean(p.file) and is_clean(p.message) for p in snap.problems), _problems(snap)
    assert any(p.file == "opt-round-\\udcff\\x1b[2J" for p in snap.problems), _problems(snap)
    text = _status_text(ws)
    assert "\udcff" not in text and "\x1b" not in text and "opt-round-\\udcff" in text


from hypothesis import given  # noqa: E402 - the property test below only
from hypothesis import strategies as st  # noqa: E402

_PART = st.sampled_from(["ws", "a", "opt-round-1", ".", "..", "", "x y", "b.txt"])


@given(st.lists(_PART, max_size=3), st.lists(_PART, max_size=4), st.booleans())
def test_shown_is_the_path_relative_to_its_workspace_as_abspath_makes_it(top: list[str], rest: list[str],
                                                                          absolute: bool) -> None:
    """reading.shown's text shortcut (a load asks it ~2000 times) gives what abspath gives."""
    import os

    from helix_engine.sanitize import clean_name
    from helix_engine.workspace.reading import shown

    base = ("/tmp/" if absolute else "") + "/".join(top)
    workspace = Path(base) if base else Path(".")
    path = Path(base, *rest) if rest else workspace
    full, root = os.path.abspath(path), os.path.abspath(workspace).rstrip(os.sep)
    expected = clean_name(full[len(root) + 1:]) if full.startswith(root + os.sep) else clean_name(path)
    assert shown(path, workspace) == expected
    assert shown(os.fspath(path), os.fspath(workspace)) == expected  # as text too
    raw = (base or ".") + "/" + "/".join(rest)  # text pathlib has not normalized ("a/./b", "a//b")
    full, root = os.path.abspath(raw), os.path.abspath(base or ".").rstrip(os.sep)
    expected = clean_name(full[len(root) + 1:]) if full.startswith(root + os.sep) else clean_name(raw)
    assert shown(raw, base or ".") == expected  # text, as some callers pass
