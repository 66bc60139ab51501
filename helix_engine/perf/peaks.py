"""The device peaks a roofline fraction is taken of: measured once per device, else a table.

Why two sources: a datasheet peak is never reached (on an H200 a plain copy reads 4224 GB/s of
the 4800 the datasheet gives), so "86% of peak" means more when the peak was measured on this
box. ``helix calibrate --peak`` (eval/peak.py) measures a large device-to-device copy and
torch.matmul throughput and stores them in ``.helix/peaks.json`` keyed by device name; a
measured figure beats the table, and every figure says which one it is (`Peak.source`).

The table holds public datasheet figures (dense, no sparsity) for common parts; names are
matched against the device name a perf record carries (``record.device``: what
``torch.cuda.get_device_name`` / ``torch.npu.get_device_name`` returned).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PEAKS_FILE = "peaks.json"
SHOWN_PATH = ".helix/peaks.json"
#: The compute dtypes a peak is given for (torch.matmul's fp32 is CUDA-core fp32: no TF32).
DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")


@dataclass(frozen=True)
class TableEntry:
    """One part's datasheet peaks: HBM/DRAM bandwidth (GB/s) and dense TFLOP/s per dtype."""

    part: str
    pattern: str  # regex, searched case-insensitively in the device name
    gbps: float
    tflops: dict[str, float]
    cite: str
    approximate: bool = False  # a figure Huawei publishes only for the board, or not per die
    cache_mb: float | None = None  # the last on-chip cache (L2): a working set below it can beat the DRAM roof


def _half(fp16: float, fp32: float | None) -> dict[str, float]:
    out = {"fp16": fp16, "bf16": fp16}
    if fp32 is not None:
        out["fp32"] = fp32
    return out


#: Most specific pattern first (H200 NVL before H200, A100 80GB before A100). L2 sizes from the
#: architecture whitepapers: 50 MB on GH100 parts (H100, H200), 40 MB A100, 96 MB L40S (AD102),
#: 72 MB RTX 4090; none given for Ascend parts here.
TABLE: tuple[TableEntry, ...] = (
    # NVIDIA H200 NVL datasheet: 4.8 TB/s HBM3e; FP16/BF16 Tensor 1,671 TFLOPS with sparsity (835.5 dense); FP32 60
    TableEntry("NVIDIA H200 NVL", r"H200\s*NVL", 4800.0, _half(835.5, 60.0), "NVIDIA H200 NVL datasheet",
               cache_mb=50.0),
    # NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; FP16/BF16 Tensor 1,979 TFLOPS with sparsity (989.5 dense); FP32 67
    TableEntry("NVIDIA H200 SXM", r"H200", 4800.0, _half(989.5, 67.0), "NVIDIA H200 SXM datasheet",
               cache_mb=50.0),
    # NVIDIA H100 NVL datasheet: 3.9 TB/s; FP16 Tensor 1,671 TFLOPS with sparsity (835.5 dense); FP32 60
    TableEntry("NVIDIA H100 NVL", r"H100\s*NVL", 3900.0, _half(835.5, 60.0), "NVIDIA H100 NVL datasheet",
               cache_mb=50.0),
    # NVIDIA H100 PCIe datasheet: 2.0 TB/s HBM2e; FP16 Tensor 1,513 TFLOPS with sparsity (756.5 dense); FP32 51
    TableEntry("NVIDIA H100 PCIe", r"H100\s*PCIe", 2000.0, _half(756.5, 51.0), "NVIDIA H100 PCIe datasheet",
               cache_mb=50.0),
    # NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3; FP16 Tensor 1,979 TFLOPS with sparsity (989.5 dense); FP32 67
    TableEntry("NVIDIA H100 SXM", r"H100", 3350.0, _half(989.5, 67.0), "NVIDIA H100 SXM datasheet",
               cache_mb=50.0),
    # NVIDIA A100 datasheet: 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB 1,555 GB/s; FP16 Tensor 312; FP32 19.5
    TableEntry("NVIDIA A100 80GB SXM", r"A100.*SXM.*80|A100.*80.*SXM", 2039.0, _half(312.0, 19.5),
               "NVIDIA A100 datasheet", cache_mb=40.0),
    TableEntry("NVIDIA A100 80GB PCIe", r"A100.*80", 1935.0, _half(312.0, 19.5), "NVIDIA A100 datasheet",
               cache_mb=40.0),
    TableEntry("NVIDIA A100 40GB", r"A100", 1555.0, _half(312.0, 19.5), "NVIDIA A100 datasheet", cache_mb=40.0),
    # NVIDIA L40S datasheet: 864 GB/s GDDR6; FP16/BF16 Tensor 733 TFLOPS with sparsity (362.05 dense); FP32 91.6
    TableEntry("NVIDIA L40S", r"L40S", 864.0, _half(362.05, 91.6), "NVIDIA L40S datasheet", cache_mb=96.0),
    # NVIDIA Ada whitepaper (RTX 4090): 1,008 GB/s GDDR6X; FP16 Tensor with FP32 accumulate 165.2 dense; FP32 82.6
    TableEntry("NVIDIA GeForce RTX 4090", r"RTX\s*4090", 1008.0, _half(165.2, 82.6),
               "NVIDIA Ada Lovelace architecture whitepaper", cache_mb=72.0),
    # Huawei Atlas 800T A2 / 900 A2 material: Ascend 910B, 64 GB HBM2e at 1.6 TB/s (910B4: 32 GB at 0.8 TB/s);
    # FP16 ~414 (B1), ~376 (B2), ~313 (B3), ~280 (B4) TFLOPS. Huawei does not publish one datasheet per bin,
    # and gives no fp32 cube figure: measure with `helix calibrate --peak`.
    TableEntry("Ascend 910B1", r"910B1", 1600.0, _half(414.0, None), "Huawei Atlas A2 material", True),
    TableEntry("Ascend 910B2", r"910B2", 1600.0, _half(376.0, None), "Huawei Atlas A2 material", True),
    TableEntry("Ascend 910B3", r"910B3", 1600.0, _half(313.0, None), "Huawei Atlas A2 material", True),
    TableEntry("Ascend 910B4", r"910B4", 800.0, _half(280.0, None), "Huawei Atlas A2 material", True),
    # Huawei Atlas 900 A3 SuperPoD material: Ascend 910C, 128 GB HBM at 3.2 TB/s, ~800 TFLOPS FP16 per package of
    # two dies; torch_npu shows each die as a device (Ascend910_93xx), so the per-device figure is half.
    TableEntry("Ascend 910C (A3), one die", r"910_?93|910C", 1600.0, _half(400.0, None),
               "Huawei Atlas 900 A3 material (per die)", True),
    # Huawei Atlas 300I Pro datasheet: Ascend 310P, 24 GB LPDDR4X at 204.8 GB/s, 70 TFLOPS FP16 (140 TOPS INT8)
    TableEntry("Ascend 310P", r"310P", 204.8, {"fp16": 70.0}, "Huawei Atlas 300I Pro datasheet"),
)


def table_entry(device_name: str | None) -> TableEntry | None:
    """The table's entry for a device name (first matching pattern), or None."""
    if not device_name:
        return None
    for entry in TABLE:
        if re.search(entry.pattern, device_name, re.IGNORECASE):
            return entry
    return None


# ----------------------------------------------------------------------- measured peaks


class MeasuredPeak(BaseModel):
    """One device's measured peaks (``helix calibrate --peak``)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    device: str
    backend: str
    measured_at: str
    # a peak is a positive finite number: a crafted 0, NaN or inf would divide every fraction
    copy_gbps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    matmul_tflops: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    copy_bytes: int | None = None  # bytes one copy moves (read + write)
    matmul_n: dict[str, int] = Field(default_factory=dict)  # square size per dtype
    method: str = ""
    job_id: str | None = None


class PeaksFile(BaseModel):
    """``.helix/peaks.json`` (schema_version 1): measured peaks by device name."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    schema_version: Literal[1] = 1
    devices: dict[str, MeasuredPeak] = Field(default_factory=dict)


def path_for(workspace: Path) -> Path:
    from helix_engine.workspace import layout

    return Path(workspace) / layout.HELIX_DIR / PEAKS_FILE


def load(workspace: Path | None) -> tuple[PeaksFile, str | None]:
    """The workspace's measured peaks (empty when none), and why an existing file is unusable."""
    if workspace is None:
        return PeaksFile(), None
    path = path_for(workspace)
    if not path.is_file():
        return PeaksFile(), None
    from helix_engine.workspace.reading import read_text_safe

    text, problem = read_text_safe(path, Path(workspace))
    if text is None:
        return PeaksFile(), f"{SHOWN_PATH} is unreadable ({problem.message if problem else 'empty'})"
    try:
        return PeaksFile.model_validate_json(text), None
    except (ValidationError, ValueError):
        return PeaksFile(), f"{SHOWN_PATH} is not a peaks file; run `helix calibrate --peak` again"


def store(workspace: Path, measured: MeasuredPeak) -> Path:
    """Add (or replace) one device's measured peaks; other devices' entries are kept."""
    from helix_engine.workspace.files import atomic_write_text

    current, _ = load(workspace)
    current.devices[measured.device] = measured
    path = path_for(workspace)
    atomic_write_text(path, current.model_dump_json(indent=1) + "\n")
    return path


# ------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Peak:
    """One peak figure and where it came from (shown beside every fraction)."""

    value: float
    source: Literal["measured", "table"]
    label: str  # e.g. "copy bandwidth measured by helix calibrate --peak", "NVIDIA H200 SXM datasheet"

    @property
    def short(self) -> str:
        return "measured" if self.source == "measured" else "datasheet"


@dataclass
class DevicePeaks:
    """The peaks used for one device: bandwidth and compute per dtype, each with its source."""

    device: str | None
    gbps: Peak | None = None
    tflops: dict[str, Peak] = field(default_factory=dict)
    note: str | None = None  # why no peak, or why the measured file was not used
    cache_bytes: float | None = None  # the part's L2 (table): a smaller working set can read faster than DRAM

    @property
    def known(self) -> bool:
        return self.gbps is not None or bool(self.tflops)


def peaks_for(device_name: str | None, workspace: Path | None = None) -> DevicePeaks:
    """The peaks of ``device_name``: measured (``.helix/peaks.json``) where present, else the
    table; a figure neither has is absent and ``note`` says what to run."""
    out = DevicePeaks(device_name)
    measured_file, why = load(workspace)
    measured = measured_file.devices.get(device_name or "")
    entry = table_entry(device_name)
    if measured is not None and measured.copy_gbps:
        out.gbps = Peak(measured.copy_gbps, "measured", f"copy bandwidth measured {measured.measured_at[:10]}")
    elif entry is not None:
        out.gbps = Peak(entry.gbps, "table", f"{entry.part} {'approx. ' if entry.approximate else ''}datasheet")
    for dtype in DTYPES:
        value = measured.matmul_tflops.get(dtype) if measured is not None else None
        if value:
            out.tflops[dtype] = Peak(value, "measured", f"{dtype} torch.matmul measured")
        elif entry is not None and dtype in entry.tflops:
            out.tflops[dtype] = Peak(entry.tflops[dtype], "table",
                                     f"{entry.part} {dtype} {'approx. ' if entry.approximate else ''}datasheet")
    if entry is not None and entry.cache_mb:
        out.cache_bytes = entry.cache_mb * 1e6
    if not out.known:
        out.note = why or (f"no peak known for {device_name or 'this device'}: run `helix calibrate --peak` "
                           "to measure it")
    return out
