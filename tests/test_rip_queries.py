"""RIP's appendix queries Q1–Q12: they parse, run, and equal the reference matcher."""

import pyarrow as pa
import pytest

import sparkcep
from sparkcep.api import compile_query, run_plan
from sparkcep.runtime.reference import ReferenceMatcher
from sparkcep.runtime.vm import Matcher
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades


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
    counts = {name: len(sparkcep.match_recognize(df, rip.query(name, maxlength=100))) for name in rip.NAMES}
    # Band queries with loose bounds must match on uniform prices; Q1/Q5/Q9/Q10 are rare.
    for name in ("Q2", "Q4", "Q7", "Q8", "Q11", "Q12"):
        assert counts[name] > 0, counts
