"""Spark DataFrame plumbing the strategies share: the internal columns, the plan of a
DataFrame's schema, the sort order of a query, shuffle widths, cached data's release."""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import referenced_columns
from sparkcep.data.output import output_schema
from sparkcep.errors import QueryError
from sparkcep.query import compile_query
from sparkcep.spark.session import parallelism

# Input position: monotonically_increasing_id() of the user's DataFrame, the tie-break of
# ORDER BY (the order toPandas() gives).
ROW = "__sparkcep_row__"
# monotonically_increasing_id() of the sorted (or as-read) rows: unique, increasing in the
# rows' order and by one within a Spark partition; a partition is named by its first value.
POS = "__sparkcep_pos__"
GIDX = "__sparkcep_gidx__"  # a row's place in the sorted input (0, 1, 2, ...)
WIN = "__sparkcep_win__"  # the batch task a row is read by
BUCKET = "__sparkcep_bucket__"
# Arrow batches from Spark carry timestamps in UTC (the session time zone sparkcep sets).
TZ = "UTC"


def untyped(df):
    """``df`` with every column of the null type, which takes any type (a CSV file with no
    rows: Spark infers a string for every column, from no values)."""
    from pyspark.sql import functions as F

    return df.select([F.lit(None).alias(c) for c in df.columns])


def plan_for(df, clause: str, mode: str = "sql", how: str | None = None,
             sharing: bool = True) -> tuple[Plan, pa.Schema]:
    """The plan for a Spark DataFrame and its Arrow input schema, whether Spark can type
    its measures or not (explain shows both)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(df.schema, timezone=TZ)
    return compile_query(clause, arrow_schema.empty_table(), mode, how, sharing), arrow_schema  # (cached)


def compile_for(df, clause: str, mode: str = "sql", how: str | None = None,
                sharing: bool = True) -> tuple[Plan, pa.Schema, Any]:
    """The plan for a Spark DataFrame, its Arrow input schema and the Spark output schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    plan, arrow_schema = plan_for(df, clause, mode, how, sharing)
    check_typed_measures(plan.query, arrow_schema, clause)
    out = output_schema(plan.query, arrow_schema)
    return plan, arrow_schema, from_arrow_schema(out)


def check_typed_measures(q, arrow_schema: pa.Schema, clause: str) -> None:
    """Refuse a measure whose type a registered function's values would decide (returns="any",
    or an array): a Spark DataFrame's schema is fixed before any row is read."""
    from sparkcep.analysis.bound import BAgg, BCall, Type, nodes
    from sparkcep.data.output import measure_types
    from sparkcep.functions import user_functions

    registered = user_functions()

    def untyped_calls(e):
        for x in nodes(e):
            if isinstance(x, BCall) and x.type in (Type.ANY, Type.ARRAY) and x.name.upper() in registered:
                yield x
            elif isinstance(x, BAgg) and q.measure_aggregates[x.index].arg is not None:
                yield from untyped_calls(q.measure_aggregates[x.index].arg)

    for m, t in zip(q.measures, measure_types(q, arrow_schema), strict=True):
        if not (t is None or (pa.types.is_list(t) and pa.types.is_null(t.value_type))):
            continue
        calls = list(untyped_calls(m.expr))
        if not calls:
            continue  # a built-in's (array_min(ARRAY[]) is NULL of no type): as text
        f = calls[0]
        how = "returns='any' (its values decide its type)" if f.type is Type.ANY else "returns='array'"
        span = m.span if m.span is not None and m.span.line > 0 else None  # a translated query's may be none
        raise QueryError("NOT_SUPPORTED", f"measure {m.name}: on Spark a result's types are fixed before any row "
                         f"is read, and {f.name.lower()} was registered with {how}: register it with a type "
                         f"(returns='double', 'bigint', 'varchar', ...) or CAST its result", span, clause)


def compile_reading(df, clause: str, mode: str = "sql", how: str | None = None, sharing: bool = True):
    """compile_for, with the input cut to the columns the query reads where ONE ROW PER
    MATCH outputs keys and measures only: the others need not cross a shuffle, reach Python
    (the hand-off is most of the cost) nor wait in a stream's state. Returns (the input,
    the plan, its Arrow input schema, the Spark output schema)."""
    plan, arrow_schema, spark_schema = compile_for(df, clause, mode, how, sharing)
    if plan.query.rows_per_match == "ONE":
        # At least one column: Arrow tables without columns lose their row counts when
        # concatenated (the run strategy's batch edges), and a query may read none.
        read = sorted(referenced_columns(plan.query)) or [0]
        if len(read) < len(df.columns):
            df = df.select(*[df.columns[i] for i in read])
            plan, arrow_schema, spark_schema = compile_for(df, clause, mode, how, sharing)
    return df, plan, arrow_schema, spark_schema


def arrow_of(spark_schema) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema, timezone=TZ)


def sort_columns(plan: Plan):
    """PARTITION BY, ORDER BY (with its NULL order), then input position: a total order."""
    from pyspark.sql import functions as F

    q = plan.query
    cols = [F.col(k.column).asc_nulls_last() for k in q.partition_by]
    for k in q.order_by:
        c = F.col(k.column)
        if k.descending:
            cols.append(c.desc_nulls_first() if k.nulls_first else c.desc_nulls_last())
        else:
            cols.append(c.asc_nulls_first() if k.nulls_first else c.asc_nulls_last())
    cols.append(F.col(ROW).asc())
    return cols


# Rows one task may hold when a query needs whole partitions (EVENT SELECTION, negation,
# segment queries): Spark hands a key group to one Python worker as one table.
MAX_TASK_ROWS_CONF = "spark.sparkcep.maxTaskRows"
DEFAULT_MAX_TASK_ROWS = 10_000_000


def max_task_rows(spark) -> int:
    return int(spark.conf.get(MAX_TASK_ROWS_CONF, str(DEFAULT_MAX_TASK_ROWS)))


def slots(df, tasks: int | None = None) -> int:
    """Shuffle partitions for ``tasks`` tasks (None: many): one per task up to a few per
    core (an explicit count, so adaptive execution does not merge them into one task)."""
    most = 4 * parallelism(df.sparkSession)
    return max(1, most if tasks is None else min(tasks, most))


def unpersist(df) -> None:
    with contextlib.suppress(Exception):  # the session may be gone at exit
        df.unpersist()
