"""Printing helpers shared by every subcommand (JSON to stdout, text that fits 80 columns)."""

from __future__ import annotations

import json
import sys
from typing import Any

from helix_engine.sanitize import unguarded


def print_json(obj: Any) -> None:
    write_json_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def write_json_text(text: str) -> None:
    """Write JSON text past the CLI's final guard (``sanitize.GuardedStream``): json.dumps
    already escapes C0 controls, and escaping anything else the text way would break the JSON."""
    unguarded(sys.stdout).write(text)


def fmt_speedup(value: float | None) -> str:
    """Upstream style: ``1.23x``; ``unknown`` when there is no value."""
    return "unknown" if value is None else f"{value:.2f}x"


def fmt_improvement(value_pct: float | None) -> str:
    """Upstream style: signed, one decimal: ``+12.3%``."""
    return "unknown" if value_pct is None else f"{value_pct:+.1f}%"


def fmt_relative(speedup: float | None) -> str:
    """A speedup in words, for helix's own lines and panes (upstream's block keeps ``0.10x``):
    ``1.23x faster``, ``10.0x slower`` (a slowdown as the factor it costs, not ``0.10x``),
    ``same speed``; ``unknown`` without a number."""
    import math

    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return "unknown"
    if round(speedup, 2) == 1.0:
        return "same speed"
    factor, word = (speedup, "faster") if speedup > 1 else (1.0 / speedup, "slower")
    return f"{factor:.1f}x {word}" if round(factor, 2) >= 10 else f"{factor:.2f}x {word}"


def fmt_avg_change(value_pct: float | None) -> str:
    """The average improvement as helix's panes word it: ``avg improvement +28.3%``; a slowdown,
    whose percentage reads badly (``-1002.3%``), as the average time factor it stands for
    (mean(c/b) = 1 − pct/100): ``avg 11.0x slower``."""
    import math

    if value_pct is None or not math.isfinite(value_pct):
        return "avg improvement unknown"
    if value_pct >= 0:
        return f"avg improvement {value_pct:+.1f}%"
    factor = 1.0 - value_pct / 100.0
    return f"avg {factor:.1f}x slower" if round(factor, 2) >= 10 else f"avg {factor:.2f}x slower"
