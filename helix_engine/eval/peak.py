"""``helix calibrate --peak``: measure this device's copy bandwidth and matmul throughput, once.

Why: the roofline fraction (perf/roofline.py) is only as good as its peak. A datasheet figure is
never reached (on an H200 torch's copy reads 4224 GB/s of the 4800 the datasheet gives, a plain
Triton copy 4026), so a kernel measured against what a copy really reaches on this box is judged
fairly. The parent runs the child below as a job (``python -m helix_engine.eval.peak``; torch is
imported only there, on the device the job leases) and stores the figures in ``.helix/peaks.json``
under the device's name; a measured figure then beats the table (perf/peaks.py).

What is measured (best of several trials, each a batch of back-to-back calls between two
synchronizes, so launch latency overlaps and the figure is the sustained rate):
- copy: ``dst.copy_(src)`` of one large buffer; bytes moved = 2 × buffer (read + write);
- matmul: ``torch.matmul(a, b, out=c)`` of square n×n matrices per dtype; flops = 2·n³. fp32 is
  the plain fp32 path (TF32 stays off, torch's default), so it is comparable with the table.
Sizes: 1 GiB copies and n = 8192 on a device; on the CPU backend small ones (a real
measurement, for the workflow and the tests, not a figure anyone tunes against).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError

DEVICE_SIZES: dict[str, Any] = {"copy_bytes": 1 << 30, "matmul_n": 8192, "trials": 5, "copy_reps": 20,
                                "matmul_reps": 10}
CPU_SIZES: dict[str, Any] = {"copy_bytes": 32 << 20, "matmul_n": 256, "trials": 3, "copy_reps": 5,
                             "matmul_reps": 3}
DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
METHOD = ("best of {trials} trials of back-to-back calls between two synchronizes: dst.copy_(src) of "
          "{copy_mib} MiB (2× the buffer moved), torch.matmul of n×n per dtype (2n³ flops, fp32 without TF32)")
TIMEOUT_S = 600.0


# ------------------------------------------------------------------------------ child side


def _best_seconds(fn: Callable[[], Any], reps: int, trials: int, backend: Any) -> float:
    """The fastest trial's seconds per call (device events where the backend has them)."""
    fn()  # warm-up: allocation, kernel selection
    backend.synchronize()
    best = float("inf")
    for _ in range(trials):
        pair = getattr(backend, "event_pair", None)
        if callable(pair):
            start, end = pair()
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            backend.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            backend.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            backend.synchronize()
            seconds = time.perf_counter() - t0
        best = min(best, seconds / reps)
    return best


def _matmul_seconds(torch: Any, dtype: Any, n: int, dev: str, sizes: dict[str, Any], backend: Any) -> float:
    """Seconds per ``torch.matmul`` of two n×n matrices of ``dtype`` (best trial)."""
    a, b = (torch.randn((n, n), device=dev).to(dtype) for _ in range(2))
    c = torch.empty((n, n), dtype=dtype, device=dev)
    return _best_seconds(lambda: torch.matmul(a, b, out=c), int(sizes["matmul_reps"]), int(sizes["trials"]), backend)


def measure(request: dict[str, Any]) -> dict[str, Any]:
    """The child's work: returns the result the parent stores (``return_code`` 0 when the copy
    was measured; a dtype the device cannot multiply is listed under ``skipped``)."""
    from helix_engine.eval.childlib import JobEvents, setup_backend

    events = JobEvents()
    backend = setup_backend(request)
    torch = backend.import_torch()
    sizes = {**(CPU_SIZES if backend.name == "cpu" else DEVICE_SIZES), **(request.get("sizes") or {})}
    dev = backend.device_str or backend.name
    steps = 1 + len(DTYPES)
    events.case_started("copy", 0, steps)
    numel = int(sizes["copy_bytes"]) // 4
    buffers = [torch.ones(numel, dtype=torch.float32, device=dev)]
    buffers.append(torch.empty_like(buffers[0]))
    seconds = _best_seconds(lambda: buffers[1].copy_(buffers[0]), int(sizes["copy_reps"]), int(sizes["trials"]),
                            backend)
    moved = 2 * numel * 4
    copy_gbps = moved / seconds / 1e9
    buffers.clear()  # free the device memory before the matmuls
    events.case_finished("copy", {"copy_gbps": copy_gbps})
    events.progress(1, steps)
    tflops: dict[str, float] = {}
    sizes_n: dict[str, int] = {}
    skipped: dict[str, str] = {}
    torch_dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    for index, name in enumerate(DTYPES, start=2):
        events.case_started(f"matmul-{name}", index - 1, steps)
        n = int(sizes["matmul_n"])
        try:
            seconds = _matmul_seconds(torch, torch_dtypes[name], n, dev, sizes, backend)
            tflops[name] = 2 * n**3 / seconds / 1e12
            sizes_n[name] = n
        except Exception as exc:  # noqa: BLE001 - a dtype this device cannot multiply is skipped, said so
            skipped[name] = f"{type(exc).__name__}: {exc}"
        events.case_finished(f"matmul-{name}", {"tflops": tflops.get(name), "skipped": skipped.get(name)})
        events.progress(index, steps)
    try:
        device_name = backend.device_name()
    except Exception:  # noqa: BLE001
        device_name = backend.name
    return {"return_code": 0, "error": None, "device": device_name, "backend": backend.name,
            "copy_gbps": copy_gbps, "copy_bytes": moved, "matmul_tflops": tflops, "matmul_n": sizes_n,
            "skipped": skipped,
            "method": METHOD.format(trials=sizes["trials"], copy_mib=int(sizes["copy_bytes"]) >> 20)}


def _failed(request: dict[str, Any], error: str) -> dict[str, Any]:
    return {"return_code": 1, "error": error}


def main(argv: list[str] | None = None) -> int:
    from helix_engine.eval.childlib import child_main

    return child_main(argv, "python -m helix_engine.eval.peak REQUEST.json", measure, _failed)


# ----------------------------------------------------------------------------- parent side


def calibrate_peak(workspace: Path | str = ".", *, backend: str | None = None, devices: list[str] | None = None,
                   on_event: Callable[[dict[str, Any]], None] | None = None, timeout_s: float | None = None,
                   sizes: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the measurement as a job and store it in ``.helix/peaks.json``; returns the payload
    (``text``, ``exit_code``, the figures, and the datasheet figures beside them when known)."""
    from helix_engine.eval.jobrun import resolve_backend, run_child_job
    from helix_engine.perf import peaks
    from helix_engine.perf.context import now_iso

    ws = Path(workspace).expanduser().resolve()
    if not ws.is_dir():
        raise HelixError(f"{ws} is not a folder; pass the operator workspace (default: the current folder)")
    be = resolve_backend(backend)
    request: dict[str, Any] = {"action": "peak", "sizes": sizes or {}}
    run = run_child_job(ws, "calibrate-peak", "helix_engine.eval.peak", request, backend=be, cwd=ws,
                        device_pool=devices, on_event=on_event, timeout_s=timeout_s or TIMEOUT_S)
    result = run.result or {}
    if run.job.status != "passed" or int(result.get("return_code", 1)) != 0 or not result.get("copy_gbps"):
        why = result.get("error") or run.job.message or f"the job ended {run.job.status}"
        message = f"the peak measurement did not finish: {why}; {peaks.SHOWN_PATH} was left as it was"
        return {"exit_code": 1, "error": message, "job_id": run.job.id, "text": f"FAIL: {message}"}
    measured = peaks.MeasuredPeak(
        device=str(result["device"]), backend=str(result.get("backend") or be.name), measured_at=now_iso(),
        copy_gbps=float(result["copy_gbps"]), copy_bytes=int(result.get("copy_bytes") or 0),
        matmul_tflops={k: float(v) for k, v in (result.get("matmul_tflops") or {}).items()},
        matmul_n={k: int(v) for k, v in (result.get("matmul_n") or {}).items()},
        method=str(result.get("method") or ""), job_id=run.job.id)
    path = peaks.store(ws, measured)
    entry = peaks.table_entry(measured.device)
    lines = [f"Peaks of {measured.device} ({measured.backend}, job {run.job.id}):"]
    copy_gbps = float(result["copy_gbps"])
    sheet = f" (datasheet {entry.gbps:.0f} GB/s: {copy_gbps / entry.gbps:.0%})" if entry else ""
    lines.append(f"  copy bandwidth: {copy_gbps:.1f} GB/s{sheet}")
    for dtype in peaks.DTYPES:
        if dtype in measured.matmul_tflops:
            value = measured.matmul_tflops[dtype]
            table = entry.tflops.get(dtype) if entry else None
            sheet = f" (datasheet {table:g} TFLOP/s: {value / table:.0%})" if table else ""
            lines.append(f"  {dtype} matmul: {value:.3g} TFLOP/s at n={measured.matmul_n.get(dtype)}{sheet}")
        elif dtype in (result.get("skipped") or {}):
            lines.append(f"  {dtype} matmul: not measured ({result['skipped'][dtype]})")
    lines.append(f"Wrote {peaks.SHOWN_PATH}: roofline fractions on {measured.device} now use these measured peaks "
                 "(measured beats the datasheet table).")
    return {"exit_code": 0, "peaks": str(path), "job_id": run.job.id, "device": measured.device,
            "measured": measured.model_dump(mode="json"), "skipped": result.get("skipped") or {},
            "table": ({"part": entry.part, "gbps": entry.gbps, "tflops": entry.tflops, "cite": entry.cite}
                      if entry else None),
            "text": "\n".join(lines)}


if __name__ == "__main__":
    sys.exit(main())
