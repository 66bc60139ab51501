"""`C`: the Ray cluster the cockpit's jobs go to, as `helix cluster status` prints it (nodes,
devices free and busy, helix jobs running where), refreshed every few seconds.

The address is the cockpit's ``--cluster`` / ``$HELIX_CLUSTER``. The engine call (it connects
to Ray once) runs in a worker thread that only posts the text back.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

from helix_tui.render import plain

REFRESH_S = 3.0
NO_CLUSTER = ("no cluster: open the cockpit with `helix tui --cluster HEAD:6379` (or set HELIX_CLUSTER) to send "
              "its jobs to a Ray cluster and see it here")


class ClusterText(Message):
    def __init__(self, text: str, failed: bool) -> None:
        super().__init__()
        self.text, self.failed = text, failed


class ClusterScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,C", "dismiss", "Close"), Binding("r", "reload", "Refresh")]
    DEFAULT_CSS = """
    ClusterScreen { align: center middle; }
    ClusterScreen > VerticalScroll { width: 95%; height: 90%; border: round $accent; padding: 0 1; background: $surface; }
    """

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.refresh_s = refresh_s

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(plain("cluster  (r refresh · esc closes)", "bold"), id="cluster-title")
            yield Static(plain("asking the cluster …", "dim"), id="cluster-status")

    def on_mount(self) -> None:
        self.action_reload()
        if self.refresh_s > 0:
            self.set_interval(self.refresh_s, self.action_reload)

    def action_reload(self) -> None:
        self.load_status()

    @work(thread=True, exclusive=True, group="cluster", exit_on_error=False)
    def load_status(self) -> None:
        from helix_engine.cluster import cluster_address

        address = cluster_address()
        if not address:
            self.post_message(ClusterText(NO_CLUSTER, False))
            return
        try:
            from helix_engine.cluster.status import cluster_status

            text, failed = cluster_status(address).to_text(), False
        except Exception as exc:  # noqa: BLE001 - HelixError (no Ray, no connection) is a sentence
            text, failed = str(exc) or type(exc).__name__, True
        self.post_message(ClusterText(text, failed))

    def on_cluster_text(self, message: ClusterText) -> None:
        self.query_one("#cluster-status", Static).update(
            plain(message.text, "red" if message.failed else "", multiline=True))
