"""Units under the cockpit: the file tail (never loads a whole file), the watcher's events,
the job view's folding of events, the round tree's shape, and the 80×24 layout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from helix_engine.jobs.events import EventWriter
from helix_engine.watch import (
    AttemptsAppended,
    BaselineChanged,
    JobEvent,
    PerfChanged,
    RoundChanged,
    WorkspaceChanged,
    classify,
    coalesce,
    watch_workspace,
)
from helix_engine.workspace.snapshot import load_workspace
from helix_tui.jobs_state import JobLive, JobTracker
from helix_tui.widgets.file_tail import FileTail
from helix_tui.widgets.round_tree import MAX_DEPTH, RoundTree

from builders import RoundSpec, build_workspace
from cockpit_helpers import cockpit, wait_for


class TailApp(App[None]):
    def __init__(self, path: Path, chunk: int) -> None:
        super().__init__()
        self.path, self.chunk = path, chunk

    def compose(self) -> ComposeResult:
        yield FileTail(chunk_bytes=self.chunk, id="tail")

    def on_mount(self) -> None:
        self.query_one(FileTail).open(self.path)


async def test_file_tail_reads_only_the_end_and_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "attempts.md"
    path.write_text("".join(f"line {i:06d}\n" for i in range(200_000)))  # 2.4 MB
    app = TailApp(path, chunk=4096)
    async with app.run_test(size=(60, 20)) as pilot:
        tail = app.query_one(FileTail)
        await pilot.pause()
        assert len(tail.lines) < 400 and tail.lines[-1] == "line 199999"
        assert tail.start > 2_000_000 and tail.text_lines()[0].startswith("…")
        first = tail.lines[0]
        tail.action_older()  # the older chunk is read in a worker
        assert await wait_for(pilot, lambda: first in tail.lines and tail.lines.index(first) > 0)
        assert len(tail.lines) < 800
        with open(path, "a") as handle:
            handle.write("appended\npartial")
        assert tail.poll()
        assert tail.text_lines()[-2:] == ["appended", "partial"]
        with open(path, "a") as handle:
            handle.write(" line done\n")
        assert tail.poll() and tail.text_lines()[-1] == "partial line done"
        path.write_text("short\n")  # truncated/replaced: reopen
        assert tail.poll() and tail.text_lines() == ["short"]
        path.unlink()
        assert tail.poll() and tail.text_lines() == ["attempts.md was removed"]


async def test_file_tail_handles_bad_bytes_and_long_lines(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_bytes(b"# title\n\xff\xfe bad utf8\n" + b"x" * 100_000 + b"\n")
    app = TailApp(path, chunk=1 << 20)
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        tail = app.query_one(FileTail)
        assert tail.lines[0] == "# title" and "bad utf8" in tail.lines[1]
        assert tail.virtual_size.width <= 40
        painted = [tail.render_line(y).text for y in range(tail.virtual_size.height - tail.scroll_offset.y)]
        assert "more characters (e opens the file)" in "".join(painted)  # the cut is said, not silent


async def test_file_tail_wraps_long_lines_to_the_width(tmp_path: Path) -> None:
    """attempts.md lines longer than the pane were cut at 80 columns: every word must show."""
    path = tmp_path / "attempts.md"
    words = [f"w{i:03d}" for i in range(60)]
    path.write_text("## Attempt 1\n" + " ".join(words) + " TAIL-MARK\nshort\n")
    app = TailApp(path, chunk=1 << 20)
    async with app.run_test(size=(40, 20)) as pilot:
        await pilot.pause()
        tail = app.query_one(FileTail)
        rows = [tail.render_line(y).text.rstrip() for y in range(tail.virtual_size.height)]
        assert tail.virtual_size.width <= 40 and all(len(r) <= 40 for r in rows)
        assert rows[-1] == "short" and "TAIL-MARK" in rows[-2]
        assert " ".join(rows[1:-1]).split() == words + ["TAIL-MARK"]  # broken at spaces, nothing lost
        await pilot.resize_terminal(70, 20)
        await pilot.pause()
        wide = [tail.render_line(y).text.rstrip() for y in range(tail.virtual_size.height)]
        assert len(wide) < len(rows) and " ".join(wide[1:-1]).split() == words + ["TAIL-MARK"]


def test_classify_maps_contract_files_to_events(tmp_path: Path) -> None:
    root = tmp_path
    assert classify(root, root / "opt-round-3" / "attempts.md") == [RoundChanged(3), AttemptsAppended(3)]
    perf = root / "opt-round-3" / "opt_add_perf.txt"
    assert classify(root, perf) == [RoundChanged(3), PerfChanged(perf)]
    assert classify(root, root / "baseline" / "add_perf.txt")[0] == BaselineChanged()
    assert classify(root, root / ".helix" / "jobs" / "j1" / "events.jsonl") == [JobEvent("j1")]
    assert classify(root, root / ".helix" / "state.json") == [WorkspaceChanged(root / ".helix" / "state.json")]
    for ignored in (".helix/lock", ".helix/jobs/spawn-1.log", "opt-round-3/.x.json.123.tmp", "notes.txt",
                    "opt-round-3/__pycache__/a.pyc", "build/opt-round-3"):
        assert classify(root, root / ignored) == [], ignored
    batch = coalesce(root, [root / "opt-round-3" / "attempts.md"] * 50 + [root / "opt-round-3" / "summary.md"])
    assert batch.events == [RoundChanged(3), AttemptsAppended(3)] and len(batch.paths) == 2


@pytest.mark.parametrize("polling", [False, True], ids=["inotify", "polling"])
async def test_watch_workspace_yields_a_coalesced_batch(tmp_path: Path, polling: bool) -> None:
    (tmp_path / "opt-round-1").mkdir()
    stop = asyncio.Event()

    async def write() -> None:
        await asyncio.sleep(0.3)
        for i in range(20):
            with open(tmp_path / "opt-round-1" / "attempts.md", "a") as handle:
                handle.write(f"{i}\n")
        (tmp_path / "ignored.txt").write_text("x")

    writer = asyncio.create_task(write())
    batches = []

    async def collect() -> None:
        async for batch in watch_workspace(tmp_path, stop_event=stop, force_polling=polling):
            batches.append(batch)
            if AttemptsAppended(1) in batch.events:
                stop.set()

    await asyncio.wait_for(asyncio.gather(writer, collect()), timeout=10)
    assert sum(e == AttemptsAppended(1) for b in batches for e in b.events) <= 2  # 20 writes, coalesced
    assert all(p.name != "ignored.txt" for b in batches for p in b.paths)


def test_job_view_folds_events_and_caps_the_log(tmp_path: Path) -> None:
    job = tmp_path / ".helix" / "jobs" / "j1"
    job.mkdir(parents=True)
    writer = EventWriter.for_job_dir(job)
    writer.case_started("a", 0, 2)
    writer.case_finished("a", {"case_label": "a", "stats": {"median": 3.5, "n": 10}})
    writer.case_started("b", 1, 2)
    writer.case_finished("b", {"case_label": "b", "error_message": "boom"})
    writer.progress(2, 2)
    (job / "output.log").write_text("".join(f"out {i}\n" for i in range(2000)))
    (job / "events.jsonl").open("a").write('{"event": "log", "msg": "partial li')  # no newline yet
    live = JobLive("j1")
    tracker = JobTracker(tmp_path)
    tracker.jobs["j1"] = live
    tracker._poll_files(live)  # noqa: SLF001 - the file-reading half, without job.json
    assert (live.done, live.total) == (2, 2)
    assert live.cases["a"].median_us == 3.5 and live.cases["b"].status == "error"
    assert len(live.log) == 500 and live.log[-1] == "out 1999"
    live.fold({"event": "case_finished", "case_id": "c", "record": "not a dict"})
    live.fold({"event": "progress", "done": "x"})
    assert live.cases["c"].record == {} and live.done == 3


async def test_round_tree_flattens_chains_and_keeps_orphans(tmp_path: Path) -> None:
    specs = [RoundSpec({"a": 9.0})] + [RoundSpec({"a": 9.0 - n * 0.1}, parent=f"opt-round-{n}", block=8 << n)
                                       for n in range(1, 30)]
    specs.append(RoundSpec({"a": 5.0}, parent="opt-round-99", block=7))  # a missing parent
    ws = build_workspace(tmp_path, baseline={"a": 10.0}, rounds=specs)
    snap = load_workspace(ws)

    class TreeApp(App[None]):
        def compose(self) -> ComposeResult:
            yield RoundTree(id="tree")

    app = TreeApp()
    async with app.run_test(size=(60, 40)) as pilot:
        tree = app.query_one(RoundTree)
        tree.show(snap, "opt-round-30")
        await pilot.pause()
        await pilot.pause()
        assert set(tree.nodes_by_key) == {"baseline"} | {f"opt-round-{n}" for n in range(1, 32)}
        # baseline branches (round 1, and round 31 whose parent is missing), so the chain nests
        # under it, but not 30 levels deep: past MAX_DEPTH a round follows its parent, naming it
        depth = max(len(list(_ancestors(n))) for n in tree.nodes_by_key.values())
        assert depth <= MAX_DEPTH + 1
        nodes = tree.nodes_by_key
        assert nodes["opt-round-2"].parent is nodes["opt-round-1"] and nodes["opt-round-1"].parent is nodes["baseline"]
        deep = [k for k, n in nodes.items() if len(list(_ancestors(n))) == MAX_DEPTH + 1]
        assert len(deep) > 20 and all(f"←round-{int(k.split('-')[-1]) - 1}" in str(nodes[k].label)
                                      for k in deep if k != f"opt-round-{MAX_DEPTH}")
        assert "←" not in str(nodes["opt-round-2"].label)
        assert nodes["opt-round-31"].parent is nodes["baseline"]
        assert tree.cursor_node is tree.nodes_by_key["opt-round-30"]
        tree.show(snap, "opt-round-30")  # same shape: relabel only, nodes kept
        assert tree.cursor_node is tree.nodes_by_key["opt-round-30"]


async def test_active_round_without_state_ends_the_main_chain(active_ws: Path) -> None:
    """Round 3 is started (no round-state.json): it was drawn as a branch of baseline."""
    snap = load_workspace(active_ws)

    class TreeApp(App[None]):
        def compose(self) -> ComposeResult:
            yield RoundTree(id="tree")

    app = TreeApp()
    async with app.run_test(size=(60, 20)) as pilot:
        tree = app.query_one(RoundTree)
        tree.show(snap, "opt-round-3")
        await pilot.pause()
        nodes = tree.nodes_by_key
        assert not nodes["baseline"].children  # no branch under baseline
        assert all(nodes[k].parent is tree.root for k in nodes)
        order = [tree.get_node_at_line(i).data for i in range(len(nodes))]
        assert order == ["baseline", "opt-round-1", "opt-round-2", "opt-round-3"]
        label = str(nodes["opt-round-3"].label)
        assert label.endswith("●") or "● " in label
        # once round-state.json names its parent, the round moves under it (a rebuild)
        from builders import RoundSpec, write_round

        write_round(active_ws, 3, RoundSpec({"fp16_1024": 7.0}, parent="opt-round-1", block=1024))
        tree.show(load_workspace(active_ws), "opt-round-3")
        await pilot.pause()
        assert tree.nodes_by_key["opt-round-3"].parent is tree.nodes_by_key["opt-round-1"]


def _ancestors(node):  # noqa: ANN001, ANN202
    while node.parent is not None:
        node = node.parent
        yield node


async def test_usable_at_80x24(active_ws: Path) -> None:
    async with cockpit(active_ws, (80, 24)) as (app, pilot):
        assert app.main.has_class("-narrow")
        tree = app.main.query_one("#tree")
        assert tree.size.width <= 26 and tree.size.height >= 15
        for key, tab in (("1", "tab-perf"), ("3", "tab-jobs"), ("5", "tab-diff")):
            await pilot.press(key)
            assert app.main.query_one("#tabs").active == tab
        app.selected = "opt-round-3"
        assert await wait_for(pilot, lambda: "@@" in app.main.query_one("#diff").plain)
        assert "+++ opt-round-3/opt_add.py" in app.main.query_one("#diff").plain


class _TreeApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RoundTree(id="tree")


async def _drawn(ws: Path, selected: str = "baseline") -> tuple[RoundTree, list[tuple[str, str | None]]]:
    """The tree of ``ws`` as drawn: (key, the key of the node it hangs under) in line order."""
    app = _TreeApp()
    async with app.run_test(size=(60, 30)) as pilot:
        tree = app.query_one(RoundTree)
        tree.show(load_workspace(ws), selected)
        await pilot.pause()
        await pilot.pause()
        lines = [tree.get_node_at_line(i) for i in range(len(tree.nodes_by_key))]
        return tree, [(n.data, n.parent.data if n.parent is not tree.root else None) for n in lines]


async def test_round_tree_draws_each_round_under_its_parent(tmp_path: Path) -> None:
    """Issue 13, finding 3: rounds 2 and 3 (children of round 1) and 4 (child of 3) drew as
    `round-1 ├ round-3 └ round-4` with round-2 at the top level."""
    ws = build_workspace(tmp_path, baseline={"a": 10.0}, rounds=[
        RoundSpec({"a": 9.0}), RoundSpec({"a": 8.0}, parent="opt-round-1", block=512),
        RoundSpec({"a": 7.0}, parent="opt-round-1", block=1024), RoundSpec({"a": 6.0}, parent="opt-round-3", block=2048)])
    _, drawn = await _drawn(ws)
    assert drawn == [("baseline", None), ("opt-round-1", None), ("opt-round-2", "opt-round-1"),
                     ("opt-round-3", "opt-round-1"), ("opt-round-4", "opt-round-3")]


async def test_a_started_round_hangs_under_the_parent_start_round_recorded(tmp_path: Path) -> None:
    """Before round-state.json exists, the parent start-round wrote to .helix/state.json places it."""
    import json

    from helix_engine.state.lifecycle import start_round

    ws = build_workspace(tmp_path, baseline={"a": 10.0}, rounds=[
        RoundSpec({"a": 9.0}), RoundSpec({"a": 8.0}, parent="opt-round-1", block=512)])
    state = json.loads((ws / ".helix" / "state.json").read_text())
    assert state["phase"] == "awaiting_round_start"
    payload, code = start_round(ws / "opt-round-3", "exploration", "pattern_entry", "branch from round 1",
                                parent_round="opt-round-1")
    assert code == 0, payload
    assert not (ws / "opt-round-3" / "round-state.json").exists()
    _, drawn = await _drawn(ws, "opt-round-3")
    assert drawn == [("baseline", None), ("opt-round-1", None), ("opt-round-2", "opt-round-1"),
                     ("opt-round-3", "opt-round-1")]


async def test_file_tail_load_and_follow_read_in_workers(tmp_path: Path) -> None:
    """The cockpit's doors (load, follow) read off the event loop, and land like open/poll."""
    path = tmp_path / "attempts.md"
    path.write_text("".join(f"line {i:06d}\n" for i in range(200_000)))
    app = TailApp(tmp_path / "none.md", chunk=4096)
    async with app.run_test(size=(60, 20)) as pilot:
        tail = app.query_one(FileTail)
        await pilot.pause()
        tail.load(path)
        tail.follow()  # while the tail read is in flight: must not read the file from offset 0
        assert await wait_for(pilot, lambda: tail.lines and tail.lines[-1] == "line 199999")
        assert len(tail.lines) < 400 and tail.start > 2_000_000
        with open(path, "a") as handle:
            handle.write("appended\n")
        tail.follow()
        tail.follow()  # two follows of one append: it is taken once
        assert await wait_for(pilot, lambda: tail.lines[-1] == "appended")
        await pilot.pause(0.2)
        assert tail.lines.count("appended") == 1
        tail.load(tmp_path / "other.md")  # a read for the earlier file that lands late is dropped
        assert await wait_for(pilot, lambda: tail.text_lines() == ["other.md does not exist yet"])


def test_a_submit_notice_says_what_the_ledger_recorded() -> None:
    from helix_tui.actions import describe_payload

    payload = {"kind": "round", "status": "pass", "issues": [], "guideline": "round check passed",
               "ledger": {"round": "round-2", "best_status": "not promoted", "result": "…",
                          "final_best_round": "round-1"}}
    assert describe_payload("submit", payload, 0) == "pass · opt-note.md: round-2 not promoted, best round-1"
    del payload["ledger"]
    assert describe_payload("submit", payload, 0) == "pass"
