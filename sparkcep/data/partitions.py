"""Rows into partitions: sorting by PARTITION BY, ORDER BY and input position (skipped when
the input is already in order), the partition bounds as GROUP BY groups them, and one
partition's columns as the matchers read them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep import jit
from sparkcep.analysis.bound import AnalyzedQuery, SortKey
from sparkcep.errors import DataError, QueryError
from sparkcep.jit import njit
from sparkcep.values import decoded, numpy_values, python_values

ROW_ID = "__sparkcep_row__"


def named_by_key(e: DataError, q: AnalyzedQuery, t: pa.Table, index: int | None) -> DataError:
    """``e`` naming its row by PARTITION BY and ORDER BY values (``index``: the row's place
    in ``t``), for rows without an input position: a Spark DataFrame's, a stream's."""
    if index is None or not 0 <= index < t.num_rows or isinstance(e, QueryError):
        return e
    names = [k.column for k in q.partition_by] + [k.column for k in q.order_by]
    key = {n: t.column(n)[index].as_py() for n in dict.fromkeys(names) if n in t.schema.names}
    return DataError(e.message, column=e.column, key=key)


def _sort_columns(table: pa.Table, key: SortKey, descending: bool, nulls_first: bool, tag: str
                  ) -> tuple[list[tuple[str, pa.Array]], list[tuple[str, str]]]:
    """Helper columns and sort keys for one key: NULL placement, NaN (greater than every
    number, as Trino orders it), then the value."""
    # Decoded, half floats widened (no sort kernel), but not as_read: rows a nanosecond
    # apart keep their order.
    col = decoded(table.column(key.index))
    extra = [(f"{tag}_null", pc.is_null(col))]
    keys = [(f"{tag}_null", "descending" if nulls_first else "ascending")]
    if pa.types.is_floating(col.type):
        extra.append((f"{tag}_nan", pc.fill_null(pc.is_nan(col), False)))
        keys.append((f"{tag}_nan", "descending" if descending else "ascending"))
    extra.append((f"{tag}_val", col))
    keys.append((f"{tag}_val", "descending" if descending else "ascending"))
    return extra, keys


@dataclass
class Partitions:
    """The input sorted by partition keys, then ORDER BY, then input position."""

    order: np.ndarray  # sorted position -> input row (int64)
    bounds: list[tuple[int, int]]  # [start, end) of each partition in sorted positions
    identity: bool = False  # the input is already in this order


_IDENTITY = np.zeros(0, dtype=np.int64)


def _identity(n: int) -> np.ndarray:
    """0 .. n-1, shared read-only between calls (an ordered input's sort order); kept for
    inputs up to 4 M rows only, so a one-off huge input does not pin its memory."""
    global _IDENTITY
    if n > 4_000_000:
        return np.arange(n, dtype=np.int64)
    if len(_IDENTITY) < n:
        _IDENTITY = np.arange(min(max(n, 2 * len(_IDENTITY)), 4_000_000), dtype=np.int64)
        _IDENTITY.flags.writeable = False
    return _IDENTITY[:n]


def sort_and_partition(table: pa.Table, q: AnalyzedQuery) -> Partitions:
    n = table.num_rows
    if not q.partition_by and (not q.order_by or already_ordered(table, q.order_by)):
        return Partitions(_identity(n), [(0, n)] if n else [], identity=True)
    if (q.partition_by and n > 1 and all(_rankable(table.column(k.index).type) for k in q.partition_by)
            and (not q.order_by or already_ordered(table, q.order_by))):
        # Rows already in ORDER BY order (event streams usually are): a stable sort by each
        # key's rank among its distinct values keeps that order inside each key.
        order = _by_key_ranks(table, q.partition_by)
        starts = np.flatnonzero(_key_changes(table, q.partition_by, order)) + 1
        bounds = list(zip([0, *starts.tolist()], [*starts.tolist(), n], strict=True))
        return Partitions(order, bounds)
    helper: list[tuple[str, pa.Array]] = []
    keys: list[tuple[str, str]] = []
    for i, k in enumerate(q.partition_by):
        extra, ks = _sort_columns(table, k, False, False, f"p{i}")
        helper += extra
        keys += ks
    for i, k in enumerate(q.order_by):
        extra, ks = _sort_columns(table, k, k.descending, k.nulls_first, f"o{i}")
        helper += extra
        keys += ks
    helper.append((ROW_ID, pa.array(np.arange(n, dtype=np.int64))))
    keys.append((ROW_ID, "ascending"))
    t = pa.table(dict(helper))
    order = pc.sort_indices(t, sort_keys=keys).to_numpy()
    bounds: list[tuple[int, int]] = []
    if not q.partition_by:
        if n:
            bounds.append((0, n))
        return Partitions(order, bounds)
    if n:
        starts = np.flatnonzero(_key_changes(table, q.partition_by, order)) + 1
        bounds = list(zip([0, *starts.tolist()], [*starts.tolist(), n], strict=True))
    return Partitions(order, bounds)


def merge_sorted(head: pa.Table, tail: pa.Table, tail_bounds: list[tuple[int, int]], q: AnalyzedQuery
                 ) -> Partitions | None:
    """sort_and_partition(concat([head, tail]), q) where ``tail`` (the many rows: a stream's
    new rows, sorted once for every rule that sorts alike) stands in this order already, its
    keys at ``tail_bounds``, and ``head`` (a rule's few buffered rows) does not: only head
    and each tail key's first row are sorted. None where a key's head rows do not all come
    before its tail rows (the caller sorts the whole)."""
    n_head = head.num_rows
    firsts = tail.take(pa.array([lo for lo, _ in tail_bounds], pa.int64()))
    small = sort_and_partition(pa.concat_tables([head, firsts]), q)
    small_order = small.order.astype(np.int64, copy=False)  # (sort_indices gives uint64)
    pieces: list[np.ndarray] = []
    bounds: list[tuple[int, int]] = []
    at = 0
    for lo, hi in small.bounds:
        rows = small_order[lo:hi]
        first = int(rows[-1]) - n_head  # the tail key's first row, if any, sorts after its head rows
        if first >= 0:
            if (rows[:-1] >= n_head).any():
                return None  # (two tail keys grouped as one: not as sort_and_partition cut them)
            a, b = tail_bounds[first]
            pieces += [rows[:-1], np.arange(n_head + a, n_head + b, dtype=np.int64)]
            size = hi - lo - 1 + b - a
        elif (rows >= n_head).any():
            return None  # a head row sorts after the tail key's first row: the whole must be sorted
        else:
            pieces.append(rows)
            size = hi - lo
        bounds.append((at, at + size))
        at += size
    order = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    return Partitions(order, bounds)


def _rankable(t: pa.DataType) -> bool:
    """Key types whose distinct values sort and group alike (no -0.0 beside 0.0, no NaN):
    ranks of their distinct values order the rows."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t))


def _by_key_ranks(table: pa.Table, keys: tuple[SortKey, ...]) -> np.ndarray:
    """Row order by PARTITION BY keys (ascending, NULL last, as _sort_columns orders them),
    ties in input order: each value's rank among the key's distinct values, one stable sort."""
    ranks = []
    for k in keys:
        col = table.column(k.index)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        distinct = pc.unique(col)
        rank = np.empty(len(distinct), dtype=np.int64)
        rank[pc.array_sort_indices(distinct, null_placement="at_end").to_numpy()] = np.arange(len(distinct))
        codes = pc.index_in(col, value_set=distinct, skip_nulls=False).to_numpy(zero_copy_only=False)
        ranks.append(rank[codes])
    return np.lexsort(ranks[::-1]).astype(np.int64)


def key_runs(table: pa.Table, keys: tuple[SortKey, ...]) -> list[tuple[int, int]]:
    """[lo, hi) of each run of equal PARTITION BY keys in ``table`` as its rows lie (sorted
    by key: each key's rows are one run), grouped as sort_and_partition groups them."""
    n = table.num_rows
    if not n:
        return []
    if not keys:
        return [(0, n)]
    starts = (np.flatnonzero(_key_changes(table, keys, _identity(n))) + 1).tolist()
    return list(zip([0, *starts], [*starts, n], strict=True))


def _key_changes(table: pa.Table, keys: tuple[SortKey, ...], order: np.ndarray) -> np.ndarray:
    """Per pair of neighbouring sorted rows, whether their PARTITION BY keys differ, as
    GROUP BY groups: NULL with NULL, NaN with NaN; values as stored, so that keys a
    nanosecond apart are two keys, as ORDER BY tells them apart (vectorized: a Python loop
    here cost seconds per million rows)."""
    n = len(order)
    change = np.zeros(max(n - 1, 0), dtype=bool)
    idx = pa.array(order)
    for k in keys:
        col = decoded(table.column(k.index)).take(idx)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_null(col.type):
            continue  # all NULL: one group
        plain = ~pc.is_null(col).to_numpy(zero_copy_only=False)
        change |= plain[1:] != plain[:-1]
        if pa.types.is_floating(col.type):
            nan = pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False)
            change |= nan[1:] != nan[:-1]
            plain &= ~nan
        differs = pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, n - 1)), False).to_numpy(zero_copy_only=False)
        change |= differs & plain[1:] & plain[:-1]
    return change


def already_ordered(table: pa.Table, keys: tuple[SortKey, ...]) -> bool:
    """Whether the rows already stand in ORDER BY order (event streams usually do), so
    sorting can be skipped. Only for numeric and timestamp keys without NULL or NaN."""
    n = table.num_rows
    if n < 2:
        return True
    ties: np.ndarray | None = None  # pairs (i, i+1) equal on every key so far; None: all pairs
    for k in keys:
        col = table.column(k.index)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)):
            return False
        if col.null_count:
            return False
        a = col.to_numpy()
        if a.dtype.kind in "mM":
            a = a.view(np.int64)
        elif a.dtype.itemsize < 8:
            # One compiled pass for every key type (int32, float32, uint16...): widened
            # exactly, and read-only as Arrow's own arrays are, so that `sparkcep warm`'s
            # int64 and float64 keys have compiled it already.
            a = a.astype(np.float64 if a.dtype.kind == "f" else np.int64)
            a.flags.writeable = False
        if ties is None:
            # The first key in one compiled pass: 0 strictly ordered, 1 ordered with ties,
            # 2 out of order (or NaN).
            verdict = _ordered_pass(a, k.descending) if jit.active() else _ordered_numpy(a, k.descending)
            if verdict != 1:
                return verdict == 0
            first, second = (a[1:], a[:-1]) if k.descending else (a[:-1], a[1:])
            ties = np.flatnonzero(first == second)
            continue
        first, second = (a[1:], a[:-1]) if k.descending else (a[:-1], a[1:])
        first, second = first[ties], second[ties]
        if pa.types.is_floating(t) and (np.isnan(first).any() or np.isnan(second).any()):
            return False
        if (first > second).any():
            return False
        same = np.flatnonzero(first == second)
        if not len(same):
            return True
        ties = ties[same]
    return True


def _ordered_numpy(a: np.ndarray, descending: bool) -> int:
    """_ordered_pass in numpy (three passes, no compiler): before this process loads a kernel."""
    if a.dtype.kind == "f" and np.isnan(a).any():
        return 2
    first, second = (a[1:], a[:-1]) if descending else (a[:-1], a[1:])
    if (first > second).any():
        return 2
    return 1 if (first == second).any() else 0


@njit
def _ordered_pass(a, descending):
    """0: strictly increasing (decreasing), 1: with equal neighbours, 2: neither (or NaN)."""
    ties = False
    for i in range(a.shape[0] - 1):
        x, y = a[i], a[i + 1]
        if x != x or y != y:
            return 2
        if descending:
            x, y = y, x
        if x > y:
            return 2
        if x == y:
            ties = True
    return 1 if ties else 0


class LazyColumns:
    """Columns of one partition (or window): Arrow arrays, turned into Python lists only
    when the Python evaluator asks (``cols[i]``) and into numpy arrays for the kernel
    (``numpy(i)``). Unread columns are None."""

    def __init__(self, arrays: list[pa.Array | pa.ChunkedArray | None]):
        self._arrow = arrays
        self._py: list[list[Any] | None] = [None] * len(arrays)
        # Row-local condition masks over these rows, by condition: rules run over one sorted
        # input evaluate a condition they define alike once (runtime.fast); rules on threads
        # look up, evaluate and keep a mask under the lock (else two would both evaluate it).
        self.masks: dict = {}
        self.masks_lock = threading.Lock()

    def __getstate__(self) -> dict:
        # (the task engine sends columns to its worker processes, and a lock does not pickle)
        return {k: v for k, v in self.__dict__.items() if k != "masks_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.masks_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._arrow)

    def __getitem__(self, i: int) -> list[Any] | None:
        if self._arrow[i] is None:
            return None
        if self._py[i] is None:
            self._py[i] = python_values(self._arrow[i])
        return self._py[i]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def numpy(self, i: int):
        """(data, valid) as numpy for numeric and boolean columns, else None."""
        col = self._arrow[i]
        return None if col is None else numpy_values(col)

    def arrow(self, i: int):
        return self._arrow[i]

    def only(self, used) -> LazyColumns:
        """These columns as one plan reads them: the others None (its Python matcher converts
        no other plan's columns), the condition masks still shared."""
        out = LazyColumns([a if i in used else None for i, a in enumerate(self._arrow)])
        out._py = [p if i in used else None for i, p in enumerate(self._py)]
        out.masks, out.masks_lock = self.masks, self.masks_lock
        return out

    def slice(self, start: int, length: int) -> LazyColumns:
        return LazyColumns([None if a is None else a.slice(start, length) for a in self._arrow])

    def materialized(self) -> list[list[Any] | None]:
        return [self[i] for i in range(len(self))]
