"""What each cockpit key does (the App's ``action_*`` methods), kept apart from the App's
state and message routing. Each action calls the same engine function as the CLI, off the
event loop (`HelixApp.run_engine`), or opens a form that does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.widgets import TabbedContent

from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui import actions, views
from helix_tui.messages import ActionFailed, SubmitPrefilled
from helix_tui.widgets.jobs_pane import JobsPane

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

    from helix_tui.jobs_state import JobTracker
    from helix_tui.screens.main import MainScreen

    _AppBase = App[int]
else:
    _AppBase = object


class KeyActions(_AppBase):
    """Mixed into HelixApp. For the type checker it is an App[int] that declares the HelixApp
    state and methods the actions use; HelixApp defines them (mypy checks each definition against
    the declaration here), and at run time this is a plain mixin."""

    if TYPE_CHECKING:
        workspace: Path
        fleet_folder: Path
        switch_to: Path | None
        snapshot: WorkspaceSnapshot | None
        tracker: JobTracker
        status_note: str
        selected: str
        metric: str
        against: str
        diff_against: str

        @property
        def main(self) -> MainScreen: ...

        def load_full(self) -> Worker[None]: ...

        def poll_jobs(self) -> Worker[None]: ...

        def run_engine(self, title: str, fn: actions.EngineCall) -> Worker[None]: ...

        def refresh_selection(self, reopen: bool = True) -> None: ...

    def action_refresh(self) -> None:
        self.status_note = ""
        self.load_full()
        self.poll_jobs()

    def action_cycle_metric(self) -> None:
        order = views.METRICS
        self.metric = order[(order.index(self.metric) + 1) % len(order)]
        self.notify(f"metric: {self.metric}", timeout=2)

    def action_toggle_against(self) -> None:
        """c: compare with the parent / the baseline, in the pane on screen (the diff starts
        against the parent, the round's own change; the perf pane against the canonical baseline)."""
        if self.main.query_one("#tabs", TabbedContent).active == "tab-diff":
            self.diff_against = "baseline" if self.diff_against == "parent" else "parent"
            self.notify(f"diff: against the {self.diff_against}", timeout=2)
            return
        self.against = "parent" if self.against == "baseline" else "baseline"
        self.notify(f"perf: comparing with the {self.against}", timeout=2)

    def action_tab(self, name: str) -> None:
        self.main.query_one("#tabs", TabbedContent).active = f"tab-{name}"

    def action_help(self) -> None:
        from helix_tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_pattern_card(self, name: str | None = None) -> None:
        """k (or enter on a routed card): the card as `helix patterns show` prints it."""
        from helix_tui.screens.card import CardScreen
        from helix_tui.widgets.hotspots import HotspotsPane

        name = name or self.main.query_one("#hotspots-pane", HotspotsPane).highlighted_card or "index"
        self.push_screen(CardScreen(name))

    def action_cluster(self) -> None:
        """C: `helix cluster status` of the cockpit's cluster, refreshed while open."""
        from helix_tui.screens.cluster import ClusterScreen

        self.push_screen(ClusterScreen())

    def action_fleet(self) -> None:
        """W: the workspaces of the fleet folder (`helix fleet`); enter reopens the cockpit on one."""
        from helix_tui.screens.picker import FleetScreen

        def chosen(path: Path | None) -> None:
            if path is not None and path.resolve() != self.workspace:
                self.switch_to = path
                self.exit(0)

        self.push_screen(FleetScreen(folder=self.fleet_folder, current=self.workspace), callback=chosen)

    def action_problems(self) -> None:
        from helix_tui.screens.problems import ProblemsScreen

        if self.snapshot is not None:
            self.push_screen(ProblemsScreen(self.snapshot))

    def action_run(self, kind: str) -> None:
        if self.snapshot is None:
            return
        try:
            argv = actions.job_argv(kind, self.snapshot, self.selected)
        except actions.BaselineMissing as exc:  # a fresh operator folder: lead to prepare-baseline
            self._offer_prepare_baseline(f"{exc}.")
            return
        except actions.ActionRefused as exc:
            self.notify(str(exc), title=f"{kind} not started", severity="warning", timeout=8)
            return
        self.run_engine(f"{kind} {self.selected}", actions.spawn_call(self.workspace, argv))

    def action_capture_ir(self) -> None:
        """`helix ir capture` of the selected round (or the baseline) into its ir/ folder, a job."""
        if self.snapshot is None:
            return
        try:
            argv = actions.ir_capture_argv(self.snapshot, self.selected)
        except actions.BaselineMissing as exc:
            self._offer_prepare_baseline(f"{exc}.")
            return
        except actions.ActionRefused as exc:
            self.notify(str(exc), title="IR capture not started", severity="warning", timeout=8)
            return
        self.run_engine(f"IR capture {self.selected}", actions.spawn_call(self.workspace, argv))

    def action_prepare_baseline(self) -> None:
        self._offer_prepare_baseline("")

    def _offer_prepare_baseline(self, why: str) -> None:
        from helix_tui.screens.forms import PrepareBaselineScreen

        if self.snapshot is not None:
            self.push_screen(PrepareBaselineScreen(self.snapshot, why))

    def action_cancel_job(self) -> None:
        job_id = self.main.query_one("#jobs", JobsPane).selected
        if not job_id:
            self.notify("no job selected: open the Jobs pane (3) and pick one", severity="warning")
            return
        self.run_engine(f"cancel {job_id}", actions.cancel_call(self.workspace, job_id))

    def action_calibrate(self) -> None:
        """`helix calibrate` on the workspace, a job: the baseline against itself (needs baseline/)."""
        if self.snapshot is None:
            return
        if self.snapshot.baseline is None or self.snapshot.baseline.operator_file is None:
            self.notify("calibrate measures the baseline against itself: prepare the baseline first",
                        title="calibrate not started", severity="warning", timeout=8)
            return
        self.run_engine("calibrate", actions.spawn_call(self.workspace, ["calibrate", "."]))

    def action_warm_worker(self) -> None:
        """w: start the warm worker probes run in (helix worker start), or stop the running one."""
        if self.snapshot is not None:
            self.run_engine("warm worker", actions.warm_worker_call(self.workspace))

    def action_agent_start(self) -> None:
        """A: `helix agent start` on the workspace, a job like the CLI's (one agent at a time; a
        missing command is refused with the sentence that says how to configure one). The Jobs
        pane comes forward, where its output streams and x stops it."""
        if self.snapshot is None:
            return
        self.run_engine("agent", actions.spawn_call(self.workspace, ["agent", "start", "."]))
        self.action_tab("jobs")

    def action_start_round(self) -> None:
        from helix_tui.screens.forms import StartRoundScreen

        if self.snapshot is None:
            return
        if actions.baseline_missing(self.snapshot) or not actions.baseline_accepted(self.snapshot):
            self._offer_prepare_baseline("A round starts from an accepted baseline, which this workspace does not "
                                         "have yet.")
            return
        self.push_screen(StartRoundScreen(self.snapshot))

    def action_submit_round(self) -> None:
        """s: the form's pre-fill reads attempts.md and the round folder, so it is built in a
        worker; the form opens when it arrives (``on_submit_prefilled``)."""
        if self.snapshot is not None:
            self.load_submit_prefill(self.snapshot, self.selected)

    @work(thread=True, exclusive=True, group="submit-prefill", exit_on_error=False, description="submit pre-fill")
    def load_submit_prefill(self, snap: WorkspaceSnapshot, key: str) -> None:
        try:
            prefill = actions.submit_prefill(snap, key, self.tracker)
        except actions.ActionRefused as exc:
            self.post_message(ActionFailed("submit round", str(exc), severity="warning"))
            return
        self.post_message(SubmitPrefilled(snap, prefill))

    def on_submit_prefilled(self, message: SubmitPrefilled) -> None:
        from helix_tui.screens.main import MainScreen
        from helix_tui.screens.submit import SubmitRoundScreen

        if isinstance(self.screen, MainScreen):  # not over a form or screen opened meanwhile
            self.push_screen(SubmitRoundScreen(message.snapshot, message.prefill))

    def action_set_round_state(self) -> None:
        from helix_tui.screens.forms import SetRoundStateScreen

        if self.snapshot is not None:
            self.push_screen(SetRoundStateScreen(self.snapshot))

    def action_edit(self) -> None:
        if self.snapshot is None:
            return
        tabs = self.main.query_one("#tabs", TabbedContent).active
        notes = self.main.query_one("#notes", TabbedContent).active
        path = actions.file_for_pane(self.snapshot, self.selected, tabs, notes)
        command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi") + [str(path)]
        try:
            with self.suspend():
                subprocess.run(command, check=False)
        except OSError as exc:
            self.notify(f"cannot start {command[0]}: {exc}. Set $EDITOR.", severity="error")
            return
        except Exception:  # noqa: BLE001 - SuspendNotSupported (headless): run it without a terminal
            try:
                subprocess.run(command, check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as exc:
                self.notify(f"cannot start {command[0]}: {exc}. Set $EDITOR.", severity="error")
                return
        self.refresh_selection()
