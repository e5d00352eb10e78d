"""MEASURES over a found match: RUNNING (up to the current row) and FINAL (whole match).

Aggregates are computed in one incremental pass over the match rows; each output row reads
the running value at its position, so ALL ROWS PER MATCH costs O(rows), not O(rows²).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from sparkcep.compile.plan import Plan
from sparkcep.runtime.matches import Match, PartitionData


class _Final:
    """The running values of an aggregate where only the last one is ever read."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __getitem__(self, i: int) -> Any:
        return self.value


class MeasureContext:
    """Evaluates measures of one match; ``index`` is the current row within the match."""

    __slots__ = ("plan", "part", "match", "match_number", "index", "cols", "_sets", "_aggs", "_length")

    def __init__(self, plan: Plan, part: PartitionData, match: Match, match_number: int):
        self.plan = plan
        self.part = part
        self.match = match
        self.match_number = match_number
        # Only matched rows are read here: columns convert one at a time, when first read.
        self.cols = part.cols
        self._length = len(match.labels)
        self.index = self._length - 1
        labels = match.labels
        self._sets: dict[frozenset[int], list[int]] = {}  # filled when a pointer first reads a set
        self._aggs = []
        cols = self.cols
        # ONE ROW PER MATCH reads aggregates at the last row only: keep just the final value.
        every_row = plan.query.rows_per_match == "ALL"
        for agg in plan.measure_aggregates:
            state = agg.initial
            values = []
            labset = agg.spec.labels
            if not every_row and agg.counts_rows:
                # COUNT(*) / COUNT(X.*) of the whole match: how many labels, no fold needed
                n = len(labels) if labset is None else sum(labels.count(lab) for lab in labset)
                self._aggs.append((_Final(n), 0))
                continue
            for i, lab in enumerate(labels):
                if labset is None or lab in labset:
                    state = agg.step(state, cols, match.row(i), lab, match_number)
                if every_row:
                    values.append(agg.result(state))
            if not every_row and labels:
                values = _Final(agg.result(state))
            self._aggs.append((values, agg.result(agg.initial)))

    def _index_of(self, pid: int) -> int | None:
        p = self.plan.measure_pointers[pid]
        # RUNNING bounds LAST at the current row; FIRST counts from the match's start over the
        # whole match (as Trino resolves it), so FIRST(x, n) may reach past the current row.
        limit = self.index if p.running and p.last else self._length - 1
        if limit < 0:
            return None
        k = p.offset
        if p.labels is None:
            i = limit - k if p.last else k
            return i if 0 <= i <= limit else None
        rows = self._sets.get(p.labels)
        if rows is None:
            rows = self._sets[p.labels] = [i for i, lab in enumerate(self.match.labels) if lab in p.labels]
        count = bisect_right(rows, limit)
        if p.last:
            return rows[count - 1 - k] if count - 1 - k >= 0 else None
        return rows[k] if k < count else None

    def at(self, pid: int) -> int | None:
        i = self._index_of(pid)
        if i is None:
            return None
        q = self.match.row(i) + self.plan.measure_pointers[pid].physical
        return q if 0 <= q < self.part.n else None

    def label_at(self, pid: int) -> str | None:
        i = self._index_of(pid)
        if i is None:
            return None
        d = self.plan.measure_pointers[pid].physical
        if d:
            # PREV/NEXT of CLASSIFIER: the label of the row reached, if the match holds it
            # (any row of the match, in RUNNING and FINAL alike, as Trino).
            m = self.match
            q = m.row(i) + d
            i = (q - m.start) if m.rows is None else (m.rows.index(q) if q in m.rows else -1)
            if not 0 <= i < self._length:
                return None
        return self.plan.labels[self.match.labels[i]]

    def agg(self, i: int) -> Any:
        values, empty = self._aggs[i]
        spec = self.plan.measure_aggregates[i].spec
        idx = self.index if spec.running else self._length - 1
        return values[idx] if idx >= 0 else empty

    def evaluate(self, index: int | None = None) -> list[Any]:
        """All measures with the current row at ``index`` (default: the last row)."""
        self.index = self._length - 1 if index is None else index
        return [f(self) for f in self.plan.measure_fns]
