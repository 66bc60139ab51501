"""A reload re-evaluates only what its changed files affect, and ends exactly where a full load
would (issue 12, goal 2): every comparison, interval, promotion and warning, after each edit of a
sequence, equals a fresh load's; and an edit of one round's perf file compares only that round
with the baseline again."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from helix_engine.workspace import status_rules
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import Case, RoundSpec, build_workspace, workflow_state, write_perf, write_round, write_workflow_state

LABELS = ("a", "b", "c")
BASE = {"a": 10.0, "b": 20.0, "c": 40.0}


def _cases(scale: float, seed: int) -> dict[str, Case]:
    """Each case at ``scale`` of the baseline, with 20 raw samples (so intervals are bootstrapped)."""
    rng = random.Random(seed)
    out = {}
    for label in LABELS:
        value = round(BASE[label] * scale, 4)
        samples = [round(value * rng.gauss(1.0, 0.01), 5) for _ in range(20)]
        out[label] = Case(kernel_us=value, total_op_us=value + 2.0, samples_us=samples)
    return out


def _workspace(tmp_path: Path) -> Path:
    scales = (0.9, 0.95, 0.8, 0.85, 0.7)  # round 3 beats round 1, round 5 beats round 3
    rounds = [RoundSpec(_cases(s, n), parent="baseline" if n == 1 else f"opt-round-{n - 1}")
              for n, s in enumerate(scales, start=1)]
    return build_workspace(tmp_path, baseline=_cases(1.0, 0), rounds=rounds)


def _derived(snap: Any) -> dict[str, Any]:
    """Everything the snapshot derives from several files, as plain data."""
    ev = snap.evaluation
    return json.loads(json.dumps({
        "rounds": {n: {"comparison": dataclasses.asdict(v.comparison) if v.comparison else None,
                       "parent": v.parent, "problems": sorted(map(str, v.problems))}
                   for n, v in sorted(snap.rounds.items())},
        "promotion": dataclasses.asdict(snap.promotion),
        "best": snap.best_round, "logged": snap.logged_best, "problems": sorted(map(str, snap.problems)),
        "warnings": ev.warnings, "skipped": ev.skipped, "state": ev.state,
        "results": {n: dataclasses.asdict(r.comparison) if r.comparison else None for n, r in ev.results.items()},
    }, default=str))


def _round_state(ws: Path, n: int, **changes: Any) -> Path:
    path = ws / f"opt-round-{n}" / "round-state.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def test_a_sequence_of_reloads_ends_where_a_full_load_does(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    assert snap.promotion.best_round == 5 and snap.promotion.rounds[3].status == "validated branch"
    assert snap.promotion.rounds[5].vs_baseline.interval is not None  # intervals were bootstrapped
    edits: list[Any] = [
        lambda: [write_perf(ws / "opt-round-2" / "opt_add_perf.txt", _cases(0.6, 22))],  # round 2 the best
        lambda: [write_perf(ws / "opt-round-2" / "opt_add_perf.txt", _cases(0.6, 22))],  # equal content again
        lambda: [_round_state(ws, 2, correctness_status="failed")],  # round 2 out: round 5 best again
        lambda: [write_perf(ws / "baseline" / "add_perf.txt", _cases(1.1, 7))],  # every comparison moves
        lambda: [write_round(ws, 6, RoundSpec(_cases(0.5, 66), parent="opt-round-5"))],  # a new best
        lambda: [_remove(ws / "opt-round-4")],
        lambda: [write_workflow_state(ws, workflow_state(rounds={1: "passed", 2: "failed", 3: "passed",
                                                                 5: "failed", 6: "passed"}))],
        lambda: [write_perf(ws / "opt-round-3" / "opt_add_perf.txt",
                            {k: v.kernel_us for k, v in _cases(0.4, 3).items()})],  # no samples: point only
    ]
    for edit in edits:
        before, shown = snap, _derived(snap)
        snap = reload(snap, edit())
        assert _derived(snap) == _derived(load_workspace(ws))
        assert _derived(before) == shown  # the snapshot reloaded from (maybe still on screen) is untouched
    assert snap.promotion.best_round == 3 and snap.promotion.rounds[3].basis == "point"
    assert 4 not in snap.rounds and 6 in snap.rounds


def _remove(path: Path) -> Path:
    shutil.rmtree(path)
    return path


def test_one_perf_file_change_compares_only_that_round_again(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    compared: list[str] = []
    original = status_rules.compare_with_baseline

    def spy(*args: Any, **kwargs: Any) -> Any:
        compared.append(kwargs["round_name"])
        return original(*args, **kwargs)

    monkeypatch.setattr(status_rules, "compare_with_baseline", spy)
    perf = ws / "opt-round-4" / "opt_add_perf.txt"
    write_perf(perf, _cases(0.84, 44))
    snap = reload(snap, [perf])
    assert compared == ["opt-round-4"]
    assert _derived(snap) == _derived(load_workspace(ws))
    compared.clear()
    snap = reload(snap, [ws / "opt-note.md"])  # nothing a comparison reads
    assert compared == []


def test_a_perf_file_read_through_another_folder_is_re_read_with_its_round(tmp_path: Path) -> None:
    """Round 2 declares round 1's perf file; round 3's folder is a link to archive/r3; alias is a
    link to opt-round-4. A change named by any path that leads to a perf file re-reads the round
    that reads it."""
    ws = _workspace(tmp_path)
    _round_state(ws, 2, perf_artifact="../opt-round-1/opt_add_perf.txt")
    (ws / "archive").mkdir()
    (ws / "opt-round-3").rename(ws / "archive" / "r3")
    (ws / "opt-round-3").symlink_to(Path("archive") / "r3")
    (ws / "alias").symlink_to("opt-round-4")
    snap = load_workspace(ws)
    assert snap.rounds[2].perf_file == ws / "opt-round-2" / ".." / "opt-round-1" / "opt_add_perf.txt"
    assert snap.rounds[3].comparison is not None and snap.rounds[3].comparison.geomean is not None
    for changed, scale in ((ws / "opt-round-1" / "opt_add_perf.txt", 0.5),
                           (ws / "archive" / "r3" / "opt_add_perf.txt", 0.45),
                           (ws / "alias" / "opt_add_perf.txt", 0.4)):
        write_perf(changed, _cases(scale, 9))
        snap = reload(snap, [changed])
        assert _derived(snap) == _derived(load_workspace(ws))
    assert snap.rounds[2].comparison.geomean.point == pytest.approx(2.0, rel=1e-9)
    assert snap.promotion.best_round == 4
