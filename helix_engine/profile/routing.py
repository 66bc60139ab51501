"""Symptom → candidate optimization patterns (spec upstream-profile-ir §D), resolved to the
cards of helix's knowledge base (`helix_engine.knowledge`, ``helix patterns show NAME``).

The upstream routing table names four patterns that match no upstream pattern file:
``cache-use`` and ``gather-load`` do not exist there at all, ``slice-coalesce`` and
``slice-intermediate`` are spelled with underscores. `ALIASES` maps each to the helix card
that covers it, and `resolve_pattern` checks the card is shipped, so every suggestion names
a card that exists (a test holds every routed name to that).
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

#: Routing-table names that are no card name → the card that covers them.
ALIASES: dict[str, str] = {
    "cache-use": "on-chip-reuse",  # upstream has no such file: keeping reused data on chip
    "gather-load": "discrete_memory_access",  # upstream has no such file: indexed GM loads
    "slice-coalesce": "slice_coalesce",
    "slice-intermediate": "slice_intermediate",
}

#: Routing symptoms → the symptom card that explains them and lists what to read next.
SYMPTOM_CARDS: dict[str, str] = {
    "high-scalar-overhead": "scalar-bound",
    "high-transfer-pressure": "memory-bound",
    "poor-locality": "memory-bound",
    "weak-pipeline-overlap": "transfer-pipeline-imbalance",
    "at-bandwidth-roof": "memory-bound",
    "at-compute-roof": "compute-bound",
    "far-below-roofs": "launch-bound",
    "many-launches": "launch-bound",
    "short-kernels": "launch-bound",
}

#: Bound classifications (`signals.CLASSIFICATIONS`) → their symptom card.
BOUND_CARDS: dict[str, str] = {
    "compute-bound": "compute-bound",
    "memory-bound": "memory-bound",
    "scalar-overhead": "scalar-bound",
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
    # raised from launch counts and times (signals.launch_symptoms), on every backend
    "many-launches": (
        "several kernel or framework-op launches per call: launch cost, and data round trips between them",
        ("fuse-launches", "layout-materialization-elision", "reduce-avoid-transpose-copy", "precision-and-casts",
         "program-multiple-rows"),
    ),
    "short-kernels": (
        "kernels that run shorter than a launch costs: the time goes to launching, not computing",
        ("fuse-launches", "program-multiple-rows", "grid-size-and-persistent-programs"),
    ),
    # raised by the roofline (perf/roofline.py): measured fractions of the device's peaks
    "at-bandwidth-roof": (
        "achieved bandwidth at the device's copy bandwidth: only moving fewer bytes helps",
        ("fuse-launches", "on-chip-reuse", "algebraic-optimization", "precision-and-casts",
         "layout-materialization-elision"),
    ),
    "at-compute-roof": (
        "achieved throughput at the device's matmul peak: do less work or use a narrower type",
        ("algebraic-optimization", "precision-and-casts", "classic-matmul", "autotune"),
    ),
    "far-below-roofs": (
        "far below both the bandwidth and the compute peak: launches or scalar work take the time",
        ("fuse-launches", "program-multiple-rows", "grid-size-and-persistent-programs", "scalar-latency-traps",
         "loop-invariant-hoisting"),
    ),
}


@dataclass(frozen=True)
class PatternRef:
    """A suggested pattern: the routing name, the card it resolves to (``pattern_file``, the
    key kept from before the cards existed), and a note when the two differ or none exists."""

    name: str
    pattern_file: str | None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pattern_file": self.pattern_file, "note": self.note}


def resolve_pattern(name: str) -> PatternRef:
    """Map a routing-table name to its knowledge card, applying `ALIASES`; a name whose card
    is not shipped resolves to None (never a card that does not exist)."""
    from helix_engine.knowledge.cards import card_names, has_card

    if name in PATTERN_FILES or (name not in ALIASES and name in card_names("pattern")):  # or a helix topic card
        target, note = name, None
    elif name in ALIASES:
        target = ALIASES[name]
        note = (f"the card is spelled {target}" if target.replace("_", "-") == name
                else f"upstream has no pattern by this name; the card {target} covers it")
    else:
        return PatternRef(name, None, "unknown pattern name")
    if not has_card(target):
        return PatternRef(name, None, f"no knowledge card {target} is installed")
    return PatternRef(name, target, note)


def candidates(symptom: str) -> list[PatternRef]:
    """Candidate patterns for one symptom, in table order. Unknown symptom → []."""
    entry = SYMPTOMS.get(symptom)
    return [resolve_pattern(n) for n in entry[1]] if entry else []


def route(symptoms: list[str]) -> list[dict[str, Any]]:
    """JSON rows ``{symptom, trigger, symptom_card, patterns[]}`` for the detected symptoms, in order."""
    return [
        {"symptom": s, "trigger": SYMPTOMS[s][0], "symptom_card": SYMPTOM_CARDS.get(s),
         "patterns": [p.to_json() for p in candidates(s)]}
        for s in symptoms
        if s in SYMPTOMS
    ]
