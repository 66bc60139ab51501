"""The cockpit on a generated 200-round, 20-case workspace.

Figures (medians; references measured in the same run):
  * first paint, in process: HelixApp headless (`run_test`) from construction until the round
    tree is populated, vs `import textual.app` in a fresh process (the floor any Textual app pays);
  * cold start: a fresh `python` process that imports the cockpit and paints the tree, vs a fresh
    process that only imports textual;
  * live latency: an append to the selected round's attempts.md until the attempts pane shows
    it (watchfiles → reload → message → widget), vs the 300 ms the issue allows;
  * peak resident memory of the cold-start process, measured from outside (`_measure.run`: GNU
    time, not the ru_maxrss a child inherits from this process), vs a process that imports textual.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import _measure  # noqa: E402 - after the sys.path lines above

ROUNDS, CASES, REPEATS = 200, 20, 5
LATENCY_TARGET_S = 0.3
SIZE = (160, 48)

_COLD = r"""
import asyncio, json, sys, time
t0 = time.perf_counter()
from helix_tui.app import HelixApp
t_import = time.perf_counter() - t0
app = HelixApp(sys.argv[1], watch=False, job_poll_s=0)
async def main():
    async with app.run_test(size=(160, 48)) as pilot:
        while not (app.snapshot is not None and app.main.query_one("#tree").nodes_by_key):
            await asyncio.sleep(0.002)
        paint = time.perf_counter() - t0
        print(json.dumps({"import": t_import, "paint": paint}), flush=True)
asyncio.run(main())
"""

_TEXTUAL = r"""
import json, time
t0 = time.perf_counter()
import textual.app, textual.widgets
print(json.dumps({"import": time.perf_counter() - t0}), flush=True)
"""


def _python(code: str, *args: str) -> tuple[dict, float, float]:
    """Run ``code`` in a fresh interpreter; (its JSON line, wall seconds of the whole process,
    its peak RSS in MiB measured from outside)."""
    got = _measure.run([sys.executable, "-c", code, *args], cwd=REPO, timeout=120)
    return json.loads(got.stdout.strip().splitlines()[-1]), got.wall_s, got.peak_mib


async def _first_paint(ws: Path) -> float:
    from helix_tui.app import HelixApp

    start = time.perf_counter()
    app = HelixApp(ws, watch=False, job_poll_s=0)
    async with app.run_test(size=SIZE):
        while not (app.snapshot is not None and app.main.query_one("#tree").nodes_by_key):
            await asyncio.sleep(0.002)
        return time.perf_counter() - start


async def _latencies(ws: Path, n: int) -> list[float]:
    from helix_tui.app import HelixApp

    app = HelixApp(ws, job_poll_s=0)
    out: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        while not (app.snapshot is not None and app.main.query_one("#tree").nodes_by_key):
            await asyncio.sleep(0.01)
        app.selected = "opt-round-200"
        await pilot.press("2")
        await pilot.pause(0.5)  # the watcher is running and the pane shows round 200
        tail = app.main.query_one("#attempts")
        attempts = ws / "opt-round-200" / "attempts.md"
        for i in range(n):
            marker = f"benchmark line {i}"
            start = time.perf_counter()
            with open(attempts, "a", encoding="utf-8") as handle:
                handle.write(marker + "\n")
            while not (tail.lines and tail.lines[-1] == marker):
                await asyncio.sleep(0.002)
                if time.perf_counter() - start > 10:
                    raise RuntimeError("the attempts pane did not show an appended line within 10 s")
            out.append(time.perf_counter() - start)
            await asyncio.sleep(0.3)  # let the burst window close before the next write
    return out


def run() -> list[dict]:
    from tests.builders import generate_large_workspace

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="helix-bench-cockpit-") as tmp:
        ws = generate_large_workspace(Path(tmp), rounds=ROUNDS, cases=CASES)
        textual_runs = [_python(_TEXTUAL) for _ in range(REPEATS)]
        textual_import = statistics.median(r[0]["import"] for r in textual_runs)
        textual_wall = statistics.median(r[1] for r in textual_runs)
        textual_rss = statistics.median(r[2] for r in textual_runs)
        rows.append({"benchmark": "cockpit", "figure": "import textual.app + widgets (fresh process)",
                     "value": textual_import, "unit": "s", "compare_to": None, "ratio": None,
                     "note": "the floor every Textual app pays; reference for the figures below"})

        small = generate_large_workspace(Path(tmp), rounds=2, cases=CASES, name="small_add")
        asyncio.run(_first_paint(small))  # warm-up: .pyc files, page cache
        small_paint = statistics.median(asyncio.run(_first_paint(small)) for _ in range(REPEATS))
        paints = [asyncio.run(_first_paint(ws)) for _ in range(REPEATS)]
        paint = statistics.median(paints)
        rows.append({"benchmark": "cockpit", "figure": f"first paint in process, {ROUNDS} rounds x {CASES} cases "
                     "(construct → tree populated, headless)", "value": paint, "unit": "s",
                     "compare_to": "import textual (fresh process)", "ratio": paint / textual_import,
                     "note": f"median of {REPEATS}; the same app on a 2-round workspace paints in "
                     f"{small_paint:.3f} s, so {ROUNDS} rounds add {paint - small_paint:.3f} s "
                     "(load_workspace + tree)"})

        cold_runs = [_python(_COLD, str(ws)) for _ in range(REPEATS)]
        cold_wall = statistics.median(r[1] for r in cold_runs)
        cold_import = statistics.median(r[0]["import"] for r in cold_runs)
        cold_rss = statistics.median(r[2] for r in cold_runs)
        rows.append({"benchmark": "cockpit", "figure": f"cold start to painted tree, {ROUNDS} rounds (fresh "
                     "process, interpreter start included)", "value": cold_wall, "unit": "s",
                     "compare_to": "python -c 'import textual' (fresh process)", "ratio": cold_wall / textual_wall,
                     "note": f"of which importing helix_tui.app: {cold_import:.3f} s; no torch/triton imported"})
        rows.append({"benchmark": "cockpit", "figure": f"peak resident memory to first paint, {ROUNDS} rounds "
                     "(fresh process, measured from outside)", "value": cold_rss, "unit": "MiB",
                     "compare_to": "python + textual imported", "ratio": cold_rss / textual_rss,
                     "note": f"textual alone: {textual_rss:.1f} MiB; "
                     f"{_measure.run([sys.executable, '-c', 'pass']).method}; {_measure.load_average()}"})

        latencies = asyncio.run(_latencies(ws, 2 * REPEATS))
        latency = statistics.median(latencies)
        rows.append({"benchmark": "cockpit", "figure": "attempts.md append → shown in the attempts pane "
                     f"({ROUNDS}-round workspace, watcher on)", "value": latency * 1000, "unit": "ms",
                     "compare_to": f"{LATENCY_TARGET_S * 1000:.0f} ms allowed by the issue",
                     "ratio": latency / LATENCY_TARGET_S,
                     "note": f"median of {len(latencies)}; max {max(latencies) * 1000:.0f} ms"})
    return rows


if __name__ == "__main__":
    for row in run():
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "—"
        print(f"{row['figure']}: {row['value']:.3f} {row['unit']} (vs {row['compare_to']}: {ratio}) — {row['note']}")
