"""Brute-force reference matchers for tests, written straight from the definitions (they live
with the tests, not in the engine: nothing the engine runs depends on them).

ReferenceMatcher walks the row pattern tree by backtracking, which yields candidate label assignments in
exactly the standard's preference order (alternatives left to right, greedy quantifiers
longest first, reluctant shortest first, PERMUTE in lexicographic order), and evaluates every
condition from scratch on the whole assignment so far: no automaton, no shared state, no
merging of threads. Exponential: for small inputs and tests only.

It has the Matcher's interface (preferred / earliest / all), so the same engine loop runs on
either, and property tests compare the two.
"""

from __future__ import annotations

from collections.abc import Iterator

from sparkcep.compile import program as P
from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.pattern import (
    Alt,
    Concat,
    Empty,
    End,
    Exclude,
    Label,
    Negate,
    Pattern,
    Repeat,
    Start,
)
from sparkcep.compile.plan import Plan
from sparkcep.runtime.context import Assignment, ConditionContext
from sparkcep.runtime.matches import Match, PartitionData


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
        if self.within is not None and not abs(part.order0[pos] - part.order0[start]) <= self.within:
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
            try:
                ok = cond is None or cond(ConditionContext(self.plan, part, start, new)) is True
            except EvaluationError as e:  # named as the engine names it (runtime.vm)
                raise e.at(pos, f"in the condition of {self.plan.labels[label]}") from None
            if ok:
                yield pos + 1, new
        elif isinstance(node, (Empty, Negate)):  # contiguous rows: nothing lies between
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


class SelectionReference:
    """Brute force for EVENT SELECTION and negation (runtime.nfab's semantics, from the
    definitions): a depth-first walk over the rows from the start row where, at each row, a
    partial match either selects the row through one of the MATCH instructions it can reach
    (conditions recomputed from the whole assignment), or ignores it where the strategy
    allows. Its own epsilon walk, no shared state, no merging, no buffer; exponential."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.code = plan.program.instructions
        q = plan.query
        self.sel = q.event_selection
        self.maxlength = q.maxlength
        self.within = q.within

    def _places(self, pc: int, empty: tuple, excl: int, pend: frozenset, pos: int, n: int):
        """(pc of MATCH, excluded, pending negations) or None for ACCEPT, in preference order.
        ``empty``: loop slots whose current iteration selected nothing."""
        ins = self.code[pc]
        if ins.op == P.MATCH:
            yield (pc, excl > 0, pend)
        elif ins.op == P.ACCEPT:
            yield None
        elif ins.op == P.SPLIT:
            yield from self._places(ins.a, empty, excl, pend, pos, n)
            yield from self._places(ins.b, empty, excl, pend, pos, n)
        elif ins.op == P.JUMP:
            yield from self._places(ins.a, empty, excl, pend, pos, n)
        elif ins.op == P.NEGATE:
            yield from self._places(pc + 1, empty, excl, pend | {ins.a}, pos, n)
        elif ins.op == P.EXCL_BEGIN:
            yield from self._places(pc + 1, empty, excl + 1, pend, pos, n)
        elif ins.op == P.EXCL_END:
            yield from self._places(pc + 1, empty, excl - 1, pend, pos, n)
        elif ins.op == P.LOOP_ENTER:
            yield from self._places(pc + 1, empty | {ins.a}, excl, pend, pos, n)
        elif ins.op == P.LOOP_CHECK:
            if ins.a not in empty:
                yield from self._places(pc + 1, empty, excl, pend, pos, n)
        elif ins.op == P.ASSERT_START:
            if pos == 0:
                yield from self._places(pc + 1, empty, excl, pend, pos, n)
        elif ins.op == P.ASSERT_END:
            if pos == n:
                yield from self._places(pc + 1, empty, excl, pend, pos, n)

    def _holds(self, part, start, assign, rows, label, row) -> bool:
        cond = self.plan.conditions[label]
        ctx = ConditionContext(self.plan, part, start, assign + ((label, False),), rows + [row])
        return cond is None or cond(ctx) is True

    _row_ok = ReferenceMatcher._row_ok

    def _walk(self, part, start, pos, pc, empty, excl_depth, assign, rows, fresh):
        """Matches in preference order from a partial match waiting at row ``pos``."""
        places = list(self._places(pc, empty, excl_depth, frozenset(), pos, part.n))
        # The state keeps its own excl depth and slots per place; recompute per place below.
        code = self.code
        last_label = assign[-1][0] if assign else None
        tests = [i for i, p in enumerate(places) if p is not None]
        same = [i for i in tests if code[places[i][0]].a == last_label]
        home = set(same or tests)  # the variables whose failure lets SKIP TILL NEXT MATCH skip
        last_test = tests[-1] if tests else -1  # skipping ranks after every way of taking the row
        ok = self._row_ok(part, start, pos)
        took_home = False
        for i, place in enumerate(places):
            if place is None:
                if fresh:
                    yield assign, rows
                continue
            if ok:
                mpc, excluded, pend = place
                label = code[mpc].a
                adjacent = not rows or self.sel != "STRICT" or part.cache["adjacent"][pos]
                if adjacent and self._holds(part, start, assign, rows, label, pos) and not any(
                        self._holds(part, start, assign, rows, neg, h)
                        for neg in pend for h in range((rows[-1] + 1) if rows else pos, pos)):
                    took_home = took_home or i in home
                    yield from self._walk(part, start, pos + 1, mpc + 1, frozenset(), self._depth(mpc),
                                          assign + ((label, excluded),), rows + [pos], True)
            if i == last_test and ok and rows and (self.sel == "ANY" or (self.sel == "NEXT" and not took_home)):
                yield from self._walk(part, start, pos + 1, pc, empty, excl_depth, assign, rows, False)

    def _depth(self, mpc: int) -> int:
        """Exclusion depth right after MATCH ``mpc`` (from the program text)."""
        depth = 0
        for ins in self.code[:mpc]:
            if ins.op == P.EXCL_BEGIN:
                depth += 1
            elif ins.op == P.EXCL_END:
                depth -= 1
        return depth

    def _candidates(self, part, start):
        gapped = self.plan.query.gapped
        for assign, rows in self._walk(part, start, start, 0, frozenset(), 0, (), [], True):
            end = rows[-1] + 1 if rows else start
            yield Match(start, end, tuple(lab for lab, _ in assign), tuple(ex for _, ex in assign),
                        tuple(rows) if gapped else None)

    def preferred(self, part, start):
        return next(self._candidates(part, start), None)

    def all(self, part, start):
        from sparkcep.runtime.nfab import dedupe

        return dedupe(list(self._candidates(part, start)))
