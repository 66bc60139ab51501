"""The CPU backend: Triton's interpreter (``TRITON_INTERPRET=1`` in the child), wall timing.

Why it exists: a laptop or CI box without an accelerator can still run the whole workflow
with real Triton kernels, only slower; numbers are labelled ``perf-counter``.
"""

from __future__ import annotations

from collections.abc import Mapping

from helix_engine.eval.backends.base import Backend


class CpuBackend(Backend):
    name = "cpu"
    device_str = "cpu"
    visible_devices_var = None
    default_bench_mode = "perf-counter"
    bench_modes = ("perf-counter",)
    #: Larger than the last-level cache of common server CPUs.
    l2_flush_bytes = 64 * 1024 * 1024

    def child_env(self, device: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = super().child_env(device, base)
        env["TRITON_INTERPRET"] = "1"
        return env

    def device_name(self) -> str:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.lower().startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return super().device_name()
