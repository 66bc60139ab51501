"""Symptom → candidate optimization patterns (spec upstream-profile-ir §D).

The upstream routing table names four patterns that match no pattern file: ``cache-use`` and
``gather-load`` do not exist at all, ``slice-coalesce`` and ``slice-intermediate`` are spelled
with underscores on disk. `ALIASES` resolves them so every suggestion either names a real file
or says plainly that none exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The 34 pattern files of the knowledge base (file stem = name).
PATTERN_FILES: frozenset[str] = frozenset({
    "a5-force-simt-only-discrete-access", "a5-simt-sliding-window-tuning", "accumulator-layout-alignment",
    "algebraic-optimization", "attention-cv-pipeline", "autotune", "block-pointer-dimensionality",
    "classic-matmul", "compile_hint", "diagonal", "discrete_memory_access", "effective-extent-tiling",
    "exact-tile-no-boundary-fast-path", "flat-index-decode-tiling", "grid-flatten-and-ub-buffering",
    "layout-materialization-elision", "loop-invariant-hoisting", "merge-adjacent-stores", "padded_row_col_copy",
    "parallel", "program-multiple-rows", "reduce-avoid-transpose-copy", "remove-implicit-transpose",
    "reorder-load", "scalar-latency-traps", "shift-2d-mask-to-1d-index-stream",
    "simt-clip-window-closed-reduction", "slice_coalesce", "slice_intermediate",
    "sliding-window-inner-w-slab-gather", "software-pipeline", "stencil-resize-gm-to-ub-staging", "tiling",
    "vec-cmp",
})
HIGH_PRIORITY: tuple[str, ...] = ("a5-force-simt-only-discrete-access", "autotune", "grid-flatten-and-ub-buffering")

#: Routing-table names → pattern file (None: the knowledge base has no such file).
ALIASES: dict[str, str | None] = {
    "cache-use": None,
    "gather-load": None,
    "slice-coalesce": "slice_coalesce",
    "slice-intermediate": "slice_intermediate",
}

SYMPTOMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "high-scalar-overhead": (
        "per-program scalar/control work outweighs vector/cube work",
        ("program-multiple-rows", "padded_row_col_copy", "vec-cmp", "classic-matmul",
         "simt-clip-window-closed-reduction"),
    ),
    "high-transfer-pressure": (
        "data movement dominates; time is much larger than bytes/bandwidth",
        ("tiling", "effective-extent-tiling", "cache-use", "algebraic-optimization", "discrete_memory_access",
         "gather-load", "sliding-window-inner-w-slab-gather", "slice-coalesce", "slice-intermediate"),
    ),
    "poor-locality": (
        "access order weakens reuse or causes bank conflicts",
        ("cache-use", "diagonal", "slice-coalesce", "discrete_memory_access"),
    ),
    "weak-pipeline-overlap": (
        "load → compute serialization; sync-dense stages near the hot loop",
        ("software-pipeline", "reorder-load", "classic-matmul"),
    ),
}


@dataclass(frozen=True)
class PatternRef:
    """A suggested pattern: the routing name, the file it resolves to, and why if none."""

    name: str
    pattern_file: str | None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pattern_file": self.pattern_file, "note": self.note}


def resolve_pattern(name: str) -> PatternRef:
    """Map a routing-table name to its pattern file, applying `ALIASES`."""
    if name in PATTERN_FILES:
        return PatternRef(name, name)
    if name in ALIASES:
        target = ALIASES[name]
        if target is None:
            return PatternRef(name, None, "no pattern file by this name exists; treat it as a hint only")
        return PatternRef(name, target, f"the pattern file is spelled {target}")
    return PatternRef(name, None, "unknown pattern name")


def candidates(symptom: str) -> list[PatternRef]:
    """Candidate patterns for one symptom, in table order. Unknown symptom → []."""
    entry = SYMPTOMS.get(symptom)
    return [resolve_pattern(n) for n in entry[1]] if entry else []


def route(symptoms: list[str]) -> list[dict[str, Any]]:
    """JSON rows ``{symptom, trigger, patterns[]}`` for the detected symptoms, in order."""
    return [
        {"symptom": s, "trigger": SYMPTOMS[s][0], "patterns": [p.to_json() for p in candidates(s)]}
        for s in symptoms
        if s in SYMPTOMS
    ]
