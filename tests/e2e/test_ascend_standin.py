"""The Ascend code paths end to end against the STAND-IN for Ascend hardware, which is absent
here (issue 14, build 6): tests/fixtures/standin holds a test double of ``torch_npu`` (device
calls and the profiler API, on PYTHONPATH) and of the ``msprof`` command (on PATH). helix runs
unchanged: the npu backend is picked by its own probe, the eval, probe and profile jobs are the
real ones, the Triton kernel really runs (TRITON_INTERPRET=1, set in the environment only), and
every time comes from the real outputs recorded on an Ascend NPU in
tests/fixtures/ascend-profiler, which the doubles leave in the real tools' folder layouts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "fixtures" / "standin"
RECORDED = ROOT / "tests" / "fixtures" / "ascend-profiler"
CASE = "fp32_16x16x16"
DEVICE = "Ascend910B4 (helix test stand-in on the CPU)"
#: standalone_real_output (torch_npu, 10 steps of matmul_kernel): kernel_details per step, in order
TORCH_NPU_STEPS = [88.162, 88.522, 87.822, 89.082, 89.022, 89.122, 88.842, 89.222, 89.942, 88.682]

pytestmark = pytest.mark.slow


def _env(ws: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("HELIX_BACKEND", "HELIX_PYTHON", "HELIX_BENCH_OUTPUT_DIR", "HELIX_JOB_DIR", "HELIX_JOB_ID",
                 "HELIX_BACKEND_CACHE"):
        env.pop(name, None)
    # the backend probe's cache lives beside this module's workspace: the first command probes the
    # stand-in, the others read that probe's result (as a user's second command reads theirs),
    # and nothing of the stand-in is cached for other runs
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]), TRITON_INTERPRET="1",
               PATH=os.pathsep.join([str(STANDIN / "bin"), env.get("PATH", "")]),
               XDG_CACHE_HOME=str(ws.parent / "cache"))
    return env


def _helix(ws: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "helix_engine", *argv], cwd=ws, env=_env(ws), capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("ascend-standin") / "matmul"
    shutil.copytree(STANDIN / "workspace", ws)
    (ws / "baseline").mkdir()
    shutil.copy(ws / "matmul.py", ws / "baseline" / "matmul.py")
    return ws


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_standin_prepare_baseline_tests_benches_and_records_the_goals(ws: Path) -> None:
    """run-test's standalone check (the kernel's result against torch's matmul: it really ran, on
    helix's npu backend), then run-bench in torch-npu-profiler mode, then submit-baseline."""
    run = _helix(ws, "prepare-baseline", ".", "--backend", "npu", "--target-speedup", "1.2", "--max-rounds", "3",
                 "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    payload = json.loads(run.stdout)
    assert payload["goals"] == {"target_speedup": 1.2, "max_rounds": 3}
    state = json.loads((ws / "baseline" / "state.json").read_text())
    assert (state["bench_mode"], state["correctness_status"], state["benchmark_status"]) == (
        "torch-npu-profiler", "passed", "passed")
    (record,) = _records(ws / "baseline" / "matmul_perf.txt")
    assert record["kernel_avg_time_us"] == pytest.approx(88.842) and record["device"] == DEVICE
    goals = json.loads((ws / ".helix" / "goals.json").read_text())
    assert (goals["target_speedup"], goals["max_rounds"], goals["updated_by"]) == (1.2, 3, "prepare-baseline")


def test_standin_torch_npu_profiler_run_bench_writes_the_recorded_times(ws: Path) -> None:
    run = _helix(ws, "run-bench", "--operator-file", "matmul.py", "--json")  # auto: helix's probe picks npu
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = _records(ws / "matmul_perf.txt")
    assert (record["backend"], record["bench_mode"], record["device"]) == ("npu", "torch-npu-profiler", DEVICE)
    assert record["kernel_names"] == ["matmul_kernel"] and record["error_message"] is None
    assert record["kernel_avg_time_us"] == pytest.approx(88.842)  # 888.42 µs over 10 Step Ids
    assert record["total_op_avg_time_us"] == pytest.approx(88.842)
    assert record["ops"] == [{"op_type": "matmul_kernel", "avg_time_us": pytest.approx(88.842)}]
    assert record["samples_us"] == pytest.approx(TORCH_NPU_STEPS)
    assert record["context"]["device_id"].startswith("npu:0")


def test_standin_msprof_run_bench_writes_the_recorded_times(ws: Path) -> None:
    run = _helix(ws, "run-bench", "--operator-file", "matmul.py", "--backend", "npu", "--bench-mode", "msprof",
                 "-o", "msprof_perf.txt")
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = _records(ws / "msprof_perf.txt")
    assert (record["backend"], record["bench_mode"]) == ("npu", "msprof")
    # op_statistic_20260511093035.csv: counts 5, 2, 2 have GCD 1, so the native Avg Time(us)
    assert record["kernel_avg_time_us"] == pytest.approx(6.028)
    assert record["total_op_avg_time_us"] == pytest.approx(6.028 + 3.12 + 2.11)
    assert [op["op_type"] for op in record["ops"]] == ["matmul_kernel", "Cast", "DSARandomNormal"]
    assert not list((ws / ".helix").rglob("PROF_*"))  # msprof's output folder went with the job


def test_standin_probe_bench_screens_on_the_npu_path(ws: Path) -> None:
    run = _helix(ws, "probe-bench", "--operator-file", "matmul.py", "--baseline-operator-file", "baseline/matmul.py",
                 "--backend", "npu", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    probe = json.loads(run.stdout)
    # both sides read the same recorded profile: equal times, so no direction
    assert (probe["classification"], probe["metric_source"]) == ("inconclusive", "kernel")
    assert probe["geomean_speedup"] == pytest.approx(1.0)
    candidate = _records(Path(probe["candidate_probe_perf"]))
    assert [(r["bench_mode"], r["backend"]) for r in candidate] == [("torch-npu-profiler", "npu")]
    assert candidate[0]["kernel_avg_time_us"] == pytest.approx(88.842)


def test_standin_profile_bench_and_profile_report_give_the_recorded_numbers(ws: Path, tmp_path: Path) -> None:
    import shutil

    from helix_engine.profile.report import build_report

    run = _helix(ws, "profile-bench", "--operator-file", "matmul.py", "--case-id", CASE, "--backend", "npu", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    produced = Path(out["profile_dir"])
    assert produced.parent == ws / "profile" and produced.name.startswith(f"PROF_{CASE}_")
    (run_dir,) = [p for p in produced.iterdir() if p.is_dir()]  # torch_npu's <worker>_<pid>_<ms>_ascend_pt
    assert run_dir.name.endswith("_ascend_pt") and (run_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").is_file()
    shown = _helix(ws, "profile-report", "--profile-dir", str(produced), "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    # the recording with the manifest profile-bench wrote beside it: the launch counts per call read
    # the manifest's repeats (the case's 3; the recording itself was made over 10 steps)
    copied = tmp_path / "recorded"
    shutil.copytree(RECORDED / "standalone_real_output", copied)
    shutil.copy(produced / "profile-manifest.json", copied / "profile-manifest.json")
    recorded = build_report(copied).to_json()
    same = ("target_operator", "selection", "target_row", "op_summary", "core_type_totals", "data_movement_hotspots",
            "top_ops", "operator_type_guess", "bound_analysis", "pipeline_signals", "task_timeline_signals",
            "host_api_signals", "op_count", "total_time_us", "hotspots", "symptoms", "suggested_patterns")
    assert {k: report[k] for k in same} == {k: recorded[k] for k in same}
    assert report["source"] == "torch-npu-profiler" and report["target_operator"] == "matmul_kernel"
    assert report["total_time_us"] == pytest.approx(888.42) and out["report"]["total_time_us"] == pytest.approx(888.42)


def test_standin_ir_capture_replays_bishengir_and_its_stages_are_read(ws: Path, tmp_path: Path) -> None:
    """The npu IR path: the TRITON_DEBUG run (Triton-Ascend's dump and cmd_list lines, from the
    stand-in), the archived kernel.ttadapter.mlir, the replayed bishengir-compile (the stand-in
    on PATH) printing every pass, then list-stages and compiler-source on what it wrote."""
    from helix_engine.compiler_source.ir_terms import terms_from_ir
    from helix_engine.compiler_source.locate import locate

    ir_dir = ws / "npu-ir"
    env = {**_env(ws), "TMPDIR": str(tmp_path)}  # where the stand-in leaves Triton-Ascend's dump folder
    run = subprocess.run([sys.executable, "-m", "helix_engine", "ir", "capture", "--ir-dir", str(ir_dir),
                          "--operator-file", "matmul.py", "--backend", "npu", "--json"], cwd=ws, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    manifest = json.loads((ir_dir / "capture-manifest.json").read_text())
    original, replay = manifest["original_compile_command"], manifest["replay_compile_command"]
    assert original[0] == "bishengir-compile" and "--append-bisheng-options=-O2 -g" in original  # re-joined
    assert Path(manifest["dumped_ir_dir"]).parent == tmp_path
    assert replay[1] == str(ir_dir / "triton_dump" / "kernel.ttadapter.mlir") == manifest["archived_input"]
    assert "--bishengir-print-ir-after=hivm-plan-memory" not in replay
    assert replay[-2:] == ["--mlir-print-ir-after-all", f"--mlir-print-ir-tree-dir={ir_dir / 'bishengir_stages'}"]
    listed = _helix(ws, "ir", "list-stages", "--ir-dir", str(ir_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    stages = [s["stage"].rsplit("/", 1)[-1] for s in json.loads(listed.stdout)["stages"]]
    assert stages == ["0_canonicalize.mlir", "1_hfusion-auto-vectorize-v2.mlir", "2_convert-hfusion-to-hivm.mlir",
                      "3_hivm-plan-memory.mlir", "4_hivm-inject-sync.mlir"]
    assert (ir_dir / "all-ir.txt").read_text().count("// -----// IR Dump After ") == 5
    terms = {(t.kind, t.name) for t in terms_from_ir(ir_dir)}
    assert {("pass", "hivm-plan-memory"), ("pass", "hivm-inject-sync"), ("op", "hivm.hir.load")} <= terms
    located = locate(ROOT / "tests" / "fixtures" / "compiler_source" / "ascendnpu-ir", [n for _, n in terms])
    assert [d.label for d in located.definitions if d.kind == "pass"] == [
        'PlanMemory "hivm-plan-memory"', 'InjectSync "hivm-inject-sync"']
