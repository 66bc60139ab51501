"""One number per round (issue 28 item 4): for generated workspaces, some rounds with a paired run
whose reference drifted from the baseline's perf file (so the paired number and upstream's
perf-file number differ), every surface shows the engine's number for each round
(perf/round_number.py), says what it was measured on, and keeps upstream's under its own name."""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helix_engine.cli import main
from helix_engine.perf.round_number import round_number
from helix_engine.workspace.snapshot import load_workspace
from tests.builders import Case, RoundSpec, build_workspace, write_paired_sidecar


def _case(value: float, seed: int) -> Case:
    rng = random.Random(seed)
    return Case(kernel_us=value, total_op_us=value + 2.0, samples_us=[value * rng.gauss(1.0, 0.01) for _ in range(12)])


def _run(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) in (0, 1)
    return out.getvalue()


ROUND = st.tuples(st.floats(0.6, 3.0), st.floats(0.6, 3.0), st.none() | st.floats(0.75, 1.35))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(ROUND, min_size=1, max_size=3))
def test_every_surface_shows_the_engine_number_of_each_round(rounds: list[tuple[float, float, float | None]]) -> None:
    with tempfile.TemporaryDirectory(prefix="helix-one-number-") as tmp:
        specs = [RoundSpec({"a": _case(10.0 / sa, 2 * n), "b": _case(20.0 / sb, 2 * n + 1)},
                           parent="baseline" if n == 1 else f"opt-round-{n - 1}")
                 for n, (sa, sb, _) in enumerate(rounds, start=1)]
        ws = build_workspace(Path(tmp), baseline={"a": _case(10.0, 0), "b": _case(20.0, 1)}, rounds=specs)
        for n, (_, _, drift) in enumerate(rounds, start=1):
            if drift is not None:  # the baseline ran `drift` times as long in the round's paired job
                write_paired_sidecar(ws, n, {"a": 10.0 * drift, "b": 20.0 * drift})
        snap = load_workspace(ws)
        promotion = snap.promotion
        expected = {}
        for n, view in snap.rounds.items():
            found = round_number(view.comparison, promotion.rounds.get(n) if promotion else None)
            assert found is not None
            expected[n] = found
            paired = rounds[n - 1][2] is not None
            assert found.measured == ("paired run" if paired else "perf files")

        data = json.loads(_run("status", str(ws), "--json"))["operators"][0]
        for row in data["rounds"]:
            number = expected[row["round"]]
            assert row["geomean_speedup"] == pytest.approx(number.point)
            assert row["measured"] == number.measured
            interval = number.geomean.interval
            assert row["geomean_ci95"] == (pytest.approx([interval.low, interval.high]) if interval else None)
            assert row["upstream_geomean_speedup"] == pytest.approx(number.upstream_geomean)
        best = snap.promoted_best_round
        text = _run("status", str(ws))
        if best is not None:
            assert data["promoted_best_round"] == f"round-{best}"
            assert data["promoted_geomean"]["point"] == pytest.approx(expected[best].point)
            assert data["promoted_geomean_measured"] == expected[best].measured
            # status leads with the promotion rule's best and its number, saying what it was measured on
            # (upstream's line as upstream prints it for perf files; a paired run's says so)
            shown = expected[best].text(source=expected[best].measured == "paired run")
            assert f"  Geomean speedup: {shown}\n  Best round: round-{best}\n" in text
        else:
            assert "Best round: round-" not in text
        trend = _run("status", str(ws), "--view", "trend").splitlines()
        cells = trend[1].split()[1:]
        assert cells == [f"{expected[n].point:.2f}x" for n in sorted(expected)]
