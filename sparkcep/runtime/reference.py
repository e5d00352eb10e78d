"""A brute-force reference matcher written straight from the definitions.

It walks the row pattern tree by backtracking, which yields candidate label assignments in
exactly the standard's preference order (alternatives left to right, greedy quantifiers
longest first, reluctant shortest first, PERMUTE in lexicographic order), and evaluates every
condition from scratch on the whole assignment so far: no automaton, no shared state, no
merging of threads. Exponential: for small inputs and tests only.

It has the Matcher's interface (preferred / earliest / all), so the same engine loop runs on
either, and property tests compare the two.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sparkcep.compile.pattern import Alt, Concat, Empty, End, Exclude, Label, Pattern, Repeat, Start
from sparkcep.compile.plan import Plan
from sparkcep.runtime.vm import Match, PartitionData

Assignment = tuple[tuple[int, bool], ...]  # (label, excluded) per row from the start


class _Context:
    """A DEFINE condition's view, computed from the full assignment every time."""

    def __init__(self, plan: Plan, part: PartitionData, start: int, assign: Assignment):
        self.plan = plan
        self.cols = part.py()
        self.n = part.n
        self.start = start
        self.labels = [lab for lab, _ in assign]
        self.pos = start + len(assign) - 1

    def _index(self, pointer) -> int | None:
        rows = [i for i, lab in enumerate(self.labels) if pointer.labels is None or lab in pointer.labels]
        k = pointer.offset
        if pointer.last:
            return rows[-1 - k] if k < len(rows) else None
        return rows[k] if k < len(rows) else None

    def at(self, pid: int):
        p = self.plan.define_pointers[pid].pointer
        i = self._index(p)
        if i is None:
            return None
        q = self.start + i + p.physical
        return q if 0 <= q < self.n else None

    def label_at(self, pid: int):
        i = self._index(self.plan.define_pointers[pid].pointer)
        return None if i is None else self.plan.labels[self.labels[i]]

    def agg(self, i: int) -> Any:
        agg = self.plan.define_aggregates[i]
        state = agg.initial
        for j, lab in enumerate(self.labels):
            if agg.applies_to(lab):
                state = agg.step(state, self.cols, self.start + j)
        return agg.result(state)


class ReferenceMatcher:
    def __init__(self, plan: Plan):
        self.plan = plan
        q = plan.query
        self.pattern = plan.pattern
        self.maxlength = q.maxlength
        self.within = q.within

    # ------------------------------------------------------------ the definitions
    def _row_ok(self, part: PartitionData, start: int, pos: int) -> bool:
        if pos >= part.n:
            return False
        if self.maxlength is not None and pos - start + 1 > self.maxlength:
            return False
        if self.within is not None and abs(part.order0[pos] - part.order0[start]) > self.within:
            return False
        return True

    def _gen(self, node: Pattern, part: PartitionData, start: int, pos: int,
             assign: Assignment, excluded: bool) -> Iterator[tuple[int, Assignment]]:
        if isinstance(node, Label):
            if not self._row_ok(part, start, pos):
                return
            label = node.id
            new = assign + ((label, excluded),)
            cond = self.plan.conditions[label]
            if cond is None or cond(_Context(self.plan, part, start, new)) is True:
                yield pos + 1, new
        elif isinstance(node, Empty):
            yield pos, assign
        elif isinstance(node, Start):
            if pos == 0:
                yield pos, assign
        elif isinstance(node, End):
            if pos == part.n:
                yield pos, assign
        elif isinstance(node, Exclude):
            yield from self._gen(node.child, part, start, pos, assign, True)
        elif isinstance(node, Concat):
            yield from self._concat(node.items, 0, part, start, pos, assign, excluded)
        elif isinstance(node, Alt):
            for item in node.items:
                yield from self._gen(item, part, start, pos, assign, excluded)
        elif isinstance(node, Repeat):
            yield from self._repeat(node, 0, part, start, pos, assign, excluded)
        else:  # pragma: no cover
            raise TypeError(node)

    def _concat(self, items, i, part, start, pos, assign, excluded):
        if i == len(items):
            yield pos, assign
            return
        for p2, a2 in self._gen(items[i], part, start, pos, assign, excluded):
            yield from self._concat(items, i + 1, part, start, p2, a2, excluded)

    def _repeat(self, node: Repeat, count: int, part, start, pos, assign, excluded):
        def more():
            if node.max is not None and count >= node.max:
                return
            for p2, a2 in self._gen(node.child, part, start, pos, assign, excluded):
                # Beyond the minimum, an iteration must consume a row.
                if count >= node.min and p2 == pos:
                    continue
                yield from self._repeat(node, count + 1, part, start, p2, a2, excluded)

        def stop():
            if count >= node.min:
                yield pos, assign

        first, second = (more, stop) if node.greedy else (stop, more)
        yield from first()
        yield from second()

    def _candidates(self, part: PartitionData, start: int) -> Iterator[Match]:
        for end, assign in self._gen(self.pattern, part, start, start, (), False):
            yield Match(start, end, tuple(lab for lab, _ in assign), tuple(ex for _, ex in assign))

    # ------------------------------------------------------------ the Matcher interface
    def preferred(self, part: PartitionData, start: int) -> Match | None:
        return next(self._candidates(part, start), None)

    def all(self, part: PartitionData, start: int) -> list[Match]:
        out, seen = [], set()
        for m in self._candidates(part, start):
            key = (m.end, m.labels, m.excluded)
            if key not in seen:
                seen.add(key)
                out.append(m)
        return out

    def earliest(self, part: PartitionData, start: int) -> Match | None:
        best = None
        for m in self._candidates(part, start):
            if best is None or m.end < best.end:
                best = m
        return best
