"""The cockpit raises the collector's young-generation threshold (helix_tui/gc_policy.py): a
reload's garbage is freed by reference counting, and a pass at the default threshold walked what
each reload had just built (issue 12)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_tui import gc_policy
from helix_tui.app import HelixApp


@pytest.fixture()
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_cockpit_raises_the_young_threshold(thresholds: None, tmp_path: Path) -> None:
    gc.set_threshold(700, 10, 10)
    HelixApp(tmp_path, watch=False)
    assert gc.get_threshold() == (gc_policy.GEN0_THRESHOLD, 10, 10)


def test_a_higher_threshold_is_kept(thresholds: None) -> None:
    gc.set_threshold(gc_policy.GEN0_THRESHOLD * 3, 7, 9)
    gc_policy.apply()
    assert gc.get_threshold() == (gc_policy.GEN0_THRESHOLD * 3, 7, 9)
