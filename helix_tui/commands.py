"""Every cockpit action in one table: keys (footer, `?` screen) and the command palette.

One table so the three doors (key, footer/help, palette) can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape


@dataclass(frozen=True)
class CockpitAction:
    key: str
    action: str  # the App action string, e.g. "run('bench')"
    title: str
    help: str
    footer: str | None = None  # the short footer label; None: only in `?` and the palette

    @property
    def id(self) -> str:
        """The binding id a keymap file names (``bench``, ``pane-jobs``, ``cancel-job``): the
        action's argument for jobs, ``pane-`` + the pane for tabs, else the action's name."""
        name, _, arg = self.action.partition("(")
        arg = arg.strip("()'\"")
        if name == "run" and arg:
            return arg
        if name == "tab" and arg:
            return f"pane-{arg}"
        return name.replace("_", "-")


ACTIONS: tuple[CockpitAction, ...] = (
    CockpitAction("t", "run('test')", "Run test", "Run the correctness test of the selected round or baseline (a job)", "test"),
    CockpitAction("b", "run('bench')", "Run bench", "Benchmark the selected round against its parent, both in one job (run-bench --against parent: the paired verdict); on the baseline, bench it alone (a job; writes the perf file)", "bench"),
    CockpitAction("v", "run('bench-baseline')", "Bench vs baseline", "Benchmark the selected round against the baseline, both in one job (run-bench --against baseline: the paired verdict the promotion rule reads)"),
    CockpitAction("p", "run('probe')", "Probe", "Fast probe-bench of the selected round against the baseline (a job)"),
    CockpitAction("f", "run('profile')", "Profile", "Profile the selected round or baseline into its profile/ folder (a job)"),
    CockpitAction("x", "cancel_job", "Cancel job", "Cancel the job selected in the Jobs pane (SIGTERM, then SIGKILL)"),
    CockpitAction("i", "capture_ir", "Capture IR", "Capture the compiler stages of the selected round or baseline into its ir/ folder (helix ir capture, a job)"),
    CockpitAction("B", "prepare_baseline", "Prepare baseline", "Snapshot the operator into baseline/, test, bench and submit it (helix prepare-baseline; b, t and n offer it while the baseline is missing)"),
    CockpitAction("c", "toggle_against", "Compare parent/baseline", "Compare the round with its parent or the baseline: in the Diff pane the operator diff (parent first), elsewhere the perf table (baseline first)", "vs"),
    CockpitAction("K", "calibrate", "Calibrate noise", "A/A runs of the baseline against a separate copy of it: each case's noise floor into .helix/calibration.json, the margin verdicts use (helix calibrate, jobs)"),
    CockpitAction("m", "cycle_metric", "Metric", "Switch the compared metric: auto, kernel, total-op, all", "metric"),
    CockpitAction("n", "start_round", "Start round", "Start the next round: strategy, analysis policy, reason", "start"),
    CockpitAction("s", "submit_round", "Submit round", "Write round-state.json and submit the selected round", "submit"),
    CockpitAction("a", "set_round_state", "Set round state", "Change the active round's strategy or analysis policy"),
    CockpitAction("e", "edit", "Open in $EDITOR", "Open the file behind the current pane in $EDITOR"),
    CockpitAction("r", "refresh", "Refresh", "Reload the whole workspace from disk"),
    CockpitAction("exclamation_mark", "problems", "Problems", "List every problem found in the workspace files"),
    CockpitAction("question_mark", "help", "Help", "Show every key", "help"),
    CockpitAction("1", "tab('perf')", "Perf pane", "Show the perf comparison"),
    CockpitAction("2", "tab('attempts')", "Attempts pane", "Show attempts.md, summary.md, perf-analysis.md"),
    CockpitAction("3", "tab('jobs')", "Jobs pane", "Show jobs, progress and per-case results"),
    CockpitAction("4", "tab('hotspots')", "Hotspots pane", "Show the profile hotspots of the selected round"),
    CockpitAction("5", "tab('diff')", "Diff pane", "Show the operator diff against the parent"),
    CockpitAction("6", "tab('ir')", "IR pane", "Show IR stages and the stage diff against the parent"),
    CockpitAction("C", "cluster", "Cluster", "The Ray cluster the cockpit's jobs go to (helix tui --cluster, or HELIX_CLUSTER): nodes, devices free and busy, helix jobs running where (helix cluster status)"),
    CockpitAction("W", "fleet", "Workspaces", "Every workspace beside this one: best round and geomean, phase, running jobs, last change; enter opens one (helix fleet)"),
    CockpitAction("A", "agent_start", "Start agent", "Run your configured agent command on the workspace as a job (helix agent start; set it with helix agent config or HELIX_AGENT_COMMAND): its output is live in the Jobs pane, x stops it"),
    CockpitAction("w", "warm_worker", "Warm worker", "Start the warm worker that probes (p) run in: torch and Triton imported once, each probe a fork of it, seconds faster on a GPU host (helix worker start); w again stops it"),
    CockpitAction("k", "pattern_card", "Pattern card", "Open the knowledge card highlighted in the Hotspots pane (the index when no card is routed)"),
    CockpitAction("q", "quit", "Quit", "Leave the cockpit (running jobs keep running)", "quit"),
)

KEY_NAMES = {"exclamation_mark": "!", "question_mark": "?"}


def display_key(key: str) -> str:
    """``?`` for ``question_mark``; several keys (a keymap's ``ctrl+s,S``) joined with ``/``."""
    return "/".join(KEY_NAMES.get(k, k) for k in key.split(","))


def bindings() -> list[BindingType]:
    """Bindings for the main screen (not the App, so a form's keys never start a job)."""
    return [
        Binding(a.key, f"app.{a.action}", a.footer or a.title, show=a.footer is not None,
                key_display=display_key(a.key), tooltip=a.help, id=a.id)
        for a in ACTIONS
    ]


class HelixCommands(Provider):
    """The command palette: every action of ACTIONS, fuzzy-matched on its title."""

    def _actions(self) -> list[CockpitAction]:
        """ACTIONS minus those Textual's system commands already list under the same title
        (its "Quit" runs the same action_quit; two "Quit" entries read as a bug)."""
        from textual.app import get_system_commands_provider

        system: set[str] = set()
        if get_system_commands_provider in self.app.COMMANDS:
            system = {cmd.title for cmd in self.app.get_system_commands(self.screen)}
        return [act for act in ACTIONS if act.title not in system]

    def _key(self, act: CockpitAction) -> str:
        """The key the action has now (a user keymap may have changed it)."""
        keys_of = getattr(self.app, "keys_of", None)
        return keys_of(act) if keys_of is not None else display_key(act.key)

    def _help(self, act: CockpitAction) -> str:
        """``[t] Run the correctness test …``, escaped: the palette reads its help as markup, and
        ``[t]`` vanished as a style tag."""
        return escape(f"[{self._key(act)}] {act.help}")

    async def discover(self) -> Hits:
        for act in self._actions():
            yield DiscoveryHit(act.title, partial(self.app.run_action, act.action), help=self._help(act))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for act in self._actions():
            score = matcher.match(act.title)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(act.title),
                    partial(self.app.run_action, act.action),
                    help=self._help(act),
                )
