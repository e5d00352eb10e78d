"""The SQL table function: ``SELECT * FROM match_recognize(TABLE(t), '<clause>')`` from
spark.sql gives the local engine's rows, its output schema comes from the clause when Spark
analyzes the call, and mistakes are refused at the call with what to do instead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sparkcep
from sparkcep.errors import OptionError

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
