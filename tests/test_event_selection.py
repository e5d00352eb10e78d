"""Event selection strategies, negation and PREVIOUS aggregates (SASE / NFA^b): every
algorithm of runtime.nfab against the brute-force SelectionReference on random queries and
data, and the SQL engine where the strategy is SQL's own."""

from __future__ import annotations

from unittest.mock import patch

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.api import compile_query, run_plan
from sparkcep.errors import DataError, QueryError
from sparkcep.runtime.nfab import Backtrack, CompiledNFAb, NFAbMatcher
from sparkcep.runtime.vm import Matcher
from tests.reference_matchers import ReferenceMatcher, SelectionReference
from tests.test_properties import comparable
from tests.tiers import examples

from .test_kernel import kernel_conditions
from .test_properties import conditions, patterns, tables, used_vars

EXAMPLES = examples(1500, scaled=True)
SELECTIONS = ["STRICT CONTIGUITY", "PARTITION CONTIGUITY", "SKIP TILL NEXT MATCH", "SKIP TILL ANY MATCH"]


@st.composite
def selection_queries(draw, compiled: bool = False):
    """``compiled``: conditions the compiled NFA^b takes (kernel conditions)."""
    selection = draw(st.sampled_from(SELECTIONS))
    gapped = "SKIP TILL" in selection
    pattern = draw(patterns())
    if gapped:
        pattern = pattern.replace("^", "()").replace("$", "()")
    names = used_vars(pattern)
    if not names:
        pattern += " A"
        names = ["A"]
    negated = None
    if draw(st.booleans()):
        # !N between two top-level items (N occurs nowhere else).
        negated = "N"
        pattern = f"({pattern}) !N {draw(st.sampled_from(names))}"
    defines = []
    for v in names:
        if draw(st.integers(0, 2)) > 0:
            cond = draw((kernel_conditions if compiled else conditions)(v, names))
            if not compiled and draw(st.integers(0, 3)) == 0:
                agg = draw(st.sampled_from(["AVG", "MAX", "MIN", "SUM", "COUNT"]))
                cond = f"({cond}) OR price > PREVIOUS {agg}({v}.price)"
            defines.append(f"{v} AS {cond}")
    if negated:
        defines.append(f"N AS price = {draw(st.integers(0, 3))}" + draw(st.sampled_from(["", f" AND price > {names[0]}.price"])))
    measures = draw(st.lists(st.sampled_from([
        "MATCH_NUMBER() AS mn", "CLASSIFIER() AS cls", "COUNT(*) AS cnt", "FIRST(price) AS fp",
        "LAST(price) AS lp", f"SUM({names[0]}.price) AS sm", "PREV(price) AS pp", "FINAL COUNT(*) AS fcnt",
        "COLLECT(ts) AS tss", f"LAST({names[-1]}.price, 1) AS l1"]), min_size=1, max_size=3, unique=True))
    has_excl = "{-" in pattern
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH OMIT EMPTY MATCHES"]
                                + ([] if has_excl or gapped else ["ALL ROWS PER MATCH WITH UNMATCHED ROWS"])))
    target = draw(st.sampled_from(names))
    skip = draw(st.sampled_from(["", "AFTER MATCH SKIP TO NEXT ROW", f"AFTER MATCH SKIP TO LAST {target}",
                                 f"AFTER MATCH SKIP TO FIRST {target}", "ALL MATCHES", "ALL MATCHES"]))
    if skip == "ALL MATCHES":  # MATCH_NUMBER() in DEFINE is refused there (a QueryError)
        defines = [d for d in defines if "MATCH_NUMBER" not in d]
    partition = draw(st.sampled_from(["", "PARTITION BY k"]))
    bound = draw(st.sampled_from(["", "", "MAXLENGTH 4", "WITHIN 3"]))
    return f"""{partition} ORDER BY ts MEASURES {', '.join(measures)} {rows} {skip}
        EVENT SELECTION {selection}
        PATTERN ({pattern}) {bound}
        SUBSET U = ({names[0]}, {names[-1]})
        {('DEFINE ' + ', '.join(defines)) if defines else ''}"""


def _run(plan, table, factory, use_kernel=None):
    try:
        return comparable(run_plan(plan, table, factory, use_kernel=use_kernel).to_pylist())
    except DataError as e:
        return ("error", str(e))


@settings(max_examples=max(EXAMPLES // 2, 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(selection_queries(), tables())
def test_nfab_equals_reference(text, table):
    plan = compile_query(text, table)
    expected = _run(plan, table, SelectionReference)
    context = f"\n{text!r}\n{table.to_pylist()}"
    assert _run(plan, table, NFAbMatcher) == expected, "nfab (merging)" + context
    assert _run(plan, table, lambda p: NFAbMatcher(p, merge=False)) == expected, "nfab (no merging)" + context
    assert _run(plan, table, Backtrack) == expected, "backtrack" + context
    compiled = CompiledNFAb(plan)
    assert _run(plan, table, lambda p: compiled) == expected, "nfab compiled" + context
    if plan.query.event_selection == "PARTITION" or (
            plan.query.event_selection == "STRICT" and not plan.query.partition_by):
        # SQL's own contiguity: the Pike VM, the compiled kernel and the SQL reference agree.
        assert _run(plan, table, ReferenceMatcher) == expected, "sql reference" + context
        assert _run(plan, table, Matcher, use_kernel=False) == expected, "pike vm" + context
        assert _run(plan, table, Matcher, use_kernel=True) == expected, "kernel" + context


@settings(max_examples=max(EXAMPLES // 2, 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(selection_queries(compiled=True), tables())
def test_compiled_nfab_equals_reference(text, table):
    plan = compile_query(text, table)
    expected = _run(plan, table, SelectionReference)
    compiled = CompiledNFAb(plan)
    context = f"\n{text!r}\n{table.to_pylist()}"
    assert _run(plan, table, lambda p: compiled) == expected, "nfab compiled" + context
    # The compiled search ran unless the pattern has more loops than the kernel takes or no rows.
    assert compiled.ran or compiled.kernel is None or table.num_rows == 0 or isinstance(expected, tuple), text


def _table(**cols):
    return pa.table({k: pa.array(v) for k, v in cols.items()})


def _q(table, text):
    return run_plan(compile_query(text, table), table).to_pylist()


RISE = _table(ts=list(range(10)), price=[1, 5, 2, 6, 3, 7, 4, 9, 1, 2])
RISING = """ORDER BY ts MEASURES FIRST(A.ts) AS a, COLLECT(ts) AS rows {out}
    EVENT SELECTION {sel} PATTERN (A B+) DEFINE B AS price > LAST(price, 1)"""


def test_skip_till_next_match_skips_irrelevant_rows():
    got = _q(RISE, RISING.format(out="", sel="SKIP TILL NEXT MATCH"))
    assert got == [{"a": 0, "rows": [0, 1, 3, 5, 7]}, {"a": 8, "rows": [8, 9]}]


def test_partition_contiguity_is_sql():
    got = _q(RISE, RISING.format(out="", sel="PARTITION CONTIGUITY"))
    assert [r["rows"] for r in got] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_skip_till_any_match_finds_every_combination():
    got = _q(RISE, RISING.format(out="ALL MATCHES", sel="SKIP TILL ANY MATCH"))
    from_zero = [r["rows"] for r in got if r["a"] == 0]
    # Every increasing chain from row 0: the subsets of later rows whose prices rise.
    prices = RISE.column("price").to_pylist()

    def chains(last, i):
        for j in range(i, len(prices)):
            if prices[j] > prices[last]:
                yield [j]
                for rest in chains(j, j + 1):
                    yield [j] + rest

    assert sorted(from_zero) == sorted([0] + c for c in chains(0, 1))


def test_strict_contiguity_reads_the_whole_input_order():
    # Two keys interleaved: per key the rows are contiguous, in the input they are not.
    t = _table(ts=[0, 1, 2, 3, 4, 5], k=[0, 1, 0, 1, 0, 0], price=[1, 1, 2, 2, 3, 4])
    text = """PARTITION BY k ORDER BY ts MEASURES COLLECT(ts) AS rows ALL MATCHES
        EVENT SELECTION {sel} PATTERN (A B) DEFINE B AS price > A.price"""
    strict = [r["rows"] for r in _q(t, text.format(sel="STRICT CONTIGUITY"))]
    partition = [r["rows"] for r in _q(t, text.format(sel="PARTITION CONTIGUITY"))]
    assert sorted(partition) == [[0, 2], [1, 3], [2, 4], [4, 5]]
    assert strict == [[4, 5]]


def test_negation_between_neighbours():
    # SASE Query 1: shelf, then exit, with no register reading of the tag in between.
    t = _table(ts=list(range(8)), tag=[1, 2, 1, 2, 3, 1, 3, 2],
               kind=["shelf", "shelf", "register", "exit", "shelf", "exit", "exit", "exit"])
    got = _q(t, """PARTITION BY tag ORDER BY ts MEASURES A.ts AS shelf, C.ts AS exit
        EVENT SELECTION SKIP TILL NEXT MATCH
        PATTERN (A !B C)
        DEFINE A AS kind = 'shelf', B AS kind = 'register', C AS kind = 'exit'""")
    assert got == [{"tag": 2, "shelf": 1, "exit": 3}, {"tag": 3, "shelf": 4, "exit": 6}]


def test_previous_aggregate_excludes_the_current_row():
    t = _table(ts=list(range(6)), price=[10, 11, 9, 12, 13, 1])
    got = _q(t, """ORDER BY ts MEASURES COLLECT(ts) AS rows
        EVENT SELECTION SKIP TILL NEXT MATCH
        PATTERN (A B+ C)
        SUBSET U = (A, B)
        DEFINE A AS price = 10, B AS price > PREVIOUS MAX(U.price), C AS price < 5""")
    assert got == [{"rows": [0, 1, 3, 4, 5]}]


def test_kleene_previous_selected_event():
    # SASE Query 2: b[i].from = b[i-1].to is LAST(B.to, 1), the previously selected B.
    t = _table(ts=list(range(6)), src=["x", "a", "x", "b", "z", "c"], dst=["a", "q", "b", "c", "z", "d"],
               alert=[True, False, False, False, False, False])
    got = _q(t, """ORDER BY ts MEASURES COLLECT(B.ts) AS chain ONE ROW PER MATCH ALL MATCHES
        EVENT SELECTION SKIP TILL ANY MATCH
        PATTERN (A B+)
        DEFINE A AS alert, B AS (COUNT(B.*) = 1 AND src = 'x') OR src = LAST(B.dst, 1)""")
    # Greedy B+ prefers longer chains: ALL MATCHES lists them most preferred first.
    assert [r["chain"] for r in got] == [[2, 3, 5], [2, 3], [2]]


@pytest.mark.parametrize("clause, code", [
    ("ORDER BY ts EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (^ A)", "NOT_SUPPORTED"),
    ("ORDER BY ts ALL ROWS PER MATCH WITH UNMATCHED ROWS EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A)", "NOT_SUPPORTED"),
    ("ORDER BY ts PATTERN (!A B)", "NOT_SUPPORTED"),
    ("ORDER BY ts PATTERN (A !B)", "NOT_SUPPORTED"),
    ("ORDER BY ts PATTERN ((A !B C)+ D)", "NOT_SUPPORTED"),
    ("ORDER BY ts PATTERN (A !(B C) D)", "NOT_SUPPORTED"),
    ("ORDER BY ts PATTERN (A !B B)", "INVALID_PATTERN"),
    ("ORDER BY ts MEASURES PREVIOUS COUNT(*) AS c PATTERN (A)", "INVALID_SEMANTICS"),
    ("ORDER BY ts PATTERN (A) DEFINE A AS PREVIOUS LAST(price) > 1", "INVALID_SEMANTICS"),
])
def test_errors(clause, code):
    with pytest.raises(QueryError) as e:
        compile_query(clause, RISE)
    assert e.value.code == code
    assert e.value.line is not None


def test_matchregex_rejects_event_selection():
    with pytest.raises(QueryError) as e:
        compile_query("ORDER BY ts EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B)", RISE, "matchregex")
    assert e.value.code == "CONFLICTING_CLAUSES"


def test_live_runs_are_bounded():
    t = _table(ts=list(range(40)), price=list(range(40)))
    plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS c ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A+ B)", t)
    with pytest.raises(DataError, match="partial matches are alive"):
        run_plan(plan, t, lambda p: NFAbMatcher(p, max_runs=1000))
    compiled = CompiledNFAb(plan, max_runs=1000)
    with pytest.raises(DataError, match="partial matches are alive"):
        run_plan(plan, t, lambda p: compiled)  # the compiled search stops, the Python one reports
    assert compiled.ran


@pytest.mark.parametrize("selection", ["SKIP TILL NEXT MATCH", "SKIP TILL ANY MATCH"])
def test_label_paths_of_one_start_are_bounded(selection):
    """ALL MATCHES of ``A B* C* D`` over rows B and C both take: the label paths of one start
    grow with the square of the rows read. Past ``max_nodes`` of them the search stops with
    the DataError naming the row, the same on the compiled search (which then hands the
    partition to the Python search) and the Python one-pass search."""
    t = _table(ts=list(range(300)), x=[1] * 300)
    plan = compile_query(f"""ORDER BY ts MEASURES COUNT(*) AS c ALL MATCHES EVENT SELECTION {selection}
        PATTERN (A B* C* D) DEFINE A AS x = 1, B AS x = 1, C AS x = 1, D AS x = 2""", t)
    rows = []
    with patch.object(Matcher, "max_nodes", 3000):
        for make in (NFAbMatcher, CompiledNFAb):
            matcher = make(plan)
            with pytest.raises(DataError, match="more than 3000 label assignments from one start row") as e:
                run_plan(plan, t, lambda p, m=matcher: m)
            rows.append(e.value.row)
        assert matcher.ran
    assert rows[0] == rows[1] and 5 < rows[0] < 300


_SHRINKING_RUNS = """
import pyarrow as pa
from sparkcep.api import compile_query, run_plan
from sparkcep.runtime.nfab import CompiledNFAb, NFAbMatcher
kinds = {"3": (1, 1, 1, 1), "1": (1, 1, 0, 0), "0": (0, 1, 0, 1)}
a, b, c, d = zip(*[kinds[ch] for ch in "0303103"])
t = pa.table({"k": [0] * 7, "ts": list(range(7)), "a": list(a), "b": list(b), "c": list(c), "d": list(d)})
plan = compile_query("PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS cnt ALL MATCHES "
                     "EVENT SELECTION STRICT CONTIGUITY PATTERN ((A | B)+ (C | D)+ E) "
                     "DEFINE A AS a = 1, B AS b = 1, C AS c = 1, D AS d = 1, E AS a = 9", t)
m = CompiledNFAb(plan)
assert run_plan(plan, t, lambda p: m).to_pylist() == run_plan(plan, t, NFAbMatcher).to_pylist() and m.ran
"""


@pytest.mark.slow  # compiles the kernel again, with bounds checks
def test_compiled_all_matches_lists_stay_in_bounds_when_runs_die(tmp_path):
    """Runs die (strict contiguity), so the run list swapped in is longer than the links
    kept for it: with numba's bounds checks on, the compiled search must stay in bounds (it
    wrote past them, which corrupted memory in some runs)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", _SHRINKING_RUNS], env=env, capture_output=True, text=True,
                         timeout=900, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert run.returncode == 0, run.stderr[-2000:]


def test_one_labelling_reached_many_ways_is_held_once():
    """Nested quantifiers reach one labelling of the rows many ways (((B* | C)+)*): a merged
    run keeps one member per start and label path, so SKIP TILL ANY MATCH's partial matches
    stay few (they grew about 9x a row, past 60 000 at the fifth) and the matches are the
    reference's."""
    t = _table(ts=list(range(5)), price=[1] * 5)
    plan = compile_query("""ORDER BY ts MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS c ALL MATCHES
        EVENT SELECTION SKIP TILL ANY MATCH PATTERN ((((B* | C)+)*){2})""", t)
    matcher = NFAbMatcher(plan, max_runs=5000)
    got = run_plan(plan, t, lambda p: matcher).to_pylist()
    assert got == run_plan(plan, t, SelectionReference).to_pylist() and len(got) == 247
    assert matcher.peak_runs < 1000


def test_the_label_path_bound_is_per_start():
    """Many starts alive at once, each with a few label paths (WITHIN ends them): their sum
    passes the bound, no start's does, so nothing stops."""
    t = _table(ts=list(range(200)), x=[i % 5 for i in range(200)])
    plan = compile_query("""ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e ALL MATCHES
        EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A B+) WITHIN 6 DEFINE A AS x < 3, B AS x > 0""", t)
    expected = run_plan(plan, t, NFAbMatcher).to_pylist()
    with patch.object(Matcher, "max_nodes", 200):
        for make in (NFAbMatcher, CompiledNFAb):
            assert run_plan(plan, t, make).to_pylist() == expected
    assert len(expected) > 2000


def test_merging_shares_runs():
    t = _table(ts=list(range(60)), price=[i % 7 for i in range(60)])
    text = """ORDER BY ts MEASURES COUNT(*) AS c ALL MATCHES EVENT SELECTION SKIP TILL NEXT MATCH
        PATTERN (A B+ C) WITHIN 20 DEFINE B AS price > PREVIOUS MAX(B.price) OR COUNT(B.*) = 1, C AS price = 0"""
    plan = compile_query(text, t)
    merged, basic = NFAbMatcher(plan), NFAbMatcher(plan, merge=False)
    a = run_plan(plan, t, lambda p: merged).to_pylist()
    b = run_plan(plan, t, lambda p: basic).to_pylist()
    assert a == b and a
    assert merged.peak_runs <= basic.peak_runs


def test_skip_till_next_match_prefers_the_earliest_next_row():
    # After the rise 1 -> 5, rows 2 and 4 can end the match (C) and no later row rises above
    # 5: the preferred match ends at the first of them, not at row 4.
    t = _table(ts=list(range(6)), price=[1, 5, 2, 3, 0, 4])
    got = _q(t, """ORDER BY ts MEASURES COLLECT(ts) AS rows EVENT SELECTION SKIP TILL NEXT MATCH
        PATTERN (A B+ C) DEFINE B AS price > LAST(price, 1), C AS price < 3""")
    assert got == [{"rows": [0, 1, 2]}]


@pytest.mark.parametrize("selection", ["PARTITION CONTIGUITY", "SKIP TILL NEXT MATCH"])
@pytest.mark.parametrize("kleene", ["true", "price > LAST(U.price, 1)"])
def test_merged_runs_read_back_their_own_paths(selection, kleene):
    # SASE's experiment shape: long Kleene runs of many starts merged into one run, each
    # finishing many matches; every match reads its own path back from the shared buffer
    # (the paths kept for later matches must not cross from one start's lineage to another's).
    from sparkcep.workloads.stock import sase_ticks

    t = pa.Table.from_pandas(sase_ticks(600, p_increase=0.7, seed=7), preserve_index=False)
    text = f"""PARTITION BY symbol ORDER BY ts MEASURES COLLECT(ts) AS rows, COUNT(A.*) AS n ALL MATCHES
        EVENT SELECTION {selection} PATTERN (A1 A* B) MAXLENGTH 60 SUBSET U = (A1, A)
        DEFINE A1 AS price % 5 = 0, A AS {kleene}, B AS volume < 150"""
    plan = compile_query(text, t)
    merged = run_plan(plan, t, NFAbMatcher).to_pylist()
    assert len(merged) > 50
    assert merged == run_plan(plan, t, lambda p: NFAbMatcher(p, merge=False)).to_pylist()
    assert merged == run_plan(plan, t, Backtrack).to_pylist()


def test_a_buffer_entry_follows_the_longest_version_prefix():
    """The versioned buffer's pointer lookup (a dict of versions, not a scan of every
    pointer, which made SKIP TILL ANY MATCH quadratic in an entry's pointers) picks what the
    scan picked: the pointer whose version is the longest prefix of the run's, the first of
    equal ones, also for pointers added after the first lookup."""
    import random

    from sparkcep.runtime.nfab import _Entry

    def scan(entry, version):
        best, best_len = -1, -1
        for k, (v, _) in enumerate(entry.preds):
            if len(v) > best_len and version[: len(v)] == v:
                best, best_len = k, len(v)
        return best

    rng = random.Random(5)
    for _ in range(200):
        entry, prevs = _Entry(3, 0, False), [object(), object()]
        versions = [tuple(rng.randrange(3) for _ in range(rng.randrange(4))) for _ in range(12)]
        for i, v in enumerate(versions):
            entry.add(v, prevs[i % 2])
            if i % 4 == 3:  # lookups between additions
                probe = tuple(rng.randrange(3) for _ in range(4))
                if scan(entry, probe) >= 0:
                    assert entry.pointer(probe) == scan(entry, probe)
        for v in versions:
            probe = v + tuple(rng.randrange(3) for _ in range(2))
            assert entry.pointer(probe) == scan(entry, probe)
