"""Cockpit: the perf pane shows the roofline (achieved GB/s, % of the peak, the bound it decides)
when the bench cases declare their bytes, computed by the engine (perf/roofline.py)."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable

from helix_engine.perf import peaks

from cockpit_helpers import cockpit, wait_for

BYTES = 29_000_000  # at round-1's 8 µs: 3625 GB/s, 86% of a measured 4224 GB/s


def _declare(perf: Path) -> None:
    lines = [json.loads(line) for line in perf.read_text().splitlines()]
    perf.write_text("".join(json.dumps(dict(rec, device="NVIDIA H200", roofline={"bytes": BYTES, "dtype": "fp16"}),
                                       separators=(",", ":")) + "\n" for rec in lines))


async def test_perf_pane_shows_the_roofline_of_the_selected_round(ws: Path) -> None:
    _declare(ws / "baseline" / "add_perf.txt")
    _declare(ws / "opt-round-1" / "opt_add_perf.txt")
    peaks.store(ws, peaks.MeasuredPeak(device="NVIDIA H200", backend="cuda", measured_at="2026-07-20T10:00:00Z",
                                       copy_gbps=4224.0))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        table = app.main.query_one("#perf-table", DataTable)
        tree = app.main.query_one("#tree")
        tree.focus()
        await pilot.press("home")  # the baseline: its records with a roofline column
        assert await wait_for(pilot, lambda: "roofline" in [str(c.label) for c in table.columns.values()])
        assert await wait_for(pilot, lambda: table.row_count == 3)
        assert "2900 GB/s 69%" in [str(cell) for cell in table.get_row_at(0)]  # fp16_1024: 10 µs
        while app.selected != "opt-round-1":
            await pilot.press("down")
            await pilot.pause(0.05)
        assert await wait_for(pilot, lambda: "round-1" in [str(c.label) for c in table.columns.values()])
        summary = app.main.query_one("#perf-summary")
        # 8, 18 and 36 µs: 86%, 38% and 19% of the measured copy bandwidth; one case at the roof, one far below
        assert await wait_for(pilot, lambda: "roofline: opt-round-1 at 19%–86% of bandwidth (4224 GB/s, measured) · "
                              "by measurement: 1 memory-bound, 1 latency-bound" in str(summary.render()))
        table.focus()
        table.move_cursor(row=0)
        exact = app.main.query_one("#perf-exact")
        assert await wait_for(pilot, lambda: "roofline: baseline 2900 GB/s 69%, opt-round-1 3625 GB/s 86% "
                              "(memory-bound)" in str(exact.render()))
