"""The promotion rule's bootstrapped geomeans are kept in .helix/cache/intervals.json (issue 12):
a second load of the same workspace bootstraps nothing and derives exactly the same snapshot; an
entry that is not a valid judged geomean, a file that is not ours or not a regular file inside
the workspace, and a change of any input (records, margins) are recomputed, never trusted."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from helix_engine.perf import evaluation, interval_cache, stats
from helix_engine.workspace import round_cache, sealed
from helix_engine.workspace.snapshot import load_workspace
from tests.builders import write_perf
from tests.unit.test_incremental_evaluation import _cases, _derived, _workspace

CACHE = Path(".helix") / "cache" / interval_cache.CACHE_FILE
ROUNDS = Path(".helix") / "cache" / round_cache.CACHE_FILE


@pytest.fixture()
def bootstraps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many side distributions were drawn (the in-process caches emptied first)."""
    drawn: list[int] = []
    original = stats._bootstrap_means

    def counting(values: list[float], n_resamples: int, rng: Any) -> Any:
        drawn.append(len(values))
        return original(values, n_resamples, rng)

    monkeypatch.setattr(stats, "_bootstrap_means", counting)
    return drawn


def _cold_load(ws: Path) -> Any:
    """A load as a fresh process does it: no distribution or sample set remembered in memory, and
    no round summary kept (.helix/cache/rounds.sealed holds the judged geomeans too; these tests are
    about the interval cache alone)."""
    for cached in (stats._side_distribution, stats._checked, stats._seed_of, stats._statistic_of,
                   evaluation._resolvable):
        cached.cache_clear()
    (ws / ROUNDS).unlink(missing_ok=True)
    return load_workspace(ws)


def test_a_second_load_bootstraps_nothing_and_derives_the_same(tmp_path: Path, bootstraps: list[int]) -> None:
    ws = _workspace(tmp_path)
    first = _derived(_cold_load(ws))
    assert bootstraps and (ws / CACHE).is_file()
    entries = sealed.unseal((ws / CACHE).read_bytes(), CACHE.name)["entries"]
    assert entries and all(len(v) == 6 for v in entries.values())
    bootstraps.clear()
    assert _derived(_cold_load(ws)) == first
    assert bootstraps == []


def test_a_changed_input_is_bootstrapped_again(tmp_path: Path, bootstraps: list[int]) -> None:
    ws = _workspace(tmp_path)
    _cold_load(ws)
    write_perf(ws / "opt-round-5" / "opt_add_perf.txt", _cases(0.69, 55))  # new samples for round 5
    bootstraps.clear()
    snap = _cold_load(ws)
    # only round 5's two comparisons: the three cases of round 5, of the baseline and of the best
    # before it (a fresh process remembers no side), not the 5 rounds' 9 comparisons
    assert 0 < len(bootstraps) <= 3 * 3
    cache_gone = tmp_path / "copy"
    os.rename(ws / CACHE, cache_gone)
    assert _derived(snap) == _derived(_cold_load(ws))  # the same as computed from scratch


@pytest.mark.parametrize("tamper", ["a byte changed", "unsealed", "another key", "wrong version", "not a list",
                                    "point outside", "nan", "unknown verdict", "a folder", "a link out"])
def test_a_cache_that_is_not_ours_is_ignored(tmp_path: Path, bootstraps: list[int], tamper: str) -> None:
    """A file this user's helix did not seal is never read (a crafted verdict would gate a
    promotion); one it sealed whose entries are not judged geomeans (what `_valid` refuses) is not
    used either."""
    ws = _workspace(tmp_path)
    expected = _derived(_cold_load(ws))
    path = ws / CACHE
    data = sealed.unseal(path.read_bytes(), CACHE.name)
    outside = tmp_path / "elsewhere.sealed"
    if tamper == "a byte changed":
        path.write_bytes(path.read_bytes()[:-1] + b"X")
    elif tamper == "unsealed":
        path.write_bytes(pickle.dumps(data))
    elif tamper == "another key":
        sealed._key = b"k" * sealed.KEY_BYTES  # noqa: SLF001
        try:
            path.write_bytes(sealed.seal(data, CACHE.name))
        finally:
            sealed.forget_key()
    elif tamper == "wrong version":
        path.write_bytes(sealed.seal({**data, "version": 99}, CACHE.name))
    elif tamper == "a folder":
        path.unlink()
        path.mkdir()
    elif tamper == "a link out":
        outside.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(outside)
    else:
        for value in data["entries"].values():
            if tamper == "not a list":
                value.clear()
            elif tamper == "point outside":
                value[0] = value[2] * 2  # a point above its own interval
            elif tamper == "nan":
                value[1] = float("nan")
            else:
                value[4] = "much faster"
        path.write_bytes(sealed.seal(data, CACHE.name))
    bootstraps.clear()
    assert _derived(_cold_load(ws)) == expected
    assert bootstraps  # computed again, not read
    if tamper == "a link out":
        assert path.is_symlink() and sealed.unseal(outside.read_bytes(), CACHE.name) == data  # never written through


def test_no_cache_folder_is_made_without_a_helix_folder(tmp_path: Path, bootstraps: list[int]) -> None:
    ws = _workspace(tmp_path)
    os.remove(ws / ".helix" / "state.json")
    os.rmdir(ws / ".helix")
    first = _derived(_cold_load(ws))
    assert not (ws / ".helix").exists()
    bootstraps.clear()
    assert _derived(_cold_load(ws)) == first and bootstraps  # nothing kept: computed again


def test_the_key_names_every_input(tmp_path: Path) -> None:
    from helix_engine.perf.margins import NoiseMargins

    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    base, r1, r2 = snap.baseline.perf, snap.rounds[1].perf, snap.rounds[2].perf
    key = interval_cache.IntervalCache.key
    default = NoiseMargins()
    keys = {key(base, r1, "kernel", default), key(r1, base, "kernel", default), key(base, r2, "kernel", default),
            key(base, r1, "auto", default), key(base, r1, "kernel", NoiseMargins(default=0.02)),
            key(base, list(r1), "kernel", default)}
    assert len(keys) == 5  # a copy of the same records is the same input; everything else differs
