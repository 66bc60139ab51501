"""What every backend adapter provides: parent-side facts (names, env for the child, bench
modes) and child-side helpers (synchronize, device name, a timer, an L2 flush buffer).

Why one small class: the evaluation code is the same on NPU, CUDA and the CPU interpreter
except for a device string, a sync call, a visible-devices variable and the profiler; the
adapter holds exactly those differences. Parent-side methods never import torch; the
child-side ones import it lazily (they run inside worker processes only).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

#: Upstream forces this Triton-Ascend variable off for every run (spec §7).
ALL_BLOCKS_PARALLEL = "TRITON_ALL_BLOCKS_PARALLEL"
#: The cache state asked for (``--l2``): "flushed" or "warm"; unset, each bench mode's default.
L2_ENV = "HELIX_L2"


class Backend:
    """Base adapter; subclasses set the class attributes and override the child hooks."""

    name: str = ""
    device_str: str = ""
    visible_devices_var: str | None = None
    default_bench_mode: str = "perf-counter"
    bench_modes: tuple[str, ...] = ("perf-counter",)
    #: Bytes written between timed repetitions to evict the L2 cache (do_bench uses 256 MB).
    l2_flush_bytes: int = 256 * 1024 * 1024
    #: Per bench mode, the cache states it measures in, its default first ("flushed": the L2
    #: written over before each timed repetition; "warm": each finds what the one before left).
    l2_states: dict[str, tuple[str, ...]] = {"perf-counter": ("warm", "flushed")}
    #: child side: the cache state this job measures in (the request's ``l2``)
    l2: str = "warm"

    # ------------------------------------------------------------------ parent side
    def child_env(self, device: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Variables to set in a job's child (on top of the inherited environment)."""
        env: dict[str, str] = {
            "TRITON_ALWAYS_COMPILE": "1",
            "HELIX_BACKEND": self.name,
            "HELIX_DEVICE": self.device_str,  # what helix_engine.harness.device() returns
        }
        source = os.environ if base is None else base
        if source.get(ALL_BLOCKS_PARALLEL) == "1":
            env[ALL_BLOCKS_PARALLEL] = "0"
        if device is not None and self.visible_devices_var:
            env[self.visible_devices_var] = str(device)
        return env

    def check_bench_mode(self, mode: str | None) -> str:
        """The bench mode to use: ``mode`` if this backend supports it, else a HelixError."""
        from helix_engine.errors import HelixError

        if mode is None or mode == "auto":
            return self.default_bench_mode
        if mode not in self.bench_modes:
            raise HelixError(
                f"bench mode {mode!r} does not run on the {self.name} backend; use one of "
                + ", ".join(self.bench_modes)
            )
        return mode

    def l2_for(self, mode: str, requested: str | None = None) -> str:
        """The cache state a run of ``mode`` measures in: ``requested`` (else ``$HELIX_L2``)
        when the mode can measure in it, else the mode's default; one it cannot is a HelixError."""
        from helix_engine.errors import HelixError

        states = self.l2_states.get(mode, ("warm",))
        wanted = (requested or os.environ.get(L2_ENV) or "").strip().lower()
        if not wanted:
            return states[0]
        if wanted not in states:
            other = [m for m, s in self.l2_states.items() if wanted in s]
            raise HelixError(f"bench mode {mode} on the {self.name} backend measures with the L2 "
                             f"{' or '.join(states)}, not {wanted!r}"
                             + (f"; {', '.join(other)} can measure {wanted}" if other else ""))
        return wanted

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device_str": self.device_str,
            "visible_devices_var": self.visible_devices_var,
            "default_bench_mode": self.default_bench_mode,
            "bench_modes": list(self.bench_modes),
            "l2_flush_bytes": self.l2_flush_bytes,
            "l2_states": {mode: list(states) for mode, states in self.l2_states.items()},
        }

    # ------------------------------------------------------------------ child side
    def import_torch(self) -> Any:
        """Import torch (and the device extension) the way this backend needs; child only."""
        import torch

        return torch

    def synchronize(self) -> None:
        """Wait for queued device work; a no-op on the CPU."""

    def device_name(self) -> str:
        """A human name for the device the child sees (e.g. ``NVIDIA H200``)."""
        import platform

        return platform.processor() or platform.machine() or "cpu"

    def timer(self) -> float:
        """Seconds, after a synchronize: the perf-counter method's clock."""
        self.synchronize()
        return time.perf_counter()

    def time_call_us(self, fn: Callable[[], Any]) -> float:
        """Wall time of one call of ``fn`` in microseconds, synchronized on both ends."""
        start = self.timer()
        fn()
        return (self.timer() - start) * 1e6

    def l2_flush_buffer(self) -> Any:
        """A device buffer of ``l2_flush_bytes``; ``flush_l2(buf)`` writes it to evict L2."""
        torch = self.import_torch()
        return torch.empty(self.l2_flush_bytes // 4, dtype=torch.int32, device=self.device_str)

    def flush_l2(self, buffer: Any) -> None:
        buffer.zero_()

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"
