"""A paired bench through the gate: candidate and reference each in their own process, measured
in the same ABBA blocks, on fresh inputs for every slot, the outputs of a timed call of every
slot compared with the reference's on the same inputs.

Per case: a warm-up set for both sides (compile, caches; its outputs compared too), then the
blocks of eval/interleave.py. Each block gets one new input set per slot position (new seed, new
buffers); the candidate's i-th slot of a block and the reference's i-th slot run on copies of the
same set, so the sides are measured on the same values. In a slot every call gets its own copy of
the set where memory allows. Which call of a slot is compared is drawn after the slot ran.

Returns what ``interleave.run_paired`` returns (the candidate's and the reference's records and
the slots), plus ``gate``: the findings, the files that ran and their sha256. A case with a
finding is recorded with an error, so its bench fails.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from pathlib import Path
from typing import Any

from helix_engine.eval.interleave import merge, plan
from helix_engine.gate.harness import TracedBench, fresh_seed
from helix_engine.gate.opclient import OperatorClient, OperatorFailed, close_all, ready_all, start_clients
from helix_engine.gate.sides import (
    CallResult,
    Finding,
    Sides,
    finite_samples,
    judge_call,
    kernel_share,
    kernel_share_finding,
)

SIDES = ("reference", "candidate")
#: modes whose timings say which kernels ran (the share of device time in the operator's own)
PROFILER_MODES = frozenset({"torch-profiler", "torch-npu-profiler"})


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _caps(request: dict[str, Any], warmup: int, repeats: int) -> tuple[int, int]:
    if request.get("warmup_cap") is not None:
        warmup = min(warmup, int(request["warmup_cap"]))
    if request.get("repeats_cap") is not None:
        repeats = min(repeats, int(request["repeats_cap"]))
    return warmup, repeats


def run_paired_gate(request: dict[str, Any], backend: Any, events: Any, make_record: Any) -> dict[str, Any]:
    bench_file = Path(request["bench_file"])
    files = {"candidate": Path(request["operator_file"]), "reference": Path(request["reference_operator_file"])}
    clients = start_clients(files, backend, ready=False)  # they start up while the harness loads here
    try:
        bench = TracedBench(bench_file, files["candidate"])
        return _run_paired(request, backend, events, make_record, bench, files, clients)
    finally:
        close_all(clients)


def _run_paired(request: dict[str, Any], backend: Any, events: Any, make_record: Any, bench: TracedBench,
                files: dict[str, Path], clients: dict[str, OperatorClient]) -> dict[str, Any]:
    from helix_engine.eval.loader import HarnessContractError
    from helix_engine.eval.timing import CaseTiming
    from helix_engine.perf.context import ContextProbe

    bench_file = bench.file
    mode = request["bench_mode"]
    accuracy_mode = request.get("accuracy_mode")
    wanted = request.get("case_ids")
    cases = [c for c in bench.cases if not wanted or c.id in wanted]
    if wanted and set(wanted) - {c.id for c in bench.cases}:
        raise HarnessContractError(bench_file, "build_bench_cases", f"no case with id {sorted(set(wanted))[0]!r}")
    events.emit("log", msg=f"paired cases (gate): {', '.join(c.id for c in cases)}", case_ids=[c.id for c in cases])
    try:
        device_name = backend.device_name()
    except Exception:  # noqa: BLE001 - a name is nice to have
        device_name = backend.name
    ready_all(clients)
    from helix_engine.workspace import layout

    sides = Sides(bench, clients, layout.workspace_of(files["candidate"]), outputs_on_device=True)
    sides.l2 = str(request.get("l2") or "warm")
    if sides.l2 == "flushed" and backend.name != "cpu":
        from helix_engine.eval.timing import l2_flusher

        sides.flusher, sides.sync = l2_flusher(backend), backend.synchronize
    probe = ContextProbe.start(backend)
    findings: list[Finding] = []
    records: list[dict[str, Any]] = []
    reference_records: list[dict[str, Any]] = []
    paired_cases: list[dict[str, Any]] = []
    #: per case, the share of each side's profiled device time in its own file's kernels
    shares: dict[str, dict[str, float | None]] = {}
    from helix_engine.eval.loader import resolve_kernels

    shims = {side: _RecordHarness(bench, *resolve_kernels(files[side], bench.metadata)) for side in SIDES}
    try:
        for index, case in enumerate(cases):
            events.case_started(case.id, index, len(cases))
            start = time.perf_counter()
            warmup, repeats = _caps(request, case.warmup, case.repeats)
            k, n_blocks, per_side = plan(repeats, mode, request.get("block_reps"), request.get("blocks"))
            timings: dict[str, list[Any]] = {s: [] for s in SIDES}
            slots: list[dict[str, Any]] = []
            errors: dict[str, str] = {}
            case_findings: list[Finding] = []
            try:
                case_findings = _run_case(sides, bench, case, mode, warmup, k, n_blocks, per_side, timings, slots,
                                          accuracy_mode, {s: shims[s].kernel_names for s in SIDES})
            except OperatorFailed as exc:
                errors[_who(exc)] = str(exc)
                if exc.traceback:
                    print(exc.traceback, flush=True)
            findings += case_findings
            if case_findings:
                errors.setdefault("candidate", "gate: " + "; ".join(f.message for f in case_findings[:3]))
            wall = time.perf_counter() - start
            context = probe.now()
            for side, out in (("candidate", records), ("reference", reference_records)):
                error = errors.get(side)
                if error is None and errors:
                    other = "reference" if side == "candidate" else "candidate"
                    error = f"not measured: the {other} failed ({errors[other]})"
                timing = merge([CaseTiming(finite_samples(t.get("samples_us")), t.get("kernel_avg_us"),
                                           t.get("total_op_avg_us"), t.get("ops"), t.get("error_message"))
                                for t in timings[side]]) if timings[side] and error is None else None
                out.append(make_record(case.id, shims[side], mode, timing, error, wall, backend, device_name,
                                       context=context))
            paired_cases.append({"case_label": case.id, "block_reps": k, "slots": slots if not errors else []})
            if mode in PROFILER_MODES:
                shares[case.id] = {side: kernel_share(timings[side]) for side in SIDES}
            events.case_finished(case.id, records[-1])
            events.progress(index + 1, len(cases))
    finally:
        sides.close()
    gate = {"findings": [f.to_json() for f in findings], "split": True, "bench_mode": mode,
            "files": {"operator": clients["candidate"].copy.sha256, "reference": clients["reference"].copy.sha256,
                      "bench": sha256_file(bench_file), "siblings": clients["candidate"].copy.siblings,
                      "round_files": clients["candidate"].copy.round_files},
            "case_ids": [c.id for c in cases], "all_cases": not wanted, "kernel_share": shares}
    return {"records": records, "reference_records": reference_records, "paired_cases": paired_cases,
            "kernel_names": bench.kernel_names, "kernel_source": bench.kernel_source, "gate": gate}


def _who(exc: OperatorFailed) -> str:
    return "reference" if str(exc).startswith("the reference") else "candidate"


class _RecordHarness:
    """What the worker's record maker reads of a harness (kernel names and source, case work)."""

    def __init__(self, bench: TracedBench, kernel_names: list[str], kernel_source: str) -> None:
        self.kernel_names = kernel_names
        self.kernel_source = kernel_source
        self.cases = bench.cases
        self.operator_file = bench.file


def _run_case(sides: Sides, bench: TracedBench, case: Any, mode: str, warmup: int, k: int, n_blocks: int,
              per_side: int, timings: dict[str, list[Any]], slots: list[dict[str, Any]],
              accuracy_mode: str | None, kernel_names: dict[str, list[str]]) -> list[Finding]:
    from helix_engine.perf.paired import block_order

    found: list[Finding] = []
    warm = bench.program(case, fresh_seed())
    sides.load("warm", warm)
    results: dict[str, CallResult] = {}
    for side in SIDES:
        _tagged(side, sides.slot, side, "warm", warm, None, max(1, warmup), kernel_names[side], case.id)
        results[side] = _tagged(side, sides.fetch, side, -1)
    found += judge_call(case.id, "warm-up call", results["candidate"], results["reference"], warm, True,
                        accuracy_mode, sides.workspace)
    found += _stale_probe(sides, bench, case, accuracy_mode)
    previous: list[str] = ["warm", "stale"]
    for block in range(n_blocks):
        programs = [bench.program(case, fresh_seed()) for _ in range(per_side)]
        names_b = [f"b{block}p{p}" for p in range(per_side)]
        for p, program in enumerate(programs):
            sides.load(names_b[p], program, drop=previous if p == 0 else ())
        previous = names_b
        position = {s: 0 for s in SIDES}
        picks = [secrets.randbelow(k) for _ in range(per_side)]
        fetched: dict[tuple[str, int], CallResult] = {}
        for side in block_order(block, per_side):
            p = position[side]
            position[side] += 1
            timing = _tagged(side, sides.slot, side, names_b[p], programs[p], mode, k, kernel_names[side], case.id)
            timings[side].append(timing)
            slots.append({"block": block, "side": side, "samples_us": finite_samples(timing.get("samples_us"))})
            fetched[(side, p)] = _tagged(side, sides.fetch, side, picks[p])
        for p, program in enumerate(programs):
            found += judge_call(case.id, f"timed call of block {block}", fetched[("candidate", p)],
                                fetched[("reference", p)], program, True, accuracy_mode, sides.workspace)
        if found:
            break  # the case has failed: measuring more of it proves nothing
    found += sides.clock_findings(case.id)
    found += sides.unaccounted_findings(case.id)
    if mode in PROFILER_MODES and not found:
        found += kernel_share_finding(case.id, timings["candidate"], timings["reference"], kernel_names["candidate"])
    return _unique(found)


def _stale_probe(sides: Sides, bench: TracedBench, case: Any, accuracy_mode: str | None) -> list[Finding]:
    """The buffers of the warm-up call, refilled in place with new values and called once more: an
    output cached by buffer address (or by anything but the values) is stale now. On the CPU
    interpreter the same call counts what the operator file's own kernels stored."""
    from helix_engine.gate.sides import coverage_finding

    program = bench.program(case, fresh_seed())
    sides.load("stale", program)
    got: dict[str, CallResult] = {}
    covered: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        _tagged(side, sides.clients[side].ask, {"cmd": "refill", "name": "stale"})
        _tagged(side, sides.clients[side].ask, {"cmd": "once"})
        got[side] = _tagged(side, sides.fetch, side, -1)
        covered[side] = {**_tagged(side, sides.clients[side].ask, {"cmd": "covered"}),
                         "output_numel": got[side].notes.get("output_numel")}
    found = judge_call(case.id, "call on reused input buffers refilled with new values", got["candidate"],
                       got["reference"], program, True, accuracy_mode, sides.workspace)
    return found + coverage_finding(case.id, covered["candidate"], covered["reference"])


def _tagged(side: str, call: Any, *args: Any) -> Any:
    """``call(*args)``; an operator failure says which side failed."""
    try:
        return call(*args)
    except OperatorFailed as exc:
        message = str(exc)
        if not message.startswith(("the candidate", "the reference")):
            exc.args = (f"the {side} operator raised {message}",)
        raise


def _unique(found: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out: list[Finding] = []
    for f in found:
        key = (f.kind, f.case)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
