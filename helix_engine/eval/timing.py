"""Child-side timing of one bench case, one function per bench mode.

Each returns a ``CaseTiming``: the per-op view (when the mode sees device ops), the kernel vs
total-op split by the resolved kernel names, and ``samples_us`` = per-iteration values of the
compared metric (kernel sum when kernels matched, else total). Nothing here prints.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.profile.ascend import (
    ProfileDataError,
    kernel_details_by_step,
    newest_file,
    op_averages_from_op_statistic,
)

NO_MATCH = "no resolved kernels matched profiler kernel view"
NO_MATCH_MSPROF = "no resolved kernels matched op_statistic csv"
METHODS: dict[str, str] = {
    "perf-counter": "wall time (perf_counter) around fn + synchronize",
    "device-event": "triton.testing.do_bench event timing with L2 flush",
    "torch-profiler": "torch.profiler device kernel time per iteration",
    "torch-npu-profiler": "torch_npu.profiler kernel_details device time",
    "msprof": "msprof op_statistic device time",
}
#: A perf record's cache state (key ``l2``): "flushed" = the L2 written over before every timed
#: repetition (as do_bench does), "warm" = each repetition finds what the one before left
L2_STATES: tuple[str, ...] = ("flushed", "warm")
#: the record_function range around one timed repetition (and its synchronize) in a flushed
#: torch-profiler session: device ops outside it are the flush's
#: Named with a nonce made when this module is first imported (the gate's operator process imports
#: it before the operator): a range the operator opens cannot pass for one of these.
_NONCE = secrets.token_hex(8)
TIMED_RANGE = f"helix::timed-{_NONCE}"
FLUSH_RANGE = f"helix::l2_flush-{_NONCE}"


@dataclass
class OpView:
    """Per-op average device time (µs) in first-seen order, plus per-step rows when known."""

    op_avgs: OrderedDict[str, float] = field(default_factory=OrderedDict)
    #: step id → op name → summed duration (µs); empty when the source has no step column
    steps: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.op_avgs.values())


def kernel_details_view(path: Path, repeats: int) -> OpView:
    """kernel_details.csv through the profile parser (one implementation of upstream's rule)."""
    parsed = kernel_details_by_step(path, repeats)
    return OpView(OrderedDict(parsed.averages), parsed.steps)


def op_statistic_view(path: Path, repeats: int | None) -> OpView:
    """op_statistic*.csv: ``repeats`` for the torch-npu fallback, ``None`` for msprof (GCD rule)."""
    return OpView(OrderedDict(op_averages_from_op_statistic(path, repeats)))


@dataclass
class CaseTiming:
    samples_us: list[float]
    kernel_avg_us: float | None
    total_op_avg_us: float | None
    ops: list[dict[str, Any]] | None
    error_message: str | None = None
    notes: list[str] = field(default_factory=list)


def is_kernel_op(op_name: str, kernel_names: list[str]) -> bool:
    return any(op_name == k or op_name == f"{k}_kernel" for k in kernel_names)


def split_ops(view: OpView, kernel_names: list[str], no_match: str = NO_MATCH) -> CaseTiming:
    """Kernel vs total-op from a per-op view; per-step samples when steps are known."""
    ops = [{"op_type": name, "avg_time_us": avg} for name, avg in view.op_avgs.items()]
    matched = [avg for name, avg in view.op_avgs.items() if is_kernel_op(name, kernel_names)]
    kernel = sum(matched) if matched else None
    total = view.total if view.op_avgs else None
    samples: list[float] = []
    for step in sorted(view.steps, key=_step_key):
        per = view.steps[step]
        if matched:
            samples.append(sum(v for n, v in per.items() if is_kernel_op(n, kernel_names)))
        else:
            samples.append(sum(per.values()))
    if not samples:
        value = kernel if kernel is not None else total
        samples = [value] if value is not None else []
    error = None if matched else (no_match if view.op_avgs else "the profiler recorded no device ops")
    return CaseTiming(samples, kernel, total, ops, error)


def _step_key(step: str) -> tuple[int, str]:
    try:
        return (int(float(step)), step)
    except ValueError:
        return (0, step)


# ---------------------------------------------------------------------------- perf-counter


def l2_flusher(backend: Any) -> Callable[[], None]:
    """A function that writes over the backend's L2 (a buffer of ``l2_flush_bytes``, allocated
    once). It refuses to run once the buffer is not the one it allocated (resized or moved by code
    in the same process: a flush of nothing would leave that side's cache warm)."""
    buffer = backend.l2_flush_buffer()
    size, ptr = buffer.numel(), buffer.data_ptr()

    def flush() -> None:
        if buffer.numel() != size or buffer.data_ptr() != ptr:
            raise RuntimeError(f"the L2 flush buffer was changed ({size} elements at {ptr:#x} became "
                               f"{buffer.numel()} at {buffer.data_ptr():#x}): something in this process "
                               "resized or replaced it")
        backend.flush_l2(buffer)

    return flush


def time_perf_counter(fn: Callable[[], Any], warmup: int, repeats: int, sync: Callable[[], None],
                      flush: Callable[[], None] | None = None) -> CaseTiming:
    """Wall time around ``fn()`` + ``sync()``; ``flush``: called (and synchronized) before each
    timed repetition, outside its time."""
    for _ in range(warmup):
        fn()
        sync()
    samples: list[float] = []
    for _ in range(repeats):
        if flush is not None:
            flush()
            sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e6)
    mean = sum(samples) / len(samples)
    return CaseTiming(samples, mean, mean, [])


# ---------------------------------------------------------------------------- device-event


def time_device_event(fn: Callable[[], Any], warmup: int, repeats: int, sync: Callable[[], None]) -> CaseTiming:
    """triton.testing.do_bench with its L2 flush; warmup/repeats are counts, do_bench wants
    milliseconds, so estimate one call first and convert."""
    from triton.testing import do_bench

    fn()
    sync()
    estimate_ms = float(do_bench(fn, warmup=1, rep=5, return_mode="median"))
    estimate_ms = max(estimate_ms, 1e-4)
    rep_ms = max(repeats, 1) * estimate_ms
    times = list(do_bench(fn, warmup=max(warmup, 1) * estimate_ms, rep=rep_ms, return_mode="all"))
    if len(times) < repeats:
        # do_bench sizes its loop by an estimate that includes its L2 flush, so short kernels
        # got fewer reps than asked (seen on an H200: 10-60 of 100); ask again, scaled up
        scale = repeats / max(1, len(times)) * 1.1
        times = list(do_bench(fn, warmup=1e-3, rep=rep_ms * scale, return_mode="all"))
    samples = [float(t) * 1e3 for t in times]
    mean = sum(samples) / len(samples)
    return CaseTiming(samples, mean, mean, [])


# -------------------------------------------------------------------------- torch-profiler


def group_by_steps(kernels: list[tuple[str, float, float]], steps: list[tuple[float, float]],
                   repeats: int) -> OpView:
    """Kernels (name, start_us, dur_us) into active steps (start_us, end_us); when a kernel
    fits no step (clock skew), fall back to chronological chunks of equal size."""
    kernels = sorted(kernels, key=lambda k: k[1])
    view = OpView()
    totals: OrderedDict[str, float] = OrderedDict()
    for name, _start, dur in kernels:
        totals[name] = totals.get(name, 0.0) + dur
    n_steps = len(steps) if steps else max(1, repeats)
    view.op_avgs = OrderedDict((k, v / n_steps) for k, v in totals.items())
    assigned: dict[str, dict[str, float]] = {}
    ok = bool(steps)
    for name, start, dur in kernels:
        idx = next((i for i, (s, e) in enumerate(steps) if s <= start <= e), None)
        if idx is None:
            ok = False
            break
        per = assigned.setdefault(str(idx), {})
        per[name] = per.get(name, 0.0) + dur
    if ok:
        for i in range(len(steps)):
            assigned.setdefault(str(i), {})
        view.steps = assigned
    elif kernels and len(kernels) % n_steps == 0:
        size = len(kernels) // n_steps
        for i in range(n_steps):
            per = {}
            for name, _s, dur in kernels[i * size:(i + 1) * size]:
                per[name] = per.get(name, 0.0) + dur
            view.steps[str(i)] = per
    return view


def _is_annotation(event: Any) -> bool:
    """GPU-side user annotations (``ProfilerStep#N`` spans on the device timeline) are not
    device ops; counting them doubled total-op on an H200 (torch 2.11)."""
    name = str(event.name)
    return bool(getattr(event, "is_user_annotation", False)) or name.startswith("ProfilerStep#") \
        or name in (TIMED_RANGE, FLUSH_RANGE)


def time_torch_profiler(fn: Callable[[], Any], warmup: int, repeats: int, sync: Callable[[], None],
                        kernel_names: list[str], flush: Callable[[], None] | None = None) -> CaseTiming:
    """torch.profiler (CPU+CUDA), schedule skip_first=1/wait=0/warmup=W/active=R like upstream.
    ``flush``: before each repetition the L2 is written over (and synchronized) inside a
    FLUSH_RANGE, the repetition and its synchronize run inside a TIMED_RANGE, and a step's device
    ops are those of its timed range (the flush's kernels are not the operator's)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    collected: dict[str, Any] = {}

    def on_ready(prof: Any) -> None:
        collected["events"] = list(prof.events())

    fn()
    sync()
    sched = schedule(skip_first=1, wait=0, warmup=warmup, active=repeats, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=on_ready) as prof:
        for _ in range(1 + warmup + repeats):
            if flush is None:
                fn()
                sync()
            else:
                with record_function(FLUSH_RANGE):
                    flush()
                    sync()
                with record_function(TIMED_RANGE):
                    fn()
                    sync()
            prof.step()
    events = collected.get("events", [])
    kernels = [(e.name, float(e.time_range.start), float(e.time_range.elapsed_us()))
               for e in events if e.device_type == DeviceType.CUDA and not _is_annotation(e)]
    if flush is None:
        steps = sorted((float(e.time_range.start), float(e.time_range.end))
                       for e in events if e.device_type == DeviceType.CPU and e.name.startswith("ProfilerStep#"))
        steps = steps[-repeats:] if len(steps) >= repeats else steps
        return split_ops(group_by_steps(kernels, steps, repeats), kernel_names)
    ranges = sorted((float(e.time_range.start), float(e.time_range.end), e.name == TIMED_RANGE)
                    for e in events if e.device_type == DeviceType.CPU and e.name in (TIMED_RANGE, FLUSH_RANGE))
    timed_kernels, timed = without_flush(kernels, ranges)
    unflushed = flushes_without_work(kernels, timed_kernels, ranges)
    if unflushed:
        return CaseTiming([], None, None, None, f"the L2 flush ran no device work before {unflushed} of {len(timed)} "
                          "timed repetitions: something in the operator's process stopped it")
    timed = timed[-repeats:] if len(timed) >= repeats else timed
    return split_ops(group_by_steps(timed_kernels, timed, repeats), kernel_names)


def flushes_without_work(kernels: list[tuple[str, float, float]], kept: list[tuple[str, float, float]],
                         ranges: list[tuple[float, float, bool]]) -> int:
    """How many flush ranges ran no device work (the kernels ``without_flush`` did not keep are the
    flushes'; each flush range should hold one): a flush made a no-op leaves its side warm."""
    kept_ids = {id(k) for k in kept}
    flush_starts = [k[1] for k in kernels if id(k) not in kept_ids and k[2] > 0]
    flush_ranges = [(s, e) for s, e, timed in ranges if not timed]
    nexts = [r[0] for r in ranges if r[2]] + [float("inf")]
    empty = 0
    for start, _end in flush_ranges:
        until = min((t for t in nexts if t > start), default=float("inf"))
        if not any(start - 1.0 <= k < until for k in flush_starts):
            empty += 1
    return empty


def without_flush(kernels: list[tuple[str, float, float]], ranges: list[tuple[float, float, bool]]
                  ) -> tuple[list[tuple[str, float, float]], list[tuple[float, float]]]:
    """The kernels of the timed ranges, and those ranges widened to meet their flush ranges.
    ``ranges``: (start, end, timed). A kernel that starts inside a range is that range's; one that
    starts between two (the device clock a little off the host's) is the flush's only when it lies
    nearer that flush range's start than the timed range (a flush kernel is launched as its range
    opens and synchronized before it closes, so nothing of it starts late in the range)."""
    if not ranges:
        return kernels, []

    def distance(start: float, r: tuple[float, float, bool]) -> float:
        if r[0] <= start <= r[1]:
            return -2.0 if r[2] else -1.0  # inside: always the nearest (a timed range before all)
        if not r[2]:
            return abs(start - r[0])
        return min(abs(start - r[0]), abs(start - r[1]))

    def owner(start: float) -> tuple[float, float, bool]:
        return min(ranges, key=lambda r: (distance(start, r), r[2]))  # a tie: the flush's

    kept = [k for k in kernels if owner(k[1])[2]]
    timed: list[tuple[float, float]] = []
    for i, (start, end, is_timed) in enumerate(ranges):
        if is_timed:  # out to the neighbouring flush ranges, so a kernel kept above fits its step
            low = ranges[i - 1][1] if i > 0 else float("-inf")
            high = ranges[i + 1][0] if i + 1 < len(ranges) else float("inf")
            timed.append((min(start, low), max(end, high)))
    return kept, timed


# ---------------------------------------------------------------------- torch-npu-profiler


def time_torch_npu_profiler(fn: Callable[[], Any], warmup: int, repeats: int, sync: Callable[[], None],
                            kernel_names: list[str], case_id: str) -> CaseTiming:
    """torch_npu.profiler with the upstream settings; metrics from kernel_details.csv, falling
    back to op_statistic*.csv when kernel details are missing or total 0."""
    from helix_engine.eval.backends.npu import upstream_profiler

    base = os.environ.get("HELIX_BENCH_OUTPUT_DIR")
    if base:
        out = Path(base) / f"helix-bench-{os.getpid()}" / f"case-{case_id}"
        out.mkdir(parents=True, exist_ok=True)
        cleanup = False
    else:
        out = Path(tempfile.mkdtemp(prefix="helix-bench-"))
        cleanup = True
    try:
        fn()
        sync()
        with upstream_profiler(out, warmup, repeats) as prof:
            for _ in range(1 + warmup + repeats):
                fn()
                sync()
                prof.step()
        return timing_from_ascend_dir(out, repeats, kernel_names)
    finally:
        if cleanup:
            shutil.rmtree(out, ignore_errors=True)


def timing_from_ascend_dir(out: Path, repeats: int, kernel_names: list[str]) -> CaseTiming:
    """kernel_details.csv when it holds device time, else op_statistic*.csv (Total ÷ repeats)."""
    details = newest_file(out, "kernel_details.csv")
    if details is not None:
        try:
            view = kernel_details_view(details, repeats)
        except ProfileDataError:
            view = None  # damaged: the op_statistic fallback below still may answer
        if view is not None and view.total > 0:
            return split_ops(view, kernel_names)
    stat = newest_file(out, "op_statistic*.csv")
    if stat is None:
        return CaseTiming([], None, None, None, "the profiler wrote neither kernel_details.csv nor op_statistic*.csv")
    try:
        return split_ops(op_statistic_view(stat, repeats), kernel_names)
    except ProfileDataError as exc:
        return CaseTiming([], None, None, None, str(exc))


# -------------------------------------------------------------------------------- msprof


def time_msprof(request_path: Path, case_id: str, warmup: int, repeats: int, kernel_names: list[str],
                timeout_s: float | None = None) -> CaseTiming:
    """Run ``msprof --output=<dir> python -m helix_engine.eval.worker REQ --run-one ID
    --iterations W+R`` and read the newest op_statistic csv (warmups are not excluded)."""
    msprof = shutil.which("msprof")
    if msprof is None:
        return CaseTiming([], None, None, None, "msprof is not on PATH; source the CANN set_env.sh or use --bench-mode "
                          "torch-npu-profiler")
    out = Path(tempfile.mkdtemp(prefix="helix-msprof-"))
    try:
        cmd = [msprof, f"--output={out}", sys.executable, "-m", "helix_engine.eval.worker", str(request_path),
               "--run-one", case_id, "--iterations", str(warmup + repeats)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return CaseTiming([], None, None, None, f"msprof exited {proc.returncode}: {' '.join(tail)}")
        stat = newest_file(out, "op_statistic_*.csv") or newest_file(out, "op_statistic*.csv")
        if stat is None:
            return CaseTiming([], None, None, None, "msprof wrote no op_statistic csv")
        try:
            return split_ops(op_statistic_view(stat, None), kernel_names, NO_MATCH_MSPROF)
        except ProfileDataError as exc:
            return CaseTiming([], None, None, None, str(exc))
    finally:
        shutil.rmtree(out, ignore_errors=True)
