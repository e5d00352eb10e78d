"""MATCH_RECOGNIZE queries outside the task engine's state model on its workers: the
sequential engine with partitions side by side and calls of expensive functions as tasks.
Random queries (every pattern form, skip mode, output mode, both modes) with an expensive
function wrapped around their column reads equal the sequential engine, errors included,
under every worker count and chunk size with delays that shuffle completion order; a worker
killed mid-chunk is replaced; workers that keep dying end the query with a clear error."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.api import compile_query
from tests.test_properties import comparable, queries, tables


def _slow_id(x):
    time.sleep(random.random() * 0.0005)  # shuffles which worker answers first
    return x


@pytest.fixture(autouse=True)
def _functions():
    sparkcep.register_function("pr", _slow_id, "bigint", cost="expensive")
    yield
    sparkcep.unregister_function("pr")


def _wrapped(text: str) -> str:
    """Every read of ``price`` (qualified or not) goes through the expensive ``pr``."""
    text = re.sub(r"\b([ABCU])\.price\b", r"pr(\1.price)", text)
    return re.sub(r"(?<![.\w])price\b", "pr(price)", text)


def _result(table, text, mode, **options):
    try:
        return comparable(sparkcep.match_recognize(table, text, mode=mode, **options).to_pylist())
    except sparkcep.SparkCepError as e:
        return ("error", type(e).__name__, str(e))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries(), table=tables(), workers=st.integers(1, 2), chunk=st.sampled_from([None, 1, 3]))
def test_tasks_equal_the_sequential_engine(query, table, workers, chunk):
    text, mode = query
    text = _wrapped(text)
    expected = _result(table, text, mode, strategy="sequential")
    got = _result(table, text, mode, strategy="tasks", workers=workers, chunk=chunk)
    assert got == expected, f"{text}\nmode={mode}\n{table.to_pylist()}"


def _keyed(n: int, keys: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({"k": [rng.randrange(keys) for _ in range(n)], "ts": list(range(n)),
                     "price": [rng.randrange(3) for _ in range(n)]})


QUERY = """PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS f, COUNT(*) AS c
PATTERN (S SAME+ END) DEFINE SAME AS pr(price) = FIRST(price), END AS pr(price) <> S.price"""


def test_the_calls_run_on_the_workers_and_the_result_keeps_partition_order():
    from sparkcep.tasks.calls import run_plan_on_calls

    table = _keyed(300, 12)
    plan = compile_query(QUERY, table, "sql")
    stats: dict = {}
    got = run_plan_on_calls(plan, table, 2, None, stats)
    expected = sparkcep.match_recognize(table, QUERY, strategy="sequential")
    assert got.to_pylist() == expected.to_pylist() and expected.num_rows > 10
    assert stats["calls"] >= 300 and stats["restarts"] == 0


def test_a_worker_killed_mid_chunk_is_replaced_and_the_result_is_unchanged(monkeypatch):
    from sparkcep.tasks import workers as workers_mod
    from sparkcep.tasks.calls import run_plan_on_calls

    sparkcep.register_function("pr", lambda x: time.sleep(0.003) or x, "bigint", cost="expensive")
    table = _keyed(120, 6, seed=2)
    plan = compile_query(QUERY, table, "sql")
    expected = sparkcep.match_recognize(table, QUERY, strategy="sequential").to_pylist()
    killed: list[int] = []
    real_submit = workers_mod.WorkerPool.submit

    def submit(self, worker, chunk, wire):
        real_submit(self, worker, chunk, wire)
        if not killed and len(chunk) >= 2:
            killed.append(worker.process.pid)
            threading.Timer(0.002, os.kill, (worker.process.pid, signal.SIGKILL)).start()

    monkeypatch.setattr(workers_mod.WorkerPool, "submit", submit)
    stats: dict = {}
    got = run_plan_on_calls(plan, table, 2, 4, stats)
    assert killed and stats["restarts"] >= 1
    assert got.to_pylist() == expected


def test_an_error_in_a_function_names_its_row_as_the_sequential_engine_does():
    def picky(x):
        if x == 2:
            raise ValueError("two is not allowed")
        return x

    sparkcep.register_function("pr", picky, "bigint", cost="expensive")
    table = _keyed(60, 4, seed=3)
    sequential = _result(table, QUERY, "sql", strategy="sequential")
    assert sequential[0] == "error" and "function PR failed: two is not allowed" in sequential[2]
    assert _result(table, QUERY, "sql", strategy="tasks", workers=2) == sequential


def test_workers_that_keep_dying_end_the_query_with_a_clear_error():
    sparkcep.register_function("pr", lambda x: os._exit(3), "bigint", cost="expensive")
    table = _keyed(20, 2)
    with pytest.raises(sparkcep.SparkCepError, match="task workers died"):
        sparkcep.match_recognize(table, QUERY, strategy="tasks", workers=1)


def test_auto_runs_partitioned_queries_with_expensive_calls_on_the_workers(monkeypatch):
    from sparkcep.tasks import calls

    used = []
    real = calls.run_plan_on_calls
    monkeypatch.setattr(calls, "run_plan_on_calls", lambda *a, **k: used.append(1) or real(*a, **k))
    table = _keyed(80, 5)
    auto = sparkcep.match_recognize(table, QUERY, workers=2)
    assert used and auto.to_pylist() == sparkcep.match_recognize(table, QUERY, strategy="sequential").to_pylist()
    used.clear()
    single = QUERY.replace("PARTITION BY k ", "")
    sparkcep.match_recognize(table, single)  # one partition: nothing to spread, runs as usual
    assert not used
