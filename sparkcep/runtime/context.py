"""A DEFINE condition's view of a labelled set of rows, computed from the whole assignment
every time it is read: what engines use that evaluate a condition once per candidate
binding rather than along a thread (the task engine, the state-based units)."""

from __future__ import annotations

from typing import Any

from sparkcep.compile.plan import Plan
from sparkcep.runtime.matches import PartitionData

Assignment = tuple[tuple[int, bool], ...]  # (label, excluded) per row from the start


class ConditionContext:
    """A DEFINE condition's view, computed from the full assignment every time; ``rows``
    are the selected rows when a match may skip rows (default: consecutive from start)."""

    def __init__(self, plan: Plan, part: PartitionData, start: int, assign: Assignment,
                 rows: list[int] | None = None):
        self.plan = plan
        self.cols = part.py()
        self.n = part.n
        self.start = start
        self.labels = [lab for lab, _ in assign]
        self.rows = rows if rows is not None else list(range(start, start + len(assign)))
        self.pos = self.rows[-1] if self.rows else start - 1
        self.part_match_number = part.match_number

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
        q = self.rows[i] + p.physical
        return q if 0 <= q < self.n else None

    def label_at(self, pid: int):
        p = self.plan.define_pointers[pid].pointer
        i = self._index(p)
        if i is None:
            return None
        if p.physical:
            q = self.rows[i] + p.physical
            if q not in self.rows:
                return None  # outside the match so far, or a skipped row
            i = self.rows.index(q)
        return self.plan.labels[self.labels[i]]

    @property
    def match_number(self) -> int:
        return self.part_match_number

    def agg(self, i: int) -> Any:
        agg = self.plan.define_aggregates[i]
        state = agg.initial
        # PREVIOUS: the rows before the current (last) one.
        upto = len(self.labels) - 1 if agg.spec.previous else len(self.labels)
        for j, lab in enumerate(self.labels[:upto]):
            if agg.applies_to(lab):
                state = agg.step(state, self.cols, self.rows[j], lab, self.part_match_number)
        return agg.result(state)
