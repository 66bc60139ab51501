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


def _median_speedups(samples: dict[str, dict[str, list[float]]], case_ids: list[str], mode: str) -> list[float]:
    """Per-case ratio of sample medians, from the evaluation core (robust to a slow outlier in a
    3-sample batch); the ratio of means where a side has too few usable samples."""
    from helix_engine.perf.evaluation import evaluate
    from helix_engine.workspace.models import PerfRecord

    def record(side: str, case_id: str) -> PerfRecord:
        values = samples[side][case_id]
        mean = sum(values) / len(values)
        return PerfRecord(case_label=case_id, kernel_avg_time_us=mean, total_op_avg_time_us=mean,
                          bench_mode=mode, samples_us=values)

    ids = [i for i in case_ids if samples["b"].get(i) and samples["c"].get(i)]
    ev = evaluate([record("b", i) for i in ids], [record("c", i) for i in ids], with_ci=False,
                  skip_latency_errors=True)
    return [case.median.point if case.median is not None else case.speedup for case in ev.cases]


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
        speedups = _median_speedups(samples, [c.id for c in cases], mode)
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
