"""Readings derived from pipeline counters: op-type guess, bound classification, symptoms.

Units (the upstream bug this module fixes): in real CANN files the ``*_ratio`` columns are
fractions 0–1 (pipe busy time ÷ task time) while ``cube_utilization(%)`` is 0–100. Upstream
compared the fractions with thresholds written for percentages, so every real file read
"mixed". Here every ratio is put on the percent scale first (`percent_ratios`), then the
upstream thresholds apply unchanged.

What ``cube_utilization(%)`` is: core *occupancy*, not MAC throughput. In every matmul row of
the real fixtures ``aic_total_cycles ÷ (Task Duration × cube_utilization/100)`` is a constant
(clock × cube cores): 43200 = 24 cores × 1800 MHz for msprof_real_output and
standalone_real_output (e.g. 40146 / (6.56 × 0.14166) = 43201), 46200 for
realistic_parent_layout (another device/clock). So the column is cycles spent on the cube
cores ÷ the cycles available on all of them. A matmul with cube_utilization 95%,
aic_mte2_ratio 0.88 and aic_mac_ratio 0.20 (realistic_parent_layout) has every cube core
occupied for the whole task, and within that time the MTE2 pipe (GM → L1 loads) is busy 88%
while the MAC pipe is busy 20%. That is **memory-bound (transfer-dominated)**: the cores are
saturated, so more blocks will not help; the time goes to moving operands. We keep the single
upstream label ``memory-bound`` (tools key on the four labels) and add a note saying the cores
are saturated, instead of inventing a fifth "mixed" label that would hide the cause.
"""

from __future__ import annotations

from typing import Any

from helix_engine.profile.ascend import RunningStat

MEMORY_COLUMNS = ("aic_mte1_ratio", "aic_mte2_ratio", "aic_mte3_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
SCALAR_COLUMNS = ("aic_scalar_ratio", "aiv_scalar_ratio")
COMPUTE_COLUMNS = ("aic_mac_ratio", "aiv_vec_ratio")
CLASSIFICATIONS = ("compute-bound", "memory-bound", "scalar-overhead", "mixed")
NO_COUNTERS = "unknown (no hardware counters)"
#: A pipe busy less than this share of the task means no unit is saturated (see `symptoms`).
SATURATED_PIPE_PCT = 70.0
#: A launch costs a few µs of host and device time (about 5 µs on CUDA, about 10 µs on Ascend): a
#: kernel whose average run is shorter spends about as long being launched as computing.
SHORT_KERNEL_US = 10.0


def percent_ratios(ratios: dict[str, RunningStat]) -> tuple[dict[str, float], str]:
    """Average of each ``*_ratio`` column on the 0–100 scale, and the scale the file used.

    A file whose ratio cells never exceed 1.0 holds fractions (every real CANN file); one with
    any cell above 1.0 was already written in percent and is taken as is.
    """
    peak = max((s.max for s in ratios.values() if s.count), default=0.0)
    scale = "percent" if peak > 1.0 + 1e-9 else "fraction"
    factor = 1.0 if scale == "percent" else 100.0
    return {k: (s.avg or 0.0) * factor for k, s in ratios.items() if s.count}, scale


def _sum(pct: dict[str, float], columns: tuple[str, ...]) -> float:
    return sum(pct.get(c, 0.0) for c in columns)


def operator_type_guess(pct: dict[str, float], cube_util: float | None, core_bucket: str | None) -> dict[str, Any]:
    """vec ≥ 30 & cube ≥ 20 → mix; cube ≥ 20 → cube; vec ≥ 20 → vector; else the core bucket."""
    vec = pct.get("aiv_vec_ratio", 0.0)
    cube = max(pct.get("aic_mac_ratio", 0.0), cube_util or 0.0)
    signals = {"vector_pct": round(vec, 3), "cube_pct": round(cube, 3)}
    if not pct and cube_util is None:
        return {"kind": core_bucket or "unknown", "signals": signals, "source": "core_type"}
    if vec >= 30 and cube >= 20:
        kind = "mix"
    elif cube >= 20:
        kind = "cube"
    elif vec >= 20:
        kind = "vector"
    else:
        return {"kind": core_bucket or "unknown", "signals": signals, "source": "core_type"}
    return {"kind": kind, "signals": signals, "source": "pipeline_ratios"}


def bound_analysis(pct: dict[str, float], cube_util: float | None) -> dict[str, Any]:
    """Upstream thresholds on percent-scale ratios; see the module docstring for the reading."""
    if not pct:
        return {"classification": NO_COUNTERS, "scores": {}, "reasoning": [
            "the per-invocation file has no pipeline ratio columns for the target"]}
    compute = _sum(pct, COMPUTE_COLUMNS)
    memory = _sum(pct, MEMORY_COLUMNS)
    scalar = _sum(pct, SCALAR_COLUMNS)
    scores = {"compute_pct": round(compute, 3), "memory_pct": round(memory, 3), "scalar_pct": round(scalar, 3)}
    reasoning: list[str] = []
    if scalar >= max(compute, memory) and scalar >= 20:
        label = "scalar-overhead"
        reasoning.append(f"scalar pipes busy {scalar:.1f}% ≥ compute {compute:.1f}% and memory {memory:.1f}%")
    elif memory >= compute + 5:
        label = "memory-bound"
        reasoning.append(f"MTE (data movement) pipes busy {memory:.1f}% vs compute (mac+vec) {compute:.1f}%")
    elif compute >= 70 and scalar < 20 and memory < 25:
        label = "compute-bound"
        reasoning.append(f"compute pipes busy {compute:.1f}% with scalar {scalar:.1f}% and memory {memory:.1f}%")
    else:
        label = "mixed"
        reasoning.append(f"compute {compute:.1f}%, memory {memory:.1f}%, scalar {scalar:.1f}%: no pipe dominates")
    if cube_util is not None:
        reasoning.append(f"cube_utilization {cube_util:.1f}% is core occupancy (cycles on the cube cores ÷ "
                         "cores × task time), not MAC throughput")
        if label == "memory-bound" and cube_util >= 80:
            reasoning.append("the cube cores are saturated (occupied for the whole task) yet the MAC pipe is "
                             f"busy only {pct.get('aic_mac_ratio', 0.0):.1f}%: operand transfer, not parallelism, "
                             "limits this kernel")
    return {"classification": label, "scores": scores, "reasoning": reasoning}


def detect_symptoms(pct: dict[str, float], bound: str, data_movement_share: float | None) -> list[dict[str, Any]]:
    """Symptoms (routing names) with the evidence that triggered each.

    - high-scalar-overhead: bound is scalar-overhead, or scalar pipes ≥ 30%.
    - high-transfer-pressure: bound is memory-bound, or data-movement ops ≥ 20% of total time.
    - weak-pipeline-overlap: counters exist and the busiest pipe is < 70% busy: no unit is
      saturated, so the units take turns (load → compute → store serialized or stalls).
    - poor-locality needs L2 hit rates (.bin) and is never inferred from CSVs.
    """
    out: list[dict[str, Any]] = []
    scalar = _sum(pct, SCALAR_COLUMNS)
    if bound == "scalar-overhead" or scalar >= 30:
        out.append({"symptom": "high-scalar-overhead", "evidence": f"scalar pipes busy {scalar:.1f}%"})
    if bound == "memory-bound":
        out.append({"symptom": "high-transfer-pressure",
                    "evidence": f"MTE pipes busy {_sum(pct, MEMORY_COLUMNS):.1f}% vs compute {_sum(pct, COMPUTE_COLUMNS):.1f}%"})
    elif data_movement_share is not None and data_movement_share >= 20:
        out.append({"symptom": "high-transfer-pressure",
                    "evidence": f"data-movement ops take {data_movement_share:.1f}% of total time"})
    if pct:
        busiest, value = max(pct.items(), key=lambda kv: kv[1])
        if value < SATURATED_PIPE_PCT:
            out.append({"symptom": "weak-pipeline-overlap",
                        "evidence": f"busiest pipe {busiest} only {value:.1f}% busy: no unit is saturated"})
    return out


def launch_symptoms(ops: list[tuple[str, int, float | None]], calls: int | None,
                    device_time: bool) -> list[dict[str, Any]]:
    """The launch-bound card's own evidence, from every op row ``(name, launches, avg µs)``:

    - many-launches: the profiled calls are known (profiler steps or the manifest's repeats) and
      each call launched two or more kernels or framework ops. Counts, not times: it holds on every
      backend, the cpu interpreter included.
    - short-kernels: device time only (never the interpreter's CPU time), and the hottest op's
      average run is under `SHORT_KERNEL_US`.
    """
    out: list[dict[str, Any]] = []
    launches = sum(count for _, count, _ in ops)
    if calls and calls > 0 and launches / calls >= 2:
        shown = ", ".join(f"{name} ×{count / calls:g}" for name, count, _ in ops[:6])
        more = f" and {len(ops) - 6} more" if len(ops) > 6 else ""
        out.append({"symptom": "many-launches",
                    "evidence": f"{launches / calls:g} launches per call ({shown}{more}) over {calls} profiled calls"})
    if device_time and ops:
        name, _, avg = max(ops, key=lambda op: op[1] * (op[2] or 0.0))
        if avg is not None and 0 < avg < SHORT_KERNEL_US:
            out.append({"symptom": "short-kernels",
                        "evidence": f"the hottest op {name} runs {avg:.3g} µs per launch, under the "
                        f"~{SHORT_KERNEL_US:g} µs a launch costs"})
    return out
