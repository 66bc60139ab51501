"""Messages that workers post to the App (workers never touch widgets; the App owns state)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from helix_engine.watch import WatchBatch
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui.views import PerfView


class SnapshotLoaded(Message):
    """A full load (start, refresh) finished."""

    def __init__(self, snapshot: WorkspaceSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class SnapshotReloaded(Message):
    """The watch worker reloaded what one burst of changes named."""

    def __init__(self, snapshot: WorkspaceSnapshot, batch: WatchBatch) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.batch = batch


class FilesTouched(Message):
    """A burst arrived: tails of open files can be polled before the snapshot is reloaded."""

    def __init__(self, batch: WatchBatch) -> None:
        super().__init__()
        self.batch = batch


class JobsChanged(Message):
    """Job files changed; the tracker already folded the new events in."""

    def __init__(self, job_ids: set[str]) -> None:
        super().__init__()
        self.job_ids = job_ids


class WatchStopped(Message):
    """The watcher ended (workspace folder gone, or inotify failed); the reason is shown."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class PerfReady(Message):
    def __init__(self, view: PerfView) -> None:
        super().__init__()
        self.view = view


class PaneText(Message):
    """Text for a read-only pane (diff, hotspots, IR), computed off the event loop."""

    def __init__(self, pane: str, key: tuple[Any, ...], text: str, lexer: str | None = None) -> None:
        super().__init__()
        self.pane = pane
        self.key = key
        self.text = text
        self.lexer = lexer


class ActionFinished(Message):
    """An engine action (start/submit round, spawn job, cancel) returned."""

    def __init__(self, title: str, payload: dict[str, Any], exit_code: int) -> None:
        super().__init__()
        self.title = title
        self.payload = payload
        self.exit_code = exit_code


class ActionFailed(Message):
    """An engine action raised (or refused): the sentence is shown, the app keeps running."""

    def __init__(self, title: str, message: str, severity: str = "error") -> None:
        super().__init__()
        self.title = title
        self.message = message
        self.severity = severity


class SubmitPrefilled(Message):
    """The submit form's pre-fill, built off the event loop (it reads the round folder)."""

    def __init__(self, snapshot: WorkspaceSnapshot, prefill: Any) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.prefill = prefill  # helix_tui.actions.SubmitPrefill
