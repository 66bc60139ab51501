"""The supervisor's two operator processes, driven slot by slot, and what it concludes.

``Sides`` sends a program and its inputs to each process, runs a slot (timed by the process's
profiler, or here by the supervisor's own clock), fetches the outputs of one call, and
``judge_call`` compares them with the reference's outputs on the same inputs and compares the
candidate's behaviour with the reference's: a tensor subclass, an output that is an input's
storage, an input changed by the call, threads left running. Each is a ``Finding``.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.gate import devshare, wire
from helix_engine.gate.harness import TracedHarness
from helix_engine.gate.opclient import OperatorClient, OperatorFailed
from helix_engine.gate.recorder import CallProgram
from helix_engine.sanitize import clean

#: total bytes of per-call input copies a slot may hold on the device
COPY_BUDGET_BYTES = 512 * 1024 * 1024
#: bench modes whose timer runs in the operator's process; perf-counter is timed by the supervisor
IN_PROCESS_MODES = frozenset({"device-event", "torch-profiler", "torch-npu-profiler"})
GATE_MODES = IN_PROCESS_MODES | {"perf-counter"}


@dataclass(frozen=True)
class Finding:
    """Something the gate found about the candidate; any finding fails the case it names."""

    kind: str
    case: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "case": self.case, "message": self.message}


@dataclass
class CallResult:
    outputs: Any
    notes: dict[str, Any]
    unreadable: str | None = None


def tensor_bytes(tensors: list[Any]) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def calls_for(mode: str, reps: int) -> int:
    """How many times the mode's timer calls the closure for ``reps`` timed repetitions."""
    return {"torch-profiler": reps + 2, "torch-npu-profiler": reps + 2}.get(mode, reps)


class Sides:
    def __init__(self, harness: TracedHarness, clients: dict[str, OperatorClient],
                 workspace: Path | None = None, outputs_on_device: bool = False) -> None:
        """``outputs_on_device``: fetched outputs stay on the GPU (a paired bench compares them
        there); else they come back as CPU tensors (a test archives them)."""
        self.harness = harness
        self.workspace = workspace
        self.clients = clients
        #: per side, (supervisor's round trip µs, the operator's own µs) of each perf-counter call
        self.walls: dict[str, list[tuple[float, float]]] = {}
        #: per side, its shared device memory (CUDA: gate/devshare.py); absent: the pipe carries tensors
        self.arenas: dict[str, devshare.SideArena] = {}
        self.device: str | None = None
        for side, client in clients.items():
            if devshare.usable(client.backend_name):
                self.arenas[side] = devshare.SideArena(client.device_str)
            if client.backend_name == "cuda" and outputs_on_device:  # (the NPU's lack float64: the CPU)
                self.device = client.device_str
        self._input_bytes = 0
        self._need: dict[str, int] = {}
        #: per side and kind of request (inputs, slot, fetch, claimed), µs each took this case
        self.busy_us: dict[str, dict[str, list[float]]] = {}
        #: the cache state timed calls are measured in: "flushed" writes the L2 over before each
        self.l2 = "warm"
        #: on a device, the supervisor's own flush and synchronize (the L2 is the device's: a flush
        #: here evicts what the operator's process left, and that process cannot skip it)
        self.flusher: Any = None
        self.sync: Any = None

    def load(self, name: str, program: CallProgram, drop: list[str] | tuple[str, ...] = ()) -> None:
        blob: bytes | None = None
        head = program.header()
        self._input_bytes = tensor_bytes(program.tensors)
        for side, client in self.clients.items():
            steps = self.harness.new_steps(side)
            if steps:
                client.ask({"cmd": "setup", "steps": steps})
            arena = self.arenas.get(side)
            shared = None
            if arena is not None:
                arena.drop(drop)
                shared = arena.share_inputs(name, program.tensors)
            if shared is not None:
                self._ask(side, {"cmd": "inputs", "name": name, "drop": list(drop), "shared": shared, **head},
                          channel="inputs")
                continue
            blob = wire.encode_blob(program.tensors) if blob is None else blob
            self._ask(side, {"cmd": "inputs", "name": name, "drop": list(drop), **head}, blob, channel="inputs")

    def _ask(self, side: str, msg: dict[str, Any], blob: bytes = b"", channel: str = "") -> tuple[dict[str, Any], bytes]:
        """``ask_blob``; with ``channel``, the round trip is noted for ``unaccounted_findings``."""
        start = time.perf_counter()
        try:
            return self.clients[side].ask_blob(msg, blob)
        finally:
            if channel:
                self._note(side, channel, (time.perf_counter() - start) * 1e6)

    def _note(self, side: str, channel: str, us: float) -> None:
        self.busy_us.setdefault(side, {}).setdefault(channel, []).append(us)

    def slot(self, side: str, name: str, program: CallProgram, mode: str | None, reps: int,
             kernel_names: list[str], case_id: str) -> dict[str, Any]:
        """Run ``reps`` calls on set ``name``; the timing as the worker's CaseTiming fields."""
        client = self.clients[side]
        size = max(1, tensor_bytes(program.tensors))
        n_calls = calls_for(mode or "perf-counter", reps)
        copies = max(1, min(n_calls, COPY_BUDGET_BYTES // size))
        # the slot's copies and compiled calls, then its timed calls: requests apart, so that what
        # the first takes (no operator call in it) can be held side by side (unaccounted_findings)
        self._ask(side, {"cmd": "begin", "name": name, "sets": copies, "keep": reps}, channel="prepare")
        if mode in IN_PROCESS_MODES:
            timing, _ = self._ask(side, {"cmd": "timed", "mode": mode, "reps": reps, "kernel_names": kernel_names,
                                         "case_id": case_id, "l2": self.l2})
            self._note(side, "claimed", sum(finite_samples(timing.get("samples_us"))))
            return timing
        start = time.perf_counter()
        samples: list[float] = []
        for _ in range(reps):
            if self.l2 == "flushed" and mode is not None and self.flusher is not None:
                self.flusher()  # outside the call's round trip
                self.sync()
            elif self.l2 == "flushed" and mode is not None:  # the CPU: the operator's process flushes
                self._ask(side, {"cmd": "flush"}, channel="flush")
            wall, reply = client.timed_round_trip({"cmd": "once"})
            null, _ = client.timed_round_trip({"cmd": "noop"})  # the pipe's cost now, under the same load
            claimed = reply.get("us")
            claim = float(claimed) if isinstance(claimed, (int, float)) and math.isfinite(claimed) else -1.0
            # the sample is the supervisor's: the call's round trip less an empty one's, on a clock the
            # operator's process cannot reach (what that process claims is only held to it); an empty
            # round trip slower than the call's (preempted on a loaded box) leaves the claim, bounded by
            # the round trip: a claim can only make a side slower than the supervisor's clock says
            work = max((wall - null) * 1e6, min(claim, wall * 1e6), 0.0)
            samples.append(work)
            self.walls.setdefault(side, []).append((work, claim))
        self._slot_noted(side, start, samples)
        if mode is None:
            return {}
        mean = sum(samples) / len(samples)
        return {"samples_us": samples, "kernel_avg_us": mean, "total_op_avg_us": mean, "ops": [], "error_message": None}

    def _slot_noted(self, side: str, start: float, samples: Any) -> None:
        """A slot's round trips less what its timed calls claim, and what they claim (the
        supervisor's own samples: the whole call, so nothing of it is left in "slot")."""
        claimed = sum(finite_samples(samples))
        self._note(side, "slot", (time.perf_counter() - start) * 1e6 - claimed)
        self._note(side, "claimed", claimed)

    def unaccounted_findings(self, case: str) -> list[Finding]:
        """Work hidden from the timer. Both sides get the same requests, in turn, on inputs of the
        same size: receiving an input set, copying it for a slot's calls, running the calls (by the
        supervisor's clock only: an in-process profiler leaves a call's host time out of what it
        claims), fetching a call's outputs. What each takes beyond what the timed calls claim is the
        harness's own cost, the same on both sides, plus whatever the operator does outside its
        timed calls. Per kind of request,
        the candidate's i-th less the reference's i-th, taken side by side: the sum of the medians
        is the work the candidate does outside its timed calls. Held when it is over a millisecond,
        over four times the spread of those differences (a loaded box's noise), and over a quarter
        of what the candidate's timed calls of a slot claim."""
        busy = {side: dict(v) for side, v in self.busy_us.items()}
        self.busy_us.clear()
        if not {"candidate", "reference"} <= busy.keys():
            return []
        claimed = _median(busy["candidate"].get("claimed") or [0.0])
        extra, spread, where = 0.0, 0.0, "slot"
        for channel in ("inputs", "prepare", "slot", "fetch", "flush"):
            diffs = [c - r for c, r in zip(busy["candidate"].get(channel) or [], busy["reference"].get(channel) or [],
                                           strict=False)]
            if len(diffs) < 3:
                continue
            mid = _median(diffs)
            mad = _median([abs(d - mid) for d in diffs])
            if mid > max(1000.0, 3 * mad, claimed) and mid > extra:
                extra, spread, where = mid, mad, channel
        if not extra:
            return []
        what = {"inputs": "to take an input set", "prepare": "to copy a slot's inputs",
                "slot": "per slot outside its timed calls", "fetch": "to hand over a call's outputs",
                "flush": "to write over the L2 before a call"}[where]
        return [Finding("hidden-work", case, f"the candidate's process takes {extra / 1e3:.1f} ms more than the "
                                             f"reference's {what} (median, side by side; spread "
                                             f"{spread / 1e3:.1f} ms; its timed calls of a slot claim "
                                             f"{claimed / 1e3:.1f} ms): work done while inputs are set up, after the "
                                             "timer stops or when outputs are fetched is work hidden from the timer")]

    def clock_findings(self, case: str) -> list[Finding]:
        """The operator's own clock held to the supervisor's: per call, the round trip less the
        round trip of an empty message sent right after it is what the call took, by a clock the
        operator cannot reach. A median claim under a quarter of that, more than a millisecond short
        (a loaded box delays a reply by that much, not by the work) and short by a millisecond more
        than twice the reference's, measured in turn under the same load, is a timer it changed: on
        2 busy cores honest calls claimed 40-50% of the supervisor's time (2.2 of 5.5 ms, 4.3 of 8.6).
        A finding, not a defence: the sample is the supervisor's clock, which a claim cannot lower."""
        found: list[Finding] = []
        side = "candidate"
        calls = self.walls.pop(side, [])
        ref_calls = self.walls.pop("reference", [])
        self.walls.clear()
        if not calls or side not in self.clients:
            return found

        def medians(pairs: list[tuple[float, float]]) -> tuple[float, float]:
            work = sorted(max(0.0, wall) for wall, _ in pairs)
            claims = sorted(claim for _, claim in pairs)
            return work[len(work) // 2], claims[len(claims) // 2]

        mid_work, mid_claim = medians(calls)
        ref_gap = max(0.0, medians(ref_calls)[0] - medians(ref_calls)[1]) if ref_calls else 0.0
        if mid_work - mid_claim > max(1000.0, 2 * ref_gap + 1000.0) and mid_claim < 0.25 * mid_work:
            found.append(Finding("timer", case, f"the candidate's process reported calls of {mid_claim:.0f} µs (median) "
                                                f"that took {mid_work:.0f} µs by the supervisor's clock: its timer "
                                                "was changed"))
        return found

    def fetch(self, side: str, index: int) -> CallResult:
        """The outputs of the slot's ``index``-th kept call, as the supervisor's own tensors on
        the device they were made on (staged in shared memory where there is one, else piped)."""
        arena = self.arenas.get(side)
        msg: dict[str, Any] = {"cmd": "fetch", "index": index}
        if arena is not None:
            desc = arena.staging_for(max(2 * self._input_bytes, self._need.get(side, 0)))
            if desc is not None:
                self._ask(side, {"cmd": "staging", "desc": desc})
            msg["staged"] = True
        notes, blob = self._ask(side, msg, channel="fetch")
        if isinstance(notes.get("need"), int):
            self._need[side] = int(notes["need"])
        try:
            if arena is not None and "layout" in notes:
                staged = arena.read_staged(notes.pop("layout"))
                return CallResult(staged if self.device else devshare.to_cpu(staged), notes)
            return CallResult(wire.decode_blob(blob, self.device), notes)
        except (wire.WireError, devshare.LayoutError) as exc:
            return CallResult(None, notes, str(exc))

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def judge_call(case: str, where: str, cand: CallResult, ref: CallResult, program: CallProgram, compute: bool,
               accuracy_mode: str | None, workspace: Path | None = None) -> list[Finding]:
    """The candidate's call against the reference's on the same inputs."""
    from helix_engine.eval.accuracy import compare_outputs

    found: list[Finding] = []
    found += behaviour_findings(case, cand.notes, ref.notes)
    found += write_findings(case, cand.notes, workspace)
    if cand.unreadable:
        found.append(Finding("unreadable-output", case, f"{where}: the candidate's outputs are not plain tensors: "
                                                        f"{cand.unreadable}"))
        return found
    if ref.unreadable:
        return found
    result = compare_outputs(case, cand.outputs, ref.outputs, program.tensors, compute, accuracy_mode)
    if not result.passed:
        found.append(Finding("wrong-output", case, f"{where}: the candidate's output differs from the reference's on "
                                                   f"the same inputs: {result.message}"))
    return found


def behaviour_findings(case: str, cand: dict[str, Any], ref: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []

    def names(values: Any) -> list[str]:
        return [clean(str(v))[:60] for v in values] if isinstance(values, list) else []

    subclass = names(cand.get("subclass"))
    if subclass:
        found.append(Finding("tensor-subclass", case, f"the candidate returned a tensor subclass ({', '.join(subclass)}) "
                                                      "instead of a plain tensor: a lazy or deferred result can do its "
                                                      "work after the timer stopped"))
    foreign = sorted(set(names(cand.get("foreign"))) - set(names(ref.get("foreign"))))
    if foreign:
        found.append(Finding("foreign-output", case, f"the candidate returned {', '.join(foreign)} where the reference "
                                                     "returns tensors"))
    for key, kind, text in (
        ("aliased", "output-is-input", "the candidate's output shares storage with input #{i} (the reference's does "
                                       "not): the result is written into an input"),
        ("mutated", "input-changed", "the candidate changed input #{i} during the call (the reference does not)"),
    ):
        extra = sorted(set(_ints(cand.get(key))) - set(_ints(ref.get(key))))
        for i in extra:
            found.append(Finding(kind, case, text.format(i=i)))
    threads = names(cand.get("threads"))
    started = _count(cand.get("thread_starts"))
    if (threads and not names(ref.get("threads"))) or (started and not _count(ref.get("thread_starts"))):
        shown = f" ({', '.join(threads[:4])}{' …' if len(threads) > 4 else ''} still running)" if threads else ""
        found.append(Finding("threads", case, f"the candidate started {max(started, len(threads))} Python thread(s)"
                                              f"{shown} where the reference starts none: work on another thread can "
                                              "run outside the timer"))
    return found


def write_findings(case: str, notes: dict[str, Any], workspace: Path | None) -> list[Finding]:
    """Files the candidate's process opened for writing (or removed, renamed) inside the workspace."""
    if workspace is None:
        return []
    inside = _inside(str(Path(workspace).resolve()), tuple(w for w in notes.get("writes") or [] if isinstance(w, str)))
    if not inside:
        return []
    shown = ", ".join(clean(p) for p in inside[:5]) + (" …" if len(inside) > 5 else "")
    return [Finding("workspace-write", case, f"the candidate's process wrote to the workspace ({shown}): an operator "
                                             "has no business with the files of record")]


@functools.lru_cache(maxsize=64)
def _inside(root: str, writes: tuple[str, ...]) -> list[str]:
    """The paths of ``writes`` inside ``root`` (the same list comes back with every fetch)."""
    out: list[str] = []
    for raw in writes:
        try:
            out.append(Path(raw).resolve().relative_to(root).as_posix())
        except (ValueError, OSError):
            continue
    return out


def coverage_finding(case: str, cand: dict[str, Any], ref: dict[str, Any]) -> list[Finding]:
    """Pure PyTorch fallback on the CPU interpreter: the operator file's own kernels stored under
    half the output's elements during a call (and the reference's did not)."""
    def ratio(notes: dict[str, Any]) -> float | None:
        stored, numel = notes.get("stored"), notes.get("output_numel")
        if not isinstance(stored, int) or not isinstance(numel, int) or numel <= 0:
            return None
        return stored / numel

    mine, theirs = ratio(cand), ratio(ref)
    if mine is None or mine >= 0.5 or (theirs is not None and theirs < 0.5):
        return []
    return [Finding("pytorch-fallback", case, f"pure PyTorch fallback: the operator file's Triton kernels stored "
                                              f"{cand.get('stored')} elements in a call whose output has "
                                              f"{cand.get('output_numel')}: the result is computed by something else")]


#: below this share of a call's device time in the operator file's own kernels, a round is a fallback
MIN_KERNEL_SHARE = 0.5


def kernel_share(timings: list[dict[str, Any]]) -> float | None:
    """The share of the profiled device time of a side's slots spent in the operator file's own
    kernels (profiler modes: each slot's matched-kernel and all-op averages); None when unknown."""
    kernel = total = 0.0
    for t in timings:
        k, n = t.get("kernel_avg_us"), t.get("total_op_avg_us")
        if not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
            return None
        kernel += float(k) if isinstance(k, (int, float)) and math.isfinite(k) else 0.0
        total += float(n)
    return min(1.0, kernel / total) if total > 0 else None


def kernel_share_finding(case: str, cand: list[dict[str, Any]], ref: list[dict[str, Any]],
                         kernel_names: list[str]) -> list[Finding]:
    """Pure PyTorch fallback under a profiler: most of the candidate's device time is in kernels
    its file does not define (ATen, cuBLAS, a library's), where the reference's is not."""
    from helix_engine.eval.timing import is_kernel_op

    mine, theirs = kernel_share(cand), kernel_share(ref)
    if mine is None or mine >= MIN_KERNEL_SHARE or (theirs is not None and theirs < MIN_KERNEL_SHARE):
        return []
    others: dict[str, float] = {}
    for t in cand:
        for op in t.get("ops") or []:
            name = str(op.get("op_type", ""))
            if name and not is_kernel_op(name, kernel_names) and isinstance(op.get("avg_time_us"), (int, float)):
                others[name] = others.get(name, 0.0) + float(op["avg_time_us"])
    top = sorted(others, key=lambda n: -others[n])[:3]
    shown = f" (most of it in {', '.join(clean(n)[:60] for n in top)})" if top else ""
    return [Finding("pytorch-fallback", case, f"pure PyTorch fallback: the operator file's kernels "
                                              f"({', '.join(kernel_names[:4]) or 'none'}) took {mine:.0%} of the "
                                              f"candidate's device time{shown}; the reference's took "
                                              f"{'an unknown share' if theirs is None else f'{theirs:.0%}'}: the result "
                                              "is computed by something else, and the timer counts only those "
                                              "kernels")]


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)] if isinstance(values, list) else []


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def finite_samples(samples: Any) -> list[float]:
    return [float(s) for s in samples or [] if isinstance(s, (int, float)) and math.isfinite(float(s))]


__all__ = ["CallResult", "Finding", "OperatorFailed", "Sides", "judge_call"]
