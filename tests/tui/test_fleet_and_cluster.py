"""The fleet screen (the picker of `helix FOLDER`, and W in the cockpit) and the cluster screen
(C) without a cluster. A cluster job followed live in the cockpit, and C on a real cluster, are
in tests/e2e/test_cluster_jobs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from helix_engine.fleet import geomean_text, load_row
from helix_tui.app import run_cockpit
from helix_tui.screens.cluster import NO_CLUSTER
from helix_tui.screens.picker import FleetScreen, PickerApp

from builders import build_workspace
from cockpit_helpers import BASELINE, ROUND_1, ROUND_2, cockpit, make_workspace, wait_for


def _cells(table: DataTable, row: int) -> list[str]:
    return [str(c) for c in table.get_row_at(row)]


async def test_the_picker_shows_each_workspaces_best_round_from_the_engine(tmp_path: Path) -> None:
    first = make_workspace(tmp_path / "a")
    second = make_workspace(tmp_path / "b", active_round=True)
    app = PickerApp([first, second])
    async with app.run_test(size=(140, 24)) as pilot:
        table = app.screen.query_one(DataTable)
        assert await wait_for(pilot, lambda: "…" not in _cells(table, 1), timeout=30)
        for i, path in enumerate((first, second)):
            row = load_row(path)
            cells = _cells(table, i)
            assert cells[2] == row.best_round == "round-2"
            assert cells[3] == geomean_text(row.best_geomean) != "—"
        assert [_cells(table, i)[1] for i in range(2)] == ["awaiting round start", "round 3 active"]
        await pilot.press("escape")
    assert app.return_value is None


async def test_w_opens_another_workspace_of_the_fleet(tmp_path: Path) -> None:
    here = build_workspace(tmp_path, name="softmax", baseline=BASELINE, rounds=[ROUND_1])
    other = build_workspace(tmp_path, name="layernorm", baseline=BASELINE, rounds=[ROUND_2])
    (tmp_path / "notes").mkdir()  # not a workspace: not listed
    async with cockpit(here, (140, 40), watch=False) as (app, pilot):  # the fleet: the workspace's folder
        await pilot.press("W")
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one(DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 2 and "…" not in _cells(table, 1), timeout=30)
        assert [_cells(table, i)[0] for i in range(2)] == ["layernorm", "softmax ●"]  # ● the open one
        assert _cells(table, 1)[2] == "round-1"
        await pilot.press("enter")
    assert app.switch_to == other


def test_run_cockpit_opens_the_workspace_chosen_with_w(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import helix_tui.app as app_module

    first, second = make_workspace(tmp_path / "a"), make_workspace(tmp_path / "b")
    opened: list[Path] = []

    class Recorder:
        def __init__(self, path: Path, **_: object) -> None:
            opened.append(Path(path))
            self.switch_to = second if len(opened) == 1 else None

        def run(self) -> int:
            return 0

    monkeypatch.setattr(app_module, "HelixApp", Recorder)
    monkeypatch.setattr(app_module, "_has_terminal", lambda: True)
    assert run_cockpit([str(first)]) == 0
    assert opened == [first, second]


async def test_c_without_a_cluster_says_how_to_name_one(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HELIX_CLUSTER", raising=False)
    async with cockpit(ws, (120, 30), watch=False) as (app, pilot):
        await pilot.press("C")
        status = app.screen.query_one("#cluster-status", Static)
        assert await wait_for(pilot, lambda: NO_CLUSTER in str(status.render()).replace("\n", " "), timeout=10)
        await pilot.press("escape")
        assert app.screen is app.main
