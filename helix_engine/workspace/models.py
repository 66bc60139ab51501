"""Typed models of the workspace contract.

File-boundary models are ``filemodel.FileModel`` classes (declared fields checked on read, with
pydantic's lax rules; unknown keys kept so fields we do not know survive a load → save round trip:
upstream tools may add keys). Not pydantic: importing it and building these validators was ~60 ms
of `helix status` (issue 12, filemodel.py). In-memory views (snapshot, comparison) are plain
dataclasses: they are built often and never written as-is.

Field names, enums and required-ness follow the upstream state spec; see the docstring of each
model for the rules it enforces.
"""

from __future__ import annotations

import math
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

# The evaluation core's typed results (perf/results.py imports nothing from here); the old
# names CaseDelta and Comparison stay for callers.
from helix_engine.perf.results import CaseEvaluation as CaseDelta  # noqa: F401
from helix_engine.perf.results import Promotion, RoundPromotion  # noqa: F401
from helix_engine.perf.results import RoundEvaluation as Comparison
from helix_engine.record import record
from helix_engine.workspace import filemodel
from helix_engine.workspace.filemodel import FileModel
from helix_engine.workspace.problem import Problem  # noqa: F401 - re-exported (readers import it from here)
from helix_engine.workspace.vocabulary import (  # noqa: F401 - the tuples are re-exported
    ANALYSIS_POLICIES,
    ROUND_STRATEGIES,
    AnalysisPolicy,
    RoundStrategy,
)

if TYPE_CHECKING:
    from helix_engine.workspace.status_rules import Evaluation as WorkspaceEvaluation

Status = Literal["passed", "failed", "not_run"]
STATUSES: tuple[str, ...] = ("passed", "failed", "not_run")
MetricSource = Literal["kernel", "total-op", "mixed"]
METRIC_SOURCES: tuple[str, ...] = ("kernel", "total-op", "mixed")
PHASES: tuple[str, ...] = ("baseline", "awaiting_round_start", "round_active")
BENCH_MODES: tuple[str, ...] = (
    "torch-npu-profiler",
    "msprof",
    "torch-profiler",
    "device-event",
    "perf-counter",
)


class _FileModel(FileModel):
    def to_json(self) -> dict[str, Any]:
        """The dict to write back: declared fields, then the unknown keys it was read with."""
        return self.model_dump(mode="json")


# --------------------------------------------------------------------------- baseline/state.json


class BaselineState(_FileModel):
    """``baseline/state.json``. Every field is required upstream except the two notes."""

    baseline_kind: str
    source_operator: str
    baseline_operator: str
    test_file: str
    test_mode: str
    bench_file: str
    bench_mode: str
    perf_artifact: str
    correctness_status: Status
    benchmark_status: Status
    baseline_established: bool
    preparation_notes: str | None = None
    baseline_repairs_summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for key in ("preparation_notes", "baseline_repairs_summary"):
            if data.get(key) is None and key not in self.model_fields_set:
                data.pop(key, None)
        return data


# --------------------------------------------------------------------- opt-round-N/round-state.json


class RoundState(_FileModel):
    """``opt-round-N/round-state.json``.

    ``perf_artifact``, ``comparison_target_path`` (legacy alias ``comparison_target``; an error
    when both are present and differ) and ``effective_metric_source`` are required only when
    ``benchmark_status`` is ``passed``. ``opt_note_updated`` is coerced to bool.
    """

    round: str
    parent_round: str
    hypothesis: str
    evidence_sources: list[str]
    correctness_status: Status
    benchmark_status: Status
    summary_path: str
    opt_note_updated: bool
    perf_artifact: str | None = None
    comparison_target_path: str | None = None
    effective_metric_source: MetricSource | None = None
    analysis_skipped_reason: str | None = None
    profile_dir: str | None = None
    ir_dir: str | None = None
    perf_analysis_path: str | None = None

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "comparison_target" in data:
            data = dict(data)
            legacy = data.pop("comparison_target")
            current = data.get("comparison_target_path")
            if current is not None and legacy is not None and current != legacy:
                raise ValueError(
                    "comparison_target and comparison_target_path are both set and differ; "
                    "keep only comparison_target_path"
                )
            if current is None:
                data["comparison_target_path"] = legacy
        return data

    def _validate(self) -> None:
        if self.benchmark_status == "passed":
            missing = [
                name
                for name in ("perf_artifact", "comparison_target_path", "effective_metric_source")
                if getattr(self, name) in (None, "")
            ]
            if missing:
                raise ValueError(
                    "benchmark_status is passed but these fields are missing: " + ", ".join(missing)
                )

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        optional = ("analysis_skipped_reason", "profile_dir", "ir_dir", "perf_analysis_path",
                    "perf_artifact", "comparison_target_path", "effective_metric_source")
        for key in optional:
            if data.get(key) is None and key not in self.model_fields_set:
                data.pop(key, None)
        return data


def _coerce_bool(value: Any) -> bool:
    """``opt_note_updated``: any truthy value (a word such as "yes" for a string) counts."""
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "y", "on"}
    return bool(value)


def _strict_list(value: Any) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("evidence_sources must be a list of strings")
    return value


RoundState._field_before = {"opt_note_updated": _coerce_bool, "evidence_sources": _strict_list}


# ------------------------------------------------------------------------- .helix/state.json


StrategyUpdater = Literal["start-round", "set-current-round-state"]


class StrategyState(_FileModel):
    round_strategy: RoundStrategy
    analysis_policy: AnalysisPolicy
    reason: str
    updated_at: str
    updated_by: StrategyUpdater


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("reason must not be empty")
    return value


StrategyState._field_after = {"reason": _non_empty}


class RoundEntry(_FileModel):
    status: Literal["active", "passed", "failed"]
    round_dir: str
    strategy_state: StrategyState | None = None
    started_at: str | None = None
    ended_at: str | None = None
    #: helix's addition: the parent start-round built the candidate from ("baseline" or
    #: "opt-round-M"), so the round has a place in the tree before round-state.json exists
    parent_round: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for key in ("strategy_state", "started_at", "ended_at", "parent_round"):
            if data.get(key) is None and key not in self.model_fields_set:
                data.pop(key, None)
        return data


class BaselineProgress(_FileModel):
    status: Literal["pending", "passed"] = "pending"
    submitted_at: str | None = None


class WorkflowState(_FileModel):
    """``.helix/state.json`` (schema_version 1).

    ``current_round`` is an int exactly when ``phase`` is ``round_active``; each key of
    ``rounds`` equals the number in its ``round_dir``.
    """

    schema_version: Literal[1] = 1
    run_id: str
    phase: Literal["baseline", "awaiting_round_start", "round_active"] = "baseline"
    current_round: int | None = None
    baseline: BaselineProgress = filemodel.field(default_factory=BaselineProgress)
    rounds: dict[str, RoundEntry] = filemodel.field(default_factory=dict)

    def _validate(self) -> None:
        if self.phase == "round_active" and not isinstance(self.current_round, int):
            raise ValueError("phase is round_active but current_round is not a number")
        if self.phase != "round_active" and self.current_round is not None:
            raise ValueError(f"phase is {self.phase} but current_round is {self.current_round}")
        for key, entry in self.rounds.items():
            tail = entry.round_dir.rstrip("/").rsplit("opt-round-", 1)[-1]
            if tail != key:
                raise ValueError(f"rounds[{key!r}] has round_dir {entry.round_dir!r}; the key must equal its number")

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["rounds"] = {k: v.to_json() for k, v in self.rounds.items()}
        return data


# ------------------------------------------------------------------------------- perf records

UPSTREAM_PERF_KEYS: tuple[str, ...] = (
    "case_label",
    "kernel_names",
    "kernel_source",
    "kernel_avg_time_us",
    "ops",
    "total_op_avg_time_us",
    "error_message",
    "case_wall_clock_seconds",
    "bench_mode",
)
HELIX_PERF_KEYS: tuple[str, ...] = ("l2", "samples_us", "stats", "method", "device", "backend", "helix_version",
                                    "context")


class SampleStats(_FileModel):
    median: float
    mean: float
    p10: float
    p90: float
    stdev: float
    n: int
    n_outliers: int = 0


class OpTime(_FileModel):
    op_type: str
    avg_time_us: float | None = None


class MeasurementContext(_FileModel):
    """Where and when a case was measured (perf record key ``context``; best effort, every field
    optional). Two perf files measured at different times, hosts, devices or loads drift apart by
    more than their intervals say; compare-perf and the cockpit warn (perf/context.py)."""

    time: str | None = None  # ISO 8601 UTC, when the case finished
    host: str | None = None
    device_id: str | None = None  # e.g. "cuda:0 GPU-4f2c…", "npu:3", "cpu"
    load_avg: float | None = None  # 1-minute load average of the host
    cpu_count: int | None = None
    sm_clock_mhz: float | None = None  # GPU clocks when readable (nvidia-smi / torch.cuda)
    mem_clock_mhz: float | None = None


class PerfRecord(_FileModel):
    """One line of a ``*_perf.txt`` JSONL file (one bench case).

    Upstream keys first, in upstream order; then helix's own (all optional, so upstream files
    load and upstream tools can read ours). Timing values are kept as read; validity (NaN, zero,
    negative) is judged by the comparison, which turns bad values into case errors.
    """

    case_label: str
    kernel_names: list[str] | None = None
    kernel_source: str | None = None
    kernel_avg_time_us: float | None = None
    ops: list[OpTime] | None = None
    total_op_avg_time_us: float | None = None
    error_message: str | None = None
    case_wall_clock_seconds: float | None = None
    bench_mode: str | None = None
    #: the cache state the case was measured in: "flushed" (the L2 written over before every
    #: timed repetition) or "warm"; None in files from before it was recorded (cache_state())
    l2: Literal["flushed", "warm"] | None = None
    samples_us: list[float] | None = None
    stats: SampleStats | None = None
    method: str | None = None
    device: str | None = None
    backend: str | None = None
    helix_version: str | None = None
    context: MeasurementContext | None = None
    __slots__ = ("_helix_source",)  # where it was read from (perf/artifact.py's record_source)

    @property
    def latency_id(self) -> str:
        return f"latency-{self.case_label}"

    @property
    def cache_state(self) -> str | None:
        """``l2``, or for a record from before it was recorded what its bench mode did: do_bench
        (device-event) always flushed, every other mode ran warm; None without a bench mode."""
        if self.l2 is not None:
            return self.l2
        if self.bench_mode is None:
            return None
        return "flushed" if self.bench_mode == "device-event" else "warm"

    def to_json(self) -> dict[str, Any]:
        """Upstream keys always (null when unknown), then helix keys when set, then extras."""
        full = self.model_dump(mode="json")
        out: dict[str, Any] = {k: full.get(k) for k in UPSTREAM_PERF_KEYS}
        for key in HELIX_PERF_KEYS:
            if full.get(key) is not None:
                out[key] = full[key]
        for key, value in (self.model_extra or {}).items():
            out[key] = value
        return out


def _context(value: Any) -> Any:
    """A context that does not validate is dropped, never a reason to lose the record."""
    if value is None or isinstance(value, MeasurementContext):
        return value
    try:
        return MeasurementContext.model_validate(value)
    except (ValueError, TypeError, ArithmeticError):
        return None


def _label(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


PerfRecord._field_before = {"context": _context, "case_label": _label}


def finite_positive(value: float | None) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


# --------------------------------------------------------------------------- snapshot views


@record
class BaselineView:
    path: Path
    state: BaselineState | None
    operator_file: Path | None
    perf_file: Path | None
    perf: list[PerfRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@record
class RoundView:
    number: int
    path: Path
    state: RoundState | None = None
    workflow_status: str | None = None  # active | passed | failed from .helix/state.json
    parent: str | None = None  # "baseline" or "opt-round-M"
    #: where ``parent`` comes from: "round-state" (round-state.json), "start-round" (recorded in
    #: .helix/state.json when the round was started), "" (neither: "baseline" is only a default)
    parent_source: str = ""
    operator_file: Path | None = None
    perf_file: Path | None = None
    comparison: Comparison | None = None  # against the baseline (the status rule), without its cases
    # what the promotion rule decided for it is WorkspaceSnapshot.promotion.rounds[number], not kept
    # here: a new best changes the entries of every later round (~500 at 1000 rounds), not their views
    terminal: bool = False
    completed: bool = False
    problems: list[Problem] = field(default_factory=list)
    #: identities (records.file_id) of the files this view was read from, taken before reading
    #: them: round-state.json, the perf file (as shown) and its paired sidecar (round_cache keys)
    inputs: tuple[Any, ...] = ()
    #: the content digest of the perf records as read (interval_cache.records_digest): what the
    #: promotion rule keys its judgements by, so a same-bytes rewrite re-judges no later round
    records_digest: str | None = field(default=None, compare=False)
    #: the records as the status rule pairs them (evaluation.CaseValues, status_pairing.case_values),
    #: or their stored form in .helix/cache/rounds.sealed until first asked (status_rules.view_values);
    #: None: none (compared from the records)
    values: Any = field(default=None, repr=False, compare=False)
    #: the perf records while a load still needs them; None: read on demand (``perf``)
    records: list[PerfRecord] | None = field(default=None, repr=False, compare=False)

    @property
    def perf(self) -> list[PerfRecord]:
        """The round's perf records. A loaded snapshot keeps a summary per round, not its records
        (a 1000-round workspace held ~20k records): they are read here when a pane or a
        comparison asks (the last few lists read are kept, workspace/records.py)."""
        if self.records is not None:
            return self.records
        if self.perf_file is None:
            return []
        from helix_engine.workspace.records import read_records

        return read_records(self.perf_file, self.path.parent)

    @perf.setter
    def perf(self, value: list[PerfRecord]) -> None:
        self.records = value

    @property
    def name(self) -> str:
        return f"opt-round-{self.number}"

    @property
    def label(self) -> str:
        return f"round-{self.number}"


@record
class WorkspaceSnapshot:
    root: Path
    operator_file: Path | None = None
    baseline: BaselineView | None = None
    rounds: dict[int, RoundView] = field(default_factory=dict)
    workflow: WorkflowState | None = None
    best_round: int | None = None  # upstream's numeric best (highest geomean)
    logged_best: str | None = None
    problems: list[Problem] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    evaluation: WorkspaceEvaluation | None = None  # the status rules over every round
    promotion: Promotion | None = None  # the promotion rule over every round

    @property
    def promoted_best_round(self) -> int | None:
        """The round the promotion rule calls "current best" (None: the baseline)."""
        return self.promotion.best_round if self.promotion is not None else None

    @property
    def name(self) -> str:
        # Path(".").name is "": `helix status` run inside a workspace must still name it.
        return self.root.name or self.root.absolute().name

    def children(self, parent: str) -> list[int]:
        """Round numbers whose parent is ``parent`` ("baseline" or "opt-round-M"), sorted."""
        return sorted(n for n, r in self.rounds.items() if r.parent == parent)
