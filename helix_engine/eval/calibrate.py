"""``helix calibrate``: measure each case's noise floor with an A/A run of the baseline.

The baseline operator is benched against a separate copy of itself (its folder's Python files
copied to .helix/calibrate/reference/), paired in one job (eval/pairedbench.py), once per round,
each round a separate job (so the floor covers what changes between jobs too), the two files
swapping sides every round: what differs between two files or between the two sides of a pair
shows in the floor as it would in a round's comparison. Each
round's A/A comparison goes through the evaluation core; perf/calibration.py turns the rounds
into per-case noise floors and writes ``.helix/calibration.json``, which verdicts and the promotion
rule then use as each case's margin of practical equivalence (never below 1%).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.workspace import layout

DEFAULT_ROUNDS = 3


def calibrate(workspace: Path | str = ".", *, cases: list[str] | None = None, rounds: int = DEFAULT_ROUNDS,
              backend: str | None = None, bench_mode: str | None = None, devices: list[str] | None = None,
              on_event: Callable[[dict[str, Any]], None] | None = None,
              timeout_s: float | None = None) -> dict[str, Any]:
    """Run the A/A rounds and write the calibration; returns the payload (``text``, ``exit_code``)."""
    from helix_engine.eval.jobrun import (
        bench_mode_for,
        resolve_backend,
        resolve_bench_inputs,
    )
    from helix_engine.eval.pairedbench import collect_paired, paired_model
    from helix_engine.perf import calibration
    from helix_engine.perf.artifact import record_from_json
    from helix_engine.perf.context import now_iso
    from helix_engine.perf.paired import evaluate_paired, sha256_of
    from helix_engine.workspace.snapshot import load_workspace

    if rounds < 1:
        raise HelixError(f"--rounds must be at least 1, not {rounds}")
    ws = Path(workspace).expanduser().resolve()
    snap = load_workspace(ws)
    base_op = snap.baseline.operator_file if snap.baseline is not None else None
    if base_op is None or not Path(base_op).is_file():
        raise HelixError(f"{ws} has no baseline operator (baseline/<op>.py); run `helix prepare-baseline` first")
    op, bench = resolve_bench_inputs(base_op, None)
    be = resolve_backend(backend)
    known = next((r.bench_mode for r in (snap.baseline.perf if snap.baseline else []) if r.bench_mode), None)
    mode = bench_mode_for(be, bench_mode or (known if known in be.bench_modes else None))
    evaluations = []
    references: list[list[Any]] = []  # each round's records of the file that was the reference
    candidates: list[list[Any]] = []
    job_ids: list[str] = []
    context = None
    device = None
    copy = separate_copy(ws, op)
    for index in range(rounds):
        cand, ref = (op, copy) if index % 2 == 0 else (copy, op)
        got = collect_paired(cand, ref, bench, mode, be, ws, devices=devices, case_ids=cases, on_event=on_event,
                             timeout_s=timeout_s, kind="calibrate")
        job_ids += got.run.job_ids
        if got.run.fatal is not None or any(how != "completed" for how in got.run.job_endings):
            why = got.run.fatal or f"the A/A job ended {got.run.job_endings[-1]}"
            return _failed(f"the A/A run did not finish: {why}; {calibration.SHOWN_PATH} was left as it was",
                           job_ids)
        run = paired_model(got, cand, ref, bench, mode, be.name, op, None)
        records = [record_from_json(r) for r in got.run.records]
        ev = evaluate_paired(run, records, metric="auto", skip_latency_errors=True)
        if ev.errors or not ev.cases:
            return _failed(f"the A/A comparison failed: {(ev.errors or ['no case was measured'])[0]}", job_ids)
        evaluations.append(ev)
        references.append([record_from_json(r) for r in got.reference.records])
        candidates.append(records)
        context = next((r.context for r in records if r.context is not None), context)
        device = next((r.device for r in records if r.device), device)
    noise = calibration.case_noise(evaluations)
    if not noise:
        return _failed("no case had enough blocks for an interval; raise the cases' repeats", job_ids)
    from helix_engine.perf.evaluation import evaluate

    # the drift between jobs: round 0's reference against each later round's candidate, unpaired
    calibration.add_unpaired(noise, [evaluate(references[0], later, metric="auto", skip_latency_errors=True,
                                                              with_ci=False)
                                     for later in candidates[1:]])
    old, _ = calibration.load(ws)
    kept = {}
    if cases and old is not None and (old.bench_mode, old.backend, old.device) == (mode, be.name, device):
        kept = {k: v for k, v in old.cases.items() if k not in noise}  # cases not re-measured keep theirs
    result = calibration.Calibration(
        created_at=now_iso(), baseline_operator=str(Path(op).relative_to(ws)), baseline_operator_sha256=sha256_of(op),
        bench_file=bench.name, bench_mode=mode, l2=be.l2_for(mode), backend=be.name, device=device, rounds=rounds,
        job_ids=job_ids,
        context=context, cases={**kept, **noise})
    path = calibration.write(ws, result)
    lines = [(f"Calibration: {len(noise)} case(s), {rounds} A/A round(s) of {layout.BASELINE_DIR}/{op.name} "
              f"against a separate copy of it (paired, {mode}, L2 {be.l2_for(mode)}, on {device or be.name})")]
    for item in noise.values():
        points = ", ".join(f"{p:.3f}x" for p in item.points)
        median = f", ratio of medians {item.median_margin:.1%}" if item.median_margin is not None else ""
        drift = (f"; separate jobs {item.unpaired_margin:.1%}" if item.unpaired_margin is not None else "")
        lines.append(f"  {item.latency_id}: margin {item.margin:.1%} (ratio of means{median}; A/A {points}; "
                     f"{item.blocks} blocks per round){drift}")
    lines.append(f"Wrote {calibration.SHOWN_PATH}: verdicts and the promotion rule now use each case's margin "
                 "(never below 1%) for files measured this way.")
    return {"exit_code": 0, "calibration": str(path), "job_ids": job_ids,
            "cases": {k: v.model_dump(mode="json") for k, v in noise.items()}, "text": "\n".join(lines)}


def separate_copy(ws: Path, op: Path) -> Path:
    """The baseline operator's folder's Python files (the operator and the helpers it imports)
    copied to .helix/calibrate/reference/; the copy of the operator."""
    import shutil

    dest = ws / layout.HELIX_DIR / "calibrate" / "reference"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for path in sorted(Path(op).parent.glob("*.py")):
        if path.is_file() and not path.is_symlink():
            shutil.copyfile(path, dest / path.name)
    return dest / Path(op).name


def _failed(message: str, job_ids: list[str]) -> dict[str, Any]:
    return {"exit_code": 1, "error": message, "job_ids": job_ids, "text": f"FAIL: {message}"}
