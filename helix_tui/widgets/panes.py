"""Read-only panes: header, perf comparison, syntax-highlighted text (diff, hotspots), IR."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, OptionList, Static

from helix_engine.workspace.models import WorkspaceSnapshot
from helix_engine.sanitize import clean
from helix_tui import render
from helix_tui.render import plain
from helix_tui.views import SPEEDUP_COLUMN, PerfView, comparison_rows, exact_row, record_rows

#: Longest text a pane renders; more is cut with a note (the file opens in $EDITOR with e).
MAX_PANE_CHARS = 400_000


class CockpitHeader(Static):
    """One line: operator · backend/device · phase · current round · best geomean · problems."""

    DEFAULT_CSS = """
    CockpitHeader { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    def on_mount(self) -> None:
        self.show(None)

    def show(self, snap: WorkspaceSnapshot | None, note: str = "") -> None:
        if snap is None:
            self.update(plain(note or "loading workspace…"))
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        op = snap.operator_file.stem if snap.operator_file else "no operator"
        text.append(clean(op), style="bold")
        text.append(f" · {clean(backend_device(snap))}")
        text.append(f" · {clean(render.phase(snap))}")
        cur = render.current_round(snap)
        text.append(f" · round {cur}" if cur is not None else " · no active round")
        best = render.best_geomean(snap)
        if snap.promoted_best_round is not None:
            text.append(f" · best round-{snap.promoted_best_round} {render.speedup(best)}", style="bold green")
        count = len(render.all_problems(snap))
        if count:
            text.append(f" · {count} problem{'s' if count != 1 else ''} (!)", style="bold red")
        if note:
            text.append(f" · {clean(note)}", style="yellow")
        self.update(text)


def backend_device(snap: WorkspaceSnapshot) -> str:
    """Backend and device as the newest perf file recorded them (what actually ran)."""
    views = [snap.rounds[n] for n in sorted(snap.rounds, reverse=True)]
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

    def show(self, view: PerfView, snap: WorkspaceSnapshot, metric: str) -> None:
        summary = self.query_one("#perf-summary", Static)
        table = self.query_one("#perf-table", DataTable)
        table.clear(columns=True)
        self._exact = {}
        self.query_one("#perf-exact", Static).update("")
        key = view.key[0]
        if not view.comparisons:
            if key == render.BASELINE and snap.baseline is not None and snap.baseline.perf:
                table.add_columns("case", "kernel", "total-op", "method", "error")
                table.add_rows([[plain(cell) for cell in row] for row in record_rows(snap.baseline.perf)])
                summary.update(Text(f"baseline · {len(snap.baseline.perf)} cases · metric {metric}"))
            else:
                summary.update(plain(view.note or "nothing to compare", "yellow"))
            return
        table.add_columns("case", SPEEDUP_COLUMN, "verdict", "delta", view.against, key.removeprefix("opt-"))
        lines = Text()
        for c in view.comparisons:
            if len(view.comparisons) > 1:
                table.add_row(Text(f"── {c.metric_source or c.requested} ──", style="bold"), "", "", "", "", "")
            for i, row in enumerate(comparison_rows(c)):
                row_key = table.add_row(plain(row[0]), plain(row[1]), _verdict(row[2]), *map(plain, row[3:]))
                self._exact[row_key] = exact_row(c, i)
            lines.append(f"{clean(c.metric_source or c.requested)}: ", style="bold")
            lines.append(f"geomean (mean) {render.estimate(c.geomean)} ")
            if c.geomean_median is not None:
                lines.append(f"(median) {render.estimate(c.geomean_median)} ")
            lines.append(f"avg improvement {render.pct(c.avg_improvement_pct)}")
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
            lines.append("\n")
        lines.rstrip()
        summary.update(lines)


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
