"""ONE ROW PER MATCH measures as whole columns, for the common measures that need no
per-match evaluation: MATCH_NUMBER(), COUNT(*), column values at the first or last row of
the match (FIRST/LAST/plain references of the universal variable, with PREV/NEXT), and
COUNT SUM AVG MIN MAX DELTA of a numeric column (DELTA of a timestamp too) over the whole
match. Other measures run per match in runtime.measures.

The aggregates fold each match's rows in row order, exactly as compile.aggregates folds
them one row at a time (the same float additions in the same order, SQL's NaN order,
NULLs skipped), so both paths give the same bits. Where 64-bit integers could not give
the Python fold's exact answer (a sum beyond BIGINT, an average of a sum beyond 2^53),
``measure_columns`` answers None and the per-match path runs (and reports the error)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkcep.analysis.bound import AggregateSpec, BAgg, BColumn, BMatchNumber, BNav
from sparkcep.compile.plan import Plan
from sparkcep.jit import njit
from sparkcep.types import Type
from sparkcep.values import numpy_values, timestamp_micros

# Aggregates of a numeric column over the whole match computed here (see _aggregate).
_FOLDS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "DELTA")
_EXACT = 2**53


def supported(plan: Plan) -> bool:
    q = plan.query
    if q.rows_per_match != "ONE" or q.gapped:
        return False
    for m in q.measures:
        e = m.expr
        if isinstance(e, BMatchNumber):
            continue
        if isinstance(e, BAgg):
            if _whole_match(q.measure_aggregates[e.index]):
                continue
            return False
        if isinstance(e, BNav) and e.pointer.labels is None and isinstance(e.inner, BColumn):
            continue
        return False
    return True


def _whole_match(spec: AggregateSpec) -> bool:
    """COUNT(*), or COUNT SUM AVG MIN MAX DELTA of a numeric column, over every row of the match."""
    if spec.labels is not None or spec.distinct or spec.previous or spec.key is not None:
        return False
    if spec.arg is None:
        return spec.func == "COUNT"
    if not isinstance(spec.arg, BColumn):
        return False
    if spec.arg.type == Type.TIMESTAMP:
        return spec.func == "DELTA"  # an interval: how long the match took
    return spec.func in _FOLDS and spec.arg.type in (Type.BIGINT, Type.DOUBLE)


def measure_columns(plan: Plan, part, spans: tuple[np.ndarray, np.ndarray, np.ndarray], types: list,
                    bounds: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, list[pa.Array]] | None:
    """(partition row of each output row, one Arrow array per measure) for the matches
    given as (starts, ends, match numbers); None where an aggregate needs the per-match
    path (see the module's docstring). ``bounds``: each match's partition as rows [lo, hi)
    of ``part`` when it holds many partitions (PREV and NEXT stay inside them)."""
    starts, ends, numbers = spans
    q = plan.query
    out = []
    for m, t in zip(q.measures, types, strict=True):
        e = m.expr
        if isinstance(e, BMatchNumber):
            out.append(pa.array(numbers, type=t or pa.int64()))
        elif isinstance(e, BAgg):
            spec = q.measure_aggregates[e.index]
            if spec.arg is None:
                out.append(pa.array(ends - starts, type=t or pa.int64()))
                continue
            got = _aggregate(spec.func, part.cols.arrow(spec.arg.index), starts, ends)
            if got is None:
                return None
            values, has = got
            arr = pa.array(values, mask=~has)
            out.append(arr.cast(t) if t is not None and arr.type != t else arr)
        else:
            p = e.pointer
            idx = (ends - 1 - p.offset) if p.last else (starts + p.offset)
            valid = (idx >= starts) & (idx <= ends - 1)
            idx = idx + p.physical
            lo, hi = bounds if bounds is not None else (0, part.n)
            valid &= (idx >= lo) & (idx < hi)
            column = part.cols.arrow(e.inner.index)
            taken = column.take(pa.array(np.where(valid, idx, 0), mask=~valid))
            taken = taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
            if pa.types.is_dictionary(taken.type):
                taken = taken.cast(taken.type.value_type)
            out.append(taken.cast(t) if t is not None and taken.type != t else taken)
    return starts, out


def _aggregate(func: str, column, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, not NULL) of ``func`` over rows [start, end) of each match, or None."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    times = pa.types.is_timestamp(column.type)
    if times:  # DELTA of instants (zoned) or wall times (naive): whole microseconds
        column = timestamp_micros(column)
        if column is None:
            return None
    got = numpy_values(column)
    if got is None:
        return None
    data, valid = got
    if func == "COUNT":
        return _count(valid, starts, ends), np.ones(len(starts), dtype=np.bool_)
    if func == "DELTA":
        # The last row's value minus the first row's, NULL if either is NULL (or no rows).
        has = ends > starts
        if not has.any():
            zeros = np.zeros(len(starts), dtype=data.dtype)
            return (zeros.astype("timedelta64[us]") if times else zeros), has
        first, last = np.where(has, starts, 0), np.where(has, ends - 1, 0)
        has &= valid[first] & valid[last]
        a, b = data[last], data[first]
        with np.errstate(all="ignore"):
            diff = a - b
        if data.dtype == np.int64 and np.any(has & (((a ^ b) & (a ^ diff)) < 0)):
            return None  # beyond BIGINT: the per-match path reports it
        diff = np.where(has, diff, 0)
        return (diff.astype("timedelta64[us]") if times else diff), has
    sums, has, ok = _fold(data, valid, starts, ends, ("SUM", "AVG", "MIN", "MAX").index(func))
    if not ok:
        return None
    if func != "AVG":
        return sums, has
    if data.dtype == np.int64 and np.any((sums > _EXACT) | (sums < -_EXACT)):
        return None  # float(sum) would round where Python's int / int does not
    return sums.astype(np.float64) / np.maximum(_count(valid, starts, ends), 1), has


@njit
def _count(valid, starts, ends):
    out = np.zeros(len(starts), dtype=np.int64)
    for i in range(len(starts)):
        c = 0
        for r in range(starts[i], ends[i]):
            if valid[r]:
                c += 1
        out[i] = c
    return out


@njit
def _fold(data, valid, starts, ends, code):
    """Each match's non-NULL rows folded in row order as compile.aggregates folds them:
    code 0 SUM (from the first value), 1 AVG's sum (from 0: 0 + -0.0 is 0.0), 2 MIN, 3 MAX
    (a later row wins only when strictly better, in SQL's order). ok False when an int64
    running sum leaves BIGINT (the per-match path then reports it; floats never wrap)."""
    out = np.zeros(len(starts), dtype=data.dtype)
    has = np.zeros(len(starts), dtype=np.bool_)
    for i in range(len(starts)):
        acc = out[i]
        seen = False
        for r in range(starts[i], ends[i]):
            if not valid[r]:
                continue
            v = data[r]
            if code >= 2:
                # SQL's order, NaN above every number (inline: numba's cache would not see a
                # change to a helper in another file)
                lo, hi = (acc, v) if code == 3 else (v, acc)
                if not seen or (hi != hi and lo == lo) or lo < hi:
                    acc = v
            else:
                total = v if not seen and code == 0 else acc + v
                if (acc >= 0) == (v >= 0) and (total >= 0) != (acc >= 0):
                    return out, has, False
                acc = total
            seen = True
        out[i] = acc
        has[i] = seen
    return out, has, True
