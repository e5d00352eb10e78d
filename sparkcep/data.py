"""Tables in and out: pandas/Arrow input to one Arrow table, the schema the analyzer sees,
sorting into partitions, column values for evaluation, and Arrow output columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from sparkcep.analysis.analyzer import Column
from sparkcep.analysis.bound import AnalyzedQuery, BColumn, BWindow, SortKey, Type
from sparkcep.errors import DataError, SparkCepError
from sparkcep.values import as_read, numpy_values, python_values

ROW_ID = "__sparkcep_row__"


def to_arrow(data: Any, keep: set[str] | None = None) -> tuple[pa.Table, str]:
    """The input as an Arrow table, and which kind it came as ("pandas" or "arrow").

    ``keep``: for pandas input, the upper-cased names a query mentions; text (object,
    string, category) columns it does not mention are not converted (they become NULL
    placeholders the query cannot read), which spares the costliest part of the hand-off."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        bad = [c for c in data.columns if not isinstance(c, str)]
        if bad:
            raise DataError(f"column names must be strings; got {bad[0]!r}", column=str(bad[0]))
        if data.columns.duplicated().any():
            dup = data.columns[data.columns.duplicated()][0]
            raise DataError("column names must be unique", column=dup)
        arrays = []
        for name in data.columns:
            col = data[name]
            textual = col.dtype.kind in "OUS" or isinstance(col.dtype, pd.CategoricalDtype)
            if keep is not None and textual and name.upper() not in keep:
                arrays.append(pa.nulls(len(data)))
                continue
            try:
                arrays.append(_pandas_column(col))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                raise DataError(f"cannot read this column: {e}", column=name) from None
        return pa.Table.from_arrays(arrays, names=list(data.columns)), "pandas"
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), "arrow"
    if isinstance(data, pa.Table):
        names = data.column_names
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise DataError("column names must be unique", column=dup)
        return data, "arrow"
    raise SparkCepError(f"data must be a pandas DataFrame, a pyarrow Table or a Spark DataFrame, not {type(data).__name__}")


def _pandas_column(col) -> pa.Array:
    """One pandas column as Arrow, as pa.Table.from_pandas would convert it (NaN in a float
    column is pandas' missing value: NULL), zero-copy where numpy already holds the values."""
    if isinstance(col.dtype, np.dtype):  # not a pandas extension type
        kind = col.dtype.kind
        if kind in "iub":
            return pa.array(col.to_numpy())
        if kind == "f":
            values = col.to_numpy()
            if not np.isnan(values).any():
                return pa.array(values)
        if kind == "M":
            stamps = col.to_numpy()
            unit = np.datetime_data(stamps.dtype)[0]
            if unit in ("s", "ms", "us", "ns") and not np.isnat(stamps).any():
                # naive timestamps without NaT: their int64 ticks, viewed as timestamps
                return pa.array(stamps.view(np.int64)).view(pa.timestamp(unit))
    return pa.array(col, from_pandas=True)


def sql_type(t: pa.DataType) -> Type | None:
    if pa.types.is_dictionary(t):
        return sql_type(t.value_type)
    if pa.types.is_boolean(t):
        return Type.BOOLEAN
    if pa.types.is_integer(t):
        return Type.BIGINT
    if pa.types.is_floating(t):
        return Type.DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return Type.VARCHAR
    if pa.types.is_timestamp(t):
        return Type.TIMESTAMP
    if pa.types.is_date(t):
        return Type.DATE
    if pa.types.is_duration(t):
        return Type.INTERVAL
    if pa.types.is_null(t):
        return Type.NULL
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return Type.BINARY
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return Type.ARRAY
    return None


def schema_of(table: pa.Table) -> list[Column]:
    return [Column(f.name, sql_type(f.type), f.type) for f in table.schema]


def referenced_columns(q: AnalyzedQuery) -> set[int]:
    """Input columns that expressions, PARTITION BY or ORDER BY read."""
    found: set[int] = {k.index for k in q.partition_by} | {k.index for k in q.order_by}

    def walk(x: Any) -> None:
        if isinstance(x, BColumn):
            found.add(x.index)
        elif isinstance(x, BWindow) and x.column is not None:
            found.add(x.column)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif hasattr(x, "__dataclass_fields__"):
            for name in x.__dataclass_fields__:
                if name != "impl":
                    walk(getattr(x, name))

    walk(list(q.defines.values()))
    walk([m.expr for m in q.measures])
    walk(list(q.define_aggregates) + list(q.measure_aggregates))
    return found


def table_to_ipc(table: pa.Table) -> bytes:
    """A table as Arrow IPC stream bytes (how rows travel between driver, tasks and state)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _sort_columns(table: pa.Table, key: SortKey, descending: bool, nulls_first: bool, tag: str
                  ) -> tuple[list[tuple[str, pa.Array]], list[tuple[str, str]]]:
    """Helper columns and sort keys for one key: NULL placement, NaN (greater than every
    number, as Trino orders it), then the value."""
    col = table.column(key.index)
    extra = [(f"{tag}_null", pc.is_null(col))]
    keys = [(f"{tag}_null", "descending" if nulls_first else "ascending")]
    if pa.types.is_floating(col.type):
        extra.append((f"{tag}_nan", pc.fill_null(pc.is_nan(col), False)))
        keys.append((f"{tag}_nan", "descending" if descending else "ascending"))
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
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


def _key_changes(table: pa.Table, keys: tuple[SortKey, ...], order: np.ndarray) -> np.ndarray:
    """Per pair of neighbouring sorted rows, whether their PARTITION BY keys differ, as
    GROUP BY groups: NULL with NULL, NaN with NaN; timestamps at the microsecond precision
    expressions read them at (vectorized: a Python loop here cost seconds per million rows)."""
    n = len(order)
    change = np.zeros(max(n - 1, 0), dtype=bool)
    idx = pa.array(order)
    for k in keys:
        col = as_read(table.column(k.index)).take(idx)
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
        if ties is None:
            # The first key in one compiled pass: 0 strictly ordered, 1 ordered with ties,
            # 2 out of order (or NaN).
            verdict = _ordered_pass(a, k.descending)
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


@njit(cache=True)
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


_ARROW = {
    Type.BIGINT: pa.int64(),
    Type.DOUBLE: pa.float64(),
    Type.BOOLEAN: pa.bool_(),
    Type.VARCHAR: pa.string(),
    Type.TIMESTAMP: pa.timestamp("us"),
    Type.DATE: pa.date32(),
    Type.INTERVAL: pa.duration("us"),
    Type.NULL: pa.null(),
}


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _expr_arrow_type(e, schema: pa.Schema, aggregates) -> pa.DataType | None:
    """The Arrow type of a measure: the column's own type for a plain column (or an
    aggregate that keeps it: MIN, MAX, FIRST...), a list of it for COLLECT and ARRAY[...],
    else the SQL type's. None: decided by the values (a function registered as "any")."""
    from sparkcep.analysis.bound import BAgg, BCall, BNav

    if isinstance(e, BNav) and isinstance(e.inner, BColumn):
        return _plain(schema.field(e.inner.index).type)
    if isinstance(e, BAgg):
        spec = aggregates[e.index]
        arg_type = None
        if spec.arg is not None:
            arg_type = (_plain(schema.field(spec.arg.index).type) if isinstance(spec.arg, BColumn)
                        else _ARROW.get(spec.arg.type))
        if spec.func in ("COLLECT", "MAX_N", "MIN_N", "MAX_BY_N", "MIN_BY_N"):
            return pa.list_(arg_type if arg_type is not None else pa.null())
        if spec.func in ("MIN", "MAX", "MAX_BY", "MIN_BY", "ARBITRARY") and arg_type is not None:
            return arg_type
    if isinstance(e, BCall) and e.name == "ARRAY":
        kinds = {t for t in (_expr_arrow_type(a, schema, aggregates) for a in e.args) if t is not None}
        if len(kinds) > 1 and all(pa.types.is_integer(k) or pa.types.is_floating(k) for k in kinds):
            kinds = {pa.float64()}
        return pa.list_(kinds.pop() if len(kinds) == 1 else pa.null())
    if e.type is Type.TIMESTAMP:
        # A timestamp computed from zoned columns is in their zone (date_trunc of a zoned
        # value is that zone's midnight), else naive.
        zones = [f.type.tz for f in (schema.field(c.index) for c in _columns_in(e))
                 if pa.types.is_timestamp(_plain(f.type)) and _plain(f.type).tz is not None]
        return pa.timestamp("us", zones[0] if zones else None)
    return _ARROW.get(e.type)


def _columns_in(e) -> list[BColumn]:
    """The input columns an expression reads (through navigation, calls and operators)."""
    found: list[BColumn] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, BColumn):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif hasattr(x, "__dataclass_fields__"):
            stack.extend(getattr(x, name) for name in x.__dataclass_fields__ if name != "impl")
    return found


def measure_types(q: AnalyzedQuery, schema: pa.Schema) -> list[pa.DataType | None]:
    return [_expr_arrow_type(m.expr, schema, q.measure_aggregates) for m in q.measures]


def output_columns(q: AnalyzedQuery) -> list[tuple[str, int | None]]:
    """Output column names with the input column each copies (None: the i-th measure,
    in measure order). ONE ROW: partition columns, measures. ALL ROWS: partition columns,
    ORDER BY columns, measures, the other input columns."""
    out: list[tuple[str, int | None]] = [(k.column, k.index) for k in q.partition_by]
    if q.rows_per_match == "ALL":
        for k in q.order_by:
            if k.column not in [n for n, _ in out]:
                out.append((k.column, k.index))
    out += [(m.name, None) for m in q.measures]
    if q.rows_per_match == "ALL":
        names = {n for n, _ in out}
        out += [(name, i) for i, name in enumerate(q.columns) if name not in names]
    return out


def output_schema(q: AnalyzedQuery, schema: pa.Schema) -> pa.Schema:
    types = iter(measure_types(q, schema))
    fields = []
    for name, idx in output_columns(q):
        if idx is None:
            t = next(types)
            fields.append(pa.field(name, t if t is not None else pa.string()))
        else:
            fields.append(schema.field(idx).with_name(name))
    return pa.schema(fields)


def output_table(q_or_plan, table: pa.Table, rows, measures: list,
                 types: list[pa.DataType | None] | None = None) -> pa.Table:
    """The output rows: input columns taken from ``rows`` of ``table``, measure columns
    from ``measures`` (per measure a list of values, or Arrow arrays to join)."""
    q = getattr(q_or_plan, "query", q_or_plan)
    types = types if types is not None else measure_types(q, table.schema)
    taken = table.take(pa.array(rows, pa.int64()))
    names, arrays = [], []
    j = 0
    for name, idx in output_columns(q):
        names.append(name)
        if idx is None:
            values = measures[j]
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                arrays.append(values)
            else:
                arrays.append(measure_array(name, values, types[j]))
            j += 1
        else:
            arrays.append(taken.column(idx))
    return pa.table(arrays, names=names) if names else pa.table({})


def measure_array(name: str, values: list[Any], arrow_type: pa.DataType | None) -> pa.Array:
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise DataError(f"measure {name!r} has a value that does not fit {arrow_type}: {e}", column=name) from None


class LazyColumns:
    """Columns of one partition (or window): Arrow arrays, turned into Python lists only
    when the Python evaluator asks (``cols[i]``) and into numpy arrays for the kernel
    (``numpy(i)``). Unread columns are None."""

    def __init__(self, arrays: list[pa.Array | pa.ChunkedArray | None]):
        self._arrow = arrays
        self._py: list[list[Any] | None] = [None] * len(arrays)

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

    def slice(self, start: int, length: int) -> LazyColumns:
        return LazyColumns([None if a is None else a.slice(start, length) for a in self._arrow])

    def materialized(self) -> list[list[Any] | None]:
        return [self[i] for i in range(len(self))]
