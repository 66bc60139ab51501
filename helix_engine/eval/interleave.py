"""Child side of a paired bench: candidate and reference in one process, interleaved in blocks.

Per case: both closures are built and warmed up, then ``blocks`` blocks run, each four slots of
``block_reps`` timed repetitions: reference, candidate, candidate, reference (ABBA), the next
block BAAB. A drift (clock, temperature, a neighbour's load) that is linear over a block hits
both sides equally, and the block alternation cancels what is left of the slot order. A case of
fewer than 2 * MIN_BLOCKS repetitions gets blocks of one slot per side (AB, then BA), so each
side records the repetitions the case asked for, not twice as many. Each slot is timed by the
bench mode's own function (eval/timing.py), so a paired number means what an unpaired one means.

Returns the candidate's records (the canonical perf file), the reference's records, and each
case's slots in measurement order (perf/paired.PairedCase). Never imports helix's parent side.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

#: Blocks aimed at per case, by bench mode: enough blocks for a block bootstrap, few enough that
#: a profiler session (or an msprof process) per slot stays affordable.
TARGET_BLOCKS: dict[str, int] = {"perf-counter": 10, "device-event": 10, "torch-profiler": 6,
                                 "torch-npu-profiler": 5, "msprof": 3}
MIN_BLOCKS = 3


def plan(repeats: int, mode: str, block_reps: int | None = None, blocks: int | None = None) -> tuple[int, int, int]:
    """(block_reps, blocks, slots per side per block) for a case of ``repeats`` repetitions: each
    side gets slots·block_reps repetitions per block and at least ``repeats`` in all, in at least
    MIN_BLOCKS blocks. ABBA blocks (2 slots per side) when ``repeats`` allows MIN_BLOCKS of them;
    below that, AB/BA blocks of one slot per side (a 3-repetition case records 3 samples a side)."""
    target = TARGET_BLOCKS.get(mode, 8)
    if not block_reps and not blocks and repeats < 2 * MIN_BLOCKS:
        return 1, max(MIN_BLOCKS, repeats), 1
    k = block_reps if block_reps and block_reps > 0 else max(1, round(repeats / (2 * target)))
    n = blocks if blocks and blocks > 0 else max(MIN_BLOCKS, math.ceil(repeats / (2 * k)))
    return k, n, 2


def merge(timings: list[Any]) -> Any:
    """One CaseTiming from the slots of one side: samples in measurement order, averages weighted
    by each slot's sample count, the first error."""
    from helix_engine.eval.timing import CaseTiming

    samples = [s for t in timings for s in t.samples_us]
    error = next((t.error_message for t in timings if t.error_message), None)

    def weighted(values: list[tuple[float | None, int]]) -> float | None:
        known = [(v, max(n, 1)) for v, n in values if v is not None]
        if not known or len(known) < len(values):
            return None
        return sum(v * n for v, n in known) / sum(n for _, n in known)

    kernel = weighted([(t.kernel_avg_us, len(t.samples_us)) for t in timings])
    total = weighted([(t.total_op_avg_us, len(t.samples_us)) for t in timings])
    ops: list[dict[str, Any]] | None = None
    if all(t.ops is not None for t in timings):
        sums: OrderedDict[str, float] = OrderedDict()
        weight = 0
        for t in timings:
            n = max(len(t.samples_us), 1)
            weight += n
            for op in t.ops or []:
                sums[op["op_type"]] = sums.get(op["op_type"], 0.0) + float(op["avg_time_us"]) * n
        ops = [{"op_type": k, "avg_time_us": v / weight} for k, v in sums.items()] if weight else []
    return CaseTiming(samples, kernel, total, ops, error)


def _blocks(measure: Any, warmup: int, k: int, n_blocks: int, timings: dict[str, list[Any]],
            slots: list[dict[str, Any]], per_side: int = 2) -> None:
    """Warm both sides (compile, caches), then the ABBA/BAAB (or AB/BA) blocks; fills
    ``timings``/``slots``."""
    from helix_engine.perf.paired import block_order

    for side in ("reference", "candidate"):
        measure(side, warmup, 1)
    for block in range(n_blocks):
        for side in block_order(block, per_side):
            timing = measure(side, 0, k)
            timings[side].append(timing)
            slots.append({"block": block, "side": side,
                          "samples_us": [s for s in timing.samples_us if math.isfinite(s)]})


def run_paired(request: dict[str, Any], request_path: Path, backend: Any, events: Any, time_case: Any,
               make_record: Any) -> dict[str, Any]:
    """The worker's ``paired`` action. ``time_case`` and ``make_record`` are the worker's (one
    timing and one record format for paired and unpaired runs)."""
    from helix_engine.eval.loader import HarnessContractError, load_bench_harness
    from helix_engine.eval.usercode import CaseFailures
    from helix_engine.perf.context import ContextProbe

    bench = Path(request["bench_file"])
    harness = {"candidate": load_bench_harness(bench, Path(request["operator_file"])),
               "reference": load_bench_harness(bench, Path(request["reference_operator_file"]))}
    mode = request["bench_mode"]
    wanted = request.get("case_ids")
    cases = [c for c in harness["candidate"].cases if not wanted or c.id in wanted]
    ref_cases = {c.id: c for c in harness["reference"].cases}
    if wanted:
        unknown = sorted(set(wanted) - {c.id for c in harness["candidate"].cases})
        if unknown:
            raise HarnessContractError(bench, "build_bench_cases", f"no case with id {unknown[0]!r}")
    events.emit("log", msg=f"paired cases: {', '.join(c.id for c in cases)}", case_ids=[c.id for c in cases])
    try:
        device_name = backend.device_name()
    except Exception:  # noqa: BLE001 - a name is nice to have, never a reason to fail
        device_name = backend.name
    probe = ContextProbe.start(backend)
    failures = CaseFailures()
    records: list[dict[str, Any]] = []
    reference_records: list[dict[str, Any]] = []
    paired_cases: list[dict[str, Any]] = []
    for index, case in enumerate(cases):
        events.case_started(case.id, index, len(cases))
        start = time.perf_counter()
        warmup, repeats = case.warmup, case.repeats
        if request.get("warmup_cap") is not None:
            warmup = min(warmup, int(request["warmup_cap"]))
        if request.get("repeats_cap") is not None:
            repeats = min(repeats, int(request["repeats_cap"]))
        k, n_blocks, per_side = plan(repeats, mode, request.get("block_reps"), request.get("blocks"))
        fns: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for side in ("reference", "candidate"):
            src = case if side == "candidate" else ref_cases.get(case.id)
            if src is None:
                errors[side] = f"the reference bench has no case {case.id!r}"
                continue
            try:
                fns[side] = harness[side].build_fn(src)
            except HarnessContractError:
                raise
            except Exception as exc:  # noqa: BLE001 - a case error is data, not a crash
                errors[side] = f"{type(exc).__name__}: {exc}"
                failures.report(case.id, exc)
        timings: dict[str, list[Any]] = {"reference": [], "candidate": []}
        slots: list[dict[str, Any]] = []
        try:
            if not errors:
                def measure(side: str, w: int, reps: int, case_id: str = case.id, built: dict[str, Any] = fns) -> Any:
                    return time_case(mode, built[side], w, reps, backend, harness[side].kernel_names, case_id,
                                     request_path)

                _blocks(measure, warmup, k, n_blocks, timings, slots, per_side)
        except Exception as exc:  # noqa: BLE001 - a case error is data, not a crash
            errors.setdefault("candidate", f"{type(exc).__name__}: {exc}")
            failures.report(case.id, exc)
        wall = time.perf_counter() - start
        context = probe.now()
        for side, out in (("candidate", records), ("reference", reference_records)):
            error = errors.get(side)
            if error is None and errors:
                other = "reference" if side == "candidate" else "candidate"
                error = f"not measured: the {other} failed ({errors[other]})"
            timing = merge(timings[side]) if timings[side] and error is None else None
            out.append(make_record(case.id, harness[side], mode, timing, error, wall, backend, device_name,
                                   context=context))
        paired_cases.append({"case_label": case.id, "block_reps": k, "slots": slots if not errors else []})
        events.case_finished(case.id, records[-1])
        events.progress(index + 1, len(cases))
    return {"records": records, "reference_records": reference_records, "paired_cases": paired_cases,
            "kernel_names": harness["candidate"].kernel_names,
            "kernel_source": harness["candidate"].kernel_source}
