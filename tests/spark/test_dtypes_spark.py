"""The dtype matrix on Spark: pandas' nullable and extension dtypes, float32, all-NULL
columns, zoned times across DST and numpy results of registered functions give the local
engine's rows (as instants, NULL for NULL) under the partition and run strategies."""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sparkcep
from tests.spark.helpers import assert_same
from tests.tiers import sample

IDS = list(range(8))
K = ["a", "a", "b", "b", "a", "b", "a", "b"]


def _berlin() -> pd.Series:
    # every 40 minutes across the spring-forward night (01:00 UTC)
    return pd.Series(pd.date_range("2024-03-31 00:00", periods=8, freq="40min", tz="UTC").tz_convert("Europe/Berlin"))


COLUMNS = {
    "Int64": lambda: pd.array([5, None, 2**53 + 1, 3, None, 7, 2**62, 1], dtype="Int64"),
    "boolean": lambda: pd.array([True, None, False, True, False, None, True, True], dtype="boolean"),
    "string[pyarrow]": lambda: pd.array(["b", None, "a", "c", "c", None, "a", "d"], dtype="string[pyarrow]"),
    "category": lambda: pd.Categorical(["b", "a", None, "c", "b", "a", "c", None], categories=["c", "b", "a"]),
    "float32": lambda: np.array([1.5, 2.25, np.nan, -3.0, 8.0, 0.5, 2.25, 1.0], dtype=np.float32),
    "all-None": lambda: [None] * 8,
    "zoned time": _berlin,
}

QUERIES = [
    """PARTITION BY k ORDER BY id MEASURES FIRST(x) AS f, LAST(x) AS l, COUNT(x) AS c, MAX(x) AS mx
       ALL ROWS PER MATCH PATTERN (A B*) DEFINE B AS x IS NULL OR PREV(x) IS NULL OR x <> PREV(x)""",
    """ORDER BY id MEASURES A.id AS a, B.x AS bx, MIN(x) AS mn PATTERN (A B) DEFINE A AS x IS NOT NULL,
       B AS CASE WHEN x IS NULL THEN false ELSE x = x END""",
]


@pytest.mark.parametrize("dtype", sample(list(COLUMNS), every=3))
def test_dtypes_on_spark_equal_the_local_engine(spark, dtype):
    pdf = pd.DataFrame({"id": IDS, "k": K, "x": COLUMNS[dtype]()})
    for clause in QUERIES:
        assert_same(spark, pdf, clause, strategies=("partition", "runs"), batch=3)


def test_decimals_on_spark_equal_the_local_engine(spark):
    """A Spark DecimalType column is DECIMAL(p, s) end to end: exact SUM/AVG and arithmetic,
    the measure's decimal type in Spark's output schema."""
    d = decimal.Decimal
    table = pa.table({"id": IDS, "k": K, "x": pa.array([d("1.25"), None, d("0.10"), d("3.5"), d("0.20"),
                                                         d("-7"), d("0.30"), d("2")], pa.decimal128(9, 2))})
    clause = """PARTITION BY k ORDER BY id MEASURES SUM(x) AS s, AVG(x) AS av, LAST(x) * 3 AS m,
        CAST(FIRST(x) AS DECIMAL(4, 1)) AS c PATTERN (A B*) DEFINE B AS x > PREV(x) - 0.15"""
    got = assert_same(spark, table, clause, strategies=("partition", "runs"), batch=3)
    assert got
    schema = sparkcep.match_recognize(spark.createDataFrame(table), clause).schema
    assert {f.name: f.dataType.simpleString() for f in schema.fields if f.name in ("s", "av", "c")} == {
        "s": "decimal(38,2)", "av": "decimal(9,2)", "c": "decimal(4,1)"}


def test_zoned_difference_across_dst_on_spark(spark):
    pdf = pd.DataFrame({"id": IDS, "x": _berlin()})
    clause = "ORDER BY x MEASURES B.x - A.x AS gap PATTERN (A B) WITHIN INTERVAL '40' MINUTE DEFINE B AS true"
    got = assert_same(spark, pdf, clause, strategies=("partition",))
    assert sum(got.values()) == 4  # pairs 40 minutes apart, DST night included


def test_numpy_results_of_functions_on_spark(spark):
    sparkcep.register_function("np_big", lambda x: np.bool_(x > 2), returns="boolean")
    sparkcep.register_function("np_half", lambda x: np.float32(x / 2), returns="double")
    try:
        pdf = pd.DataFrame({"id": IDS, "k": K, "x": [1, 3, 5, 2, 8, 1, 9, 4]})
        clause = "PARTITION BY k ORDER BY id MEASURES np_half(LAST(x)) AS h PATTERN (A+) DEFINE A AS np_big(x)"
        got = assert_same(spark, pdf, clause, strategies=("partition", "runs"), batch=3)
        assert sum(got.values()) > 0
    finally:
        sparkcep.unregister_function("np_big")
        sparkcep.unregister_function("np_half")


def test_a_measure_whose_values_decide_its_type_is_refused_on_spark(spark):
    """A function left at returns="any" in MEASURES: on pandas its values decide the type; a
    Spark schema is fixed first, so Spark refuses it where it stands (its numbers came back
    as text, its arrays as an InternalError). CAST gives it a type; DEFINE may use it."""
    sparkcep.register_function("half_any", lambda x: np.float32(x) / 2)
    sparkcep.register_function("pair_any", lambda x: np.array([x, x + 1]), returns="array")
    try:
        pdf = pd.DataFrame({"id": IDS, "x": [1, 3, 5, 2, 8, 1, 9, 4]})
        df = spark.createDataFrame(pdf)
        for measure, name in (("half_any(LAST(x))", "half_any"), ("COLLECT(half_any(x))", "half_any"),
                              ("pair_any(LAST(x))", "pair_any was registered with returns='array'")):
            clause = f"ORDER BY id MEASURES {measure} AS h PATTERN (A+)"
            with pytest.raises(sparkcep.QueryError, match="NOT_SUPPORTED") as e:
                sparkcep.match_recognize(df, clause)
            assert name in str(e.value) and e.value.column == clause.index(measure) + 1
            # explain still shows the plan, and says why the run would stop instead of a strategy
            shown = sparkcep.explain(df, clause)
            assert "program:" in shown and "strategy:" not in shown
            assert "not runnable on Spark: [NOT_SUPPORTED] measure h:" in shown and name in shown
        clause = ("ORDER BY id MEASURES CAST(half_any(LAST(x)) AS DOUBLE) AS h PATTERN (A B+) "
                  "DEFINE B AS half_any(x) > 1")
        assert sum(assert_same(spark, pdf, clause, strategies=("partition",)).values()) > 0
        assert "strategy:" in sparkcep.explain(df, clause) and "not runnable" not in sparkcep.explain(df, clause)
    finally:
        sparkcep.unregister_function("half_any")
        sparkcep.unregister_function("pair_any")
