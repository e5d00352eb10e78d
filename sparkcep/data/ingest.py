"""Tables in: pandas and Arrow input as one Arrow table (nothing dropped, names checked), the
schema the analyzer sees, the columns a query reads, and Arrow IPC bytes for rows that travel
between processes."""

from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Any

import numpy as np
import pyarrow as pa

from sparkcep.analysis.bound import AnalyzedQuery, BColumn, BWindow, Type
from sparkcep.analysis.scope import Column
from sparkcep.errors import DataError, SparkCepError
from sparkcep.types import MAX_DECIMAL_PRECISION, DecimalType
from sparkcep.values import BIGINT_MAX, BIGINT_MIN, UINT64_MAX

_HELD = b"sparkcep.placeholders"


def placeholders(table: pa.Table) -> frozenset[str]:
    """The columns to_arrow left in the input frame (their values: row positions)."""
    meta = table.schema.metadata or {}
    return frozenset(json.loads(meta[_HELD])) if _HELD in meta else frozenset()


def to_arrow(data: Any, keep: set[str] | None = None, positions: bool = True) -> tuple[pa.Table, str]:
    """The input as an Arrow table, and which kind it came as ("pandas" or "arrow").

    ``keep``: for pandas input, the upper-cased names a query mentions; text (object,
    string, category) columns it does not mention, and columns without an Arrow type, are
    not converted, which spares the costliest part of the hand-off: they become placeholders
    the query cannot read, holding each row's position, so that the output takes such a
    column's values from the input frame untouched (``placeholders``, ``values.to_pandas``);
    NULLs where the output holds no input column the query does not name (``positions``
    False: ONE ROW PER MATCH)."""
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
        arrays, held = [], []
        # One placeholder array for every held column, made only if one is.
        placeholder = functools.cache(lambda: pa.array(np.arange(len(data), dtype=np.int64)) if positions
                                      else pa.nulls(len(data)))

        for name in data.columns:
            col = data[name]
            if keep is not None and textual(col) and name.upper() not in keep:
                arrays.append(placeholder())
                held.append(name)
                continue
            try:
                array = _pandas_column(col)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeError) as e:
                if keep is not None and name.upper() not in keep:
                    arrays.append(placeholder())  # no Arrow type (complex, sparse, mixed), and not read
                    held.append(name)
                    continue
                # an object column's values are to blame one by one; another's, its type
                row = _first_unreadable(col) if col.dtype == object else None
                raise DataError(f"cannot read this column: {e}", column=name, row=row) from None
            except OverflowError:
                # An object column of Python ints, one of them past 64 bits: no Arrow type holds it.
                values = col.tolist()
                row = next((i for i, v in enumerate(values) if isinstance(v, int) and not BIGINT_MIN <= v <= UINT64_MAX), None)
                if row is not None:
                    raise DataError(f"cannot read this column: the integer {values[row]} does not fit 64 bits",
                                    column=name, row=row) from None
                # each fits, but not one type: negative numbers beside one past 2^63 - 1
                row = next((i for i, v in enumerate(values) if isinstance(v, int) and v > BIGINT_MAX), None)
                what = "an integer" if row is None else f"the integer {values[row]}"
                raise DataError(f"cannot read this column: {what} is past a signed 64-bit integer while others "
                                "are negative", column=name, row=row) from None
            if col.dtype == object:
                _check_one_type(col, array, name)
            arrays.append(array)
        if not arrays:  # rows and no columns: the rows still count (as in an Arrow table)
            return pa.table({"rows": pa.nulls(len(data))}).drop_columns(["rows"]), "pandas"
        table = pa.Table.from_arrays(arrays, names=list(data.columns))
        if held:
            table = table.replace_schema_metadata({_HELD: json.dumps(held)})
        return table, "pandas"
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), "arrow"
    if isinstance(data, pa.Table):
        names = data.column_names
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise DataError("column names must be unique", column=dup)
        return data, "arrow"
    raise SparkCepError(f"data must be a pandas DataFrame, a pyarrow Table or a Spark DataFrame, not {type(data).__name__}")


def textual(col) -> bool:
    """Whether a pandas column is text (object, strings, categories): to_arrow holds such a
    column for the output instead of reading it, where the query does not name it."""
    import pandas as pd

    return col.dtype.kind in "OUS" or isinstance(col.dtype, pd.CategoricalDtype)


def _first_unreadable(col) -> int:
    """The first row of a pandas column that Arrow cannot take with the rows before it
    (bisection over prefixes: a few conversions, not one a row)."""
    lo, hi = 0, len(col)  # the prefix of lo rows converts; of hi rows (the whole column), not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pa.array(col.iloc[:mid], from_pandas=True)
            lo = mid
        except (pa.ArrowException, UnicodeError, OverflowError, TypeError, ValueError):
            hi = mid
    return hi - 1


def _check_one_type(col, array: pa.Array, name: str) -> None:
    """A DataError naming the row where an object column's values mix types that Arrow
    silently made one: an int among dates read as days, among timestamps as microseconds,
    True among floats as 1.0, a str among bytes as its UTF-8, a datetime among dates as its
    date (the cheap C inference rules out most columns first)."""
    import pandas as pd

    kind = pd.api.types.infer_dtype(col, skipna=True)
    if kind not in ("mixed", "mixed-integer", "date"):
        return
    t = array.type
    if pa.types.is_date(t):
        ok = lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime)  # noqa: E731
    elif pa.types.is_timestamp(t):
        ok = lambda v: isinstance(v, (dt.datetime, np.datetime64))  # noqa: E731
    elif pa.types.is_duration(t):
        ok = lambda v: isinstance(v, (dt.timedelta, np.timedelta64))  # noqa: E731
    elif pa.types.is_floating(t):
        ok = lambda v: not isinstance(v, (bool, np.bool_))  # noqa: E731
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        ok = lambda v: not isinstance(v, str)  # noqa: E731
    else:
        return
    values = col.tolist()
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and v != v) or v is pd.NaT or ok(v):
            continue
        first = next(x for x in values if x is not None and ok(x))
        raise DataError(f"cannot read this column: it mixes {type(first).__name__} values with "
                        f"{type(v).__name__} ones ({v!r}), which would be read as {t}", column=name, row=i)


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
    if pa.types.is_decimal(t) and t.precision <= MAX_DECIMAL_PRECISION:
        return DecimalType(t.precision, t.scale)
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


def pack(magic: bytes, head: bytes, body: bytes) -> bytes:
    """State bytes: a magic line naming the layout, then ``head`` (its length first), then
    ``body`` (never pickle)."""
    return magic + len(head).to_bytes(4, "big") + head + body


def unpack(data: bytes, magic: bytes) -> tuple[bytes, bytes] | None:
    """(head, body) of ``pack``'s bytes, or None when they are not of this layout."""
    if not data.startswith(magic):
        return None
    k = len(magic)
    size = int.from_bytes(data[k:k + 4], "big")
    return data[k + 4:k + 4 + size], data[k + 4 + size:]
