"""HelixApp: owns the snapshot and the job view, routes messages, starts workers.

Data flow (DESIGN.md): watch worker → reload only what changed (off the event loop) → a
message → the App replaces its snapshot → widgets render from it. Blocking engine work runs
in ``@work(thread=True, exit_on_error=False)`` workers that only post messages. Every action
calls the same engine function as the CLI; the UI shows results it read back from disk.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import sys
from collections.abc import Callable
from pathlib import Path

from textual import on, work
from textual.app import App
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.widgets import TabbedContent, Tree

from helix_engine.sanitize import clean, clean_name
from helix_engine.watch import WatchBatch, watch_workspace
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui import actions, gc_policy, hangup, render, views
from helix_tui.commands import CockpitAction, HelixCommands, display_key
from helix_tui.jobs_state import JobTracker
from helix_tui.key_actions import KeyActions
from helix_tui.messages import (
    ActionFailed,
    ActionFinished,
    FilesTouched,
    JobsChanged,
    PaneText,
    PerfReady,
    SnapshotLoaded,
    SnapshotReloaded,
    WatchStopped,
)
from helix_tui.screens.main import MainScreen
from helix_tui.widgets.file_tail import FileTail
from helix_tui.widgets.hotspots import HotspotsPane
from helix_tui.widgets.jobs_pane import JobsPane, JobsStrip
from helix_tui.widgets.panes import CockpitHeader, IRPane, PerfPane, TextPane
from helix_tui.widgets.round_tree import RoundTree

#: How often job liveness (a pid that died without an end event → lost) is re-checked.
JOB_POLL_S = 2.0


#: Files that only the note tails show: an agent appending to them recomputes nothing else.
NOTE_FILES = frozenset({"attempts.md", "summary.md", "perf-analysis.md"})


def _notes_only(batch: WatchBatch) -> bool:
    return bool(batch.snapshot_paths) and all(p.name in NOTE_FILES for p in batch.snapshot_paths)


_FREEZE_REGISTERED: list[bool] = []


def _freeze_at_exit() -> None:
    """At interpreter exit, move every object out of the collector's reach before the final
    collection walks them all: a cockpit on a 200-round workspace spent 0.3 s quitting in it."""
    if not _FREEZE_REGISTERED:
        _FREEZE_REGISTERED.append(True)
        atexit.register(gc.freeze)


def css_path() -> Path:
    """cockpit.tcss, relative to the styles package: helix_tui/styles/ once installed (the wheel
    maps styles/ there), styles/ at the top of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "styles" / "cockpit.tcss", here.parent / "styles" / "cockpit.tcss"):
        if candidate.is_file():
            return candidate
    return here.parent / "styles" / "cockpit.tcss"


class HelixApp(KeyActions, App[int]):
    """The helix cockpit on one workspace."""

    CSS_PATH = css_path()
    TITLE = "helix"
    COMMANDS = App.COMMANDS | {HelixCommands}
    ENABLE_COMMAND_PALETTE = True

    selected: reactive[str] = reactive(render.BASELINE, init=False)
    metric: reactive[str] = reactive("auto", init=False)
    against: reactive[str] = reactive("baseline", init=False)  # the perf pane's reference
    diff_against: reactive[str] = reactive("parent", init=False)  # the diff pane's reference

    def __init__(self, workspace: Path, *, watch: bool = True, job_poll_s: float = JOB_POLL_S,
                 fleet_folder: Path | None = None) -> None:
        super().__init__()
        _freeze_at_exit()
        gc_policy.apply()
        self.workspace = Path(workspace).resolve()
        #: the folder W lists (the folder the picker was opened on, else the workspace's parent)
        self.fleet_folder = Path(fleet_folder).resolve() if fleet_folder is not None else self.workspace.parent
        self.switch_to: Path | None = None  # a workspace chosen with W: run_cockpit opens it next
        self.snapshot: WorkspaceSnapshot | None = None
        self.tracker = JobTracker(self.workspace)
        self.watch_enabled = watch
        self.job_poll_s = job_poll_s
        self.ir_stage: str | None = None
        self.status_note = ""
        self._stop_watch = asyncio.Event()
        self._watching = False
        self._main: MainScreen | None = None
        self._restore_sighup: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ lifecycle

    def get_default_screen(self) -> MainScreen:
        self._main = MainScreen()
        return self._main

    def on_mount(self) -> None:
        self.apply_user_keymap()
        self.load_full()
        self.poll_jobs()
        if self.job_poll_s > 0:
            self.set_interval(self.job_poll_s, self.poll_jobs)
        self._restore_sighup = hangup.install(asyncio.get_running_loop(), self._hang_up, real_terminal=not self.is_headless)

    def apply_user_keymap(self) -> None:
        """The user's keymap file (helix_tui/keymap.py) through Textual's set_keymap; a file that
        cannot be used is a notice, and the default keys stay."""
        from helix_tui.keymap import load_keymap

        self.user_keymap, problem = load_keymap()
        self.set_keymap(self.user_keymap)
        if problem:
            self.notify(problem, title="keymap", severity="error", timeout=20)

    def keys_of(self, act: CockpitAction) -> str:
        """The key(s) an action has now, as `?` and the palette show them."""
        return display_key(getattr(self, "user_keymap", {}).get(act.id, act.key))

    def on_unmount(self) -> None:
        self._stop_watch.set()
        self._restore_sighup()

    def _hang_up(self) -> None:
        """The SSH connection went away: stop workers and exit without touching the terminal."""
        self._stop_watch.set()
        self.exit(0)

    @property
    def main(self) -> MainScreen:
        main = self._main
        if main is None:  # Textual asks for the default screen before any handler or action runs
            raise RuntimeError("the cockpit's main screen does not exist yet")
        return main

    @property
    def ready(self) -> bool:
        """False before the main screen is composed and after it is gone (late messages)."""
        main = self._main
        return (main is not None and getattr(main, "composed", False) and main.is_attached and not self._exit
                and self.is_running)  # not while the app shuts down (its widgets are being removed)

    @property
    def header(self) -> CockpitHeader:
        return self.main.query_one("#header", CockpitHeader)

    # ------------------------------------------------------------------ workers (post only)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, description="load")
    def load_full(self) -> None:
        from helix_engine.workspace.snapshot import load_workspace

        with gc_policy.frozen_after():  # the snapshot stays: no pass over it right after the load
            snapshot = load_workspace(self.workspace)
        self.post_message(SnapshotLoaded(snapshot))

    @work(thread=True, exclusive=True, group="jobs", exit_on_error=False, description="jobs")
    def poll_jobs(self) -> None:
        changed = self.tracker.refresh()  # reads disk holding only the tracker's reader lock
        changed |= self.tracker.evaluate_cases(self._baseline_perf())
        if changed or self.tracker.error:
            self.post_message(JobsChanged(changed))

    @work(thread=True, exclusive=True, group="jobs-eval", exit_on_error=False, description="jobs-eval")
    def evaluate_jobs(self) -> None:
        """The live speedups against a (re)loaded baseline, off the event loop."""
        changed = self.tracker.evaluate_cases(self._baseline_perf())
        if changed:
            self.post_message(JobsChanged(changed))

    def _baseline_perf(self) -> list:
        snap = self.snapshot
        return snap.baseline.perf if snap is not None and snap.baseline is not None else []

    @work(exclusive=True, group="watch", exit_on_error=False, description="watch")
    async def watch_files(self) -> None:
        polling: bool | None = None
        while True:
            try:
                await self._follow_changes(polling)
            except OSError as exc:  # inotify limits on a huge profile dump: fall back to polling
                if polling:
                    self.post_message(WatchStopped(f"live updates stopped ({exc}); press r to refresh"))
                    return
                polling = True
                continue
            except Exception as exc:  # noqa: BLE001 - a dead watcher must not kill the cockpit
                self.post_message(WatchStopped(f"live updates stopped ({exc}); press r to refresh"))
                return
            break
        if not self._stop_watch.is_set():
            self.post_message(WatchStopped("the workspace folder is gone; live updates stopped"))

    async def _follow_changes(self, force_polling: bool | None) -> None:
        from helix_engine.workspace.snapshot import reload

        async for batch in watch_workspace(self.workspace, stop_event=self._stop_watch, force_polling=force_polling):
            paths = batch.snapshot_paths
            if batch.rounds or any(render.BASELINE in p.parts for p in paths):
                self.post_message(FilesTouched(batch))  # tails first: no need to wait for the reload
            if paths and self.snapshot is not None:
                snap = await asyncio.to_thread(reload, self.snapshot, paths)
                self.post_message(SnapshotReloaded(snap, batch))
            if batch.job_ids:
                changed = await asyncio.to_thread(self._poll_some_jobs, batch.job_ids)
                self.post_message(JobsChanged(changed))

    def _poll_some_jobs(self, job_ids: set[str]) -> set[str]:
        return self.tracker.poll(job_ids) | self.tracker.evaluate_cases(self._baseline_perf())

    @work(thread=True, exclusive=True, group="perf", exit_on_error=False, description="perf")
    def compute_perf(self, snap: WorkspaceSnapshot, key: str, metric: str, against: str) -> None:
        self.post_message(PerfReady(views.perf_view(snap, key, metric, against)))

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False, description="diff")
    def compute_diff(self, snap: WorkspaceSnapshot, key: str, against: str = "parent") -> None:
        self.post_message(PaneText("diff", (key,), views.diff_text(snap, key, against), "diff"))

    @work(thread=True, exclusive=True, group="hotspots", exit_on_error=False, description="hotspots")
    def compute_hotspots(self, snap: WorkspaceSnapshot, key: str, width: int | None = None) -> None:
        text, cards = views.hotspots_view(snap, key, width)
        self.post_message(PaneText("hotspots", (key, *cards), text, "markdown"))

    @work(thread=True, exclusive=True, group="ir", exit_on_error=False, description="ir")
    def compute_ir(self, snap: WorkspaceSnapshot, key: str, stage: str | None) -> None:
        names, text = views.ir_text(snap, key, stage)
        self.post_message(PaneText("ir", (key, stage, *names), text))

    @work(thread=True, group="action", exit_on_error=False, description="action")
    def run_engine(self, title: str, fn: actions.EngineCall) -> None:
        """Run one engine call; the result (or the sentence of its error) comes back as a message."""
        try:
            payload, code = fn()
        except Exception as exc:  # noqa: BLE001 - HelixError and anything else become a notice
            self.post_message(ActionFailed(title, str(exc) or type(exc).__name__))
            return
        self.post_message(ActionFinished(title, payload, code))

    # ------------------------------------------------------------------ messages

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self.snapshot = message.snapshot
        # out of the collector's reach: a full collection would walk every record of the workspace
        # (0.4 s at 1000 rounds, on the UI thread, at some later keypress). A snapshot holds no
        # reference cycle, so the one it replaces is still freed, by reference counting.
        gc.freeze()
        if self.watch_enabled and not self._watching:
            self._watching = True
            self.watch_files()
        if self.ready:
            self.render_all()
            self.show_jobs()
        self.evaluate_jobs()  # the live speedups need the baseline

    def on_snapshot_reloaded(self, message: SnapshotReloaded) -> None:
        self.snapshot = message.snapshot
        if self.ready:
            self.render_all(message.batch)
        self.evaluate_jobs()  # against the baseline as reloaded

    def on_files_touched(self, message: FilesTouched) -> None:
        """Poll the open note tails of the selected round right away (appends are the common case)."""
        if not self.ready or self.snapshot is None:
            return
        n = render.key_round(self.selected)
        if (n is not None and n in message.batch.rounds) or (n is None and message.batch.snapshot_paths):
            for widget_id in ("attempts", "summary", "analysis", "live-attempts"):
                self.main.query_one(f"#{widget_id}", FileTail).follow()  # the read runs in a worker

    def on_jobs_changed(self, message: JobsChanged) -> None:
        self.show_jobs()

    def show_jobs(self) -> None:
        """Render the jobs view the workers read (the lock is held only for in-memory work)."""
        if not self.ready:
            return
        try:
            with self.tracker.lock:
                self.main.query_one("#jobs", JobsPane).show(self.tracker)
                self.main.query_one("#live-jobs", JobsStrip).show(self.tracker)
        except NoMatches:  # the screen is being torn down
            return

    def on_watch_stopped(self, message: WatchStopped) -> None:
        if not self.ready:
            return
        self._watching = False
        self.status_note = message.reason
        self.header.show(self.snapshot, self.status_note)

    def on_perf_ready(self, message: PerfReady) -> None:
        if not self.ready:
            return
        if self.snapshot is None or message.view.key != (self.selected, self.metric, self.against):
            return  # a stale selection
        self.main.query_one("#perf", PerfPane).show(message.view, self.snapshot, self.metric)

    def on_pane_text(self, message: PaneText) -> None:
        if not self.ready:
            return
        if message.key[0] != self.selected:
            return
        if message.pane == "ir":
            stages = [str(s) for s in message.key[2:]]
            self.main.query_one("#ir", IRPane).show(stages, message.text, message.key[1] or (stages[0] if stages else None))
        elif message.pane == "hotspots":
            cards = [str(c) for c in message.key[1:]]
            self.main.query_one("#hotspots-pane", HotspotsPane).show(message.text, cards, message.lexer)
        else:
            self.main.query_one(f"#{message.pane}", TextPane).show(message.text, message.lexer)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notice is plain, escaped text: it may name job ids, paths or an engine message
        that quotes workspace content (never Textual markup, never an escape sequence)."""
        super().notify(clean(message, multiline=True), title=clean(title), severity=severity, timeout=timeout,
                       markup=False)

    def on_action_finished(self, message: ActionFinished) -> None:
        text = actions.describe_payload(message.title, message.payload, message.exit_code)
        self.notify(text, title=message.title, severity="information" if message.exit_code == 0 else "warning")

    def on_action_failed(self, message: ActionFailed) -> None:
        severity: SeverityLevel = "warning" if message.severity == "warning" else "error"
        self.notify(message.message, title=message.title, severity=severity, timeout=10)

    @on(Tree.NodeHighlighted, "#tree")
    def _tree_moved(self, event: Tree.NodeHighlighted[str]) -> None:
        if event.node.data:
            self.selected = event.node.data

    @on(TabbedContent.TabActivated, "#tabs")
    def _tab_changed(self) -> None:
        self.refresh_lazy_panes()

    @on(JobsPane.Chosen)
    def _job_chosen(self) -> None:
        self.show_jobs()

    def on_option_list_option_highlighted(self, event) -> None:  # noqa: ANN001 - IR stage list
        if event.option_list.id == "ir-stages" and self.snapshot is not None:
            stages = self.main.query_one("#ir", IRPane).stages  # the prompts show them escaped
            if not 0 <= event.option_index < len(stages):
                return
            stage = stages[event.option_index]
            if stage != self.ir_stage:
                self.ir_stage = stage
                self.compute_ir(self.snapshot, self.selected, stage)

    # ------------------------------------------------------------------ rendering

    def render_all(self, batch: WatchBatch | None = None) -> None:
        snap = self.snapshot
        if snap is None or not self.ready:
            return
        self.header.show(snap, self.status_note)
        tree = self.main.query_one("#tree", RoundTree)
        tree.show(snap, self.selected)
        if self.selected not in tree.nodes_by_key:
            self.selected = render.BASELINE
            return
        if batch is None:
            self.refresh_selection(reopen=True)
        elif self._touches_selection(batch) and not _notes_only(batch):
            self.refresh_selection(reopen=False)  # (note tails were polled on FilesTouched)

    def _touches_selection(self, batch: WatchBatch) -> bool:
        n = render.key_round(self.selected)
        if n is not None and n in batch.rounds:
            return True
        touched_parent = False
        if n is not None and self.snapshot is not None and n in self.snapshot.rounds:
            parent = render.key_round(self.snapshot.rounds[n].parent)
            touched_parent = parent is not None and parent in batch.rounds
        baseline = any(p.parts and render.BASELINE in p.parts for p in batch.snapshot_paths)
        return touched_parent or baseline

    def refresh_selection(self, reopen: bool = True) -> None:
        """Re-render every pane that depends on the selected round."""
        snap = self.snapshot
        if snap is None or not self.ready:
            return
        try:
            self._refresh_selection(snap, reopen)
        except NoMatches:  # the screen is being torn down (quit while a reload landed)
            return

    def _refresh_selection(self, snap: WorkspaceSnapshot, reopen: bool) -> None:
        folder = views.round_dir(snap, self.selected)
        notes = (("attempts", "attempts.md"), ("summary", "summary.md"), ("analysis", "perf-analysis.md"),
                 ("live-attempts", "attempts.md"))
        for widget_id, name in notes:
            tail = self.main.query_one(f"#{widget_id}", FileTail)
            path = folder / name
            if reopen or tail.path != path:
                tail.load(path, workspace=snap.root)  # the reads run in workers, not on the event loop
            else:
                tail.follow()
        self.compute_perf(snap, self.selected, self.metric, self.against)
        self.compute_diff(snap, self.selected, self.diff_against)
        self.refresh_lazy_panes()

    def refresh_lazy_panes(self) -> None:
        """Hotspots and IR read big folders: only while their tab is showing."""
        if self.snapshot is None:
            return
        active = self.main.query_one("#tabs", TabbedContent).active
        if active == "tab-hotspots":
            pane = self.main.query_one("#hotspots-pane", HotspotsPane)
            self.compute_hotspots(self.snapshot, self.selected, pane.text_width())
        elif active == "tab-ir":
            self.compute_ir(self.snapshot, self.selected, self.ir_stage)

    def watch_selected(self) -> None:
        self.ir_stage = None
        if self.ready:
            self.main.query_one("#tree", RoundTree).focus_key(self.selected)
            self.refresh_selection()

    def watch_metric(self) -> None:
        if self.snapshot is not None:
            self.compute_perf(self.snapshot, self.selected, self.metric, self.against)

    def watch_against(self) -> None:
        self.watch_metric()

    def watch_diff_against(self) -> None:
        if self.snapshot is not None:
            self.compute_diff(self.snapshot, self.selected, self.diff_against)


def run_cockpit(argv: list[str]) -> int:
    """``helix [WORKSPACE]`` / ``helix tui [WORKSPACE]``: open the cockpit (a picker for a folder
    of workspaces). Returns the exit code."""
    parser = argparse.ArgumentParser(prog="helix tui", description="Open the helix cockpit on an operator workspace.")
    parser.add_argument("workspace", nargs="?", default=".", help="workspace folder, or a folder of workspaces (default: .)")
    parser.add_argument("--no-watch", action="store_true", help="do not follow file changes (refresh with r)")
    parser.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help="send the cockpit's jobs to this Ray cluster (sets HELIX_CLUSTER for them; C shows it)")
    args = parser.parse_args(argv)
    from helix_engine.workspace.snapshot import find_workspaces

    if args.cluster:  # the jobs the cockpit starts are helix commands: they read it from the environment
        import os

        os.environ["HELIX_CLUSTER"] = args.cluster
    path = _enclosing_workspace(Path(args.workspace))
    found = find_workspaces(path)
    if not found:
        print(f"error: {clean_name(path)} is not an operator workspace and holds none; run helix in a workspace folder, or "
              "`helix demo` to make one", file=sys.stderr)
        return 1
    if not _has_terminal():  # an agent's or a script's pipe: the cockpit would draw into it and wait for keys
        print(f"error: the cockpit needs a terminal (stdin and stdout are not one here); run `helix status "
              f"{clean_name(path)}` for the same facts as text, or add --json", file=sys.stderr)
        return 2
    chosen = found[0]
    fleet_folder: Path | None = None
    if len(found) > 1:
        from helix_tui.screens.picker import PickerApp

        fleet_folder = path
        picked = PickerApp(found).run()
        if picked is None:
            return 0
        chosen = picked
    while True:  # W in the cockpit picks another workspace: open it next
        app = HelixApp(chosen, watch=not args.no_watch, fleet_folder=fleet_folder)
        result = app.run()
        switch_to = getattr(app, "switch_to", None)
        if switch_to is None:
            return int(result or 0)
        chosen = switch_to


def _has_terminal() -> bool:
    """Whether keys come from a terminal and the screen goes to one (`helix demo` asks the same)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _enclosing_workspace(path: Path) -> Path:
    """A round or baseline folder (``helix .`` typed inside opt-round-3/) means its workspace:
    opened on its own it would be a workspace without an operator."""
    from helix_engine.workspace import layout
    from helix_engine.workspace.snapshot import is_workspace

    here = path.absolute()
    if (here.name == layout.BASELINE_DIR or layout.round_number(here.name) is not None) and is_workspace(here.parent):
        return here.parent
    return path
