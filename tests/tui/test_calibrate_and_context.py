"""Cockpit: the calibrate key starts `helix calibrate`; the perf pane says when the two sides of a
comparison were measured apart (times, hosts, devices, loads)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from textual.widgets import DataTable

from cockpit_helpers import cockpit, wait_for


def _with_context(perf: Path, context: dict) -> None:
    lines = [json.loads(line) for line in perf.read_text().splitlines()]
    perf.write_text("".join(json.dumps(dict(rec, context=context), separators=(",", ":")) + "\n" for rec in lines))


async def test_perf_pane_warns_when_the_sides_were_measured_apart(ws: Path) -> None:
    base_ctx = {"time": "2026-07-20T10:00:00Z", "host": "node-1", "device_id": "cuda:0", "load_avg": 0.1, "cpu_count": 8}
    _with_context(ws / "baseline" / "add_perf.txt", base_ctx)
    _with_context(ws / "opt-round-1" / "opt_add_perf.txt", dict(base_ctx, time="2026-07-20T13:00:00Z", host="node-7"))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        tree = app.main.query_one("#tree")
        tree.focus()
        await pilot.press("home")
        while app.selected != "opt-round-1":
            await pilot.press("down")
            await pilot.pause(0.05)
        table = app.main.query_one("#perf-table", DataTable)
        assert await wait_for(pilot, lambda: "round-1" in [str(c.label) for c in table.columns.values()])
        summary = app.main.query_one("#perf-summary")
        assert await wait_for(pilot, lambda: "measured 3.0 h apart and on different hosts (node-1 vs node-7)"
                              in str(summary.render()))


async def test_calibrate_key_starts_helix_calibrate_on_the_workspace(ws: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "python.args"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {out}\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HELIX_PYTHON", str(python))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        await pilot.press("K")
        assert await wait_for(pilot, lambda: out.is_file() and out.read_text().strip() != "")
        assert out.read_text().split() == ["-m", "helix_engine", "calibrate", "."]
