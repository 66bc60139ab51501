"""The round tree after a reload (issue 12, goal 2: a perf file written is shown within 150 ms at
1000 rounds): it relabels only the nodes whose label can have changed, and every label is the
one a fresh tree draws."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets.tree import TreeNode

from helix_engine.workspace.snapshot import load_workspace, reload
from helix_tui.widgets.round_tree import RoundTree, node_label

from builders import RoundSpec, build_workspace, write_perf

ROUNDS = 12


def _workspace(tmp_path: Path) -> Path:
    specs = [RoundSpec({"a": 10.0 - n * 0.3, "b": 20.0 - n * 0.5}, parent="baseline" if n == 1 else f"opt-round-{n - 1}",
                       block=8 << n) for n in range(1, ROUNDS + 1)]
    return build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0}, rounds=specs)


class TreeApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RoundTree(id="tree")


def _labels_as_drawn_fresh(tree: RoundTree, snap) -> None:  # noqa: ANN001
    for key, node in tree.nodes_by_key.items():
        assert str(node.label) == str(node_label(snap, key, name_parent=key in tree._named_parent)), key


async def test_a_reload_relabels_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    relabelled: list[str] = []
    original = TreeNode.set_label

    def spy(self: TreeNode, label) -> None:  # noqa: ANN001
        relabelled.append(self.data)
        original(self, label)

    monkeypatch.setattr(TreeNode, "set_label", spy)
    app = TreeApp()
    async with app.run_test(size=(60, 40)) as pilot:
        tree = app.query_one(RoundTree)
        tree.show(snap, "opt-round-3")
        await pilot.pause()
        nodes = dict(tree.nodes_by_key)
        assert snap.promoted_best_round == ROUNDS
        perf = ws / "opt-round-5" / "opt_add_perf.txt"
        write_perf(perf, {"a": 2.0, "b": 4.0})  # round 5 becomes the best, by far
        new = reload(snap, [perf])
        assert new.promoted_best_round == 5
        tree.show(new, "opt-round-3")
        await pilot.pause()
        assert tree.nodes_by_key == nodes  # the same shape: no rebuild
        assert "opt-round-5" in relabelled and f"opt-round-{ROUNDS}" in relabelled  # the star moved
        assert "baseline" not in relabelled and "opt-round-1" not in relabelled
        assert len(relabelled) < ROUNDS
        _labels_as_drawn_fresh(tree, new)
        relabelled.clear()
        tree.show(load_workspace(ws), "opt-round-3")  # a full load: other objects, the same content
        await pilot.pause()
        assert relabelled == []
        _labels_as_drawn_fresh(tree, new)
