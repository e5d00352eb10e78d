"""The SQL table function: ``SELECT * FROM match_recognize(TABLE(t), '<clause>')`` from
spark.sql gives the local engine's rows, its output schema comes from the clause when Spark
analyzes the call, and mistakes are refused at the call with what to do instead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.errors import OptionError
from sparkcep.spark.table_function import (
    Analyzed,
    MatchRecognizeFunction,
    arrow_table_function,
    partition_boundaries,
)
from tests.tiers import examples

CLAUSE = """PARTITION BY symbol ORDER BY ts
    MEASURES A.price AS top, COUNT(*) AS length, FIRST(A.ts) AS t0, LAST(C.price) - A.price AS gain
    PATTERN (A B+ C+)
    DEFINE B AS price < PREV(price), C AS price > PREV(price)"""


@pytest.fixture(scope="module")
def trades(spark):
    rng = np.random.default_rng(0)
    n = 600
    pdf = pd.DataFrame({
        "symbol": rng.choice(["a", "b", "c"], n),
        "ts": pd.date_range("2024-03-30 22:00", periods=n, freq="7min", tz="Europe/Berlin"),  # across DST
        "price": rng.normal(100, 3, n).round(2),
        "note": rng.choice(["x", None], n),
    })
    spark.createDataFrame(pdf).createOrReplaceTempView("trades")
    sparkcep.register_table_function(spark)
    return pdf


def _same(got: pd.DataFrame, want: pd.DataFrame, by: list[str]):
    got = got.sort_values(by).reset_index(drop=True)
    want = want.sort_values(by).reset_index(drop=True)
    for c in want.columns:
        if isinstance(want[c].dtype, pd.DatetimeTZDtype):
            want[c] = want[c].dt.tz_convert("UTC").dt.tz_localize(None)  # as toPandas gives instants
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_one_row_per_match_by_key(spark, trades):
    got = spark.sql(f"SELECT * FROM match_recognize(TABLE(trades), '{CLAUSE}')")
    assert got.columns == ["symbol", "top", "length", "t0", "gain"]  # known before any row is read
    want = sparkcep.match_recognize(trades, CLAUSE)
    assert len(want) > 20
    _same(got.toPandas(), want, ["symbol", "t0"])


def test_all_rows_per_match_over_one_partition(spark, trades):
    clause = ("ORDER BY ts MEASURES CLASSIFIER() AS c, RUNNING COUNT(*) AS n ALL ROWS PER MATCH "
              "PATTERN (A B+) DEFINE B AS price < PREV(price)")
    got = spark.sql(f"SELECT * FROM match_recognize(TABLE(trades), \"{clause}\")").toPandas()
    want = sparkcep.match_recognize(trades, clause)
    _same(got, want, ["ts", "c"])


def test_a_subquery_and_a_where_clause_around_it(spark, trades):
    got = spark.sql(f"SELECT symbol, top FROM match_recognize(TABLE(SELECT * FROM trades WHERE symbol <> 'c'), "
                    f"'{CLAUSE}') WHERE length > 3").toPandas()
    want = sparkcep.match_recognize(trades[trades.symbol != "c"], CLAUSE)
    want = want[want.length > 3][["symbol", "top"]]
    _same(got, want, ["symbol", "top"])


def test_a_mistake_in_the_clause_is_positioned_in_it(spark, trades):
    with pytest.raises(Exception) as e:
        spark.sql("SELECT * FROM match_recognize(TABLE(trades), 'ORDER BY ts PATTERN (A) DEFINE A AS pric > 1')")
    text = str(e.value)
    assert "[UNKNOWN_COLUMN]" in text and "did you mean 'price'" in text
    assert "line 1, column 37" in text and "^~~~" in text
    assert "analyzer.py" not in text  # one frame of traceback under Spark's message, not the analyzer's


@pytest.mark.parametrize(("call", "says"), [
    ("match_recognize(TABLE(trades), 'ORDER BY ts PATTERN (A) DEFINE A AS price > 1', 'partition')",
     "takes a table and a clause"),
    ("match_recognize(TABLE(trades), 'ORDER BY ts PATTERN (A) DEFINE A AS price > 1', mode => 'matchregex')",
     "takes no named arguments (mode)"),
    ("match_recognize('ORDER BY ts PATTERN (A) DEFINE A AS price > 1', TABLE(trades))", "takes a table and a clause"),
    ("match_recognize(TABLE(trades), 5)", "string literal"),
])
def test_what_it_does_not_take_is_refused_with_what_to_use(spark, trades, call, says):
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM {call}")
    assert says in str(e.value)


def test_registered_functions_go_with_it_to_the_workers(spark, trades):
    sparkcep.register_function("cheap", lambda p: p < 99.0, returns="boolean")
    try:
        sparkcep.register_table_function(spark, "match_cheap")
        clause = ("PARTITION BY symbol ORDER BY ts MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n "
                  "PATTERN (A B+) DEFINE A AS cheap(price), B AS cheap(price)")
        got = spark.sql(f"SELECT * FROM match_cheap(TABLE(trades), '{clause}')").toPandas()
        want = sparkcep.match_recognize(trades, clause)
    finally:
        sparkcep.unregister_function("cheap")
    assert len(want) > 5
    _same(got, want, ["symbol", "t0"])


def test_registration_checks_its_arguments(spark):
    with pytest.raises(OptionError, match="SparkSession"):
        sparkcep.register_table_function(5)
    with pytest.raises(OptionError, match="SQL identifier"):
        sparkcep.register_table_function(spark, "match recognize")


def test_keys_spanning_arrow_batches_and_a_null_key(spark, trades):
    """Rows reach the function in Arrow batches of a few rows (each key's across several,
    several keys in one), one key NULL; each key is matched whole, as the local engine does."""
    rows = trades.assign(symbol=trades.symbol.where(trades.symbol != "c", None))
    spark.createDataFrame(rows).createOrReplaceTempView("trades_null_key")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        got = spark.sql(f"SELECT * FROM match_recognize(TABLE(trades_null_key), '{CLAUSE}')").toPandas()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    want = sparkcep.match_recognize(rows, CLAUSE)
    assert want.symbol.isna().sum() > 3
    _same(got.fillna({"symbol": "-"}), want.fillna({"symbol": "-"}), ["symbol", "t0"])


def test_a_nan_key_is_one_partition_and_not_infinity_s(spark, trades):
    """A floating PARTITION BY key: NaN is one key (PySpark's wrapper alone would start a
    partition at every NaN row) and stays apart from +Infinity, which it is handed over as."""
    keyed = trades.assign(k=np.select([trades.symbol == "a", trades.symbol == "b"], [np.nan, np.inf], 1.5))
    import pyarrow as pa

    table = pa.Table.from_pandas(keyed.drop(columns="k"), preserve_index=False)
    table = table.append_column("k", pa.array(keyed.k.to_numpy(), pa.float64(), from_pandas=False))  # NaN, not NULL
    spark.createDataFrame(table).createOrReplaceTempView("trades_nan_key")
    assert spark.sql("SELECT count(*) FROM trades_nan_key WHERE isnan(k)").first()[0] > 100  # NaN, not NULL
    clause = CLAUSE.replace("PARTITION BY symbol", "PARTITION BY k").replace("A.price AS top", "A.price AS top, "
                                                                              "FIRST(A.symbol) AS s")
    got = spark.sql(f"SELECT * FROM match_recognize(TABLE(trades_nan_key), '{clause}')").toPandas()
    want = sparkcep.match_recognize(table, clause).to_pandas()
    assert want.k.isna().sum() > 3 and (want.k == np.inf).sum() > 3
    assert (want.s[want.k.isna()] == "a").all()
    _same(got.fillna({"k": -1.0}), want.fillna({"k": -1.0}), ["k", "t0"])


def test_pyspark_s_key_wrapper_finds_key_boundaries_vectorized(spark, trades):
    class Probe(MatchRecognizeFunction):  # (defined here: pickled by value for the server's workers)
        """Reports whether PySpark's per-key wrapper took the vectorized boundary finder."""

        @staticmethod
        def analyze(table, clause):
            from pyspark.sql.types import BooleanType, LongType, StructField, StructType
            from pyspark.sql.udtf import PartitioningColumn

            return Analyzed(schema=StructType([StructField("vectorized", BooleanType()), StructField("n", LongType())]),
                            partitionBy=[PartitioningColumn("symbol")])

        def terminate(self):
            import pyarrow as pa

            yield pa.table({"vectorized": [self.vectorized], "n": [sum(b.num_rows for b in self.batches)]})

    spark.udtf.register("probe", arrow_table_function(spark, Probe))
    got = spark.sql("SELECT * FROM probe(TABLE(trades), 'x')").toPandas()
    assert got.vectorized.all() and len(got) == 3 and got.n.sum() == len(trades)


def _boundaries_as_pyspark_finds_them(batch, indexes):
    """PySpark's own loop: a new key where any key column's Python value differs."""
    out = [0]
    for i in range(1, batch.num_rows):
        if any(batch.column(c)[i].as_py() != batch.column(c)[i - 1].as_py() for c in indexes):
            out.append(i)
    return [*out, batch.num_rows] if batch.num_rows > 1 else [0, batch.num_rows]


_KEY_VALUES = {
    "int": st.one_of(st.none(), st.integers(-2, 2)),
    "str": st.one_of(st.none(), st.sampled_from(["", "a", "b", "é"])),
    "float": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")])),
    "bool": st.one_of(st.none(), st.booleans()),
}


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_vectorized_key_boundaries_are_pyspark_s(data):
    import pyarrow as pa

    n = data.draw(st.integers(0, 12))
    kinds = data.draw(st.lists(st.sampled_from(sorted(_KEY_VALUES)), min_size=1, max_size=3))
    columns = [pa.array(data.draw(st.lists(_KEY_VALUES[k], min_size=n, max_size=n)),
                        type={"int": pa.int64(), "str": pa.string(), "float": pa.float64(), "bool": pa.bool_()}[k])
               for k in kinds]
    batch = pa.RecordBatch.from_arrays([*columns, pa.array(range(n))], names=[f"k{i}" for i in range(len(kinds))] + ["v"])
    indexes = list(range(len(kinds)))
    assert partition_boundaries(batch, indexes) == _boundaries_as_pyspark_finds_them(batch, indexes)
