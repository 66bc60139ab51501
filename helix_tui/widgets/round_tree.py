"""The round tree: baseline → rounds by parent, with status, geomean, best, active and problems.

Children are drawn under their parent (``parent_round``; before round-state.json exists, the
parent start-round recorded). Two exceptions keep a long session readable: the main line — the
baseline and, while each has a single child, that child — stays at the top level (a 200-round
linear session is a list, not 200 levels), and below MAX_DEPTH levels a round's children follow
it at the same level with their parent named in the label (``←round-7``). A round whose parent
nothing records is shown after the main line. Updates that keep the shape only relabel nodes;
a new round or a new parent rebuilds the tree and keeps the cursor.
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


#: Nesting levels under the main line before children follow their parent at its level.
MAX_DEPTH = 4


def node_label(snap: WorkspaceSnapshot, key: str, *, name_parent: bool = False) -> Text:
    """The one-line label of a tree node (also used by tests and the benchmark); a Text, so
    Textual never parses it as markup, with workspace text (a parent's name) escaped.
    ``name_parent``: the node is not drawn under its parent, so the label names it."""
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
        geo = render.round_geomean(snap, n)
        if geo is not None:
            text.append(" " + render.speedup(geo), style="green" if geo >= 1.0 else "red")
        if snap.promoted_best_round == n:  # the promotion rule's current best
            text.append(" " + render.STAR, style="bold yellow")
        if render.current_round(snap) == n:
            text.append(" " + render.ICON_ACTIVE, style="bold cyan")
        if view.parent and view.parent != BASELINE and _parent_number(view.parent) not in snap.rounds:
            text.append(f" ←{clean(view.parent)}?", style="magenta")
        elif name_parent and view.parent:
            parent_n = _parent_number(view.parent)
            text.append(f" ←{BASELINE if parent_n is None else f'round-{parent_n}'}", style="dim")
        problems = view.problems
    badge = render.problem_badge(problems)
    if badge:
        text.append(" " + badge, style="bold red" if badge.startswith("!") else "yellow")
    return text


def _parent_number(parent: str) -> int | None:
    return key_round(parent)


def children_by_parent(snap: WorkspaceSnapshot) -> dict[str | None, list[int]]:
    """``snap.children(key)`` for every key at once (one pass, not one per node)."""
    found: dict[str | None, list[int]] = {}
    for n in sorted(snap.rounds):
        found.setdefault(snap.rounds[n].parent, []).append(n)
    return found


def label_inputs(snap: WorkspaceSnapshot, key: str, best: int | None, current: int | None) -> tuple[object, ...]:
    """Everything ``node_label`` reads for ``key``: the view (a reload keeps the same object for a
    round it did not change), whether it is the best or the active round, whether its parent exists."""
    n = key_round(key)
    if n is None:
        return (snap.baseline,)
    view = snap.rounds[n]
    parent = _parent_number(view.parent) if view.parent else None
    entry = render.promotion_entry(snap, n)  # its geomean and source (not the lazily made reason)
    return (view, best == n, current == n, parent is None or parent in snap.rounds,
            entry.vs_baseline if entry is not None else None, entry.vs_baseline_paired if entry is not None else None)


def unknown_parent(snap: WorkspaceSnapshot, n: int) -> bool:
    """Neither round-state.json nor start-round names the parent: "baseline" is a default, not a fact."""
    return not snap.rounds[n].parent_source


def shape(snap: WorkspaceSnapshot) -> tuple[tuple[int, str | None, bool], ...]:
    return tuple((n, snap.rounds[n].parent, unknown_parent(snap, n)) for n in sorted(snap.rounds))


#: One node of the tree as drawn: (key, the key of the node it hangs under or None for the top
#: level, drawn as a leaf, names its parent in its label).
Placement = tuple[str, "str | None", bool, bool]


def plan(snap: WorkspaceSnapshot, children: dict[str | None, list[int]]) -> list[Placement]:
    """Where every node goes, in the order a rebuild adds them (pure: no Textual). The main line
    first (baseline, then while a node has exactly one child, that child, all at the top level;
    the first node with several children holds them all, each a subtree), then the rounds whose
    parent nothing records, then anything no parent reached, at the top level."""
    out: list[Placement] = []
    unknown = sorted(n for n in snap.rounds if unknown_parent(snap, n))
    placed: set[int] = set(unknown)

    def kids_of(key: str) -> list[int]:
        kids = [n for n in children.get(key, ()) if n not in placed]
        placed.update(kids)
        return kids

    def subtree(container: str | None, key: str, depth: int) -> None:
        """``key`` and its descendants (iterative: a deep chain must not exhaust the stack). From
        MAX_DEPTH on, children follow their parent at its level."""
        pending: list[tuple[str | None, str, int, bool]] = [(container, key, depth, False)]
        while pending:
            where, current, level, name_parent = pending.pop()
            kids = kids_of(current)
            if kids and level < MAX_DEPTH:
                out.append((current, where, False, name_parent))
                pending += [(current, round_key(k), level + 1, False) for k in reversed(kids)]
            else:
                out.append((current, where, True, name_parent))
                pending += [(where, round_key(k), level, True) for k in reversed(kids)]

    key: str | None = BASELINE
    while key is not None:
        kids = kids_of(key)
        if len(kids) == 1:
            out.append((key, None, True, False))
            key = round_key(kids[0])
            continue
        out.append((key, None, not kids, False))
        for kid in kids:
            subtree(key, round_key(kid), 1)
        key = None
    for n in unknown:
        subtree(None, round_key(n), 0)
    for n in sorted(snap.rounds):
        if n not in placed:
            placed.add(n)
            subtree(None, round_key(n), 0)
    return out


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
        self._named_parent: set[str] = set()  # nodes not drawn under their parent (past MAX_DEPTH)
        self._shape: tuple[tuple[int, str | None, bool], ...] | None = None
        self._wanted: str | None = None
        self._settling = False  # after a rebuild: swallow cursor jumps until the wanted node is back
        self._labelled: dict[str, tuple[object, ...]] = {}  # key -> what its label was drawn from
        self._labels: dict[str, tuple[tuple[object, ...], bool, Text]] = {}  # key -> (inputs, named, label)
        self._batching = False  # inside a rebuild: one invalidation at its end (see _invalidate)
        self._children: dict[str | None, list[int]] = {}  # parent key -> its rounds (snap.children, indexed)
        self._layout: list[Placement] = []  # the nodes as drawn, in the order they were added (plan)
        self._widths: dict[int, tuple[object, tuple[bool, bool], int]] = {}  # id(node) -> (label, state, width)

    def show(self, snap: WorkspaceSnapshot, selected: str) -> None:
        """Render ``snap``; keep the cursor on ``selected``."""
        new_shape = shape(snap)
        if new_shape == self._shape and self.nodes_by_key:
            self._relabel(snap)
            return
        children = children_by_parent(snap)
        layout = plan(snap, children)
        self._shape = new_shape
        self._children = children
        if self.nodes_by_key and self._insert(snap, layout):
            self._settling = True
            self.focus_key(selected if selected in self.nodes_by_key else BASELINE)
            return
        self._layout = layout
        self._labelled = {}
        self._widths = {}
        self._settling = True
        self._batching = True
        try:
            self.clear()
            self.nodes_by_key = {}
            self._named_parent = set()
            for key, container, leaf, named in layout:
                where = self.root if container is None else self.nodes_by_key[container]
                self._add(where, snap, key, leaf=leaf, name_parent=named)
        finally:
            self._batching = False
        self._labels = {key: self._labels[key] for key in self.nodes_by_key if key in self._labels}
        self._invalidate()
        if not self.root.is_expanded:  # every node with children was added expanded; expand_all
            self.root.expand()         # posted a NodeExpanded message per node (1000 at 1000 rounds)
        self.focus_key(selected if selected in self.nodes_by_key else BASELINE)

    def _relabel(self, snap: WorkspaceSnapshot) -> None:
        """Redraw the labels whose inputs changed (a reload keeps an unchanged round's view)."""
        best, current = snap.promoted_best_round, render.current_round(snap)
        for key, node in self.nodes_by_key.items():
            n = key_round(key)
            if n is None or n in snap.rounds:
                inputs = label_inputs(snap, key, best, current)
                if self._labelled.get(key) != inputs:
                    self._labelled[key] = inputs
                    named = key in self._named_parent
                    label = node_label(snap, key, name_parent=named)
                    self._labels[key] = (inputs, named, label)
                    node.set_label(label)

    def _insert(self, snap: WorkspaceSnapshot, layout: list[Placement]) -> bool:
        """A new round folder at 1000 rounds (issue 12): when the new layout is the drawn one with
        nodes added (every drawn node keeps its container, kind and place), only those nodes are
        added, each after its previous sibling, and the changed labels redrawn; Textual then
        measures one new line instead of rebuilding and measuring every node. False: rebuild."""
        old = {entry[0]: entry for entry in self._layout}
        if len(layout) <= len(old) or any(key not in old for key in self.nodes_by_key):
            return False
        kept = [entry for entry in layout if entry[0] in old]
        if kept != self._layout:  # a drawn node moved, changed kind or is gone
            return False
        last_child: dict[str | None, str] = {}
        steps: list[tuple[Placement, str | None]] = []
        for entry in layout:
            key, container = entry[0], entry[1]
            if key not in old:
                if container is not None and container in old and old[container][2]:
                    return False  # a drawn leaf would get children
                steps.append((entry, last_child.get(container)))
            last_child[container] = key
        self._batching = True
        try:
            for (key, container, leaf, named), after in steps:
                where = self.root if container is None else self.nodes_by_key[container]
                at = self.nodes_by_key[after] if after is not None else None
                self._add(where, snap, key, leaf=leaf, name_parent=named, after=at, first=at is None)
        finally:
            self._batching = False
        self._layout = layout
        self._invalidate()
        self._relabel(snap)
        return True

    def _add(self, container: TreeNode[str], snap: WorkspaceSnapshot, key: str, *, leaf: bool,
             name_parent: bool = False, after: TreeNode[str] | None = None, first: bool = False) -> TreeNode[str]:
        inputs = label_inputs(snap, key, snap.promoted_best_round, render.current_round(snap))
        kept = self._labels.get(key)  # a rebuild redraws only the labels whose inputs changed
        if kept is not None and kept[0] == inputs and kept[1] == name_parent:
            label = kept[2]
        else:
            label = node_label(snap, key, name_parent=name_parent)
            self._labels[key] = (inputs, name_parent, label)
        before = 0 if first and after is None else None
        node = (container.add_leaf(label, data=key, before=before, after=after) if leaf
                else container.add(label, data=key, before=before, after=after, expand=True))
        self.nodes_by_key[key] = node
        self._labelled[key] = inputs
        if name_parent:
            self._named_parent.add(key)
        return node

    def get_label_width(self, node: TreeNode[str]) -> int:
        """Textual measures every line's label on each change of the tree (rendering it: ~25 ms at
        1000 rounds for one new node); a label object is kept while its inputs are unchanged, so
        its width is measured once (Tree's documented override point)."""
        widths = getattr(self, "_widths", None)  # None while Tree.__init__ runs
        if widths is None:
            return super().get_label_width(node)
        label, state = node.label, (node.allow_expand, node.is_expanded)
        found = widths.get(id(node))
        if found is not None and found[0] is label and found[1] == state:
            return found[2]
        width = super().get_label_width(node)
        widths[id(node)] = (label, state, width)
        return width

    def _invalidate(self) -> None:
        """Textual's Tree invalidates its caches and queues a layout refresh on every node added; a
        rebuild of a 1000-round tree paid that 1000 times (a new round folder took ~0.3 s to show,
        issue 12): during a rebuild it happens once, at its end."""
        if not getattr(self, "_batching", False):  # Tree.__init__ invalidates before ours has run
            super()._invalidate()

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
