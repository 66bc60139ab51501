"""The torch_npu profiler setup shared by the npu bench mode and profile jobs, checked against
a recording stand-in for torch_npu (no NPU here): the upstream settings, 1+W+R steps, and the
bench mode's numbers read back from the CSVs the 'profiler' leaves."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from helix_engine.eval import timing
from tests.conftest import FIXTURES

PROF = FIXTURES / "kernels" / "profiler"


class _FakeProfile:
    def __init__(self, log: dict[str, Any], **kwargs: Any) -> None:
        self.log, self.kwargs = log, kwargs
        log["kwargs"], log["steps"] = kwargs, 0

    def __enter__(self) -> _FakeProfile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kwargs["on_trace_ready"](self)

    def step(self) -> None:
        self.log["steps"] += 1


def _fake_torch_npu(log: dict[str, Any]) -> types.ModuleType:
    prof = types.SimpleNamespace(
        ProfilerLevel=types.SimpleNamespace(Level1="Level1"),
        ProfilerActivity=types.SimpleNamespace(NPU="NPU", CPU="CPU"),
        _ExperimentalConfig=lambda **kw: ("config", kw),
        schedule=lambda **kw: ("schedule", kw),
        profile=lambda **kw: _FakeProfile(log, **kw),
    )

    def handler(out: str) -> Any:
        def ready(_prof: Any) -> None:  # what torch_npu leaves: the standalone run's CSVs
            shutil.copytree(PROF / "standalone", Path(out) / "run_ascend_pt", dirs_exist_ok=True)
            log["out"] = out
        return ready

    prof.tensorboard_trace_handler = handler
    module = types.ModuleType("torch_npu")
    module.profiler = prof  # type: ignore[attr-defined]
    return module


def _expected_kwargs(warmup: int, repeats: int) -> dict[str, Any]:
    return {"activities": ["NPU", "CPU"],
            "schedule": ("schedule", {"wait": 0, "warmup": warmup, "active": repeats, "repeat": 1, "skip_first": 1}),
            "record_shapes": False, "profile_memory": False, "with_stack": False, "with_modules": False,
            "with_flops": False,
            "experimental_config": ("config", {"profiler_level": "Level1", "l2_cache": False,
                                               "data_simplification": False})}


def test_npu_bench_mode_uses_upstream_settings_and_reads_kernel_details(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "torch_npu", _fake_torch_npu(log))
    monkeypatch.setenv("HELIX_BENCH_OUTPUT_DIR", str(tmp_path))
    calls: list[str] = []
    res = timing.time_torch_npu_profiler(lambda: calls.append("fn"), 2, 3, lambda: None, ["matmul_kernel"], "c1")
    kwargs = dict(log["kwargs"])
    kwargs.pop("on_trace_ready")
    assert kwargs == _expected_kwargs(2, 3)
    assert log["steps"] == 1 + 2 + 3 and len(calls) == 1 + 1 + 2 + 3  # one untimed call first
    assert Path(log["out"]).parent.parent == tmp_path
    # the recorded kernel_details: 888.42 µs over 10 distinct Step Ids
    assert res.kernel_avg_us == pytest.approx(88.842) and len(res.samples_us) == 10


def test_profile_job_uses_the_same_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from helix_engine.profile import worker

    log: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "torch_npu", _fake_torch_npu(log))
    backend = types.SimpleNamespace(synchronize=lambda: None)
    events = types.SimpleNamespace(progress=lambda done, total: None)
    worker.profile_npu(backend, lambda: None, 1, 4, tmp_path, events)
    kwargs = dict(log["kwargs"])
    kwargs.pop("on_trace_ready")
    assert kwargs == _expected_kwargs(1, 4) and log["steps"] == 1 + 1 + 4
    assert log["out"] == str(tmp_path)
