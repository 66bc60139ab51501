"""Child side of ``probe-bench --adaptive``: one process holds baseline and candidate, measures
them in paired blocks and stops as soon as the verdict is statistically settled (perf/sequential.py)
or the deadline passes.

Why one process: a job per batch paid interpreter start, device init and JIT compile every
time (on an H200 the adaptive verdict took 3x as long as a canonical run-bench). Here those
costs are paid once, each closure is warmed once (its first slot), and every batch adds only
measurement time.

Design: per case, blocks of one slot per side, AB then BA (A = the reference), each slot
``repeats_cap`` repetitions timed by the bench mode's own function. The first batch is the
fewest blocks an interval needs (MIN_BLOCKS); each later batch adds half as many blocks as there
are (at least one), so the number of looks grows with the log of the run's length and each
look's widening (alpha spending) stays small. After each batch one look decides.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from helix_engine.eval.loader import load_bench_harness
from helix_engine.eval.probe import classify, probe_speedups


def _median_speedups(samples: dict[str, dict[str, list[float]]], case_ids: list[str], mode: str) -> list[float]:
    """Per-case ratio of sample medians (``probe_speedups``) of pooled samples per side; the
    ratio of means where a side has too few usable samples."""
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
    return probe_speedups(ev)


def batch_blocks(batch: int, done: int) -> int:
    """Blocks batch ``batch`` (1-based) adds per case when ``done`` blocks exist: MIN_BLOCKS
    first, then half as many as there are (at least one)."""
    from helix_engine.perf.paired import MIN_BLOCKS

    return MIN_BLOCKS if batch == 1 else max(1, done // 2)


def run_adaptive(request: dict[str, Any], request_path: Path, backend: Any, events: Any,
                 time_case: Any) -> dict[str, Any]:
    """Batches of paired blocks per case, one look after each; returns the looks with wall-clock
    stamps (``ready_ts``: both operators loaded and every closure built, before any timing)."""
    from helix_engine.perf.margins import NoiseMargins
    from helix_engine.perf.paired import Block, block_order
    from helix_engine.perf.sequential import look_at

    bench = Path(request["bench_file"])
    sides = {"reference": load_bench_harness(bench, Path(request["baseline_operator_file"])),
             "candidate": load_bench_harness(bench, Path(request["operator_file"]))}
    mode = request["bench_mode"]
    cases = sides["candidate"].cases
    fns = {side: {case.id: h.build_fn(case) for case in h.cases} for side, h in sides.items()}
    missing = [c.id for c in cases if c.id not in fns["reference"]]
    if missing:
        return {"error": f"the baseline has no bench case {missing[0]!r}"}
    margins = NoiseMargins.model_validate(request["noise_margins"]) if request.get("noise_margins") else None
    ready_ts = time.time()
    blocks: dict[str, list[Block]] = {f"latency-{c.id}": [] for c in cases}
    warmed: set[tuple[str, str]] = set()
    sources: set[str] = set()
    batches: list[dict[str, Any]] = []
    deadline = float(request["deadline_ts"])
    repeats = int(request.get("repeats_cap") or 3)
    warmup_cap = int(request.get("warmup_cap") or 1)
    settled = False
    while True:
        n = len(batches) + 1
        for index, case in enumerate(cases):
            if n > 1 and time.time() >= deadline:
                break  # look at what there is
            events.case_started(f"batch{n}:{case.id}", index, len(cases))
            found = blocks[f"latency-{case.id}"]
            for _ in range(batch_blocks(n, len(found))):
                block = Block([], [])
                for side in block_order(len(found), per_side=1):
                    warmup = 0 if (side, case.id) in warmed else min(case.warmup, warmup_cap)
                    warmed.add((side, case.id))
                    timing = time_case(mode, fns[side][case.id], warmup, repeats, backend,
                                       sides[side].kernel_names, case.id, request_path)
                    if timing.error_message and not timing.error_message.startswith("no resolved kernels"):
                        return {"error": f"latency-{case.id}: {timing.error_message}", "batches": batches}
                    getattr(block, side).extend(timing.samples_us)
                    sources.add("kernel" if timing.kernel_avg_us is not None else "total-op")
                found.append(block)
        seen = look_at({k: v for k, v in blocks.items() if v}, n, margins=margins, mode=mode)
        cls = classify(list(seen.speedups))
        batches.append({"batch": n, "blocks": seen.n_blocks, "decision": seen.decision, "verdict": cls.label,
                        "geomean": seen.geomean, "low": seen.low, "high": seen.high,
                        "confidence": seen.confidence, "margin": seen.margin, "ts": time.time(),
                        "improved": cls.improved, "regressed": cls.regressed, "min_speedup": cls.min_speedup,
                        "avg_improvement_pct": cls.avg_improvement_pct})
        events.emit("log", msg=f"look {n} ({seen.n_blocks} blocks per case): {seen.decision}, {cls.label}",
                    batch=batches[-1])
        events.progress(n, 0)
        settled = seen.decision != "unsettled"
        if settled or time.time() >= deadline:
            break
    return {"batches": batches, "stable": settled, "ready_ts": ready_ts,
            "metric_source": next(iter(sources)) if len(sources) == 1 else "mixed",
            "samples": {side: {k.removeprefix("latency-"): sum(len(getattr(b, side)) for b in v)
                               for k, v in blocks.items()} for side in ("reference", "candidate")}}
