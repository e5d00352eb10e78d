"""Partial matches and the three structures that keep them (thesis §5.3.2).

A partial match (PM) is the events bound so far, in stream order, with their variables; it
is created from its parent by one true task. The structures differ in how consumption finds
the PMs that contain a consumed event:

- ``tree``: PMs form a tree under the root (the empty PM); consuming an event walks the whole
  tree for the nodes that bound it and removes their subtrees.
- ``tree+hash``: the same tree plus a map event → the nodes that bound it.
- ``graph``: one node per raw event; a PM is a path of nodes. Consuming an event marks its
  node dead, and a PM through a dead node is dead (checked when it is used, swept at the
  synchronization point). The thesis's graph merges PMs that reach the same node, which
  would extend a PM by a transition never evaluated for it (a predicate may read E1); here
  each PM keeps its own path, so the graph is exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class PartialMatch:
    variables: tuple[int, ...]
    rows: tuple[int, ...]  # stream positions, ascending
    state: frozenset[int]
    parent: PartialMatch | None
    last_combined: int = -1  # the last raw event this PM has made tasks with
    alive: bool = True
    expired: bool = False  # the window lets it take no more events
    children: list[PartialMatch] = field(default_factory=list)
    nodes: tuple = ()  # graph: the event nodes of its path

    @property
    def last(self) -> int:
        return self.rows[-1] if self.rows else -1

    def extend(self, var: int, row: int) -> PartialMatch:
        return PartialMatch(self.variables + (var,), self.rows + (row,), self.state | {var}, self)


def root() -> PartialMatch:
    return PartialMatch((), (), frozenset(), None)


class TreeStructure:
    """Tree without a hash map."""

    name = "tree"

    def __init__(self):
        self.root = root()
        self.size = 1

    def add(self, pm: PartialMatch) -> None:
        pm.parent.children.append(pm)
        self.size += 1

    def is_alive(self, pm: PartialMatch) -> bool:
        return pm.alive

    def nodes(self) -> Iterator[PartialMatch]:
        stack = [self.root]
        while stack:
            pm = stack.pop()
            yield pm
            stack.extend(pm.children)

    def live(self) -> list[PartialMatch]:
        return [pm for pm in self.nodes() if not pm.expired]

    def _remove(self, pm: PartialMatch) -> None:
        stack = [pm]
        while stack:
            x = stack.pop()
            x.alive = False
            self.size -= 1
            stack.extend(x.children)
            x.children = []
        if pm.parent is not None:
            pm.parent.children.remove(pm)

    def consume(self, row: int) -> None:
        for pm in [pm for pm in self.nodes() if pm.rows and pm.rows[-1] == row]:
            self._remove(pm)

    def clean(self) -> None:
        """At a synchronization point: drop expired PMs no live PM descends from."""
        for pm in [pm for pm in self.nodes() if pm.expired and not pm.children and pm.parent is not None]:
            x = pm
            while x.parent is not None and x.expired and not x.children:
                parent = x.parent
                self._remove(x)
                x = parent


class TreeHashStructure(TreeStructure):
    """Tree with a hash map from each raw event to the nodes that bound it."""

    name = "tree+hash"

    def __init__(self):
        super().__init__()
        self.by_row: dict[int, list[PartialMatch]] = {}

    def add(self, pm: PartialMatch) -> None:
        super().add(pm)
        self.by_row.setdefault(pm.rows[-1], []).append(pm)

    def consume(self, row: int) -> None:
        for pm in self.by_row.pop(row, ()):
            if pm.alive:
                self._remove(pm)

    def _remove(self, pm: PartialMatch) -> None:
        super()._remove(pm)
        nodes = self.by_row.get(pm.rows[-1])
        if nodes is not None:
            alive = [x for x in nodes if x.alive]
            if alive:
                self.by_row[pm.rows[-1]] = alive
            else:
                del self.by_row[pm.rows[-1]]


class _EventNode:
    __slots__ = ("alive", "row")

    def __init__(self, row: int):
        self.row = row
        self.alive = True


class GraphStructure:
    """One node per raw event; PMs are paths. Dead nodes make their PMs dead lazily."""

    name = "graph"

    def __init__(self):
        self.root = root()
        self.nodes_by_row: dict[int, _EventNode] = {}
        self.pms: list[PartialMatch] = [self.root]

    @property
    def size(self) -> int:
        return len(self.pms)

    def add(self, pm: PartialMatch) -> None:
        node = self.nodes_by_row.get(pm.rows[-1])
        if node is None:
            node = self.nodes_by_row[pm.rows[-1]] = _EventNode(pm.rows[-1])
        pm.nodes = pm.parent.nodes + (node,)
        self.pms.append(pm)

    def is_alive(self, pm: PartialMatch) -> bool:
        if pm.alive and not all(n.alive for n in pm.nodes):
            pm.alive = False
        return pm.alive

    def live(self) -> list[PartialMatch]:
        return [pm for pm in self.pms if not pm.expired and self.is_alive(pm)]

    def consume(self, row: int) -> None:
        node = self.nodes_by_row.pop(row, None)
        if node is not None:
            node.alive = False  # its incoming edges go with it; the PMs through it die lazily

    def clean(self) -> None:
        self.pms = [pm for pm in self.pms if self.is_alive(pm) and not (pm.expired and pm.parent is not None)]
        used = {n.row for pm in self.pms for n in pm.nodes}
        self.nodes_by_row = {r: n for r, n in self.nodes_by_row.items() if r in used}


STRUCTURES = {"tree": TreeStructure, "tree+hash": TreeHashStructure, "graph": GraphStructure}
