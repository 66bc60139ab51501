"""Roofline figures (perf/roofline.py, perf/peaks.py): the arithmetic, the datasheet table, measured
peaks beating it, the harness declaration, compare-perf's block and the routing it decides."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.eval import loader
from helix_engine.eval.loader import HarnessContractError
from helix_engine.perf import peaks, roofline
from helix_engine.perf.artifact import read_perf
from helix_engine.profile.report import build_report


def _record(label: str, kernel_us: float, *, nbytes: float | None = None, flops: float | None = None,
            device: str = "NVIDIA H200", dtype: str = "fp16") -> dict:
    rec = {"case_label": label, "kernel_names": ["k"], "kernel_source": "operator", "kernel_avg_time_us": kernel_us,
           "ops": [], "total_op_avg_time_us": kernel_us, "error_message": None, "case_wall_clock_seconds": 0.1,
           "bench_mode": "torch-profiler", "device": device, "backend": "cuda"}
    work = {k: v for k, v in (("bytes", nbytes), ("flops", flops)) if v is not None}
    if work:
        rec["roofline"] = {**work, "dtype": dtype}
    return rec


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def _measured(ws: Path, device: str = "NVIDIA H200", copy_gbps: float = 4224.0) -> None:
    peaks.store(ws, peaks.MeasuredPeak(device=device, backend="cuda", measured_at="2026-07-20T10:00:00Z",
                                       copy_gbps=copy_gbps, matmul_tflops={"fp16": 700.0}))


# ------------------------------------------------------------------------------ arithmetic


def test_known_bytes_and_time_give_the_exact_figures() -> None:
    assert roofline.achieved_gbps(3_622_000, 1.0) == 3622.0  # 3.622 MB in 1 µs
    assert roofline.achieved_tflops(2 * 4096**3, 200.0) == pytest.approx(687.194767, rel=1e-9)
    records, problems = read_perf_text([_record("a", 2.0, nbytes=8_000_000, flops=4e6)])
    assert problems == []
    fig = roofline.for_record(records[0])
    assert fig is not None and fig.time_us == 2.0 and fig.metric == "kernel"
    assert fig.gbps == 4000.0 and fig.tflops == 2.0
    assert fig.bw_peak is not None and fig.bw_peak.value == 4800.0 and fig.bw_peak.source == "table"
    assert fig.bw_fraction == pytest.approx(4000 / 4800) and fig.compute_fraction == pytest.approx(2 / 989.5)
    assert fig.text() == "4000 GB/s (83% of 4800 GB/s, datasheet) · 2 TFLOP/s (0.2% of 990 TFLOP/s, datasheet)"
    assert roofline.for_record(read_perf_text([_record("b", 2.0)])[0][0]) is None  # nothing declared


def read_perf_text(records: list[dict]):
    from helix_engine.perf.artifact import parse_perf_text

    return parse_perf_text("".join(json.dumps(r) + "\n" for r in records), "x_perf.txt")


@pytest.mark.parametrize(("name", "part", "gbps"), [
    ("NVIDIA H200", "NVIDIA H200 SXM", 4800.0), ("NVIDIA H200 NVL", "NVIDIA H200 NVL", 4800.0),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 3350.0), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 2000.0),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM", 2039.0), ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe", 1935.0),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB", 1555.0), ("NVIDIA L40S", "NVIDIA L40S", 864.0),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 1008.0), ("Ascend910B3", "Ascend 910B3", 1600.0),
    ("Ascend910B4", "Ascend 910B4", 800.0), ("Ascend910_9392", "Ascend 910C (A3), one die", 1600.0),
    ("Ascend310P3", "Ascend 310P", 204.8),
])
def test_the_table_matches_device_names(name: str, part: str, gbps: float) -> None:
    entry = peaks.table_entry(name)
    assert entry is not None and (entry.part, entry.gbps) == (part, gbps)


def test_unknown_device_has_no_peak_and_says_what_to_run(tmp_path: Path) -> None:
    assert peaks.table_entry("AMD EPYC 7B13") is None and peaks.table_entry(None) is None
    got = peaks.peaks_for("AMD EPYC 7B13", tmp_path)
    assert not got.known and got.note is not None and "helix calibrate --peak" in got.note


def test_a_measured_peak_beats_the_table_and_says_so(tmp_path: Path) -> None:
    _measured(tmp_path)
    _measured(tmp_path, device="NVIDIA L40S", copy_gbps=800.0)  # a second device keeps the first
    got = peaks.peaks_for("NVIDIA H200", tmp_path)
    assert got.gbps is not None and (got.gbps.value, got.gbps.source) == (4224.0, "measured")
    assert got.tflops["fp16"].source == "measured" and got.tflops["fp32"].source == "table"  # fp32 not measured
    assert peaks.peaks_for("NVIDIA H200", None).gbps.value == 4800.0  # type: ignore[union-attr]
    (tmp_path / ".helix" / "peaks.json").write_text("{not json")
    broken = peaks.peaks_for("NVIDIA H200", tmp_path)
    assert broken.gbps is not None and broken.gbps.source == "table"


# ------------------------------------------------------------------------------ judgement


def test_the_fraction_decides_the_bound_and_names_the_measurement(tmp_path: Path) -> None:
    _measured(tmp_path)
    work = roofline.CaseWork(bytes=3_622_000, dtype="fp16")
    on_box = roofline.figures(work, 1.0, "kernel", peaks.peaks_for("NVIDIA H200", tmp_path))
    verdict = roofline.judge(on_box)
    assert verdict is not None and verdict.bound == "memory-bound"
    assert "3622 GB/s = 86% of 4224 GB/s (copy bandwidth measured 2026-07-20)" in verdict.evidence
    sheet = roofline.judge(roofline.figures(work, 1.0, "kernel", peaks.peaks_for("NVIDIA H200", None)))
    assert sheet is not None and sheet.bound == "memory-bound" and "75% of 4800 GB/s (NVIDIA H200 SXM" in sheet.evidence
    middle = roofline.figures(work, 2.0, "kernel", peaks.peaks_for("NVIDIA H200", tmp_path))  # 43%
    assert roofline.judge(middle) is None
    slow = roofline.judge(roofline.figures(work, 10.0, "kernel", peaks.peaks_for("NVIDIA H200", tmp_path)))
    assert slow is not None and slow.bound == "latency-bound" and "9% of the bandwidth peak" in slow.evidence
    mm = roofline.CaseWork(bytes=1e6, flops=2 * 8192**3, dtype="fp16")
    compute = roofline.judge(roofline.figures(mm, 1600.0, "kernel", peaks.peaks_for("NVIDIA H200", tmp_path)))
    assert compute is not None and compute.bound == "compute-bound" and "of 700 TFLOP/s" in compute.evidence
    assert roofline.judge(roofline.figures(work, 1.0, "kernel", peaks.peaks_for("AMD EPYC", None))) is None


# --------------------------------------------------------------------------- declaration


BENCH = textwrap.dedent('''\
    # kernels: k
    def build_operator_api(m):
        return m.op
    def build_bench_cases():
        return [{"id": "keys", "bytes": 4096, "flops": 0, "dtype": "bf16"}, {"id": "plain"}]
    def build_bench_case_fn(api, case):
        return lambda: None
''')


def _harness(tmp_path: Path, bench: str) -> loader.BenchHarness:
    (tmp_path / "op.py").write_text("import triton\n@triton.jit\ndef k(x):\n    pass\ndef op():\n    pass\n")
    (tmp_path / "bench_op.py").write_text(bench)
    return loader.load_bench_harness(tmp_path / "bench_op.py", tmp_path / "op.py")


def test_cases_declare_work_by_keys_or_by_the_hook(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    keys = _harness(tmp_path / "a", BENCH)
    assert keys.cases[0].work == roofline.CaseWork(bytes=4096, flops=0, dtype="bf16")
    assert keys.cases[1].work is None
    (tmp_path / "b").mkdir()
    hooked = _harness(tmp_path / "b", BENCH + textwrap.dedent('''\
        import torch
        def build_bench_case_work(case):
            return {"bytes": 2 * 8 * 64 * 4, "dtype": torch.float32, "kernel_bytes": {"k": 100}}
    '''))
    assert hooked.cases[1].work == roofline.CaseWork(bytes=4096, dtype="fp32", kernel_bytes={"k": 100})


@pytest.mark.parametrize("bad", ['"bytes": -1', '"flops": "many"', '"bytes": float("nan")', '"bytes": True'])
def test_a_malformed_declaration_is_a_contract_error_naming_the_case(tmp_path: Path, bad: str) -> None:
    with pytest.raises(HarnessContractError, match=r"build_bench_cases: case 'keys': .* declare a number ≥ 0"):
        _harness(tmp_path, BENCH.replace('"bytes": 4096, "flops": 0', bad))


# ------------------------------------------------------------------------------ compare-perf


def test_compare_perf_prints_the_roofline_after_upstreams_unchanged_block(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    (ws / ".helix").mkdir(parents=True)
    _measured(ws)
    plain_b = _write(tmp_path / "plain" / "b_perf.txt", [_record("a", 2.0), _record("b", 40.0)])
    plain_c = _write(tmp_path / "plain" / "c_perf.txt", [_record("a", 1.0), _record("b", 20.0)])
    assert main(["compare-perf", "--baseline", str(plain_b), "--compare", str(plain_c), "--no-ci"]) == 0
    upstream = capsys.readouterr().out
    b = _write(ws / "baseline" / "op_perf.txt", [_record("a", 2.0, nbytes=3_622_000), _record("b", 40.0, nbytes=3_622_000)])
    c = _write(ws / "opt-round-1" / "opt_op_perf.txt",
               [_record("a", 1.0, nbytes=3_622_000), _record("b", 20.0, nbytes=3_622_000)])
    assert main(["compare-perf", "--baseline", str(b), "--compare", str(c), "--no-ci"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(upstream)  # upstream's block, byte for byte, then ours
    assert out[len(upstream):].splitlines() == [
        "Roofline (bytes/flops the bench cases declare ÷ kernel time; % of the peak below):",
        "  latency-a: baseline 1811 GB/s 43%, compare 3622 GB/s 86% (memory-bound)",
        "  latency-b:",
        "    baseline 90.5 GB/s 2% (latency-bound)",
        "    compare 181 GB/s 4% (latency-bound)",
        "Peak of NVIDIA H200: 4224 GB/s (copy bandwidth measured 2026-07-20)",
    ]
    assert main(["compare-perf", "--baseline", str(b), "--compare", str(c), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    case = data["roofline"][0]["cases"][0]
    assert case["compare"]["gbps"] == 3622.0 and case["compare"]["bound"] == "memory-bound"
    assert case["compare"]["peak_gbps_source"] == "measured"
    assert case["baseline"]["bw_fraction"] == pytest.approx(1811 / 4224, rel=1e-5)
    records, _ = read_perf(c)
    assert records[0].model_extra and records[0].model_extra["roofline"]["bytes"] == 3_622_000  # kept on read


# ---------------------------------------------------------------------------------- routing


def _trace_dir(folder: Path, backend: str, kernel_us: float, work: dict) -> Path:
    folder.mkdir(parents=True)
    cat, name = ("user_annotation", "triton:softmax_kernel") if backend == "cpu" else ("kernel", "softmax_kernel")
    events = [{"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 7, "ts": 10 * i, "dur": kernel_us}
              for i in range(4)]
    (folder / "trace.json").write_text(json.dumps({"traceEvents": events}))
    (folder / "profile-manifest.json").write_text(json.dumps({
        "backend": backend, "device": "NVIDIA H200", "case_id": "c", "repeats": 4, "trace_file": "trace.json",
        "kernel_names": ["softmax_kernel"], "work": work}))
    return folder


def test_routing_is_decided_by_the_fraction_and_says_which_measurement(tmp_path: Path) -> None:
    report = build_report(_trace_dir(tmp_path / "at-roof", "cuda", 1.0, {"bytes": 3_622_000, "dtype": "fp16"}))
    assert report.bound == "memory-bound" and report.bound_analysis["decided_by"] == "roofline"
    assert report.symptoms[0]["symptom"] == "at-bandwidth-roof"
    assert "by measurement: achieved 3622 GB/s = 75% of 4800 GB/s (NVIDIA H200 SXM datasheet)" in \
        report.symptoms[0]["evidence"]
    assert report.suggested_patterns[0]["symptom_card"] == "memory-bound"
    assert all(p["pattern_file"] for p in report.suggested_patterns[0]["patterns"])
    text = report.to_markdown()
    assert "## Roofline (per call, over 4 profiled steps)" in text
    assert "- `softmax_kernel`: 3622000 bytes (case bytes) in 1.000 µs: 3622 GB/s (75% of 4800 GB/s, datasheet)" in text

    slow = build_report(_trace_dir(tmp_path / "slow", "cuda", 50.0, {"bytes": 3_622_000}))
    assert slow.bound == "unknown (no hardware counters)" and slow.symptoms[0]["symptom"] == "far-below-roofs"
    assert slow.suggested_patterns[0]["symptom_card"] == "launch-bound"

    middle = build_report(_trace_dir(tmp_path / "middle", "cuda", 2.0, {"bytes": 3_622_000}))
    assert middle.roofline["operator"]["bound"] is None and middle.symptoms == []

    cpu = build_report(_trace_dir(tmp_path / "cpu", "cpu", 1.0, {"bytes": 3_622_000}))
    assert cpu.symptoms == [] and "not used" in cpu.roofline["routing"]


# ------------------------------------------------------------------------------- examples


@pytest.mark.parametrize("name", ["softmax", "layernorm", "matmul"])
def test_the_examples_declare_their_work_from_shapes_and_dtypes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_DEVICE", "cuda")  # the device-sized cases (only shapes are read, nothing runs)
    bench = loader.import_file(Path(__file__).resolve().parents[2] / "examples" / name / f"bench_{name}.py",
                               f"_roofline_bench_{name}")
    for case in bench.build_bench_cases():
        work = roofline.case_work(bench, case)
        assert work is not None and work.dtype in ("fp16", "bf16", "fp32")
        elt = {"fp16": 2, "bf16": 2, "fp32": 4}[work.dtype]
        if name == "matmul":
            m, n, k = case["mnk"]
            assert (work.flops, work.bytes) == (2 * m * n * k, (m * k + k * n + m * n) * elt)
        else:
            rows, cols = case["shape"]
            extra = 2 * cols * elt + 2 * rows * 4 if name == "layernorm" else 0
            assert work.bytes == 2 * rows * cols * elt + extra and work.flops is None
    if name == "softmax":  # the baseline's three kernels move more than the operator must
        assert set(work.kernel_bytes) == {"row_max_kernel", "exp_sum_kernel", "normalize_kernel"}
        assert sum(work.kernel_bytes.values()) > work.bytes


def test_above_the_copy_peak_names_the_l2_when_the_working_set_fits() -> None:
    """On the H200 the softmax round-1 case fp32_4096x1024 (32 MB moved) read 5625 GB/s against
    a measured copy peak of 4230 GB/s (133%): its input stays in the 50 MB L2 between calls."""
    from helix_engine.perf.peaks import DevicePeaks, Peak, peaks_for
    from helix_engine.perf.roofline import CaseWork, figures, judge

    assert peaks_for("NVIDIA H200").cache_bytes == 50e6
    peaks = DevicePeaks("NVIDIA H200", gbps=Peak(4230.0, "measured", "copy bandwidth measured"), cache_bytes=50e6)
    fits = figures(CaseWork(bytes=4096 * 1024 * 4 * 2), 5.96538, "kernel", peaks)
    assert fits is not None and fits.bw_fraction is not None and fits.bw_fraction > 1.3
    verdict = judge(fits)
    assert verdict is not None and verdict.bound == "memory-bound"
    assert verdict.caveat == "above the copy peak: the working set (33.6 MB) fits the 50 MB L2"
    assert verdict.text == "memory-bound, above the copy peak: the working set (33.6 MB) fits the 50 MB L2"
    assert "times the cache, not DRAM" in verdict.evidence
    # a working set larger than the L2 that still reads above the peak: the declared bytes are suspect
    big = figures(CaseWork(bytes=200e6), 200e6 / 4500e3, "kernel", peaks)
    big_verdict = judge(big)
    assert big_verdict is not None and big_verdict.caveat is not None and "declared bytes" in big_verdict.caveat
    # at 94% of the peak there is nothing to explain
    under = judge(figures(CaseWork(bytes=200e6), 200e6 / (0.94 * 4230e3), "kernel", peaks))
    assert under is not None and under.caveat is None and under.text == "memory-bound"


@pytest.mark.parametrize("bad", ['0', '-5', 'NaN', 'Infinity', '"fast"'])
def test_a_crafted_peaks_file_is_refused_not_divided_by(tmp_path: Path, bad: str) -> None:
    """.helix/peaks.json is workspace data: a zero, negative, NaN or infinite peak is not a peak."""
    from helix_engine.perf.peaks import peaks_for

    (tmp_path / ".helix").mkdir()
    (tmp_path / ".helix" / "peaks.json").write_text(
        '{"schema_version": 1, "devices": {"NVIDIA H200": {"device": "NVIDIA H200", "backend": "cuda", '
        f'"measured_at": "2026-12-01", "copy_gbps": {bad}, "matmul_tflops": {{"fp16": {bad}}}}}}}}}')
    peaks = peaks_for("NVIDIA H200", tmp_path)
    assert peaks.gbps is not None and peaks.gbps.source == "table" and peaks.gbps.value == 4800.0
    assert peaks.tflops["fp16"].source == "table"
