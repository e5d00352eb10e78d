"""Many rules over a Spark DataFrame (sparkcep.match_rules): every strategy gives the local
engine's rows for every rule; rules with one PARTITION BY share one shuffle; an error in a
task names its rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sparkcep
from sparkcep.errors import DataError, QueryError
from sparkcep.spark.batch import collect_errors
from tests.spark.helpers import CONNECT, executed_plan, rows

RULES = {
    "dip": ("PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS top, COUNT(*) AS n "
            "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > PREV(price)"),
    "high": ("PARTITION BY sym ORDER BY ts MEASURES LAST(B.price) AS high, COUNT(*) AS n "
             "PATTERN (A B) DEFINE A AS price < 30, B AS price > 70"),
    "every": ("PARTITION BY sym ORDER BY ts MEASURES RUNNING COUNT(*) AS n ALL ROWS PER MATCH "
              "PATTERN (A B) DEFINE A AS price < 30, B AS price > 70"),
    "by_desk": ("PARTITION BY desk ORDER BY ts DESC MEASURES MAX(price) AS top, COUNT(*) AS n "
                "PATTERN (A{3}) DEFINE A AS price > 40"),
    "whole": "ORDER BY ts, sym MEASURES COUNT(*) AS n PATTERN (A B C) DEFINE A AS price < 20, C AS price > 80",
}


@pytest.fixture(scope="module")
def trades():
    rng = np.random.default_rng(3)
    n = 3000
    return pd.DataFrame({"sym": rng.choice(["a", "b", "c", "d"], n), "desk": rng.integers(0, 3, n),
                         "ts": np.arange(n, dtype=np.int64), "price": rng.integers(0, 100, n).astype(float)})


@pytest.mark.parametrize("strategy", ["auto", "partition", "sequential", "runs"])
def test_every_strategy_gives_each_rule_its_local_rows(spark, trades, strategy):
    expected = rows(sparkcep.match_rules(pa.Table.from_pandas(trades, preserve_index=False), RULES))
    got = sparkcep.match_rules(spark.createDataFrame(trades), RULES, strategy=strategy)
    assert got.columns == list(sparkcep.match_rules(trades.head(0), RULES).columns)
    assert rows(got) == expected


def test_one_shuffle_per_partition_by(spark, trades):
    got = sparkcep.match_rules(spark.createDataFrame(trades), RULES, strategy="partition")
    plan = executed_plan(got)
    # by sym (three rules), by desk, and the rule without PARTITION BY in one task
    assert plan.count("Exchange hashpartitioning(sym") == 1
    assert plan.count("Exchange hashpartitioning(desk") == 1
    assert plan.count("Exchange SinglePartition") == 1


def test_an_error_in_a_task_names_its_rule(spark, trades):
    bad = dict(RULES, ratio="PARTITION BY sym ORDER BY ts MEASURES 1 / (COUNT(*) - 2) AS n PATTERN (A B)")
    df = spark.createDataFrame(trades)
    with pytest.raises(DataError) as e, collect_errors():
        sparkcep.match_rules(df, bad, strategy="partition").collect()
    assert e.value.rule == "ratio" and "rule 'ratio'" in str(e.value) and e.value.key is not None


def test_a_column_of_two_types_is_refused_before_spark_runs(spark, trades):
    text = RULES["high"].replace("LAST(B.price) AS high", "CAST(LAST(B.price) AS VARCHAR) AS top")
    with pytest.raises(QueryError) as e:
        sparkcep.match_rules(spark.createDataFrame(trades), {"dip": RULES["dip"], "text": text})
    assert e.value.code == "TYPE_MISMATCH"


@pytest.mark.skipif(CONNECT, reason="counts Spark jobs by the SparkContext's status tracker, which a Connect client has not")
def test_auto_chooses_once_per_partition_by_not_once_per_rule(spark, trades):
    """auto's look at sizes and key counts (Spark jobs) is the group's, not each rule's."""
    df = spark.createDataFrame(trades).cache()
    df.count()
    keyed = {f"r{i}": RULES["high"].replace("price < 30", f"price < {30 + i}") for i in range(6)}
    sc = spark.sparkContext
    sc.setJobGroup("rules-auto", "auto over six rules of one PARTITION BY")
    try:
        sparkcep.match_rules(df, keyed, strategy="auto")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert 1 <= len(sc.statusTracker().getJobIdsForGroup("rules-auto")) <= 3
    df.unpersist()


def test_a_rule_that_needs_the_whole_input_keeps_it_beside_keyed_ones(spark, trades):
    """STRICT CONTIGUITY with PARTITION BY reads the whole input's order: in one task, while
    the group's other rules spread by key (auto, small batches)."""
    strict = ("PARTITION BY sym ORDER BY ts MEASURES COUNT(*) AS n EVENT SELECTION STRICT CONTIGUITY "
              "PATTERN (A B) DEFINE A AS price < 30, B AS price > 70")
    rules = {"strict": strict, "high": RULES["high"], "dip": RULES["dip"]}
    expected = rows(sparkcep.match_rules(pa.Table.from_pandas(trades, preserve_index=False), rules))
    got = sparkcep.match_rules(spark.createDataFrame(trades), rules, strategy="auto", batch=500)
    assert rows(got) == expected


def test_past_a_tasks_bound_each_rule_is_cut_at_its_own_keys(spark, trades):
    """strategy sequential with more rows than a task's bound: rules of different PARTITION
    BY are cut at their own keys' bounds, in input order (ORDER BY ties as alone)."""
    rules = {"dip": RULES["dip"], "by_desk": RULES["by_desk"].replace("ORDER BY ts DESC", "ORDER BY price")}
    expected = rows(sparkcep.match_rules(pa.Table.from_pandas(trades, preserve_index=False), rules))
    spark.conf.set("spark.sparkcep.maxTaskRows", "1500")
    try:
        got = rows(sparkcep.match_rules(spark.createDataFrame(trades), rules, strategy="sequential"))
    finally:
        spark.conf.unset("spark.sparkcep.maxTaskRows")
    assert got == expected


def test_columns_are_one_by_name_case_aside(spark, trades):
    upper = RULES["high"].replace("LAST(B.price) AS high", "LAST(B.price) AS TOP")
    got = sparkcep.match_rules(spark.createDataFrame(trades), {"dip": RULES["dip"], "upper": upper},
                               strategy="partition")
    assert got.columns == ["rule", "sym", "top", "n"]
    assert rows(got) == rows(sparkcep.match_rules(pa.Table.from_pandas(trades, preserve_index=False),
                                                  {"dip": RULES["dip"], "upper": upper}))
