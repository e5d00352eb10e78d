"""A brute-force reference for Extended SNOOP queries, written from the definitions (README,
*Extended SNOOP*) and sharing nothing with the task engine but the compiled predicates.

1. Candidates: every binding of events to variables the pattern admits — SEQ items in
   stream order, one OR operand, k distinct ALL/ANY operands in any order, each variable
   one event, no event twice — whose every predicate holds (a predicate reading a variable
   the binding leaves unbound is not applied), whose NOT items find no event between their
   neighbours, and which fits the windows (WITHIN, the counter window between neighbouring
   events, PICK's "within d from Y": X before Y and at most d before it).
2. Selection: candidates in the order of ``fm_key``; a candidate fires unless one of its
   events was consumed by a match fired before it, or PICK first/last prefers another
   candidate that differs from it in the picked variable only, by an earlier (first) or a
   later (last) event that is not consumed, or one of those fired already (one match per
   set of alternatives). Firing consumes the CONSUMING variables' events.

Exponential in the number of variables: for tests on small inputs.
"""

from __future__ import annotations

from itertools import combinations, product

from sparkcep.runtime.matches import PartitionData
from sparkcep.tasks.evaluate import holds
from sparkcep.tasks.task_query import TaskQuery, VarNode, fm_key


def _bindings(node, rows: range):
    """Every binding (dict var -> row) of ``node``'s pattern on ``rows``, ignoring predicates."""
    if isinstance(node, VarNode):
        for r in rows:
            yield {node.var: r}
        return
    if node.kind == "SEQ":
        def seq(i: int, lo: int):
            if i == len(node.items):
                yield {}
                return
            for b in _bindings(node.items[i], range(lo, rows.stop)):
                for rest in seq(i + 1, max(b.values()) + 1):
                    yield {**b, **rest}
        yield from seq(0, rows.start)
        return
    if node.kind == "OR":
        for item in node.items:
            yield from _bindings(item, rows)
        return
    for chosen in combinations(node.items, node.k):  # ALL, ANY
        for parts in product(*(list(_bindings(item, rows)) for item in chosen)):
            used = [r for p in parts for r in p.values()]
            if len(set(used)) == len(used):
                yield {k: v for p in parts for k, v in p.items()}


class SnoopReference:
    def __init__(self, tq: TaskQuery, part: PartitionData, window: int | None = None):
        self.tq = tq
        self.part = part
        self.window = window
        self.order = part.order0

    def _holds(self, i: int, binding: dict[int, int]) -> bool:
        items = sorted(binding.items(), key=lambda kv: kv[1])
        return holds(self.tq, self.part, i, tuple(v for v, _ in items), [r for _, r in items])

    def _absent(self, node, binding: dict[int, int]) -> bool:
        """No NOT item of ``node`` (and nested SEQs) finds an event between its neighbours."""
        if isinstance(node, VarNode):
            return True
        if node.kind == "SEQ":
            for at, neg in node.nots:
                before = [binding[v] for item in node.items[:at] for v in _vars_of(item) if v in binding]
                after = [binding[v] for v in _vars_of(node.items[at]) if v in binding]
                preds = [i for i, p in enumerate(self.tq.predicates)
                         if p.negated == neg and p.variables <= set(binding)]
                for r in range(max(before) + 1, min(after)):
                    if all(self._holds(i, {**binding, neg: r}) for i in preds):
                        return False
        return all(self._absent(item, binding) for item in node.items)

    def _fits(self, binding: dict[int, int]) -> bool:
        rows = sorted(binding.values())
        if self.window is not None and any(b - a > self.window for a, b in zip(rows, rows[1:], strict=False)):
            return False
        w = self.tq.within
        if w is not None:
            span = rows[-1] - rows[0] if w.events else abs(self.order[rows[-1]] - self.order[rows[0]])
            if not span <= w.bound:  # NaN is never within
                return False
        for rule in self.tq.picks:
            if rule.var in binding and rule.source in binding:
                x, y = binding[rule.var], binding[rule.source]
                if x >= y:
                    return False
                if not (y - x if rule.events else abs(self.order[y] - self.order[x])) <= rule.bound:
                    return False
        return True

    def candidates(self, start: int, end: int) -> list[dict[int, int]]:
        out = []
        for b in _bindings(self.tq.pattern, range(start, end)):
            if not self._fits(b):
                continue
            bound = set(b)
            ok = True
            for i, p in enumerate(self.tq.predicates):
                if p.negated is None and p.variables <= bound and not self._holds(i, b):
                    ok = False
                    break
            if ok and self._absent(self.tq.pattern, b):
                out.append(b)
        return out

    def run(self, start: int, end: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """The fired matches of rows [start, end): (variables, rows) in stream order each."""
        def key(b):
            items = sorted(b.items(), key=lambda kv: kv[1])
            return fm_key(tuple(r for _, r in items), tuple(v for v, _ in items))

        cands = sorted(self.candidates(start, end), key=key)
        consumed: set[int] = set()
        fired_bindings: list[dict[int, int]] = []
        fired = []
        for b in cands:
            if any(r in consumed for r in b.values()):
                continue
            if not self._picked(b, cands, consumed, fired_bindings):
                continue
            items = sorted(b.items(), key=lambda kv: kv[1])
            fired.append((tuple(v for v, _ in items), tuple(r for _, r in items)))
            fired_bindings.append(b)
            consumed |= {r for v, r in b.items() if v in self.tq.consuming}
        return fired

    def _picked(self, b: dict[int, int], cands: list[dict[int, int]], consumed: set[int],
                fired: list[dict[int, int]]) -> bool:
        for rule in self.tq.picks:
            if rule.kind == "EACH" or rule.var not in b or rule.source not in b:
                continue
            # One match per set of alternatives (the same events but for X).
            for other in fired:
                if set(other) == set(b) and all(other[v] == b[v] for v in b if v != rule.var):
                    return False
            for other in cands:
                if set(other) != set(b) or other[rule.var] == b[rule.var] or other[rule.var] in consumed:
                    continue
                if any(other[v] != b[v] for v in b if v != rule.var):
                    continue
                if (rule.kind == "FIRST") == (other[rule.var] < b[rule.var]):
                    return False
        return True


def _vars_of(node) -> list[int]:
    if isinstance(node, VarNode):
        return [node.var]
    return [v for item in node.items for v in _vars_of(item)]

