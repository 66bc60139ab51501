"""Real jobs on the CPU backend (Triton interpreter): a benchmark started from the CLI in
another terminal, and one started with the `b` key, stream into the jobs pane case by case,
and the perf file they write reaches the perf pane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from cockpit_helpers import cockpit, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HELIX_BACKEND="cpu", TRITON_INTERPRET="1")
    env.pop("HELIX_PYTHON", None)
    return env


def rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.slow
async def test_cli_benchmark_from_another_terminal_streams_in(active_ws: Path, monkeypatch) -> None:
    from helix_engine import cli

    assert "run-bench" in cli.command_names()
    monkeypatch.setenv("HELIX_BACKEND", "cpu")
    async with cockpit(active_ws, (120, 40), job_poll_s=1.0) as (app, pilot):
        app.selected = "opt-round-3"
        await pilot.press("3")
        proc = subprocess.Popen(
            [sys.executable, "-m", "helix_engine", "run-bench", "--operator-file", "opt-round-3/opt_add.py",
             "--bench-file", "bench_add.py"],
            cwd=active_ws, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        try:
            jobs = app.main.query_one("#jobs")
            assert await wait_for(pilot, lambda: bool(app.tracker.order), timeout=60)
            cases = jobs.query_one("#job-cases", DataTable)
            assert await wait_for(pilot, lambda: app.tracker.jobs[app.tracker.order[0]].status == "passed", timeout=120)
            assert await wait_for(pilot, lambda: cases.row_count == 2)
            assert [r[1] for r in rows(cases)] == ["done", "done"]
            assert "2/2" in rows(jobs.query_one("#jobs-table", DataTable))[0][3]
            perf = active_ws / "opt-round-3" / "opt_add_perf.txt"
            assert {json.loads(line)["bench_mode"] for line in perf.read_text().splitlines() if line.strip()} == {"perf-counter"}
            # the new perf file reached the perf pane: the engine refuses to compare across bench modes
            summary = app.main.query_one("#perf-summary")
            assert await wait_for(pilot, lambda: "different bench modes" in str(summary.render()))
        finally:
            proc.wait(timeout=120)
        assert proc.returncode == 0, proc.stdout.read().decode() if proc.stdout else ""


@pytest.mark.slow
async def test_bench_key_runs_a_real_job(active_ws: Path, monkeypatch) -> None:
    from helix_engine import cli

    assert "run-bench" in cli.command_names()
    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HELIX_PYTHON", raising=False)
    async with cockpit(active_ws, (120, 40), job_poll_s=1.0) as (app, pilot):
        app.selected = "opt-round-3"
        await pilot.press("b")
        assert await wait_for(pilot, lambda: bool(app.tracker.order), timeout=60)
        job = app.tracker.order[0]
        assert await wait_for(pilot, lambda: app.tracker.jobs[job].status in ("passed", "failed", "lost"), timeout=120)
        live = app.tracker.jobs[job]
        assert live.status == "passed", list(live.log)[-20:]
        assert live.kind == "run-bench" and live.round == "opt-round-3" and len(live.cases) == 2
