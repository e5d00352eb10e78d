"""Compare Spark results with the sequential engine as multisets of rows."""

from __future__ import annotations

import datetime as dt
import math
import os
from collections import Counter

import pandas as pd
import pyarrow as pa

import sparkcep

# SPARKCEP_TEST_SESSION=connect: the Spark-layer tests on a Spark Connect session (a local
# Connect server over local[2]), as the full tier runs them (test_connect_suites.py); else
# a classic session (conftest.py's ``spark``).
CONNECT = os.environ.get("SPARKCEP_TEST_SESSION") == "connect"


def _norm(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    if hasattr(v, "tolist"):
        return _norm(v.tolist())
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    return v


def rows(table_or_df) -> Counter:
    if hasattr(table_or_df, "toArrow"):
        table_or_df = table_or_df.toArrow()
    if isinstance(table_or_df, list):
        records = table_or_df
    else:
        records = table_or_df.to_pylist() if hasattr(table_or_df, "to_pylist") else table_or_df.to_dict("records")
    return Counter(tuple(sorted((k, _norm(v)) for k, v in r.items())) for r in records)


def assert_same(spark, pdf: pd.DataFrame, clause: str, **options):
    """Every Spark strategy named in ``strategies`` gives the sequential engine's rows."""
    strategies = options.pop("strategies", ("sequential", "partition", "runs", "rr"))
    local = pa.Table.from_pandas(pdf, preserve_index=False) if isinstance(pdf, pd.DataFrame) else pdf
    expected = rows(sparkcep.match_recognize(local, clause, mode=options.get("mode", "sql")))
    df = frame(spark, pdf)  # pandas, or Arrow (which keeps every column's type)
    for strategy in strategies:
        got = rows(sparkcep.match_recognize(df, clause, strategy=strategy, **options))
        assert got == expected, f"strategy {strategy}: {len(got)} rows vs {len(expected)} expected\n{clause}"
    return expected


def frame(spark, data):
    """A Spark DataFrame of pandas or Arrow ``data``, on classic and Connect sessions alike (a
    Connect client infers no schema from no rows: it is given the Arrow one)."""
    if isinstance(data, pa.Table) and data.num_rows == 0:
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame(data, schema=from_arrow_schema(data.schema))
    return spark.createDataFrame(data)


def executed_plan(df) -> str:
    """The physical plan's text, on classic and Connect sessions."""
    from sparkcep.spark.session import is_connect

    if is_connect(df):
        return df._explain_string(mode="simple")
    return df._jdf.queryExecution().executedPlan().toString()


def classic_env(**extra) -> dict:
    """The environment for a command line that runs its own classic session: without the
    variables PySpark sets in a process that started a Spark Connect session."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_REMOTE")}
    return {**env, **extra}
