"""The workspace file models as pydantic 2 models: the reference the filemodel classes are held
against (tests/unit/test_filemodel_reference.py). These are the definitions helix used before
issue 12 moved the models off pydantic (helix_engine/workspace/models.py and state/goals.py at
a0715eb), kept verbatim so a file reads and writes as it always did."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from helix_engine.workspace.vocabulary import AnalysisPolicy, RoundStrategy

Status = Literal["passed", "failed", "not_run"]
MetricSource = Literal["kernel", "total-op", "mixed"]
UPSTREAM_PERF_KEYS: tuple[str, ...] = (
    "case_label", "kernel_names", "kernel_source", "kernel_avg_time_us", "ops", "total_op_avg_time_us",
    "error_message", "case_wall_clock_seconds", "bench_mode",
)
HELIX_PERF_KEYS: tuple[str, ...] = ("samples_us", "stats", "method", "device", "backend", "helix_version",
                                    "context")


class _FileModel(BaseModel):
    # defer_build: a model's validator is built when it first validates, not at import (`helix
    # --help` and `helix status` pay only for the models they use)
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    def to_json(self) -> dict[str, Any]:
        """The dict to write back: declared fields that were set or required, then extras."""
        return self.model_dump(mode="json", exclude_unset=False, exclude_none=False, by_alias=False)


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

    @model_validator(mode="before")
    @classmethod
    def _legacy_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "comparison_target" in data:
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

    @field_validator("opt_note_updated", mode="before")
    @classmethod
    def _coerce_bool(cls, value: Any) -> bool:
        if isinstance(value, str):
            return value.strip().lower() in {"1", "true", "yes", "y", "on"}
        return bool(value)

    @field_validator("evidence_sources", mode="before")
    @classmethod
    def _strict_list(cls, value: Any) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("evidence_sources must be a list of strings")
        return value

    @model_validator(mode="after")
    def _benchmark_fields(self) -> RoundState:
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
        return self

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        optional = ("analysis_skipped_reason", "profile_dir", "ir_dir", "perf_analysis_path",
                    "perf_artifact", "comparison_target_path", "effective_metric_source")
        for key in optional:
            if data.get(key) is None and key not in self.model_fields_set:
                data.pop(key, None)
        return data


# ------------------------------------------------------------------------- .helix/state.json


StrategyUpdater = Literal["start-round", "set-current-round-state"]


class StrategyState(_FileModel):
    round_strategy: RoundStrategy
    analysis_policy: AnalysisPolicy
    reason: str
    updated_at: str
    updated_by: StrategyUpdater

    @field_validator("reason")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("reason must not be empty")
        return value


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
    baseline: BaselineProgress = Field(default_factory=BaselineProgress)
    rounds: dict[str, RoundEntry] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> WorkflowState:
        if self.phase == "round_active" and not isinstance(self.current_round, int):
            raise ValueError("phase is round_active but current_round is not a number")
        if self.phase != "round_active" and self.current_round is not None:
            raise ValueError(f"phase is {self.phase} but current_round is {self.current_round}")
        for key, entry in self.rounds.items():
            tail = entry.round_dir.rstrip("/").rsplit("opt-round-", 1)[-1]
            if tail != key:
                raise ValueError(f"rounds[{key!r}] has round_dir {entry.round_dir!r}; the key must equal its number")
        return self

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["rounds"] = {k: v.to_json() for k, v in self.rounds.items()}
        return data


# ------------------------------------------------------------------------------- perf records



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
    l2: str | None = None
    samples_us: list[float] | None = None
    stats: SampleStats | None = None
    method: str | None = None
    device: str | None = None
    backend: str | None = None
    helix_version: str | None = None
    context: MeasurementContext | None = None

    @field_validator("context", mode="before")
    @classmethod
    def _context(cls, value: Any) -> Any:
        """A context that does not validate is dropped, never a reason to lose the record."""
        if value is None or isinstance(value, MeasurementContext):
            return value
        try:
            return MeasurementContext.model_validate(value)
        except (ValueError, TypeError):
            return None

    @field_validator("case_label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @property
    def latency_id(self) -> str:
        return f"latency-{self.case_label}"

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


class Goals(BaseModel):
    """``.helix/goals.json``. A field left None sets no condition."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    schema_version: int = 1
    target_speedup: float | None = None
    max_rounds: int | None = None
    max_plausible_speedup: float | None = None  # added in issue 27 (the plausibility bound)
    updated_at: str | None = None
    updated_by: str | None = None

    @field_validator("max_plausible_speedup")
    @classmethod
    def _above_one(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 1):
            raise ValueError("max_plausible_speedup must be a number greater than 1")
        return value

    @field_validator("target_speedup")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError("target_speedup must be a number greater than 0")
        return value

    @field_validator("max_rounds")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("max_rounds must be at least 1")
        return value

    @property
    def any(self) -> bool:
        return self.target_speedup is not None or self.max_rounds is not None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
