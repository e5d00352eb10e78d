"""Compare Spark results with the sequential engine as multisets of rows."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import pandas as pd
import pyarrow as pa

import sparkcep


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
    df = spark.createDataFrame(pdf)  # pandas, or Arrow (which keeps every column's type)
    for strategy in strategies:
        got = rows(sparkcep.match_recognize(df, clause, strategy=strategy, **options))
        assert got == expected, f"strategy {strategy}: {len(got)} rows vs {len(expected)} expected\n{clause}"
    return expected
