"""SVG snapshots of the main screen at 80×24 (SSH) and 160×48, on a fixed workspace.

Regenerate after an intended change with
`python3 -m pytest tests/tui/test_snapshots.py --snapshot-update` and review the SVGs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from cockpit_helpers import make_workspace, settle, wait_for
from helix_tui.app import HelixApp


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_main_screen(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    app = HelixApp(make_workspace(tmp_path, active_round=True), watch=False, job_poll_s=0)

    async def run_before(pilot) -> None:  # noqa: ANN001
        await settle(pilot, app)
        app.selected = "opt-round-2"
        table = app.main.query_one("#perf-table", DataTable)
        assert await wait_for(pilot, lambda: "round-2" in [str(c.label) for c in table.columns.values()])
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
