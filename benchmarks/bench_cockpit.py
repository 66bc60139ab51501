"""The cockpit on a generated 200-round, 20-case workspace.

Figures (medians; references measured in the same run):
  * first paint, in process: HelixApp headless (`run_test`) from construction until the round
    tree is populated, vs `import textual.app` in a fresh process (the floor any Textual app pays);
  * cold start: a fresh `python` process that imports the cockpit and paints the tree, vs a fresh
    process that only imports textual (the two interleaved);
  * live latency: an append to the selected round's attempts.md until the attempts pane shows
    it (watchfiles → reload → message → widget), vs the 300 ms the issue allows;
  * peak resident memory of the cold-start process, measured from outside (`_measure.run`: GNU
    time, not the ru_maxrss a child inherits from this process), vs a process that imports textual;
  * at 1000 rounds (issue 12, goals 2 and 3): peak resident memory to first paint vs 80 MiB, and,
    with the watcher on, a perf file rewritten until the round's tree label shows it and a new
    round folder until its node is drawn (p95 vs 150 ms).
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
LARGE_ROUNDS = 1000
LATENCY_TARGET_S = 0.3
RELOAD_TARGET_S = 0.15  # issue 12, goal 2: a perf file written → shown, p95, at 1000 rounds
RSS_TARGET_MIB = 80  # issue 12, goal 3: the cockpit's resident memory at 1000 rounds
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


async def _reload_latencies(ws: Path, n: int) -> tuple[list[float], list[float]]:
    """With the watcher on: a round's perf file rewritten until its tree label shows the new
    geomean, and a new round folder until its node is in the tree (watchfiles → reload → tree)."""
    from helix_tui.app import HelixApp
    from helix_tui.widgets.round_tree import node_label
    from tests.builders import RoundSpec, write_perf, write_round

    app = HelixApp(ws, job_poll_s=0)
    perf_s: list[float] = []
    round_s: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        while not (app.snapshot is not None and app.main.query_one("#tree").nodes_by_key):
            await asyncio.sleep(0.01)
        await pilot.pause(0.5)
        tree = app.main.query_one("#tree")
        snap = app.snapshot
        last = max(snap.rounds)
        target = max(k for k, v in snap.rounds.items() if v.comparison is not None and k < last)
        key = f"opt-round-{target}"
        labels = [r.case_label for r in snap.rounds[target].perf]

        from helix_engine.perf.formulas import geomean_speedup

        base_times = [r.kernel_avg_time_us for r in snap.baseline.perf]

        def shown(value: float) -> bool:
            """The reloaded snapshot judges the round on the new times, and the tree draws it. (Not
            ``view.perf``: a view reads its records from the file on demand, so that showed the
            new values before any reload: the earlier figures of this row, 3-4 ms, measured it.)"""
            now = app.snapshot
            view = now.rounds.get(target) if now is not None else None
            node = tree.nodes_by_key.get(key)
            expected = geomean_speedup([(b, value) for b in base_times])
            got = view.comparison.geomean_speedup if view is not None and view.comparison is not None else None
            return (node is not None and got is not None and expected is not None
                    and abs(got - expected) <= 1e-9 * expected
                    and str(node.label) == str(node_label(now, key, name_parent=key in tree._named_parent)))

        for i in range(n):
            value = 50.0 + i
            start = time.perf_counter()
            write_perf(snap.rounds[target].perf_file, {label: value for label in labels})
            while not shown(value):
                await asyncio.sleep(0.002)
                if time.perf_counter() - start > 20:
                    raise RuntimeError("a rewritten perf file did not show in the tree within 20 s")
            perf_s.append(time.perf_counter() - start)
            await asyncio.sleep(0.3)  # let the burst window close
        for i in range(n):
            new = last + 1 + i
            start = time.perf_counter()
            write_round(ws, new, RoundSpec({label: 40.0 for label in labels}, parent=f"opt-round-{last}"))
            while f"opt-round-{new}" not in tree.nodes_by_key:
                await asyncio.sleep(0.002)
                if time.perf_counter() - start > 20:
                    raise RuntimeError("a new round folder did not show in the tree within 20 s")
            round_s.append(time.perf_counter() - start)
            await asyncio.sleep(0.3)
    return perf_s, round_s


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run() -> list[dict]:
    from bench_status import compile_checkout

    from tests.builders import generate_large_workspace

    # as an install holds it (this session's environment sets PYTHONDONTWRITEBYTECODE=1): without
    # it every fresh cockpit compiled the sources edited since the last compile (an edit to the
    # engine showed as a slower cold start)
    compile_checkout()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="helix-bench-cockpit-") as tmp:
        ws = generate_large_workspace(Path(tmp), rounds=ROUNDS, cases=CASES)
        small = generate_large_workspace(Path(tmp), rounds=2, cases=CASES, name="small_add")
        large = generate_large_workspace(Path(tmp), rounds=LARGE_ROUNDS, cases=CASES, name="large_add")
        # a file written in the last RECENT_S seconds is not kept by its identity in the round cache
        # (nor vouched for by the stored status): measured right after they were written, every start
        # would read every round's files again, which no cockpit opened on a workspace that is not
        # being written to this second does (the status benchmark waits the same way)
        from helix_engine.workspace.status_cache import RECENT_S

        time.sleep(RECENT_S + 0.5)
        # the reference and the cold start interleaved (textual, cockpit, textual, ...), each after a
        # warm-up (.pyc files, page cache, the workspace's .helix/cache): measured in two batches, a
        # drift of the shared box between them moved the ratio from 2.79 to 3.96 over two runs of the
        # same code (an interleaved A/B of the two commits: 1.90 vs 1.73 s)
        _python(_TEXTUAL)
        _python(_COLD, str(ws))
        textual_runs: list[tuple[dict, float, float]] = []
        cold_runs: list[tuple[dict, float, float]] = []
        for _ in range(REPEATS):
            textual_runs.append(_python(_TEXTUAL))
            cold_runs.append(_python(_COLD, str(ws)))
        textual_import = statistics.median(r[0]["import"] for r in textual_runs)
        textual_wall = statistics.median(r[1] for r in textual_runs)
        textual_rss = statistics.median(r[2] for r in textual_runs)
        rows.append({"benchmark": "cockpit", "figure": "import textual.app + widgets (fresh process)",
                     "value": textual_import, "unit": "s", "compare_to": None, "ratio": None,
                     "note": "the floor every Textual app pays; reference for the figures below"})

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

        cold_wall = statistics.median(r[1] for r in cold_runs)
        cold_import = statistics.median(r[0]["import"] for r in cold_runs)
        cold_rss = statistics.median(r[2] for r in cold_runs)
        rows.append({"benchmark": "cockpit", "figure": f"cold start to painted tree, {ROUNDS} rounds (fresh "
                     "process, interpreter start included)", "value": cold_wall, "unit": "s",
                     "compare_to": "python -c 'import textual' (fresh process)", "ratio": cold_wall / textual_wall,
                     "note": f"median of {REPEATS}, interleaved with the reference's runs; of which importing "
                             f"helix_tui.app: {cold_import:.3f} s; no torch/triton imported"})
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
        paint_in_process = statistics.median(r[0]["paint"] for r in cold_runs)
        rows.append({"benchmark": "cockpit", "figure": f"cold start to painted tree, {ROUNDS} rounds (fresh process, "
                     "until the tree is painted: no teardown)", "value": paint_in_process, "unit": "s",
                     "compare_to": "python -c 'import textual' (fresh process)",
                     "ratio": paint_in_process / textual_wall,
                     "note": "the same runs as the cold-start row, timed from the script's first line to the "
                     "painted tree (the interpreter's own start is not in it; the teardown the row above counts "
                     "is not either)"})

        _python(_COLD, str(large))  # warm-up, as for the 200-round workspace: its .helix/cache
        large_runs = [_python(_COLD, str(large)) for _ in range(3)]
        large_rss = statistics.median(r[2] for r in large_runs)
        rows.append({"benchmark": "cockpit", "figure": f"peak resident memory to first paint, {LARGE_ROUNDS} rounds "
                     "(fresh process, measured from outside)", "value": large_rss, "unit": "MiB",
                     "compare_to": f"{RSS_TARGET_MIB} MiB allowed by the issue", "ratio": large_rss / RSS_TARGET_MIB,
                     "note": f"median of 3; first paint {statistics.median(r[0]['paint'] for r in large_runs):.2f} s; "
                     f"{_measure.load_average()}"})
        # 20 writes each: of 10, the p95 was their maximum (one slow write on a shared box set it)
        perf_s, round_s = asyncio.run(_reload_latencies(large, 4 * REPEATS))
        for what, values in (("a round's perf file rewritten → its tree label shows the new geomean", perf_s),
                             ("a new round folder → its node in the tree", round_s)):
            rows.append({"benchmark": "cockpit", "figure": f"{what} ({LARGE_ROUNDS} rounds, watcher on): p95",
                         "value": _p95(values) * 1000, "unit": "ms",
                         "compare_to": f"{RELOAD_TARGET_S * 1000:.0f} ms allowed by the issue (p95)",
                         "ratio": _p95(values) / RELOAD_TARGET_S,
                         "note": f"{len(values)} writes; median {statistics.median(values) * 1000:.0f} ms, max "
                         f"{max(values) * 1000:.0f} ms; includes the watcher's 30 ms quiet window; "
                         f"{_measure.load_average()}"})
    return rows


if __name__ == "__main__":
    for row in run():
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "—"
        print(f"{row['figure']}: {row['value']:.3f} {row['unit']} (vs {row['compare_to']}: {ratio}) — {row['note']}")
