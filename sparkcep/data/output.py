"""Tables out: the output columns of ONE ROW / ALL ROWS PER MATCH, the Arrow type of each
measure, and the output table built from matched rows and measure values."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from sparkcep.analysis.bound import AnalyzedQuery, BColumn, Type
from sparkcep.errors import DataError
from sparkcep.types import is_decimal
from sparkcep.values import timestamps_out

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
                        else arrow_type(spec.arg.type))
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
    return arrow_type(e.type)


def arrow_type(t) -> pa.DataType | None:
    """The Arrow type of values of SQL type ``t`` (None: decided by the values)."""
    if is_decimal(t):
        return pa.decimal128(t.precision, t.scale)
    return _ARROW.get(t)


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


def output_schema(q: AnalyzedQuery, schema: pa.Schema, unknown: pa.DataType | None = None) -> pa.Schema:
    """The output's columns over input ``schema``; a measure whose values decide its type (a
    function registered with returns='any') is of type ``unknown`` (default: text)."""
    types = iter(measure_types(q, schema))
    fields = []
    for name, idx in output_columns(q):
        if idx is None:
            t = next(types)
            fields.append(pa.field(name, t if t is not None else unknown if unknown is not None else pa.string()))
        else:
            fields.append(schema.field(idx).with_name(name))
    return pa.schema(fields)


def output_table(q_or_plan, table: pa.Table, rows, measures: list,
                 types: list[pa.DataType | None] | None = None) -> pa.Table:
    """The output rows: input columns taken from ``rows`` of ``table``, measure columns
    from ``measures`` (per measure a list of values, or Arrow arrays to join)."""
    q = getattr(q_or_plan, "query", q_or_plan)
    types = types if types is not None else measure_types(q, table.schema)
    rows_at = pa.array(rows, pa.int64())
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
            arrays.append(_take(table.column(idx), rows_at))
    return pa.table(arrays, names=names) if names else pa.table({})


def _take(col: pa.ChunkedArray, rows: pa.Array) -> pa.ChunkedArray:
    """An input column's output rows, its type kept: Arrow has no take for the view types
    (string_view, binary_view), so those go through their plain twins and back."""
    t = col.type
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        plain = pa.large_string() if pa.types.is_string_view(t) else pa.large_binary()
        return col.cast(plain).take(rows).cast(t)
    return col.take(rows)


def measure_array(name: str, values: list[Any], arrow_type: pa.DataType | None) -> pa.Array:
    """A measure's values as an Arrow array of ``arrow_type`` (None: the values decide)."""
    if arrow_type is None and any(isinstance(v, dt.datetime) for v in values):
        arrow_type = pa.timestamp("us")  # an "any" function's timestamps: as a declared one's
    if arrow_type is not None and pa.types.is_timestamp(arrow_type):
        values, arrow_type = timestamps_out(values, arrow_type)
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise DataError(_unfit(name, values, arrow_type, e), column=name) from None


def _unfit(name: str, values: list[Any], arrow_type: pa.DataType | None, error: Exception) -> str:
    """Why a measure's values make no Arrow array, naming the output rows to blame."""
    def short(v: Any) -> str:
        text = repr(v)
        return f"{text[:40]}... ({type(v).__name__})" if len(text) > 43 else f"{text} ({type(v).__name__})"

    if arrow_type is None:
        first = next(((i, v) for i, v in enumerate(values) if v is not None), None)
        if first is not None:
            try:
                kind = pa.array([first[1]]).type
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return f"measure {name!r}: its value {short(first[1])} in output row {first[0]} has no Arrow type"
            for i, v in enumerate(values):
                if v is None:
                    continue
                try:
                    pa.array([v], type=kind)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                    return (f"measure {name!r} holds values of more than one type: {short(first[1])} in output row "
                            f"{first[0]}, {short(v)} in output row {i} (its type is decided by its values: register "
                            "the function with returns=... or CAST the measure)")
    else:
        for i, v in enumerate(values):
            try:
                pa.array([v], type=arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return f"measure {name!r} has the value {short(v)} in output row {i}, which does not fit {arrow_type}"
    return f"measure {name!r} has a value that does not fit {arrow_type}: {error}"
