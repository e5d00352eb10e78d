"""RIP's appendix queries Q1–Q12: they parse, run, and equal the reference matcher."""

import pyarrow as pa
import pytest

import sparkcep
from sparkcep.api import compile_query, run_plan
from sparkcep.runtime.vm import Matcher
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades
from tests.reference_matchers import ReferenceMatcher


@pytest.fixture(scope="module")
def trades():
    return pa.Table.from_pandas(stock_trades(300, seed=7), preserve_index=False)


@pytest.mark.parametrize("name", rip.NAMES)
@pytest.mark.parametrize("skip", ["", "ALL MATCHES"])
def test_rip_query_equals_reference(trades, name, skip):
    text = rip.query(name, skip=skip, maxlength=25)
    plan = compile_query(text, trades)
    got = run_plan(plan, trades, Matcher).to_pylist()
    assert got == run_plan(plan, trades, ReferenceMatcher).to_pylist()


def test_rip_queries_find_matches_on_a_longer_stream():
    df = stock_trades(5000, seed=1)
    table = pa.Table.from_pandas(df, preserve_index=False)
    counts = {name: len(sparkcep.match_recognize(df, rip.query(name, maxlength=100))) for name in rip.NAMES}
    # The counts are the reference matcher's (the Python matcher stands in for the
    # exponential reference only where the reference is too slow at this length).
    for name in rip.NAMES:
        plan = compile_query(rip.query(name, maxlength=100), table)
        factory = ReferenceMatcher if name not in ("Q1", "Q5", "Q9") else Matcher
        expected = run_plan(plan, table, factory, use_kernel=False).num_rows
        assert counts[name] == expected, (name, counts[name], expected)
    # Band queries with loose bounds must match on uniform prices; Q1/Q5/Q9/Q10 are rare.
    for name in ("Q2", "Q4", "Q7", "Q8", "Q11", "Q12"):
        assert counts[name] > 0, counts
