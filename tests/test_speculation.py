"""MATCH_RECOGNIZE queries outside the task engine's state model on its workers: their
expensive calls made ahead (speculatively) by worker processes while the sequential engine
runs here. Random queries (every pattern form, skip mode, output mode, both modes) with an
expensive function wrapped around their column reads equal the sequential engine, errors
included, under 0, 1 and 2 workers with delays that shuffle which call is answered first; an
error in a call only the relaxed matcher made is never raised; the memo and the lookahead
stay within their bounds; a worker killed mid-query is replaced; workers that keep dying end
the query with a clear error."""

from __future__ import annotations

import bisect
import itertools
import os
import random
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.api import compile_query, run_plan
from sparkcep.tasks import speculate
from sparkcep.tasks.engine import TaskOptions, TaskStats
from sparkcep.tasks.speculate import Speculation
from tests.test_key_groups import (  # noqa: F401 - _functions is a fixture
    QUERY,
    _functions,
    _keyed,
    _result,
    _wrapped,
    kill_the_first_worker_sent_work,
)
from tests.test_properties import comparable, queries, tables
from tests.tiers import examples


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(query=queries(), table=tables(), workers=st.integers(0, 2), start=st.sampled_from(["spawn", "fork"]))
def test_random_queries_with_calls_made_ahead_equal_the_sequential_engine(query, table, workers, start):
    text, mode = query
    text = _wrapped(text)
    expected = _result(table, text, mode, strategy="sequential")
    try:
        got = comparable(_speculation(table, text, mode, workers=workers, start=start)[1].to_pylist())
    except sparkcep.SparkCepError as e:
        got = ("error", type(e).__name__, str(e))
    assert got == expected, f"{text}\nmode={mode}\n{table.to_pylist()}"




def _speculation(table, query, mode="sql", workers=2, start="spawn", cls=Speculation, **kw):
    """The speculative executor forced (under "auto" it runs queries without PARTITION BY)."""
    plan = compile_query(query, table, mode)
    spec = cls(plan, TaskOptions(workers=workers, start=start).check(), TaskStats(), measure=False,
                       background=False, **kw)
    return spec, run_plan(plan, table, spec.matcher, executor=spec)


def test_partitions_run_here_with_their_calls_made_ahead_and_keep_partition_order():
    table = _keyed(300, 40)
    spec, got = _speculation(table, QUERY)
    expected = sparkcep.match_recognize(table, QUERY, strategy="sequential")
    assert got.to_pylist() == expected.to_pylist() and expected.num_rows > 10
    st = spec.stats
    assert st.calls_used > 0 and st.calls_made >= st.calls_used and st.restarts == 0


def _coin(a, b):
    """A deterministic 'random' boolean (a hash of the arguments)."""
    time.sleep(random.random() * 0.0003)
    return (a * 2654435761 + b * 40503) % 7 < 4


SHAPES = [
    "PATTERN (A B C) DEFINE A AS x % 2 = 0, B AS coin(A.x, B.x), C AS coin(B.x, C.x)",
    "PATTERN (A B+ C) DEFINE A AS x % 2 = 0, B AS coin(A.x, B.x), C AS x % 3 = 0",
    "PATTERN (A B*? C) DEFINE B AS coin(A.x, B.x), C AS coin(A.x, C.x)",
    "PATTERN (A (B | C) D) DEFINE B AS x % 3 = 0 AND coin(A.x, B.x), C AS coin(A.x, C.x), D AS NOT coin(A.x, D.x)",
    "PATTERN (PERMUTE(A, B) C) DEFINE A AS coin(x, 1), B AS coin(x, 2), C AS coin(A.x, C.x)",
    "PATTERN (A B{1,3} C?) DEFINE A AS coin(x, 0), B AS coin(PREV(x), x), C AS coin(FIRST(B.x), C.x)",
    # the relaxed matcher does not number its matches: the frontier stays with the engine
    "PATTERN (A B+ C) DEFINE B AS coin(A.x, B.x + MATCH_NUMBER() % 2), C AS x % 3 = 0",
]
SKIPS = ["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW", "AFTER MATCH SKIP TO LAST B",
         "AFTER MATCH SKIP TO FIRST B"]
OUTPUTS = ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.sampled_from(SHAPES), skip=st.sampled_from(SKIPS), output=st.sampled_from(OUTPUTS),
       keys=st.integers(1, 4), n=st.integers(0, 80), seed=st.integers(0, 99), workers=st.integers(1, 2),
       memo=st.sampled_from([2, 16, 100_000]))
def test_speculative_calls_give_the_sequential_engines_rows_in_its_order(shape, skip, output, keys, n, seed,
                                                                          workers, memo):
    if " B" in skip and "PERMUTE" in shape:
        skip = SKIPS[0]
    rng = random.Random(seed)
    table = pa.table({"k": [rng.randrange(keys) for _ in range(n)], "ts": list(range(n)),
                      "x": [rng.randrange(1000) for _ in range(n)]})
    query = (f"PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS f, LAST(ts) AS l, CLASSIFIER() AS c "
             f"{output} {skip} {shape}")
    sparkcep.register_function("coin", _coin, "boolean", cost="expensive")
    try:
        expected = _result(table, query, "sql", strategy="sequential")
        try:
            spec, got = _speculation(table, query, workers=workers, memo_limit=memo, cls=_Frontiers)
            got = comparable(got.to_pylist())
        except sparkcep.SparkCepError as e:
            got = ("error", type(e).__name__, str(e))
    finally:
        sparkcep.unregister_function("coin")
    assert got == expected, query
    if not isinstance(got, tuple):
        assert spec.stats.calls_made >= spec.stats.calls_used
        # Each walk of the frontier went along starts the sequential engine searched, one
        # after another, with none between them: it never jumped over a start the selection
        # reaches (which would drop that start's calls) nor stopped at one it skips.
        searched = sorted(spec.searched)
        for path in spec.paths:
            assert set(path) <= spec.searched, (query, path)
            for a, b in itertools.pairwise(path):
                assert bisect.bisect_right(searched, a) == bisect.bisect_left(searched, b), (query, path)


class _Frontiers(Speculation):
    """Records each walk of the frontier (the finished starts it went along and the start it
    stopped at) and the starts the sequential engine searched."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.paths: list[list[int]] = []
        self.searched: set[int] = set()

    def at(self, start):
        super().at(start)
        starts = self._start_rows(self.current)  # WITH UNMATCHED ROWS asks about every row
        k = bisect.bisect_left(starts, start)
        if k < len(starts) and starts[k] == start:
            self.searched.add(self.position)

    def _advance(self):
        path, f = [], max(self.frontier, self.position)
        while self.follows and (s := self._start_at(f)) is not None:
            path.append(s)
            if s not in self.done:
                break
            f = self.done[s]
        super()._advance()
        if path and path[-1] == self.frontier:
            self.paths.append(path)


def _frontier_after(skip: str, done: dict, pending: dict, position: int = 0) -> Speculation:
    """A speculation over two partitions of 10 rows, starts on the even rows, told which
    searches finished (start -> where the selection goes on) and which wait for calls."""
    table = pa.table({"ts": list(range(20)), "x": list(range(20))})
    query = (f"ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH {skip} "
             "PATTERN (A B C) DEFINE A AS x % 2 = 0, B AS coin(A.x, B.x)")
    sparkcep.register_function("coin", _coin, "boolean", cost="expensive")
    try:
        spec = Speculation(compile_query(query, table, "sql"), TaskOptions(workers=0).check(), TaskStats())
    finally:
        sparkcep.unregister_function("coin")
    spec.bounds, spec._firsts = [(0, 10), (10, 20)], [0, 10]
    spec._starts = {0: [0, 2, 4, 6, 8], 1: [0, 2, 4, 6, 8]}
    spec.done, spec.pending, spec.position = dict(done), dict(pending), position
    spec._advance()
    return spec


def test_the_frontier_follows_finished_searches_as_the_selection_will():
    calls = [("k6", "coin", [6, 7])]
    # Start 0 matched up to row 3 (the selection goes on at 4); start 4 found none (on at 5):
    # the frontier stops at 6, the first start not finished, and its calls are the
    # sequential engine's next ones. Start 2 is skipped, whatever its search says.
    spec = _frontier_after("AFTER MATCH SKIP PAST LAST ROW", {0: 4, 4: 5, 2: 99}, {6: calls})
    assert spec.frontier == 6 and spec.mine == calls
    # A match that ends its partition: the next partition's first start is certain.
    assert _frontier_after("AFTER MATCH SKIP PAST LAST ROW", {0: 4, 4: 10}, {}).frontier == 10
    # Behind the sequential engine, nothing counts; past the last start it stays put.
    assert _frontier_after("AFTER MATCH SKIP PAST LAST ROW", {0: 4}, {}, position=12).frontier == 12
    assert _frontier_after("AFTER MATCH SKIP PAST LAST ROW", {18: 20}, {}, position=18).frontier == 20
    # SKIP TO NEXT ROW searches every start: the frontier is the sequential engine's.
    assert _frontier_after("AFTER MATCH SKIP TO NEXT ROW", {0: 4, 4: 5}, {}).frontier == 0


class _Bounded(Speculation):
    """Records how far the memo and the relaxed matcher went."""

    most_memo = 0
    most_ahead = 0

    def _keep(self, key, entry):
        super()._keep(key, entry)
        self.most_memo = max(self.most_memo, len(self.memo))

    def _search(self, pos, i, row):
        # The lookahead counts from where the sequential engine will be for certain.
        self.most_ahead = max(self.most_ahead, pos - max(self.position, self.frontier))
        super()._search(pos, i, row)


def test_the_memo_and_the_lookahead_stay_within_their_bounds(monkeypatch):
    monkeypatch.setattr(speculate, "LOOKAHEAD", 16)
    monkeypatch.setattr(speculate, "MAX_LOOKAHEAD", 32)
    sparkcep.register_function("coin", _coin, "boolean", cost="expensive")
    try:
        rng = random.Random(5)
        table = pa.table({"ts": list(range(400)), "x": [rng.randrange(10**6) for _ in range(400)]})
        query = "ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH " + SHAPES[0]
        plan = compile_query(query, table, "sql")
        spec = _Bounded(plan, TaskOptions(workers=2).check(), TaskStats(), measure=False, memo_limit=8,
                        background=False)
        got = run_plan(plan, table, spec.matcher, executor=spec)
        expected = sparkcep.match_recognize(table, query, strategy="sequential")
    finally:
        sparkcep.unregister_function("coin")
    assert got.equals(expected) and expected.num_rows > 10
    assert spec.most_memo <= 8
    assert 0 < spec.most_ahead <= 32
    assert spec.stats.calls_made > spec.stats.calls_used  # it did run ahead


def test_an_error_in_a_call_only_the_relaxed_matcher_made_is_not_raised():
    made = []

    def fussy(a, b):
        if a == 1:  # only from start 1, which the selection skips (inside the match 0..2)
            raise ValueError("start 1 is never searched")
        return True

    sparkcep.register_function("fussy", fussy, "boolean", cost="expensive")
    try:
        table = pa.table({"ts": list(range(6)), "x": list(range(6))})
        query = ("ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                 "PATTERN (A B C) DEFINE B AS fussy(A.x, B.x)")
        spec, got = _speculation(table, query, workers=1)
        made.append(spec.stats.calls_made)
        expected = sparkcep.match_recognize(table, query, strategy="sequential")
        assert got.to_pylist() == expected.to_pylist() == [{"f": 0}, {"f": 3}]
        # Asked for start 1's call too when it could, and still no error (a worker made it).
        assert spec.stats.calls_used == 2
        # Needed, the same failure is the sequential engine's DataError.
        bad = query.replace("SKIP PAST LAST ROW", "SKIP TO NEXT ROW")
        with pytest.raises(sparkcep.DataError) as seq:
            sparkcep.match_recognize(table, bad, strategy="sequential")
        with pytest.raises(sparkcep.DataError) as spec_err:
            sparkcep.match_recognize(table, bad, strategy="tasks", workers=2)
        assert str(spec_err.value) == str(seq.value) and "function FUSSY failed" in str(seq.value)
    finally:
        sparkcep.unregister_function("fussy")


def test_an_argument_that_cannot_be_kept_by_value_is_called_as_the_sequential_engine_calls_it():
    # An ANY function may return a value (a dict) no memo can key: the call is made when the
    # sequential engine makes it, never ahead, and the rows are the sequential engine's.
    sparkcep.register_function("as_map", lambda x: {"x": x}, "any")
    sparkcep.register_function("big", lambda m: m["x"] > 2, "boolean", cost="expensive")
    try:
        table = pa.table({"ts": list(range(12)), "x": [i % 5 for i in range(12)]})
        query = "ORDER BY ts MEASURES FIRST(ts) AS f, LAST(ts) AS l PATTERN (A B+) DEFINE B AS big(as_map(B.x))"
        expected = sparkcep.match_recognize(table, query, strategy="sequential").to_pylist()
        spec, got = _speculation(table, query, workers=1)
    finally:
        sparkcep.unregister_function("as_map")
        sparkcep.unregister_function("big")
    assert got.to_pylist() == expected and expected
    assert spec.stats.calls_made == 0


def test_a_worker_killed_mid_query_is_replaced_and_the_result_is_unchanged(monkeypatch):
    sparkcep.register_function("coin", lambda a, b: time.sleep(0.002) or _coin(a, b), "boolean", cost="expensive")
    rng = random.Random(2)
    table = pa.table({"ts": list(range(150)), "x": [rng.randrange(10**6) for _ in range(150)]})
    query = "ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH " + SHAPES[0]
    expected = sparkcep.match_recognize(table, query, strategy="sequential").to_pylist()
    killed = kill_the_first_worker_sent_work(monkeypatch)
    try:
        spec, got = _speculation(table, query)
    finally:
        sparkcep.unregister_function("coin")
    assert killed and spec.stats.restarts >= 1
    assert got.to_pylist() == expected and len(expected) > 5


def test_an_error_names_its_row_as_the_sequential_engine_does():
    def picky(x):
        if x == 2:
            raise ValueError("two is not allowed")
        return x

    sparkcep.register_function("pr", picky, "bigint", cost="expensive")
    table = _keyed(60, 4, seed=3)
    single = QUERY.replace("PARTITION BY k ", "")  # one partition: its calls made ahead
    sequential = _result(table, single, "sql", strategy="sequential")
    assert sequential[0] == "error" and "function PR failed: two is not allowed" in sequential[2]
    assert _result(table, single, "sql", strategy="tasks", workers=2) == sequential


@pytest.mark.slow  # ~10 s of restarts: full tier
def test_workers_that_keep_dying_end_the_query_with_a_clear_error():
    here = os.getpid()  # the coordinator makes some calls itself: only the workers die
    sparkcep.register_function("coin", lambda a, b: _coin(a, b) if os.getpid() == here else os._exit(3),
                               "boolean", cost="expensive")
    table = pa.table({"ts": list(range(200)), "x": [i * 7919 % 1000 for i in range(200)]})
    query = "ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH " + SHAPES[0]
    try:
        with pytest.raises(sparkcep.SparkCepError, match="task workers died"):
            _speculation(table, query, workers=1)  # workers from the first call (not started meanwhile)
    finally:
        sparkcep.unregister_function("coin")


def test_auto_makes_expensive_calls_ahead_and_keeps_cheap_ones_here(monkeypatch):
    used = []
    real = Speculation.map
    monkeypatch.setattr(Speculation, "map", lambda self, *a: used.append(self) or real(self, *a))
    sparkcep.register_function("pr", lambda x: time.sleep(0.001) or x, "bigint", cost="expensive")
    table = pa.table({"ts": list(range(120)), "price": [i * 7919 % 1000 for i in range(120)]})
    single = QUERY.replace("PARTITION BY k ", "")
    auto = sparkcep.match_recognize(table, single, workers=1)
    assert used and auto.to_pylist() == sparkcep.match_recognize(table, single, strategy="sequential").to_pylist()
    assert used[0].stats.calls_used > 0
    # A function quicker than speculate.CHEAP_CALL: after a few timed calls, the rest are
    # made here, with no route and no workers. The worker the first query kept is not even
    # taken (a thread taking it would hold the interpreter lock the cheap calls want).
    assert speculate.kept_workers() >= 1
    pools = []
    real_pool = Speculation._new_pool
    monkeypatch.setattr(Speculation, "_new_pool", lambda self: pools.append(1) or real_pool(self))
    sparkcep.register_function("pr", lambda x: x, "bigint", cost="expensive")
    used.clear()
    sparkcep.match_recognize(table, single, workers=1)
    spec = used[0]
    assert spec.local and spec._pool is None and spec.stats.calls_made <= speculate.TIMED_CALLS + 1
    assert not pools and spec._starting is None


def test_the_sequential_engine_makes_each_distinct_expensive_call_once():
    # One row's condition is evaluated once per start and per variable reaching it; the
    # functions are deterministic, so the query makes each distinct call once.
    calls = []
    sparkcep.register_function("seen", lambda v: calls.append(v) or v >= 10, "boolean", cost="expensive")
    try:
        table = pa.table({"ts": list(range(20)), "v": list(range(20))})
        query = "ORDER BY ts MEASURES FIRST(ts) AS a PATTERN (S{5,} G) DEFINE S AS seen(v), G AS NOT seen(v)"
        sparkcep.match_recognize(table, query, strategy="sequential")
        assert sorted(calls) == list(range(20))
        sparkcep.register_function("seen", lambda v: calls.append(v) or v >= 10, "boolean", cost="cheap")
        calls.clear()
        sparkcep.match_recognize(table, query, strategy="sequential")
        assert len(calls) > 20  # a cheap function is called as the engine evaluates
    finally:
        sparkcep.unregister_function("seen")


def test_a_key_holding_most_rows_has_its_calls_made_ahead(monkeypatch):
    # Key groups run a key in one process: with one key holding most rows they would gain
    # little, so auto makes the calls ahead instead; evenly spread keys keep key groups.
    from sparkcep.tasks.groups import KeyGroups

    chosen = []
    real_spec, real_groups = Speculation.map, KeyGroups.map
    monkeypatch.setattr(Speculation, "map", lambda self, *a: chosen.append("speculative") or real_spec(self, *a))
    monkeypatch.setattr(KeyGroups, "map", lambda self, *a: chosen.append("key-groups") or real_groups(self, *a))
    hot = pa.table({"k": [0 if i % 10 else i % 7 for i in range(200)], "ts": list(range(200)),
                    "price": [i * 7919 % 3 for i in range(200)]})
    for table, want in ((hot, "speculative"), (_keyed(200, 8), "key-groups")):
        chosen.clear()
        got = sparkcep.match_recognize(table, QUERY, workers=1)
        assert chosen == [want]
        assert got.to_pylist() == sparkcep.match_recognize(table, QUERY, strategy="sequential").to_pylist()


def test_kept_workers_follow_the_working_folder(tmp_path, monkeypatch):
    # A function opening a relative path: workers kept from the last query must resolve it
    # in the folder the next query runs in.
    def size(name):
        time.sleep(0.001)
        with open(name) as f:
            return len(f.read())

    sparkcep.register_function("size", size, "bigint", cost="expensive")
    try:
        query = "ORDER BY ts MEASURES FIRST(ts) AS a, COUNT(*) AS n PATTERN (A B+) DEFINE B AS size(f) > size(PREV(f))"
        table = pa.table({"ts": list(range(40)), "f": [f"{i % 5}.txt" for i in range(40)]})
        results = []
        for folder, scale in (("one", 1), ("two", 3)):
            (tmp_path / folder).mkdir()
            for i in range(5):
                (tmp_path / folder / f"{i}.txt").write_text("x" * ((i * scale) % 4))
            monkeypatch.chdir(tmp_path / folder)
            got = sparkcep.match_recognize(table, query, strategy="tasks", workers=1)
            assert got.to_pylist() == sparkcep.match_recognize(table, query, strategy="sequential").to_pylist()
            results.append(got.to_pylist())
        assert results[0] != results[1]
    finally:
        sparkcep.unregister_function("size")


def test_explain_says_which_executor_runs_and_when_calls_ahead_gain_little():
    sparkcep.register_function("pr", lambda x: x, "bigint", cost="expensive")
    try:
        hot = pa.table({"k": [0] * 9 + [1], "ts": list(range(10)), "price": list(range(10))})
        single = QUERY.replace("PARTITION BY k ", "")

        def last(table, query, **options):
            return [ln for ln in sparkcep.explain(table, query, **options).splitlines() if ln.startswith(("executor", "note"))]

        (line,) = last(hot, single)
        assert line.startswith("executor: speculative: the sequential engine here, its expensive calls (pr) made ahead")
        assert "below 0.2 ms a call is called here instead" in line
        (line,) = last(hot, QUERY)
        assert "speculative" in line and "one PARTITION BY key holds more than half the rows" in line
        (line,) = last(_keyed(40, 8), QUERY)
        assert line.startswith("executor: key-groups: whole PARTITION BY keys")
        line, note = last(hot, single.replace("PATTERN (S", "PATTERN (^ S"))
        assert note.startswith("note: the pattern begins with ^")
        (line,) = last(hot, single, strategy="sequential")
        assert line.endswith("each distinct expensive call made once")
        (line,) = last(hot, "ORDER BY ts MEASURES FIRST(ts) AS f PATTERN (A B) DEFINE B AS price > A.price")
        assert line == "executor: automaton: the sequential engine (on the compiled kernel where the query allows)"
    finally:
        sparkcep.unregister_function("pr")


def test_the_hot_key_check_takes_any_key_columns_and_only_queries_with_expensive_calls():
    from sparkcep.query import choose_executor, hot_key

    sparkcep.register_function("slow", lambda x: x is not None, "boolean", cost="expensive")
    try:
        query = ("PARTITION BY {k} ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH PATTERN (A B+) "
                 "DEFINE B AS slow(v) AND v > PREV(v)")
        hot = [0] * 8 + [1, 2, 3, 4]
        # A key named like the count's column, dictionary chunks that differ (a key named twice
        # is refused: its output would hold two columns of one name).
        chunks = pa.chunked_array([pa.array(["a"] * 6 + ["b"]).dictionary_encode(),
                                   pa.array(["a"] * 2 + ["c", "d", "e"]).dictionary_encode()])
        for column, keys, text in (("count_all", hot, "count_all"), ("k", chunks, "k")):
            table = pa.table({column: keys, "ts": list(range(12)), "v": [i % 3 for i in range(12)]})
            plan = compile_query(query.format(k=text), table, "sql")
            assert hot_key(plan, table) and choose_executor(plan, "auto", None, table) == "speculative"
            got = sparkcep.match_recognize(table, query.format(k=text), workers=1)
            assert got.to_pylist() == sparkcep.match_recognize(table, query.format(k=text),
                                                               strategy="sequential").to_pylist()
        cheap = compile_query(query.format(k="k").replace("slow(v) AND ", ""), table, "sql")
        assert not hot_key(cheap, table)  # nothing to make ahead: key groups keep the other keys busy
    finally:
        sparkcep.unregister_function("slow")


def test_the_memo_keeps_a_bounded_size_of_arguments():
    from sparkcep.tasks.calls import Memo

    memo = Memo(limit=1000, limit_bytes=10_000)
    for i in range(50):
        assert memo.call("F", len, [bytes(1000) + bytes([i])]) == 1001
    assert memo.bytes <= 10_000 and len(memo.answers) < 10
    memo.call("F", len, [bytes(5000)])  # more than a quarter of the bound: called, not kept
    assert memo.calls == 51 and memo.call("F", len, [bytes(5000)]) == 5000 and memo.calls == 52
    memo.call("F", len, ["x"])
    memo.call("F", len, ["x"])
    assert memo.hits == 1


def test_an_expensive_call_inside_an_aggregate_of_define_is_made_ahead_too():
    # The call sits in max_by's argument, kept apart from DEFINE's expression tree: the
    # plan still knows it, and the workers get the function.
    from sparkcep.tasks.from_sql import expensive_names

    sparkcep.register_function("pr", lambda x: time.sleep(0.0005) or x, "bigint", cost="expensive")
    try:
        table = pa.table({"ts": list(range(60)), "price": [i * 7 % 11 for i in range(60)],
                          "x": [i * 5 % 13 for i in range(60)]})
        query = ("ORDER BY ts MEASURES FIRST(ts) AS f, COUNT(*) AS n PATTERN (A B+) "
                 "DEFINE B AS max_by(pr(price), x) >= A.price")
        assert expensive_names(compile_query(query, table, "sql")) == ["PR"]
        spec, got = _speculation(table, query, workers=1)
        assert got.to_pylist() == sparkcep.match_recognize(table, query, strategy="sequential").to_pylist()
        assert spec.stats.calls_used > 0
    finally:
        sparkcep.unregister_function("pr")


def test_long_calls_under_auto_get_a_worker_on_every_core(monkeypatch):
    # auto starts one worker fewer than the cores; calls measured long add the last one
    # while the query runs (this process waits on pipes then, mostly).
    sizes = []
    real_close = Speculation._close

    def close(self):
        if self._pool is not None:
            sizes.append((len(self._pool.workers), self.helps))
        real_close(self)

    monkeypatch.setattr(Speculation, "_close", close)
    monkeypatch.setattr(speculate, "LONG_CALL", 0.0005)
    monkeypatch.setattr(speculate.os, "cpu_count", lambda: 2)
    sparkcep.register_function("coin", lambda a, b: time.sleep(0.001) or _coin(a, b), "boolean", cost="expensive")
    try:
        rng = random.Random(4)
        table = pa.table({"ts": list(range(1500)), "x": [rng.randrange(10**6) for _ in range(1500)]})
        query = "ORDER BY ts MEASURES FIRST(ts) AS f ONE ROW PER MATCH " + SHAPES[0]
        # Two workers kept from a query before, this module imported: the one grown is quick.
        _speculation(table.slice(0, 100), query, workers=2)
        sizes.clear()
        got = sparkcep.match_recognize(table, query)
        assert got.to_pylist() == sparkcep.match_recognize(table, query, strategy="sequential").to_pylist()
    finally:
        sparkcep.unregister_function("coin")
    assert sizes == [(2, False)]


def test_a_worker_grown_for_a_query_that_ended_is_not_kept_after_the_kept_ones_end():
    from sparkcep.tasks import workers as workers_mod
    from sparkcep.tasks.calls import Calls

    workers_mod.end_kept_workers()
    pool = workers_mod.WorkerPool(Calls(), 1)
    pool.grow()
    thread = pool._growing[0]
    pool.close()  # the query ends while the grown worker still loads
    workers_mod.end_kept_workers()
    thread.join(timeout=60)
    assert not thread.is_alive() and workers_mod._idle == []


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_a_worker_still_computing_calls_nobody_wants_is_kept_and_its_answers_read_away():
    # A query ends with speculative calls still in a worker's pipe: the worker is kept if they
    # end soon (DRAIN_SECONDS), and the next query reads their answers away before its own;
    # chunks too long for that end the worker, as before.
    from sparkcep.tasks import workers as workers_mod
    from sparkcep.tasks.calls import Calls

    workers_mod.end_kept_workers()
    try:
        pool = workers_mod.WorkerPool(Calls({"nap": _nap}), 1, depth=3)
        w = pool.workers[0]
        pool.submit(w, ["a"], [("nap", [0.005])])
        assert pool.results() == [(["a"], [(True, 0.005)])]
        pool.submit(w, ["b"], [("nap", [0.006])])
        pool.submit(w, ["c"], [("nap", [0.007])])
        pid = w.process.pid
        pool.close()
        assert [k.process.pid for k in workers_mod._idle] == [pid] and workers_mod._idle[0].stale == 2
        pool = workers_mod.WorkerPool(Calls({"nap": _nap}), 1, depth=3)
        w = pool.workers[0]
        assert w.process.pid == pid and w.stale == 0
        pool.submit(w, ["d"], [("nap", [0.001])])
        assert pool.results() == [(["d"], [(True, 0.001)])]
        # Now chunks of about a second each: too long to wait for, the worker ends.
        pool.submit(w, ["e"], [("nap", [0.3])])
        assert pool.results() == [(["e"], [(True, 0.3)])]
        pool.submit(w, ["f"], [("nap", [0.3])])
        pool.close()
        assert workers_mod._idle == []
        w.process.join(timeout=5)
        assert not w.process.is_alive()
    finally:
        workers_mod.end_kept_workers()


def test_a_start_s_tier_reads_the_unfinished_reaches_and_finished_matches_before_it():
    # Tier 2 inside an unfinished search's reach or a finished match, 1 up to NEAR rows past
    # a reach (and within the longest match from that search's start), 0 otherwise; starts
    # behind the frontier do not count.
    table = pa.table({"ts": list(range(4)), "x": list(range(4))})
    spec = Speculation(compile_query("ORDER BY ts MEASURES A.ts AS a PATTERN (A B+) DEFINE B AS B.x > A.x",
                                     table, "sql"), TaskOptions(workers=1).check(), measure=False)
    assert spec.longest is None and speculate.NEAR == 2
    spec.frontier = 10
    spec.reach = {12: 14, 5: 40}  # 5 is behind the frontier
    spec.skipping = {20: 25}
    spec.span = 35
    assert [spec._tier(p) for p in (11, 13, 14, 15, 16, 17, 21, 24, 25, 26)] == [0, 2, 2, 1, 1, 0, 2, 2, 0, 0]
    spec.longest = 4  # a match from 12 ends at row 15 at the latest
    assert [spec._tier(p) for p in (15, 16)] == [1, 0]
    spec.reach = {}
    assert spec._tier(15) == 0
    # Against its definition, on random searches, few (dict scan) and many (lookups by row).
    rng = random.Random(7)
    for _ in range(300):
        spec.frontier = rng.randrange(10)
        spec.longest = rng.choice([None, 2, 3, 6])
        starts = rng.sample(range(40), rng.randrange(0, 25))
        spec.reach = {u: u + rng.randrange(0, 6) for u in starts[::2]}
        spec.skipping = {u: u + rng.randrange(2, 8) for u in starts[1::2]}
        spec.span = max([r - u for u, r in spec.reach.items()] + [a - u for u, a in spec.skipping.items()] + [0])
        for p in range(45):
            earlier = [u for u in range(spec.frontier, p)]
            inside = any(p <= spec.reach.get(u, -1) or p < spec.skipping.get(u, -1) for u in earlier)
            past = any(u in spec.reach and spec.reach[u] < p <= spec.reach[u] + 2
                       and (spec.longest is None or p - u < spec.longest) for u in earlier)
            assert spec._tier(p) == (2 if inside else 1 if past else 0), (p, spec.frontier, spec.reach, spec.skipping)


class _Handed(Speculation):
    """Records the tier of every call handed to a worker, and whether every start had been
    searched by then."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.handed: list[tuple[int, bool]] = []
        self._sending = False

    def _send(self):
        self._sending = True
        try:
            super()._send()
        finally:
            self._sending = False

    def _pop(self):
        item = super()._pop()
        if self._sending:
            self.handed.append((item[0], self.searched_all))
        return item


def test_workers_take_risky_calls_only_once_every_start_has_been_searched():
    sparkcep.register_function("coin", _coin, "boolean", cost="expensive")
    try:
        rng = random.Random(11)
        table = pa.table({"ts": list(range(300)), "x": [rng.randrange(10**6) for _ in range(300)]})
        query = "ORDER BY ts MEASURES FIRST(ts) AS f, LAST(ts) AS l ONE ROW PER MATCH " + SHAPES[0]
        spec, got = _speculation(table, query, cls=_Handed)
        expected = sparkcep.match_recognize(table, query, strategy="sequential")
    finally:
        sparkcep.unregister_function("coin")
    assert got.equals(expected)
    risky = [(tier, tail) for tier, tail in spec.handed if tier]
    assert all(tail and tier <= speculate.TAIL_TIER for tier, tail in risky), risky
    assert risky and any(tier == 0 for tier, _ in spec.handed)
