"""Paired measurement: a candidate and its reference measured in one job, interleaved in blocks.

Why: between two separate runs the device drifts (on an H200 the first job after idle ran 1-2%
slower; 15 of 44 A/A verdicts came out "faster"/"slower"). Measured in one job, in ABBA blocks
(reference, candidate, candidate, reference; the next block BAAB), a linear drift hits both sides
equally inside every block, and bootstrapping whole blocks keeps each block's pairing: the
interval then measures the noise of the comparison, not the drift.

The run writes the canonical perf file as always (the candidate's records, upstream keys) and this
sidecar beside it, ``<perf stem>.paired.json`` (``PairedRun``): both sides' samples in measurement
order with their block ids, the reference operator's path and sha256, the reference's own records,
and the sha256 of the perf file it belongs to (a later unpaired run that rewrites the perf file
makes the sidecar stale, and it is then ignored).

The evaluation core (perf/evaluation.py) takes the blocks (``Block``): per case the points are the
ratio of means and the ratio of medians of the pooled samples, and their intervals come from
``block_bootstrap`` (blocks resampled with replacement, both sides of a block together).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from helix_engine.perf import stats
from helix_engine.record import record
from helix_engine.workspace import filemodel
from helix_engine.workspace.filemodel import FileModel, ValidationError
from helix_engine.workspace.models import PerfRecord

Side = Literal["reference", "candidate"]
SIDECAR_SUFFIX = ".paired.json"
#: Block orders, alternating: A = reference, B = candidate.
BLOCK_ORDERS: tuple[tuple[Side, ...], tuple[Side, ...]] = (
    ("reference", "candidate", "candidate", "reference"),
    ("candidate", "reference", "reference", "candidate"),
)
#: Fewest blocks for an interval (as for samples: fewer gives a falsely narrow one).
MIN_BLOCKS = 3
#: Resamples per numpy call when bootstrapping medians (bounds the R x N weight matrix).
_MEDIAN_CHUNK = 256


#: Blocks of one slot per side (cases of few repetitions): AB, then BA.
HALF_BLOCK_ORDERS: tuple[tuple[Side, ...], tuple[Side, ...]] = (("reference", "candidate"),
                                                                ("candidate", "reference"))


def block_order(block: int, per_side: int = 2) -> tuple[Side, ...]:
    """ABBA for even blocks, BAAB for odd ones (A = reference); with ``per_side`` 1, AB and BA."""
    return (BLOCK_ORDERS if per_side == 2 else HALF_BLOCK_ORDERS)[block % 2]


# --------------------------------------------------------------------------- the sidecar


class _Model(FileModel):
    """The sidecar's parts: unknown keys kept, as every workspace file's."""


class PairedSlot(_Model):
    """One stretch of ``block_reps`` repetitions of one side, in measurement order."""

    block: int
    side: Side
    samples_us: list[float]


class PairedCase(_Model):
    case_label: str
    block_reps: int
    slots: list[PairedSlot] = filemodel.field(default_factory=list)

    @property
    def latency_id(self) -> str:
        return f"latency-{self.case_label}"


class OperatorRef(_Model):
    path: str
    sha256: str | None = None


class PairedRun(_Model):
    """``<perf stem>.paired.json``: one paired run-bench / probe-bench / calibrate job."""

    schema_version: Literal[1] = 1
    kind: Literal["paired-bench"] = "paired-bench"
    design: str = ("ABBA/BAAB blocks (AB/BA for cases of fewer than 6 repetitions; A = reference, B = candidate), "
                   "block_reps repetitions per slot")
    candidate: OperatorRef
    reference: OperatorRef
    bench_file: str
    bench_mode: str
    backend: str
    job_id: str | None = None
    created_at: str | None = None
    perf_file: str | None = None  # the canonical perf file this sidecar belongs to
    perf_sha256: str | None = None  # that file's sha256 as written beside this sidecar
    reference_perf_file: str | None = None
    reference_records: list[PerfRecord] = filemodel.field(default_factory=list)
    cases: list[PairedCase] = filemodel.field(default_factory=list)

    def blocks(self) -> dict[str, list[Block]]:
        """Latency id → the case's blocks (both sides' samples of each block)."""
        return {case.latency_id: blocks_of(case) for case in self.cases}

    def to_json_text(self) -> str:
        data = self.model_dump(mode="json")
        data["reference_records"] = [r.to_json() for r in self.reference_records]
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


@record
class Block:
    """One block of one case: each side's samples in it (µs)."""

    reference: list[float]
    candidate: list[float]


def blocks_of(case: PairedCase) -> list[Block]:
    found: dict[int, Block] = {}
    for slot in case.slots:
        block = found.setdefault(slot.block, Block([], []))
        (block.reference if slot.side == "reference" else block.candidate).extend(slot.samples_us)
    return [found[k] for k in sorted(found) if found[k].reference and found[k].candidate]


def sidecar_path(perf_path: Path) -> Path:
    """``x_perf.txt`` → ``x_perf.paired.json`` (beside it)."""
    perf_path = Path(perf_path)
    return perf_path.with_name(perf_path.stem + SIDECAR_SUFFIX)


def sidecar_of(perf_path: str) -> str:
    """`sidecar_path` of a path as text, without making Paths (a load asks it of every round)."""
    folder, sep, name = perf_path.rpartition("/")
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name  # pathlib's stem: no suffix for ".x" or "x."
    return f"{folder}{sep}{stem}{SIDECAR_SUFFIX}"


def sha256_of(path: Path | None) -> str | None:
    """The sha256 of a file read through the safe reader, None when unreadable."""
    if path is None:
        return None
    from helix_engine.workspace.reading import owning_workspace, read_bytes_safe

    data, _ = read_bytes_safe(Path(path), owning_workspace(Path(path)))
    return hashlib.sha256(data).hexdigest() if data is not None else None


def write_paired(path: Path, run: PairedRun) -> None:
    from helix_engine.workspace.files import atomic_write_text

    atomic_write_text(Path(path), run.to_json_text())


def read_paired(perf_path: Path, workspace: Path | None = None) -> tuple[PairedRun | None, str | None]:
    """The sidecar of ``perf_path`` and, when it cannot be used, why (None, None: there is none).

    Used only when it still belongs to the perf file (its sha256 matches the file's bytes)."""
    from helix_engine.workspace.reading import read_text_safe

    path = sidecar_path(Path(perf_path))
    if not path.is_file():
        return None, None
    text, problem = read_text_safe(path, workspace)
    if problem is not None or text is None:
        return None, f"{path.name} is unreadable ({problem.message if problem else 'no text'})"
    try:
        run = PairedRun.model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        return None, f"{path.name} is not a paired result ({str(exc).splitlines()[0]}); re-run the paired bench"
    if run.perf_sha256 is not None and run.perf_sha256 != sha256_of(Path(perf_path)):
        return None, f"{path.name} belongs to an earlier {Path(perf_path).name} (it was re-measured since)"
    return run, None


def reference_matches(run: PairedRun, reference_operator: Path | None) -> bool:
    """The paired reference is ``reference_operator`` as it is now (same bytes)."""
    if reference_operator is None or run.reference.sha256 is None:
        return False
    return sha256_of(reference_operator) == run.reference.sha256


def operator_of_perf(perf_path: Path) -> Path | None:
    """The operator a ``<stem>_perf.txt`` was measured from (``<stem>.py`` beside it), if any."""
    perf_path = Path(perf_path)
    if not perf_path.name.endswith("_perf.txt"):
        return None
    op = perf_path.with_name(perf_path.name[: -len("_perf.txt")] + ".py")
    return op if op.is_file() else None


# ----------------------------------------------------------------------- the bootstrap


def _side_arrays(blocks: Sequence[Block], side: Side) -> tuple[Any, Any]:
    import numpy as np

    values = [np.asarray(getattr(b, side), dtype=float) for b in blocks]
    samples = np.concatenate(values)
    owner = np.concatenate([np.full(len(v), i, dtype=np.int64) for i, v in enumerate(values)])
    return samples, owner


def _weighted_medians(samples: Any, owner: Any, weights: Any) -> Any:
    """Median of the pooled samples, each block counted ``weights[r, block]`` times, per row r."""
    import numpy as np

    order = np.argsort(samples, kind="stable")
    xs, bs = samples[order], owner[order]
    out = np.empty(weights.shape[0], dtype=float)
    for start in range(0, weights.shape[0], _MEDIAN_CHUNK):
        w = weights[start:start + _MEDIAN_CHUNK][:, bs]
        cum = np.cumsum(w, axis=1)
        half = cum[:, -1] / 2.0
        low = np.argmax(cum >= half[:, None] - 1e-9, axis=1)
        high = np.argmax(cum > half[:, None] + 1e-9, axis=1)  # the next sample that is counted
        exact = np.isclose(cum[np.arange(len(low)), low], half)  # even total: average the two middles
        out[start:start + len(low)] = np.where(exact, (xs[low] + xs[high]) / 2.0, xs[low])
    return out


def block_bootstrap(blocks: Sequence[Block], statistic: stats.Statistic, *,
                    n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = stats.DEFAULT_SEED) -> Any:
    """Bootstrap distribution of stat(reference*)/stat(candidate*) with whole blocks resampled
    (with replacement): both sides of a block always travel together, so a drift shared by the
    block cancels in every resample. stat = mean or median of the pooled samples."""
    import numpy as np

    if len(blocks) < 1:
        raise ValueError("no blocks")
    b, b_owner = _side_arrays(blocks, "reference")
    c, c_owner = _side_arrays(blocks, "candidate")
    if min(b.min(), c.min()) <= 0 or not (np.isfinite(b).all() and np.isfinite(c).all()):
        raise ValueError("samples must all be finite and > 0")
    n = len(blocks)
    rng = np.random.default_rng(stats.content_seed(np.concatenate([b, c]).tolist(), statistic, seed))
    picks = rng.integers(0, n, size=(n_resamples, n))
    weights = np.zeros((n_resamples, n), dtype=float)
    np.add.at(weights, (np.repeat(np.arange(n_resamples), n), picks.ravel()), 1.0)
    if statistic == "mean":
        b_sum = np.bincount(b_owner, weights=b, minlength=n)
        c_sum = np.bincount(c_owner, weights=c, minlength=n)
        b_cnt = np.bincount(b_owner, minlength=n).astype(float)
        c_cnt = np.bincount(c_owner, minlength=n).astype(float)
        return (weights @ b_sum / (weights @ b_cnt)) / (weights @ c_sum / (weights @ c_cnt))
    return _weighted_medians(b, b_owner, weights) / _weighted_medians(c, c_owner, weights)


def pooled(blocks: Sequence[Block]) -> tuple[list[float], list[float]]:
    """(reference samples, candidate samples) of every block, in block order."""
    return ([v for b in blocks for v in b.reference], [v for b in blocks for v in b.candidate])


# ------------------------------------------------------------------------- evaluation


def evaluate_paired(run: PairedRun, candidate: Sequence[PerfRecord], *, rule: Any = "compare-perf",
                    metric: str = "auto", skip_latency_errors: bool = False, with_ci: bool = True,
                    noise_margin: Any = None, sidecar: Path | None = None, compare_name: str | None = None,
                    ci_statistics: tuple[stats.Statistic, ...] | None = None) -> Any:
    """The candidate against the reference as measured beside it in one job (intervals over
    blocks), through the evaluation core: a ``RoundEvaluation`` with ``pairing`` set."""
    from helix_engine.perf.evaluation import DEFAULT_NOISE_MARGIN, STATISTICS, evaluate
    from helix_engine.perf.results import Pairing

    ev = evaluate(run.reference_records, candidate, rule=rule, metric=metric,
                  skip_latency_errors=skip_latency_errors, with_ci=with_ci,
                  noise_margin=DEFAULT_NOISE_MARGIN if noise_margin is None else noise_margin,
                  baseline_name=f"{run.reference.path} (paired)",
                  compare_name=compare_name or run.perf_file or "candidate",
                  ci_statistics=ci_statistics or STATISTICS, blocks=run.blocks())
    ev.pairing = Pairing(sidecar=str(sidecar) if sidecar is not None else None,
                         reference_operator=run.reference.path, reference_sha256=run.reference.sha256,
                         job_id=run.job_id, design=run.design)
    return ev


def attach_paired(outer: Any, candidate_perf: Path, reference_operator: Path | None,
                  candidate: Sequence[PerfRecord], *, workspace: Path | None = None, noise_margin: Any = None,
                  skip_latency_errors: bool = False,
                  ci_statistics: tuple[stats.Statistic, ...] | None = None) -> str | None:
    """Set ``outer.paired`` (a RoundEvaluation) when ``candidate_perf`` has a current sidecar
    whose reference is ``reference_operator`` as it is now, so verdicts use the paired data.
    Returns why a sidecar that exists could not be used (None otherwise)."""
    if outer.errors:
        return None
    run, why = read_paired(candidate_perf, workspace)
    if run is None:
        return why
    if not reference_matches(run, reference_operator):
        return None  # paired against another reference (e.g. the parent): not this comparison's
    metric = outer.requested if outer.requested in ("auto", "kernel", "total-op") else "auto"
    outer.paired = evaluate_paired(run, candidate, rule=outer.rule, metric=metric,
                                   skip_latency_errors=skip_latency_errors, noise_margin=noise_margin,
                                   sidecar=sidecar_path(Path(candidate_perf)), compare_name=str(candidate_perf),
                                   ci_statistics=ci_statistics)
    return None
