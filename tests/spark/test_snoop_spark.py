"""Extended SNOOP on Spark: the driver coordinator with tasks evaluated by Spark tasks, and
one coordinator per key group, both equal to the local engine; registered (expensive)
functions reach the executors; data errors name the input row."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import sparkcep
from sparkcep.spark.batch import collect_errors


def _events(n: int, seed: int = 1) -> pa.Table:
    r = random.Random(seed)
    return pa.table({"ts": pa.array(range(n), pa.int64()), "k": [r.choice("xy") for _ in range(n)],
                     "type": [r.choice("ABC") for _ in range(n)], "x": [r.randint(0, 5) for _ in range(n)]})


def _close(a, b):
    return abs(a - b) <= 2


QUERY = """SELECT * FROM SEQ(A; B; C)
WHERE close(A.x, B.x)
      C.x > A.x
RETURN A.ts AS a, B.ts AS b, C.ts AS c
CONSUMING A, B, C"""


@pytest.fixture()
def close_fn():
    sparkcep.register_function("close", _close, "boolean", cost="expensive")
    yield
    sparkcep.unregister_function("close")


@pytest.mark.slow  # the fast tier keeps one coordinator per key and the errors
def test_tasks_on_spark_equal_the_local_engine(spark, close_fn):
    t = _events(120)
    expected = sparkcep.snoop(t, QUERY, order_by="ts", type_column="type", window=10, strategy="sequential")
    df = spark.createDataFrame(t.to_pandas())
    got = sparkcep.snoop(df, QUERY, order_by="ts", type_column="type", window=10, strategy="tasks", block=32)
    assert got.toPandas().to_dict("records") == expected.to_pandas().to_dict("records")
    assert len(expected) > 3


@pytest.mark.slow  # the fast tier keeps the errors on Spark
def test_one_coordinator_per_key_on_spark(spark, close_fn):
    t = _events(150, seed=2)
    expected = sparkcep.snoop(t, QUERY, order_by="ts", partition_by="k", type_column="type", window=10)
    df = spark.createDataFrame(t.to_pandas())
    got = sparkcep.snoop(df, QUERY, order_by="ts", partition_by="k", type_column="type", window=10)
    rows = sorted(got.toPandas().to_dict("records"), key=lambda r: (r["k"], r["match_number"]))
    assert rows == expected.to_pandas().to_dict("records")
    tasks = sparkcep.snoop(df, QUERY, order_by="ts", partition_by="k", type_column="type", window=10,
                           strategy="tasks")
    assert sorted(tasks.toPandas().to_dict("records"), key=lambda r: (r["k"], r["match_number"])) == rows


def test_errors_on_spark(spark):
    def boom(x):
        if x == 3:
            raise ValueError("bad frame")
        return True

    sparkcep.register_function("boom", boom, "boolean", cost="expensive")
    try:
        t = pa.table({"ts": pa.array([5, 6, 7, 8], pa.int64()), "x": [1, 2, 3, 4]})
        df = spark.createDataFrame(t.to_pandas())
        with pytest.raises(sparkcep.DataError) as e:
            sparkcep.snoop(df, "SELECT * FROM E1 WHERE boom(E1.x)", order_by="ts", strategy="tasks")
        assert e.value.row is None and e.value.key == {"ts": 7}
        keyed = sparkcep.snoop(df.withColumn("k", df.x % 2), "SELECT * FROM E1 WHERE boom(E1.x)", order_by="ts",
                               partition_by="k")  # lazy: the error comes with the action
        with pytest.raises(sparkcep.DataError) as e, collect_errors():
            keyed.collect()
        assert e.value.row is None and e.value.key == {"k": 1, "ts": 7}
        with pytest.raises(sparkcep.SparkCepError, match="order_by"):
            sparkcep.snoop(df, "SELECT * FROM E1")
        with pytest.raises(sparkcep.QueryError):
            sparkcep.snoop(df, "SELECT * FROM SEQ(E1; E2) WHERE E3.x = 1", order_by="ts")
    finally:
        sparkcep.unregister_function("boom")


def test_a_return_whose_values_decide_its_type_is_refused_on_spark(spark):
    """A SNOOP RETURN of a function left at returns="any": a Spark schema is fixed before any
    row is read (it came back as text), so the query is refused naming the function."""
    sparkcep.register_function("half_any", lambda x: x / 2)
    try:
        df = spark.createDataFrame(_events(10).to_pandas())
        with pytest.raises(sparkcep.QueryError, match="NOT_SUPPORTED.*half_any"):
            sparkcep.snoop(df, "SELECT * FROM SEQ(A; B) RETURN half_any(A.x) AS h", order_by="ts",
                           type_column="type")
    finally:
        sparkcep.unregister_function("half_any")
