"""Child side of ``probe-bench --adaptive``: one process holds baseline and candidate and
samples both in alternating batches until the verdict is stable or the deadline passes.

Why one process: a job per batch paid interpreter start, device init and JIT compile every
time (on an H200 the adaptive verdict took 3x as long as a canonical run-bench). Here those
costs are paid once and every batch adds only measurement time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from helix_engine.eval.loader import load_bench_harness
from helix_engine.eval.probe import STABLE_BATCHES, classify


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def run_adaptive(request: dict[str, Any], request_path: Path, backend: Any, events: Any,
                 time_case: Any) -> dict[str, Any]:
    """Batches of (baseline, candidate) per case; returns batches with wall-clock stamps."""
    bench = Path(request["bench_file"])
    sides = {"b": load_bench_harness(bench, Path(request["baseline_operator_file"])),
             "c": load_bench_harness(bench, Path(request["operator_file"]))}
    mode = request["bench_mode"]
    cases = sides["c"].cases
    fns = {side: {case.id: h.build_fn(case) for case in h.cases} for side, h in sides.items()}
    missing = [c.id for c in cases if c.id not in fns["b"]]
    if missing:
        return {"error": f"the baseline has no bench case {missing[0]!r}"}
    samples: dict[str, dict[str, list[float]]] = {"b": {}, "c": {}}
    sources: set[str] = set()
    batches: list[dict[str, Any]] = []
    deadline = float(request["deadline_ts"])
    repeats = int(request.get("repeats_cap") or 3)
    while True:
        n = len(batches) + 1
        order = ("b", "c") if n % 2 else ("c", "b")
        for index, case in enumerate(cases):
            events.case_started(f"batch{n}:{case.id}", index, len(cases))
            warmup = min(case.warmup, int(request.get("warmup_cap") or 1)) if n == 1 else 0
            for side in order:
                timing = time_case(mode, fns[side][case.id], warmup, repeats, backend,
                                   sides[side].kernel_names, case.id, request_path)
                if timing.error_message and not timing.error_message.startswith("no resolved kernels"):
                    return {"error": f"latency-{case.id}: {timing.error_message}", "batches": batches}
                samples[side].setdefault(case.id, []).extend(timing.samples_us)
                sources.add("kernel" if timing.kernel_avg_us is not None else "total-op")
        speedups = [_median(samples["b"][c.id]) / _median(samples["c"][c.id])
                    for c in cases if samples["b"].get(c.id) and samples["c"].get(c.id)]
        cls = classify(speedups)
        batches.append({"batch": n, "verdict": cls.label, "geomean": cls.geomean, "ts": time.time(),
                        "improved": cls.improved, "regressed": cls.regressed,
                        "avg_improvement_pct": cls.avg_improvement_pct})
        events.emit("log", msg=f"batch {n}: {cls.label}", batch=batches[-1])
        events.progress(n, 0)
        recent = [b["verdict"] for b in batches[-STABLE_BATCHES:]]
        stable = len(recent) == STABLE_BATCHES and len(set(recent)) == 1
        if stable or time.time() >= deadline:
            break
    return {"batches": batches, "stable": stable,
            "metric_source": next(iter(sources)) if len(sources) == 1 else "mixed",
            "samples": {side: {k: len(v) for k, v in per.items()} for side, per in samples.items()}}
