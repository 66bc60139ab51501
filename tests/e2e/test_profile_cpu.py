"""End to end on the cpu backend: profile-bench and ir capture of a tiny Triton kernel, as jobs,
through the CLI in a subprocess (as an agent would call them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

OPERATOR = '''import torch
import triton
import triton.language as tl


@triton.jit
def _twice(x):
    return x * 2.0


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _twice(x) + y, mask=m)


def scale_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    return out
'''

BENCH = '''# api-name: scale_add
# api-kind: triton-wrapper
# kernels: scale_add_kernel
import torch
from helix_engine.harness import device


def build_operator_api(m):
    return m.scale_add


def build_bench_cases():
    return [{"id": "n256", "n": 256, "warmup": 1, "repeats": 3}, {"id": "n1000", "n": 1000}]


def build_bench_case_fn(api, case):
    torch.manual_seed(0)
    x = torch.randn(case["n"], device=device())
    y = torch.randn(case["n"], device=device())
    return lambda: api(x, y)
'''


def helix(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HELIX_BACKEND="cpu")
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "scale_add.py").write_text(OPERATOR)
    (tmp_path / "bench_scale_add.py").write_text(BENCH)
    return tmp_path


@pytest.mark.slow
def test_profile_bench_cpu_end_to_end(workspace: Path) -> None:
    run = helix("profile-bench", "--operator-file", "scale_add.py", "--case-id", "n256", cwd=workspace)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Return code: 0" and lines[1].startswith("Profile directory: ")
    prof_dir = Path(lines[1].removeprefix("Profile directory: "))
    assert prof_dir.parent == workspace / "profile" and prof_dir.name.startswith("PROF_n256_")
    assert "| scale_add_kernel | interpreter | 3 |" in run.stdout  # 3 active steps, one launch each
    assert "CPU time of the Triton interpreter" in run.stdout
    manifest = json.loads((prof_dir / "profile-manifest.json").read_text())
    assert manifest["backend"] == "cpu" and manifest["repeats"] == 3
    again = helix("profile-report", "--profile-dir", "profile", "--json", cwd=workspace)
    data = json.loads(again.stdout)
    assert data["target_operator"] == "scale_add_kernel" and data["op_summary"]["count"] == 3
    assert data["bound_analysis"]["classification"] == "unknown (no hardware counters)"
    jobs = list((workspace / ".helix" / "jobs").iterdir())
    job = json.loads((jobs[0] / "job.json").read_text())
    assert job["kind"] == "profile" and job["status"] == "passed"


@pytest.mark.slow
def test_profile_bench_reports_user_errors(workspace: Path) -> None:
    run = helix("profile-bench", "--operator-file", "scale_add.py", "--case-id", "nope", cwd=workspace)
    assert run.returncode == 1
    assert "Return code: 1" in run.stdout and "case 'nope' is not in bench_scale_add.py" in run.stdout
    # said once, as a sentence: not again as the child's exception line, no class name in front
    assert run.stdout.count("case 'nope' is not in") == 1 and "HelixError" not in run.stdout
    missing = helix("profile-bench", "--operator-file", "other.py", "--case-id", "n256", cwd=workspace)
    assert missing.returncode == 1 and "does not exist" in missing.stderr


@pytest.mark.slow
def test_ir_capture_cpu_compiles_for_sm90_without_a_gpu(workspace: Path) -> None:
    run = helix("ir", "capture", "--ir-dir", "ir", "--operator-file", "scale_add.py", "--case-id", "n256",
                "--json", cwd=workspace)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["label"].startswith("compiled for sm_90 without a GPU")
    (kernel,) = data["kernels"]
    assert kernel["name"] == "scale_add_kernel"
    assert {"ttir", "ttgir", "llir", "ptx"} <= set(kernel["stages"])
    meta = kernel["metadata"]
    assert meta["num_warps"] == 4 and meta["shared"] == 0 and meta["n_regs"] > 0
    assert meta["signature"]["n"] == "i32" and meta["signature"]["x_ptr"] == "*fp32"
    ptx = (workspace / "ir" / "scale_add_kernel" / "scale_add_kernel.ptx").read_text()
    assert ".target sm_90" in ptx and "ld.global" in ptx
    listing = helix("ir", "list-stages", "--ir-dir", "ir", "--json", cwd=workspace)
    names = [s["stage"] for s in json.loads(listing.stdout)["stages"]]
    assert names[1:] == [f"scale_add_kernel/scale_add_kernel.{s}" for s in ("ttir", "ttgir", "llir", "ptx")]
    again = helix("ir", "capture", "--ir-dir", "ir", "--operator-file", "scale_add.py", cwd=workspace)
    assert again.returncode == 1 and "already exists" in again.stderr


HANG = OPERATOR.replace('''def scale_add(x, y):
    out = torch.empty_like(x)''', '''def scale_add(x, y):
    import time
    while True:  # a re-profile of a broken round: it never returns
        time.sleep(0.05)
    out = torch.empty_like(x)''')


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_cancelled_profile_and_timed_out_ir_capture_leave_nothing(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed run never leaves a folder that profile-report's "newest run" or list-stages
    would read, never touches the previous profile, and leaves no staging folder behind."""
    import threading
    import time

    from helix_engine.ir.capture import capture_ir
    from helix_engine.jobs.registry import list_jobs
    from helix_engine.jobs.runner import cancel_job
    from helix_engine.profile.bench import profile_bench

    monkeypatch.setenv("HELIX_BACKEND", "cpu")
    good = workspace / "profile" / "PROF_n256_1700000000000"
    good.mkdir(parents=True)
    (good / "trace.json").write_text('{"traceEvents": []}')
    (good / "profile-manifest.json").write_text('{"backend": "cpu", "trace_file": "trace.json"}')
    before = _tree(workspace / "profile")
    (workspace / "scale_add.py").write_text(HANG)

    def cancel_when_started(event: dict) -> None:
        if event.get("event") != "case_started":
            return

        def cancel() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                running = [j for j in list_jobs(workspace) if j.status == "running"]
                if running:
                    cancel_job(workspace, running[0].id, grace_s=1.0)
                    return
                time.sleep(0.05)

        threading.Thread(target=cancel).start()

    out = profile_bench(workspace / "scale_add.py", "n256", on_event=cancel_when_started)
    assert out.return_code == 1 and out.profile_dir is None and out.report is None
    assert "cancelled" in (out.message or "")
    assert [j.status for j in list_jobs(workspace)] == ["cancelled"]
    assert _tree(workspace / "profile") == before
    assert [p.name for p in (workspace / "profile").iterdir()] == [good.name]

    monkeypatch.setenv("HELIX_PROFILE_TIMEOUT_SECONDS", "3")
    captured = capture_ir(workspace / "ir", workspace / "scale_add.py", case_id="n256")
    assert captured["return_code"] == 1 and captured["ir_dir"] is None
    assert "timed out" in captured["message"] and "no IR directory was kept" in captured["message"]
    assert not (workspace / "ir").exists()
    assert [p.name for p in workspace.iterdir() if p.name.endswith(".partial")] == []
    assert sorted(j.status for j in list_jobs(workspace)) == ["cancelled", "timeout"]
