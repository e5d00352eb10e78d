"""Keyed runs routed by their keys' counts (spark.routes): hot keys cut at values of
their first ORDER BY column in every direction, NULL order and type, keys that GROUP BY
groups as one (-0.0 and 0.0, NaN, NULL) kept together, the other keys whole, and Spark's
hash partitioning sending route p to partition p (real local Spark)."""

import dataclasses
import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pytest

import sparkcep
from sparkcep.spark import routes
from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
from sparkcep.spark.routes import _murmur3_long, key_sizes, partition_values
from tests.spark.helpers import frame, rows

N = 3000


@pytest.fixture(autouse=True)
def _cut_every_hot_key(monkeypatch):
    """Every key above a batch is cut here, however few the task slots (routes.CUT_SHARE;
    test_a_key_is_cut_only_where_it_pays keeps the rule)."""
    monkeypatch.setattr(routes, "CUT_SHARE", 0.0)


def _order_values(kind: str, n: int, rng) -> pa.Array:
    """``n`` values of ORDER BY's column, with ties and NULLs, in no order."""
    i = rng.integers(0, n // 3, n)
    null = rng.random(n) < 0.05
    if kind == "int":
        return pa.array(i, pa.int64(), mask=null)
    if kind == "double":  # NaN sorts after every number in Spark and here
        v = i.astype(float) / 7 - 20
        v[rng.random(n) < 0.03] = np.nan
        return pa.array(v, pa.float64(), mask=null, from_pandas=False)
    if kind == "decimal":
        return pa.array([None if z else decimal.Decimal(int(x)) / 4 for x, z in zip(i, null, strict=True)],
                        pa.decimal128(12, 2))
    if kind == "timestamp":
        base = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)
        return pa.array([None if z else base + dt.timedelta(minutes=int(x)) for x, z in zip(i, null, strict=True)],
                        pa.timestamp("us", "UTC"))
    if kind == "ntz":  # wall-clock times across the spring and autumn DST changes of New York
        base = dt.datetime(2024, 3, 10, 1, 0)
        return pa.array([None if z else base + dt.timedelta(minutes=int(x) % 240, days=int(x) // 240 * 238)
                         for x, z in zip(i, null, strict=True)], pa.timestamp("us"))
    if kind == "date":
        base = dt.date(2024, 1, 1)
        return pa.array([None if z else base + dt.timedelta(days=int(x)) for x, z in zip(i, null, strict=True)],
                        pa.date32())
    assert kind == "string"
    return pa.array([None if z else f"e{x:05d}" for x, z in zip(i, null, strict=True)], pa.string())


def _table(kind: str, seed: int, key: pa.Array | None = None) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = key if key is not None else pa.array(np.where(rng.random(N) < 0.6, 0, rng.integers(1, 30, N)))
    return pa.table({"k": k, "t": _order_values(kind, N, rng), "v": pa.array((np.arange(N) * 7919) % 13)})


def _clause(order: str) -> str:
    return f"""PARTITION BY k ORDER BY {order} MEASURES COUNT(*) AS n, FIRST(v) AS v0, LAST(t) AS t1,
        MATCH_NUMBER() AS m PATTERN (A B+) DEFINE A AS v < 4, B AS v > PREV(v)"""


def _run(spark, table: pa.Table, clause: str, batch: int = 300, strategy: str = "runs", df=None) -> SparkRun:
    run = SparkRun(strategy, "requested")
    with collect_errors():
        got = rows(match_recognize_spark(frame(spark, table) if df is None else df, clause, strategy=strategy,
                                         batch=batch, shared=20, run=run))
    assert got == rows(sparkcep.match_recognize(table, clause)), run.describe()
    return run


@pytest.mark.parametrize("kind", ["int", "double", "decimal", "timestamp", "ntz", "date"])
@pytest.mark.parametrize("order", ["t", "t DESC", "t NULLS LAST", "t DESC NULLS FIRST"])
def test_hot_key_cut_at_values_of_each_order(spark, kind, order):
    run = _run(spark, _table(kind, 1), _clause(order + ", v"))
    # about 1 800 rows of key 0 in ranges of about a batch
    assert "1 hot key cut into" in run.reason and run.stats["batches"] > 5, run.describe()


def test_wall_clock_order_in_a_zone_with_dst(spark):
    """TIMESTAMP_NTZ ranges are read from the time's fields, whatever the session's zone."""
    from pyspark.sql import functions as F

    table = _table("ntz", 7)
    # From text: a cast of text to TIMESTAMP_NTZ reads no zone (a Connect client resolves
    # a cast when the query runs, here in New York's zone).
    text = pa.array([None if v is None else v.isoformat(sep=" ") for v in table.column("t").to_pylist()])
    df = frame(spark, table.set_column(1, "t", text)).withColumn("t", F.col("t").cast("timestamp_ntz"))
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        run = _run(spark, table, _clause("t DESC, v"), df=df)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert "1 hot key cut into" in run.reason, run.describe()


def test_an_order_without_numbers_is_range_sorted(spark):
    run = _run(spark, _table("string", 2), _clause("t"))
    assert "sorted, read once" in run.reason, run.describe()


@pytest.mark.parametrize(("key", "keys"), [
    (pa.array([-0.0, 0.0, float("nan"), None, 1.5] * (N // 5), pa.float64(), from_pandas=False), 4),
    (pa.array([None, "a", "a", "b", None, "a"] * (N // 6), pa.string()), 3),
], ids=["floating", "string"])
def test_keys_grouped_as_one_stay_together(spark, key, keys):
    """-0.0 with 0.0, NaN with NaN, NULL with NULL: one key each, as GROUP BY has it, and
    each hot (the hash that routes them reads them alike: else a key's rows would be cut
    apart and its matches differ)."""
    run = _run(spark, _table("int", 3, key), _clause("t"))
    assert "hot keys cut into" in run.reason and run.partitions == keys, run.describe()


def test_two_key_columns(spark):
    rng = np.random.default_rng(4)
    t = _table("int", 4).append_column("k2", pa.array(rng.integers(0, 2, N)))
    run = _run(spark, t, _clause("t").replace("PARTITION BY k", "PARTITION BY k2, k"))
    assert "hot keys cut into" in run.reason, run.describe()


def test_no_hot_key_matches_each_key_whole(spark):
    run = _run(spark, _table("int", 5), _clause("t"), batch=5_000)
    assert "each key whole" in run.reason and run.rows == N, run.describe()


def test_auto_counts_the_keys_once_for_the_run(spark):
    table = _table("int", 6)
    run = _run(spark, table, _clause("t"), strategy="auto")
    assert run.strategy == "runs" and "hot key cut into" in run.reason, run.describe()
    assert run.sizes is not None and run.sizes.rows == N and len(run.sizes.hot) == 1


@pytest.mark.parametrize("share", [0.6, 0.9])
def test_a_key_is_cut_only_where_it_pays(spark, monkeypatch, share):
    """On this session's task slots, a hot key of 60 % of the rows keeps no slot busy
    longer than its share by CUT_SHARE: matched whole, in a task of its own (auto picks
    partition, likewise); one of 90 % is cut."""
    from pyspark.sql import functions as F

    from sparkcep.api import compile_query
    from sparkcep.spark.routes import ROUTE, placed, whole_routes
    from sparkcep.spark.session import parallelism

    monkeypatch.setattr(routes, "CUT_SHARE", 1.3)
    made = _whole_routes_made(monkeypatch)
    assert parallelism(spark) == 2  # (the shares below are chosen for two slots)
    table = _share(share)
    run = _run(spark, table, _clause("t"))
    auto = _run(spark, table, _clause("t"), strategy="auto")
    if share < 0.65:
        assert "cutting it would not pay: each key whole" in run.reason, run.describe()
        assert auto.strategy == "partition", auto.describe()
        assert len(made) == 2  # the run and auto's partition: the hot key in a task of its own
        plan = compile_query(_clause("t"), table)
        df = frame(spark, table)
        sizes = key_sizes(plan, df, 300)
        got = placed(plan, df, whole_routes(df, sizes)).drop(ROUTE).select(
            "k", F.spark_partition_id().alias("p")).distinct().collect()
        hot = {r.p for r in got if r.k == 0}
        assert len(hot) == 1 and {r.k for r in got if r.p in hot} == {0}, got
    else:
        assert "1 hot key cut into" in run.reason, run.describe()
        assert auto.strategy == "runs" and "1 hot key cut into" in auto.reason, auto.describe()
        assert not made


def _share(share: float) -> pa.Table:
    """N rows, key 0 holding about ``share`` of them, the rest of 29 keys."""
    rng = np.random.default_rng(8)
    return _table("int", 8, pa.array(np.where(rng.random(N) < share, 0, rng.integers(1, 30, N))))


def _whole_routes_made(monkeypatch) -> list:
    """The key counts each whole-key spread was routed by (partition.whole_routes' calls)."""
    from sparkcep.spark import partition

    made = []
    real = partition.whole_routes
    monkeypatch.setattr(partition, "whole_routes", lambda base, sizes: made.append(sizes) or real(base, sizes))
    return made


def test_rules_keep_a_hot_key_in_a_task_of_its_own(spark, monkeypatch):
    """Rules of one PARTITION BY that auto runs key by key take its count of the keys too."""
    from sparkcep.spark.session import parallelism

    monkeypatch.setattr(routes, "CUT_SHARE", 1.3)
    made = _whole_routes_made(monkeypatch)
    assert parallelism(spark) == 2  # (on two slots a key of 60 % is not worth cutting)
    table = _share(0.6)
    rules = {"up": _clause("t"), "down": _clause("t").replace("v > PREV(v)", "v < PREV(v)")}
    with collect_errors():
        got = rows(sparkcep.match_rules(frame(spark, table), rules, batch=300))
    assert got == rows(sparkcep.match_rules(table, rules)) and len(made) == 1


def test_a_key_above_a_tasks_bound_is_cut(spark, monkeypatch):
    """A key of more rows than one task may hold (spark.sparkcep.maxTaskRows) is cut, and
    auto runs it so, where its share alone would keep it whole."""
    from sparkcep.spark.frames import MAX_TASK_ROWS_CONF
    from sparkcep.spark.session import parallelism

    monkeypatch.setattr(routes, "CUT_SHARE", 1.3)
    assert parallelism(spark) == 2  # (on two slots its share alone would keep it whole)
    table = _table("int", 9)  # key 0: some 1 800 of 3 000 rows
    spark.conf.set(MAX_TASK_ROWS_CONF, "1000")
    try:
        run = _run(spark, table, _clause("t"))
        auto = _run(spark, table, _clause("t"), strategy="auto")
    finally:
        spark.conf.unset(MAX_TASK_ROWS_CONF)
    assert "1 hot key cut into" in run.reason, run.describe()
    assert auto.strategy == "runs", auto.describe()


def test_key_sizes(spark):
    from sparkcep.api import compile_query

    table = pa.table({"k": [1, 1, 1, 2, None, None, None, None], "t": list(range(8))})
    sizes = key_sizes(compile_query(_clause("t"), table.append_column("v", pa.array([0] * 8))), frame(spark, table), 2)
    assert (sizes.rows, sizes.keys, sizes.largest) == (8, 3, 4)
    assert sorted((h.rows, h.least, h.most) for h in sizes.hot.values()) == [(3, 0, 2), (4, 4, 7)]


def test_spark_hash_partitioning_sends_each_value_to_its_partition(spark):
    from pyspark.sql import functions as F

    values = [0, 1, -1, 2**40, -(2**63), 2**63 - 1, 12345678901]
    got = frame(spark, pa.table({"v": values})).select(F.hash("v").alias("h")).toArrow().column("h").to_pylist()
    assert got == _murmur3_long(np.array(values)).tolist()
    for n in (1, 3, 8, 37):
        df = frame(spark, pa.table({"p": list(range(n)), "v": partition_values(n)})).repartition(n, "v")
        assert all(df.select((F.col("p") == F.spark_partition_id()).alias("ok")).toArrow().column("ok").to_pylist())


def test_a_hot_hash_of_two_keys_is_range_sorted(spark, monkeypatch):
    """Keys of one hash are never cut into ranges (each range must hold one key's rows):
    two such keys (made here by telling the run so) take the range sort."""
    from sparkcep.spark import routes

    real = routes.key_sizes

    def shared(plan, base, batch):
        got = real(plan, base, batch)
        return dataclasses.replace(got, hot={h: dataclasses.replace(x, keys=2) for h, x in got.hot.items()})

    monkeypatch.setattr(routes, "key_sizes", shared)
    run = _run(spark, _table("int", 8), _clause("t"))
    assert "sorted, read once" in run.reason, run.describe()


def test_a_range_finding_another_key_sends_the_run_to_the_range_sort(spark, monkeypatch):
    """A key whose hash is a hot key's lands in that key's ranges: the ranges' tasks find
    two keys and the run is range-sorted (made here by hashing every row as the hot key 0)."""
    from pyspark.sql import functions as F

    from sparkcep.spark import routes

    monkeypatch.setattr(routes, "key_hash", lambda plan, base: routes._hash([F.lit(0).cast("long")]))
    run = _run(spark, _table("int", 9), _clause("t"))
    assert "sorted, read once" in run.reason, run.describe()


def test_another_key_between_a_hot_keys_ranges_sends_the_run_to_the_range_sort(spark, monkeypatch):
    """A key of a hot key's hash whose rows fill a range of their own, between the hot
    key's (made here by hashing key 1 as key 0): the hot key's pieces are split by it, so
    the driver sends the run to the range sort (the match from t=29 to t=70 crosses it)."""
    from pyspark.sql import functions as F

    from sparkcep.spark import routes

    monkeypatch.setattr(routes, "key_hash", lambda plan, base: routes._hash(
        [F.when(F.col("k") == 1, F.lit(0).cast("long")).otherwise(F.col("k"))]))
    t = [*range(30), *range(70, 100), *range(40, 45)]
    table = pa.table({"k": [0] * 60 + [1] * 5, "t": t, "v": [0] * 65})
    clause = "PARTITION BY k ORDER BY t MEASURES A.t AS a, B.t AS b PATTERN (A B) DEFINE B AS t > PREV(t) + 20"
    run = _run(spark, table, clause, batch=10)
    assert "sorted, read once" in run.reason, run.describe()


def test_rules_of_one_partition_by_and_other_orders_count_their_own(spark):
    """auto's count is shared by rules of one PARTITION BY only where their first ORDER BY
    column is one: a rule ordered by another column cuts by its own values."""
    table = _table("timestamp", 10).append_column("i", pa.array(np.arange(N) * 3, pa.int32()))
    rules = {"by_time": _clause("t"), "by_i": _clause("i")}
    want = rows(sparkcep.match_rules(table, rules))
    with collect_errors():
        got = rows(sparkcep.match_rules(frame(spark, table), rules, strategy="auto", batch=300))
    assert got == want


def test_multi_column_keys_differing_by_their_nulls_are_two_keys(spark):
    """(1, NULL) and (NULL, 1): Spark's hash skips NULLs; the route's hash reads them too."""
    n = N // 2
    table = pa.table({"a": pa.array([1, None] * n), "b": pa.array([None, 1] * n), "t": list(range(N)),
                      "v": list((np.arange(N) * 7919) % 13)})
    run = _run(spark, table, _clause("t").replace("PARTITION BY k", "PARTITION BY a, b"))
    assert "2 hot keys cut into" in run.reason, run.describe()


def test_many_hot_keys_in_one_flat_case(spark):
    """A hundred hot keys: one CASE of a hundred branches (nested, a Connect server refused
    the plan's depth from about fifty)."""
    rng = np.random.default_rng(11)
    table = pa.table({"k": np.repeat(np.arange(100), 30), "t": rng.permutation(3000),
                      "v": (np.arange(3000) * 7919) % 13})
    run = _run(spark, table, _clause("t"), batch=20)
    assert "100 hot keys cut into" in run.reason, run.describe()


def test_cut_points_near_the_end_of_a_long(spark):
    """Values at the top of BIGINT: a point rounded (as a float) past its end is its end."""
    top = 2**63 - 1
    rng = np.random.default_rng(12)
    t = pa.array(top - rng.integers(0, 2048, N), pa.int64())
    run = _run(spark, _table("int", 12).set_column(1, "t", t), _clause("t"))
    assert "1 hot key cut into" in run.reason, run.describe()
