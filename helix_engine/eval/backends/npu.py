"""The Ascend NPU backend: torch_npu profiler by default, msprof as an option.

Why ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``: upstream imports torch and torch_npu explicitly with
autoload off to avoid a torch_npu initialisation race; ``import_torch`` does the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from helix_engine.eval.backends.base import Backend


class NpuBackend(Backend):
    name = "npu"
    device_str = "npu"
    visible_devices_var = "ASCEND_RT_VISIBLE_DEVICES"
    default_bench_mode = "torch-npu-profiler"
    bench_modes = ("torch-npu-profiler", "msprof", "device-event", "perf-counter")
    #: Larger than the L2 of Ascend 910-class devices (192 MB).
    l2_flush_bytes = 256 * 1024 * 1024
    #: The profiler modes measure warm (as upstream): a flush inside a profiled step would be a
    #: device op of that step, and kernel_details.csv has no range to tell it apart (not built:
    #: no NPU to measure it on); do_bench always flushes.
    l2_states = {"torch-npu-profiler": ("warm",), "msprof": ("warm",), "device-event": ("flushed",),
                 "perf-counter": ("warm", "flushed")}

    def child_env(self, device: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = super().child_env(device, base)
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        return env

    def import_torch(self) -> Any:
        import torch
        import torch_npu  # noqa: F401 - registers torch.npu

        return torch

    def synchronize(self) -> None:
        torch = self.import_torch()
        torch.npu.synchronize()

    def device_name(self) -> str:
        torch = self.import_torch()
        return str(torch.npu.get_device_name(torch.npu.current_device()))

    def event_pair(self) -> tuple[Any, Any]:
        torch = self.import_torch()
        return torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)


def upstream_profiler(out_dir: Path, warmup: int, repeats: int) -> Any:
    """torch_npu.profiler exactly as upstream run-bench and profile-bench configure it: NPU+CPU
    activity, Level1, l2_cache and data_simplification off, schedule skip_first 1 / wait 0 /
    warmup W / active R, tensorboard_trace_handler writing ``ASCEND_PROFILER_OUTPUT/`` under
    ``out_dir``. The caller steps it 1 + W + R times. Used by bench timing and profile jobs."""
    import torch_npu

    prof = torch_npu.profiler
    config = prof._ExperimentalConfig(  # noqa: SLF001 - upstream uses it
        profiler_level=prof.ProfilerLevel.Level1, l2_cache=False, data_simplification=False)
    return prof.profile(
        activities=[prof.ProfilerActivity.NPU, prof.ProfilerActivity.CPU],
        schedule=prof.schedule(wait=0, warmup=warmup, active=repeats, repeat=1, skip_first=1),
        on_trace_ready=prof.tensorboard_trace_handler(str(out_dir)),
        record_shapes=False, profile_memory=False, with_stack=False, with_modules=False, with_flops=False,
        experimental_config=config,
    )
