"""The cockpit raises the collector's young-generation threshold (helix_tui/gc_policy.py): a
reload's garbage is freed by reference counting, and a pass at the default threshold walked what
each reload had just built (issue 12). conftest puts the thresholds back after each test."""

from __future__ import annotations

import gc
from pathlib import Path

from helix_tui import gc_policy
from helix_tui.app import HelixApp


def test_the_cockpit_raises_the_young_threshold(tmp_path: Path) -> None:
    gc.set_threshold(700, 10, 10)
    HelixApp(tmp_path, watch=False)
    assert gc.get_threshold() == (gc_policy.GEN0_THRESHOLD, 10, 10)


def test_a_higher_threshold_is_kept() -> None:
    gc.set_threshold(gc_policy.GEN0_THRESHOLD * 3, 7, 9)
    gc_policy.apply()
    assert gc.get_threshold() == (gc_policy.GEN0_THRESHOLD * 3, 7, 9)


def test_collection_turned_off_stays_off() -> None:
    gc.set_threshold(0, 10, 10)
    gc_policy.apply()
    assert gc.get_threshold() == (0, 10, 10)
