"""ONE ROW PER MATCH measures as whole columns, for the common measures that need no
per-match evaluation: MATCH_NUMBER(), COUNT(*), and column values at the first or last row
of the match (FIRST/LAST/plain references of the universal variable, with PREV/NEXT).
Other measures run per match in runtime.measures."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkcep.analysis.bound import BAgg, BColumn, BMatchNumber, BNav
from sparkcep.compile.plan import Plan


def supported(plan: Plan) -> bool:
    q = plan.query
    if q.rows_per_match != "ONE" or q.gapped:
        return False
    for m in q.measures:
        e = m.expr
        if isinstance(e, BMatchNumber):
            continue
        if isinstance(e, BAgg):
            spec = q.measure_aggregates[e.index]
            if spec.func == "COUNT" and spec.labels is None and spec.arg is None:
                continue
            return False
        if isinstance(e, BNav) and e.pointer.labels is None and isinstance(e.inner, BColumn):
            continue
        return False
    return True


def measure_columns(plan: Plan, part, spans: tuple[np.ndarray, np.ndarray, np.ndarray], types: list
                    ) -> tuple[np.ndarray, list[pa.Array]]:
    """(partition row of each output row, one Arrow array per measure) for the matches
    given as (starts, ends, match numbers)."""
    starts, ends, numbers = spans
    q = plan.query
    out = []
    for m, t in zip(q.measures, types, strict=True):
        e = m.expr
        if isinstance(e, BMatchNumber):
            out.append(pa.array(numbers, type=t or pa.int64()))
        elif isinstance(e, BAgg):
            out.append(pa.array(ends - starts, type=t or pa.int64()))
        else:
            p = e.pointer
            idx = (ends - 1 - p.offset) if p.last else (starts + p.offset)
            valid = (idx >= starts) & (idx <= ends - 1)
            idx = idx + p.physical
            valid &= (idx >= 0) & (idx < part.n)
            column = part.cols.arrow(e.inner.index)
            taken = column.take(pa.array(np.where(valid, idx, 0), mask=~valid))
            taken = taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
            if pa.types.is_dictionary(taken.type):
                taken = taken.cast(taken.type.value_type)
            out.append(taken.cast(t) if t is not None and taken.type != t else taken)
    return starts, out
