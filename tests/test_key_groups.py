"""MATCH_RECOGNIZE queries outside the task engine's state model on its workers: runs of
whole partitions (key groups) as tasks. Random queries (every pattern form, skip mode, output
mode, both modes) with an expensive function wrapped around their column reads equal the
sequential engine, errors included, under 1 and 2 workers with delays that shuffle which
group finishes first; a worker killed mid-group is replaced; workers that keep dying end the
query with a clear error."""

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
from sparkcep.api import compile_query, run_plan
from sparkcep.tasks.groups import KeyGroups, groups_of
from tests.test_properties import comparable, queries, tables
from tests.tiers import examples


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


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries(), table=tables(), workers=st.integers(1, 2), start=st.sampled_from(["spawn", "fork"]))
def test_tasks_equal_the_sequential_engine(query, table, workers, start):
    text, mode = query
    text = _wrapped(text)
    expected = _result(table, text, mode, strategy="sequential")
    got = _result(table, text, mode, strategy="tasks", workers=workers, start=start)
    assert got == expected, f"{text}\nmode={mode}\n{table.to_pylist()}"


@given(sizes=st.lists(st.integers(1, 9), max_size=30), count=st.integers(1, 12))
def test_groups_are_runs_of_whole_partitions_in_order(sizes, count):
    bounds, s = [], 0
    for n in sizes:
        bounds.append((s, s + n))
        s += n
    groups = groups_of(bounds, count)
    assert [i for g in groups for i in g] == list(range(len(bounds)))
    assert all(groups) and len(groups) <= count + 1  # each group but the last holds its share of rows


def _keyed(n: int, keys: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({"k": [rng.randrange(keys) for _ in range(n)], "ts": list(range(n)),
                     "price": [rng.randrange(3) for _ in range(n)]})


QUERY = """PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS f, COUNT(*) AS c
PATTERN (S SAME+ END) DEFINE SAME AS pr(price) = FIRST(price), END AS pr(price) <> S.price"""


def test_key_groups_run_on_the_workers_and_the_result_keeps_partition_order():
    table = _keyed(300, 40)
    plan = compile_query(QUERY, table, "sql")
    groups = KeyGroups(2)
    got = run_plan(plan, table, executor=groups)
    expected = sparkcep.match_recognize(table, QUERY, strategy="sequential")
    assert got.to_pylist() == expected.to_pylist() and expected.num_rows > 10
    assert groups.groups > 2 and groups.restarts == 0


def kill_the_first_worker_sent_work(monkeypatch) -> list[int]:
    """SIGKILL the first worker a chunk is submitted to, just after; its pid is in the list."""
    from sparkcep.tasks import workers as workers_mod

    killed: list[int] = []
    real_submit = workers_mod.WorkerPool.submit

    def submit(self, worker, chunk, wire):
        real_submit(self, worker, chunk, wire)
        if not killed:
            killed.append(worker.process.pid)
            threading.Timer(0.005, os.kill, (worker.process.pid, signal.SIGKILL)).start()

    monkeypatch.setattr(workers_mod.WorkerPool, "submit", submit)
    return killed


def test_a_worker_killed_mid_group_is_replaced_and_the_result_is_unchanged(monkeypatch):
    sparkcep.register_function("pr", lambda x: time.sleep(0.002) or x, "bigint", cost="expensive")
    table = _keyed(120, 6, seed=2)
    plan = compile_query(QUERY, table, "sql")
    expected = sparkcep.match_recognize(table, QUERY, strategy="sequential").to_pylist()
    killed = kill_the_first_worker_sent_work(monkeypatch)
    groups = KeyGroups(2)
    got = run_plan(plan, table, executor=groups)
    assert killed and groups.restarts >= 1
    assert got.to_pylist() == expected


def test_an_error_names_its_row_as_the_sequential_engine_does():
    def picky(x):
        if x == 2:
            raise ValueError("two is not allowed")
        return x

    sparkcep.register_function("pr", picky, "bigint", cost="expensive")
    table = _keyed(60, 4, seed=3)
    sequential = _result(table, QUERY, "sql", strategy="sequential")
    assert sequential[0] == "error" and "function PR failed: two is not allowed" in sequential[2]
    assert _result(table, QUERY, "sql", strategy="tasks", workers=2) == sequential


@pytest.mark.slow  # ~10 s of restarts: full tier
def test_workers_that_keep_dying_end_the_query_with_a_clear_error():
    here = os.getpid()  # only a worker dies, should a call ever be made here
    sparkcep.register_function("pr", lambda x: x if os.getpid() == here else os._exit(3), "bigint", cost="expensive")
    # Keys of equal share (no key holds most rows, which would make the calls ahead instead).
    table = pa.table({"k": [i % 2 for i in range(20)], "ts": list(range(20)), "price": [i % 3 for i in range(20)]})
    with pytest.raises(sparkcep.SparkCepError, match="task workers died"):
        sparkcep.match_recognize(table, QUERY, strategy="tasks", workers=1)


def test_auto_runs_partitioned_queries_with_expensive_calls_on_the_workers(monkeypatch):
    from sparkcep.tasks import groups as groups_mod

    used = []
    real = groups_mod.KeyGroups.map
    monkeypatch.setattr(groups_mod.KeyGroups, "map", lambda self, *a: used.append(1) or real(self, *a))
    table = _keyed(80, 5)
    auto = sparkcep.match_recognize(table, QUERY, workers=2)
    assert used and auto.to_pylist() == sparkcep.match_recognize(table, QUERY, strategy="sequential").to_pylist()
    used.clear()
    single = QUERY.replace("PARTITION BY k ", "")
    sparkcep.match_recognize(table, single)  # one partition: its calls are made ahead (test_speculation)
    assert not used
    with pytest.raises(sparkcep.SparkCepError, match="options queue apply to ALL MATCHES"):
        sparkcep.match_recognize(table, QUERY, strategy="tasks", queue="fifo")


class _Echo:
    """A worker's evaluator answering each chunk with a megabyte."""

    def tasks(self, chunk):
        return [b"x" * 1_000_000]


_LARGE = """
from sparkcep.tasks.workers import WorkerPool

class Echo:
    def tasks(self, chunk):
        return [b"x" * 1_000_000]

pool = WorkerPool(Echo(), 1)
for i, w in enumerate(pool.idle()):  # both slots of the one worker
    pool.submit(w, [i], [b"y" * 500_000])
got = []
while pool.busy:
    got += pool.results()
pool.close()
print(sorted(c[0] for c, _ in got))
"""


def test_large_chunks_and_answers_do_not_block_a_busy_worker():
    import subprocess
    import sys

    # In a child process: a pool that deadlocks must fail the test, not hang the suite.
    try:
        done = subprocess.run([sys.executable, "-c", _LARGE], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a worker busy with one large chunk and a large answer deadlocks the pool")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 1]"


_DEEP = """
from sparkcep.tasks.workers import WorkerPool

class Echo:
    def tasks(self, chunk):
        return [(len(chunk[0]), b"x" * 1_000_000)]

pool = WorkerPool(Echo(), 1, depth=3)
slots = pool.idle()
for i, (w, n) in enumerate(zip(slots, SIZES, strict=True)):
    pool.submit(w, [i], [b"y" * n])
got = []
while pool.busy:
    got += pool.results()
pool.close()
print([(c[0], a[0][0]) for c, a in got])
"""


@pytest.mark.parametrize("sizes", [[30_000] * 3, [500_000, 500_000, 100], [100, 500_000, 100]],
                         ids=["small", "large-first", "large-between"])
def test_three_chunks_a_worker_neither_block_nor_overtake(sizes):
    """The speculative executor's pool holds three chunks a worker (speculate.PIPE_DEPTH):
    two waiting in its pipe while it sends a large answer must not deadlock, and a small
    chunk behind a held-back large one must not overtake it."""
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", f"SIZES = {sizes}" + _DEEP], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a worker holding three chunks, answering a megabyte each, deadlocks the pool")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(list(enumerate(sizes)))  # each answer to its own chunk, in order


def test_a_worker_dead_while_idle_is_replaced_for_every_free_slot():
    from sparkcep.tasks.workers import WorkerPool

    pool = WorkerPool(_Echo(), 1)
    try:
        dead = pool.workers[0]
        os.kill(dead.process.pid, signal.SIGKILL)
        dead.process.join()
        slots = pool.idle()
        assert slots == [dead, dead]
        for i, w in enumerate(slots):
            pool.submit(w, [i], [i])
        got = []
        while pool.busy:
            got += pool.results()
        assert sorted(c[0] for c, _ in got) == [0, 1] and pool.restarts == 1
    finally:
        pool.close()
