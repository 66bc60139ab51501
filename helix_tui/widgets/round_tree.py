"""The round tree: baseline → rounds by parent, with status, geomean, best, active and problems.

A long linear session would nest 200 levels deep, so a node's first child continues at the
same indentation (like a commit graph) and only branches nest. A round without
round-state.json (the active round, just started) has no known parent: it is shown at the end
of the main chain, not as a branch of baseline. Updates that keep the shape
only relabel nodes; a new round or a new parent rebuilds the tree and keeps the cursor.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from helix_engine.sanitize import clean
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui import render

BASELINE = render.BASELINE
round_key = render.round_key
key_round = render.key_round


def node_label(snap: WorkspaceSnapshot, key: str) -> Text:
    """The one-line label of a tree node (also used by tests and the benchmark); a Text, so
    Textual never parses it as markup, with workspace text (a parent's name) escaped."""
    text = Text(no_wrap=True, overflow="ellipsis")
    n = key_round(key)
    if n is None:
        base = snap.baseline
        ok = base is not None and base.state is not None and base.state.baseline_established
        text.append("◆ " if ok else "◇ ", style="bold green" if ok else "yellow")
        text.append("baseline")
        problems = base.problems if base is not None else []
    else:
        view = snap.rounds[n]
        status = render.round_status(view)
        style = {"passed": "green", "failed": "red", "active": "bold yellow"}.get(status, "dim")
        text.append(render.status_icon(status) + " ", style=style)
        text.append(view.label)
        geo = render.round_geomean(view)
        if geo is not None:
            text.append(" " + render.speedup(geo), style="green" if geo >= 1.0 else "red")
        if snap.promoted_best_round == n:  # the promotion rule's current best
            text.append(" " + render.STAR, style="bold yellow")
        if render.current_round(snap) == n:
            text.append(" " + render.ICON_ACTIVE, style="bold cyan")
        if view.parent and view.parent != BASELINE and _parent_number(view.parent) not in snap.rounds:
            text.append(f" ←{clean(view.parent)}?", style="magenta")
        problems = view.problems
    badge = render.problem_badge(problems)
    if badge:
        text.append(" " + badge, style="bold red" if badge.startswith("!") else "yellow")
    return text


def _parent_number(parent: str) -> int | None:
    return key_round(parent)


def unknown_parent(snap: WorkspaceSnapshot, n: int) -> bool:
    """No round-state.json yet: the snapshot's "baseline" parent is a default, not a fact."""
    return snap.rounds[n].state is None


def shape(snap: WorkspaceSnapshot) -> tuple[tuple[int, str | None, bool], ...]:
    return tuple((n, snap.rounds[n].parent, unknown_parent(snap, n)) for n in sorted(snap.rounds))


class RoundTree(Tree[str]):
    """Tree of ``baseline`` and ``opt-round-N`` keys (node.data)."""

    DEFAULT_CSS = """
    RoundTree { scrollbar-size-vertical: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("rounds", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.nodes_by_key: dict[str, TreeNode[str]] = {}
        self._shape: tuple[tuple[int, str | None, bool], ...] | None = None
        self._wanted: str | None = None
        self._settling = False  # after a rebuild: swallow cursor jumps until the wanted node is back

    def show(self, snap: WorkspaceSnapshot, selected: str) -> None:
        """Render ``snap``; keep the cursor on ``selected``."""
        new_shape = shape(snap)
        if new_shape == self._shape and self.nodes_by_key:
            for key, node in self.nodes_by_key.items():
                n = key_round(key)
                if n is None or n in snap.rounds:
                    node.set_label(node_label(snap, key))
            return
        self._shape = new_shape
        self._settling = True
        self.clear()
        self.nodes_by_key = {}
        unknown = sorted(n for n in snap.rounds if unknown_parent(snap, n))
        placed: set[int] = set(unknown)
        self._add_line(self.root, snap, BASELINE, placed)
        for n in unknown:  # after the main chain's last round, at its indentation
            self._add_line(self.root, snap, round_key(n), placed)
        for n in sorted(snap.rounds):  # orphans and cycles: shown at the top level
            if n not in placed:
                placed.add(n)
                self._add_line(self.root, snap, round_key(n), placed)
        self.root.expand_all()
        self.focus_key(selected if selected in self.nodes_by_key else BASELINE)

    def _add_line(self, container: TreeNode[str], snap: WorkspaceSnapshot, key: str | None, placed: set[int]) -> None:
        while key is not None:
            kids = [n for n in snap.children(key) if n not in placed]
            placed.update(kids)
            branches = kids[1:]
            label = node_label(snap, key)
            if branches:
                node = container.add(label, data=key, expand=True)
            else:
                node = container.add_leaf(label, data=key)
            self.nodes_by_key[key] = node
            for b in branches:
                self._add_line(node, snap, round_key(b), placed)
            key = round_key(kids[0]) if kids else None

    def focus_key(self, key: str) -> None:
        """Put the cursor on ``key`` once the rebuilt lines exist (else it lands on line 0 and
        the selection would jump)."""
        self._wanted = key
        node = self.nodes_by_key.get(key)
        if node is None:
            return
        if node.line < 0:
            self.call_after_refresh(self._focus_wanted)
            return
        if self.cursor_node is not node:
            self.move_cursor(node, animate=False)
        if self._settling:  # after the highlight messages already queued by the rebuild
            self.call_later(self._end_settling)

    def _end_settling(self) -> None:
        self._settling = False

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        """A rebuild moves the cursor line under the old node; only the wanted node counts."""
        stale = event.node is not self.cursor_node  # the cursor moved on since it was posted
        if stale or (self._settling and event.node.data != self._wanted):
            event.stop()

    def _focus_wanted(self) -> None:
        if self._wanted is not None:
            self.focus_key(self._wanted)
