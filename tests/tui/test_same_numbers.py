"""One number, one place: for the same case, the perf pane, the jobs pane's live column and
`helix compare-perf` show the same speedup (the ratio of means, upstream's number), each with
the interval of that statistic. The jobs pane showed medians and the perf pane means; a row
printed a ratio of means beside a CI of a ratio of medians."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from textual.widgets import DataTable

from builders import Case, RoundSpec, build_workspace
from cockpit_helpers import cockpit, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _case(samples: list[float]) -> Case:
    mean = sum(samples) / len(samples)
    return Case(kernel_us=mean, total_op_us=mean + 2.0, samples_us=samples)


def _rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_perf_pane_jobs_pane_and_compare_perf_show_the_same_speedup(tmp_path: Path) -> None:
    # one slow outlier in the baseline: ratio of means 11/5 = 2.20x, ratio of medians 10/5 = 2.00x
    base = {"a": _case([10.0] * 19 + [30.0]), "b": _case([20.0 + (i % 3) * 0.1 for i in range(20)])}
    cand = {"a": _case([5.0] * 20), "b": _case([16.0 + (i % 3) * 0.1 for i in range(20)])}
    ws = build_workspace(tmp_path, baseline=base, rounds=[RoundSpec(cand)])
    round_perf = ws / "opt-round-1" / "opt_add_perf.txt"
    records = [json.loads(line) for line in round_perf.read_text().splitlines()]
    job = ws / ".helix" / "jobs" / "j-bench"
    job.mkdir(parents=True)
    (job / "job.json").write_text(json.dumps({
        "id": "j-bench", "kind": "run-bench", "round": "opt-round-1", "created_at": 1_700_000_000.0,
        "started_at": 1_700_000_001.0, "ended_at": 1_700_000_009.0, "status": "passed", "exit_code": 0}))
    events = [{"event": "case_finished", "case_id": r["case_label"], "index": i, "record": r}
              for i, r in enumerate(records)]
    (job / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    out = subprocess.run(
        [sys.executable, "-m", "helix_engine", "compare-perf", "--baseline", str(ws / "baseline" / "add_perf.txt"),
         "--compare", str(round_perf), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    [comparison] = json.loads(out.stdout)["comparisons"]
    cli = {c["latency_id"].removeprefix("latency-"): c for c in comparison["cases"]}
    assert round(cli["a"]["speedup_mean"]["point"], 2) == 2.20 and round(cli["a"]["speedup_median"]["point"], 2) == 2.00

    async with cockpit(ws, (140, 40)) as (app, pilot):
        app.selected = "opt-round-1"
        perf = app.main.query_one("#perf-table", DataTable)
        assert await wait_for(pilot, lambda: perf.row_count == 2 and "[" in _rows(perf)[0][1])
        await pilot.press("3")
        jobs = app.main.query_one("#jobs")
        cases = jobs.query_one("#job-cases", DataTable)
        assert await wait_for(pilot, lambda: cases.row_count == 2 and _rows(cases)[0][4] != "")
        live = {r[0]: r[4] for r in _rows(cases)}
        labels = [str(c.label) for c in cases.columns.values()]
        assert labels[4] == "live vs base, unpaired"  # the perf files as they arrive, not the paired run
        for row in _rows(perf):
            label = row[0]
            mean = cli[label]["speedup_mean"]
            low, high = mean["ci95"]
            assert row[1] == f"{mean['point']:.2f}x [{low:.2f}–{high:.2f}]"  # the same statistic's interval
            assert row[2] == mean["verdict"]
            assert live[label] == f"{mean['point']:.2f}x"
        assert re.search(r"geomean \(mean\) (\d+\.\d+)x", str(app.main.query_one("#perf-summary").render())).group(1) \
            == f"{comparison['geomean_mean']['point']:.2f}"
