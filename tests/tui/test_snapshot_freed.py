"""The cockpit freezes what is alive when a snapshot is loaded out of the garbage collector's reach
(a full collection would walk every record of a 1000-round workspace on the UI thread). That is
only safe because a snapshot holds no reference cycle: a snapshot nothing refers to any more is
freed by reference counting alone, frozen or not."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from helix_engine.workspace.snapshot import load_workspace, reload
from helix_tui.app import HelixApp

from builders import Case, RoundSpec, build_workspace, write_perf
from cockpit_helpers import settle


async def test_the_cockpit_freezes_after_the_load(ws: Path) -> None:
    gc.unfreeze()
    app = HelixApp(ws, watch=False, job_poll_s=0)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def _samples(value: float) -> Case:
    return Case(kernel_us=value, total_op_us=value + 2.0, samples_us=[value * (1 + 0.001 * i) for i in range(12)])


def test_a_snapshot_and_its_reloads_hold_no_cycle(tmp_path: Path) -> None:
    """With the collector off, dropping the last reference frees a loaded and a reloaded snapshot,
    its views and its evaluation memo (samples on both sides, so intervals and the interval cache
    are part of it)."""
    ws = build_workspace(tmp_path, baseline={"a": _samples(10.0), "b": _samples(20.0)},
                         rounds=[RoundSpec({"a": _samples(8.0), "b": _samples(15.0)}),
                                 RoundSpec({"a": _samples(7.0), "b": _samples(14.0)}, parent="opt-round-1")])
    was_on = gc.isenabled()
    gc.disable()
    try:
        snap = load_workspace(ws)
        assert snap.promotion.rounds[2].vs_baseline.interval is not None
        perf = write_perf(ws / "opt-round-2" / "opt_add_perf.txt", {"a": _samples(6.0), "b": _samples(13.0)})
        new = reload(snap, [perf])
        refs = [weakref.ref(x) for x in (snap, new, snap.rounds[1], new.rounds[2], snap.evaluation, new.evaluation)]
        del snap, new
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        if was_on:
            gc.enable()
