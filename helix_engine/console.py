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
