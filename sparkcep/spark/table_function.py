"""MATCH_RECOGNIZE as a SQL table function: ``SELECT * FROM match_recognize(TABLE(t), '<clause>')``
from ``spark.sql``, notebooks' SQL cells and any SQL client of the session.

A Python UDTF: Spark calls ``analyze`` when it analyzes the call, with the table's schema and
the literal clause, which gives the output schema and asks Catalyst for the clause's
partitioning (PARTITION BY's keys, or one partition). Each partition's rows then come to one
instance (``eval``), and ``terminate`` matches them on the local engine, as the ``partition``
strategy's tasks do.

The rows come as Arrow batches: the function is registered as an Arrow table function
(``SQL_ARROW_UDTF``). PySpark's ``arrow_udtf`` decorator refuses an ``analyze`` method
(SPARK-53286: a fixed return type only), but its workers and Spark's analyzer take one, so
the function is made with the eval type directly (PySpark 4.1 and later)."""

from __future__ import annotations

import dataclasses
import sys
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
        keys = [PartitioningColumn(_partition_key(k.column, arrow_schema)) for k in q.partition_by]
        select = []
        if q.rows_per_match == "ONE":
            # Only the columns the query reads reach Python (ONE ROW outputs keys and measures).
            read = sorted(referenced_columns(q)) or [0]
            if len(read) < len(arrow_schema):
                select = [SelectedColumn(_quoted(arrow_schema.field(i).name)) for i in read]
                arrow_schema = pa.schema([arrow_schema.field(i) for i in read])
        return Analyzed(schema=out, withSinglePartition=not keys, partitionBy=keys, select=select, clause=clause,
                        arrow_schema=arrow_schema)

    def __init__(self, analyze_result: Analyzed):
        self.clause = analyze_result.clause
        self.schema = analyze_result.arrow_schema
        self.batches: list[pa.RecordBatch] = []
        self.vectorized = _vectorize_boundaries(sys._getframe(1))

    def eval(self, batch: pa.RecordBatch, *args, **kwargs):
        self.batches.append(batch)

    def terminate(self):
        from sparkcep.query import compile_query
        from sparkcep.spark.partition import run_in_task

        table = batches_to_table(self.batches, self.schema)
        self.batches = []
        if table.num_rows:
            yield run_in_task(compile_query(self.clause, table), table)


def _vectorize_boundaries(frame, depth: int = 4) -> bool:
    """Give PySpark's per-partition wrapper of an Arrow table function (the caller a few
    frames up, ``ArrowUDTFWithPartition`` in PySpark 4.1-4.3) a vectorized boundary finder:
    its own compares each pair of neighbouring rows in Python (``as_py``), 1.3 s of CPU per
    million rows, as long as the matching itself. The same boundaries (a NULL equals a NULL,
    a value never equals NULL), but for zoned times, which it compares as instants where
    Python compares the wall times of one zone; a PySpark that does it otherwise keeps its own."""
    for _ in range(depth):
        if frame is None:
            return False
        wrapper = frame.f_locals.get("self")
        if type(wrapper).__name__ == "ArrowUDTFWithPartition" and hasattr(wrapper, "_detect_partition_boundaries"):
            if "_detect_partition_boundaries" not in vars(wrapper):  # once per wrapper, not per key
                _replace_boundaries(wrapper)
            return True
        frame = frame.f_back
    return False


def _replace_boundaries(wrapper) -> None:
    own = wrapper._detect_partition_boundaries
    wrapper._detect_partition_boundaries = lambda batch: partition_boundaries(
        batch, wrapper._partition_child_indexes, own)


def partition_boundaries(batch: pa.RecordBatch, indexes: list[int], fallback=None) -> list[int]:
    """Where a batch sorted by the columns ``indexes`` starts each run of equal keys, and
    its length: ``[0, s1, ..., n]``. Keys Arrow cannot compare go to ``fallback``."""
    import numpy as np
    import pyarrow.compute as pc

    n = batch.num_rows
    if n <= 1:
        return [0, n]
    changed = np.zeros(n - 1, dtype=bool)
    for i in indexes:
        column = batch.column(i)
        after, before = column.slice(1), column.slice(0, n - 1)
        try:
            differ = pc.not_equal(after, before)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            if fallback is None:
                raise
            return fallback(batch)
        one_null = pc.xor(pc.is_null(after), pc.is_null(before))
        changed |= pc.if_else(pc.is_null(differ), one_null, differ).to_numpy(zero_copy_only=False)
    return [0, *(np.flatnonzero(changed) + 1).tolist(), n]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _partition_key(column: str, schema: pa.Schema) -> str:
    """What Spark partitions the call's rows by for a PARTITION BY column. PySpark's wrapper
    starts a new partition where a key differs from the row before it in Python, where NaN
    differs from NaN: a floating key's NaN is handed over as +Infinity (its own group still
    for the engine, which partitions the rows it gets by the real key)."""
    if pa.types.is_floating(schema.field(column).type):
        return f"nanvl({_quoted(column)}, CAST('Infinity' AS DOUBLE))"
    return _quoted(column)


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


def batches_to_table(batches: list, schema: pa.Schema) -> pa.Table:
    """One partition's Arrow batches as a table of ``schema`` (Spark sends its own Arrow
    types: timestamps in UTC, strings maybe large)."""
    if not batches:
        return schema.empty_table()
    table = pa.Table.from_batches(batches)
    arrays = []
    for i, field in enumerate(schema):  # (by place: a table may hold two columns of one name)
        column = table.column(i)
        try:
            arrays.append(column if column.type == field.type else column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise DataError(f"the table function could not read this column's values as {field.type}: {e}",
                            column=field.name) from None
    return pa.Table.from_arrays(arrays, schema=schema)


def register_table_function(spark, name: str = "match_recognize") -> None:
    """Register ``name`` as a SQL table function of the session ``spark`` (classic or Connect)."""
    spark.udtf.register(name, arrow_table_function(spark, _with_user_functions(functions.user_functions()), name))


def arrow_table_function(spark, handler: type, name: str | None = None):
    """``handler`` (with ``analyze``) as an Arrow table function of ``spark``'s kind of session."""
    from pyspark.util import PythonEvalType

    from sparkcep.spark.session import is_connect

    if is_connect(spark):
        from pyspark.sql.connect.udtf import UserDefinedTableFunction
    else:
        from pyspark.sql.udtf import UserDefinedTableFunction
    return UserDefinedTableFunction(handler, returnType=None, name=name, evalType=PythonEvalType.SQL_ARROW_UDTF)


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
