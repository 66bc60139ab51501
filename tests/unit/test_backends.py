"""Backend adapters and selection; the probe runs in a real subprocess (also a broken one)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.eval import backends as be
from helix_engine.eval.backends import BackendReport, detect, get_backend, select_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("HELIX_BACKEND", raising=False)
    monkeypatch.delenv("HELIX_PYTHON", raising=False)
    monkeypatch.setattr(be, "_CACHE", {})


def _fake_python(tmp_path: Path, body: str) -> str:
    """An executable that stands in for python in the probe (prints/crashes as told)."""
    path = tmp_path / "fakepython"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_adapters_facts() -> None:
    cpu, cuda, npu = get_backend("cpu"), get_backend("cuda"), get_backend("npu")
    assert (cpu.device_str, cpu.visible_devices_var, cpu.default_bench_mode) == ("cpu", None, "perf-counter")
    assert (cuda.device_str, cuda.visible_devices_var, cuda.default_bench_mode) == (
        "cuda", "CUDA_VISIBLE_DEVICES", "torch-profiler")
    assert (npu.device_str, npu.visible_devices_var, npu.default_bench_mode) == (
        "npu", "ASCEND_RT_VISIBLE_DEVICES", "torch-npu-profiler")
    assert "device-event" in cuda.bench_modes and "msprof" in npu.bench_modes
    assert cpu.bench_modes == ("perf-counter",)
    from helix_engine.workspace.models import BENCH_MODES

    for adapter in (cpu, cuda, npu):
        assert adapter.default_bench_mode in adapter.bench_modes
        assert set(adapter.bench_modes) <= set(BENCH_MODES)
        assert adapter.l2_flush_bytes >= 32 * 1024 * 1024


def test_child_env_per_backend() -> None:
    cpu = get_backend("cpu").child_env("0", base={})
    assert cpu["TRITON_INTERPRET"] == "1" and cpu["HELIX_BACKEND"] == "cpu"
    assert cpu["TRITON_ALWAYS_COMPILE"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in cpu
    cuda = get_backend("cuda").child_env("3", base={})
    assert cuda["CUDA_VISIBLE_DEVICES"] == "3" and "TRITON_INTERPRET" not in cuda
    npu = get_backend("npu").child_env("5", base={"TRITON_ALL_BLOCKS_PARALLEL": "1"})
    assert npu["ASCEND_RT_VISIBLE_DEVICES"] == "5"
    assert npu["TRITON_ALL_BLOCKS_PARALLEL"] == "0"  # forced off, as upstream
    assert npu["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    assert "ASCEND_RT_VISIBLE_DEVICES" not in get_backend("npu").child_env(None, base={})


def test_check_bench_mode() -> None:
    cuda = get_backend("cuda")
    assert cuda.check_bench_mode(None) == "torch-profiler"
    assert cuda.check_bench_mode("device-event") == "device-event"
    with pytest.raises(HelixError, match="does not run on the cuda backend"):
        cuda.check_bench_mode("msprof")


def test_cpu_child_side_helpers() -> None:
    cpu = get_backend("cpu")
    cpu.synchronize()
    assert cpu.device_name()
    calls: list[int] = []
    assert cpu.time_call_us(lambda: calls.append(1)) >= 0.0
    assert calls == [1]


def test_select_explicit_cpu_needs_no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("probed")

    monkeypatch.setattr(be, "_run_probe", boom)
    assert select_backend("cpu").name == "cpu"
    monkeypatch.setenv("HELIX_BACKEND", "CPU")
    assert select_backend().name == "cpu"


def test_select_rejects_unknown_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HelixError, match="--backend"):
        select_backend("tpu")
    monkeypatch.setenv("HELIX_BACKEND", "rocm")
    with pytest.raises(HelixError, match="HELIX_BACKEND"):
        select_backend()
    with pytest.raises(HelixError, match="unknown backend"):
        get_backend("gpu")


def test_build_report_prefers_npu_then_cuda() -> None:
    both = {"torch_version": "2", "npu_count": 2, "npu_devices": ["A", "B"], "cuda_available": True,
            "cuda_devices": ["H200"]}
    report = be._build_report(both)
    assert report.picked == "npu"
    assert report.devices["npu"] == ["A", "B"]
    assert "auto prefers npu" in report.reasons["cuda"]
    cuda_only = {"torch_version": "2", "npu_error": "torch_npu is not installed", "cuda_available": True,
                 "cuda_devices": ["H200"]}
    report = be._build_report(cuda_only)
    assert report.picked == "cuda" and report.reasons["npu"] == "torch_npu is not installed"
    no_npu_dev = {"torch_version": "2", "npu_count": 0, "cuda_available": False}
    report = be._build_report(no_npu_dev)
    assert report.picked == "cpu"
    assert "no NPU is present" in report.reasons["npu"]
    assert report.reasons["cuda"] == "torch.cuda.is_available() is False"
    no_torch = {"torch_error": "ModuleNotFoundError: No module named 'torch'"}
    report = be._build_report(no_torch)
    assert report.picked == "cpu" and "torch does not import" in report.reasons["cuda"]


def test_probe_of_a_crashing_python_falls_back_to_cpu(tmp_path: Path) -> None:
    fake = _fake_python(tmp_path, "echo 'Fatal Python error: boom' >&2; kill -SEGV $$")
    report = detect(python=fake, refresh=True)
    assert report.picked == "cpu"
    assert report.probe_error and "crashed" in report.probe_error
    assert "crashed" in report.reasons["cuda"]
    # a failed probe is not written to the disk cache
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_probe_with_garbage_output(tmp_path: Path) -> None:
    fake = _fake_python(tmp_path, "echo '{not json'")
    report = detect(python=fake, refresh=True)
    assert report.picked == "cpu" and "unreadable" in (report.probe_error or "")


def test_probe_of_missing_python(tmp_path: Path) -> None:
    report = detect(python=str(tmp_path / "nope"), refresh=True)
    assert report.picked == "cpu" and "could not start" in (report.probe_error or "")


def test_explicit_cuda_unusable_names_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_python(tmp_path, 'echo \'{"torch_version": "2", "npu_error": "torch_npu is not installed", '
                                  '"cuda_available": false}\'')
    monkeypatch.setenv("HELIX_PYTHON", fake)
    with pytest.raises(HelixError, match=r"torch.cuda.is_available\(\) is False"):
        select_backend("cuda")
    assert select_backend("auto").name == "cpu"


def test_detect_caches_on_disk_and_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "count"
    fake = _fake_python(tmp_path, f"echo x >> {counter}; echo '{{\"torch_version\": \"2\", \"cuda_available\": true, "
                                  "\"cuda_devices\": [\"H200\"], \"npu_error\": \"torch_npu is not installed\"}'")
    first = detect(python=fake)
    assert first.picked == "cuda" and first.devices["cuda"] == ["H200"]
    detect(python=fake)
    monkeypatch.setattr(be, "_CACHE", {})
    assert detect(python=fake).picked == "cuda"  # from the disk cache
    assert counter.read_text().count("x") == 1
    detect(python=fake, refresh=True)
    assert counter.read_text().count("x") == 2
    cache_files = list((tmp_path / "cache" / "helix").glob("backend-probe-*.json"))
    assert len(cache_files) == 1
    BackendReport.model_validate_json(cache_files[0].read_text())
    cache_files[0].write_text("{ damaged")  # a damaged cache file means: probe again
    monkeypatch.setattr(be, "_CACHE", {})
    assert detect(python=fake).picked == "cuda"
    assert counter.read_text().count("x") == 3


@pytest.mark.slow
def test_real_probe_here_and_helix_backend_cli(tmp_path: Path) -> None:
    """The real stack of this machine (torch CPU build): cpu, with a reason for each other."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c"), "PYTHONPATH": str(ROOT)}
    env.pop("HELIX_BACKEND", None)
    out = subprocess.run([sys.executable, "-m", "helix_engine", "backend", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    import importlib.util

    torch_here = importlib.util.find_spec("torch") is not None
    if torch_here:
        assert data["torch_version"]
    for name in ("npu", "cuda", "cpu"):
        if name != data["selected"]:
            assert data["reasons"][name]
    text = subprocess.run([sys.executable, "-m", "helix_engine", "backend"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0
    assert f"backend: {data['selected']}" in text.stdout
    assert "not picked:" in text.stdout
    assert all(len(line) <= 80 for line in text.stdout.splitlines())


def test_hung_probe_is_killed_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(be, "PROBE_TIMEOUT_S", 1.5)
    pidfile = tmp_path / "child.pid"
    fake = _fake_python(tmp_path, f"sleep 300 & echo $! > {pidfile}; wait")
    report = detect(python=fake, refresh=True)
    assert report.picked == "cpu" and "did not finish" in (report.probe_error or "")
    import time

    from helix_engine.jobs.procs import pid_alive

    if not pidfile.exists():  # killed before it could start its child: nothing can be left
        return
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:  # SIGKILL is delivered asynchronously
        time.sleep(0.02)
    assert not pid_alive(pid)
