"""The run strategy over input already in ORDER BY order, read once: bodies in Spark, seams
on the driver, bodies run again where their first pass cannot be kept (real local Spark)."""

import dataclasses
import os
import pathlib
import re
import tempfile

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep import DataError
from sparkcep.api import compile_query
from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
from sparkcep.spark.session import is_connect
from tests.spark.helpers import rows
from tests.test_properties import queries, tables
from tests.tiers import FULL


def _in_order(spark, table: pa.Table, parts: int):
    """``table`` as a Spark DataFrame of about ``parts`` partitions in its own row order,
    read from Parquet (a source that reads alike every time)."""
    path = pathlib.Path(tempfile.mkdtemp(dir=_FILES)) / "t.parquet"
    pq.write_table(table, path, row_group_size=max(1, -(-table.num_rows // parts)))
    return spark.read.parquet(str(path))


_FILES = tempfile.mkdtemp(prefix="sparkcep-as-read-")


@pytest.fixture(autouse=True)
def small_splits(spark):
    """Parquet files read as splits of 1 kB: a file of several row groups is several partitions."""
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1k")
    yield
    spark.conf.set("spark.sql.files.maxPartitionBytes", before)


@st.composite
def ordered_tables(draw):
    """Up to 160 rows of tests.test_properties.tables, ts rising (ties sometimes)."""
    pieces = draw(st.lists(tables(), min_size=4, max_size=16))
    # (one chunk: see test_sorted_once, PySpark loses the rows after leading empty chunks)
    t = pa.concat_tables([p.cast(pieces[0].schema) for p in pieces]).combine_chunks()
    step = draw(st.sampled_from([1, 2]))  # 2: about every other row ties with the next
    return t.set_column(0, "ts", pa.array([i // step for i in range(t.num_rows)], pa.int64()))


@settings(max_examples=int(os.environ.get("SPARKCEP_SPARK_EXAMPLES", "25" if FULL else "6")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(queries(), ordered_tables(), st.integers(1, 6), st.integers(0, 6), st.booleans())
def test_read_once_equals_the_sequential_engine(spark, query, table, parts, shared, renumber):
    text, mode = query
    text = re.sub(r"ORDER BY [^\n]*", "ORDER BY ts", text)  # rising ts: the rows stand in order
    if renumber:  # a match number inside an expression: bodies after the first run again
        text = text.replace("MEASURES ", "MEASURES MATCH_NUMBER() + 0 AS mn0, ", 1)
    plan = compile_query(text, table, mode)
    if plan.define_match_number or plan.query.partition_by:
        return  # the run strategies refuse the first; the second sorts
    df = _in_order(spark, table, parts)
    try:
        want = rows(sparkcep.match_recognize(table, text, mode=mode))
    except DataError as local:
        with pytest.raises(DataError) as remote, collect_errors():
            match_recognize_spark(df, text, mode=mode, strategy="runs", shared=shared).collect()
        assert remote.value.message == local.message
        return
    run = SparkRun("runs", "requested")
    with collect_errors():
        got = rows(match_recognize_spark(df, text, mode=mode, strategy="runs", shared=shared, run=run))
    assert got == want, run.describe()


def _trades(n: int) -> pd.DataFrame:
    return pd.DataFrame({"ts": range(n), "v": [(i * 7) % 101 for i in range(n)]})


@pytest.mark.parametrize("parts", [3, 40])  # 40: partitions of 75 rows, a few without a body
def test_bodies_run_again_where_match_numbers_are_read(spark, parts):
    # MATCH_NUMBER() inside an expression cannot be moved on from a first pass that began
    # free: every body but the first runs again from its true entry.
    pdf = _trades(3000)
    clause = ("ORDER BY ts MEASURES FIRST(ts) AS s, MATCH_NUMBER() * 2 AS m, LAST(v) AS lv "
              "PATTERN (A B{1,5}) DEFINE A AS v > 60, B AS v < PREV(v) AND v < NEXT(v)")
    want = rows(sparkcep.match_recognize(pdf, clause))
    run = SparkRun("runs", "requested")
    df = _in_order(spark, pa.Table.from_pandas(pdf, preserve_index=False), parts)
    with collect_errors():
        assert rows(match_recognize_spark(df, clause, strategy="runs", shared=10, run=run)) == want
    assert "read once" in run.reason and run.stats["again"] > 0, run.describe()
    assert sum(want.values()) > 100


def test_a_source_read_otherwise_the_second_time_takes_the_cached_path(spark, monkeypatch):
    # A body run again reads the input again: a partition whose rows differ from the first
    # read's (a changed source, or one split otherwise) sends the run to the cached path,
    # never to a different answer. Inputs a second read may give otherwise (a shuffle, a
    # nondeterministic expression) take that path from the start.
    from pyspark.sql import functions as F

    from sparkcep.spark import as_read

    df = _in_order(spark, pa.Table.from_pandas(_trades(3000), preserve_index=False), 4)
    assert as_read.reads_alike(df)
    assert not as_read.reads_alike(df.repartitionByRange(2, "ts").sortWithinPartitions("ts"))
    if not is_connect(spark):
        # (a Connect client reads the plan's text, which does not say which expressions are
        # nondeterministic: there the digest check below sends such a run to the cached path)
        assert not as_read.reads_alike(df.withColumn("r", F.rand()))
    clause = ("ORDER BY ts MEASURES FIRST(ts) AS s, MATCH_NUMBER() * 2 AS m "
              "PATTERN (A B+) DEFINE A AS v > 60, B AS v < PREV(v)")
    want = rows(sparkcep.match_recognize(_trades(3000), clause))
    first = as_read.AsReadBackend.__init__

    def other_rows(self, *args):  # as if the first read had seen other rows
        first(self, *args)
        self.parts = [dataclasses.replace(p, digest="other") for p in self.parts]
        self.body_of = {p.body: p for p in self.parts if p.body is not None}

    monkeypatch.setattr(as_read.AsReadBackend, "__init__", other_rows)
    run = SparkRun("runs", "requested")
    with collect_errors():
        assert rows(match_recognize_spark(df, clause, strategy="runs", shared=5, run=run)) == want
    assert "not sorted" in run.reason and "read once" not in run.reason, run.describe()
