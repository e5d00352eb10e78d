"""The run strategy over input it sorts, in one pass over the sorted rows: keys whole in a
Spark partition are matched there, keys crossing a partition's edge are stitched from their
pieces, and a run whose bodies need their rows again takes the cached path (real local
Spark). Every keyed case runs on each path, forced: routed by key counts (spark.routes),
range-sorted, and cached."""

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep import DataError
from sparkcep.api import compile_query
from sparkcep.spark import routes, runs
from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
from tests.spark.helpers import frame, rows
from tests.test_properties import queries, tables
from tests.tiers import FULL


def _keyed(n: int, keys: int, seed: int) -> pa.Table:
    """``n`` rows of ``keys`` keys (one hot), shuffled."""
    rng = np.random.default_rng(seed)
    k = np.where(rng.random(n) < 0.5, 0, rng.integers(1, keys, n))
    t = pa.table({"k": k, "ts": np.arange(n), "v": (np.arange(n) * 7919) % 13})
    return t.take(rng.permutation(n))


@pytest.fixture(autouse=True)
def _cut_every_hot_key(monkeypatch):
    """Every key above a batch is cut here, however few the task slots (routes.CUT_SHARE)."""
    monkeypatch.setattr(routes, "CUT_SHARE", 0.0)


# Each path: (runs.ROUTE_KEYS, runs.SORT_ONCE) and what the run's reason says of it.
PATHS = {"routed": (True, True, "by its order's values, read once"), "sorted": (False, True, "sorted, read once"),
         "cached": (False, False, None)}


def _path(monkeypatch, path: str) -> str | None:
    route, once, says = PATHS[path]
    monkeypatch.setattr(runs, "ROUTE_KEYS", route)
    monkeypatch.setattr(runs, "SORT_ONCE", once)
    return says


CLAUSE = """PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS t0, MATCH_NUMBER() AS m
    PATTERN (A B+) DEFINE A AS v < 4, B AS v > PREV(v)"""


@pytest.mark.parametrize("path", list(PATHS))
def test_keys_whole_and_crossing_partitions(spark, monkeypatch, path):
    says = _path(monkeypatch, path)
    table = _keyed(4000, 40, 1)
    want = rows(sparkcep.match_recognize(table, CLAUSE))
    run = SparkRun("runs", "requested")
    with collect_errors():
        got = rows(match_recognize_spark(frame(spark, table), CLAUSE, strategy="runs", batch=300, shared=20,
                                         run=run))
    assert got == want and len(want) > 300
    assert run.partitions == 40, run.describe()
    assert says is None or says in run.reason, run.describe()
    assert "read once" in run.reason or says is None, run.describe()
    if path == "sorted":
        # the hot key crosses many partitions; the small keys mostly lie whole in one
        assert run.stats["inner_rows"] > 0 and run.stats["batches"] > 14, run.describe()
    if path == "routed":
        # the hot key (about 2 000 rows) cut into ranges of about a batch
        assert "1 hot key cut into 7 ranges" in run.reason and run.stats["batches"] > 14, run.describe()


@pytest.mark.parametrize("once", [True, False])
def test_unordered_input_without_keys(spark, monkeypatch, once):
    monkeypatch.setattr(runs, "SORT_ONCE", once)
    table = _keyed(3000, 2, 2).drop_columns(["k"])
    clause = CLAUSE.replace("PARTITION BY k ", "")
    run = SparkRun("runs", "requested")
    with collect_errors():
        got = rows(match_recognize_spark(frame(spark, table), clause, strategy="runs", batch=400, shared=20,
                                         run=run))
    assert got == rows(sparkcep.match_recognize(table, clause))
    assert ("sorted, read once" in run.reason) == once, run.describe()


@pytest.mark.parametrize(("clause", "shared"), [
    # MATCH_NUMBER() inside an expression: bodies after a key's first run again from their
    # true entries, which only the cached rows give (a second sort may cut otherwise).
    (CLAUSE.replace("MATCH_NUMBER() AS m", "MATCH_NUMBER() * 2 AS m"), 20),
    # matches longer than the shared rows: a body's search stalls and needs more rows
    (CLAUSE, 2),
])
def test_bodies_needing_their_rows_again_take_the_cached_path(spark, clause, shared):
    table = _keyed(3000, 5, 3)
    run = SparkRun("runs", "requested")
    with collect_errors():
        got = rows(match_recognize_spark(frame(spark, table), clause, strategy="runs", batch=300,
                                         shared=shared, run=run))
    assert got == rows(sparkcep.match_recognize(table, clause))
    assert "read once" not in run.reason, run.describe()


@settings(max_examples=int(os.environ.get("SPARKCEP_SPARK_EXAMPLES", "12" if FULL else "4")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(queries(), st.lists(tables(), min_size=1, max_size=6), st.integers(2, 40), st.sampled_from(list(PATHS)))
def test_random_keyed_queries_sorted_once(spark, query, pieces, batch, path):
    text, mode = query
    # (one chunk: PySpark's createDataFrame of an Arrow table whose first chunks are empty
    # loses its rows: two empty chunks before one row give a DataFrame of none)
    table = pa.concat_tables([p.cast(pieces[0].schema) for p in pieces]).combine_chunks()
    plan = compile_query(text, table, mode)
    if plan.define_match_number:
        return  # the run strategies refuse it
    before = runs.ROUTE_KEYS, runs.SORT_ONCE
    runs.ROUTE_KEYS, runs.SORT_ONCE = PATHS[path][:2]
    try:
        df = frame(spark, table)
        try:
            want = rows(sparkcep.match_recognize(table, text, mode=mode))
        except DataError as local:
            with pytest.raises(DataError) as remote, collect_errors():
                match_recognize_spark(df, text, mode=mode, strategy="runs", batch=batch).collect()
            assert remote.value.message == local.message
            return
        with collect_errors():
            assert rows(match_recognize_spark(df, text, mode=mode, strategy="runs", batch=batch)) == want
    finally:
        runs.ROUTE_KEYS, runs.SORT_ONCE = before
