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

from builders import RoundSpec, build_workspace, write_perf, write_round

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


def _lines(tree: RoundTree) -> list[tuple[str, str | None, bool]]:
    nodes = [tree.get_node_at_line(i) for i in range(len(tree.nodes_by_key))]
    return [(n.data, n.parent.data if n.parent is not tree.root else None, n.allow_expand) for n in nodes if n]


async def test_a_new_round_folder_adds_its_node_or_rebuilds_as_a_fresh_tree_draws(tmp_path: Path) -> None:
    """A new round (issue 12, goal 3): where the drawn tree only gains nodes, they are added in
    place (the other nodes are the same objects); where the shape changes (a branch splits the
    main line, a leaf gets children), the tree is rebuilt. Either way it draws as a fresh tree."""
    from helix_engine.workspace import layout

    ws = _workspace(tmp_path)
    snap = load_workspace(ws)
    app = TreeApp()
    async with app.run_test(size=(60, 60)) as pilot:
        tree = app.query_one(RoundTree)
        tree.show(snap, "opt-round-3")
        await pilot.pause()
        steps = [(ROUNDS + 1, f"opt-round-{ROUNDS}", True),  # the main line goes on: added
                 (ROUNDS + 2, "opt-round-5", False),  # round 5 branches: the main line splits, rebuilt
                 (ROUNDS + 3, "opt-round-5", True),  # a third child of round 5: added
                 (ROUNDS + 4, f"opt-round-{ROUNDS + 2}", False),  # a leaf gets a child: rebuilt
                 (ROUNDS + 5, f"opt-round-{ROUNDS + 2}", True),  # a second child there: added
                 (ROUNDS + 6, f"opt-round-{ROUNDS + 1}", True)]  # on the main line, before the branch: added
        for n, parent, in_place in steps:
            before = dict(tree.nodes_by_key)
            write_round(ws, n, RoundSpec({"a": 5.0, "b": 9.0}, parent=parent))
            snap = reload(snap, [ws / layout.round_dir_name(n)])
            tree.show(snap, "opt-round-3")
            await pilot.pause()
            kept = [key for key, node in before.items() if tree.nodes_by_key.get(key) is node]
            assert kept == (list(before) if in_place else []), n
            fresh = RoundTree()
            await app.mount(fresh)
            fresh.show(load_workspace(ws), "opt-round-3")
            await pilot.pause()
            assert _lines(tree) == _lines(fresh), n
            assert tree.virtual_size.width == fresh.virtual_size.width, n  # labels' widths measured once
            _labels_as_drawn_fresh(tree, snap)
            assert tree.cursor_node is not None and tree.cursor_node.data == "opt-round-3"
            await fresh.remove()
