"""Read-only panes: header, perf comparison, syntax-highlighted text (diff, hotspots), IR."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, OptionList, Static

from helix_engine.console import fmt_avg_change, fmt_relative
from helix_engine.perf.roofline import case_text, summary_text
from helix_engine.sanitize import clean
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui import render
from helix_tui.render import plain
from helix_tui.views import SPEEDUP_COLUMN, PerfView, comparison_rows, exact_row, record_roofline, record_rows

#: Longest text a pane renders; more is cut with a note (the file opens in $EDITOR with e).
MAX_PANE_CHARS = 400_000


class CockpitHeader(Static):
    """One line: operator · backend/device · phase · current round · best geomean · problems.
    Narrower than that line (80 columns), the backend goes first, then the phase: the operator,
    the best round with its speedup and the problem count stay."""

    DEFAULT_CSS = """
    CockpitHeader { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    _shown: tuple[WorkspaceSnapshot | None, str] = (None, "")

    def on_mount(self) -> None:
        self.show(None)

    def on_resize(self) -> None:
        self.show(*self._shown)

    def show(self, snap: WorkspaceSnapshot | None, note: str = "") -> None:
        self._shown = (snap, note)
        if snap is None:
            self.update(plain(note or "loading workspace…"))
            return
        op = snap.operator_file.stem if snap.operator_file else "no operator"
        cur = render.current_round(snap)
        segments: list[tuple[str, str, int]] = [  # (text, style, priority: higher goes first)
            (clean(op), "bold", 0),
            (clean(backend_device(snap)), "", 3),
            (clean(render.phase(snap)), "", 2),
            (f"round {cur}" if cur is not None else "no active round", "", 1),
        ]
        if snap.promoted_best_round is not None:  # the promotion rule's best and its own interval
            best = snap.promotion.best_geomean() if snap.promotion is not None else None
            text = render.estimate(best) if best is not None else render.speedup(render.best_geomean(snap))
            if best is not None and snap.promotion is not None and snap.promotion.best_geomean_paired():
                text += " paired"  # the paired run's geomean: the tree's label reads the perf files
            segments.append((f"best round-{snap.promoted_best_round} {text}", "bold green", 0))
        count = len(render.all_problems(snap))
        if count:
            segments.append((f"{count} problem{'s' if count != 1 else ''} (!)", "bold red", 0))
        if note:
            segments.append((clean(note), "yellow", 1))
        width = self.content_region.width or self.app.size.width - 2
        self.update(render.fit_segments(segments, width))


def backend_device(snap: WorkspaceSnapshot) -> str:
    """Backend and device as the newest perf file recorded them (what actually ran)."""
    views = [snap.rounds[n] for n in sorted(snap.rounds, reverse=True)[:3]]  # records are read on demand: the newest
    records = [r for v in views for r in v.perf[:1]] + (snap.baseline.perf[:1] if snap.baseline else [])
    for record in records:
        if record.backend or record.device:
            return "/".join(x for x in (record.backend, record.device) if x)
    for record in records:
        if record.bench_mode:
            return record.bench_mode
    return "no runs yet"


class PerfPane(Vertical):
    """Per-case comparison (virtualized DataTable) with geomean and average improvement."""

    DEFAULT_CSS = """
    PerfPane #perf-summary { height: auto; max-height: 6; padding: 0 1; }
    PerfPane DataTable { height: 1fr; }
    PerfPane #perf-exact { height: auto; max-height: 3; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="perf-summary")
        yield DataTable(id="perf-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="perf-exact")

    def on_mount(self) -> None:
        self._exact: dict[object, str] = {}

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted case's exact numbers (the table shows 4 significant digits)."""
        if event.data_table.id == "perf-table":
            text = self._exact.get(event.row_key, "")
            self.query_one("#perf-exact", Static).update(plain(text))

    def on_resize(self) -> None:
        """A width that shows other columns re-renders the table (80 ↔ 160 columns), once the
        resize is laid out (a DataTable refilled inside the resize keeps stale column widths)."""
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        """Only a comparison's columns depend on the width (the baseline's records do not)."""
        last = self._last
        if last is not None and last[0].comparisons and self._columns_for(last[0]) != self._shown_columns:
            self.show(*last)

    #: The time columns go first when the table is too wide (round, then baseline, then delta):
    #: case, speedup with its interval, and verdict stay; the line under the table keeps the times.
    DROP_ORDER = (5, 4, 3)
    _last: tuple[PerfView, WorkspaceSnapshot, str] | None = None
    _shown_columns: list[int] | None = None

    def _columns_for(self, view: PerfView) -> list[int]:
        labels = ["case", SPEEDUP_COLUMN, "verdict", "delta", view.against, view.key[0].removeprefix("opt-")]
        rows = [row for c in view.comparisons for row in comparison_rows(c)]
        widths = [max([cell_len(label)] + [cell_len(str(row[i])) for row in rows]) + 2 for i, label in enumerate(labels)]
        available = self.size.width - 2 if self.size.width else 10_000  # the table's scrollbar
        return render.fit_columns(widths, available, list(self.DROP_ORDER))

    def show(self, view: PerfView, snap: WorkspaceSnapshot, metric: str) -> None:
        self._last = (view, snap, metric)
        summary = self.query_one("#perf-summary", Static)
        table = self.query_one("#perf-table", DataTable)
        table.clear(columns=True)
        self._exact = {}
        self._shown_columns = None
        self.query_one("#perf-exact", Static).update("")
        key = view.key[0]
        if not view.comparisons:
            if key == render.BASELINE and snap.baseline is not None and snap.baseline.perf:
                rows = record_rows(snap.baseline.perf)
                roof = record_roofline(snap.baseline.perf, snap.root)
                if any(roof):  # the cases declare bytes/flops: achieved GB/s, TFLOP/s, % of peak
                    headers = ["case", "roofline", "kernel", "total-op", "method", "error"]
                    rows = [(row[0], figures, *row[1:]) for row, figures in zip(rows, roof)]
                else:
                    headers = ["case", "kernel", "total-op", "method", "error"]
                cells = [[plain(cell) for cell in row] for row in rows]
                _add_columns(table, headers, cells)
                table.add_rows(cells)
                summary.update(Text(f"baseline · {len(snap.baseline.perf)} cases · metric {metric}"))
            else:
                summary.update(plain(view.note or "nothing to compare", "yellow"))
            return
        keep = self._shown_columns = self._columns_for(view)
        labels = ["case", SPEEDUP_COLUMN, "verdict", "delta", view.against, key.removeprefix("opt-")]
        planned: list[tuple[list[Text | str], str | None]] = []  # (cells, exact line) per table row
        for index, c in enumerate(view.comparisons):
            case_roofs = {r.latency_id: r for r in (view.roofline[index] if index < len(view.roofline) else [])}
            if len(view.comparisons) > 1:
                planned.append(([Text(f"── {c.metric_source or c.requested} ──", style="bold")]
                                + [""] * (len(keep) - 1), None))
            for i, row in enumerate(comparison_rows(c)):
                shown: list[Text | str] = [plain(row[0]), plain(row[1]), _verdict(row[2]), *map(plain, row[3:])]
                exact = exact_row(c, i)
                if c.cases[i].latency_id in case_roofs:
                    exact += "\n" + case_text(case_roofs[c.cases[i].latency_id], key, view.against)
                planned.append(([shown[j] for j in keep], exact))
        _add_columns(table, [labels[i] for i in keep], [row for row, _line in planned])
        for row_cells, line in planned:
            row_key = table.add_row(*row_cells)
            if line is not None:
                self._exact[row_key] = line
        lines = Text()
        for index, c in enumerate(view.comparisons):
            case_roofs = {r.latency_id: r for r in (view.roofline[index] if index < len(view.roofline) else [])}
            lines.append(f"{clean(c.metric_source or c.requested)}: ", style="bold")
            lines.append(f"geomean (mean) {render.estimate(c.geomean)} ")
            if c.geomean is not None and c.geomean.point < 1.0:  # a slowdown in words: 10.0x slower
                lines.append(f"({fmt_relative(c.geomean.point)}) ", style="red")
            if c.geomean_median is not None:
                lines.append(f"(median) {render.estimate(c.geomean_median)} ")
            lines.append(fmt_avg_change(c.avg_improvement_pct))
            lines.append(f" · vs {view.against}")
            if c.errors:
                lines.append(f" · {len(c.errors)} error(s): {clean(c.errors[0])}", style="red")
            if c.skipped:
                lines.append(f" · skipped {len(c.skipped)}", style="yellow")
            if c.ci_note:
                lines.append(f" · {clean(c.ci_note)}", style="dim")
            if c.pairing is not None:
                lines.append(" · paired: measured in one job with the reference", style="dim")
            if c.context_warning:
                lines.append(f"\n{clean(c.context_warning)}", style="yellow")
            if any(d.baseline_display.startswith("NA") or d.compare_display.startswith("NA") for d in c.cases):
                lines.append(" · t: total-op time (no kernel time)", style="dim")
            roof_line = summary_text(list(case_roofs.values()), key)
            if roof_line:
                lines.append(f"\n{clean(roof_line)}", style="cyan")
            lines.append("\n")
        lines.rstrip()
        if len(keep) < len(labels):  # the dropped time columns are on the line under the table
            lines.append(" · times: below the table", style="dim")
        summary.update(lines)


def _add_columns(table: DataTable, headers: list[str], rows: Sequence[Sequence[object]]) -> None:
    """Columns as wide as their widest cell, fixed when added: a table refilled while a layout
    or an earlier fill is pending kept the headers' widths (the snapshot of the baseline table
    under load showed `fp16` for `fp16_1024`)."""
    for i, header in enumerate(headers):
        width = max([cell_len(header)] + [cell_len(str(row[i])) for row in rows if i < len(row)])
        table.add_column(header, width=width)


def _verdict(verdict: str) -> Text:
    return plain(verdict, style={"faster": "green", "slower": "red"}.get(verdict, "dim"))


class TextPane(VerticalScroll):
    """Scrollable text: a diff or code (syntax-highlighted), markdown, or a plain sentence.
    Long lines wrap to the pane's width (an 80-column terminal must not cut them off)."""

    DEFAULT_CSS = """
    TextPane { height: 1fr; }
    TextPane > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="body")

    def show(self, text: str, lexer: str | None = None) -> None:
        """``text`` comes from workspace files: escaped here, once, for every lexer; markdown
        links stay text (no OSC 8 hyperlink carries a workspace URL to the terminal)."""
        if len(text) > MAX_PANE_CHARS:
            text = text[:MAX_PANE_CHARS] + "\n… cut (open the file with e)"
        text = clean(text, multiline=True)
        body = self.query_one(".body", Static)
        self.plain = text
        if lexer == "markdown":
            from rich.markdown import Markdown  # lazy: pygments costs ~90 ms at start-up

            body.update(Markdown(text, hyperlinks=False))
        elif lexer == "diff":  # wrapped rows keep their +/- marker (widgets/diff_text.py)
            from helix_tui.widgets.diff_text import DiffText

            body.update(DiffText(text))
        elif lexer:
            from rich.syntax import Syntax

            body.update(Syntax(text, lexer, theme="ansi_dark", word_wrap=True, line_numbers=False))
        else:
            body.update(Text(text))
        self.scroll_home(animate=False)


class IRPane(Horizontal):
    """IR stages on the left, the selected stage's diff against the parent on the right."""

    DEFAULT_CSS = """
    IRPane OptionList { width: 24; }
    IRPane TextPane { width: 1fr; }
    """

    stages: list[str] = []  # the real stage names, by option index (the prompts are escaped)

    def compose(self) -> ComposeResult:
        yield OptionList(id="ir-stages")
        yield TextPane(id="ir-text")

    def show(self, stages: list[str], text: str, chosen: str | None) -> None:
        options = self.query_one("#ir-stages", OptionList)
        if self.stages != stages or options.option_count != len(stages):
            self.stages = list(stages)
            options.clear_options()
            options.add_options([plain(stage) for stage in stages])
        if chosen in stages:
            options.highlighted = stages.index(chosen)
        is_diff = text.startswith(("---", "@@")) or "\n@@ " in text
        self.query_one("#ir-text", TextPane).show(text, "diff" if is_diff else None)
