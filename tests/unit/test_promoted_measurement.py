"""Which measurement the promoted best's geomean is (issue 10: one quantity, one label).

`helix demo` printed "Geomean speedup: 7.37x" (upstream's line: the two perf files) above
"Promoted best: round-1, geomean speedup (ratio of means) 7.34x [...]" (the paired run): two
numbers under one name. The promoted line names the paired run when it is judged on one.
"""

from __future__ import annotations

import json
from pathlib import Path

from helix_engine import cli
from tests.unit.test_round_cache import _pair_round, _workspace


def _status(ws: Path, capsys, *words: str) -> str:  # noqa: ANN001
    capsys.readouterr()
    assert cli.main(["status", str(ws), *words]) == 0
    return capsys.readouterr().out


def test_the_promoted_line_names_the_paired_run(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    ws = _workspace(tmp_path / "ws")
    text = _status(ws, capsys)
    assert "geomean speedup (ratio of means)" in text and "paired run" not in text
    doc = json.loads(_status(ws, capsys, "--json"))["operators"][0]
    assert doc["promoted_geomean_measured"] == "perf files"
    best = doc["promoted_best_round"]
    _pair_round(ws, int(best.split("-")[1]), (6.0, 12.0))  # the best round, measured paired
    text = _status(ws, capsys)
    assert f"Promoted best: {best}, geomean speedup (paired run, ratio of means)" in text
    doc = json.loads(_status(ws, capsys, "--json"))["operators"][0]
    assert doc["promoted_best_round"] == best and doc["promoted_geomean_measured"] == "paired run"
