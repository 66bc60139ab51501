"""The cockpit header names the paired run when the promoted best's geomean is the paired one
(the tree's label reads the two perf files: without the word the two numbers looked like one
quantity)."""

from __future__ import annotations

from pathlib import Path

from helix_tui.widgets.panes import CockpitHeader
from tests.unit.test_round_cache import _pair_round, _workspace

from cockpit_helpers import cockpit


def _header(app) -> str:  # noqa: ANN001
    return str(app.main.query_one(CockpitHeader).render())


async def test_header_says_paired_only_for_a_paired_best(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    async with cockpit(ws, size=(160, 36), watch=False) as (app, _pilot):
        assert "best round-" in _header(app) and "paired" not in _header(app)
        best = app.snapshot.promoted_best_round
    _pair_round(ws, best, (6.0, 12.0))
    async with cockpit(ws, size=(160, 36), watch=False) as (app, _pilot):
        assert app.snapshot.promoted_best_round == best
        assert f"best round-{best} " in _header(app) and "paired" in _header(app)
