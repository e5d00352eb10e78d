"""Tables in and out: pandas/Arrow input to one Arrow table, the schema the analyzer sees,
sorting into partitions, column values for evaluation, and Arrow output columns."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.analysis.analyzer import Column
from sparkcep.analysis.bound import AnalyzedQuery, BColumn, SortKey, Type
from sparkcep.errors import DataError, SparkCepError

ROW_ID = "__sparkcep_row__"


def to_arrow(data: Any) -> tuple[pa.Table, str]:
    """The input as an Arrow table, and which kind it came as ("pandas" or "arrow")."""
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
        try:
            # pandas' NaN in a float column is its missing-value marker: it becomes NULL.
            return pa.Table.from_pandas(data, preserve_index=False), "pandas"
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise DataError(f"cannot read the DataFrame: {e}") from None
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), "arrow"
    if isinstance(data, pa.Table):
        names = data.column_names
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise DataError("column names must be unique", column=dup)
        return data, "arrow"
    kind = type(data).__module__.split(".")[0]
    if kind == "pyspark":
        raise SparkCepError("Spark DataFrames are not supported yet: the Spark runner is not built; pass a pandas DataFrame or an Arrow table")
    raise SparkCepError(f"data must be a pandas DataFrame or a pyarrow Table, not {type(data).__name__}")


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
    return None


def schema_of(table: pa.Table) -> list[Column]:
    return [Column(f.name, sql_type(f.type), f.type) for f in table.schema]


def referenced_columns(q: AnalyzedQuery) -> set[int]:
    """Input columns that expressions, PARTITION BY or ORDER BY read."""
    found: set[int] = {k.index for k in q.partition_by} | {k.index for k in q.order_by}

    def walk(x: Any) -> None:
        if isinstance(x, BColumn):
            found.add(x.index)
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


def python_values(col: pa.ChunkedArray) -> list[Any]:
    """Column values as Python objects (NULL → None) for the row evaluator."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = col.cast(pa.timestamp("us", t.tz), safe=False)
    if pa.types.is_duration(t) and t.unit == "ns":
        col = col.cast(pa.duration("us"), safe=False)
    return col.to_pylist()


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

    order: list[int]  # sorted position -> input row
    bounds: list[tuple[int, int]]  # [start, end) of each partition in sorted positions


def sort_and_partition(table: pa.Table, q: AnalyzedQuery) -> Partitions:
    n = table.num_rows
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
    helper.append((ROW_ID, pa.array(range(n), pa.int64())))
    keys.append((ROW_ID, "ascending"))
    if len(keys) == 1:
        order = list(range(n))
    else:
        t = pa.table(dict(helper))
        order = pc.sort_indices(t, sort_keys=keys).to_pylist()
    bounds: list[tuple[int, int]] = []
    if not q.partition_by:
        if n:
            bounds.append((0, n))
        return Partitions(order, bounds)
    key_values = [python_values(table.column(k.index).take(pa.array(order, pa.int64()))) for k in q.partition_by]
    start = 0
    for pos in range(1, n):
        if any(not _same_key(v[pos], v[pos - 1]) for v in key_values):
            bounds.append((start, pos))
            start = pos
    if n:
        bounds.append((start, n))
    return Partitions(order, bounds)


def _same_key(a: Any, b: Any) -> bool:
    """Partition keys group as SQL's GROUP BY does: NULL with NULL, NaN with NaN."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


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


def measure_array(name: str, values: list[Any], t: Type, source: pa.DataType | None) -> pa.Array:
    arrow_type = source if source is not None else _ARROW.get(t)
    if pa.types.is_dictionary(arrow_type) if arrow_type is not None else False:
        arrow_type = arrow_type.value_type
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise DataError(f"measure {name!r} has a value that does not fit {arrow_type or t.value}: {e}", column=name) from None
