"""MEASURES as whole columns, for the measures that need no per-match evaluation: MATCH_NUMBER(), CLASSIFIER(), COUNT(*) and COUNT(X.*), column values at a row
the match designates (plain references, FIRST and LAST, of the universal variable, of a
variable or of a SUBSET, with PREV/NEXT), and COUNT SUM AVG MIN MAX DELTA of a numeric
column (DELTA of a timestamp too) over the rows of the whole match, of a variable or of a
SUBSET; and arithmetic, comparisons, logic, BETWEEN, IN, IS NULL and ABS over those, as
compile.vectorize evaluates a row-local condition (each of those measures a column, each
output row a row). Other measures run per match in runtime.measures.

ONE ROW PER MATCH gives a row per match, where RUNNING and FINAL both see the whole match.
ALL ROWS PER MATCH gives a row per matched row (and one per empty match where SHOW EMPTY
MATCHES asks), where RUNNING sees the match up to that row: a RUNNING LAST counts its
variables' rows up to it and a RUNNING aggregate is the fold's prefix at it
(``_Output``, ``_prefix``); rows a pattern excludes ({- -}) are counted there but give no
output row, and WITH UNMATCHED ROWS adds the rows in no match, all their measures NULL,
before the first match that starts after them (as the per-match path orders them).

Matches come as ``Spans``: each match's first row and end, its number and, where a measure
names variables, the label of each of its rows. The rows of a set of variables are found
once for every match (``_Labelled``), and a measure over them reads or folds those rows.

The aggregates fold each match's rows in row order, exactly as compile.aggregates folds
them one row at a time (the same float additions in the same order, SQL's NaN order,
NULLs skipped), so both paths give the same bits. Where 64-bit integers could not give
the Python fold's exact answer (a sum beyond BIGINT, an average of a sum beyond 2^53),
``measure_columns`` answers None and the per-match path runs (and reports the error)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.aggregates.kernels import sql_less_number
from sparkcep.analysis.bound import (
    AggregateSpec,
    BAgg,
    BClassifier,
    BColumn,
    BExpr,
    BLiteral,
    BMatchNumber,
    BNav,
    Pointer,
    nodes,
)
from sparkcep.compile.plan import Plan
from sparkcep.compile.vectorize import SMALL_INT, ColumnArrays, is_row_local, values_of
from sparkcep.errors import InternalError
from sparkcep.jit import njit
from sparkcep.runtime.matches import Spans
from sparkcep.types import Type
from sparkcep.values import (
    EXACT_FLOAT,
    FunctionError,
    max_magnitude,
    numpy_values,
    timestamp_micros,
)

# Aggregates of a numeric column computed here (see _aggregate).
_FOLDS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "DELTA")
_EXACT = EXACT_FLOAT
_LEAF = "leaf"  # a measure _leaf computes (see _shapes)


def _labelled(spans: Spans, labels: frozenset[int]) -> _Labelled:
    """The rows of ``labels`` in every match, found once per spans."""
    got = spans.cache.get(labels)
    if got is None:
        got = spans.cache[labels] = _Labelled(spans, labels)
    return got


def _in_labels(labels: np.ndarray, wanted: frozenset[int]) -> np.ndarray:
    """Whether each label is one of ``wanted`` (a table lookup: labels are small integers)."""
    if not len(labels):
        return np.zeros(0, dtype=np.bool_)
    if labels.min() < 0:
        raise InternalError("a matched row without a variable")
    member = np.zeros(max(int(labels.max()), max(wanted, default=0)) + 1, dtype=np.bool_)
    member[list(wanted)] = True
    return member[labels]


class _Labelled:
    """The rows of every match labelled with one of a set of variables, in row order:
    rows[first[i]:first[i] + count[i]] are match i's."""

    def __init__(self, spans: Spans, labels: frozenset[int]):
        match, row = spans.rows()
        self.hit = _in_labels(spans.labels, labels)
        self.at = np.flatnonzero(self.hit)  # positions in spans.labels
        self.rows = row[self.at]
        self.count = np.bincount(match[self.at], minlength=len(spans.starts)).astype(np.int64)
        self.first = np.cumsum(self.count) - self.count


def needs_labels(plan: Plan) -> bool:
    """Whether some measure reads variables' rows, or ALL ROWS PER MATCH leaves excluded
    rows out (the matchers must then give labels, and exclusion flags with them)."""
    q = plan.query
    if _flags(q):
        return True
    for m in q.measures:
        for e in nodes(m.expr):
            if isinstance(e, BClassifier) or (isinstance(e, BNav) and e.pointer.labels is not None):
                return True
            if isinstance(e, BAgg) and q.measure_aggregates[e.index].labels is not None:
                return True
    return False


def _flags(q) -> bool:
    """Whether output rows depend on the matches' exclusion flags."""
    return q.rows_per_match == "ALL" and q.has_exclusions


def supported(plan: Plan) -> bool:
    return not per_match(plan)


def per_match(plan: Plan) -> tuple[str, ...]:
    """The measures that run match by match in Python (explain names them): all of them
    under event selection; else those this module does not compute (casts to VARCHAR(n),
    from text, to and from decimals and times, other aggregates, user functions)."""
    q = plan.query
    if q.gapped:
        return tuple(m.name for m in q.measures)
    return tuple(m.name for m in q.measures if not _column(q, m.expr))


def _column(q, e) -> bool:
    return _leaf(q, e) or _over_leaves(q, e) is not None


def _over_leaves(q, e) -> tuple[BExpr, list[BExpr]] | None:
    """An expression over leaf measures as compile.vectorize evaluates a row: each leaf (a
    measure _leaf computes) becomes a column of the current row, numbered in order; with the
    leaves. None where it has no leaf or vectorize would not take it."""
    leaves: list[BExpr] = []

    def swap(x):
        if not isinstance(x, BLiteral) and _leaf(q, x):
            leaves.append(x)
            return BNav(Pointer(None), BColumn(len(leaves) - 1, f"measure{len(leaves)}", x.type), x.type)
        if not isinstance(x, BExpr) or isinstance(x, BNav | BAgg | BClassifier | BMatchNumber):
            return x  # (a navigation or aggregate this module does not compute: vectorize refuses it)
        changed = {f.name: _map_field(getattr(x, f.name), swap) for f in dataclasses.fields(x) if f.name != "impl"}
        return dataclasses.replace(x, **changed)

    swapped = swap(e)
    if not leaves or not is_row_local(swapped, 0):
        return None
    return swapped, leaves


def _map_field(v, fn):
    if isinstance(v, tuple):
        return tuple(_map_field(y, fn) for y in v)
    return fn(v) if isinstance(v, BExpr) else v


def _leaf(q, e) -> bool:
    if isinstance(e, BMatchNumber):
        return True
    if isinstance(e, BAgg):
        return _foldable(q.measure_aggregates[e.index])
    if isinstance(e, BNav):
        return isinstance(e.inner, BColumn)
    return isinstance(e, BClassifier)


def _foldable(spec: AggregateSpec) -> bool:
    """COUNT(*) and COUNT(X.*), or COUNT SUM AVG MIN MAX DELTA of a numeric column, over the
    match's rows or its variables' (DISTINCT, a key, PREVIOUS: per match)."""
    if spec.distinct or spec.previous or spec.key is not None:
        return False
    if spec.arg is None:
        return spec.func == "COUNT"
    if not isinstance(spec.arg, BColumn):
        return False
    if spec.arg.type == Type.TIMESTAMP:
        return spec.func == "DELTA"  # an interval: how long the match took
    return spec.func in _FOLDS and spec.arg.type in (Type.BIGINT, Type.DOUBLE)


def measure_columns(plan: Plan, part, spans: Spans, types: list, bounds: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, list[pa.Array]] | None:
    """(partition row of each output row, one Arrow array per measure) for the matches
    ``spans``; None where an aggregate needs the per-match path (see the module's
    docstring), or where the spans lack the exclusion flags or unmatched rows the query's
    output rows need (the matcher that found them does not give them: the per-match path
    runs). ``bounds``: each match's partition as rows [lo, hi) of ``part`` when it holds
    many partitions (PREV and NEXT stay inside them)."""
    q = plan.query
    if (_flags(q) and spans.excluded is None) or (q.with_unmatched and spans.unmatched is None):
        return None
    out = _Output.of(q, spans)
    columns = []
    for m, shape, t in zip(plan.query.measures, _shapes(plan), types, strict=True):
        if shape is None:
            return None
        got = (_leaf_column(plan, m.expr, part, spans, out, t, bounds) if shape == _LEAF
               else _expression_column(plan, shape, part, spans, out, t, bounds))
        if got is None:
            return None
        columns.append(got)
    if q.with_unmatched and len(spans.unmatched):
        return _with_unmatched(spans, out, columns)
    return out.rows, columns


def _with_unmatched(spans: Spans, out: _Output, columns: list[pa.Array]) -> tuple[np.ndarray, list[pa.Array]]:
    """The output rows with the unmatched rows among them, each before the first match
    starting after it, their measures NULL."""
    u = spans.unmatched
    # A match's rows sort at 2 * start + 1, an unmatched row r at 2 * r (no match starts at r).
    keys = np.concatenate((2 * spans.starts[out.match] + 1, 2 * u))
    order = np.argsort(keys, kind="stable")
    rows = np.concatenate((out.rows, u))[order]
    which = np.concatenate((np.arange(len(out.rows), dtype=np.int64), np.full(len(u), -1, dtype=np.int64)))[order]
    take = pa.array(which, mask=which < 0)
    return rows, [c.take(take) for c in columns]


@dataclasses.dataclass
class _Output:
    """The output rows of matches: each one's match (None: match i is row i), its place in
    the match (-1: an empty match's) and its partition row; ``final`` where every measure
    sees the whole match (ONE ROW PER MATCH: the match's last row)."""

    match: np.ndarray | None
    place: np.ndarray
    rows: np.ndarray
    final: bool

    @staticmethod
    def of(q, spans: Spans) -> _Output:
        lengths = spans.ends - spans.starts
        if q.rows_per_match == "ONE":
            return _Output(None, lengths - 1, spans.starts, True)
        # ALL ROWS PER MATCH: each matched row not excluded, match after match; an empty
        # match's row unless OMIT EMPTY MATCHES (WITH UNMATCHED ROWS shows them too).
        counts = np.where(lengths > 0, lengths, 0 if q.empty_matches == "OMIT" else 1)
        match = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
        place = np.arange(len(match), dtype=np.int64) - (np.cumsum(counts) - counts)[match]
        place[lengths[match] == 0] = -1
        if spans.excluded is not None and len(spans.excluded):
            kept = (place < 0) | ~spans.excluded[np.maximum(spans.offsets[:-1][match] + place, 0)]
            match, place = match[kept], place[kept]
        return _Output(match, place, spans.starts[match] + np.maximum(place, 0), False)

    def per(self, values):
        """Each output row's value of a per-match array (or Arrow array)."""
        if self.match is None:
            return values
        return values.take(pa.array(self.match)) if isinstance(values, pa.Array) else values[self.match]


def _shapes(plan: Plan) -> list:
    """Each measure's shape, worked out once per plan: _LEAF, or what _over_leaves makes of
    it (None: per match). Compared by value: the plan travels pickled to Spark's tasks."""
    q = plan.query
    return plan.derive("measure_shapes", lambda: [
        _LEAF if _leaf(q, m.expr) else _over_leaves(q, m.expr) for m in q.measures])


def _leaf_column(plan: Plan, e, part, spans: Spans, out: _Output, t, bounds) -> pa.Array | None:
    q = plan.query
    if isinstance(e, BMatchNumber):
        return pa.array(out.per(spans.numbers), type=t or pa.int64())
    if isinstance(e, BAgg):
        return _measure_aggregate(q.measure_aggregates[e.index], part, spans, out, t)
    if isinstance(e, BClassifier):
        return _classifier(plan, e.pointer, spans, out, t)
    return _navigation(e, part, spans, out, t, bounds)


def _classifier(plan: Plan, p: Pointer, spans: Spans, out: _Output, t) -> pa.Array:
    """The variable of the row a pointer designates; PREV/NEXT reach only the match's own
    rows (as runtime.measures.label_at)."""
    at, valid = _position(p, spans, out)
    if p.physical:
        lo = out.per(spans.offsets[:-1])
        at = at + p.physical
        valid &= (at >= lo) & (at < lo + out.per(spans.ends - spans.starts))
        at = np.where(valid, at, 0)
    names = np.array(plan.labels, dtype=object)[spans.labels[at]] if len(spans.labels) \
        else np.full(len(at), None, dtype=object)
    return pa.array(names, type=t or pa.string(), mask=~valid)


def _expression_column(plan: Plan, shape, part, spans: Spans, out: _Output, t, bounds) -> pa.Array | None:
    """An expression over leaf measures (``shape``: what _over_leaves made of it), each
    leaf's column computed as a measure's, then evaluated as compile.vectorize evaluates
    rows; None where a value needs the per-match path (an integer past 2^31, an error the
    rows must report)."""
    swapped, leaves = shape
    n = len(out.place)
    data, valid, small = {}, {}, {}
    for k, leaf in enumerate(leaves):
        arr = _leaf_column(plan, leaf, part, spans, out, None, bounds)
        got = None if arr is None else _as_numpy(arr)
        if got is None:
            return None
        data[k], valid[k] = got
        small[k] = data[k].dtype.kind != "i" or max_magnitude(data[k]) < SMALL_INT
    try:
        got = values_of(swapped, ColumnArrays(data, valid, n, small))
    except FunctionError:
        return None  # (an overflow: the per-match path reports it at its match)
    if got is None:
        return None
    d, v = (np.broadcast_to(x, n) for x in got)
    if d.dtype == object:
        d = np.where(v, d, None)
    arr = pa.array(d, mask=~v)
    return arr.cast(t) if t is not None and arr.type != t else arr


def _as_numpy(arr: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """(data, valid) of a leaf measure's column: numbers and booleans, or strings."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.to_numpy(zero_copy_only=False), pc.is_valid(arr).to_numpy(zero_copy_only=False)
    return numpy_values(arr)


def _position(p: Pointer, spans: Spans, out: _Output) -> tuple[np.ndarray, np.ndarray]:
    """(position in the matched rows, match after match; found) of the row ``p``
    designates for each output row, before PREV/NEXT, as runtime.measures._index_of: a
    RUNNING LAST counts the rows up to the output row, FIRST and FINAL the whole match."""
    k = p.offset
    lo = out.per(spans.offsets[:-1])
    upto = out.per(spans.offsets[1:]) - 1  # the last row a pointer may see
    if p.running and p.last and not out.final:
        upto = lo + out.place
    if p.labels is None:
        at = (upto - k) if p.last else (lo + k)
        valid = (at >= lo) & (at <= upto)
    else:
        s = _labelled(spans, p.labels)
        first = out.per(s.first)
        if p.running and p.last and not out.final:
            # the rows up to the output row (those of earlier matches lie before lo)
            count = np.searchsorted(s.at, upto, side="right") - first
        else:
            count = out.per(s.count)
        valid = k < count
        i = first + (count - 1 - k if p.last else k)
        at = s.at[np.where(valid, i, 0)] if len(s.at) else np.zeros(len(i), dtype=np.int64)
    return np.where(valid, at, 0), valid


def _navigation(e: BNav, part, spans: Spans, out: _Output, t, bounds) -> pa.Array:
    """A column's value at the row a navigation designates (NULL where there is none)."""
    at, valid = _position(e.pointer, spans, out)
    if e.pointer.labels is None:
        idx = at - out.per(spans.offsets[:-1]) + out.per(spans.starts)
    else:
        rows = spans.rows()[1]
        idx = rows[at] if len(rows) else at
    idx = idx + e.pointer.physical
    lo, hi = (out.per(bounds[0]), out.per(bounds[1])) if bounds is not None else (0, part.n)
    valid &= (idx >= lo) & (idx < hi)
    column = part.cols.arrow(e.inner.index)
    taken = column.take(pa.array(np.where(valid, idx, 0), mask=~valid))
    taken = taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
    if pa.types.is_dictionary(taken.type):
        taken = taken.cast(taken.type.value_type)
    return taken.cast(t) if t is not None and taken.type != t else taken


def _measure_aggregate(spec: AggregateSpec, part, spans: Spans, out: _Output, t) -> pa.Array | None:
    if spec.running and not out.final:
        return _running_aggregate(spec, part, spans, out, t)
    got = _match_aggregate(spec, part, spans, t)
    return None if got is None else out.per(got)


def _match_aggregate(spec: AggregateSpec, part, spans: Spans, t) -> pa.Array | None:
    """The aggregate over each whole match."""
    if spec.labels is not None:
        s = _labelled(spans, spec.labels)
        if spec.arg is None:
            return pa.array(s.count, type=t or pa.int64())
        column = part.cols.arrow(spec.arg.index).take(pa.array(s.rows))
        starts, ends = s.first, s.first + s.count
    else:
        if spec.arg is None:
            return pa.array(spans.ends - spans.starts, type=t or pa.int64())
        column, starts, ends = part.cols.arrow(spec.arg.index), spans.starts, spans.ends
    got = _aggregate(spec.func, column, starts, ends)
    if got is None:
        return None
    values, has = got
    arr = pa.array(values, mask=~has)
    return arr.cast(t) if t is not None and arr.type != t else arr


def _running_aggregate(spec: AggregateSpec, part, spans: Spans, out: _Output, t) -> pa.Array | None:
    """The aggregate over each output row's match up to that row (its fold's prefix there;
    an empty match's row gets the fold of no rows)."""
    rows = spans.rows()[1]
    inset = np.ones(len(rows), dtype=np.bool_) if spec.labels is None else _labelled(spans, spec.labels).hit
    if spec.arg is None:
        data, valid, times = np.zeros(len(rows), dtype=np.int64), np.ones(len(rows), dtype=np.bool_), False
    else:
        got = _numbers(part.cols.arrow(spec.arg.index).take(pa.array(rows)))
        if got is None:
            return None
        data, valid, times = got
    code = ("SUM", "AVG", "MIN", "MAX", "COUNT", "DELTA").index(spec.func)
    values, has, counts, ok = _prefix(data, valid, inset, spans.offsets, code, data.dtype == np.int64)
    if not ok:
        return None  # beyond BIGINT: the per-match path reports it
    if spec.func == "COUNT":
        values, has = counts, np.ones(len(counts), dtype=np.bool_)
    elif spec.func == "AVG":
        if data.dtype == np.int64 and np.any((values > _EXACT) | (values < -_EXACT)):
            return None  # float(sum) would round where Python's int / int does not
        values = values.astype(np.float64) / np.maximum(counts, 1)
    at = out.per(spans.offsets[:-1]) + out.place
    some = out.place >= 0
    at = np.where(some, at, 0)
    values = values[at] if len(values) else np.zeros(len(at), dtype=values.dtype)
    has = some & has[at] if len(has) else some
    if spec.func == "COUNT":
        values, has = np.where(some, values, 0), np.ones(len(at), dtype=np.bool_)
    if times:
        values = values.astype("timedelta64[us]")
    arr = pa.array(values, mask=~has)
    return arr.cast(t) if t is not None and arr.type != t else arr


def _numbers(column) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """(data, valid, whether microseconds of a timestamp) of an aggregate's column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    times = pa.types.is_timestamp(column.type)
    if times:  # DELTA of instants (zoned) or wall times (naive): whole microseconds
        column = timestamp_micros(column)
        if column is None:
            return None
    got = numpy_values(column)
    return None if got is None else (got[0], got[1], times)


def _aggregate(func: str, column, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, not NULL) of ``func`` over rows [start, end) of each match, or None."""
    got = _numbers(column)
    if got is None:
        return None
    data, valid, times = got
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
                lo, hi = (acc, v) if code == 3 else (v, acc)
                if not seen or sql_less_number(lo, hi):
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


@njit
def _prefix(data, valid, inset, offs, code, wraps):
    """Each matched row's running fold over its match's rows in ``inset`` up to it, as
    _fold folds them: code 0 SUM, 1 AVG's sum, 2 MIN, 3 MAX, 4 COUNT (counts only), 5
    DELTA (the latest row's value minus the first's, NULL if either is). (values, not
    NULL, non-NULL rows so far, ok: False when an int64 (``wraps``) sum or difference
    leaves BIGINT)."""
    n = len(data)
    out = np.zeros(n, dtype=data.dtype)
    has = np.zeros(n, dtype=np.bool_)
    counts = np.zeros(n, dtype=np.int64)
    zero = np.zeros(1, dtype=data.dtype)[0]
    for i in range(len(offs) - 1):
        acc, first, seen, any_row, first_ok, c = zero, zero, False, False, False, 0
        for r in range(offs[i], offs[i + 1]):
            if inset[r]:
                v = data[r]
                if code == 5:
                    if not any_row:
                        first, first_ok, any_row = v, valid[r], True
                    diff = v - first
                    seen = first_ok and valid[r]
                    if wraps and seen and (v >= 0) != (first >= 0) and (diff >= 0) != (v >= 0):
                        return out, has, counts, False
                    acc = diff
                elif valid[r]:
                    c += 1
                    if code == 2 or code == 3:
                        lo, hi = (acc, v) if code == 3 else (v, acc)
                        if not seen or sql_less_number(lo, hi):
                            acc = v
                    elif code <= 1:
                        total = v if not seen and code == 0 else acc + v
                        if (acc >= 0) == (v >= 0) and (total >= 0) != (acc >= 0):
                            return out, has, counts, False
                        acc = total
                    seen = True
            out[r] = acc
            has[r] = seen
            counts[r] = c
    return out, has, counts, True
