"""RIP's state-based baselines SB and SB+ return exactly the sequential engine's rows: RIP's
queries and random sequences of quantified variables, every skip mode, PARTITION BY."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.errors import OptionError
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades
from tests.tiers import examples


@pytest.mark.parametrize("name", ["Q1", "Q4", "Q7", "Q2", "Q8"])
def test_rip_queries(name):
    data = pa.Table.from_pandas(stock_trades(1500, seed=5), preserve_index=False)
    clause = rip.query(name, maxlength=40)
    expected = sparkcep.match_recognize(data, clause).to_pylist()
    for strategy in ("sb", "sb+"):
        assert sparkcep.match_recognize(data, clause, strategy=strategy).to_pylist() == expected, strategy


@st.composite
def sequences(draw):
    n = draw(st.integers(1, 4))
    names = "ABCD"[:n]
    quants = [""] + [draw(st.sampled_from(["", "?", "*", "+"])) for _ in range(n - 1)]
    if draw(st.booleans()):
        quants[0] = "+"
    pattern = " ".join(v + q for v, q in zip(names, quants, strict=True))
    defines = []
    for v in names:
        k = draw(st.integers(0, 6))
        defines.append(draw(st.sampled_from([
            f"{v} AS {v}.x > {k}", f"{v} AS {v}.x < PREV({v}.x)", f"{v} AS {v}.x >= A.x", f"{v} AS TRUE",
            f"{v} AS COUNT({v}.*) < 3", f"{v} AS {v}.x <> {k}"])))
    skip = draw(st.sampled_from(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW", "ALL MATCHES"]))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    keyed = draw(st.booleans())
    maxlength = draw(st.sampled_from(["", " MAXLENGTH 3"]))
    return (("PARTITION BY k " if keyed else "") + f"ORDER BY t MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n "
            f"{rows} {skip} PATTERN ({pattern}){maxlength} DEFINE " + ", ".join(defines))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clause=sequences(), xs=st.lists(st.one_of(st.none(), st.integers(0, 7)), max_size=12),
       ks=st.lists(st.integers(0, 1), min_size=12, max_size=12), plus=st.booleans())
def test_state_based_equals_sequential(clause, xs, ks, plus):
    n = len(xs)
    t = pa.table({"t": pa.array(range(n), pa.int64()), "k": pa.array(ks[:n], pa.int64()),
                  "x": pa.array(xs, pa.int64())})
    expected = sparkcep.match_recognize(t, clause).to_pylist()
    assert sparkcep.match_recognize(t, clause, strategy="sb+" if plus else "sb").to_pylist() == expected


def test_unsupported_patterns_say_so():
    t = pa.table({"t": [1, 2], "x": [1, 2]})
    for clause in ["ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A | B) DEFINE A AS x > 0",
                   "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A? B) DEFINE A AS x > 0",
                   "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A B+?) DEFINE A AS x > 0",
                   "ORDER BY t MEASURES MATCH_NUMBER() AS m EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B) DEFINE A AS x > 0"]:
        with pytest.raises(OptionError, match="state-based.*use strategy 'sequential'") as e:
            sparkcep.match_recognize(t, clause, strategy="sb")
        assert e.value.code == "INVALID_OPTION"


def test_an_evaluation_error_names_its_row():
    t = pa.table({"t": [1, 2, 3], "x": [1, 0, 2]})
    with pytest.raises(sparkcep.DataError) as e:
        sparkcep.match_recognize(t, "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A B) DEFINE B AS 10 / B.x > 1", strategy="sb")
    assert e.value.row == 1


def test_rb_plus_on_a_process_pool_equals_sequential():
    """The process-pool backend RIP's comparison runs RB+ with (benchmark rip-sb)."""
    from sparkcep.api import compile_query, run_plan
    from sparkcep.parallel.run_batches import ProcessBackend, run_partition

    data = pa.Table.from_pandas(stock_trades(3000, seed=8), preserve_index=False)
    clause = rip.query("Q4", maxlength=30, skip="AFTER MATCH SKIP TO NEXT ROW")
    plan = compile_query(clause, data)
    backends = []

    def runner(plan, part, row_ids):
        order0 = plan.query.order_by[0].index
        b = ProcessBackend(plan, part.cols, order0, part.n, lambda r: row_ids[r], workers=2)
        backends.append(b)
        return run_partition(plan, part.n, b, 400, None)

    try:
        got = run_plan(plan, data, partition_runner=runner)
    finally:
        for b in backends:
            b.close()
    expected = sparkcep.match_recognize(data, clause)
    assert expected.num_rows > 0 and got.equals(expected)


def test_match_number_in_define_is_refused():
    t = pa.table({"t": [1, 2, 3], "x": [1, 2, 3]})
    with pytest.raises(OptionError, match="MATCH_NUMBER"):
        sparkcep.match_recognize(t, "ORDER BY t MEASURES A.x AS a PATTERN (A B) DEFINE A AS MATCH_NUMBER() = 1",
                                 strategy="sb")


@pytest.mark.parametrize("victim", ["first", "middle", "last"])
def test_a_killed_unit_ends_the_query_with_an_error_not_a_hang(victim):
    import multiprocessing
    import os
    import signal
    import threading
    import time

    def slow(x):
        time.sleep(0.002)
        return x

    sparkcep.register_function("slow", slow, "bigint")
    try:
        t = pa.table({"t": list(range(400)), "x": [i % 5 for i in range(400)]})
        clause = "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A B C) DEFINE A AS slow(A.x) >= 0, B AS slow(B.x) >= 0, C AS slow(C.x) >= 0"
        outcome: list = []

        def run():
            try:
                sparkcep.match_recognize(t, clause, strategy="sb")
                outcome.append("finished")
            except sparkcep.SparkCepError as e:
                outcome.append(e)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        units: list = []
        while len(units) < 3 and runner.is_alive():
            units = multiprocessing.active_children()
            time.sleep(0.01)
        assert len(units) == 3
        pick = {"first": 0, "middle": 1, "last": 2}[victim]
        os.kill(sorted(units, key=lambda p: p.pid)[pick].pid, signal.SIGKILL)
        runner.join(timeout=30)
        assert not runner.is_alive(), "the driver waits forever on a dead unit"
        assert isinstance(outcome[0], sparkcep.SparkCepError) and "unit died" in str(outcome[0])
    finally:
        sparkcep.unregister_function("slow")


def test_rb_plus_replaces_a_pool_whose_worker_died():
    import os
    import signal
    import threading
    import time

    from sparkcep.api import compile_query, run_plan
    from sparkcep.parallel.run_batches import ProcessBackend, run_partition

    def slow(x):
        time.sleep(0.0005)
        return x

    sparkcep.register_function("slow", slow, "double")
    try:
        data = pa.Table.from_pandas(stock_trades(1500, seed=9), preserve_index=False)
        plan = compile_query(rip.query("Q7", maxlength=20).replace("A.price", "slow(A.price)", 1), data)
        backends: list = []

        def kill_one_worker():
            while not backends or backends[0]._pool is None or not backends[0]._pool._processes:
                time.sleep(0.005)
            os.kill(next(iter(backends[0]._pool._processes)), signal.SIGKILL)

        def runner(plan, part, row_ids):
            b = ProcessBackend(plan, part.cols, plan.query.order_by[0].index, part.n, lambda r: row_ids[r], workers=2)
            backends.append(b)
            return run_partition(plan, part.n, b, 200, None)

        killer = threading.Thread(target=kill_one_worker, daemon=True)
        killer.start()
        try:
            got = run_plan(plan, data, partition_runner=runner)
        finally:
            for b in backends:
                b.close()
        killer.join(timeout=10)
        expected = run_plan(plan, data)
        assert backends[0].restarts >= 1
        assert expected.num_rows > 0 and got.equals(expected)
    finally:
        sparkcep.unregister_function("slow")
