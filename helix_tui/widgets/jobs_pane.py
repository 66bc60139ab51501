"""Jobs: the list (status, progress bar), the selected job's per-case table and its output tail.

Renders from the App's JobTracker (a cache of ``.helix/jobs/<id>/`` files). The output log is
a capped Log widget, so a job that prints a million lines never floods an SSH link.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Log, ProgressBar, Static

from helix_engine.jobs import summary
from helix_engine.sanitize import clean
from helix_tui import render
from helix_tui.jobs_state import MAX_LOG_LINES, CaseRow, JobLive, JobTracker
from helix_tui.render import plain

#: The live column: compare-perf's per-case speedup (ratio of means) against the baseline's perf
#: file, as each case finishes: provisional and unpaired (the round's number is the paired run's,
#: in the perf pane once the job is done); a calibrate job's cases are A/A, not speedups.
LIVE_COLUMN = "live vs base, unpaired"
STATUS_STYLE = {
    "queued": "dim",
    "running": "bold cyan",
    "passed": "green",
    "failed": "red",
    "timeout": "red",
    "cancelled": "yellow",
    "lost": "magenta",
}
ACTIVE = ("queued", "running")


class JobsPane(Vertical):
    """The jobs list drives which job the detail section shows."""

    DEFAULT_CSS = """
    JobsPane #jobs-table { height: 2fr; min-height: 4; }
    JobsPane #job-line { height: auto; max-height: 3; padding: 0 1; }
    JobsPane ProgressBar { height: 1; padding: 0 1; }
    JobsPane #job-cases { height: 3fr; min-height: 3; }
    JobsPane #job-log { height: 2fr; min-height: 3; }
    """

    class Chosen(Message):
        def __init__(self, job_id: str) -> None:
            super().__init__()
            self.job_id = job_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.selected: str | None = None
        self._known: set[str] | None = None  # job ids seen by the last show (None: never shown)
        self._log_job: str | None = None
        self._log_count = 0
        self._ready = False  # the tables exist (a job update may arrive before they are composed)
        self._pending: tuple[JobTracker, float | None] | None = None

    def compose(self) -> ComposeResult:
        yield DataTable(id="jobs-table", cursor_type="row")
        yield Static("no jobs yet: t test · b bench · p probe · f profile", id="job-line")
        yield ProgressBar(id="job-progress", show_eta=False)
        yield DataTable(id="job-cases", cursor_type="row", zebra_stripes=True)
        yield Log(id="job-log", max_lines=MAX_LOG_LINES, auto_scroll=True)

    #: The jobs list: the columns of `helix jobs` (started-at clock and run time from
    #: jobs/summary.py for both). Narrower than all of them, the job id goes first (the line under
    #: the list names the selected job), then the clock, then the kind.
    COLUMNS = ("status", "kind", "rnd", "progress", "started", "time", "job")
    DROP_ORDER = (6, 4, 1)

    def on_mount(self) -> None:
        self._columns: list[int] = []
        self.query_one("#job-cases", DataTable).add_columns("case", "status", "median", "n", LIVE_COLUMN, "error")
        self._ready = True
        if self._pending is not None:  # an update that arrived before the tables existed
            tracker, now = self._pending
            self._pending = None
            with tracker.lock:
                self.show(tracker, now)

    def show(self, tracker: JobTracker, now: float | None = None) -> None:
        """Render the jobs; a finished case shows its speedup vs the baseline as the engine
        evaluated it (``JobTracker.evaluate_cases``). Before the pane is composed the update is
        kept and rendered on mount (a job may change while the cockpit starts)."""
        if not self._ready:
            self._pending = (tracker, now)
            return
        now = summary.now() if now is None else now
        table = self.query_one("#jobs-table", DataTable)
        rows = [tracker.jobs[j] for j in tracker.order if j in tracker.jobs]
        ids = [live.id for live in rows]
        if self.selected not in ids:
            self.selected = ids[0] if ids else None
        # Follow a job that appears while the shown one is finished (an agent's run-bench from
        # another shell): its per-case table is what the watcher wants; a running pick stays.
        fresh = [i for i in ids if self._known is not None and i not in self._known]
        shown = tracker.jobs.get(self.selected) if self.selected else None
        if fresh and (shown is None or shown.status not in ACTIVE):
            self.selected = fresh[0]
        self._known = set(ids)
        cells = [[  # job.json fields are workspace text: plain, escaped cells
            plain(live.status, STATUS_STYLE.get(live.status, "")),
            plain(live.kind),
            plain(summary.round_text(live.round)),
            Text(render.job_progress(live.done, live.total, live.status in ACTIVE)),
            Text(summary.started_text(live.info)),
            Text(summary.time_text(live.info, at=now, last_seen=live.last_seen) if live.info is not None else "-"),
            plain(live.id),
        ] for live in rows]
        widths = [max([len(label)] + [row[i].cell_len for row in cells]) + 2 for i, label in enumerate(self.COLUMNS)]
        available = table.size.width - 2 if table.size.width else 10_000
        keep = render.fit_columns(widths, available, list(self.DROP_ORDER))
        # Refilling the table moves its cursor (to row 0, then to the pick): those highlights are
        # ours, not the user's; posted, they picked row 0, which re-rendered, which … (a loop of
        # hundreds of renders a second that kept the pick from sticking).
        with table.prevent(DataTable.RowHighlighted):
            if keep != self._columns:
                table.clear(columns=True)
                table.add_columns(*[self.COLUMNS[i] for i in keep])
                self._columns = keep
            table.clear()
            for live, row in zip(rows, cells):
                table.add_row(*[row[i] for i in keep], key=live.id)
            if self.selected in ids:
                table.move_cursor(row=ids.index(self.selected), animate=False)
        self._show_detail(tracker.jobs.get(self.selected) if self.selected else None, tracker.error)

    def _show_detail(self, live: JobLive | None, error: str | None) -> None:
        line = self.query_one("#job-line", Static)
        bar = self.query_one("#job-progress", ProgressBar)
        cases = self.query_one("#job-cases", DataTable)
        log = self.query_one("#job-log", Log)
        cases.clear()
        if live is None:
            line.update(plain(error or "no jobs yet: t test · b bench · p probe · f profile", "dim"))
            bar.update(total=None, progress=0)
            log.clear()
            self._log_job, self._log_count = None, 0
            return
        info = live.info
        text = Text(overflow="ellipsis")  # wraps (up to 3 rows): why a job failed or was lost stays readable
        text.append(f"{clean(live.id)} ", style="bold")
        text.append(clean(live.status), style=STATUS_STYLE.get(live.status, ""))
        extra = getattr(info, "model_extra", None) or {}
        node = extra.get("node_ip") or extra.get("node")
        if node:  # a cluster job: where Ray ran it
            text.append(f" · node {clean(node)}")
        if getattr(info, "device", None):
            resource = f"{clean(extra['cluster_resource'])} " if node and extra.get("cluster_resource") else ""
            text.append(f" · device {resource}{clean(info.device)}")
        elif extra.get("cluster") and not node:
            text.append(f" · cluster {clean(extra['cluster'])}")
        if getattr(info, "exit_code", None) is not None:
            text.append(f" · exit {clean(info.exit_code)}")
        if getattr(info, "message", None):
            text.append(f" · {clean(info.message)}", style="yellow")
        if live.problem:
            text.append(f" · {clean(live.problem)}", style="red")
        line.update(text)
        if live.total or live.status in ACTIVE:
            bar.update(total=live.total or None, progress=live.done)
        else:  # finished without cases: a full (or empty) bar, not an endless "working" one
            bar.update(total=1, progress=1 if live.status == "passed" else 0)
        for row in sorted(live.cases.values(), key=lambda r: (r.index if r.index is not None else 1 << 30, r.case_id)):
            stats = row.record.get("stats") or {}
            state = live.case_status(row)
            cases.add_row(
                plain(row.case_id),
                Text(state, style={"done": "green", "error": "red", "running": "cyan"}.get(state, "yellow")),
                render.micros(row.median_us),
                plain(stats.get("n", "")),
                _speedup(row, live.kind),
                plain(str(row.record.get("error_message") or "")[:60]),
            )
        lines = [clean(line, multiline=True) for line in live.log]  # output.log and log events
        if self._log_job != live.id or len(lines) < self._log_count or len(lines) == MAX_LOG_LINES:
            log.clear()
            log.write_lines(lines)
        else:
            log.write_lines(lines[self._log_count :])
        self._log_job, self._log_count = live.id, len(lines)

    def on_resize(self) -> None:
        """Another width may fit other columns: render again once the resize is laid out."""
        if self._ready and hasattr(self.app, "show_jobs"):
            self.call_after_refresh(self.app.show_jobs)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "jobs-table" or event.row_key is None:
            return
        job_id = event.row_key.value
        if job_id and job_id != self.selected:
            self.selected = job_id
            self.post_message(self.Chosen(job_id))


def _speedup(row: CaseRow, kind: str = "") -> Text:
    """The case's speedup (ratio of means) vs the baseline, read from the engine's result; for a
    calibrate job, none: its cases measure the baseline against a copy of itself (a noise floor,
    which calibrate prints and the perf pane's margins use, never a speedup)."""
    if kind == "calibrate":
        return Text("A/A", style="dim")
    found = row.evaluation
    if found is None:
        return Text("")
    return Text(render.speedup(found.mean.point), style="green" if found.mean.point >= 1.0 else "red")


class JobsStrip(Static):
    """Wide screens: the newest jobs, one line each, with a text progress bar."""

    DEFAULT_CSS = """
    JobsStrip { width: 1fr; height: 1fr; padding: 0 1; }
    """

    MAX_ROWS = 8

    def on_mount(self) -> None:
        self.update(Text("jobs: none yet", style="dim"))

    def show(self, tracker: JobTracker) -> None:
        """One line a job, in columns as wide as their widest cell (kinds run from ``run-test``
        to ``profile-bench``): status, kind, round, progress (the Jobs pane has the times)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        shown = [tracker.jobs[j] for j in tracker.order[: self.MAX_ROWS] if j in tracker.jobs]
        if not shown:
            text.append(clean(tracker.error or "jobs: none yet"), style="dim")
        rows = [(clean(live.status), clean(live.kind), clean(live.round),
                 render.job_progress(live.done, live.total, live.status in ACTIVE)) for live in shown]
        widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
        for i, (live, row) in enumerate(zip(shown, rows)):
            if i:
                text.append("\n")
            text.append(f"{row[0]:<{widths[0]}}", style=STATUS_STYLE.get(live.status, ""))
            text.append(f"  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
        self.update(text)
