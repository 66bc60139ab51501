"""Typed results of the evaluation core (perf/evaluation.py) and of the promotion rule.

Every screen and file that shows a speedup, an interval, a verdict, a promotion or a best round
reads these fields; nothing outside the core computes them. Each printed interval belongs to
one statistic, and lies next to that statistic's point: ``SpeedupEstimate`` keeps the three
together (and refuses an interval that misses its point).

Plain slotted dataclasses (DESIGN: in-memory views and comparisons are), not pydantic models:
only the core builds them, from values already validated where they were read, ~20 a round on
every load; a model cost ~4 µs each to build (RoundPromotion's measurement) and one more model
class to define at import. The one place they come back from a file, the round cache, keeps them
pickled and sealed under this user's key (workspace/sealed.py): only helix's own objects return.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any, Literal

from helix_engine.record import record

Statistic = Literal["mean", "median"]
#: "unpaired": the two sides were measured in separate jobs and no measured drift between jobs
#: widens the margin, so the interval (within each job) cannot say faster or slower
Verdict = Literal["faster", "slower", "within-noise", "unpaired"]
Rule = Literal["compare-perf", "status"]
PromotionStatus = Literal["current best", "validated branch", "not promoted"]
Basis = Literal["interval", "point", "none"]

CURRENT_BEST: PromotionStatus = "current best"
VALIDATED: PromotionStatus = "validated branch"
NOT_PROMOTED: PromotionStatus = "not promoted"
#: Names of the statistics as columns and lines label them.
STATISTIC_LABEL: dict[str, str] = {"mean": "ratio of means", "median": "ratio of medians"}


class _Result:
    """What the result classes share: their JSON form (``to_json``, defaults left out when asked)."""

    __slots__ = ()

    def to_json(self, *, exclude_defaults: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if exclude_defaults and _is_default(f, value):
                continue
            out[f.name] = _dumped(value, exclude_defaults)
        return out


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False


def _dumped(value: Any, exclude_defaults: bool) -> Any:
    if isinstance(value, _Result):
        return value.to_json(exclude_defaults=exclude_defaults)
    if isinstance(value, list):
        return [_dumped(v, exclude_defaults) for v in value]
    if isinstance(value, dict):
        return {str(k): _dumped(v, exclude_defaults) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a RoundPromotion in Promotion.rounds
        return _dumped(dataclasses.asdict(value), exclude_defaults)
    return value


@record(slots=True, kw_only=True)
class Interval(_Result):
    low: float
    high: float
    confidence: float = 0.95


@record(slots=True, kw_only=True)
class SpeedupEstimate(_Result):
    """One speedup statistic (baseline/candidate): its point, its own interval, its verdict."""

    statistic: Statistic
    point: float
    interval: Interval | None = None
    verdict: Verdict | None = None  # None without an interval (nothing to judge noise by)

    def __post_init__(self) -> None:
        if self.interval is not None and not self.interval.low <= self.point <= self.interval.high:
            raise ValueError(f"interval [{self.interval.low}, {self.interval.high}] excludes its point "
                             f"{self.point}")

    @property
    def ci95(self) -> tuple[float, float] | None:
        return (self.interval.low, self.interval.high) if self.interval is not None else None


@record(slots=True, kw_only=True)
class CaseProblem(_Result):
    """A case that could not be evaluated: which, on which side, and a sentence saying what to do."""

    latency_id: str
    side: Literal["baseline", "compare", "both"]
    value: float | None = None  # the time that stopped it: may be NaN or infinite
    message: str

    def to_json(self, *, exclude_defaults: bool = False) -> dict[str, Any]:
        """As every result, a non-finite value as its name ("nan", "inf", "-inf"): strict JSON has
        no such number."""
        out = super(CaseProblem, self).to_json(exclude_defaults=exclude_defaults)  # noqa: UP008 - slots: no bare super()
        if isinstance(self.value, float) and not math.isfinite(self.value):
            out["value"] = repr(self.value)
        return out


@record(slots=True, kw_only=True)
class CaseEvaluation(_Result):
    """One compared case. ``delta_pct`` = (c−b)/b·100 (negative = faster)."""

    latency_id: str
    baseline_us: float
    compare_us: float
    metric: Literal["kernel", "total-op"]
    delta_pct: float
    mean: SpeedupEstimate  # b/c of the records' averages: upstream's number
    median: SpeedupEstimate | None = None  # median(b samples)/median(c samples) when both have samples
    baseline_display: str = ""  # upstream text, e.g. "10.0", "total-op=12.5", "NA (total-op=9.0)"
    compare_display: str = ""
    n_baseline: int = 0  # samples used for the intervals (0: none)
    n_compare: int = 0
    n_blocks: int = 0  # paired blocks the intervals resampled (0: not a paired comparison)
    noise_margin: float | None = None  # the margin the ratio of means' verdict used
    median_noise_margin: float | None = None  # the margin the ratio of medians' verdict used

    @property
    def speedup(self) -> float:
        """Upstream's per-case speedup (the ratio of means)."""
        return self.mean.point


@record(slots=True, kw_only=True)
class Pairing(_Result):
    """Where a paired comparison came from: one job measured both sides, interleaved in blocks."""

    sidecar: str | None = None  # the ``*.paired.json`` file
    reference_operator: str
    reference_sha256: str | None = None
    job_id: str | None = None
    design: str = ""


@record(slots=True, kw_only=True)
class RoundEvaluation(_Result):
    """A candidate's perf records against a reference's, under one rule and metric choice.

    ``paired``: the same comparison from a paired run (reference measured beside the candidate in
    one job); when present, verdicts and promotion read it (``judged``), and the outer numbers stay
    upstream's (the two perf files)."""

    rule: Rule = "compare-perf"
    requested: str
    metric_source: Literal["kernel", "total-op", "mixed"] | None = None
    cases: list[CaseEvaluation] = field(default_factory=list)
    avg_improvement_pct: float | None = None
    geomean: SpeedupEstimate | None = None  # geomean of the ratios of means: upstream's number
    geomean_median: SpeedupEstimate | None = None
    mean_latency_us: float | None = None
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[CaseProblem] = field(default_factory=list)
    ci_note: str | None = None
    noise_margin: float = 0.01  # the geomean's margin (the mean of its cases' margins)
    margin_source: Literal["default", "calibrated"] = "default"
    margin_text: str | None = None  # e.g. "default 1%", "calibrated per case (1.0%-2.4%, …)"
    context_warning: str | None = None  # the two sides were measured apart (perf/context.py)
    pairing: Pairing | None = None  # set on a paired comparison
    paired: RoundEvaluation | None = None

    @property
    def geomean_speedup(self) -> float | None:
        return self.geomean.point if self.geomean is not None else None

    @property
    def judged(self) -> RoundEvaluation:
        """The comparison verdicts rest on: the paired one when there is one."""
        return self.paired if self.paired is not None else self

    @property
    def passed(self) -> bool:
        return not self.errors and not self.skipped and bool(self.cases)


@record(slots=True, eq=False)
class RoundPromotion:
    """What the promotion rule decided for one round, and on which numbers. A plain dataclass,
    not a validated model: only the promotion rule builds it, from estimates already validated,
    about once a round on every load and once a later round when a reload changes the best
    (~0.6 µs here against ~4 µs a model; issue 12)."""

    round: int
    status: PromotionStatus
    reason: str
    vs_baseline: SpeedupEstimate | None = None  # geomean (ratio of means) against the baseline
    vs_baseline_paired: bool = False  # vs_baseline comes from the paired run (both sides in one job)
    vs_previous_best: SpeedupEstimate | None = None  # geomean against the best before this round
    previous_best: int | None = None  # None: compared with no round (the first best, or not past the baseline)
    basis: Basis = "none"  # what the decision could rest on

    def __eq__(self, other: object) -> bool:
        """Field by field, whichever of the two classes (a LaterPromotion equals its eager entry)."""
        if not isinstance(other, RoundPromotion):
            return NotImplemented
        return _fields(self) == _fields(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


def _fields(p: RoundPromotion) -> tuple[Any, ...]:
    return (p.round, p.status, p.reason, p.vs_baseline, p.vs_baseline_paired, p.vs_previous_best, p.previous_best,
            p.basis)


_REASON = RoundPromotion.__dict__["reason"]  # the slots LaterPromotion fills when first read
_VS_BEST = RoundPromotion.__dict__["vs_previous_best"]


class LaterPromotion(RoundPromotion):
    """A round the promotion rule has decided against the best before it without computing their
    comparison: the decision rests on a bound (perf/bound.py), and the comparison and the reason it
    goes into are computed when one of them is first read (``make``: (function, *its arguments):
    function(*arguments) → (vs_previous_best, reason)). A reload that makes a mid round of 1000 the best re-decides ~500
    later rounds; a screen reads a few of them. Equal, field for field, to the eager entry."""

    __slots__ = ("_make",)

    def __init__(self, make: tuple[Any, ...], round: int,
                 status: PromotionStatus, vs_baseline: SpeedupEstimate | None, previous_best: int | None,
                 basis: Basis) -> None:
        # the slots set directly (not through the dataclass __init__): the plain ones by assignment,
        # the two the properties below stand in front of through their slot descriptors
        self.round = round
        self.status = status
        self.vs_baseline = vs_baseline
        self.vs_baseline_paired = False
        self.previous_best = previous_best
        self.basis = basis
        _REASON.__set__(self, "")
        _VS_BEST.__set__(self, None)
        #: (function, *its arguments): one tuple, not a closure and its cells, nor a tuple in a tuple (a
        #: reload that moves the best makes ~500 of these, and the collector looks at each object it
        #: allocates)
        self._make: tuple[Any, ...] | None = make

    def _made(self) -> None:
        """Compute the pending fields, then mark them made: a second thread reading meanwhile (the
        cockpit's screen while a worker reloads) computes them too, the same values, and never reads
        them unset."""
        make = self._make
        if make is not None:
            vs_best, reason = make[0](*make[1:])
            _VS_BEST.__set__(self, vs_best)
            _REASON.__set__(self, reason)
            self._make = None

    @property
    def reason(self) -> str:
        self._made()
        return _REASON.__get__(self)

    @reason.setter
    def reason(self, value: str) -> None:
        self._make = None
        _REASON.__set__(self, value)

    @property
    def vs_previous_best(self) -> SpeedupEstimate | None:
        self._made()
        return _VS_BEST.__get__(self)

    @vs_previous_best.setter
    def vs_previous_best(self, value: SpeedupEstimate | None) -> None:
        self._make = None
        _VS_BEST.__set__(self, value)

    @property
    def pending(self) -> bool:
        """Whether the comparison with the best is still to be computed (tests, benchmarks)."""
        return self._make is not None


@record(slots=True, kw_only=True)
class Promotion(_Result):
    """The promotion rule over a workspace's rounds, in round order."""

    noise_margin: float
    rounds: dict[int, RoundPromotion] = field(default_factory=dict)
    best_round: int | None = None
    margin_source: Literal["default", "calibrated"] = "default"
    margin_text: str | None = None  # e.g. "default 1%", "calibrated per case (1.0%-2.4%, …)"

    @property
    def best_label(self) -> str:
        """``round-N``, or ``baseline`` when no round qualified (the ledger's Final best round)."""
        return f"round-{self.best_round}" if self.best_round is not None else "baseline"

    @property
    def validated(self) -> list[int]:
        return [n for n, p in sorted(self.rounds.items()) if p.status == VALIDATED]

    def status_of(self, n: int) -> PromotionStatus:
        found = self.rounds.get(n)
        return found.status if found is not None else NOT_PROMOTED

    def best_geomean(self) -> SpeedupEstimate | None:
        if self.best_round is None:
            return None
        return self.rounds[self.best_round].vs_baseline

    def best_geomean_paired(self) -> bool:
        """Whether best_geomean() is the paired run's geomean, not the two perf files' (the
        upstream "Geomean speedup" line reads the files: the two can differ)."""
        return self.best_round is not None and self.rounds[self.best_round].vs_baseline_paired
