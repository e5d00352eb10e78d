"""MATCH_RECOGNIZE as a SQL table function: ``SELECT * FROM match_recognize(TABLE(t), '<clause>')``
from ``spark.sql``, notebooks' SQL cells and any SQL client of the session.

A Python UDTF: Spark calls ``analyze`` when it analyzes the call, with the table's schema and
the literal clause, which gives the output schema and asks Catalyst for the clause's
partitioning (PARTITION BY's keys, or one partition). Each partition's rows then come to one
instance, row by row (``eval``), and ``terminate`` matches them on the local engine, as the
``partition`` strategy's tasks do. Spark's Arrow table functions would take whole batches
but cannot compute their schema from an argument (no ``analyze``): the row hand-off is
Spark's, and it is most of the cost (see docs/spark.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pyarrow as pa
from pyspark.sql.udtf import AnalyzeResult, PartitioningColumn, SelectedColumn

from sparkcep import functions
from sparkcep.errors import DataError, QueryError, SparkCepError
from sparkcep.spark.frames import TZ, check_typed_measures

# What the refusals say to use instead.
_FROM_PYTHON = "sparkcep.match_recognize(df, clause, **options) from Python"


@dataclasses.dataclass
class Analyzed(AnalyzeResult):
    """analyze's answer, with what each instance needs: the clause and the input's Arrow schema."""

    clause: str = ""
    arrow_schema: pa.Schema | None = None


class MatchRecognizeFunction:
    """The table function ``match_recognize(TABLE(t), clause)``."""

    @staticmethod
    def analyze(*args, **kwargs) -> Analyzed:
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        from sparkcep.data.ingest import referenced_columns
        from sparkcep.data.output import output_schema
        from sparkcep.query import compile_query

        try:
            table, clause = _arguments(args, kwargs)
            arrow_schema = to_arrow_schema(table.dataType, timezone=TZ)
            plan = compile_query(clause, arrow_schema.empty_table())
            check_typed_measures(plan.query, arrow_schema, clause)
        except SparkCepError as e:
            # Spark prints the traceback under the message: one line of it, not the analyzer's.
            raise e.with_traceback(None) from None
        q = plan.query
        out = from_arrow_schema(output_schema(q, arrow_schema))
        keys = [PartitioningColumn(_quoted(k.column)) for k in q.partition_by]
        select = []
        if q.rows_per_match == "ONE":
            # Only the columns the query reads reach Python (ONE ROW outputs keys and measures):
            # each row's hand-off is most of the cost.
            read = sorted(referenced_columns(q)) or [0]
            if len(read) < len(arrow_schema):
                select = [SelectedColumn(_quoted(arrow_schema.field(i).name)) for i in read]
                arrow_schema = pa.schema([arrow_schema.field(i) for i in read])
        return Analyzed(schema=out, withSinglePartition=not keys, partitionBy=keys, select=select, clause=clause,
                        arrow_schema=arrow_schema)

    def __init__(self, analyze_result: Analyzed):
        self.clause = analyze_result.clause
        self.schema = analyze_result.arrow_schema
        self.rows: list = []

    def eval(self, row, *args, **kwargs):
        self.rows.append(row)

    def terminate(self):
        from sparkcep.query import compile_query
        from sparkcep.spark.partition import run_in_task

        table = rows_to_table(self.rows, self.schema)
        self.rows = []
        if not table.num_rows:
            return
        out = run_in_task(compile_query(self.clause, table), table)
        yield from zip(*(c.to_pylist() for c in out.columns), strict=True)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _arguments(args: tuple, kwargs: dict) -> tuple[Any, str]:
    """The table and the clause, or an error that says what the function takes."""
    if kwargs:
        raise QueryError("NOT_SUPPORTED", f"the table function takes no named arguments ({', '.join(kwargs)}): "
                         f"options such as strategy or mode are for {_FROM_PYTHON}")
    if len(args) != 2 or not args[0].isTable:
        raise QueryError("NOT_SUPPORTED", "the table function takes a table and a clause, as in "
                         "match_recognize(TABLE(trades), 'PARTITION BY symbol ORDER BY ts MEASURES ... PATTERN (...) "
                         f"DEFINE ...'); options are for {_FROM_PYTHON}")
    clause = args[1]
    if not clause.isConstantExpression or not isinstance(clause.value, str):
        raise QueryError("NOT_SUPPORTED", "the table function's second argument is the clause, a string literal "
                         "(Spark computes the output's columns from it before reading any row)")
    return args[0], clause.value


def rows_to_table(rows: list, schema: pa.Schema) -> pa.Table:
    """Spark's rows as an Arrow table of ``schema``: a TIMESTAMP arrives as the worker's local
    wall time (PySpark's conversion), an instant again here."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = []
    for values, field in zip(columns, schema, strict=True):
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            values = [None if v is None else v.astimezone(dt.UTC) for v in values]
        elif pa.types.is_struct(field.type):
            values = [None if v is None else v.asDict(recursive=True) for v in values]
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise DataError(f"the table function could not read this column's values as {field.type}: {e}",
                            column=field.name) from None
    return pa.Table.from_arrays(arrays, schema=schema)


def register_table_function(spark, name: str = "match_recognize") -> None:
    """Register ``name`` as a SQL table function of the session ``spark`` (classic or Connect)."""
    from pyspark.sql.functions import udtf

    # Rows pickled, not Arrow: PySpark's Arrow hand-off of a row UDTF converts each value
    # again, 2.5x slower here (RIP Q7, 200 000 events: 3.7 s against 9.4 s).
    spark.udtf.register(name, udtf(_with_user_functions(functions.user_functions()), useArrow=False))


def _with_user_functions(registered: dict) -> type:
    """The table function carrying the functions registered when it is: Spark's Python
    workers (analyze's and each partition's) are other processes. A class made here is
    pickled by value, with them."""

    class WithUserFunctions(MatchRecognizeFunction):
        @staticmethod
        def analyze(*args, **kwargs) -> Analyzed:
            functions.install_user_functions(registered)
            return MatchRecognizeFunction.analyze(*args, **kwargs)

        def __init__(self, analyze_result: Analyzed):
            functions.install_user_functions(registered)
            super().__init__(analyze_result)

    return WithUserFunctions if registered else MatchRecognizeFunction
