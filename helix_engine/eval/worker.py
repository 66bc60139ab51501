"""The child process of every eval job: ``python -m helix_engine.eval.worker REQUEST.json``.

It imports the user's operator and harness (only ever here, never in the helix process),
runs test or bench cases, streams one event per case into the job's events.jsonl and writes
a result JSON named by the request. ``--run-one ID --iterations N`` is the msprof target:
it calls one case's closure N times and exits.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from helix_engine import __version__
from helix_engine.eval.childlib import JobEvents, read_request, run_contained, setup_backend, write_result
from helix_engine.eval.loader import HarnessContractError
from helix_engine.eval.usercode import CaseFailures, UserCodeError, group_case_errors, user_traceback

MAX_CAPTURED_CHARS = 200_000


class _Tee(io.TextIOBase):
    def __init__(self, real: Any, buf: io.StringIO) -> None:
        self.real, self.buf = real, buf

    def write(self, text: str) -> int:
        self.buf.write(text)
        with contextlib.suppress(Exception):
            self.real.write(text)
            self.real.flush()
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self.real.flush()


def _to_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_to_cpu(v) for v in value)
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value


# ------------------------------------------------------------------------------------ bench


def _time_case(mode: str, fn: Any, warmup: int, repeats: int, backend: Any, kernel_names: list[str],
               case_id: str, request_path: Path) -> Any:
    from helix_engine.eval import timing

    sync = backend.synchronize
    flush = _flusher(backend) if backend.l2 == "flushed" else None
    if mode == "perf-counter":
        return timing.time_perf_counter(fn, warmup, repeats, sync, flush)
    if mode == "device-event":
        return timing.time_device_event(fn, warmup, repeats, sync)
    if mode == "torch-profiler":
        return timing.time_torch_profiler(fn, warmup, repeats, sync, kernel_names, flush)
    if mode == "torch-npu-profiler":
        return timing.time_torch_npu_profiler(fn, warmup, repeats, sync, kernel_names, case_id)
    if mode == "msprof":
        return timing.time_msprof(request_path, case_id, warmup, repeats, kernel_names)
    raise ValueError(f"unknown bench mode {mode!r}")


_FLUSH: dict[str, Any] = {}


def _flusher(backend: Any) -> Any:
    """The job's one L2 flush function (its buffer allocated on first use)."""
    from helix_engine.eval import timing

    if "fn" not in _FLUSH:
        _FLUSH["fn"] = timing.l2_flusher(backend)
    return _FLUSH["fn"]


def _finite(value: float | None) -> float | None:
    """NaN/Inf are not JSON: an upstream reader would reject the whole perf file."""
    return value if value is not None and math.isfinite(value) else None


def _record(case_id: str, harness: Any, mode: str, timing_result: Any, error: str | None,
            wall_s: float, backend: Any, device_name: str, *, context: dict[str, Any] | None = None) -> dict[str, Any]:
    from helix_engine.eval.timing import METHODS
    from helix_engine.perf.stats import cap_samples, summarize

    samples = [s for s in (timing_result.samples_us if timing_result else []) if math.isfinite(s)]
    record: dict[str, Any] = {
        "case_label": case_id,
        "kernel_names": list(harness.kernel_names),
        "kernel_source": harness.kernel_source,
        "kernel_avg_time_us": _finite(timing_result.kernel_avg_us) if timing_result else None,
        "ops": timing_result.ops if timing_result else None,
        "total_op_avg_time_us": _finite(timing_result.total_op_avg_us) if timing_result else None,
        "error_message": error if error else (timing_result.error_message if timing_result else None),
        "case_wall_clock_seconds": round(wall_s, 6),
        "bench_mode": mode,
        "l2": getattr(backend, "l2", "warm"),
    }
    if samples:
        record["samples_us"] = cap_samples(samples)
        record["stats"] = summarize(samples).model_dump(mode="json")
    record.update(method=METHODS.get(mode, mode), device=device_name, backend=backend.name,
                  helix_version=__version__)
    if context:
        record["context"] = context
    _add_roofline(record, harness, case_id)
    return record


def _add_roofline(record: dict[str, Any], harness: Any, case_id: str) -> None:
    """The case's declared bytes/flops and what they achieved (perf/roofline.py); a peak that
    cannot be read is left out, never a reason to lose the record."""
    from helix_engine.perf.roofline import RECORD_KEY, record_entry
    from helix_engine.workspace import layout

    work = next((c.work for c in getattr(harness, "cases", []) if c.id == case_id), None)
    if work is None:
        return
    try:
        entry = record_entry(record, work, layout.workspace_of(harness.operator_file))
    except Exception:  # noqa: BLE001 - nice to have
        entry = work.to_json()
    if entry:
        record[RECORD_KEY] = entry


def run_bench(request: dict[str, Any], request_path: Path, backend: Any, events: Any) -> dict[str, Any]:
    from helix_engine.eval.loader import load_bench_harness

    harness = load_bench_harness(Path(request["bench_file"]), Path(request["operator_file"]))
    mode = request["bench_mode"]
    wanted = request.get("case_ids")
    cases = [c for c in harness.cases if not wanted or c.id in wanted]
    if wanted:
        unknown = sorted(set(wanted) - {c.id for c in harness.cases})
        if unknown:
            raise HarnessContractError(harness.bench_file, "build_bench_cases",
                                       f"no case with id {unknown[0]!r}; the ids are: "
                                       + ", ".join(c.id for c in harness.cases))
    events.emit("log", msg=f"cases: {', '.join(c.id for c in cases)}", case_ids=[c.id for c in cases])
    skip = set(request.get("skip_case_ids") or [])
    cases = [c for c in cases if c.id not in skip]
    try:
        device_name = backend.device_name()
    except Exception:  # noqa: BLE001 - a name is nice to have, never a reason to fail
        device_name = backend.name
    from helix_engine.perf.context import ContextProbe

    probe = ContextProbe.start(backend)
    fns: dict[str, Any] = {}
    build_errors: dict[str, str] = {}
    failures = CaseFailures()  # each distinct traceback once, the user's frames only
    for case in cases:  # upstream builds every closure up front
        try:
            fns[case.id] = harness.build_fn(case)
        except HarnessContractError:
            raise
        except Exception as exc:  # noqa: BLE001 - a case error is data, not a crash
            build_errors[case.id] = f"{type(exc).__name__}: {exc}"
            failures.report(case.id, exc)
    records: list[dict[str, Any]] = []
    total = len(cases)
    for index, case in enumerate(cases):
        warmup, repeats = case.warmup, case.repeats
        if request.get("warmup_cap") is not None:
            warmup = min(warmup, int(request["warmup_cap"]))
        if request.get("repeats_cap") is not None:
            repeats = min(repeats, int(request["repeats_cap"]))
        if request.get("repeats_override"):
            repeats = int(request["repeats_override"])
        events.case_started(case.id, index, total)
        start = time.perf_counter()
        result, error = None, build_errors.get(case.id)
        if error is None:
            try:
                result = _time_case(mode, fns[case.id], warmup, repeats, backend, harness.kernel_names,
                                    case.id, request_path)
            except Exception as exc:  # noqa: BLE001
                error = f"{type(exc).__name__}: {exc}"
                failures.report(case.id, exc)
        record = _record(case.id, harness, mode, result, error, time.perf_counter() - start, backend, device_name,
                         context=probe.now())
        records.append(record)
        events.case_finished(case.id, record)
        events.progress(index + 1, total)
    return {"records": records, "kernel_names": harness.kernel_names, "kernel_source": harness.kernel_source}


def run_one(request: dict[str, Any], case_id: str, iterations: int, backend: Any) -> int:
    """msprof target: call one case ``iterations`` times, syncing after each."""
    from helix_engine.eval.loader import load_bench_harness

    harness = load_bench_harness(Path(request["bench_file"]), Path(request["operator_file"]))
    case = next((c for c in harness.cases if c.id == case_id), None)
    if case is None:
        print(f"no bench case {case_id!r}", file=sys.stderr)
        return 2
    fn = harness.build_fn(case)
    for _ in range(iterations):
        fn()
        backend.synchronize()
    return 0


# ------------------------------------------------------------------------------------- test


def run_test(request: dict[str, Any], backend: Any, events: Any) -> dict[str, Any]:
    operator_file, test_file = Path(request["operator_file"]), Path(request["test_file"])
    buf = io.StringIO()
    rc, archived, comparison, raised = 0, None, None, None
    with contextlib.redirect_stdout(_Tee(sys.stdout, buf)), contextlib.redirect_stderr(_Tee(sys.stderr, buf)):
        try:
            if request["test_mode"] == "standalone":
                from helix_engine.eval.loader import load_standalone_test

                main, api = load_standalone_test(test_file, operator_file)
                events.case_started("main", 0, 1)
                main(api)
                backend.synchronize()
                events.case_finished("main", {"ok": True})
            else:  # the gate: each operator in its own process, compared here (gate/difftest.py)
                from helix_engine.gate.difftest import run_test_gate

                return run_test_gate(request, backend, events)
        except HarnessContractError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the test failing is the result
            if isinstance(exc, KeyboardInterrupt):
                raise
            rc, raised = 1, f"{type(exc).__name__}: {exc}"
            sys.stderr.write(user_traceback(exc))  # the user's frames only
    captured = buf.getvalue()
    if len(captured) > MAX_CAPTURED_CHARS:  # the whole output is in the job's output.log
        captured = f"[... {len(captured) - MAX_CAPTURED_CHARS} characters cut; see output.log]\n" + captured[-MAX_CAPTURED_CHARS:]
    return {"return_code": rc, "stdout": captured, "archived_result": archived, "comparison": comparison,
            "raised": raised}


# ------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m helix_engine.eval.worker REQUEST.json [--run-one ID --iterations N]", file=sys.stderr)
        return 2
    request_path = Path(args[0])
    request = read_request(request_path)
    backend = setup_backend(request)
    if "--run-one" in args:
        case_id = args[args.index("--run-one") + 1]
        iterations = int(args[args.index("--iterations") + 1]) if "--iterations" in args else 1
        return run_one(request, case_id, iterations, backend)
    events = JobEvents()
    rc = 0
    try:
        if request["action"] == "bench":
            result = run_bench(request, request_path, backend, events)
        elif request["action"] == "paired":
            from helix_engine.gate.sides import GATE_MODES

            if request["bench_mode"] in GATE_MODES:  # candidate and reference each in their own process
                from helix_engine.gate.paired import run_paired_gate

                result = run_paired_gate(request, backend, events, _record)
            else:  # msprof runs its own target process per case: both sides in this one (no gate)
                from helix_engine.eval.interleave import run_paired

                result = run_paired(request, request_path, backend, events, _time_case, _record)
        elif request["action"] == "adaptive":
            from helix_engine.eval.adaptive import run_adaptive

            result = run_adaptive(request, request_path, backend, events, _time_case)
            rc = 1 if result.get("error") else 0
        elif request["action"] == "plan":
            from helix_engine.eval.loader import load_bench_harness

            harness = load_bench_harness(Path(request["bench_file"]), Path(request["operator_file"]))
            result = {"case_ids": [c.id for c in harness.cases]}
        elif request["action"] == "test":
            result = run_test(request, backend, events)
            rc = int(result["return_code"])
        else:
            raise ValueError(f"unknown action {request['action']!r}")
    except UserCodeError as exc:  # only the user's frames: helix's own are noise to them
        sys.stderr.write(exc.user_traceback)
        print(f"FAIL: {exc}", file=sys.stderr)
        result, rc = {"error": str(exc), "user_code_error": exc.to_json()}, 1
    except HarnessContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        result, rc = {"error": str(exc), "contract_error": True}, 2
    except Exception as exc:  # noqa: BLE001 - report, then exit non-zero
        traceback.print_exc()
        result, rc = {"error": f"{type(exc).__name__}: {exc}"}, 1
    write_result(Path(request["result_path"]), result)
    summary = {k: v for k, v in result.items() if k in ("error", "return_code", "archived_result")}
    if isinstance(result.get("records"), list):  # `helix jobs tail` prints this, not `result {}`
        summary["cases"] = len(result["records"])
        summary["case_errors"] = sum(1 for r in result["records"] if r.get("error_message"))
    if isinstance(result.get("comparison"), dict):
        summary["accuracy"] = "passed" if result["comparison"].get("passed") else "failed"
    failure = _failure(result, rc)
    if failure:  # the job is failed with this sentence, as the command fails for it
        summary["failure"] = failure if len(failure) <= 400 else failure[:399] + "…"
        rc = rc or 1
    events.result(summary)
    sys.stdout.flush()
    return rc


def _failure(result: dict[str, Any], rc: int) -> str | None:
    """Why this job failed, in one sentence (None: it passed)."""
    if result.get("error"):
        return str(result["error"])
    records = result.get("records")
    if isinstance(records, list):
        from helix_engine.eval.bench import case_errored

        bad = [(str(r.get("case_label")), str(r.get("error_message"))) for r in records if case_errored(r)]
        if bad:
            return f"{len(bad)} of {len(records)} cases failed: " + "; ".join(group_case_errors(bad))
    if result.get("raised"):
        return f"the test raised {result['raised']}"
    comparison = result.get("comparison")
    if isinstance(comparison, dict) and not comparison.get("passed"):
        why = str(comparison.get("message") or "outside tolerance").removeprefix("FAIL: ")
        return f"the accuracy check failed: {why}"
    return f"the worker exited with code {rc}" if rc else None


def cli_main() -> int:
    """``python -m helix_engine.eval.worker``, also what the warm worker's fork calls (eval/zygote.py)."""
    return run_contained(main)


if __name__ == "__main__":
    sys.exit(cli_main())
