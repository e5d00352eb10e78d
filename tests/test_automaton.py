"""Static patterns as a deterministic automaton (runtime.automaton) against the thread-list
kernel, the Python matcher and the brute-force oracle: random patterns over row-local
conditions (quantifiers greedy and reluctant, alternation, optional and empty parts), both
skip modes the automaton serves, ONE ROW and ALL ROWS PER MATCH (unmatched rows, empty
matches), measures from spans or labels, MAXLENGTH, WITHIN, PARTITION BY and NULLs. Each generated
query is one the automaton must take, so a test fails if the path stops being used; a
pattern whose determinisation explodes falls back to the thread-list kernel."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sparkcep.analysis.analyzer import analyze
from sparkcep.api import compile_query, run_local, run_plan
from sparkcep.data.ingest import schema_of
from sparkcep.errors import DataError
from sparkcep.language.parser import parse
from sparkcep.runtime import automaton, fast
from sparkcep.runtime.vm import Matcher
from tests.oracle import oracle
from tests.test_properties import comparable
from tests.tiers import examples

EXAMPLES = examples(400)
VARS = ("A", "B", "C")
QUANTIFIERS = ("", "", "*", "+", "?", "*?", "+?", "??")


@st.composite
def regex(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["var", "var", "concat", "alt"] if depth < 3 else ["var"]))
    if kind == "var":
        return draw(st.sampled_from(VARS)) + draw(st.sampled_from(QUANTIFIERS))
    parts = draw(st.lists(regex(depth + 1), min_size=2, max_size=3))
    inner = " ".join(parts) if kind == "concat" else " | ".join(parts)
    return f"({inner}){draw(st.sampled_from(QUANTIFIERS))}"


CONDITIONS = ("v < {k}", "v > {k}", "v = {k}", "v >= PREV(v)", "v IS NULL", "v <> {k} OR v IS NULL", "TRUE")


@st.composite
def static_queries(draw) -> str:
    pattern = draw(regex())
    used = [v for v in VARS if v in pattern]
    defines = ", ".join(f"{v} AS " + draw(st.sampled_from(CONDITIONS)).format(k=draw(st.integers(0, 3)))
                        for v in used if draw(st.booleans()) or v == used[0])
    bounds = ""
    if draw(st.booleans()):
        bounds += f" WITHIN {draw(st.integers(0, 4))}"
    if draw(st.booleans()):
        bounds += f" MAXLENGTH {draw(st.integers(1, 6))}"
    skip = draw(st.sampled_from(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW", ""]))
    partition = "PARTITION BY g " if draw(st.booleans()) else ""
    # Measures read from the span alone (the automaton's matches go straight to columns), or
    # from the labels (the automaton follows them back through its states).
    measures = draw(st.sampled_from([
        "MATCH_NUMBER() AS m, COUNT(*) AS c, FIRST(ts) AS f, LAST(v) AS l",
        f"CLASSIFIER() AS k, COUNT({used[0]}.*) AS n, SUM(v) AS s, LAST({used[-1]}.ts) AS t",
    ]))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
                                 "ALL ROWS PER MATCH OMIT EMPTY MATCHES"]))
    return (f"{partition}ORDER BY ts MEASURES {measures} {rows} {skip} PATTERN ({pattern}){bounds} "
            f"DEFINE {defines}")


@st.composite
def tables(draw) -> pa.Table:
    n = draw(st.integers(0, 30))
    return pa.table({"ts": pa.array(range(n), pa.int64()),
                     "g": pa.array(draw(st.lists(st.sampled_from(["a", "b", None]), min_size=n, max_size=n))),
                     "v": pa.array(draw(st.lists(st.one_of(st.integers(0, 3), st.none()), min_size=n, max_size=n)),
                                   pa.int64())})


def _rows(run):
    try:
        return sorted(map(repr, comparable(run().to_pylist())))
    except DataError as e:
        return ("error", str(e))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(static_queries(), tables())
def test_automaton_equals_kernel_python_and_oracle(text, table):
    plan = compile_query(text, table)
    ran = []
    window, labels = automaton.Automaton.window, automaton.Automaton.labels
    partitions = automaton.Automaton.partitions

    def spy(self, *args):
        got = window(self, *args)
        ran.append(got is not None)
        if got is not None:
            spied.append(got)
        return got

    def spy_all(self, *args):  # many partitions at once (labels read partition by partition)
        got = partitions(self, *args)
        ran.append(got is not None)
        if got is not None:
            found.update(zip(got[0].tolist(), got[1].tolist(), strict=True))
        return got

    spied: list = []
    found: set = set()  # (start, end) of the matches over many partitions
    followed: list = []  # matches whose labels the automaton followed back

    def labels_of(self, classes, starts, ends):
        # Only the automaton's own matches are followed back (their labels are compared
        # with the thread-list kernel's below, through CLASSIFIER() and labelled measures).
        pairs = set(zip(starts.tolist(), ends.tolist(), strict=True))
        assert pairs <= found | {p for s, e, *_ in spied for p in zip(s.tolist(), e.tolist(), strict=True)}, text
        followed.extend(pairs)
        return labels(self, classes, starts, ends)

    def no_kernel_labels(*args):
        raise AssertionError(f"the thread-list kernel read labels the automaton follows back\n{text}")

    with mock.patch.object(automaton.Automaton, "window", spy), mock.patch.object(fast.kernel, "labels_at",
                                                                                     no_kernel_labels), \
            mock.patch.object(automaton.Automaton, "partitions", spy_all), \
            mock.patch.object(automaton.Automaton, "labels", labels_of):
        got = _rows(lambda: run_local(table, text))
    # A plain sequence of variables runs as a column scan instead (KernelMatcher._fixed_starts);
    # a loop whose body may match nothing carries a counter, which a state cannot hold.
    holds = automaton.Automaton.for_plan(plan, plan.query.skip_mode) is not None
    assert holds or plan.program.slots, text
    assert table.num_rows == 0 or plan.fixed is not None or not holds or (ran and all(ran)), \
        f"the automaton did not run\n{text}"
    with mock.patch.object(automaton, "ENABLED", False):
        assert got == _rows(lambda: run_local(table, text)), f"thread-list kernel\n{text}\n{table.to_pylist()}"
    assert got == _rows(lambda: run_plan(plan, table, Matcher, use_kernel=False)), f"python\n{text}"
    q = analyze(parse(text), schema_of(table))
    assert got == _rows(lambda: pa.Table.from_pylist(oracle(q, table))) or (not oracle(q, table) and got == []), \
        f"oracle\n{text}\n{table.to_pylist()}"


def test_run_stats_name_the_automaton():
    table = pa.table({"ts": list(range(20)), "v": [i % 4 for i in range(20)]})
    stats: dict = {}
    run_local(table, "ORDER BY ts MEASURES COUNT(*) AS c PATTERN (A B+ C) DEFINE A AS v = 0, B AS v = 1 OR v = 2, "
                     "C AS v = 3", stats=stats)
    assert stats["matcher"] == "automaton"


def test_exploding_determinisation_falls_back_to_the_thread_list_kernel():
    # (A|B)* A (A|B){12}: the automaton must remember the last 13 classes, 2**13 states.
    text = ("ORDER BY ts MEASURES COUNT(*) AS c, FIRST(ts) AS f ONE ROW PER MATCH PATTERN ((A | B)* A"
            + " (A | B)" * 12 + ") DEFINE A AS v = 1, B AS v = 0")
    values = [(i * 7919 // 3) % 2 for i in range(400)]
    table = pa.table({"ts": list(range(400)), "v": values})
    plan = compile_query(text, table)
    machine = automaton.Automaton.for_plan(plan, "PAST_LAST")
    assert machine is not None
    import numpy as np

    masks = np.array([[v == 1 for v in values], [v == 0 for v in values]])
    assert machine.classes(masks, 400) is None and machine.exploded
    want = _rows(lambda: run_plan(plan, table, Matcher, use_kernel=False))
    assert want != [] and _rows(lambda: run_local(table, text)) == want


def test_patterns_the_automaton_cannot_hold_are_left_to_the_kernel():
    table = pa.table({"ts": [0, 1], "v": [1, 2]})
    for text in ("ORDER BY ts MEASURES COUNT(*) AS c PATTERN (^A B) DEFINE A AS v = 1",
                 "ORDER BY ts MEASURES COUNT(*) AS c PATTERN ((A* B*)*) DEFINE A AS v = 1",  # a loop counter
                 "ORDER BY ts MEASURES COUNT(*) AS c AFTER MATCH SKIP TO LAST A PATTERN (A B) DEFINE A AS v = 1"):
        plan = compile_query(text, table)
        assert automaton.Automaton.for_plan(plan, plan.query.skip_mode) is None, text


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(static_queries(), tables(), st.integers(0, 30), st.booleans(), st.integers(0, 5))
def test_window_selection_equals_the_thread_list_kernel(text, table, limit, complete, pos):
    # A stream's sealed rows or a run-strategy batch: the selection resumed at ``pos`` over
    # the starts below ``limit``, stopping where a live thread needs a row not seen yet.
    from sparkcep.data.partitions import LazyColumns
    from sparkcep.runtime.fast import KernelMatcher
    from sparkcep.runtime.matches import PartitionData

    q = analyze(parse(text), schema_of(table))
    assume(not q.partition_by and not q.with_unmatched)  # one partition; the window selection emits no unmatched rows
    plan = compile_query(text, table)
    n = table.num_rows
    limit = min(limit, n)
    # Nested loops past the kernel's slot budget run on the Python matcher: no window to compare.
    assume(KernelMatcher.for_plan(plan) is not None)

    def window(enabled: bool):
        part = PartitionData(LazyColumns([table.column(i) for i in range(table.num_columns)]), n,
                             q.order_by[0].index, complete=complete and limit == n, limit=limit)
        with mock.patch.object(automaton, "ENABLED", enabled):
            kernel = KernelMatcher.for_plan(plan)
            got = kernel.select_window(part, min(pos, limit), -1)
        if got is None:
            return None
        starts, ends, offs, labels, excl, at, covered = got
        return (starts.tolist(), ends.tolist(), offs.tolist(), labels[:offs[-1]].tolist(),
                [bool(x) for x in excl[:offs[-1]]], at, covered, kernel.determinised)

    ours, theirs = window(True), window(False)
    holds = automaton.Automaton.for_plan(plan, plan.query.skip_mode) is not None
    assert ours[:-1] == theirs[:-1], f"{text}\nlimit={limit} complete={complete} pos={pos}\n{table.to_pylist()}"
    assert ours[-1] == holds and not theirs[-1]
