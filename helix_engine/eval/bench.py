"""``helix run-bench``: benchmark every case of an operator in a job, write the perf JSONL.

Parent side (no torch). One job runs all cases (or, with several devices in ``--devices``,
one job per case spread over the device pool). A child that crashes mid-run loses only the
case it was in: finished cases come back from events.jsonl and the rest run in a new job.

Failed runs never replace good data. The perf file (canonical ``<op>_perf.txt``, ``--output``,
or the baseline's) is written, atomically, only by a run that completed: every job of the run
finished and returned its records (none was cancelled, timed out or crashed) and at least one
case was measured. Cases that raised inside a completed run stay in the file as error rows with
rc 1, as upstream writes them.
Otherwise the file is left byte-for-byte as it was (or not created), the run's rows are only
reported, and the command fails with a sentence that says so (`refusal`).
"""

from __future__ import annotations

import concurrent.futures
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine import __version__
from helix_engine.errors import HelixError
from helix_engine.eval.jobrun import (
    WorkerRun,
    bench_mode_for,
    check_file,
    finished_records,
    resolve_backend,
    resolve_bench_inputs,
    round_name_of,
    round_timing,
    run_worker,
)
from helix_engine.eval.loader import read_metadata, resolve_kernels
from helix_engine.eval.usercode import UserCodeError, group_case_errors
from helix_engine.workspace import layout

METRIC_SOURCES: tuple[str, ...] = ("auto", "kernel", "total-op", "all")


@dataclass
class BenchOutcome:
    exit_code: int
    perf_file: str | None
    bench_mode: str
    backend: str
    records: list[dict[str, Any]] = field(default_factory=list)
    baseline_perf_file: str | None = None
    comparison: list[dict[str, Any]] | None = None
    comparison_text: str | None = None
    job_ids: list[str] = field(default_factory=list)
    message: str | None = None
    output: str = ""
    paired_file: str | None = None  # <perf stem>.paired.json of a paired run
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "text"}


@dataclass
class BenchRun:
    records: list[dict[str, Any]]
    job_ids: list[str]
    output: str
    fatal: str | None = None
    #: how each job of the run ended, in order: ``completed`` when it returned its records (its
    #: exit code may still be 1 for case errors), else its status (failed = crashed, timeout, …)
    job_endings: list[str] = field(default_factory=list)


def ending(run: WorkerRun) -> str:
    return "completed" if run.finished_cleanly else str(run.job.status)


def _error_record(case_id: str, names: list[str], source: str, mode: str, backend: str,
                  message: str) -> dict[str, Any]:
    return {"case_label": case_id, "kernel_names": names, "kernel_source": source,
            "kernel_avg_time_us": None, "ops": None, "total_op_avg_time_us": None,
            "error_message": message, "case_wall_clock_seconds": None, "bench_mode": mode,
            "backend": backend, "helix_version": __version__}


def _plan(run: WorkerRun) -> list[str] | None:
    """The ordered case ids the worker announced before running any (a ``log`` event)."""
    for e in _events(run):
        if e.get("event") == "log" and isinstance(e.get("case_ids"), list):
            return [str(c) for c in e["case_ids"]]
    return None


def _started(run: WorkerRun) -> list[str]:
    return [e["case_id"] for e in _events(run) if e.get("event") == "case_started"]


def _events(run: WorkerRun) -> Iterator[dict[str, Any]]:
    """The job's events, however many (events.jsonl is streamed, not read whole)."""
    from helix_engine.jobs.registry import iter_events

    return iter_events(run.job_dir)


def collect_records(
    op: Path, bench: Path, mode: str, be: Any, ws: Path, *, devices: list[str] | None = None,
    case_ids: list[str] | None = None, caps: dict[str, int | None] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None, timeout_s: float | None = None,
    kind: str = "run-bench",
) -> BenchRun:
    """Run the bench job(s) and return one record per case in declared order. ``kind`` names
    the jobs (a probe's jobs say probe-bench, so nobody reads them as canonical runs)."""
    try:
        names, source = resolve_kernels(op, read_metadata(bench))
    except UserCodeError:  # the job reports it, with the user's traceback in its output.log
        names, source = [], "operator"
    base = {"action": "bench", "operator_file": str(op), "bench_file": str(bench), "bench_mode": mode,
            **(caps or {})}
    round_name = round_name_of(op)
    if devices and len(devices) > 1:
        return _collect_parallel(op, bench, mode, be, ws, devices, base, names, source, case_ids,
                                 on_event, timeout_s, round_name, kind)
    records: dict[str, dict[str, Any]] = {}
    order: list[str] | None = None
    job_ids: list[str] = []
    endings: list[str] = []
    outputs: list[str] = []
    skip: list[str] = []
    for _attempt in range(256):
        request = dict(base, case_ids=case_ids, skip_case_ids=skip)
        run = run_worker(ws, kind, request, backend=be, cwd=bench.parent, device_pool=devices,
                         round_name=round_name, on_event=on_event, timeout_s=timeout_s)
        job_ids.append(run.job.id)
        endings.append(ending(run))
        outputs.append(run.output)
        order = order or _plan(run)
        if run.result is not None and "records" in run.result:
            for rec in run.result["records"]:
                records[rec["case_label"]] = rec
            break
        if order is None or run.result is not None:  # contract error, or died before any case
            return BenchRun([], job_ids, "\n".join(outputs), run.failure_text(), endings)
        # the child died mid-run: keep finished cases, fail the one in flight, resume the rest
        for rec in finished_records(run):
            records[rec["case_label"]] = rec
        for cid in _started(run):
            if cid not in records:
                records[cid] = _error_record(cid, names, source, mode, be.name, run.failure_text())
        remaining = [c for c in order if c not in records]
        if not remaining:
            break
        if run.job.status in ("timeout", "cancelled"):
            for cid in remaining:
                records[cid] = _error_record(cid, names, source, mode, be.name,
                                             f"not run: {run.failure_text()}")
            break
        skip = list(records)
    ordered = [records[c] for c in (order or list(records)) if c in records]
    return BenchRun(ordered, job_ids, "\n".join(outputs), job_endings=endings)


def _collect_parallel(op: Path, bench: Path, mode: str, be: Any, ws: Path, devices: list[str],
                      base: dict[str, Any], names: list[str], source: str, case_ids: list[str] | None,
                      on_event: Callable[[dict[str, Any]], None] | None, timeout_s: float | None,
                      round_name: str | None, kind: str = "run-bench") -> BenchRun:
    """One job per case over the device pool (each job leases one free device)."""
    plan_run = run_worker(ws, "bench-plan", dict(base, action="plan"), backend=be, cwd=bench.parent,
                          round_name=round_name, timeout_s=timeout_s)
    if plan_run.result is None or "case_ids" not in plan_run.result:
        return BenchRun([], [plan_run.job.id], plan_run.output, plan_run.failure_text(), [ending(plan_run)])
    ids = [c for c in plan_run.result["case_ids"] if not case_ids or c in case_ids]

    def one(cid: str) -> tuple[dict[str, Any], WorkerRun]:
        run = run_worker(ws, kind, dict(base, case_ids=[cid]), backend=be, cwd=bench.parent,
                         device_pool=devices, round_name=round_name, on_event=on_event, timeout_s=timeout_s)
        recs = (run.result or {}).get("records") or finished_records(run)
        rec = recs[0] if recs else _error_record(cid, names, source, mode, be.name, run.failure_text())
        return rec, run

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(ids), len(devices)) or 1) as pool:
        results = list(pool.map(one, ids))
    return BenchRun([r for r, _ in results], [plan_run.job.id] + [run.job.id for _, run in results],
                    "\n".join(run.output for _, run in results),
                    job_endings=[ending(plan_run)] + [ending(run) for _, run in results])


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    from helix_engine.perf.artifact import record_from_json, write_perf

    write_perf(path, [record_from_json(r) for r in records])


def case_errored(record: dict[str, Any]) -> bool:
    msg = record.get("error_message")
    return bool(msg) and not str(msg).startswith("no resolved kernels matched")


def case_error_lines(records: list[dict[str, Any]]) -> list[str]:
    """``N case(s) failed:`` then one line per distinct error; cases that share one are named
    together ("the same error in cases a, b"), so one bad operator is one line, not N."""
    bad = [(str(r.get("case_label")), str(r.get("error_message"))) for r in records if case_errored(r)]
    if not bad:
        return []
    return [f"{len(bad)} case(s) failed:"] + [f"  {line}" for line in group_case_errors(bad)]


def case_measured(record: dict[str, Any]) -> bool:
    """A time was measured (a kernel-name miss still measured the total op)."""
    return not case_errored(record) and (
        record.get("kernel_avg_time_us") is not None or record.get("total_op_avg_time_us") is not None)


_UNFINISHED = {
    "cancelled": "the bench was cancelled",
    "timeout": "the bench timed out",
    "failed": "a bench job crashed",
    "lost": "a bench job was lost (its supervisor died)",
}


def refusal(run: BenchRun) -> str | None:
    """Why ``run`` must not become a perf file, or None when it may (see the module doc)."""
    if run.fatal is not None:
        return f"the bench did not run: {run.fatal}"
    for how in run.job_endings:
        if how != "completed":
            return _UNFINISHED.get(how, f"a bench job ended with status {how}")
    if not run.records:
        return "the bench measured no case"
    if not any(case_measured(r) for r in run.records):
        first = next((r for r in run.records if r.get("error_message")), None)
        said = f"; {first['case_label']}: {first['error_message']}" if first else ""
        return f"no case was measured (all {len(run.records)} failed{said})"
    return None


def promote_records(path: Path, run: BenchRun, ws: Path | None = None) -> str | None:
    """Write ``run``'s records to ``path`` when the run completed (atomically: a temp file in
    the same folder, renamed over ``path``); else leave ``path`` untouched. Returns None when
    written, else the sentence for the user. ``ws``: the workspace whose jobs measured the run,
    whose events.jsonl files hold every case's record; when given, a write that fails (a full
    disk) raises a HelixError that says where those measurements still are."""
    why = refusal(run)
    if why is None:
        try:
            write_records(path, run.records)
        except OSError as exc:
            if ws is None:
                raise
            raise HelixError(unwritten_perf_text(path, run, ws, exc)) from exc
        return None
    kept = f"{path} was left as it was" if path.is_file() else f"no perf file was written ({path})"
    return f"{why}; {kept}: a failed run never replaces a perf file"


def unwritten_perf_text(path: Path, run: BenchRun, ws: Path, exc: OSError) -> str:
    """Why the perf file of a finished bench could not be written, and where its measurements
    are kept: each measured case is a ``case_finished`` event in its job's events.jsonl (only
    records found there, unchanged, are said to be kept: a paired run's reference is not)."""
    from helix_engine.diskfull import disk_full_text, is_disk_full
    from helix_engine.jobs.registry import iter_events, job_dir

    why = (disk_full_text(exc, path) if is_disk_full(exc)
           else f"could not write the perf file {path} ({exc.strerror or exc})")
    wanted = {str(r.get("case_label")): r for r in run.records if case_measured(r)}
    found: set[str] = set()
    held: list[Path] = []
    for folder in dict.fromkeys(job_dir(ws, j) for j in run.job_ids):
        hits = {label for e in iter_events(folder) if e.get("event") == "case_finished"
                and (label := str(e.get("case_id"))) in wanted and e.get("record") == wanted[label]}
        if hits - found:
            held.append(folder)
            found |= hits
    kept = f"{path} was left as it was" if path.is_file() else f"no perf file was written ({path})"
    if not found:
        return f"{why}; {kept}. The {len(wanted)} measured case(s) were not saved; run the bench again once there is room"
    where = ", ".join(str(f / "events.jsonl") for f in held)
    count = f"{len(found)} of the {len(wanted)}" if len(found) < len(wanted) else f"the {len(wanted)}"
    one = len(held) == 1
    text = (f"{why}; {kept}. {count[0].upper()}{count[1:]} measured case(s) are not lost: each one's record is a "
            f"case_finished event in {where} (keep {'that job folder' if one else 'those job folders'}: "
            f"`helix jobs prune` would delete {'it' if one else 'them'})")
    if one and len(found) == len(wanted) == len(run.records):
        return (text + ". Once there is room, rebuild the perf file from it: "
                f"jq -c 'select(.event == \"case_finished\") | .record' {shlex.quote(where)} > {shlex.quote(str(path))}; "
                "or run the bench again")
    return text + "; once there is room, run the bench again"


def compare_files(baseline: Path, candidate: Path, metric_source: str, skip: bool,
                  baseline_records: list[Any] | None = None) -> tuple[str, int, list[dict[str, Any]]]:
    """The compare-perf block for two perf files, its rc and JSON; ``baseline_records``: the
    baseline's as a paired job measured them, instead of its file's."""
    from helix_engine.perf import compare
    from helix_engine.perf.artifact import read_perf

    b, b_problems = read_perf(baseline)
    if baseline_records is not None:
        b, b_problems = baseline_records, []
    c, c_problems = read_perf(candidate)
    problems = [str(p) for p in b_problems + c_problems if p.severity == "error"]
    if problems:
        return "FAIL: " + problems[0] + "\n", 1, []
    from helix_engine.perf.filecompare import compare_perf_files

    comps = compare_perf_files(baseline, candidate, b, c, metric_source, skip)
    rc = 0 if compare.comparisons_passed(comps) else 1
    from helix_engine.perf import roofline
    from helix_engine.perf.calibration import workspace_of_file

    # as compare-perf prints it: upstream's block, our CI lines, then the roofline block
    ws = workspace_of_file(candidate) or workspace_of_file(baseline)
    block = "".join(line + "\n" for line in roofline.format_block(comps, b, c, ws))
    return compare.format_comparisons(comps) + block, rc, [compare.comparison_to_json(x) for x in comps]


def submitted_perf_refusal(op: Path) -> tuple[str, str] | None:
    """Why benching ``op`` in place is refused, as (why, what) where ``what`` is "baseline" or
    "round"; None when it may run. A passed round's perf file is its canonical record (the ledger
    and status read it), and the baseline's is what submitted rounds were measured against: a
    re-run would silently change a submitted result. The way out differs per door (the CLI has
    --output, the cockpit does not), so each caller words it."""
    from helix_engine.state import workflow

    n = layout.round_number(op.parent.name)
    perf = layout.perf_path_for(op)
    is_baseline = op.parent.name == layout.BASELINE_DIR
    if (n is None and not is_baseline) or not perf.is_file():
        return None
    try:
        state = workflow.load_workflow(workflow.state_path(op.parent.parent))
    except (OSError, ValueError):
        return None  # no readable workflow state: nothing says the round was submitted
    if is_baseline:
        passed = sorted(int(k) for k, e in state.rounds.items() if e.status == "passed" and k.isdigit())
        if passed:
            return (f"baseline/{perf.name} is what submitted rounds (opt-round-{passed[0]}…) were measured "
                    "against; re-measuring it in place would change their speedups", "baseline")
        return None
    entry = state.rounds.get(str(n))
    if entry is None or entry.status != "passed":
        return None
    return f"{op.parent.name} was submitted, and {perf.name} is its canonical perf record", "round"


def _refuse_overwriting_a_submitted_round(op: Path) -> None:
    refusal = submitted_perf_refusal(op)
    if refusal is None:
        return
    why, what = refusal
    perf = layout.perf_path_for(op)
    if what == "baseline":
        raise HelixError(f"{why}. Re-measure into another file with --output (e.g. --output /tmp/{perf.name}), "
                         "or re-establish the baseline with `helix prepare-baseline --force`")
    raise HelixError(f"{why}; re-measure into another file with --output (e.g. --output /tmp/{perf.name}), "
                     "or start a new round for a new measurement")


def _refuse_changed_records(ws: Path, op: Path, reference: Path | None) -> None:
    """A round's bench is judged against the accepted baseline, and a reference that is a submitted
    round against what was submitted: refused when either changed since it was sealed (state/seals.py)."""
    from helix_engine.state import seals

    if (round_name_of(op) or "").startswith(layout.ROUND_PREFIX):
        seals.require_baseline_intact(ws)
    if reference is not None:
        seals.require_submitted_intact(ws, round_name_of(reference), "the reference of this run-bench")


def run_bench(
    operator_file: Path | str,
    bench_file: Path | str | None = None,
    bench_mode: str | None = None,
    output: Path | str | None = None,
    backend: str | None = None,
    devices: list[str] | None = None,
    baseline_operator_file: Path | str | None = None,
    metric_source: str = "auto",
    skip_latency_errors: bool = False,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout_s: float | None = None,
    against: str | None = None,
    paired: bool = True,
) -> BenchOutcome:
    """Benchmark ``operator_file``. With a reference (``baseline_operator_file`` or ``against``
    baseline|parent|best) both are measured in one job, interleaved (eval/pairedbench.py), unless
    ``paired`` is False: then the reference's perf file is reused, or benched first, as upstream."""
    if metric_source not in METRIC_SOURCES:
        raise HelixError(f"unknown metric source {metric_source!r}; use one of {', '.join(METRIC_SOURCES)}")
    op, bench = resolve_bench_inputs(operator_file, bench_file)
    if output is None:
        _refuse_overwriting_a_submitted_round(op)
    be = resolve_backend(backend)
    mode = bench_mode_for(be, bench_mode)
    ws = layout.workspace_of(op)
    from helix_engine.eval.pairedbench import resolve_reference, run_paired_bench

    reference = resolve_reference(op, against, baseline_operator_file)
    _refuse_changed_records(ws, op, reference)
    if reference is not None and paired:
        return run_paired_bench(op, reference, bench, mode, be, ws, output=output, devices=devices,
                                metric_source=metric_source, skip_latency_errors=skip_latency_errors,
                                on_event=on_event, timeout_s=timeout_s)
    baseline_operator_file = reference
    lines: list[str] = []
    job_ids: list[str] = []
    baseline_perf: Path | None = None
    if baseline_operator_file:
        base_op = check_file(baseline_operator_file, "baseline operator", "--baseline-operator-file")
        baseline_perf = layout.perf_path_for(base_op)
        if not baseline_perf.is_file():
            base_run = collect_records(base_op, bench, mode, be, layout.workspace_of(base_op),
                                       devices=devices, on_event=on_event, timeout_s=timeout_s)
            job_ids += base_run.job_ids
            if base_run.fatal is not None:
                return BenchOutcome(1, None, mode, be.name, job_ids=job_ids, message=base_run.fatal,
                                    output=base_run.output,
                                    text=f"FAIL: the baseline bench did not run: {base_run.fatal}")
            base_refused = promote_records(baseline_perf, base_run, layout.workspace_of(base_op))
            if base_refused is not None:
                return BenchOutcome(1, None, mode, be.name, records=base_run.records, job_ids=job_ids,
                                    message=base_refused, output=base_run.output,
                                    text=f"FAIL: baseline bench: {base_refused}")
        lines.append(f"Baseline perf file: {baseline_perf}")
    with round_timing(ws, "run_bench"):
        run = collect_records(op, bench, mode, be, ws, devices=devices, on_event=on_event, timeout_s=timeout_s)
    job_ids += run.job_ids
    if run.fatal is not None:
        lines.append(f"FAIL: the bench did not run: {run.fatal}")
        return BenchOutcome(1, None, mode, be.name, records=run.records, job_ids=job_ids,
                            baseline_perf_file=str(baseline_perf) if baseline_perf else None,
                            message=run.fatal, output=run.output, text="\n".join(lines))
    perf_path = Path(output).expanduser().resolve() if output else layout.perf_path_for(op)
    refused = promote_records(perf_path, run, ws)
    if refused is not None:
        lines.append(f"FAIL: {refused}")
        lines += case_error_lines(run.records)
        if run.output.strip():
            lines.append(run.output.rstrip())
        return BenchOutcome(1, None, mode, be.name, records=run.records, job_ids=job_ids,
                            baseline_perf_file=str(baseline_perf) if baseline_perf else None,
                            message=refused, output=run.output, text="\n".join(lines))
    rc = 1 if any(case_errored(r) for r in run.records) else 0
    lines.append(f"Perf file: {perf_path}")
    outcome = BenchOutcome(rc, str(perf_path), mode, be.name, records=run.records, job_ids=job_ids,
                           baseline_perf_file=str(baseline_perf) if baseline_perf else None, output=run.output)
    if rc != 0:
        lines += case_error_lines(run.records)
        if run.output.strip():
            lines.append(run.output.rstrip())
    if baseline_perf is not None:
        text, compare_rc, comps = compare_files(baseline_perf, perf_path, metric_source, skip_latency_errors)
        lines.append(text.rstrip("\n"))
        outcome.comparison, outcome.comparison_text, outcome.exit_code = comps, text, compare_rc
    elif rc == 0:  # a cancelled or failed bench is nothing to compare
        lines.append("Next: compare it with `helix compare-perf --baseline <baseline perf file> "
                     f"--compare {perf_path}`")
    outcome.text = "\n".join(lines)
    return outcome
