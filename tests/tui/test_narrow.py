"""80×24 keeps what matters (issue 13, findings 7 and 9): the header keeps the promoted best round
and its speedup, the perf table drops time columns before it cuts one, hotspot tables keep whole
cells, a refused bench says what the cockpit can do, and a slowdown reads "10.0x slower"."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from builders import RoundSpec, build_workspace
from cockpit_helpers import cockpit, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def shown(widget) -> str:  # noqa: ANN001
    return str(widget.render())


async def test_header_at_80_columns_keeps_the_best_round_and_its_speedup(active_ws: Path) -> None:
    async with cockpit(active_ws, (80, 24)) as (app, pilot):
        header = app.main.query_one("#header")
        best = app.snapshot.promotion.best_geomean()
        assert app.snapshot.promoted_best_round == 2 and best is not None
        note = "live updates stopped (inotify watch limit reached); press r to refresh"
        header.show(app.snapshot, note)  # a long line: the backend and the phase go first
        await pilot.pause(0.1)
        text = shown(header)
        assert f"best round-2 {best.point:.2f}x" in text and text.startswith("add")
        assert "torch-npu-profiler" not in text and "…" not in text
        await pilot.resize_terminal(160, 40)  # room for everything again
        assert await wait_for(pilot, lambda: "torch-npu-profiler" in shown(header) and "round_active" in shown(header))


async def test_a_slowdown_reads_as_slower_in_the_perf_pane_and_upstream_keeps_its_numbers(tmp_path: Path) -> None:
    """`avg improvement -900.0%` read badly: helix's own pane says 10.0x slower; compare-perf's
    upstream block keeps its numbers byte for byte."""
    ws = build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0}, rounds=[RoundSpec({"a": 100.0, "b": 200.0})])
    async with cockpit(ws, (120, 36)) as (app, pilot):
        app.selected = "opt-round-1"
        summary = app.main.query_one("#perf-summary")
        assert await wait_for(pilot, lambda: "vs baseline" in shown(summary))
        text = shown(summary)
        assert "geomean (mean) 0.10x (10.0x slower)" in text and "avg 10.0x slower" in text
        assert "-900.0%" not in text
    out = subprocess.run([sys.executable, "-m", "helix_engine", "compare-perf", "--baseline",
                          str(ws / "baseline" / "add_perf.txt"), "--compare", str(ws / "opt-round-1" / "opt_add_perf.txt")],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert "Avg improvement: -900.0%" in out.stdout and "Geomean speedup: 0.10x" in out.stdout


def test_speedup_words() -> None:
    from helix_engine.console import fmt_avg_change, fmt_relative

    assert [fmt_relative(x) for x in (1.234, 0.1, 0.8, 1.001, 12.0, None, 0.0)] == \
        ["1.23x faster", "10.0x slower", "1.25x slower", "same speed", "12.0x faster", "unknown", "unknown"]
    assert [fmt_avg_change(x) for x in (28.3, -1002.3, -25.0, None)] == \
        ["avg improvement +28.3%", "avg 11.0x slower", "avg 1.25x slower", "avg improvement unknown"]


async def test_hotspot_tables_at_80_columns_show_whole_cells(ws: Path) -> None:
    """`softma…  interp…  27407.…`: the hotspot table now keeps the columns that fit whole."""
    shutil.copytree(FIXTURES / "ascend-profiler" / "standalone_real_output", ws / "opt-round-2" / "profile")
    async with cockpit(ws, (80, 24)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("4")
        pane = app.main.query_one("#hotspots")
        assert await wait_for(pilot, lambda: "matmul_kernel" in getattr(pane, "plain", ""))
        width = pane.size.width - 2
        console = Console(width=width, record=True, color_system=None)
        console.print(Markdown(pane.plain))
        rendered = console.export_text()
        table = rendered[rendered.index("OP Type"):rendered.index("Core buckets")]
        assert "…" not in table, table
        assert "matmul_kernel" in table and "Ratio(%)" in table
        assert "OP Type" in pane.plain and "Avg Time(us)" not in pane.plain  # dropped, not cut
        await pilot.resize_terminal(180, 40)
        assert await wait_for(pilot, lambda: "Avg Time(us)" in pane.plain)  # a wide pane shows them all


async def test_a_refused_bench_says_what_the_cockpit_can_do(ws: Path) -> None:
    """A bench of a submitted round suggested `--output`, which no key can pass."""
    async with cockpit(ws, (80, 24), notifications=True) as (app, pilot):
        app.selected = "opt-round-1"
        await pilot.pause(0.2)
        await pilot.press("b")
        said = lambda: " ".join(str(n.message) for n in app._notifications)  # noqa: E731
        assert await wait_for(pilot, lambda: "canonical perf record" in said())
        assert "--output" not in said() and "new round (n)" in said() and "(p)" in said()
        assert not (ws / ".helix" / "jobs").exists() or not any((ws / ".helix" / "jobs").iterdir())
    state = json.loads((ws / ".helix" / "state.json").read_text())
    assert state["rounds"]["1"]["status"] == "passed"


async def test_notices_never_cover_the_footer(ws: Path) -> None:
    """A burst of notices at 80x24: they stay above the footer (its keys are how a notice's advice
    is followed), and the newest is the one in view."""
    from textual.widgets._toast import Toast

    async with cockpit(ws, (80, 24), notifications=True) as (app, pilot):
        for i in range(6):
            app.notify(f"notice {i}: started `helix run-bench --operator-file opt-round-{i}/opt_add.py`; see the Jobs pane (3)",
                       title=f"bench opt-round-{i}", timeout=30)
        assert await wait_for(pilot, lambda: len(app.screen.query(Toast)) == 6)
        await pilot.pause(0.5)
        rows = screen_rows(app.export_screenshot())
        assert "t test" in rows[23] and "^p palette" in rows[23] and "notice" not in rows[23]
        assert any("notice 5" in row for y, row in rows.items() if y < 23)


def screen_rows(svg: str) -> dict[int, str]:
    """The text of each screen row of a Textual SVG screenshot (its <text> runs, left to right)."""
    import html
    import re

    rows: dict[int, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text[^>]*x="([\d.]+)"[^>]*clip-path="url\(#[^)]*line-(\d+)\)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(int(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return {y: "".join(text for _, text in sorted(runs)).replace("\xa0", " ") for y, runs in rows.items()}
