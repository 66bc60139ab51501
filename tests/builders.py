"""Write realistic upstream-format operator workspaces into a temp dir, for tests and benchmarks.

Every file is written in the exact upstream layout (spec upstream-state §1, §3, §5 and
upstream-eval §1, §3) so a test can say, from the case times it passed in, which geomean,
avg improvement and best round `helix status` must report.

Case times are a mapping ``label -> value`` where value is
  * a float: kernel_avg_time_us (total_op_avg_time_us = the same value + ``TOTAL_OP_EXTRA_US``),
  * a ``(kernel_us, total_op_us)`` tuple (either may be None),
  * a ``Case`` for full control (error message, bench_mode, samples).

Typical use::

    ws = build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0},
                         rounds=[RoundSpec({"a": 8.0, "b": 18.0}),
                                 RoundSpec({"a": 9.0, "b": 10.0}, parent="opt-round-1")])
    assert expected_geomean({"a": 10.0, "b": 20.0}, {"a": 9.0, "b": 10.0}) == (10/9 * 20/10) ** 0.5
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_BENCH_MODE = "torch-npu-profiler"
DEFAULT_OP = "add"
#: total_op = kernel + this when a case gives only the kernel time (an extra Cast-like op).
TOTAL_OP_EXTRA_US = 2.0


@dataclass
class Case:
    """One bench case of a perf file, with every upstream field controllable."""

    kernel_us: float | None
    total_op_us: float | None = None
    error_message: str | None = None
    bench_mode: str | None = DEFAULT_BENCH_MODE
    samples_us: list[float] | None = None
    omit_bench_mode: bool = False


CaseValue = float | int | None | tuple | Case
Cases = Mapping[str, CaseValue]


def _as_case(value: CaseValue, bench_mode: str | None) -> Case:
    if isinstance(value, Case):
        return value
    if isinstance(value, tuple):
        kernel, total = value
        return Case(kernel_us=kernel, total_op_us=total, bench_mode=bench_mode)
    if value is None:
        return Case(kernel_us=None, total_op_us=None, bench_mode=bench_mode)
    return Case(kernel_us=float(value), total_op_us=float(value) + TOTAL_OP_EXTRA_US, bench_mode=bench_mode)


def perf_record(label: str, value: CaseValue, *, op: str = DEFAULT_OP,
                bench_mode: str | None = DEFAULT_BENCH_MODE) -> dict[str, Any]:
    """One perf JSONL record with the upstream keys in upstream order (then helix's samples)."""
    case = _as_case(value, bench_mode)
    kernel_name = f"{op}_kernel"
    ops: list[dict[str, Any]] | None = []
    if case.kernel_us is not None:
        ops.append({"op_type": kernel_name, "avg_time_us": case.kernel_us})
    if case.total_op_us is not None and case.kernel_us is not None and case.total_op_us > case.kernel_us:
        ops.append({"op_type": "Cast", "avg_time_us": round(case.total_op_us - case.kernel_us, 6)})
    elif case.total_op_us is not None and case.kernel_us is None:
        ops.append({"op_type": "AddV2", "avg_time_us": case.total_op_us})
    if case.kernel_us is None and case.total_op_us is None:
        ops = None
    record: dict[str, Any] = {
        "case_label": label,
        "kernel_names": [kernel_name],
        "kernel_source": "metadata+operator",
        "kernel_avg_time_us": case.kernel_us,
        "ops": ops,
        "total_op_avg_time_us": case.total_op_us,
        "error_message": case.error_message,
        "case_wall_clock_seconds": 1.25,
        "bench_mode": case.bench_mode,
    }
    if case.kernel_us is None and case.error_message is None and case.total_op_us is not None:
        record["error_message"] = "no resolved kernels matched profiler kernel view"
    if case.omit_bench_mode:
        del record["bench_mode"]
    if case.samples_us is not None:
        record["samples_us"] = list(case.samples_us)
    return record


def perf_text(cases: Cases, *, op: str = DEFAULT_OP, bench_mode: str | None = DEFAULT_BENCH_MODE) -> str:
    """A whole perf file: compact JSONL, one line per case, in the given order."""
    lines = [
        json.dumps(perf_record(label, value, op=op, bench_mode=bench_mode), separators=(",", ":"))
        for label, value in cases.items()
    ]
    return "\n".join(lines) + "\n"


def write_perf(path: Path, cases: Cases, *, op: str = DEFAULT_OP,
               bench_mode: str | None = DEFAULT_BENCH_MODE) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(perf_text(cases, op=op, bench_mode=bench_mode), encoding="utf-8")
    return path


# ------------------------------------------------------------------------- operator + harnesses

OPERATOR_TEMPLATE = '''\
"""Elementwise add written in Triton (helix test workspace)."""
import torch
import triton
import triton.language as tl


@triton.jit
def {op}_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def {op}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, {block}),)
    {op}_kernel[grid](x, y, out, n, BLOCK={block})
    return out
'''

BENCH_TEMPLATE = '''\
# api-name: {op}
# api-kind: triton-wrapper
# kernels: {op}_kernel
import torch

from helix_engine.harness import device


def build_operator_api(m):
    return getattr(m, "{op}")


def build_bench_cases():
    return [{{"id": "n1024", "n": 1024, "seed": 0, "warmup": 1, "repeats": 3}},
            {{"id": "n4096", "n": 4096, "seed": 1, "warmup": 1, "repeats": 3}}]


def build_bench_case_fn(api, case):
    torch.manual_seed(case["seed"])
    x = torch.randn(case["n"], device=device())
    y = torch.randn(case["n"], device=device())
    return lambda: api(x, y)
'''

DIFF_TEST_TEMPLATE = '''\
# test-mode: differential
# compute-kind: compute
# api-name: {op}
# api-kind: triton-wrapper
# kernels: {op}_kernel
import torch

from helix_engine.harness import device


def build_operator_api(m):
    return getattr(m, "{op}")


def build_differential_test_cases(api):
    cases = []
    for i, n in enumerate([1, 7, 64, 1000, 4096]):
        torch.manual_seed(i)
        x = torch.randn(n, device=device())
        y = torch.randn(n, device=device())
        cases.append({{"id": f"n{{n}}", "inputs": (x, y), "fn": lambda x=x, y=y: api(x, y)}})
    return cases
'''


def operator_source(op: str = DEFAULT_OP, block: int = 256) -> str:
    return OPERATOR_TEMPLATE.format(op=op, block=block)


def write_operator(ws: Path, op: str = DEFAULT_OP, *, harnesses: bool = True) -> Path:
    """``<op>.py`` at the top of the workspace, plus ``bench_<op>.py`` / ``differential_test_<op>.py``."""
    ws = Path(ws)
    ws.mkdir(parents=True, exist_ok=True)
    path = ws / f"{op}.py"
    path.write_text(operator_source(op), encoding="utf-8")
    if harnesses:
        (ws / f"bench_{op}.py").write_text(BENCH_TEMPLATE.format(op=op), encoding="utf-8")
        (ws / f"differential_test_{op}.py").write_text(DIFF_TEST_TEMPLATE.format(op=op), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------- baseline


def baseline_state(op: str = DEFAULT_OP, *, bench_mode: str = DEFAULT_BENCH_MODE,
                   perf_artifact: str | None = None, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "baseline_kind": "original",
        "source_operator": f"../{op}.py",
        "baseline_operator": f"{op}.py",
        "test_file": f"../differential_test_{op}.py",
        "test_mode": "differential",
        "bench_file": f"../bench_{op}.py",
        "bench_mode": bench_mode,
        "perf_artifact": perf_artifact or f"{op}_perf.txt",
        "correctness_status": "passed",
        "benchmark_status": "passed",
        "baseline_established": True,
    }
    data.update(overrides)
    return data


def write_baseline(ws: Path, cases: Cases | None, *, op: str = DEFAULT_OP,
                   bench_mode: str = DEFAULT_BENCH_MODE, state: bool = True,
                   state_overrides: Mapping[str, Any] | None = None,
                   perf_name: str | None = None) -> Path:
    """``baseline/<op>.py``, ``baseline/<op>_perf.txt`` (when cases given), ``baseline/state.json``."""
    base = Path(ws) / "baseline"
    base.mkdir(parents=True, exist_ok=True)
    (base / f"{op}.py").write_text(operator_source(op), encoding="utf-8")
    name = perf_name or f"{op}_perf.txt"
    if cases is not None:
        write_perf(base / name, cases, op=op, bench_mode=bench_mode)
    if state:
        data = baseline_state(op, bench_mode=bench_mode, perf_artifact=name, **dict(state_overrides or {}))
        (base / "state.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return base


# -------------------------------------------------------------------------------------- rounds


@dataclass
class RoundSpec:
    """One ``opt-round-N`` to write. ``cases=None`` writes no perf file."""

    cases: Cases | None
    parent: str = "baseline"
    correctness: str = "passed"
    benchmark: str = "passed"
    metric: str | None = "kernel"
    hypothesis: str = "hoist the mask out of the loop"
    theme: str = "hoist mask"
    best_status: str | None = None  # opt-note "Best status:" text; None = computed by build_workspace
    state: bool = True
    state_overrides: dict[str, Any] = field(default_factory=dict)
    perf_name: str | None = None
    bench_mode: str | None = None  # None: the workspace's bench mode
    block: int = 512


def round_state(n: int, op: str = DEFAULT_OP, *, parent: str = "baseline", correctness: str = "passed",
                benchmark: str = "passed", metric: str | None = "kernel",
                hypothesis: str = "hoist the mask out of the loop", perf_name: str | None = None,
                **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "round": f"opt-round-{n}",
        "parent_round": parent,
        "hypothesis": hypothesis,
        "evidence_sources": ["benchmark", "profile"],
        "correctness_status": correctness,
        "benchmark_status": benchmark,
        "summary_path": "summary.md",
        "opt_note_updated": True,
    }
    if benchmark == "passed":
        data["perf_artifact"] = perf_name or f"opt_{op}_perf.txt"
        data["comparison_target_path"] = f"../baseline/{op}_perf.txt"
        data["effective_metric_source"] = metric
    data.update(overrides)
    return data


def write_round(ws: Path, n: int, spec: RoundSpec, *, op: str = DEFAULT_OP,
                bench_mode: str = DEFAULT_BENCH_MODE) -> Path:
    """A complete round package: opt_<op>.py, perf, round-state.json, attempts.md, summary.md."""
    rdir = Path(ws) / f"opt-round-{n}"
    rdir.mkdir(parents=True, exist_ok=True)
    (rdir / f"opt_{op}.py").write_text(operator_source(op, block=spec.block), encoding="utf-8")
    perf_name = spec.perf_name or f"opt_{op}_perf.txt"
    if spec.cases is not None:
        write_perf(rdir / perf_name, spec.cases, op=op, bench_mode=spec.bench_mode or bench_mode)
    if spec.state:
        data = round_state(n, op, parent=spec.parent, correctness=spec.correctness,
                           benchmark=spec.benchmark, metric=spec.metric, hypothesis=spec.hypothesis,
                           perf_name=perf_name, **spec.state_overrides)
        (rdir / "round-state.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (rdir / "attempts.md").write_text(attempts_text(n, spec), encoding="utf-8")
    (rdir / "summary.md").write_text(summary_text(n, spec), encoding="utf-8")
    return rdir


def attempts_text(n: int, spec: RoundSpec) -> str:
    return (
        f"# Attempts for opt-round-{n}\n\n"
        "## State Update 2026-07-20T08:05:00Z\n"
        "- Source: start-round\n"
        "- Round strategy: exploration\n"
        "- Analysis policy: pattern_entry\n"
        f"- Reason: {spec.hypothesis}\n\n"
        f"Hypothesis: {spec.hypothesis}\n"
        "Candidate patterns: mask-hoisting, block-size\n"
        "Selected pattern: mask-hoisting\n"
        "Primary analysis level: pattern triage\n"
        "Supporting evidence: benchmark\n\n"
        "Attempt 1: moved the mask computation out of the inner loop.\n"
        f"Correctness: {spec.correctness}. Benchmark: {spec.benchmark}.\n"
    )


def summary_text(n: int, spec: RoundSpec) -> str:
    return (
        f"# opt-round-{n} summary\n\n"
        f"Parent: {spec.parent}\n"
        f"Hypothesis: {spec.hypothesis}\n"
        "Selected pattern: mask-hoisting\n"
        "Primary analysis level: pattern triage\n"
        "Final analysis level: pattern triage\n"
        "Supporting evidence: benchmark\n"
        "Deciding evidence: compare-perf against baseline/\n"
        "Code changes: hoisted the mask\n"
        f"Correctness: {spec.correctness}\n"
        "Benchmark comparison: see opt-note.md\n"
        "Current best: see opt-note.md\n"
        "Open questions: none\n"
    )


# ------------------------------------------------------------------------------------ opt-note


@dataclass
class NoteRound:
    number: int
    parent: str = "baseline"
    theme: str = "hoist mask"
    result: str = "correctness passed"
    best_status: str = "not promoted"


def opt_note_text(rounds: Sequence[NoteRound], *, final_best: str | None = None,
                  avg_text: str | None = None, geomean_text: str | None = None,
                  overall_summary: bool = True) -> str:
    """opt-note.md in the upstream ledger format (``## Round N`` entries + ``## Overall Summary``)."""
    parts = ["# Optimization notes for add\n"]
    for r in rounds:
        parent = r.parent if r.parent == "baseline" else r.parent.replace("opt-round-", "round-")
        parts.append(
            f"## Round {r.number}\n"
            f"Parent: {parent}\n"
            f"Theme: {r.theme}\n"
            f"Result: {r.result}\n"
            f"Best status: {r.best_status}\n"
            f"Summary: [opt-round-{r.number}/summary.md](opt-round-{r.number}/summary.md)\n"
            f"Attempts: [opt-round-{r.number}/attempts.md](opt-round-{r.number}/attempts.md)\n"
        )
    if overall_summary:
        lines = ["## Overall Summary"]
        if final_best is not None:
            lines.append(f"Final best round: {final_best}")
        if avg_text is not None:
            lines.append(f"Avg improvement: {avg_text}")
        if geomean_text is not None:
            lines.append(f"Geomean speedup: {geomean_text}")
        lines += ["Validated branches: none", "Outcome: faster than baseline",
                  "Key optimization points:", "  1. mask hoisting: fewer ops (round 1)",
                  "Next step: try a larger block"]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def write_opt_note(ws: Path, text: str) -> Path:
    path = Path(ws) / "opt-note.md"
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- workflow state


def workflow_state(*, phase: str = "awaiting_round_start", current_round: int | None = None,
                   rounds: Mapping[int, str] | None = None, baseline_status: str = "passed",
                   run_id: str = "optimize-20260720-080000") -> dict[str, Any]:
    """``.helix/state.json`` content; ``rounds`` maps N -> active|passed|failed."""
    entries: dict[str, Any] = {}
    for n, status in (rounds or {}).items():
        entries[str(n)] = {
            "status": status,
            "round_dir": f"opt-round-{n}",
            "strategy_state": {
                "round_strategy": "exploration",
                "analysis_policy": "pattern_entry",
                "reason": "try the next hypothesis",
                "updated_at": "2026-07-20T08:05:00Z",
                "updated_by": "start-round",
            },
        }
    return {
        "schema_version": 1,
        "run_id": run_id,
        "phase": phase,
        "current_round": current_round,
        "baseline": {"status": baseline_status, "submitted_at": "2026-07-20T08:01:00Z"},
        "rounds": entries,
    }


def write_workflow_state(ws: Path, data: Mapping[str, Any]) -> Path:
    path = Path(ws) / ".helix" / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(data), indent=2) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ expectations


def _value(value: CaseValue, metric: str) -> float | None:
    case = _as_case(value, DEFAULT_BENCH_MODE)
    return case.kernel_us if metric == "kernel" else case.total_op_us


def pairs(baseline: Cases, candidate: Cases, metric: str = "kernel") -> list[tuple[float, float]]:
    """(b, c) per case, in sorted latency-id order, for the given metric (kernel|total-op)."""
    out = []
    for label in sorted(baseline, key=lambda lab: f"latency-{lab}"):
        if label not in candidate:
            continue
        b, c = _value(baseline[label], metric), _value(candidate[label], metric)
        if b is not None and c is not None and b > 0 and c > 0:
            out.append((b, c))
    return out


def expected_geomean(baseline: Cases, candidate: Cases, metric: str = "kernel") -> float:
    """exp(mean(ln(b/c))) — the upstream geomean speedup, unrounded."""
    p = pairs(baseline, candidate, metric)
    return math.exp(sum(math.log(b / c) for b, c in p) / len(p))


def expected_avg_improvement_pct(baseline: Cases, candidate: Cases, metric: str = "kernel") -> float:
    """mean((b−c)/b)·100 — the upstream avg improvement in percent, unrounded."""
    p = pairs(baseline, candidate, metric)
    return 100.0 * sum((b - c) / b for b, c in p) / len(p)


# ------------------------------------------------------------------------------ whole workspace


def build_workspace(root: Path, *, name: str = "add", op: str = DEFAULT_OP,
                    baseline: Cases | None = None, rounds: Sequence[RoundSpec | Cases] = (),
                    bench_mode: str = DEFAULT_BENCH_MODE, opt_note: bool | str = True,
                    final_best: str | None = "computed", geomean_text: str | None = "computed",
                    workflow: bool | Mapping[str, Any] = True) -> Path:
    """A complete workspace ``root/name``; rounds are numbered 1.. in the given order.

    ``final_best="computed"`` writes the numeric best round (by the upstream rule) into the
    Overall Summary and marks it ``current best`` in its ``## Round N`` entry; pass a string to
    log something else, or None for no ``Final best round:`` line.
    """
    ws = Path(root) / name
    write_operator(ws, op)
    if baseline is not None:
        write_baseline(ws, baseline, op=op, bench_mode=bench_mode)
    specs = [r if isinstance(r, RoundSpec) else RoundSpec(r) for r in rounds]
    for n, spec in enumerate(specs, start=1):
        write_round(ws, n, spec, op=op, bench_mode=bench_mode)
    best_n, best_geo, best_avg = numeric_best(baseline, specs)
    if opt_note is not False and specs:
        if isinstance(opt_note, str):
            text = opt_note
        else:
            logged = (f"round-{best_n}" if best_n else None) if final_best == "computed" else final_best
            geo = (f"{best_geo:.2f}x" if best_geo else None) if geomean_text == "computed" else geomean_text
            avg = f"{best_avg:+.1f}%" if best_avg is not None else None
            note_rounds = []
            for n, spec in enumerate(specs, start=1):
                status = spec.best_status
                if status is None:
                    status = "current best" if logged == f"round-{n}" else "validated branch"
                note_rounds.append(NoteRound(n, parent=spec.parent, theme=spec.theme, best_status=status))
            text = opt_note_text(note_rounds, final_best=logged, avg_text=avg, geomean_text=geo)
        write_opt_note(ws, text)
    if workflow is not False and specs:
        data = workflow if isinstance(workflow, Mapping) else workflow_state(
            rounds={n: ("passed" if s.correctness == s.benchmark == "passed" else "failed")
                    for n, s in enumerate(specs, start=1)})
        write_workflow_state(ws, data)
    return ws


def numeric_best(baseline: Cases | None, specs: Sequence[RoundSpec]) -> tuple[int | None, float | None, float | None]:
    """The upstream best round of the given specs: max (geomean, −mean latency). Kernel metric."""
    if baseline is None:
        return None, None, None
    best: tuple[float, float] | None = None
    found: tuple[int | None, float | None, float | None] = (None, None, None)
    for n, spec in enumerate(specs, start=1):
        if spec.cases is None or spec.correctness != "passed" or spec.benchmark != "passed":
            continue
        metric = "total-op" if spec.metric == "total-op" else "kernel"
        p = pairs(baseline, spec.cases, metric)
        if not p or len(p) != len(baseline):
            continue
        geo = math.exp(sum(math.log(b / c) for b, c in p) / len(p))
        mean_lat = sum(c for _, c in p) / len(p)
        key = (geo, -mean_lat)
        if best is None or key > best:
            best = key
            found = (n, geo, 100.0 * sum((b - c) / b for b, c in p) / len(p))
    return found


def _with_samples(cases: Mapping[str, float], n: int, rng: random.Random) -> dict[str, CaseValue]:
    """Each case with ``n`` raw samples around its time (±2% noise, a rare 1.5x outlier), as
    run-bench keeps them; the record's average stays the given time."""
    if n <= 0:
        return dict(cases)
    out: dict[str, CaseValue] = {}
    for label, value in cases.items():
        samples = [round(value * rng.gauss(1.0, 0.02) * (1.5 if rng.random() < 0.01 else 1.0), 4)
                   for _ in range(n)]
        out[label] = Case(kernel_us=value, total_op_us=value + TOTAL_OP_EXTRA_US, samples_us=samples)
    return out


def generate_large_workspace(root: Path, *, rounds: int = 200, cases: int = 20, seed: int = 0,
                             name: str = "big_add", samples: int = 0) -> Path:
    """A long session (benchmarks, TUI first-paint): ``rounds`` rounds of ``cases`` cases each,
    a branching parent tree, the full opt-note ledger and .helix/state.json. ``samples``: raw
    samples per case in every perf file (real run-bench files carry them; 0 writes none). The
    case times are the same for any ``samples``."""
    rng = random.Random(seed)
    sample_rng = random.Random(seed + 1)  # its own stream: the case times do not depend on it
    labels = [f"fp16_{1 << (10 + i % 10)}x{i}" for i in range(cases)]
    baseline = {lab: round(rng.uniform(20.0, 400.0), 3) for lab in labels}
    baseline_cases = _with_samples(baseline, samples, sample_rng)
    specs: list[RoundSpec] = []
    for n in range(1, rounds + 1):
        factor = 1.0 - 0.3 * (n / rounds) + rng.uniform(-0.05, 0.05)
        times = {lab: round(v * factor * rng.uniform(0.97, 1.03), 3) for lab, v in baseline.items()}
        round_cases = _with_samples(times, samples, sample_rng)
        parent = "baseline" if n == 1 else f"opt-round-{rng.randint(max(1, n - 5), n - 1)}"
        ok = rng.random() > 0.1
        specs.append(RoundSpec(round_cases, parent=parent, correctness="passed" if ok else "failed",
                               hypothesis=f"hypothesis {n}", theme=f"theme {n}"))
    return build_workspace(Path(root), name=name, baseline=baseline_cases, rounds=specs)


ROUND_CACHE = Path(".helix") / "cache" / "rounds.sealed"


def uncached_load(ws: Path, monkeypatch: Any, target: Any, name: str, value: Any, read: Any) -> Any:
    """``read`` of a fresh load of ``ws`` with ``target.name`` patched to ``value`` (a path of the
    rule turned off, to compare with), no .helix/cache/rounds.sealed before or after it, and no record
    list kept in memory: every judgement made again the other way."""
    from helix_engine.workspace import records
    from helix_engine.workspace.snapshot import load_workspace

    with monkeypatch.context() as patch:
        patch.setattr(target, name, value)
        (ws / ROUND_CACHE).unlink(missing_ok=True)
        records.forget()
        found = read(load_workspace(ws))
        (ws / ROUND_CACHE).unlink(missing_ok=True)
    return found


# ---------------------------------------------------------------------- the gate's records


def gate_record(ws: Path, name: str) -> dict[str, Any] | None:
    """What the gate would have recorded (state/seals.py) as ``.helix/gate/<name>.json``, for a
    workspace these builders wrote by hand: the baseline's seal of its files as they are, and a
    round's run-test / run-bench evidence for its current operator and perf file against the
    baseline operator. For tests of what submit-round does *after* the gate (no real job ran);
    the gate itself is tested by tests/e2e/test_gate_cheats.py, tests/unit/test_seals.py and
    `helix selftest`."""
    from helix_engine.eval.discovery import find_bench_file, find_test_file
    from helix_engine.state import seals
    from helix_engine.state.baseline import inspect_baseline
    from helix_engine.workspace import layout as _layout
    from helix_engine.workspace.siblings import round_digests, sibling_digests

    ws = Path(ws)
    found = seals.baseline_files(ws)
    if name == "baseline":
        return {"format": seals.FORMAT, "files": found.files,
                "operator": seals._rel(ws, found.operator) if found.operator else None}
    round_name, _, kind = name.partition(".")
    base_op = inspect_baseline(ws).operator_path
    ops = sorted((ws / round_name).glob("opt_*.py"))
    if kind not in ("run-test", "run-bench") or base_op is None or not ops:
        return None
    op = ops[0]
    finder = find_test_file if kind == "run-test" else find_bench_file
    try:
        harness = finder(base_op)
    except Exception:  # noqa: BLE001 - a hand-built workspace without that harness
        harness = base_op
    perf = ws / round_name / _layout.round_perf_name(op.stem[len("opt_"):])
    return {"format": seals.FORMAT, "kind": kind, "round": round_name, "job_id": "fixture", "passed": True,
            "split": True, "all_cases": True, "findings": [],
            "operator": {"path": seals._rel(ws, op), "sha256": seals.sha256_file(op),
                         "siblings": sibling_digests(op), "round_files": round_digests(op)},
            "reference": {"path": seals._rel(ws, base_op), "sha256": seals.sha256_file(base_op)},
            "harness": {"path": seals._rel(ws, harness), "sha256": found.files.get(seals._rel(ws, harness))
                        or seals.sha256_file(harness)},
            "perf_sha256": seals.sha256_file(perf) if kind == "run-bench" else None}


def measured_through_gate(ws: Path, round_dir: Path) -> None:
    """Write gate_record's records into ``.helix/gate/`` (for tests whose commands run as processes)."""
    from helix_engine.state import seals

    for name in ("baseline", f"{Path(round_dir).name}.run-test", f"{Path(round_dir).name}.run-bench"):
        body = gate_record(ws, name)
        if body is not None and not (name == "baseline" and (seals.gate_dir(ws) / "baseline.json").exists()):
            seals.write_record(ws, name, {k: v for k, v in body.items() if k != "format"})


def write_paired_sidecar(ws: Path, n: int, reference: Mapping[str, float] | None = None, *,
                         op: str = DEFAULT_OP, blocks: int = 4, seed: int | None = None) -> Path:
    """A paired sidecar for round ``n`` against the baseline operator, consistent the way a paired
    run-bench writes it: the candidate's slots hold the round's perf file's times (its records are
    the job's candidate side), the reference's ``reference[case]`` (the baseline operator's time in
    that job; default: the baseline perf file's), ``blocks`` ABBA/BAAB blocks of 3 samples a slot,
    ±1% noise. The round's perf file must exist: the sidecar carries its sha256."""
    from helix_engine.perf import paired
    from helix_engine.workspace.models import PerfRecord

    def read(path: Path) -> list[PerfRecord]:
        return [PerfRecord.model_validate(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]

    perf = ws / f"opt-round-{n}" / f"opt_{op}_perf.txt"
    base = read(ws / "baseline" / f"{op}_perf.txt")
    mine = {r.case_label: float(r.kernel_avg_time_us or 1.0) for r in read(perf)}
    ref_of = {r.case_label: float((reference or {}).get(r.case_label, r.kernel_avg_time_us or 1.0)) for r in base}
    rng = random.Random(n if seed is None else seed)
    cases, reference_records = [], []
    for record in base:
        label = record.case_label
        slots = [paired.PairedSlot(block=block, side=side,
                                   samples_us=[(ref_of[label] if side == "reference" else mine[label])
                                               * rng.uniform(0.99, 1.01) for _ in range(3)])
                 for block in range(blocks) for side in paired.block_order(block)]
        cases.append(paired.PairedCase(case_label=label, block_reps=3, slots=slots))
        ref_samples = [v for slot in slots if slot.side == "reference" for v in slot.samples_us]
        reference_records.append(record.model_copy(update={
            "kernel_avg_time_us": sum(ref_samples) / len(ref_samples),
            "total_op_avg_time_us": sum(ref_samples) / len(ref_samples), "samples_us": ref_samples}))
    run = paired.PairedRun(candidate=paired.OperatorRef(path=f"opt-round-{n}/opt_{op}.py"),
                           reference=paired.OperatorRef(path=f"baseline/{op}.py",
                                                        sha256=paired.sha256_of(ws / "baseline" / f"{op}.py")),
                           bench_file=f"bench_{op}.py", bench_mode=base[0].bench_mode or "perf-counter", backend="cpu",
                           perf_file=str(perf), perf_sha256=paired.sha256_of(perf), reference_records=reference_records,
                           cases=cases)
    path = paired.sidecar_path(perf)
    paired.write_paired(path, run)
    return path
