"""Every Spark strategy returns exactly the sequential engine's rows (real local Spark)."""

import contextlib
import os
import re

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep import DataError
from sparkcep.api import compile_query
from sparkcep.spark.batch import collect_errors
from sparkcep.workloads import matchregex, rip
from sparkcep.workloads.stock import stock_trades, trade_stream
from tests.spark.helpers import assert_same, classic_env, executed_plan, frame, rows
from tests.test_properties import queries, tables
from tests.tiers import FULL, sample


@contextlib.contextmanager
def small_splits(spark):
    """Files read as splits of 4 kB: one Parquet file becomes several Spark partitions, in order."""
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4k")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)


@pytest.fixture(scope="module")
def stream():
    return stock_trades(1500, seed=11)


@pytest.mark.parametrize("name", sample(rip.NAMES, every=4))
def test_rip_queries_all_strategies(spark, stream, name):
    # Batches of 200 rows are far shorter than the stream; MAXLENGTH 40 sets the overlap.
    assert_same(spark, stream, rip.query(name, maxlength=40), batch=200)


@pytest.mark.parametrize("name", sample(["Q1", "Q3", "Q8"], every=3))
def test_rip_unbounded_and_all_matches(spark, stream, name):
    # No MAXLENGTH: runs still alive at a batch end are finished by follow-up passes.
    assert_same(spark, stream, rip.query(name), batch=150, strategies=("runs", "rr"))
    assert_same(spark, stream, rip.query(name, skip="ALL MATCHES", maxlength=30), batch=150,
                strategies=("runs", "partition"))


@pytest.mark.parametrize("name", [n for n in matchregex.NAMES if FULL or n == "finance3"])
def test_matchregex_finance_queries(spark, name):
    trades = trade_stream(4000, symbols=12, seed=5)
    assert_same(spark, trades, matchregex.query(name), mode="matchregex", batch=97)


def test_batch_shorter_than_a_match_and_matches_across_batches(spark):
    pdf = pd.DataFrame({"ts": range(60), "v": [1] * 25 + [2] + [1] * 33 + [2]})
    clause = "ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS t0 ALL ROWS PER MATCH PATTERN (A+ B) DEFINE A AS v = 1, B AS v = 2"
    expected = assert_same(spark, pdf, clause, batch=4, shared=1, strategies=("runs", "rr"))
    assert sum(expected.values()) == 60


@pytest.mark.slow
def test_skip_modes_unmatched_rows_and_ties(spark):
    pdf = pd.DataFrame({"ts": [0, 1, 1, 2, 3, 3, 4, 5, 6, 7], "v": [1, 2, 1, 3, 1, 2, 2, 3, 1, 1]})
    for skip in ("AFTER MATCH SKIP TO NEXT ROW", "AFTER MATCH SKIP TO LAST B", "ALL MATCHES", ""):
        clause = f"""ORDER BY ts MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls
            ALL ROWS PER MATCH WITH UNMATCHED ROWS {skip}
            PATTERN (A B+ C?) DEFINE A AS v = 1, B AS v = 2, C AS v = 3"""
        assert_same(spark, pdf, clause, batch=3)


def test_partitions_null_keys_empty_and_skewed(spark):
    keys = ["big"] * 400 + [f"k{i}" for i in range(40) for _ in range(5)] + [None] * 7
    pdf = pd.DataFrame({"k": keys, "ts": range(len(keys))})
    pdf["v"] = [(i * 7919) % 5 for i in range(len(keys))]
    clause = """PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, LAST(v) AS lv
        PATTERN (A B+) DEFINE A AS v < 2, B AS v > PREV(v)"""
    assert_same(spark, pdf, clause, batch=50)
    empty = spark.createDataFrame(pdf).limit(0)
    assert sparkcep.match_recognize(empty, clause, strategy="runs").count() == 0
    assert sparkcep.match_recognize(empty, clause, strategy="partition").count() == 0


@pytest.mark.parametrize("routed", [True, False])
def test_hot_key_is_cut_into_batches(spark, monkeypatch, routed):
    # PARTITION BY with one key holding most rows: routed by the keys' counts, its rows are
    # cut at quantiles of ts into ranges of about ``batch`` rows, and the small keys are
    # matched whole; range-sorted, its rows are cut at partitions of about ``batch`` rows,
    # and small keys share a partition (a batch each). NaN and NULL are keys of their own.
    import numpy as np

    from sparkcep.spark import runs
    from sparkcep.spark.batch import SparkRun, match_recognize_spark

    monkeypatch.setattr(runs, "ROUTE_KEYS", routed)

    keys = [1.0] * 1200 + [float(2 + i % 9) for i in range(90)] + [float("nan")] * 30 + [None] * 20
    order = np.random.default_rng(4).permutation(len(keys))  # shuffled: the sort has work to do
    table = pa.table({"k": pa.array(keys, pa.float64(), from_pandas=False), "ts": list(range(len(keys))),
                      "v": [(i * 7919) % 5 for i in range(len(keys))]}).take(order)
    clause = """PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS t0, MATCH_NUMBER() AS m
        PATTERN (A B+) DEFINE A AS v < 2, B AS v > PREV(v)"""
    want = rows(sparkcep.match_recognize(table, clause))
    run = SparkRun("runs", "requested")
    with collect_errors():
        got = rows(match_recognize_spark(frame(spark, table), clause, strategy="runs", batch=200, shared=4,
                                         run=run))
    assert got == want and len(want) > 50
    assert run.partitions == 12, run.describe()
    if routed:  # 1 200 rows: 6 ranges, stitched at 5 seams
        assert "1 hot key cut into 6 ranges" in run.reason and run.stats["batches"] >= 6 + 5, run.describe()
    else:
        assert run.stats["batches"] >= 12 + 5, run.describe()


def test_result_does_not_depend_on_spark_partitions(spark, stream):
    clause = rip.query("Q4", partition_by="symbol", maxlength=20)
    df = spark.createDataFrame(stream)
    one = rows(sparkcep.match_recognize(df.coalesce(1), clause, strategy="partition"))
    many = rows(sparkcep.match_recognize(df.repartition(7), clause, strategy="partition"))
    assert one == many


def test_auto_picks_and_explains(spark, stream):
    df = spark.createDataFrame(stream)
    text = sparkcep.explain(df, rip.query("Q7"), batch=500)
    assert "strategy: runs" in text and "program:" in text
    # Without PARTITION BY, auto reads at most batch + 1 rows to see whether they fit in one batch.
    n = len(stream)
    assert "strategy: sequential" in sparkcep.explain(df, rip.query("Q7"), batch=n)
    assert "strategy: runs" in sparkcep.explain(df, rip.query("Q7"), batch=n - 1)
    keyed = spark.createDataFrame(stock_trades(2000, symbols=50, seed=2))
    assert "strategy: partition" in sparkcep.explain(keyed, rip.query("Q7", partition_by="symbol"), batch=500)


def test_errors_from_workers_are_data_errors(spark):
    df = spark.createDataFrame(pd.DataFrame({"ts": [0, 1, 2], "d": [1, 0, 1]}))
    with pytest.raises(DataError, match="division by zero") as e:
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A+) DEFINE A AS 10 / d > 1", strategy="runs", batch=2).collect()
    assert e.value.key == {"ts": 1}  # the row, named by its ORDER BY value (a batch's first pass found it)
    with pytest.raises(sparkcep.QueryError):
        sparkcep.match_recognize(df, "ORDER BY nope MEASURES MATCH_NUMBER() AS m PATTERN (A)")


@pytest.mark.parametrize("name", ["__sparkcep_row__", "__sparkcep_hash__", "__SPARKCEP_ROUTE__"])
def test_a_column_of_a_reserved_name_is_refused(spark, name):
    """Every name starting with __sparkcep_ (the run's own columns: a key's hash, a row's
    route, its input position) is refused, never overwritten or dropped."""
    df = spark.createDataFrame(pd.DataFrame({"k": [1, 1], "ts": [0, 1], name: [5, 6]}))
    with pytest.raises(DataError, match="reserved") as e:
        sparkcep.match_recognize(df, "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A)")
    assert e.value.column == name


def test_a_dataframes_plan_comes_from_the_plan_cache(spark, stream):
    from sparkcep.spark.frames import plan_for

    df = spark.createDataFrame(stream.head(50))
    first, schema = plan_for(df, rip.query("Q7"))
    assert plan_for(df, rip.query("Q7"))[0] is first and schema.names == list(stream.columns)


def test_sql_statement(spark, stream):
    spark.createDataFrame(stream).createOrReplaceTempView("trades")
    out = sparkcep.sql(spark, """
        SELECT m.first_trade, m.length FROM trades MATCH_RECOGNIZE (
            ORDER BY timestamp, tradeId
            MEASURES FIRST(tradeId) AS first_trade, COUNT(*) AS length
            PATTERN (A B C)
            DEFINE A AS price < 70, B AS price > A.price, C AS price < B.price AND price < A.price
        ) AS m WHERE m.first_trade > 100 ORDER BY m.first_trade""")
    # The statement's intermediate view is gone once Spark has analysed it; the result stays.
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("sparkcep_match_")]
    out = out.toPandas()
    local = sparkcep.match_recognize(stream, rip.query("Q7"))
    assert out.first_trade.tolist() == [t for t in local.first_trade.tolist() if t > 100]
    # A comment is whitespace, and the source may carry a correlation name (as in Trino).
    named = sparkcep.sql(spark, """
        SELECT m.first_trade FROM trades /* the whole stream */ AS src MATCH_RECOGNIZE (
            ORDER BY timestamp, tradeId MEASURES FIRST(tradeId) AS first_trade PATTERN (A B C)
            DEFINE A AS price < 70, B AS price > A.price, C AS price < B.price AND price < A.price
        ) AS m ORDER BY m.first_trade""").toPandas()
    assert named.first_trade.tolist() == local.first_trade.tolist()
    with pytest.raises(sparkcep.QueryError) as e:
        sparkcep.sql(spark, "SELECT *\nFROM trades MATCH_RECOGNIZE (\n  ORDER BY timestamp\n  PATTERN (A) DEFINE A AS pricee > 1)")
    # Re-pointed into the statement, still an UNKNOWN_COLUMN error: a DataError naming the column.
    assert (e.value.line, e.value.span.column, e.value.column) == (4, 27, "pricee")
    assert isinstance(e.value, sparkcep.DataError) and str(e.value).count("UNKNOWN_COLUMN") == 1
    assert str(e.value).endswith("^~~~~~") and e.value.message.startswith("the data has no column 'pricee'")
    with pytest.raises(sparkcep.SparkCepError, match="unknown option"):
        sparkcep.sql(spark, "SELECT * FROM trades MATCH_RECOGNIZE (ORDER BY timestamp PATTERN (A) DEFINE A AS true)",
                     strateggy="runs")
    # A WITH clause heads the statement: its names serve as the source and around it.
    with_out = sparkcep.sql(spark, """
        WITH cheap AS (SELECT * FROM trades WHERE tradeId > 100), floor AS (SELECT 120 AS low)
        SELECT m.first_trade FROM cheap MATCH_RECOGNIZE (
            ORDER BY timestamp, tradeId MEASURES FIRST(tradeId) AS first_trade PATTERN (A B C)
            DEFINE A AS price < 70, B AS price > A.price, C AS price < B.price AND price < A.price
        ) AS m WHERE m.first_trade > (SELECT low FROM floor) ORDER BY m.first_trade""").toPandas()
    cheap = stream[stream.tradeId > 100]
    want = sparkcep.match_recognize(cheap, rip.query("Q7")).first_trade.tolist()
    assert with_out.first_trade.tolist() == [t for t in want if t > 120] and len(with_out)
    # Inside a subquery: refused where it stands, not "no MATCH_RECOGNIZE".
    nested = "SELECT * FROM (SELECT * FROM trades MATCH_RECOGNIZE (ORDER BY timestamp PATTERN (A))) x"
    with pytest.raises(sparkcep.QueryError, match="inside a subquery or a WITH clause is not supported") as e:
        sparkcep.sql(spark, nested)
    assert e.value.code == "NOT_SUPPORTED" and e.value.column == nested.index("MATCH_RECOGNIZE") + 1


def test_a_statement_spark_rejects_is_one_error_not_a_log_record(spark, stream, capfd):
    """Spark SQL's rejection of the statement around MATCH_RECOGNIZE is the QueryError alone:
    pyspark's own log record of it (a JSON line with a Java stack trace) is not printed."""
    spark.createDataFrame(stream).createOrReplaceTempView("trades")
    capfd.readouterr()
    with pytest.raises(sparkcep.QueryError) as e:
        sparkcep.sql(spark, "SELECT m.nosuch FROM trades MATCH_RECOGNIZE (ORDER BY timestamp "
                            "MEASURES A.price AS p PATTERN (A)) AS m")
    assert e.value.code == "SPARK_SQL"
    err = capfd.readouterr().err
    assert "UNRESOLVED_COLUMN" not in err and "errorClass" not in err, err


@pytest.mark.parametrize("tail, at", [
    ("\n  WHERE m.p >", None),  # cut short: the end of the statement
    (" WHERE m.nosuch > 1", "m.nosuch"),  # an unknown column in WHERE
    (" ORDER BY", "ORDER BY"),  # a clause cut short (Spark points at one of its words)
])
def test_spark_s_rejection_points_where_spark_says_in_the_user_s_statement(spark, stream, tail, at):
    """Spark reports a place in the statement it was given (our view in place of the
    MATCH_RECOGNIZE clause): the caret goes to that place in the user's own statement."""
    spark.createDataFrame(stream).createOrReplaceTempView("trades")
    statement = ("SELECT m.p FROM trades MATCH_RECOGNIZE (ORDER BY timestamp MEASURES A.price AS p PATTERN (A)) AS m"
                 + tail)
    with pytest.raises(sparkcep.QueryError) as e:
        sparkcep.sql(spark, statement)
    start = len(statement) if at is None else statement.rindex(at)
    places = {(statement[:o].count("\n") + 1, o - statement[:o].rfind("\n"))
              for o in range(start, start + max(1, len(at or "")))}
    assert e.value.code == "SPARK_SQL", str(e.value)
    assert (e.value.line, e.value.column) in places, str(e.value)
    assert "pos" not in e.value.message


def test_arrow_types_round_trip(spark):
    t = pa.table({"ts": pa.array([1, 2, 3], pa.int32()), "f": pa.array([1.5, 2.5, 3.5], pa.float32()),
                  "s": ["a", "b", "c"]})
    clause = "ORDER BY ts MEASURES COLLECT(s) AS ss, MAX(f) AS mf, SUM(ts) AS st PATTERN (A+)"
    assert_same(spark, t, clause, batch=2)


@settings(max_examples=int(os.environ.get("SPARKCEP_SPARK_EXAMPLES", "12" if FULL else "4")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(queries(), tables(), st.integers(1, 4))
def test_random_queries_on_spark(spark, query, table, batch):
    text, mode = query
    plan = compile_query(text, table, mode)
    # MATCH_NUMBER() in DEFINE numbers matches in order: the run strategies refuse it.
    strategies = ("partition",) if plan.define_match_number else ("runs", "partition")
    try:
        sparkcep.match_recognize(table, text, mode=mode)
    except DataError as local:
        # The same error, raised by the Spark workers, names the row by its key instead.
        df = frame(spark, table)
        for strategy in strategies:
            with pytest.raises(DataError) as remote, collect_errors():
                sparkcep.match_recognize(df, text, mode=mode, strategy=strategy, batch=batch).collect()
            assert remote.value.message == local.message, strategy
        return
    assert_same(spark, table, text, mode=mode, batch=batch, strategies=strategies)


@pytest.mark.parametrize("selection", ["SKIP TILL NEXT MATCH", "SKIP TILL ANY MATCH", "STRICT CONTIGUITY"])
def test_event_selection_on_spark(spark, selection):
    pdf = pd.DataFrame({"ts": range(80), "k": [(i // 7) % 3 for i in range(80)],
                        "v": [(i * 7) % 11 for i in range(80)]})
    clause = f"""PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, COLLECT(ts) AS rows ALL MATCHES
        EVENT SELECTION {selection}
        PATTERN (A !N B+) WITHIN 12
        DEFINE A AS v < 3, N AS v = 10, B AS v > PREVIOUS MAX(B.v) OR COUNT(B.*) = 1 AND v > A.v"""
    strict = selection.startswith("STRICT")
    expected = assert_same(spark, pdf, clause, strategies=("sequential",) if strict else ("sequential", "partition"))
    assert sum(expected.values()) > 0
    df = spark.createDataFrame(pdf)
    with pytest.raises(sparkcep.SparkCepError, match="not supported"):
        sparkcep.match_recognize(df, clause, strategy="runs")
    assert ("sequential" if strict else "partition") in sparkcep.explain(df, clause)


def test_whole_partition_queries_have_a_row_bound(spark):
    # EVENT SELECTION needs whole partitions: one task would hold them, so a bound applies,
    # on the driver before any work (no PARTITION BY) and in the task (one key too big).
    pdf = pd.DataFrame({"ts": range(40), "k": [0] * 30 + [1] * 10, "v": [(i * 7) % 11 for i in range(40)]})
    df = spark.createDataFrame(pdf)
    skip = "MEASURES MATCH_NUMBER() AS m EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A B) DEFINE A AS v < 3, B AS v > A.v"
    spark.conf.set("spark.sparkcep.maxTaskRows", "20")
    try:
        with pytest.raises(sparkcep.SparkCepError, match="40 rows would all go to one task") as e:
            sparkcep.match_recognize(df, f"ORDER BY ts {skip}")
        assert "spark.sparkcep.maxTaskRows" in str(e.value)
        with pytest.raises(DataError, match="one key holds 30 rows") as e, collect_errors():
            sparkcep.match_recognize(df, f"PARTITION BY k ORDER BY ts {skip}").collect()
        assert e.value.key == {"k": 0, "ts": 0}
        # One task holding many small keys (all rows in one task here) matches them in parts
        # of whole keys within the bound.
        small = spark.createDataFrame(pdf.assign(k=[i // 8 for i in range(40)]))
        got = sorted(sparkcep.match_recognize(small, f"PARTITION BY k ORDER BY ts {skip}", strategy="sequential")
                     .toPandas().itertuples(index=False))
    finally:
        spark.conf.unset("spark.sparkcep.maxTaskRows")
    assert got == sorted(sparkcep.match_recognize(small, f"PARTITION BY k ORDER BY ts {skip}", strategy="sequential")
                         .toPandas().itertuples(index=False))
    assert got
    assert sparkcep.match_recognize(df, f"PARTITION BY k ORDER BY ts {skip}").count() > 0


def test_one_row_per_match_ships_only_the_columns_it_reads(spark):
    pdf = pd.DataFrame({"ts": range(300), "k": [i % 4 for i in range(300)], "v": [(i * 13) % 7 for i in range(300)],
                        "note": [f"row {i}" for i in range(300)], "tags": [[i, i + 1] for i in range(300)]})
    clause = """PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS t0, COUNT(*) AS n
        PATTERN (A B+) DEFINE B AS v > PREV(v)"""
    expected = assert_same(spark, pdf, clause, strategies=("sequential", "partition", "runs"), batch=40)
    assert sum(expected.values()) > 0


def test_a_query_that_reads_no_column(spark):
    """No PARTITION BY, ORDER BY or column in DEFINE and MEASURES: the rows still count (the
    run strategy's batch edges are tables; without a column they had no rows)."""
    pdf = pd.DataFrame({"ts": range(7), "v": [5, 3, 4, 1, 2, 2, 7]})
    expected = assert_same(spark, pdf, "MEASURES COUNT(*) AS n PATTERN (A B) DEFINE A AS true", batch=3)
    assert sum(expected.values()) == 3


def test_segment_query_on_spark(spark):
    # T-REX: segment queries run per PARTITION BY key; the run strategies refuse them.
    pdf = pd.DataFrame({"k": [i % 3 for i in range(90)], "t": range(90),
                        "v": [((i * 37) % 11) + (i // 9) for i in range(90)]})
    clause = """PARTITION BY k ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, linear_reg_r2(t, v) AS r2
        PATTERN ((UP & W) DOWN) DEFINE SEGMENT W AS window(3, 6),
            SEGMENT UP AS last(v) > first(v) AND linear_reg_r2_signed(t, v) > 0.5,
            SEGMENT DOWN AS last(v) < first(v) AND window(2, 4)"""
    expected = assert_same(spark, pdf, clause, strategies=("sequential", "partition"))
    assert sum(expected.values()) > 0
    df = spark.createDataFrame(pdf)
    with pytest.raises(sparkcep.SparkCepError, match="not supported"):
        sparkcep.match_recognize(df, clause, strategy="runs")
    assert "strategy: partition" in sparkcep.explain(df, clause)


@pytest.mark.slow
def test_run_strategy_reads_ordered_files_without_sorting(spark, tmp_path):
    # Parquet files already in ORDER BY order are matched where they lie (no sort); the
    # same rows shuffled take one range sort; both give the local engine's rows, including
    # a long match that needs follow-up tasks past the shared part.
    from sparkcep.spark.batch import SparkRun, match_recognize_spark

    n = 4000
    # The A at row 2999 starts a match of B+ over the last 1 000 rows.
    pdf = pd.DataFrame({"ts": range(n), "v": [(i * 7) % 101 if i < 2999 else 95 if i == 2999 else 1
                                             for i in range(n)]})
    clause = ("ORDER BY ts MEASURES FIRST(ts) AS s, COUNT(*) AS c, MATCH_NUMBER() AS m "
              "PATTERN (A B+) DEFINE A AS v > 90, B AS v < PREV(v) OR v = 1")
    want = sorted(map(tuple, sparkcep.match_recognize(pdf, clause).itertuples(index=False)))
    ordered_path = tmp_path / "ordered.parquet"
    pq.write_table(pa.Table.from_pandas(pdf, preserve_index=False), ordered_path, row_group_size=500)
    shuffled = pdf.sample(frac=1, random_state=3)
    with small_splits(spark):
        for df, sorted_ in ((spark.read.parquet(str(ordered_path)), False), (spark.createDataFrame(shuffled), True)):
            run = SparkRun("runs", "requested")
            with collect_errors():
                got = sorted(map(tuple, match_recognize_spark(df, clause, strategy="runs", batch=500, shared=5,
                                                               run=run).collect()))
            assert got == want and len(want) > 20
            assert ("not sorted" in run.reason) != sorted_, run.describe()
            assert run.stats["batches"] > 1 and run.stats["ranged"] > 0, run.describe()  # the long last match


def test_ordered_input_plan_has_no_sort_or_exchange(spark, tmp_path):
    # Input in ORDER BY order: the plan reads it where it lies (no sort, no shuffle); each
    # batch's first pass emits its rows too, kept where the true entry allows. Shuffled
    # rows take the range sort.
    from sparkcep.spark.batch import SparkRun, match_recognize_spark

    pdf = pd.DataFrame({"ts": range(3000), "v": [(i * 7) % 101 for i in range(3000)]})
    clause = "ORDER BY ts MEASURES FIRST(ts) AS s, COUNT(*) AS c PATTERN (A B+) DEFINE A AS v > 90, B AS v < PREV(v)"
    want = sorted(map(tuple, sparkcep.match_recognize(pdf, clause).itertuples(index=False)))
    path = tmp_path / "ordered.parquet"
    pq.write_table(pa.Table.from_pandas(pdf, preserve_index=False), path, row_group_size=500)
    with small_splits(spark):
        for df, ordered in ((spark.read.parquet(str(path)), True), (spark.createDataFrame(pdf.sample(frac=1)), False)):
            run = SparkRun("runs", "requested")
            with collect_errors():
                result = match_recognize_spark(df, clause, strategy="runs", batch=500, shared=20, run=run)
                got = sorted(map(tuple, result.collect()))
            assert got == want and len(want) > 20
            plan = executed_plan(result)
            if ordered:
                # No shuffle and no sort of the rows (a broadcast of the batches' small table is fine).
                assert not re.search(r"(?<!Broadcast)Exchange|\bSort \[", plan), plan
            else:
                assert "rangepartitioning" in plan, plan
            # Most batches keep their first-pass rows (one here begins inside a match).
            assert run.stats["batches"] > 1 and 0 < run.stats["kept"] <= run.stats["batches"], run.describe()


@pytest.mark.slow
def test_seam_where_candidate_chains_disagree_for_several_matches(spark):
    # PATTERN (A A) over runs of ones: a batch that begins free pairs rows (lo, lo+1), ...
    # while the true chain, entered at lo+1, pairs (lo+1, lo+2), ... — they disagree until
    # a zero ends the run. Skewed and tiny partitions: batches of 1 to 40 rows.
    v = []
    for length in (7, 13, 5, 21, 9, 3, 17, 1, 11):
        v += [1] * length + [0]
    # Shuffled: the range sort cuts partitions of about ``batch`` rows (in-order input would
    # keep its own partitions).
    pdf = pd.DataFrame({"ts": range(len(v)), "v": v}).sample(frac=1, random_state=5)
    clause = ("ORDER BY ts MEASURES FIRST(ts) AS s, MATCH_NUMBER() AS m ALL ROWS PER MATCH WITH UNMATCHED ROWS "
              "PATTERN (A A) DEFINE A AS v = 1")
    for batch in (1, 4, 10, 40):
        assert_same(spark, pdf, clause, batch=batch, shared=2, strategies=("runs", "rr"))


def test_rows_out_of_order_inside_a_partition_are_sorted(spark, tmp_path):
    # Every partition's edge rows and seams stand in order, but two rows inside one
    # partition do not: its first-pass task finds them and the run takes the range sort.
    from sparkcep.spark.batch import SparkRun, match_recognize_spark

    pdf = pd.DataFrame({"ts": range(3000), "v": [(i * 7) % 101 for i in range(3000)]})
    swapped = pdf.copy()
    swapped.iloc[[1250, 1251]] = swapped.iloc[[1251, 1250]].to_numpy()
    clause = "ORDER BY ts MEASURES FIRST(ts) AS s, COUNT(*) AS c PATTERN (A B+) DEFINE A AS v > 90, B AS v < PREV(v)"
    want = sorted(map(tuple, sparkcep.match_recognize(pdf, clause).itertuples(index=False)))
    path = tmp_path / "nearly.parquet"
    pq.write_table(pa.Table.from_pandas(swapped, preserve_index=False), path, row_group_size=500)
    with small_splits(spark):
        run = SparkRun("runs", "requested")
        with collect_errors():
            got = sorted(map(tuple, match_recognize_spark(spark.read.parquet(str(path)), clause, strategy="runs",
                                                           batch=500, shared=20, run=run).collect()))
        assert got == want and len(want) > 20
        assert "not sorted" not in run.reason, run.describe()


def test_run_strategy_in_a_session_time_zone_other_than_utc(spark):
    # The neighbours' edge rows reach the driver through toArrow (UTC) and a partition's own
    # rows through mapInArrow (the session's zone): one schema in the task, the same instants.
    import datetime as dt

    base = dt.datetime(2026, 3, 28, 23, 0, tzinfo=dt.UTC)  # across a DST change in Berlin
    pdf = pd.DataFrame({"t": [base + dt.timedelta(minutes=7 * i) for i in range(120)],
                        "v": [(i * 7) % 5 for i in range(120)]})
    clause = ("ORDER BY t MEASURES FIRST(t) AS t0, COUNT(*) AS c PATTERN (A B+) DEFINE A AS v = 0, B AS v > PREV(v)")
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")
    try:
        in_order = spark.createDataFrame(pdf)  # partitions in ORDER BY order: matched where they lie
        want = rows(sparkcep.match_recognize(in_order, clause, strategy="sequential"))
        for df in (in_order, in_order.repartition(4)):  # and shuffled: the range sort
            with collect_errors():
                assert rows(sparkcep.match_recognize(df, clause, strategy="runs", batch=30, shared=5)) == want
        assert sum(want.values()) > 5
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


_TASK_CPUS_SCRIPT = '''
import os, sys, time
import pandas as pd
import sparkcep
from sparkcep.spark.session import get_session

folder = sys.argv[1]
spark = get_session("local[2]", config={"spark.task.cpus": "2", "spark.sql.shuffle.partitions": "2"})

def similar(a, b):
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    with open(os.path.join(folder, str(os.getpid())), "a") as f:
        f.write(".")
    return (a * 7 + b * 3) % 5 < 3

sparkcep.register_function("similar", similar, "boolean", cost="expensive")
# >= SPECULATE_ROWS, and long enough (about 3 s of calls) for a worker started on a busy machine
# to come up before the query ends (1 200 rows, 1.3 s, were not always: the task made every call)
pdf = pd.DataFrame({"ts": range(3000), "x": [(i * 7919) % 100000 for i in range(3000)]})
q = ("ORDER BY ts MEASURES A.ts AS a PATTERN (A B C) "
     "DEFINE A AS x % 2 = 0, B AS similar(A.x, B.x), C AS similar(B.x, C.x)")
got = sparkcep.match_recognize(spark.createDataFrame(pdf), q, strategy="sequential").toPandas()
callers = {int(p) for p in os.listdir(folder)}
want = sparkcep.match_recognize(pdf, q, strategy="sequential")
assert len(want) > 50 and got.sort_values("a", ignore_index=True).equals(want), (got, want)
print(len(callers - {os.getpid()}))
'''


@pytest.mark.slow
def test_a_task_given_several_cpus_makes_its_expensive_calls_ahead(tmp_path):
    # spark.task.cpus=2: the one task of a query without PARTITION BY runs the sequential
    # engine with its calls made ahead on a worker process of its own (calls from two
    # processes besides the driver), and the rows are the sequential engine's.
    import subprocess
    import sys

    script = tmp_path / "task_cpus.py"
    script.write_text(_TASK_CPUS_SCRIPT)
    (tmp_path / "pids").mkdir()
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "pids")], env=classic_env(), capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(r.stdout.strip().splitlines()[-1]) >= 2
