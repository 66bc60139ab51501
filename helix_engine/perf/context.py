"""Measurement context: where and when a perf record was measured, and when two sides differ.

Why: a speedup of two perf files measured an hour apart, on another host or device, or under
another load, carries drift that no bootstrap interval sees (on an H200 the first job after idle
ran 1-2% slower; on a loaded CPU one round read 3x, 21x and 7x). Each record carries a
``context`` (models.MeasurementContext); the evaluation core compares the two sides' contexts and
every comparison says so in one sentence (``RoundEvaluation.context_warning``).

Capturing is best effort in the job child: a field that cannot be read stays None, and nothing
here ever fails a bench.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from helix_engine.workspace.models import MeasurementContext, PerfRecord

#: Two sides measured further apart than this (seconds, gap between their time spans) drift.
TIME_APART_S = 600.0
#: Load averages per core that differ by more than this: one side shared the host's cores.
LOAD_PER_CORE_DIFF = 0.5
#: nvidia-smi gets this long (seconds) to answer a clock query.
SMI_TIMEOUT_S = 3.0


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=timezone.utc)


# ------------------------------------------------------------------------- child side


def _cuda_identity() -> tuple[str | None, str | None]:
    """("cuda:<i> <uuid>", uuid) of the current CUDA device, or (None, None)."""
    with contextlib.suppress(Exception):
        import torch

        index = torch.cuda.current_device()
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        text = f"GPU-{uuid}" if uuid is not None and not str(uuid).startswith("GPU-") else (str(uuid) if uuid else None)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = f"cuda:{index}" + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible else "")
        return (f"{shown} {text}" if text else shown), text
    return None, None


def _smi_clocks(uuid: str | None) -> tuple[float | None, float | None]:
    """(SM, memory) clocks in MHz from nvidia-smi, else torch.cuda.clock_rate for the SM."""
    import shutil  # here and in start: job children only (~10 ms of every `helix status` at import)
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is not None:
        cmd = [smi, "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits"]
        if uuid:
            cmd += ["-i", uuid]
        with contextlib.suppress(Exception):
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
            first = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
            parts = [p.strip() for p in first.split(",")]
            if len(parts) == 2:
                return float(parts[0]), float(parts[1])
    with contextlib.suppress(Exception):
        import torch

        return float(torch.cuda.clock_rate()), None
    return None, None


@dataclass
class ContextProbe:
    """Reads the context of one job child: identity once, time/load/clocks per case."""

    backend: str
    device_id: str | None = None
    gpu_uuid: str | None = None
    host: str | None = None

    @classmethod
    def start(cls, backend: Any) -> ContextProbe:
        name = str(getattr(backend, "name", "") or "")
        probe = cls(backend=name)
        import socket

        with contextlib.suppress(Exception):
            probe.host = socket.gethostname()
        if name == "cuda":
            probe.device_id, probe.gpu_uuid = _cuda_identity()
        elif name == "npu":
            visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
            probe.device_id = "npu:0" + (f" (ASCEND_RT_VISIBLE_DEVICES={visible})" if visible else "")
        else:
            probe.device_id = name or None
        return probe

    def now(self) -> dict[str, Any]:
        """The context of a case that just finished, as the record's JSON value."""
        ctx = MeasurementContext(time=now_iso(), host=self.host, device_id=self.device_id,
                                 cpu_count=os.cpu_count())
        with contextlib.suppress(OSError, AttributeError):
            ctx.load_avg = round(os.getloadavg()[0], 3)
        if self.backend == "cuda":
            ctx.sm_clock_mhz, ctx.mem_clock_mhz = _smi_clocks(self.gpu_uuid)
        return ctx.model_dump(mode="json", exclude_none=True)


# ------------------------------------------------------------------------ comparison


@dataclass
class SideContext:
    """What the records of one side say about where and when they were measured."""

    first: datetime | None
    last: datetime | None
    hosts: frozenset[str]
    devices: frozenset[str]
    load_per_core: float | None  # mean over the records that know it


def side_context(records: Sequence[PerfRecord]) -> SideContext | None:
    """None when no record of the side carries a context (upstream files, older helix)."""
    contexts = [r.context for r in records if r.context is not None]
    if not contexts:
        return None
    times = [t for t in (parse_time(c.time) for c in contexts) if t is not None]
    loads = [c.load_avg / c.cpu_count for c in contexts
             if c.load_avg is not None and c.cpu_count]
    return SideContext(
        first=min(times) if times else None, last=max(times) if times else None,
        hosts=frozenset(c.host for c in contexts if c.host),
        devices=frozenset(c.device_id for c in contexts if c.device_id),
        load_per_core=sum(loads) / len(loads) if loads else None,
    )


def _apart(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


def _one(values: frozenset[str]) -> str:
    return ", ".join(sorted(values)) if values else "?"


def mismatch_reasons(b: SideContext, c: SideContext) -> list[str]:
    """What differs between the two sides, each as a short phrase; [] when nothing does."""
    reasons: list[str] = []
    if b.first is not None and b.last is not None and c.first is not None and c.last is not None:
        gap = max((c.first - b.last).total_seconds(), (b.first - c.last).total_seconds(), 0.0)
        if gap > TIME_APART_S:
            reasons.append(f"{_apart(gap)} apart")
    if b.hosts and c.hosts and b.hosts != c.hosts:
        reasons.append(f"on different hosts ({_one(b.hosts)} vs {_one(c.hosts)})")
    if b.devices and c.devices and b.devices != c.devices:
        reasons.append(f"on different devices ({_one(b.devices)} vs {_one(c.devices)})")
    if b.load_per_core is not None and c.load_per_core is not None \
            and abs(b.load_per_core - c.load_per_core) > LOAD_PER_CORE_DIFF:
        reasons.append(f"under different loads ({b.load_per_core:.2f} vs {c.load_per_core:.2f} per core)")
    return reasons


def mismatch_warning(baseline: Sequence[PerfRecord], candidate: Sequence[PerfRecord]) -> str | None:
    """One sentence when the two sides were measured apart (time, host, device or load); None
    when they were not, or when a side carries no context to tell."""
    b, c = side_context(baseline), side_context(candidate)
    if b is None or c is None:
        return None
    reasons = mismatch_reasons(b, c)
    if not reasons:
        return None
    joined = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]
    return (f"Warning: the two sides were measured {joined}; drift between them is not in the intervals, "
            "so measure both in one job (`helix run-bench --against baseline`).")
