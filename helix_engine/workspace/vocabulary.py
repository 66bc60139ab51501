"""The fixed words of the workflow contract (round strategies, analysis policies), apart from
the pydantic models that check them: ``helix --help`` lists them as argparse choices and must
not import (or build) the models to do so."""

from __future__ import annotations

ROUND_STRATEGIES: tuple[str, ...] = (
    "exploration",
    "structural_change",
    "focused_tuning",
    "stabilization",
    "plateau_review",
)
#: Ordered from shallowest to deepest.
ANALYSIS_POLICIES: tuple[str, ...] = (
    "pattern_entry",
    "profile_required",
    "ir_required",
    "compiler_source_required",
)
