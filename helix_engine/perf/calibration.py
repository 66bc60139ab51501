"""``.helix/calibration.json``: each case's noise floor on this box, measured by ``helix calibrate``.

Why: a fixed 1% margin is too tight on a noisy box (an A/A run of one operator against itself then
reads "faster" or "slower") and needlessly loose on a quiet one. ``helix calibrate`` runs the
baseline against itself, paired in one job, ``rounds`` times (separate jobs), and stores per case
the noise floor (as a fraction: 0.023 = 2.3%): how far the A/A point of a *later* job may stray
from 1.0, both between jobs and within one. Between jobs: a 99% prediction bound from the rounds'
points, t_{0.995, rounds} * sqrt(mean(log(point)^2)) (A/A points scatter around 1.0; the t
quantile pays for estimating their spread from a few rounds). Within one: the median half-width
of the rounds' 95% intervals. The evaluation core then uses max(1%, floor) as the case's margin of
practical equivalence (perf/margins.py).

Why a prediction bound: the floor used to be the largest distance of a round's point from 1.0,
and a fourth job exceeds the largest of three in one case in four. On an H200 the small
(launch-bound) cases carry per-job offsets of a few percent; the ratio of medians, whose
within-job intervals are narrow, then called 5 of 120 A/A comparisons faster/slower with
calibrated margins. Fewer rounds give wider margins (3 rounds: 5.8 sigma, 5: 4.0, 10: 3.2).

The margins apply only to comparisons measured the way the calibration was: same backend, bench
mode and device; otherwise the default 1% is used and the margin line says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from helix_engine.perf import stats
from helix_engine.perf.margins import DEFAULT_MARGIN, NoiseMargins, canonical_id
from helix_engine.perf.results import RoundEvaluation
from helix_engine.workspace import filemodel
from helix_engine.workspace.filemodel import FileModel, ValidationError
from helix_engine.workspace.models import MeasurementContext, PerfRecord

CALIBRATION_FILE = "calibration.json"
SHOWN_PATH = ".helix/calibration.json"
#: Two-sided probability that a later A/A job's point lies beyond the between-jobs bound.
PREDICTION_ALPHA = 0.01
METHOD = ("noise floor = the larger of (a) a 99% prediction bound for a later A/A job's point, "
          "t_{0.995, rounds} * sqrt(mean(log(point)^2)) over the rounds' paired points, and (b) the median "
          "half-width of the rounds' 95% block-bootstrap intervals (both in log space, as a fraction), for "
          "each statistic; margin = max(1%, floor)")


class CaseNoise(FileModel):
    latency_id: str
    noise_floor: float  # fraction
    margin: float  # max(1%, noise_floor): what verdicts use
    points: list[float] = filemodel.field(default_factory=list)  # the A/A ratio of means of each round
    intervals: list[tuple[float, float]] = filemodel.field(default_factory=list)
    blocks: int = 0  # blocks per round
    #: the same for the ratio of medians (robust to a slow outlier, so often a tighter floor)
    median_noise_floor: float | None = None
    median_margin: float | None = None
    median_points: list[float] = filemodel.field(default_factory=list)
    #: two files measured in separate jobs: the first round's reference against each later round's
    #: candidate (ratio of means); its floor is the margin an unpaired comparison is judged by
    unpaired_points: list[float] = filemodel.field(default_factory=list)
    unpaired_margin: float | None = None


class Calibration(FileModel):
    """``.helix/calibration.json`` (schema_version 1)."""

    schema_version: Literal[1] = 1
    created_at: str
    baseline_operator: str
    baseline_operator_sha256: str | None = None
    bench_file: str
    bench_mode: str
    #: the cache state it was measured in (PerfRecord.cache_state); None: from before it was recorded
    l2: str | None = None
    backend: str
    device: str | None = None
    rounds: int
    job_ids: list[str] = filemodel.field(default_factory=list)
    method: str = METHOD
    context: MeasurementContext | None = None
    cases: dict[str, CaseNoise] = filemodel.field(default_factory=dict)  # canonical latency id → noise


def path_for(workspace: Path) -> Path:
    from helix_engine.workspace import layout

    return Path(workspace) / layout.HELIX_DIR / CALIBRATION_FILE


def load(workspace: Path) -> tuple[Calibration | None, str | None]:
    """The workspace's calibration, and why one that exists cannot be used (None, None: none)."""
    from helix_engine.workspace.reading import read_text_safe

    path = path_for(workspace)
    if not path.is_file():
        return None, None
    text, problem = read_text_safe(path, Path(workspace))
    if text is None:
        return None, f"{SHOWN_PATH} is unreadable ({problem.message if problem else 'empty'})"
    try:
        return Calibration.model_validate_json(text), None
    except (ValidationError, ValueError):
        return None, f"{SHOWN_PATH} is not a calibration; run `helix calibrate` again"


def write(workspace: Path, calibration: Calibration) -> Path:
    from helix_engine.workspace.files import atomic_write_text

    path = path_for(workspace)
    atomic_write_text(path, calibration.model_dump_json(indent=1) + "\n")
    return path


def _distance(value: float) -> float:
    """How far a ratio lies from 1.0, as a fraction, symmetric in log space (0.98 and 1.0204…
    are both 2%)."""
    return math.exp(abs(math.log(value))) - 1.0 if value > 0 and math.isfinite(value) else math.inf


def prediction_bound(points: Sequence[float], alpha: float = PREDICTION_ALPHA) -> float:
    """How far (log space) a later A/A point may lie from 1.0: t_{1-alpha/2, r} * RMS(log points),
    r = the number of rounds. Under A/A the points scatter around 1.0 (log 0), so the RMS has r
    degrees of freedom and a new point over it is t-distributed with r: the bound holds with
    probability 1 - alpha whatever the spread, however few the rounds."""
    logs = [math.log(p) if p > 0 and math.isfinite(p) else math.inf for p in points]
    if not logs or not all(map(math.isfinite, logs)):
        return math.inf
    rms = math.sqrt(math.fsum(x * x for x in logs) / len(logs))
    return stats.t_quantile(1.0 - alpha / 2.0, len(logs)) * rms


def _floor(points: Sequence[float], intervals: Sequence[tuple[float, float]]) -> float:
    """max(prediction bound of a later point, median interval half-width), as a fraction; never
    below the largest distance of a point seen."""
    half_widths = sorted((math.log(hi) - math.log(lo)) / 2 for lo, hi in intervals)
    mid = len(half_widths) // 2
    median_hw = half_widths[mid] if len(half_widths) % 2 else (half_widths[mid - 1] + half_widths[mid]) / 2
    bound = prediction_bound(points)
    return max(max(_distance(p) for p in points), math.expm1(bound) if math.isfinite(bound) else math.inf,
               math.exp(median_hw) - 1.0)


def add_unpaired(noise: dict[str, CaseNoise], unpaired: Sequence[RoundEvaluation]) -> None:
    """Each case's drift between jobs from ``unpaired`` (the first round's reference records
    against each later round's candidate records, evaluated unpaired): its points and a margin,
    the prediction bound of a later point (never below the largest seen); none from one point."""
    for lid, item in noise.items():
        points = [c.mean.point for ev in unpaired for c in ev.cases if c.latency_id == lid]
        if len(points) < 2 or len(points) < len(unpaired):
            continue
        bound = prediction_bound(points)
        floor = max(max(_distance(p) for p in points), math.expm1(bound) if math.isfinite(bound) else math.inf)
        item.unpaired_points, item.unpaired_margin = points, max(DEFAULT_MARGIN, floor)


def case_noise(rounds: Sequence[RoundEvaluation]) -> dict[str, CaseNoise]:
    """Per case, the noise floor over the A/A rounds (each a paired evaluation of the baseline
    against itself), for the ratio of means and, where every round has one, the ratio of
    medians; cases without a mean interval in some round are left out."""
    out: dict[str, CaseNoise] = {}
    ids = [c.latency_id for c in rounds[0].cases] if rounds else []
    for lid in ids:
        cases = [next((c for c in ev.cases if c.latency_id == lid), None) for ev in rounds]
        if not cases or any(c is None or c.mean.interval is None for c in cases):
            continue
        found = [c for c in cases if c is not None]
        points = [c.mean.point for c in found]
        intervals = [(c.mean.interval.low, c.mean.interval.high) for c in found if c.mean.interval is not None]
        floor = _floor(points, intervals)
        noise = CaseNoise(latency_id=lid, noise_floor=floor, margin=max(DEFAULT_MARGIN, floor), points=points,
                          intervals=intervals, blocks=found[-1].n_blocks)
        medians = [c.median for c in found]
        if all(m is not None and m.interval is not None for m in medians):
            m_points = [m.point for m in medians if m is not None]
            m_floor = _floor(m_points, [(m.interval.low, m.interval.high) for m in medians
                                        if m is not None and m.interval is not None])
            noise.median_noise_floor, noise.median_margin = m_floor, max(DEFAULT_MARGIN, m_floor)
            noise.median_points = m_points
        out[canonical_id(lid)] = noise
    return out


def _mismatch(cal: Calibration, records: Sequence[PerfRecord]) -> str | None:
    """Why the calibration does not describe how ``records`` were measured, or None."""
    measured = [r for r in records if r.bench_mode or r.backend]
    if not measured:
        return None
    r = measured[0]
    if r.bench_mode and r.bench_mode != cal.bench_mode:
        return f"{SHOWN_PATH} was measured with bench mode {cal.bench_mode}, these files with {r.bench_mode}"
    if r.backend and r.backend != cal.backend:
        return f"{SHOWN_PATH} was measured on the {cal.backend} backend, these files on {r.backend}"
    cal_l2 = cal.l2 or ("flushed" if cal.bench_mode == "device-event" else "warm")
    if r.bench_mode and r.cache_state != cal_l2:
        if cal.l2 is None:  # written before helix recorded the cache state: say what to do
            return (f"{SHOWN_PATH} was measured before helix recorded the cache state (it ran {cal_l2}), these "
                    f"files with the L2 {r.cache_state}: run `helix calibrate` again")
        return f"{SHOWN_PATH} was measured with the L2 {cal_l2}, these files with it {r.cache_state}"
    if r.device and cal.device and r.device != cal.device:
        return f"{SHOWN_PATH} was measured on {cal.device}, these files on {r.device}"
    return None


def margins_for(workspace: Path | None, records: Sequence[PerfRecord] = ()) -> NoiseMargins:
    """The margins for comparing ``records`` (either side) in ``workspace``: calibrated per case
    when its calibration matches how they were measured, else the default 1% (``note`` says why)."""
    if workspace is None:
        return NoiseMargins()
    cal, why = load(workspace)
    if cal is None:
        return NoiseMargins(note=why)
    mismatch = _mismatch(cal, records)
    if mismatch is not None:
        return NoiseMargins(note=f"not calibrated: {mismatch}")
    return NoiseMargins(per_case={k: v.margin for k, v in cal.cases.items()},
                        per_case_median={k: v.median_margin for k, v in cal.cases.items() if v.median_margin},
                        per_case_unpaired={k: v.unpaired_margin for k, v in cal.cases.items()
                                           if v.unpaired_margin is not None},
                        source="calibrated", file=SHOWN_PATH)


def workspace_of_file(path: Path) -> Path | None:
    """The workspace a perf file lies in (its folder, or the folder above baseline/ or a round),
    when that folder holds a ``.helix/`` folder."""
    from helix_engine.workspace import layout

    folder = Path(path).resolve().parent
    candidates = [folder.parent, folder] if (folder.name == layout.BASELINE_DIR
                                             or layout.round_number(folder.name) is not None) else [folder]
    for ws in candidates:
        if (ws / layout.HELIX_DIR).is_dir():
            return ws
    return None
