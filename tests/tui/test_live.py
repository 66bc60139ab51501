"""Live updates: what another process writes appears without a key press (bounded waits),
including a real job's events case by case; bad and vanished files never crash the cockpit."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from pathlib import Path

from textual.widgets import DataTable, ProgressBar, TabbedContent

from helix_tui.app import HelixApp

from builders import RoundSpec, write_perf, write_round
from cockpit_helpers import ROUND_1, cockpit, wait_for

CHILD = textwrap.dedent(
    """
    import pathlib, sys, time
    from helix_engine.jobs.events import EventWriter
    gate = pathlib.Path(sys.argv[1])
    ev = EventWriter.from_env()
    cases = ["fp16_1024", "fp16_4096", "fp32_4096"]
    for i, case in enumerate(cases):
        ev.case_started(case, i, len(cases))
        print(f"running {case}", flush=True)
        t = 10.0 + i   # a record as run-bench writes it (compare-perf refuses one without bench_mode)
        ev.case_finished(case, {"case_label": case, "kernel_avg_time_us": t, "bench_mode": "torch-npu-profiler",
                                "stats": {"median": t, "mean": t, "p10": t, "p90": t, "stdev": 0.0, "n": 50}})
        ev.progress(i + 1, len(cases))
        if i == 0:
            while not gate.exists():   # hold after the first case until the test saw it
                time.sleep(0.02)
    ev.result({"status": "pass"})
    """
)


def _start_job(ws: Path, argv: list[str], kind: str = "bench") -> threading.Thread:
    from helix_engine.jobs.runner import run_job

    thread = threading.Thread(
        target=run_job, args=(ws, kind, argv),
        kwargs={"round_name": "opt-round-1", "cwd": ws, "env": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                "timeout_s": 60, "backend": "cpu"},
        daemon=True,
    )
    thread.start()
    return thread


def rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_outside_writes_appear_without_a_key(ws: Path) -> None:
    async with cockpit(ws, (120, 36)) as (app, pilot):
        app.selected = "opt-round-1"
        await pilot.press("2")
        tail = app.main.query_one("#attempts")
        assert await wait_for(pilot, lambda: any("Attempt 1" in line for line in tail.text_lines()))
        with open(ws / "opt-round-1" / "attempts.md", "a", encoding="utf-8") as handle:
            handle.write("Attempt 2: unrolled the loop by 4.\n")
        assert await wait_for(pilot, lambda: tail.text_lines()[-1] == "Attempt 2: unrolled the loop by 4.")
        # a new round folder from an agent → a new node with its geomean
        write_round(ws, 3, RoundSpec({k: v / 2 for k, v in ROUND_1.items()}, parent="opt-round-1", block=64))
        tree = app.main.query_one("#tree")
        assert await wait_for(pilot, lambda: "opt-round-3" in tree.nodes_by_key)
        assert await wait_for(pilot, lambda: "2.31x" in str(tree.nodes_by_key["opt-round-3"].label))
        await pilot.pause(0.2)
        assert app.selected == "opt-round-1" and tree.cursor_node is tree.nodes_by_key["opt-round-1"]
        tree.focus()
        await pilot.press("down")  # the first key after a rebuild moves the selection
        assert await wait_for(pilot, lambda: app.selected != "opt-round-1")
        await pilot.press("up")
        assert await wait_for(pilot, lambda: app.selected == "opt-round-1")
        # a rewritten perf file of the selected round → the perf pane changes
        write_perf(ws / "opt-round-1" / "opt_add_perf.txt", {"fp16_1024": 5.0, "fp16_4096": 10.0, "fp32_4096": 20.0})
        table = app.main.query_one("#perf-table", DataTable)
        assert await wait_for(pilot, lambda: rows(table) and rows(table)[0][5] == "5.000 µs")


async def test_a_running_job_streams_case_by_case(ws: Path, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("3")
        thread = _start_job(ws, [sys.executable, "-c", CHILD, str(gate)])
        jobs = app.main.query_one("#jobs")
        cases = jobs.query_one("#job-cases", DataTable)
        # the case_started and case_finished lines may land in two reads, and the live speedup is
        # evaluated in a worker after them: wait for the finished row, not for any row
        assert await wait_for(pilot, lambda: cases.row_count == 1 and rows(cases)[0][4] != "")
        assert rows(cases)[0][:5] == ["fp16_1024", "done", "10.00 µs", "50", "1.00x"]  # baseline fp16_1024: 10 µs
        live = app.tracker.jobs[jobs.selected]
        assert live.status == "running" and (live.done, live.total) == (1, 3)
        assert jobs.query_one("#job-progress", ProgressBar).progress == 1
        assert "1/3" in rows(jobs.query_one("#jobs-table", DataTable))[0][3]
        gate.write_text("go")
        assert await wait_for(pilot, lambda: cases.row_count == 3 and app.tracker.jobs[jobs.selected].status == "passed")
        assert [r[0] for r in rows(cases)] == ["fp16_1024", "fp16_4096", "fp32_4096"]
        log = jobs.query_one("#job-log")
        assert await wait_for(pilot, lambda: any("running fp32_4096" in line for line in log.lines))
        thread.join(10)


async def test_cancel_key_stops_the_selected_job(ws: Path, tmp_path: Path) -> None:
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("3")
        thread = _start_job(ws, [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"])
        jobs = app.main.query_one("#jobs")
        assert await wait_for(pilot, lambda: jobs.selected and app.tracker.jobs[jobs.selected].status == "running")
        job_id = jobs.selected
        await pilot.press("x")
        job_file = ws / ".helix" / "jobs" / job_id / "job.json"
        assert await wait_for(pilot, lambda: json.loads(job_file.read_text())["status"] == "cancelled", timeout=20)
        assert await wait_for(pilot, lambda: app.tracker.jobs[job_id].status == "cancelled")
        thread.join(10)
        assert not thread.is_alive()


async def test_bad_and_vanishing_files_never_crash(ws: Path) -> None:
    async with cockpit(ws, (120, 36)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("2")
        tail = app.main.query_one("#attempts")
        tree = app.main.query_one("#tree")
        (ws / "opt-round-2" / "attempts.md").unlink()
        assert await wait_for(pilot, lambda: tail.text_lines() == ["attempts.md was removed"])
        (ws / "opt-round-2" / "opt_add_perf.txt").write_bytes(b"{broken\n\x00\xff")
        assert await wait_for(pilot, lambda: "!" in str(tree.nodes_by_key["opt-round-2"].label))
        (ws / ".helix" / "jobs" / "junk").mkdir(parents=True)
        (ws / ".helix" / "jobs" / "junk" / "job.json").write_text("{half")
        (ws / ".helix" / "state.json").write_text("[]")
        import shutil

        shutil.rmtree(ws / "opt-round-2")
        assert await wait_for(pilot, lambda: "opt-round-2" not in tree.nodes_by_key)
        assert await wait_for(pilot, lambda: app.selected == "baseline")
        assert app.main.query_one("#tabs", TabbedContent).active == "tab-attempts"
        assert "problem" in str(app.main.query_one("#header").render())


async def test_a_failing_job_shows_failed_with_its_output(ws: Path) -> None:
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("3")
        code = "import sys; print('Traceback (most recent call last): boom', flush=True); sys.exit(3)"
        thread = _start_job(ws, [sys.executable, "-c", code], kind="run-test")
        jobs = app.main.query_one("#jobs")
        # Wait on what the pane shows, not on the tracker: the worker folds job.json into the
        # tracker a moment before the UI renders it (asserting the line right after the tracker
        # said "failed" flaked under load).
        job_line = jobs.query_one("#job-line")
        assert await wait_for(pilot, lambda: "failed" in str(job_line.render()) and "exit 3" in str(job_line.render()),
                              timeout=60)
        log = jobs.query_one("#job-log")
        assert await wait_for(pilot, lambda: any("boom" in entry for entry in log.lines))
        thread.join(10)
        assert app.is_running


async def test_the_whole_workspace_vanishing_is_a_message(ws: Path) -> None:
    import shutil

    async with cockpit(ws, (120, 36)) as (app, pilot):
        app.selected = "opt-round-2"
        shutil.rmtree(ws)
        header = app.main.query_one("#header")
        assert await wait_for(pilot, lambda: "gone" in str(header.render()) or "stopped" in str(header.render()))
        assert await wait_for(pilot, lambda: app.selected == "baseline")
        await pilot.press("r")  # refresh on a missing folder: still a message, not a crash
        await pilot.pause(0.3)
        assert app.is_running and "problem" in str(header.render())


async def test_a_new_job_takes_the_detail_when_the_shown_one_is_finished(ws: Path) -> None:
    """An agent's run-bench starts while the Jobs pane shows a finished job: the per-case table
    must follow the new job (it stayed on the old one until the row was picked by hand)."""
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("3")
        _start_job(ws, [sys.executable, "-c", "print('first')"], kind="run-test").join(30)
        jobs = app.main.query_one("#jobs")
        assert await wait_for(pilot, lambda: jobs.selected and app.tracker.jobs[jobs.selected].status == "passed")
        first = jobs.selected
        gate = ws / "gate"
        thread = _start_job(ws, [sys.executable, "-c", CHILD, str(gate)])
        assert await wait_for(pilot, lambda: jobs.selected not in (None, first))
        cases = jobs.query_one("#job-cases", DataTable)
        assert await wait_for(pilot, lambda: cases.row_count >= 1 and rows(cases)[0][0] == "fp16_1024")
        gate.write_text("go")
        thread.join(30)


def _finished_job(ws: Path, job_id: str, kind: str, status: str, events: list[dict]) -> None:
    folder = ws / ".helix" / "jobs" / job_id
    folder.mkdir(parents=True)
    info = {"id": job_id, "kind": kind, "round": "opt-round-1", "created_at": 1_700_000_000.0 + len(job_id),
            "started_at": 1_700_000_001.0, "ended_at": 1_700_000_009.0, "status": status, "exit_code": 0}
    (folder / "job.json").write_text(json.dumps(info))
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


async def test_finished_jobs_show_their_final_progress_not_0_of_unknown(ws: Path) -> None:
    """A finished job showed ``0/?``: the final done/total from its events, or — without cases."""
    cases = []
    for i, case in enumerate(("a", "b", "c", "d")):
        cases.append({"event": "case_started", "case_id": case, "index": i, "total": 4})
        if case != "d":
            cases.append({"event": "case_finished", "case_id": case, "record": {"kernel_avg_time_us": 1.0}})
    _finished_job(ws, "j-bench", "run-bench", "failed", cases)
    _finished_job(ws, "j-test-no-cases", "run-test", "passed", [{"event": "log", "msg": "ok"}])
    async with cockpit(ws, (80, 24)) as (app, pilot):
        await pilot.press("3")
        jobs = app.main.query_one("#jobs")
        table = jobs.query_one("#jobs-table", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 2)
        progress = {key.value: (str(table.get_row(key)[0]), str(table.get_row(key)[3])) for key in table.rows}
        assert progress["j-bench"][0] == "failed" and progress["j-bench"][1].endswith(" 3/4")
        assert progress["j-test-no-cases"] == ("passed", "—")
        jobs.selected = "j-test-no-cases"
        app.show_jobs()
        await pilot.pause(0.1)
        bar = jobs.query_one("#job-progress", ProgressBar)
        assert bar.total == 1 and bar.progress == 1  # finished: a full bar, not an endless one


async def test_a_job_update_before_the_jobs_pane_is_composed_is_shown_once_it_is(ws: Path, tmp_path: Path) -> None:
    """Issue 13 finding 11: a job update that reached the Jobs pane before its tables were composed
    crashed the cockpit (`NoMatches: No nodes match '#jobs-table'` from on_jobs_changed). The pane
    keeps the update and renders it when it mounts."""
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    from helix_tui.jobs_state import JobTracker
    from helix_tui.widgets.jobs_pane import JobsPane

    gate = tmp_path / "go"
    thread = _start_job(ws, [sys.executable, "-c", CHILD, str(gate)])
    tracker = JobTracker(ws)
    assert await _eventually(lambda: tracker.refresh() is not None and any(
        live.status == "running" and live.done >= 1 for live in tracker.jobs.values()))

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield Static("host")

    host = Host()
    async with host.run_test(size=(100, 30)) as pilot:
        pane = JobsPane(id="jobs")
        with tracker.lock:
            pane.show(tracker)  # not composed yet: before the fix this raised NoMatches
        await host.mount(pane)
        table = pane.query_one("#jobs-table", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 1)
        assert str(table.get_row_at(0)[0]) == "running" and "1/3" in str(table.get_row_at(0)[3])
    gate.write_text("go")
    thread.join(30)


async def test_a_job_running_before_the_cockpit_opens_shows_at_start(ws: Path, tmp_path: Path) -> None:
    """The same race through the App: a job already running when the cockpit starts (its first
    poll may land before the main screen is composed) is in the Jobs pane, and nothing crashed."""
    gate = tmp_path / "go"
    thread = _start_job(ws, [sys.executable, "-c", CHILD, str(gate)])
    job_dir = ws / ".helix" / "jobs"
    assert await _eventually(lambda: job_dir.is_dir() and any((d / "events.jsonl").is_file() for d in job_dir.iterdir()))
    app = HelixApp(ws, job_poll_s=0.05)  # polls from the first moment, as fast as it can
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.main.query_one("#jobs").query_one("#jobs-table", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 1 and str(table.get_row_at(0)[0]) == "running")
        gate.write_text("go")
        assert await wait_for(pilot, lambda: str(table.get_row_at(0)[0]) == "passed", timeout=60)
        assert app.is_running
    thread.join(30)


async def _eventually(predicate, timeout: float = 60.0) -> bool:  # noqa: ANN001
    """Poll a predicate outside any app (bounded)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return False


HOLD_IN_A_CASE = textwrap.dedent(
    """
    import time
    from helix_engine.jobs.events import EventWriter
    ev = EventWriter.from_env()
    ev.case_started("fp16_1024", 0, 2)
    ev.case_finished("fp16_1024", {"case_label": "fp16_1024", "kernel_avg_time_us": 10.0, "bench_mode": "torch-npu-profiler"})
    ev.case_started("fp16_4096", 1, 2)
    print("measuring fp16_4096", flush=True)
    time.sleep(60)
    """
)


async def test_after_a_cancel_no_case_is_running_and_x_again_says_a_sentence(ws: Path) -> None:
    """Issue 13 finding 8: after a cancel the case being measured still read `running`, and `x` on
    the finished job said only `cancel <id> / passed`."""
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("3")
        thread = _start_job(ws, [sys.executable, "-c", HOLD_IN_A_CASE])
        jobs = app.main.query_one("#jobs")
        cases = jobs.query_one("#job-cases", DataTable)
        assert await wait_for(pilot, lambda: rows(cases)[1][:2] == ["fp16_4096", "running"], timeout=60)
        job_id = jobs.selected
        await pilot.press("x")
        assert await wait_for(pilot, lambda: rows(cases)[1][:2] == ["fp16_4096", "cancelled"], timeout=60)
        assert rows(cases)[0][:2] == ["fp16_1024", "done"]
        table = jobs.query_one("#jobs-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[:4] == ["status", "kind", "rnd", "progress"] and "time" in labels
        await pilot.resize_terminal(200, 40)  # wide: the columns of `helix jobs`, all of them
        assert await wait_for(pilot, lambda: [str(c.label) for c in table.columns.values()][4:] ==
                              ["started", "time", "job"])
        await pilot.press("x")
        sentence = f"job {job_id} already finished (cancelled); nothing to cancel"
        assert await wait_for(pilot, lambda: any(str(n.message) == sentence for n in app._notifications))
    thread.join(10)


async def test_picking_a_job_sticks_and_renders_once(ws: Path, monkeypatch) -> None:
    """Refilling the jobs list moved its cursor to row 0 and back, and each move was taken as the
    user's pick: a job picked below the first flipped back and forth, hundreds of renders a second."""
    from helix_tui.widgets.jobs_pane import JobsPane

    _finished_job(ws, "j-new", "run-bench", "passed", [])
    _finished_job(ws, "j-old", "run-test", "passed", [])  # created_at 1_700_000_000 + len(id): same; id sorts
    renders = []
    real_show = JobsPane.show
    monkeypatch.setattr(JobsPane, "show", lambda self, *a, **k: (renders.append(1), real_show(self, *a, **k))[1])
    async with cockpit(ws, (120, 36)) as (app, pilot):
        await pilot.press("3")
        jobs = app.main.query_one("#jobs")
        table = jobs.query_one("#jobs-table", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 2)
        second = [key.value for key in table.rows][1]
        table.focus()
        await pilot.press("down")  # the user picks the second job
        assert await wait_for(pilot, lambda: jobs.selected == second)
        renders.clear()
        await pilot.pause(0.5)
        assert jobs.selected == second and table.cursor_row == 1
        assert len(renders) <= 2, len(renders)  # (it was hundreds in half a second)
