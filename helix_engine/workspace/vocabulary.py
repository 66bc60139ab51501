"""The fixed words of the workflow contract (round strategies, analysis policies), apart from
the file models that check them: ``helix --help`` lists them as argparse choices and must
not import (or build) the models to do so."""

from __future__ import annotations

from typing import Literal, get_args

RoundStrategy = Literal[
    "exploration",
    "structural_change",
    "focused_tuning",
    "stabilization",
    "plateau_review",
]
#: Ordered from shallowest to deepest.
AnalysisPolicy = Literal[
    "pattern_entry",
    "profile_required",
    "ir_required",
    "compiler_source_required",
]
ROUND_STRATEGIES: tuple[RoundStrategy, ...] = get_args(RoundStrategy)
ANALYSIS_POLICIES: tuple[AnalysisPolicy, ...] = get_args(AnalysisPolicy)
