"""The conformance corpus on Spark: every case that expects rows (in the fast tier, every
twentieth) gives exactly those rows from a Spark DataFrame (partition strategy; the run strategy
too where it applies)."""

from __future__ import annotations

import pytest

import sparkcep
from sparkcep.api import compile_query
from tests.conformance.test_conformance import CASES, same_rows, table_of
from tests.tiers import sample

ROW_CASES = sample([c for c in CASES if c.error is None], every=20)  # fast tier: a fixed spread


def _ordered(rows: list[dict], case) -> list[dict]:
    """Spark gives matches of different partitions in no fixed order: put them in the
    expected order (a stable sort by the position of each row's partition key there)."""
    keys = [k.column for k in compile_query(case.query, table_of(case)).query.partition_by]
    if not keys:
        return rows
    rank: dict = {}
    for r in case.expected:
        rank.setdefault(tuple(repr(r[k]) for k in keys), len(rank))
    return sorted(rows, key=lambda r: rank.get(tuple(repr(r[k]) for k in keys), len(rank)))


@pytest.mark.parametrize("case", ROW_CASES, ids=[c.name for c in ROW_CASES])
def test_case_on_spark(spark, case):
    table = table_of(case)
    plan = compile_query(case.query, table)
    df = spark.createDataFrame(table)
    strategies = ["partition"]
    if not plan.define_match_number and plan.query.event_selection == "PARTITION" and not plan.query.partition_by:
        strategies.append("runs")
    for strategy in strategies:
        got = sparkcep.match_recognize(df, case.query, strategy=strategy, batch=2).toArrow().to_pylist()
        got = _ordered(got, case)
        if strategy == "runs":
            # A Spark result is a multiset: batches re-run with more rows come after the rest.
            got, want = sorted(got, key=repr), sorted(case.expected, key=repr)
        else:
            want = case.expected
        assert same_rows(got, want), f"{strategy}\n{case.query}\ngot:  {got}\nwant: {case.expected}"
