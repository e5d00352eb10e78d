"""The task engine against the brute-force SNOOP reference: random patterns (SEQ, OR, ALL,
ANY, NOT), predicates, windows, PICK and CONSUMING on small streams, under every PM
structure, queue, block size, chunk size and worker count; delays shuffle completion order;
a killed worker is replaced."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.errors import DataError
from sparkcep.tasks.engine import TaskOptions, TaskStats, run_tasks, sorted_data
from sparkcep.tasks.reference import SnoopReference
from sparkcep.tasks.task_query import compile_snoop
from tests.tiers import examples

TYPES = ["A", "B", "C", "D"]


@st.composite
def patterns(draw, names: list[str], depth: int = 0):
    """A pattern over exactly ``names`` (each once), with NOT items only inside SEQ."""
    if len(names) == 1 or depth > 2 or draw(st.integers(0, 3)) == 0 and len(names) == 1:
        return names[0] if len(names) == 1 else "SEQ(" + "; ".join(names) + ")"
    kind = draw(st.sampled_from(["SEQ", "SEQ", "OR", "ALL", "ANY"]))
    cuts = sorted(draw(st.sets(st.integers(1, len(names) - 1), max_size=len(names) - 1)))
    groups = [names[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)], strict=True)]
    if len(groups) == 1:
        groups = [names[:1], names[1:]]
    items = [draw(patterns(g, depth + 1)) for g in groups]
    if kind == "SEQ":
        return "SEQ(" + "; ".join(items) + ")"
    if kind == "ANY":
        k = draw(st.integers(1, len(items)))
        return f"ANY({k}, " + ", ".join(items) + ")"
    return f"{kind}(" + ", ".join(items) + ")"


def _predicate(draw, names: list[str]) -> str:
    v = draw(st.sampled_from(names))
    w = draw(st.sampled_from(names))
    k = draw(st.integers(-1, 4))
    return draw(st.sampled_from([
        "TRUE",
        "1 = 1",
        f"{v}.x > {k}",
        f"{v}.t = '{draw(st.sampled_from(TYPES))}'",
        f"{v}.x < {w}.x",
        f"{v}.x + {w}.x <> {k}",
        f"{v}.y IS NULL OR {v}.y > {w}.y",
        f"abs({v}.x - {w}.x) <= {k}",
        f"coalesce({v}.n, {k}) = {k}",
    ]))


@st.composite
def snoop_queries(draw):
    n = draw(st.integers(1, 4))
    names = [f"E{i}" for i in range(1, n + 1)]
    pattern = draw(patterns(names))
    preds = [_predicate(draw, names) for _ in range(draw(st.integers(0, 2)))]
    negated = None
    if pattern.startswith("SEQ(") and n >= 2 and draw(st.booleans()):
        # NOT(X) after the SEQ's first item (the generator's SEQ lists items at top level).
        items = _split_top(pattern[4:-1], ";")
        if len(items) >= 2:
            at = draw(st.integers(1, len(items) - 1))
            items.insert(at, "NOT(N)")
            pattern = "SEQ(" + "; ".join(items) + ")"
            negated = "N"
            before = [v for v in names if v in "; ".join(items[:at])]
            after_item = items[at + 1]
            readable = before + ([after_item] if after_item in names else [])
            preds.append(draw(st.sampled_from([
                "N.t = 'D'", "N.x > 2", f"N.x = {draw(st.sampled_from(readable))}.x", "N.x IS NULL"])))
    joiner = draw(st.sampled_from(["\n  ", " AND "]))
    # {extra}: where a test may add a predicate of its own.
    picks = []
    if n >= 2 and draw(st.booleans()):
        # Mostly X before Y in the pattern's order, where PICK has alternatives to choose from.
        x, y = sorted(draw(st.permutations(names))[:2], key=lambda v: (draw(st.integers(0, 4)) == 0, v))
        kind = draw(st.sampled_from(["first", "last", "each"]))
        picks.append(f" PICK {kind} {x} within {draw(st.integers(1, 9))} events from {y}")
    if joiner == " AND ":
        preds = [f"({p})" for p in preds]
    where = (" WHERE FILTER {extra}" + joiner.join(preds) if preds or picks or draw(st.booleans())
             else " {extra}")
    within = f" WITHIN {draw(st.integers(0, 6))} EVENTS" if draw(st.integers(0, 3)) == 0 else ""
    consuming = draw(st.lists(st.sampled_from(names), unique=True, max_size=n)) if draw(st.booleans()) else []
    returning = draw(st.sampled_from(["", " RETURN " + ", ".join(f"{v}.x" for v in names[:2])]))
    text = ("SELECT * FROM " + pattern + where + "".join(picks) + within + returning
            + (" CONSUMING " + ", ".join(consuming) if consuming else ""))
    return text, negated


def _split_top(text: str, sep: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


@st.composite
def streams(draw):
    n = draw(st.integers(0, 11))
    nulls = draw(st.booleans())
    return pa.table({
        "g": pa.array([draw(st.integers(0, 1)) for _ in range(n)], pa.int64()),
        "t": pa.array([draw(st.sampled_from(TYPES)) for _ in range(n)], pa.string()),
        "x": pa.array([None if nulls and draw(st.integers(0, 3)) == 0 else draw(st.integers(0, 4))
                       for _ in range(n)], pa.int64()),
        "y": pa.array([draw(st.one_of(st.none(), st.floats(0, 2))) for _ in range(n)], pa.float64()),
        "n": pa.array([None] * n, pa.int64()),  # an all-NULL column
    })


def reference_fired(tq, table, window):
    part, bounds, _ = sorted_data(tq, table)
    ref = SnoopReference(tq, part, window)
    return [ref.run(s, e) for s, e in bounds]


def engine_table(tq, table, **opts):
    return run_tasks(tq, table, TaskOptions(**opts).check())


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=snoop_queries(), table=streams(), window=st.one_of(st.none(), st.integers(1, 4)),
       pm=st.sampled_from(["tree", "tree+hash", "graph"]), queue=st.sampled_from(["fifo", "priority"]),
       block=st.integers(1, 10), chunk=st.one_of(st.none(), st.integers(1, 3)), keyed=st.booleans())
def test_engine_equals_reference(query, table, window, pm, queue, block, chunk, keyed):
    text = query[0].format(extra="")
    tq = compile_snoop(text, table, partition_by=("g",) if keyed else ())
    expected = sparkcep.snoop(table, text, partition_by=("g",) if keyed else (), strategy="reference",
                              window=window)
    got = engine_table(tq, table, workers=0, pm=pm, queue=queue, block=block, window=window, chunk=chunk)
    assert got.to_pylist() == expected.to_pylist(), text


def _delayed(a):
    # Workers finish in a shuffled order: some calls sleep a little.
    if a is not None and a % 3 == 0:
        time.sleep(random.random() * 0.002)
    return a


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=snoop_queries(), table=streams(), pm=st.sampled_from(["tree", "tree+hash", "graph"]),
       queue=st.sampled_from(["fifo", "priority"]), block=st.integers(1, 10), start=st.sampled_from(["spawn", "fork"]))
def test_worker_processes_equal_reference_with_delays(query, table, pm, queue, block, start):
    text = query[0]
    sparkcep.register_function("jitter", _delayed, "bigint", cost="expensive")
    try:
        jitter = "(jitter(E1.x) IS NULL OR TRUE)"
        if " WHERE FILTER {extra}" in text:
            delayed = text.format(extra=jitter + " AND " if not text.endswith("{extra}") and
                                  text.split("{extra}")[1].strip()[:4].upper() not in ("PICK", "WITH", "RETU", "CONS")
                                  else jitter + " ")
        else:
            delayed = text.format(extra="WHERE FILTER " + jitter + " ")
        expected = sparkcep.snoop(table, delayed, strategy="reference")
        got = sparkcep.snoop(table, delayed, strategy="tasks", workers=2, pm=pm, queue=queue, block=block, chunk=1,
                             start=start)
        assert got.to_pylist() == expected.to_pylist(), delayed
    finally:
        sparkcep.unregister_function("jitter")


def _late_boom(a, b):
    # The first failing call (A at 13, B at row 2) answers last; a later one (B at row 3) at once.
    if a == 13 and b == 9:
        time.sleep(0.3)
    if a == 13:
        raise ValueError("boom")
    return abs(a - b)


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_the_sequential_engines_error_comes_out_whichever_worker_answers_first(start):
    """MATCH_RECOGNIZE on the task engine: of the calls that fail, the one a worker answers
    first is a later one; the error is still the sequential engine's (its row, its words)."""
    sparkcep.register_function("late_boom", _late_boom, "double", cost="expensive")
    try:
        table = pa.table({"ts": list(range(6)), "v": [1, 13, 9, 10, 11, 2]})
        query = ("ORDER BY ts MEASURES A.v AS a, B.v AS b ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH "
                 "PATTERN (A B) DEFINE A AS v > 5, B AS late_boom(A.v, B.v) < 100")
        with pytest.raises(DataError) as sequential:
            sparkcep.match_recognize(table, query, strategy="sequential")
        assert sequential.value.row == 2 and "in the condition of B" in str(sequential.value)
        with pytest.raises(DataError) as tasks:
            sparkcep.match_recognize(table, query, strategy="tasks", workers=2, chunk=1, start=start)
        assert str(tasks.value) == str(sequential.value)
    finally:
        sparkcep.unregister_function("late_boom")


def _slow_eq(a, b):
    time.sleep(0.02)
    return a == b


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_killed_worker_is_replaced_and_the_result_is_unchanged(start):
    sparkcep.register_function("slow_eq", _slow_eq, "boolean", cost="expensive")
    try:
        rng = random.Random(3)
        table = pa.table({"t": [rng.choice("ABC") for _ in range(40)], "x": [rng.randint(0, 3) for _ in range(40)]})
        query = "SELECT * FROM SEQ(A; B; C) WHERE slow_eq(A.x, B.x) RETURN A.x, B.x, C.x CONSUMING A, B, C"
        expected = sparkcep.snoop(table, query, type_column="t", strategy="sequential", window=5)
        stats = TaskStats()
        tq = compile_snoop(query, table, type_column="t")
        from sparkcep.tasks import workers as workers_mod

        killed = []
        real_submit = workers_mod.WorkerPool.submit

        def submit(self, worker, chunk, wire):
            real_submit(self, worker, chunk, wire)
            if not killed and len(chunk) and self.restarts == 0:
                killed.append(worker.process.pid)
                # Kill it while it works on this chunk.
                threading.Timer(0.005, os.kill, (worker.process.pid, signal.SIGKILL)).start()

        workers_mod.WorkerPool.submit = submit
        try:
            got = run_tasks(tq, table, TaskOptions(workers=2, chunk=2, window=5, start=start).check(), stats)
        finally:
            workers_mod.WorkerPool.submit = real_submit
        assert killed and stats.restarts >= 1
        assert got.to_pylist() == expected.to_pylist()
        assert len(expected) > 0
    finally:
        sparkcep.unregister_function("slow_eq")


_POOLED_LIBRARY = """
import sys
sys.path.insert(0, {root!r})
import pyarrow as pa
import sparkcep
from tests import fork_unsafe

fork_unsafe.identity(0)  # the library's thread is running in this process now
sparkcep.register_function("lib_id", fork_unsafe.identity, "bigint", cost="expensive")
t = pa.table({{"t": list("ABCABCAB"), "x": [1, 2, 3, 1, 2, 3, 0, 5]}})
q = "SELECT * FROM SEQ(A; B) WHERE lib_id(A.x) < lib_id(B.x) RETURN A.x AS a, B.x AS b CONSUMING A, B"
got = sparkcep.snoop(t, q, type_column="t", strategy="tasks", workers=2).to_pylist()
assert got == sparkcep.snoop(t, q, type_column="t", strategy="reference").to_pylist(), got
mr = sparkcep.match_recognize(t, "PARTITION BY t ORDER BY x MEASURES LAST(x) AS l ONE ROW PER MATCH "
                              "PATTERN (A B) DEFINE B AS lib_id(B.x) > lib_id(A.x)", strategy="tasks", workers=2)
assert mr.to_pylist() == sparkcep.match_recognize(t, "PARTITION BY t ORDER BY x MEASURES LAST(x) AS l ONE ROW PER "
    "MATCH PATTERN (A B) DEFINE B AS lib_id(B.x) > lib_id(A.x)", strategy="sequential").to_pylist()
print(len(got))
"""


def test_workers_start_clean_so_a_library_thread_pool_in_the_caller_does_not_hang_them():
    # A forked worker would wait forever on the library's thread, which a fork does not copy
    # (as OpenCV's and PyTorch's pools do); clean workers start the library afresh.
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    try:
        done = subprocess.run([sys.executable, "-c", _POOLED_LIBRARY.format(root=root)], capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a worker hung on a function whose library runs a thread pool in the caller")
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0


def test_a_query_the_workers_cannot_take_is_a_clear_error():
    table = pa.table({"t": list("ABAB"), "x": [1, 2, 3, 4]})
    query = "SELECT * FROM SEQ(A; B) WHERE f(A.x, B.x) RETURN A.x AS a"
    lock = threading.Lock()  # a closure over a lock does not pickle
    sparkcep.register_function("f", lambda a, b: lock is not None and a < b, "boolean", cost="expensive")
    try:
        with pytest.raises(sparkcep.SparkCepError, match="cannot be sent to task workers.*start='fork'"):
            sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=1)
        forked = sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=1, start="fork")
        assert forked.to_pylist() == sparkcep.snoop(table, query, type_column="t", strategy="sequential").to_pylist()
        # A function from a module only this process has: the worker cannot import it.
        import types

        def f(a, b):
            return a < b

        mod = types.ModuleType("sparkcep_test_only_here")
        f.__module__, f.__qualname__, mod.f = mod.__name__, "f", f
        sys.modules[mod.__name__] = mod
        try:
            sparkcep.register_function("f", mod.f, "boolean", cost="expensive")
            with pytest.raises(sparkcep.SparkCepError, match="could not take the query: .*sparkcep_test_only_here"):
                sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2)
            # The pool is fine afterwards.
            sparkcep.register_function("f", lambda a, b: a < b, "boolean", cost="expensive")
            again = sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2)
            assert again.to_pylist() == forked.to_pylist()
        finally:
            del sys.modules[mod.__name__]
    finally:
        sparkcep.unregister_function("f")


def test_options_are_checked():
    table = pa.table({"x": [1]})
    for bad in ({"pm": "heap"}, {"queue": "lifo"}, {"block": 0}, {"window": 0}, {"workers": -2},
                {"strategy": "runs"}, {"chunk": 0}):
        with pytest.raises(sparkcep.SparkCepError):
            sparkcep.snoop(table, "SELECT * FROM E1", **bad)


@settings(max_examples=examples(200), deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 7)), max_size=40),
       kind=st.sampled_from(["tree", "tree+hash", "graph"]))
def test_structures_drop_exactly_the_partial_matches_holding_a_consumed_event(ops, kind):
    """Each structure, after any mix of new partial matches and consumptions, keeps exactly
    the partial matches that hold no consumed event (the merger would discard the others)."""
    from sparkcep.tasks.partial import STRUCTURES

    s = STRUCTURES[kind]()
    made = [s.root]
    consumed: set[int] = set()
    for grow, row in ops:
        if grow and row not in consumed:  # the raw event list offers valid events only
            parents = [p for p in made if s.is_alive(p) and p.last < row]
            if parents:
                parent = parents[row % len(parents)]
                child = parent.extend(len(parent.rows), row)
                s.add(child)
                made.append(child)
        elif row not in consumed:
            consumed.add(row)
            s.consume(row)
        if row % 3 == 0:
            s.clean()
    live = {id(p) for p in s.live()}
    for p in made:
        clean = not (set(p.rows) & consumed)
        assert (id(p) in live) == clean, (p.rows, consumed)


# ------------------------------------------------------------------ an oracle written blind
def _pattern_text(p) -> str:
    if isinstance(p, str):
        return p
    if p[0] == "NOT":
        return f"NOT({p[1]})"
    if p[0] == "SEQ":
        return "SEQ(" + "; ".join(_pattern_text(x) for x in p[1:]) + ")"
    if p[0] == "ANY":
        return f"ANY({p[1]}, " + ", ".join(_pattern_text(x) for x in p[2:]) + ")"
    return f"{p[0]}(" + ", ".join(_pattern_text(x) for x in p[1:]) + ")"


@st.composite
def oracle_patterns(draw, names: list[str], depth: int = 0):
    if len(names) == 1:
        return names[0]
    kind = draw(st.sampled_from(["SEQ", "SEQ", "OR", "ALL", "ANY"]))
    cuts = sorted(draw(st.sets(st.integers(1, len(names) - 1), min_size=1, max_size=len(names) - 1)))
    groups = [names[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)], strict=True)]
    items = [draw(oracle_patterns(g, depth + 1)) for g in groups]
    if kind == "ANY":
        return ("ANY", draw(st.integers(1, len(items))), *items)
    return (kind, *items)


def _sql_gt(a, b):
    return None if a is None or b is None else a > b


@st.composite
def oracle_cases(draw):
    n = draw(st.integers(1, 4))
    names = [f"E{i}" for i in range(1, n + 1)]
    pattern = draw(oracle_patterns(names))
    constraints = []
    for _ in range(draw(st.integers(0, 2))):
        v, w = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        k, typ = draw(st.integers(0, 4)), draw(st.sampled_from(TYPES))
        constraints.append(draw(st.sampled_from([
            ("TRUE", (), lambda b: True),
            (f"{v}.x > {k}", (v,), lambda b, v=v, k=k: _sql_gt(b[v]["x"], k)),
            (f"{v}.t = '{typ}'", (v,), lambda b, v=v, t=typ: b[v]["t"] == t),
            (f"{v}.x < {w}.x", tuple({v, w}), lambda b, v=v, w=w: _sql_gt(b[w]["x"], b[v]["x"])),
        ])))
    if isinstance(pattern, tuple) and pattern[0] == "SEQ" and draw(st.booleans()):
        at = draw(st.integers(2, len(pattern) - 1))
        before = [x for x in names if x in _pattern_text(pattern[1:at])]
        pattern = (*pattern[:at], ("NOT", "N"), *pattern[at:])
        u = draw(st.sampled_from(before))
        constraints.append(draw(st.sampled_from([
            ("N.t = 'D'", ("N",), lambda b: b["N"]["t"] == "D"),
            (f"N.x = {u}.x", ("N", u), lambda b, u=u: None if b["N"]["x"] is None or b[u]["x"] is None
             else b["N"]["x"] == b[u]["x"]),
        ])))
    picks = []
    if n >= 2 and draw(st.integers(0, 3)):
        x, y = sorted(draw(st.permutations(names))[:2])
        picks.append((draw(st.sampled_from(["first", "last", "first", "last", "each"])), x, y,
                      draw(st.integers(1, 8))))
    within = draw(st.one_of(st.none(), st.none(), st.integers(0, 6)))
    consuming = draw(st.lists(st.sampled_from(names), unique=True)) if draw(st.booleans()) else []
    text = "SELECT * FROM " + _pattern_text(pattern)
    if constraints or picks:
        text += " WHERE FILTER " + "\n  ".join(c[0] for c in constraints)
        text += "".join(f"\n PICK {k} {x} within {d} events from {y}" for k, x, y, d in picks)
    if within is not None:
        text += f" WITHIN {within} EVENTS"
    text += " RETURN " + ", ".join(f"{v}.r AS {v}" for v in names)
    if consuming:
        text += " CONSUMING " + ", ".join(consuming)
    return text, pattern, [(vs, fn) for _, vs, fn in constraints], picks, within, consuming


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=oracle_cases(), table=streams(), window=st.one_of(st.none(), st.integers(1, 4)),
       pm=st.sampled_from(["tree", "tree+hash", "graph"]), queue=st.sampled_from(["fifo", "priority"]),
       block=st.integers(1, 6))
def test_engine_equals_an_oracle_written_from_the_readme_alone(case, table, window, pm, queue, block):
    from tests.snoop_oracle import oracle

    text, pattern, constraints, picks, within, consuming = case
    table = table.append_column("r", pa.array(range(table.num_rows), pa.int64()))
    events = table.to_pylist()
    expected = oracle(events, pattern, constraints, picks=picks, within=within, window=window, consuming=consuming)
    got = sparkcep.snoop(table, text, strategy="sequential", window=window, pm=pm, queue=queue, block=block)
    names = [c for c in got.column_names if c.startswith("E")]
    rows = [{v: r[v] for v in names if r[v] is not None} for r in got.to_pylist()]
    assert rows == expected, text


# ------------------------------------------------------------------ MATCH_RECOGNIZE on the task engine
@st.composite
def any_match_queries(draw):
    n = draw(st.integers(1, 4))
    names = [f"V{i}" for i in range(n)]
    defines = []
    for i, v in enumerate(names):
        earlier = names[:i]
        k = draw(st.integers(0, 4))
        options = [f"{v}.x > {k}", f"x <> {k}", f"{v}.t = '{draw(st.sampled_from(TYPES))}'", "TRUE", f"{v}.y IS NULL"]
        if earlier:
            u = draw(st.sampled_from(earlier))
            options += [f"{v}.x >= {u}.x", f"x + {u}.x <> {k}"]
        if draw(st.integers(0, 3)):
            defines.append(f"{v} AS " + draw(st.sampled_from(options)))
    within = f" WITHIN {draw(st.integers(0, 8))}" if draw(st.booleans()) else ""
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    keyed = "PARTITION BY g " if draw(st.booleans()) else ""
    return (f"{keyed}ORDER BY o MEASURES MATCH_NUMBER() AS m, FIRST(x) AS fx, LAST(x) AS lx, CLASSIFIER() AS c "
            f"{rows} ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH PATTERN ({' '.join(names)}){within}"
            + (" DEFINE " + ", ".join(defines) if defines else ""))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clause=any_match_queries(), table=streams(), block=st.integers(1, 6),
       pm=st.sampled_from(["tree", "tree+hash", "graph"]))
def test_match_recognize_on_the_task_engine_equals_the_sequential_engine(clause, table, block, pm):
    table = table.append_column("o", pa.array(range(table.num_rows), pa.int64()))
    expected = sparkcep.match_recognize(table, clause).to_pylist()
    got = sparkcep.match_recognize(table, clause, strategy="tasks", workers=0, block=block, pm=pm).to_pylist()
    assert got == expected, clause


def test_an_expensive_function_routes_match_recognize_to_the_task_engine(monkeypatch):
    from sparkcep.tasks import from_sql

    calls = []
    real = from_sql.run_sql_on_tasks
    monkeypatch.setattr(from_sql, "run_sql_on_tasks", lambda *a, **k: calls.append(1) or real(*a, **k))
    sparkcep.register_function("close_to", lambda a, b: abs(a - b) <= 1, "boolean", cost="expensive")
    try:
        t = pa.table({"o": list(range(8)), "x": [1, 5, 2, 6, 3, 9, 2, 1]})
        q = ("ORDER BY o MEASURES A.x AS a, B.x AS b ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH "
             "PATTERN (A B) DEFINE B AS close_to(A.x, B.x)")
        got = sparkcep.match_recognize(t, q, workers=2)
        assert calls and len(got) > 3
        assert got.to_pylist() == sparkcep.match_recognize(t, q, strategy="sequential").to_pylist()
        # A query outside the state model runs its expensive calls as tasks (tests/test_task_calls.py).
        q2 = "ORDER BY o MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS close_to(PREV(B.x), B.x)"
        assert sparkcep.match_recognize(t, q2).num_rows >= 1
        assert (sparkcep.match_recognize(t, q2, strategy="tasks", workers=1).to_pylist()
                == sparkcep.match_recognize(t, q2).to_pylist())
        with pytest.raises(sparkcep.SparkCepError, match="options block apply to ALL MATCHES"):
            sparkcep.match_recognize(t, q2, strategy="tasks", block=4)
        with pytest.raises(sparkcep.SparkCepError, match="belong to strategy 'tasks'"):
            sparkcep.match_recognize(t, q2, strategy="sequential", workers=2)
    finally:
        sparkcep.unregister_function("close_to")


def test_a_worker_that_dies_while_idle_is_replaced():
    from sparkcep.tasks.engine import sorted_data
    from sparkcep.tasks.evaluate import Evaluator
    from sparkcep.tasks.workers import WorkerPool

    table = pa.table({"x": [1, 2, 3]})
    tq = compile_snoop("SELECT * FROM SEQ(A; B) WHERE A.x < B.x", table)
    part, _, _ = sorted_data(tq, table)
    pool = WorkerPool(Evaluator(tq, part), 1)
    try:
        w = pool.workers[0]
        os.kill(w.process.pid, signal.SIGKILL)
        w.process.join()
        pool.submit(w, ["chunk"], [((0,), (0,), 1, 1), ((0,), (1,), 1, 0)])
        assert pool.results() == [(["chunk"], [True, False])]
        assert pool.restarts == 1
    finally:
        pool.close()


def test_kept_workers_that_ended_between_queries_are_started_afresh_and_a_fork_does_not_share_them():
    from sparkcep.tasks import workers as workers_mod

    table = pa.table({"t": list("ABAB"), "x": [1, 2, 3, 4]})
    query = "SELECT * FROM SEQ(A; B) WHERE lt(A.x, B.x) RETURN A.x AS a, B.x AS b"
    sparkcep.register_function("lt", lambda a, b: a < b, "boolean", cost="expensive")
    try:
        expected = sparkcep.snoop(table, query, type_column="t", strategy="sequential").to_pylist()
        assert sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2).to_pylist() == expected
        kept = list(workers_mod._idle)
        assert kept
        for w in kept:
            os.kill(w.process.pid, signal.SIGKILL)
            w.process.join()
        stats = TaskStats()
        got = sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2, stats=stats)
        assert got.to_pylist() == expected and stats.restarts == 0
        pid = os.fork()
        if pid == 0:  # the child starts with no kept workers of its own
            os._exit(0 if not workers_mod._idle else 1)
        assert os.waitpid(pid, 0)[1] == 0
        assert workers_mod._idle
    finally:
        sparkcep.unregister_function("lt")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="workers fork from a template only where pidfds exist")
def test_clean_workers_fork_from_the_template_registering_an_expensive_function_starts(tmp_path, monkeypatch):
    # Registering an expensive function starts the template; a query's clean workers are its
    # children, find modules added to the import path since, and the answer is the sequential
    # engine's. A template that has ended is started again.
    from sparkcep.tasks import workers as workers_mod

    workers_mod.end_kept_workers()
    workers_mod.end_template()
    (tmp_path / "late_module.py").write_text("def lt(a, b):\n    return a < b\n")
    sparkcep.register_function("lt", lambda a, b: a < b, "boolean", cost="expensive")
    try:
        template = workers_mod._template
        assert template is not None and template.popen.poll() is None
        monkeypatch.syspath_prepend(str(tmp_path))  # after the template started
        import late_module

        sparkcep.register_function("lt", late_module.lt, "boolean", cost="expensive")
        assert workers_mod._template is template  # one template for every registration
        table = pa.table({"t": list("ABABAB"), "x": [1, 2, 3, 4, 0, 9]})
        query = "SELECT * FROM SEQ(A; B) WHERE lt(A.x, B.x) RETURN A.x AS a, B.x AS b"
        expected = sparkcep.snoop(table, query, type_column="t", strategy="sequential").to_pylist()
        assert expected
        for _ in range(2):
            assert sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2).to_pylist() == expected
            kept = list(workers_mod._idle)
            assert kept and all(_parent(w.process.pid) == workers_mod._template.popen.pid for w in kept)
            workers_mod.end_kept_workers()
            workers_mod._template.popen.kill()  # the next query's workers start another template
            workers_mod._template.popen.wait()
    finally:
        sparkcep.unregister_function("lt")
        workers_mod.end_kept_workers()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="workers fork from a template only where pidfds exist")
def test_the_template_starts_only_where_queries_run_and_a_failed_fork_spawns_on_a_fresh_socket(monkeypatch):
    import pathlib as pathlib_

    from sparkcep.tasks import workers as workers_mod

    workers_mod.end_kept_workers()
    workers_mod.end_template()
    # Inside a task worker (a module registering functions is imported there too): no template.
    monkeypatch.setenv(workers_mod.IN_WORKER, "1")
    workers_mod.prestart()
    assert workers_mod._template is None
    monkeypatch.delenv(workers_mod.IN_WORKER)
    # An import path holding a Path (the import system skips such entries) is no error.
    monkeypatch.setattr(sys, "path", [*sys.path, pathlib_.Path("/nowhere")])
    sparkcep.register_function("lt", lambda a, b: a < b, "boolean", cost="expensive")
    try:
        assert workers_mod._template is not None
        # A template that cannot give a worker: each worker starts its own interpreter, on a
        # socket no forked worker holds.
        monkeypatch.setattr(workers_mod._Template, "fork", lambda self, fd: None)
        table = pa.table({"t": list("ABABAB"), "x": [1, 2, 3, 4, 0, 9]})
        query = "SELECT * FROM SEQ(A; B) WHERE lt(A.x, B.x) RETURN A.x AS a, B.x AS b"
        expected = sparkcep.snoop(table, query, type_column="t", strategy="sequential").to_pylist()
        assert sparkcep.snoop(table, query, type_column="t", strategy="tasks", workers=2).to_pylist() == expected
        kept = list(workers_mod._idle)
        assert kept and all(_parent(w.process.pid) == os.getpid() for w in kept)
    finally:
        sparkcep.unregister_function("lt")
        workers_mod.end_kept_workers()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds exist on Linux only")
def test_a_forked_worker_is_watched_through_a_pidfd_above_1024():
    import resource

    from sparkcep.tasks.workers import _Forked

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("this machine allows fewer than 1 200 open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fd = os.pidfd_open(child.pid)
        high = os.dup2(fd, 1100)
        os.close(fd)
        w = _Forked(child.pid, high)
        assert w.is_alive()
        w.kill()
        w.join(5)
        assert not w.is_alive()
        w.close()
    finally:
        child.kill()
        child.wait()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
