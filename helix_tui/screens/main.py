"""The cockpit screen: header, round tree, the pane tabs, the wide-screen live strip, footer.

Its bindings live here (not on the App), so keys typed into a form never start a job.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from helix_tui.commands import bindings
from helix_tui.widgets.file_tail import FileTail
from helix_tui.widgets.hotspots import HotspotsPane
from helix_tui.widgets.jobs_pane import JobsPane, JobsStrip
from helix_tui.widgets.panes import CockpitHeader, IRPane, PerfPane, TextPane
from helix_tui.widgets.round_tree import RoundTree

#: Below this width the tree narrows and the footer shows fewer keys (80×24 over SSH).
NARROW_WIDTH = 110
#: From this size on, a live strip (running jobs, the attempts tail) sits under the tabs.
WIDE_WIDTH, WIDE_HEIGHT = 140, 40


class MainScreen(Screen[None]):
    """The cockpit."""

    BINDINGS = bindings()
    composed = False  # set once the widgets exist (messages may arrive earlier)

    def compose(self) -> ComposeResult:
        yield CockpitHeader(id="header")
        with Horizontal(id="body"):
            yield RoundTree(id="tree")
            with Vertical(id="right"):
                yield from self._tabs()
                with Horizontal(id="live"):
                    yield JobsStrip(id="live-jobs")
                    yield FileTail(id="live-attempts")
        yield Footer(compact=True)

    def _tabs(self) -> ComposeResult:
        with TabbedContent(id="tabs", initial="tab-perf"):
            with TabPane("Perf", id="tab-perf"):
                yield PerfPane(id="perf")
            with TabPane("Attempts", id="tab-attempts"):
                with TabbedContent(id="notes", initial="tab-attempts-md"):
                    with TabPane("attempts.md", id="tab-attempts-md"):
                        yield FileTail(id="attempts")
                    with TabPane("summary.md", id="tab-summary-md"):
                        yield FileTail(id="summary")
                    with TabPane("perf-analysis.md", id="tab-analysis-md"):
                        yield FileTail(id="analysis")
            with TabPane("Jobs", id="tab-jobs"):
                yield JobsPane(id="jobs")
            with TabPane("Hotspots", id="tab-hotspots"):
                yield HotspotsPane(id="hotspots-pane")
            with TabPane("Diff", id="tab-diff"):
                yield TextPane(id="diff")
            with TabPane("IR", id="tab-ir"):
                yield IRPane(id="ir")

    def on_mount(self) -> None:
        self.composed = True
        app = self.app  # the HelixApp: render what arrived while this screen was composing
        for name in ("render_all", "show_jobs"):
            if hasattr(app, name):
                getattr(app, name)()

    def on_resize(self) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "-narrow")
        self.set_class(self.size.width >= WIDE_WIDTH and self.size.height >= WIDE_HEIGHT, "-wide")
