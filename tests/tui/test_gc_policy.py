"""The cockpit raises the collector's young-generation threshold (helix_tui/gc_policy.py): a
reload's garbage is freed by reference counting, and a pass at the default threshold walked what
each reload had just built (issue 12). conftest puts the thresholds back after each test."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import pytest

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


def test_a_full_load_is_frozen_before_collection_resumes(tmp_path: Path) -> None:
    """What the block made and kept is out of the collector's reach, and no pass ran inside it."""
    passes: list[str] = []

    def count(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(phase)

    gc.unfreeze()
    gc.callbacks.append(count)
    try:
        with gc_policy.frozen_after():
            kept = [[i] for i in range(50_000)]  # far past any threshold: a pass, were one allowed
        assert not passes
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()


def test_a_full_load_leaves_collection_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with gc_policy.frozen_after():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_cockpit_load_worker_freezes_the_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entered: list[bool] = []
    real = gc_policy.frozen_after

    def watched() -> contextlib.AbstractContextManager[None]:
        entered.append(True)
        return real()

    monkeypatch.setattr(gc_policy, "frozen_after", watched)
    app = HelixApp(tmp_path, watch=False)
    posted: list[object] = []
    monkeypatch.setattr(app, "post_message", posted.append)
    HelixApp.load_full.__wrapped__(app)  # the worker's body, on this thread
    gc.unfreeze()
    assert entered and posted
