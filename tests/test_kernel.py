"""The compiled kernel against the reference matcher, on queries built only from what the
kernel runs (row-local conditions and comparisons with other variables' rows), so that
every example exercises it."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import itertools
from unittest.mock import patch

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.api import compile_query, run_plan
from sparkcep.errors import DataError, QueryError
from sparkcep.parallel.run_batches import LocalBackend, run_partition
from sparkcep.runtime.fast import KernelMatcher
from sparkcep.runtime.matches import MAX_NODES, MAX_RUNS
from sparkcep.runtime.vm import Matcher
from tests.reference_matchers import ReferenceMatcher
from tests.test_properties import comparable, patterns, tables, used_vars
from tests.tiers import examples

EXAMPLES = examples(1500, scaled=True)


@st.composite
def kernel_conditions(draw, var: str, names: list[str]):
    other = draw(st.sampled_from(names))
    k = draw(st.integers(0, 3))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
    eq = draw(st.sampled_from(["=", "<>"]))
    atoms = [
        f"price {op} {k}",
        f"price {op} PREV(price)",
        f"price {op} {other}.price",
        f"{other}.price {op} price",
        f"price {op} FIRST({other}.price)",
        f"PREV(price) {op} {other}.price",
        f"price {op} FIRST(price)",
        f"price * 2 {op} {other}.price",
        f"price {op} {other}.price * 0.5",
        f"NEXT(price) {op} LAST({other}.price)",
        f"price {op} PREV(U.price)",
        f"price IS NULL OR price {op} {k}",
        # CASE over the row (a vectorized mask): searched and simple, with and without ELSE
        f"CASE WHEN price {op} {k} THEN x > 0 WHEN price IS NULL THEN NULL ELSE price = {k} END",
        f"CASE price WHEN {k} THEN 1 WHEN 2 THEN x ELSE NULL END {op} 1",
        # timestamps (naive or zoned, with NULLs), and intervals between two of them
        f"t {op} PREV(t)",
        f"t - FIRST(t) {op} INTERVAL '{k}' SECOND",
        f"t - {other}.t {op} INTERVAL '1' SECOND",
        f"PREV(t) {op} {other}.t",
        # running counts (registers): rows labelled so far, the row being labelled included
        f"COUNT({other}.*) {op} {k}",
        f"COUNT(*) {op} {k}",
        f"COUNT({var}.x) {op} {k}",
        f"price {op} COUNT(U.*)",
        f"COUNT({other}.price) * 2 {op} price",
        f"SUM({other}.price) {op} {k + 2}",
        f"SUM(U.x) {op} price",
        f"AVG({var}.price) {op} PREV(price)",
        f"AVG(x) {op} x",
        f"MIN({other}.x) {op} x",
        f"MAX(U.price) * 0.5 {op} price",
        f"MAX(x) {op} FIRST(x)",
        f"ABS(price - PREV(price)) {op} {k}",  # row-local: a mask
        "ABS(x - PREV(x)) <= 0.5 * PREV(x)",
        f"price % 3 {op} {k - 1}",  # division by a nonzero literal: a mask
        f"price / -2 {op} PREV(price)",
        f"x % -1.5 {op} 0.5",
        # casts between numbers: masks too (conditions that cannot fail: which rows' conditions
        # an engine evaluates is not fixed, and a failing one is an error only where evaluated)
        f"TRY_CAST(x * 100 AS TINYINT) {op} {k}",
        "TRY_CAST(price * 1e9 AS INTEGER) IS NULL",
        f"CAST(price AS BOOLEAN) AND CAST(price AS DOUBLE) / 2 {op} PREV(x)",
        f"CAST(price AS VARCHAR) {op} '{k}' OR CAST(x AS VARCHAR) = '0.0'",  # to text: masks too
        # LAST(X.col, k) and PREVIOUS aggregates: registers lagging one row of their variables
        f"price {op} LAST({other}.price, 1)",
        f"LAST(U.x, 2) {op} x",
        f"LAST(price, 1) {op} price",
        f"price {op} PREVIOUS MAX({other}.price)",
        f"x {op} PREVIOUS AVG(U.x)",
        f"PREVIOUS COUNT({var}.*) {op} {k}",
        f"PREVIOUS SUM(price) {op} price",
        f"PREVIOUS MIN({var}.x) {op} LAST({var}.x, 1)",
        # CLASSIFIER compared with a name or another CLASSIFIER: label registers
        f"CLASSIFIER() {eq} '{other}'",
        f"CLASSIFIER(U) {eq} '{var}'",
        f"PREV(CLASSIFIER()) {eq} '{other}'",
        f"FIRST(CLASSIFIER()) {eq} '{other}'",
        f"LAST(CLASSIFIER(U), 1) {eq} CLASSIFIER({other})",
        f"CLASSIFIER({other}) {eq} 'Z'",
    ]
    n = draw(st.integers(1, 3))
    return " AND ".join("(" + draw(st.sampled_from(atoms)) + ")" for _ in range(n))


@st.composite
def kernel_queries(draw, pattern_of=None):
    pattern = draw(pattern_of if pattern_of is not None else patterns())
    names = used_vars(pattern) or ["A"]
    if not used_vars(pattern):
        pattern += " A"
    defines = [f"{v} AS {draw(kernel_conditions(v, names))}" for v in names if draw(st.integers(0, 3)) > 0]
    mode = draw(st.sampled_from(["sql", "sql", "matchregex"]))
    target = draw(st.sampled_from(names + ["U"]))
    skip = "" if mode == "matchregex" else draw(st.sampled_from(
        ["", "AFTER MATCH SKIP TO NEXT ROW", f"AFTER MATCH SKIP TO FIRST {target}", f"AFTER MATCH SKIP TO LAST {target}",
         "ALL MATCHES"]))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES"]
                                + ([] if "{-" in pattern else ["ALL ROWS PER MATCH WITH UNMATCHED ROWS"])))
    order = draw(st.sampled_from(["ts", "ts", "t, ts"]))
    bound = draw(st.sampled_from(["", "MAXLENGTH 3", "WITHIN 2" if order == "ts" else "WITHIN INTERVAL '2' SECOND"]))
    measures = "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n"
    if draw(st.integers(0, 4)) == 0:  # a MEASURES error in some matches: which error comes first
        measures += ", 10 / (FIRST(price) - 3) AS q"
    if draw(st.booleans()):  # measures the kernel's matches give as whole columns (runtime.columnar)
        aggs = draw(st.lists(st.sampled_from(["COUNT", "SUM", "AVG", "MIN", "MAX", "DELTA"]), min_size=2, max_size=2))
        measures = (f"MATCH_NUMBER() AS mn, COUNT(*) AS n, {aggs[0]}(price) AS ap, {aggs[1]}(x) AS ax, "
                    "FIRST(x) AS fx, LAST(price) AS lp, DELTA(t) AS dt")
        if draw(st.booleans()):  # ... of variables' rows and SUBSETs: the matchers give labels
            var, other = draw(st.sampled_from(names)), draw(st.sampled_from(names + ["U"]))
            k = draw(st.integers(0, 2))
            measures = ", ".join(draw(st.lists(st.sampled_from([
                "MATCH_NUMBER() AS mn", "CLASSIFIER() AS cls", "FIRST(CLASSIFIER(U)) AS fcu",
                f"LAST(CLASSIFIER({other}), {k}) AS lco", f"COUNT({var}.*) AS nv", f"COUNT({other}.x) AS nx",
                f"{aggs[0]}({var}.price) AS av", f"{aggs[1]}({other}.x) AS ao", f"DELTA({other}.t) AS dto",
                f"FIRST({var}.x) AS fv", f"LAST({other}.price) AS lo", f"{var}.price AS pv",
                f"FIRST({other}.x, {k}) AS fk", f"LAST({var}.t, {k}) AS lk", f"PREV(FIRST({var}.price), {k}) AS pf",
                f"NEXT(LAST({other}.x)) AS nl", f"PREV({other}.price, 2) AS p2", "LAST(price, 1) AS l1",
                # ALL ROWS PER MATCH: RUNNING up to each row, FINAL the whole match
                f"FINAL LAST({other}.price) AS fl", f"FINAL {aggs[0]}({var}.price) AS fa",
                f"RUNNING {aggs[1]}({other}.x) AS ra", f"FINAL COUNT({var}.*) AS fn",
                "PREV(CLASSIFIER()) AS pc", f"NEXT(CLASSIFIER({other}), {k}) AS nc", "price AS here",
                # expressions over them: columns too (as compile.vectorize evaluates rows)
                f"LAST({other}.price) - FIRST({var}.price) AS gain", f"COUNT({var}.*) > {k} AS many",
                f"{aggs[0]}({var}.price) * 2 + 1 AS ax2", f"FIRST({var}.x) / 2 AS half",
                f"MIN({other}.price) BETWEEN 2 AND 5 AS mid", f"LAST({var}.price) IN (1, 3, NULL) AS picked",
                f"CLASSIFIER() = '{var}' AS is_v", f"ABS(FIRST({var}.x) - LAST({other}.x)) AS dx",
                f"NOT ({var}.price IS NULL) OR COUNT(*) < 3 AS either", "-MATCH_NUMBER() * LAST(price) AS neg",
                f"CAST(SUM({var}.price) AS SMALLINT) AS cs", f"TRY_CAST(AVG({other}.x) * 1e10 AS INTEGER) AS tc",
                f"CAST(COUNT(*) > {k} AS DOUBLE) AS cb", f"CAST(FIRST({var}.x) AS TINYINT) + 1 AS ct",
                f"CAST(LAST({var}.x) AS VARCHAR) AS tx", f"CAST(COUNT({other}.*) > {k} AS varchar) AS tb",
                # decimals (the column m, see _check_kernel): their measures run per match
                f"SUM({var}.m) AS sm", f"LAST({other}.m) - FIRST(m) AS dm", f"MAX(m) > {k} AS mm",
                f"CAST(MAX({var}.price) AS VARCHAR) < '{k}' AS tp", "CAST(LAST(price) AS VARCHAR(1)) AS t1",
                f"SUM({var}.price) / 0 AS by_zero",  # not vectorized: per match, where the error is reported
                f"CASE WHEN COUNT({var}.*) > {k} THEN LAST({other}.price) WHEN FIRST({var}.x) IS NULL THEN NULL "
                "ELSE -1 END AS cw",
                f"CASE CLASSIFIER() WHEN '{var}' THEN 'v' WHEN '{other}' THEN NULL END AS cc",
            ]), min_size=1, max_size=5, unique=True)))
    text = f"""{draw(st.sampled_from(["", "PARTITION BY k"]))} ORDER BY {order}
        MEASURES {measures}
        {rows} {skip}
        PATTERN ({pattern}) {bound}
        SUBSET U = ({names[0]}, {names[-1]})
        {('DEFINE ' + ', '.join(defines)) if defines else ''}"""
    return text, mode


def _run(fn):
    """Rows, or the whole error (its row too: run batches name it as the whole partition does)."""
    try:
        return comparable(fn())
    except DataError as e:
        return ("error", str(e))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_queries(), tables(), st.integers(1, 4))
def test_kernel_equals_reference(query, table, batch):
    _check_kernel(query, table, batch)


def _check_kernel(query, table, batch):
    """The kernel's answer is the reference matcher's, over whole partitions and in run
    batches of ``batch`` rows (the table gets a decimal column m, a quarter of price)."""
    text, mode = query
    prices = table.column("price").to_pylist()
    table = table.append_column("m", pa.array([None if p is None else decimal.Decimal(p) / 4 for p in prices],
                                              pa.decimal128(38, 2)))
    try:
        plan = compile_query(text, table, mode)
    except QueryError as e:
        assume(e.code != "MATCHREGEX_FIRST_AGGREGATE")
        raise
    assert KernelMatcher.for_plan(plan) is not None, text
    expected = _run(lambda: run_plan(plan, table, ReferenceMatcher).to_pylist())
    assert _run(lambda: run_plan(plan, table, use_kernel=True).to_pylist()) == expected, text
    assert _run(lambda: run_plan(plan, table, partition_runner=_in_batches(batch)).to_pylist()) == expected, text


def _in_batches(batch: int):
    """run_plan's partition runner for run batches of ``batch`` rows, in this process."""
    def runs(plan, part, row_ids):
        order0 = plan.query.order_by[0].index
        backend = LocalBackend(plan, part.cols, order0, part.n, lambda r: row_ids[r])
        return run_partition(plan, part.n, backend, batch, None, lambda r: row_ids[r])
    return runs


def test_kernel_declines_what_it_cannot_run():
    t = pa.table({"ts": [1], "price": [1], "name": ["x"]})
    for cond in ("SUM(DISTINCT A.price) > 1", "COUNT(DISTINCT A.price) > 1", "STDDEV(A.price) > 1", "CLASSIFIER(A) < 'B'", "FIRST(A.price, 1) > 0", "LAST(A.price, 9) > 0", "LAST(CLASSIFIER(A), 2147483647) = 'A'", "name > A.name"):
        plan = compile_query(f"ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A B) DEFINE B AS {cond}", t)
        assert KernelMatcher.for_plan(plan) is None, cond
    for clause in ("ORDER BY ts MEASURES MATCH_NUMBER() AS m EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B) DEFINE B AS price > A.price",
                   "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A !N B) DEFINE B AS price > A.price"):
        assert KernelMatcher.for_plan(compile_query(clause, t)) is None, clause
    # ALL MATCHES runs on the kernel.
    plan = compile_query("ORDER BY ts MEASURES MATCH_NUMBER() AS m ALL MATCHES PATTERN (A B) DEFINE B AS price > A.price", t)
    assert KernelMatcher.for_plan(plan) is not None


_ROWS = pa.table({
    "ts": list(range(40)),
    "k": [i % 2 for i in range(40)],
    "price": [(i * 7 + (i * i) % 5) % 6 for i in range(40)],
})

REGISTER_CASES = [
    "PATTERN (B+) DEFINE B AS price >= FIRST(B.price)",
    "PATTERN (A B+) DEFINE B AS price <= FIRST(B.price)",
    "PATTERN (A B+ C) DEFINE B AS price > A.price, C AS price < A.price",
    "PATTERN (A B* C) DEFINE B AS price >= PREV(B.price), C AS price < LAST(B.price)",
    # the reference's backtracking takes ~10 s on this one: full tier only
    pytest.param("PATTERN (A (B | C)+ D) SUBSET U = (B, C) DEFINE D AS price < FIRST(U.price)", marks=pytest.mark.slow),
    "PATTERN (A (B | C)+ D) SUBSET U = (B, C) DEFINE D AS price > LAST(U.price)",
    "PATTERN (A+ B) DEFINE A AS price >= FIRST(price), B AS price < FIRST(price)",
    "PATTERN (A B+) DEFINE B AS PREV(price) < A.price * 2",
    "PATTERN (A B+) DEFINE B AS NEXT(price) <> A.price",
    "PATTERN (A B C) DEFINE B AS price = A.price, C AS price <> B.price",
    "PATTERN (A B+ C) DEFINE B AS price <= A.price, C AS price >= PREV(A.price, 0) * 1.5",
    "PATTERN ((A B)+ C) DEFINE B AS price > A.price, C AS price < FIRST(A.price) * 2",
    "PATTERN (A{2,} B) DEFINE A AS price >= FIRST(A.price), B AS price < LAST(A.price)",
]


@pytest.mark.parametrize("skip", ["", "AFTER MATCH SKIP TO NEXT ROW", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"])
@pytest.mark.parametrize("clause", REGISTER_CASES)
def test_registers_against_reference(clause, skip):
    text = f"PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS t0, COUNT(*) AS n {skip} {clause}"
    plan = compile_query(text, _ROWS)
    assert KernelMatcher.for_plan(plan) is not None
    expected = run_plan(plan, _ROWS, ReferenceMatcher).to_pylist()
    assert run_plan(plan, _ROWS, use_kernel=True).to_pylist() == expected
    assert expected  # the case matches something


@pytest.mark.parametrize("values, pattern", [
    ([2**62, 2**62, 1], "A+"),  # a running BIGINT sum leaves 64 bits: the per-match path's error
    ([2**53 + 1, 2**53 + 3, -5], "A+"),  # AVG of a sum beyond 2^53: Python's exact int / int
    ([-(2**63) + 1, 2**62, 7], "A+"),  # DELTA beyond BIGINT
    ([None, None, 3], "A+"),
    ([1, None, 3], "A*"),  # empty matches: COUNT 0, the others NULL
])
def test_whole_match_aggregates_of_integers(values, pattern):
    _check_columnar(pa.table({"ts": list(range(len(values))), "v": pa.array(values, pa.int64())}), pattern)


@pytest.mark.parametrize("values", [
    [float("nan"), 1.0, 2.0], [1.0, float("nan"), None], [-0.0, 0.0, -0.0], [0.1, 0.2, 0.3],
    [None, None, None], [1e308, 1e308, -1e308], [float("inf"), float("-inf"), 1.0],
])
def test_whole_match_aggregates_of_doubles(values):
    # NaN above every number (MAX keeps it, MIN skips past it), -0.0 and 0.0 as the fold
    # keeps them, float sums in row order (0.1 + 0.2 + 0.3), overflow to infinity.
    _check_columnar(pa.table({"ts": list(range(len(values))), "v": pa.array(values, pa.float64())}), "A+")


def _check_columnar(table, pattern):
    from unittest import mock

    from sparkcep.runtime import columnar

    text = (f"ORDER BY ts MEASURES COUNT(v) AS c, SUM(v) AS s, AVG(v) AS a, MIN(v) AS lo, MAX(v) AS hi, "
            f"DELTA(v) AS d ONE ROW PER MATCH PATTERN ({pattern}) DEFINE A AS true")
    plan = compile_query(text, table)
    assert columnar.supported(plan)
    expected = _run(lambda: run_plan(plan, table, ReferenceMatcher).to_pylist())
    with mock.patch.object(columnar, "_aggregate", wraps=columnar._aggregate) as spy:
        got = _run(lambda: run_plan(plan, table, use_kernel=True).to_pylist())
    assert spy.called
    assert got == expected
    assert [[str(v) for v in row.values()] for row in got] == [[str(v) for v in row.values()] for row in expected] \
        if isinstance(got, list) else True  # -0.0 and 0.0 alike


@pytest.mark.parametrize("pattern, defines", [
    ("A B+ C", "A AS v < 15, B AS v >= 15 AND v < 40, C AS v >= 40"),  # static: the automaton
    ("A B+ C", "B AS v > PREV(v), C AS v < A.v * 4"),  # the thread-list kernel
    ("A B C", "A AS v < 15, B AS true, C AS true"),  # fixed length: a column scan
])
@pytest.mark.parametrize("keyed", [False, True])
def test_measures_of_variables_are_columns(pattern, defines, keyed):
    """Measures naming variables (FIRST(A.x), MIN(B.x), COUNT(B.*), CLASSIFIER()) come out as
    columns from the matchers' labels, in one pass over every partition, with the reference
    matcher's values."""
    from unittest import mock

    from sparkcep.runtime import columnar

    cycle = [5, 20, 30, 45, 12, 18, 41, 3, 16, None, 17, 19, 50, 7, 39, 44]
    n = 6 * len(cycle)
    table = pa.table({"k": [(i // len(cycle)) % 3 if keyed else 0 for i in range(n)], "ts": list(range(n)),
                      "v": [cycle[(i + i // len(cycle)) % len(cycle)] for i in range(n)]})
    text = (f"{'PARTITION BY k' if keyed else ''} ORDER BY ts MEASURES FIRST(A.v) AS a, LAST(C.v) AS c, "
            "MIN(B.v) AS lo, MAX(U.v) AS hi, SUM(B.v) AS s, AVG(B.v) AS avg, COUNT(B.*) AS nb, "
            "FIRST(B.v, 1) AS b1, LAST(B.v, 1) AS bl1, PREV(FIRST(B.v)) AS pb, NEXT(C.v) AS nc, "
            "CLASSIFIER() AS cls, FIRST(CLASSIFIER(U)) AS fcu, DELTA(B.ts) AS db "
            f"ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) SUBSET U = (A, C) "
            f"DEFINE {defines}")
    plan = compile_query(text, table)
    assert columnar.supported(plan) and columnar.needs_labels(plan)
    expected = run_plan(plan, table, ReferenceMatcher).to_pylist()
    with mock.patch.object(columnar, "measure_columns", wraps=columnar.measure_columns) as spy:
        got = run_plan(plan, table, use_kernel=True).to_pylist()
    assert spy.call_count == 1 and expected and got == expected


def test_measure_columns_over_all_partitions_stay_inside_each():
    # One measure_columns call covers every partition: PREV at a partition's first row and
    # NEXT at its last row are NULL, never a neighbour partition's row (each match here
    # spans its whole partition).
    from unittest import mock

    from sparkcep.runtime import columnar

    table = pa.table({"k": [1, 1, 1, 2, 2, 3], "ts": [0, 1, 2, 0, 1, 0], "v": [10, 11, 12, 20, 21, 30]})
    text = ("PARTITION BY k ORDER BY ts MEASURES PREV(FIRST(v)) AS pv, NEXT(LAST(v)) AS nv, FIRST(v) AS fv, "
            "LAST(v, 1) AS l1, MATCH_NUMBER() AS mn, SUM(v) AS s ONE ROW PER MATCH PATTERN (A+) DEFINE A AS true")
    plan = compile_query(text, table)
    expected = run_plan(plan, table, ReferenceMatcher).to_pylist()
    with mock.patch.object(columnar, "measure_columns", wraps=columnar.measure_columns) as spy:
        got = run_plan(plan, table, use_kernel=True).to_pylist()
    assert spy.call_count == 1 and spy.call_args.kwargs["bounds"] is not None
    assert got == expected
    assert [r["pv"] for r in got] == [None, None, None] and [r["nv"] for r in got] == [None, None, None]


@pytest.mark.parametrize("unit, zone, step, window, gap", [
    ("us", None, 700_000, 7, 2), ("ns", "Europe/Berlin", 700_000_000, 7, 2),
    ("us", "America/New_York", 45 * 60 * 1_000_000, 27_000, 8_100),
    ("ns", None, 1, 1, 0),  # finer than a microsecond: not whole microseconds, the Python matcher runs
])
def test_timestamps_and_intervals_in_the_kernel(unit, zone, step, window, gap):
    import datetime as dt

    # Rows across a DST change (New York, 2024-03-10): an interval between zoned times is
    # elapsed time, as the Python matcher computes it.
    start = pa.scalar(dt.datetime(2024, 3, 10, 5, 0), pa.timestamp("us", "UTC")).cast(pa.int64()).as_py()
    scale = 1000 if unit == "ns" else 1
    times = [start * scale + i * step for i in range(40)]
    table = pa.table({"t": pa.array(times, pa.int64()).cast(pa.timestamp(unit, zone)),
                      "price": [float((i * 7) % 11) for i in range(40)]})
    text = ("ORDER BY t MEASURES FIRST(t) AS ft, LAST(t) AS lt, DELTA(t) AS took, COUNT(*) AS n "
            f"PATTERN (S N* L) WITHIN INTERVAL '{2 * window}' SECOND "
            f"DEFINE N AS t - FIRST(t) < INTERVAL '{window}' SECOND AND t > PREV(t), "
            f"L AS t - S.t >= INTERVAL '{gap}' SECOND AND price > S.price")
    plan = compile_query(text, table)
    expected = run_plan(plan, table, ReferenceMatcher).to_pylist()
    stats: dict = {}
    got = run_plan(plan, table, stats=stats).to_pylist()
    assert got == expected and len(expected) > 1
    assert stats["matcher"] == ("python" if step == 1 else "kernel")


def test_an_interval_offset_that_would_round_declines_even_beside_nan():
    # t1 - t2 < I with I = 2^53 + 1 µs: float64 would round the sum t2 + I, so the kernel
    # declines the data (a NaN in another column must not hide the check).
    import datetime as dt

    seconds = "9007199254.740993"
    interval = dt.timedelta(seconds=float(seconds)) // dt.timedelta(microseconds=1)
    for p in ([1.0, 2.0], [1.0, float("nan")]):
        table = pa.table({"ts": [0, 1], "t": pa.array([-3, interval - 4], pa.int64()).cast(pa.timestamp("us")),
                          "p": p})
        plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B) "
                             f"DEFINE B AS t - A.t < INTERVAL '{seconds}' SECOND AND p <> A.p", table)
        stats: dict = {}
        assert run_plan(plan, table, stats=stats).to_pylist() == run_plan(plan, table, ReferenceMatcher).to_pylist()
        assert stats["matcher"] == "python"


@pytest.mark.parametrize("values, runs_on", [
    ([1, 2, None, 4, 5, 1, 2], "kernel"),
    ([2**51] * 7, "python"),  # a BIGINT sum could pass 2^53: declined
    ([1.5, float("nan"), -0.0, None, 2.5, float("nan"), 0.5], "kernel"),
    ([None] * 7, "kernel"),
])
def test_running_aggregates_in_define(values, runs_on):
    # SUM, AVG, MIN, MAX over the rows a thread labelled so far, NULL while it has none
    # (NaN above every number, as SQL orders it).
    table = pa.table({"ts": list(range(len(values))), "v": pa.array(values, pa.float64() if any(
        isinstance(v, float) for v in values) else pa.int64())})
    text = ("ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS f ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            "PATTERN (A B+ C) DEFINE B AS SUM(B.v) >= MIN(A.v), "
            "C AS MAX(B.v) >= AVG(B.v) AND AVG(v) >= 0 AND COUNT(B.v) >= 0")
    plan = compile_query(text, table)
    stats: dict = {}
    got = _run(lambda: run_plan(plan, table, stats=stats).to_pylist())
    assert got == _run(lambda: run_plan(plan, table, ReferenceMatcher).to_pylist())
    assert stats.get("matcher", "python") == runs_on


@pytest.mark.parametrize("table, text", [
    # a dictionary-encoded BIGINT column summed in DEFINE: the 2^53 check sees through the encoding
    (pa.table({"ts": [0, 1, 2], "v": pa.array([2**52 + 1, 2**52 + 1, 1]).dictionary_encode()}),
     "PATTERN (A+) DEFINE A AS SUM(A.v) < 9007199254740996"),
    # a BIGINT value or sum times a factor: float64 would round where Python's ints do not
    (pa.table({"ts": [0, 1, 2], "w": [2**51 + 1, 2**51, 0]}), "PATTERN (A B) DEFINE B AS SUM(w) * 3 < 13510798882111492"),
    (pa.table({"ts": [0, 1], "w": [2**52 + 1, 1]}), "PATTERN (A B) DEFINE B AS A.w * 3 > 13510798882111494"),
])
def test_integer_arithmetic_the_kernel_would_round_is_declined(table, text):
    plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS f ONE ROW PER MATCH " + text, table)
    stats: dict = {}
    assert run_plan(plan, table, stats=stats).to_pylist() == run_plan(plan, table, ReferenceMatcher).to_pylist()
    assert stats["matcher"] == "python"


def test_abs_of_an_integer_product_keeps_the_overflow_check():
    table = pa.table({"ts": [0], "x": [2**30], "y": [2**30], "z": [8]})
    plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS ABS(A.x * A.y) * A.z > 0", table)
    for run in (lambda: run_plan(plan, table, ReferenceMatcher), lambda: run_plan(plan, table, use_kernel=True),
                lambda: run_plan(plan, table, use_kernel=False)):
        with pytest.raises(DataError, match="bigint overflow in multiplication"):
            run()


@pytest.mark.parametrize("table, text", [
    # k=1 runs on the kernel (its SUM overflows, found by the per-match path); k=2's values
    # do not fit the kernel's floats and fail too
    (pa.table({"k": [1, 1, 2, 2], "ts": [0, 1, 0, 1], "p": [1, 2, 2**60, 2**60 + 1], "v": [2**62] * 4}),
     "PARTITION BY k ORDER BY ts MEASURES SUM(v) AS s ONE ROW PER MATCH PATTERN (A B*) DEFINE B AS p >= A.p"),
    # k=2 meets a skip error in the kernel's own selection
    (pa.table({"k": [1, 1, 1, 2, 2], "ts": [0, 1, 2, 0, 1], "w": [5, 5, 1, 5, 5], "v": [2**62, 2**62, 1, 1, 1]}),
     "PARTITION BY k ORDER BY ts MEASURES SUM(v) AS s ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST B "
     "PATTERN (A+ B?) DEFINE A AS A.w > 1, B AS B.w = 1"),
])
def test_the_first_partition_error_is_reported_first(table, text):
    # Measures of kernel partitions are computed after every partition's selection: an
    # error of the first partition still comes before a later partition's.
    plan = compile_query(text, table)
    with pytest.raises(DataError) as want:
        run_plan(plan, table, ReferenceMatcher)
    with pytest.raises(DataError) as got:
        run_plan(plan, table, use_kernel=True)
    assert str(got.value) == str(want.value) and "input row 0" in str(got.value)


def test_the_kernel_cache_is_keyed_on_every_kernel_module(tmp_path, monkeypatch):
    # numba takes a cached function as fresh while its own file is unchanged: a kernel calling
    # a compiled function of another file would keep running that file's old code after an
    # edit. So every module with kernels is listed, and each kernel's cache entry is keyed
    # on the source of all of them.
    import importlib.util
    import pathlib
    import types

    import sparkcep
    from sparkcep import jit
    from sparkcep.runtime import kernel

    root = pathlib.Path(sparkcep.__file__).parent
    with_kernels = {("sparkcep." + ".".join(p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
                    for p in root.rglob("*.py") if "@njit" in p.read_text()}
    assert with_kernels == set(jit.KERNEL_MODULES), with_kernels ^ set(jit.KERNEL_MODULES)

    kernel.candidates.signatures  # noqa: B018 (builds the module's dispatchers)
    stamp = kernel.candidates._cache._cache_file._source_stamp
    assert stamp[1] == jit.source_key()

    # An edit of a module the kernel calls into changes that key.
    copy = tmp_path / "kernel_program.py"
    copy.write_text((root / "runtime" / "kernel_program.py").read_text() + "\n# edited\n")
    find = importlib.util.find_spec

    def edited(name, *args):
        spec = find(name, *args)
        return types.SimpleNamespace(origin=str(copy)) if name == "sparkcep.runtime.kernel_program" else spec

    monkeypatch.setattr(jit, "_state", {})
    monkeypatch.setattr(importlib.util, "find_spec", edited)
    assert jit.source_key() != stamp[1]


_LONG = pa.table({"ts": list(range(300)), "price": [i % 7 for i in range(300)]})


@pytest.mark.parametrize("clause, mode", [
    # a match of ~300 rows: more history nodes than a search's first arena holds
    ("ONE ROW PER MATCH PATTERN (A B* C) DEFINE B AS ts > A.ts, C AS price = 6", "sql"),
    ("ALL ROWS PER MATCH PATTERN (A B* C) DEFINE B AS ts > A.ts, C AS price = 6", "sql"),
    # each row splits the threads by B's running count: more than the first thread lists hold
    ("ONE ROW PER MATCH PATTERN (A (B | C)* D) DEFINE B AS COUNT(B.*) >= 1, C AS price >= 0, D AS price = 6",
     "sql"),
    ("ONE ROW PER MATCH PATTERN (A B* C) DEFINE B AS ts > A.ts, C AS price = 6 AND COUNT(*) > 280", "matchregex"),
    # more matches from one start than the first room for accepted matches
    ("ONE ROW PER MATCH ALL MATCHES PATTERN (A B*) DEFINE B AS ts > A.ts AND ts < 70", "sql"),
])
def test_search_buffers_grow_mid_partition(clause, mode):
    """A search that outgrows its buffers starts again on larger ones (kernel.GROW): the
    answer is unchanged, on every path that searches (whole partitions, run batches)."""
    text = f"ORDER BY ts MEASURES FIRST(ts) AS t0, LAST(ts) AS t1, COUNT(*) AS n {clause}"
    plan = compile_query(text, _LONG, mode)
    kernel = KernelMatcher.for_plan(plan)
    assert kernel is not None and kernel.automaton() is None  # the thread-list search
    expected = run_plan(plan, _LONG, ReferenceMatcher).to_pylist()
    assert expected
    assert run_plan(plan, _LONG, use_kernel=True).to_pylist() == expected

    def runs(plan, part, row_ids):
        backend = LocalBackend(plan, part.cols, plan.query.order_by[0].index, part.n, lambda r: row_ids[r])
        return run_partition(plan, part.n, backend, 2, None, lambda r: row_ids[r])

    assert run_plan(plan, _LONG, partition_runner=runs).to_pylist() == expected


# Loops whose rows a search may read gliding (kernel._glide): per variable, the place of the
# loop's own thread in the closure after its MATCH. A loop glides where that closure comes
# back to it and holds only distinct MATCH places of other variables, reached without an
# anchor, a net change of exclusion or an empty-iteration check; an ACCEPT in it (a loop
# that can end the pattern) stops it too.
GLIDE_CASES = [
    ("A B* C", {"B": 0}),
    ("A B+ C", {"B": 0}),
    ("B* C", {"B": 0}),
    ("A B*? C", {"B": 1}),
    ("A (B | C)* D", {"B": 0, "C": 1}),
    ("A (B | C E*?)* D", {"B": 0, "C": 1, "E": 3}),  # C's closure is B's and E after it
    ("(A B*)+ C", {"B": 0, "A": 1}),
    ("A {- B -}* {- C -}", {"B": 0}),  # the exclusion left and entered again: no net change
    ("A (B C)* D", {}),
    ("A {- B* -} C", {}),
    ("A (B?)* C", {}),
    ("A B* B C", {}),  # the second B would take every row the loop takes
    ("A B*", {}),
]


@pytest.mark.parametrize("pattern, glides", GLIDE_CASES)
def test_which_loops_glide(pattern, glides):
    from sparkcep.runtime.kernel_program import closure_table

    plan = compile_query(f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE B AS price > 0", _ROWS)
    glide = closure_table(plan.program).glide
    got = {plan.labels[ins.a]: int(glide[pc]) for pc, ins in enumerate(plan.program.instructions) if glide[pc] >= 0}
    assert got == glides


def _kernel_as_reference(text: str, table: pa.Table, mode: str = "sql") -> tuple[list, dict]:
    """The kernel's rows, checked equal to the reference matcher's, and its run's stats."""
    plan = compile_query(text, table, mode)
    stats: dict = {}
    got = run_plan(plan, table, use_kernel=True, stats=stats).to_pylist()
    assert got == run_plan(plan, table, ReferenceMatcher).to_pylist(), text
    assert stats["matcher"] == "kernel", stats
    return got, stats


def test_a_long_loop_glides_to_the_reference_answer():
    """MatchRegex finance4's shape: GAP* runs while the price stays at or under HI's."""
    price = [5, 3, 4, 2, 5, 9, 1, 2, 2, 1, 3, None, 8, 7, 7, 6, 9, 2, 1, 0] * 6
    table = pa.table({"ts": list(range(len(price))), "price": pa.array(price, pa.int64())})
    loops = ("PATTERN (HI GAP* LO) DEFINE GAP AS price <= HI.price, LO AS price > HI.price * 1.5",
             # rows only DOWN takes glide as well as rows only UP takes: one closure for both
             "PATTERN (HI (UP | DOWN)* LO) DEFINE UP AS price >= HI.price AND price <= HI.price * 1.2, "
             "DOWN AS price < HI.price, LO AS price > HI.price * 1.5")
    for (mode, skip), loop in itertools.product((("sql", ""), ("matchregex", ""), ("sql", "ALL MATCHES")), loops):
        text = f"ORDER BY ts MEASURES FIRST(ts) AS t0, LAST(ts) AS t1, MAX(HI.price) AS hi {skip} {loop}"
        got, stats = _kernel_as_reference(text, table, mode)
        assert got and stats["glided_rows"] > 20, stats


def test_a_glide_where_no_thread_takes_the_row_keeps_the_match_found_before():
    """A C matched at row 1, B went on alone at row 2, and nothing takes row 3: the glide
    ends the search there, and the match from before it stands."""
    price = [0, 5, 2, 0, 7, 0, 5, 2, 0]
    table = pa.table({"ts": list(range(len(price))), "price": price})
    text = ("ORDER BY ts MEASURES FIRST(ts) AS t0, LAST(ts) AS t1 PATTERN (A B* C) "
            "DEFINE A AS price = 0, B AS price > A.price, C AS price > A.price AND price > 3")
    got, stats = _kernel_as_reference(text, table)
    assert got[0] == {"t0": 0, "t1": 1} and stats["glides"] > 0


def test_a_glide_moves_to_another_loop_only_where_its_closure_is_the_same_list():
    """After B the places are [B, C, D]; after C they are [B, C, D, E]. C taking a row alone
    must not glide on with B's list: E, which may take the next row alone, would be lost."""
    price = [10, 8, 7, 25, 10, 3, 12, 9, 30, 12, 1] * 3
    table = pa.table({"ts": list(range(len(price))), "price": price})
    text = ("ORDER BY ts MEASURES FIRST(ts) AS t0, COUNT(E.*) AS ne ALL ROWS PER MATCH "
            "PATTERN (A (B | C E*?)* D) DEFINE A AS price >= 5, B AS price > A.price AND price < A.price * 1.5, "
            "C AS price < A.price, E AS price > A.price * 2, D AS price = A.price")
    got, stats = _kernel_as_reference(text, table)
    assert any(r["ne"] for r in got) and stats["glides"] > 0


def test_a_shut_glide_gate_opens_again_when_loops_grow_long():
    """Glides of no row each (LO right after HI) shut the gate; later rows where GAP runs
    three rows open it again, measured afresh every kernel.REOPEN searches (as a stream's
    rows change), so the searches there glide."""
    from sparkcep.runtime.kernel import REOPEN

    short, long_ = REOPEN * 5 // 8, REOPEN  # searches: the gate reopens within the long ones
    price = [10, 20] * short + [10, 5, 5, 5, 20] * long_
    table = pa.table({"ts": list(range(len(price))), "price": pa.array(price, pa.int64())})
    plan = compile_query("ORDER BY ts MEASURES FIRST(ts) AS t0, LAST(ts) AS t1 "
                         "PATTERN (HI GAP* LO) DEFINE GAP AS price <= HI.price, LO AS price > HI.price * 1.5", table)
    stats: dict = {}
    got = run_plan(plan, table, use_kernel=True, stats=stats)
    assert stats["matcher"] == "kernel" and got.num_rows == short + long_
    assert got.column("t1").to_pylist()[-1] == len(price) - 1
    # Shut for good, the long loops would glide no row at all.
    assert stats["glided_rows"] > short + long_ - REOPEN, stats


# Loops whose label assignments multiply: a quantified group holding a quantifier or an alternation.
MULTIPLYING = ["(A B*)+ C", "A (B | C)* D", "A (B | C D*?)* A"]
LOOPS = st.sampled_from(["A B* C", "A B+ C", "A B*? C", "A B+? C", "A (B | C)* D", "A B* C* D", "B* C", "A B* B C",
                         "(A B*)+ C", "A B+ C+?", "A B* C | A D", "A (B | C D*?)* A"])


@st.composite
def walks(draw):
    """A price walking by small steps (long runs up, down and flat), NULLs here and there."""
    n = draw(st.integers(1, 60))
    steps = draw(st.lists(st.one_of(st.sampled_from([-1, 0, 0, 1, 2]), st.none()), min_size=n, max_size=n))
    price, p = [], 3
    for s in steps:
        p += s or 0
        price.append(None if s is None else p)
    base = dt.datetime(2024, 1, 1)
    return pa.table({
        "ts": list(range(n)),
        "k": [i * 3 // n for i in range(n)],
        "price": pa.array(price, pa.int64()),
        "x": pa.array([None if v is None else v * 0.5 for v in price], pa.float64()),
        "t": pa.array([base + dt.timedelta(seconds=i // 2) for i in range(n)], pa.timestamp("us")),
    })


@settings(max_examples=examples(600, scaled=True), deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_queries(LOOPS), walks(), st.integers(1, 4))
def test_gliding_loops_equal_the_reference(query, table, batch):
    """Loops over long runs, where searches glide: the whole partition and run batches."""
    text = query[0]
    if "MAXLENGTH" not in text and "WITHIN" not in text and any(f"({p})" in text for p in MULTIPLYING):
        # These patterns' label assignments multiply with each row of a run both variables
        # take. The brute-force reference walks them all (and ALL MATCHES reports them all):
        # over a 60-row walk neither ended (the reference took 44 s over 19 rows of one), so
        # unbounded they get the walk's first 12 rows.
        table = table.slice(0, 12)
    _check_kernel(query, table, batch)


@st.composite
def all_matches_queries(draw):
    """ALL MATCHES over loops, some of whose label assignments multiply row by row."""
    pattern = draw(LOOPS)
    names = used_vars(pattern)
    # Half the variables take every row (no DEFINE) or most rows, so that searches hold many
    # threads: the bound is met at every size.
    lax = st.sampled_from(["price >= PREV(price) OR price IS NULL", "price <> 5", "x IS NULL OR x < 3"])
    defines = [f"{v} AS {draw(st.one_of(kernel_conditions(v, names), lax))}" for v in names if draw(st.booleans())]
    return f"""{draw(st.sampled_from(["", "PARTITION BY k"]))} ORDER BY ts
        MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n
        ONE ROW PER MATCH ALL MATCHES PATTERN ({pattern})
        SUBSET U = ({names[0]}, {names[-1]})
        {('DEFINE ' + ', '.join(defines)) if defines else ''}"""


def _failed(outcome) -> bool:
    return isinstance(outcome, tuple) and outcome[0] == "error"


def _outcome(fn):
    """_run of a query's output table."""
    return _run(lambda: fn().to_pylist())


@contextlib.contextmanager
def _bounded(max_runs: int = MAX_RUNS, max_nodes: int = MAX_NODES):
    """ALL MATCHES' bounds set on the kernel and the Python matcher alike."""
    with contextlib.ExitStack() as stack:
        for cls in (KernelMatcher, Matcher):
            stack.enter_context(patch.object(cls, "max_runs", max_runs))
            stack.enter_context(patch.object(cls, "max_nodes", max_nodes))
        yield


@pytest.mark.parametrize("kind, peak_of, scale", [("max_runs", "peak_threads", 1), ("max_nodes", "peak_nodes", 10)])
@settings(max_examples=examples(300, scaled=True), deadline=None, suppress_health_check=list(HealthCheck))
@given(all_matches_queries(), walks(), st.integers(10, 300), st.integers(1, 8))
def test_all_matches_bounds_hold_alike_on_kernel_and_vm(kind, peak_of, scale, text, table, bound, batch):
    """An ALL MATCHES search holding more than the bound's threads and finished matches at
    once (``max_runs``), or making more than its history nodes (``max_nodes``: label paths,
    equal ones shared), stops with the same DataError, at the same row, on the kernel, the
    Python matcher and in run batches; below it they give the same rows (the whole 60-row
    walks: the bound keeps them small). Where the kernel's peak is known, the bound is also
    put just below it (an error) and at it (none). Bounds are above one thread's closure
    (at most 4 places here): the kernel skips starts whose second row no variable takes,
    where the Python matcher reads the first row and holds that closure."""
    plan = compile_query(text, table)
    assert KernelMatcher.for_plan(plan) is not None, text
    stats: dict = {}
    with _bounded(**{kind: 2000 * scale}):
        capped = _outcome(lambda: run_plan(plan, table, use_kernel=True, stats=stats))
    peak = stats.get(peak_of, 0)  # none after an error
    bounds = [bound * scale] + ([peak - 1, peak] if not _failed(capped) and peak > 5 else [])
    for b in bounds:
        with _bounded(**{kind: b}):
            expected = _outcome(lambda: run_plan(plan, table, Matcher, use_kernel=False))
            assert _outcome(lambda: run_plan(plan, table, use_kernel=True)) == expected, (text, b)
            assert _outcome(lambda: run_plan(plan, table, partition_runner=_in_batches(batch))) == expected, (text, b)
        if b == peak:
            assert expected == capped
        elif b == peak - 1:
            assert _failed(expected), (text, b)


def test_all_matches_stop_at_the_default_bound():
    """``(A B*)+ C`` over a rise: the assignments double with each row; past 250 000 held at
    once the query stops with a DataError naming the row, on either matcher."""
    n = 30
    frame = pd.DataFrame({"ts": range(n), "price": range(n)})
    text = """ORDER BY ts MEASURES MATCH_NUMBER() AS m ONE ROW PER MATCH ALL MATCHES
        PATTERN ((A B*)+ C) DEFINE C AS price < 0"""
    with pytest.raises(DataError, match="more than 250000 matches and partial matches from one start row") as e:
        sparkcep.match_recognize(frame, text)
    assert e.value.row is not None and e.value.row < n
    plan = compile_query(text, pa.Table.from_pandas(frame))
    with pytest.raises(DataError) as vm:
        run_plan(plan, pa.Table.from_pandas(frame), Matcher, use_kernel=False)
    assert str(vm.value) == str(e.value)


def test_all_matches_stop_at_the_default_node_bound():
    """``A B* C* D`` with B and C taking every row: row k holds about k threads (where B gave
    way to C), each adding a history node, so a search makes k²/2 nodes while it holds far
    fewer than the bound on threads; past 2 000 000 nodes the query stops with a DataError
    naming the row, about row 2 000."""
    n = 2100
    frame = pd.DataFrame({"ts": range(n), "price": range(n)})
    text = """ORDER BY ts MEASURES MATCH_NUMBER() AS m ONE ROW PER MATCH ALL MATCHES
        PATTERN (A B* C* D) DEFINE D AS price < 0"""
    with pytest.raises(DataError, match="more than 2000000 label assignments from one start row") as e:
        sparkcep.match_recognize(frame, text)
    assert 1950 < e.value.row < 2050


@pytest.mark.parametrize("pattern", ["A B* C", "A (B | E)* C", "A B+ C"])
def test_the_node_bound_inside_a_glide_stops_at_the_python_matchers_row(pattern):
    """A glide reads a run of rows without a step between them, a history node a row: where
    the node bound falls inside it, the error names the row where the Python matcher's
    history passed the bound, not the glide's last."""
    table = pa.table({"ts": list(range(40)), "price": list(range(40))})
    text = f"""ORDER BY ts MEASURES MATCH_NUMBER() AS m ONE ROW PER MATCH ALL MATCHES
        PATTERN ({pattern}) DEFINE C AS price < PREV(price){", E AS price < 0" if "E" in pattern else ""}"""
    plan = compile_query(text, table)
    stats: dict = {}
    run_plan(plan, table, use_kernel=True, stats=stats)
    assert stats["glided_rows"] > 0
    for bound in range(4, 44, 3):
        with _bounded(max_nodes=bound):
            expected = _outcome(lambda: run_plan(plan, table, Matcher, use_kernel=False))
            assert _outcome(lambda: run_plan(plan, table, use_kernel=True)) == expected, bound
        assert _failed(expected) == (bound < 40), bound


@pytest.mark.parametrize("pattern", ["A B* B C", "A (B | B) C", "(A | A B) B* C", "A (B C | B C)* D", "(A B*)+ C",
                                     "A (B | C)* D", "A B* C* D", "(A | B)* C"])
@pytest.mark.parametrize("rows", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
def test_all_matches_share_label_paths_as_the_reference(pattern, rows):
    """ALL MATCHES reports each label assignment once: threads that reach the same place with
    the same labels (two ways through the pattern) are one, and a step's threads labelling a
    row alike share one history. Every row taken (no DEFINE but a rare end), over 9 rows."""
    table = pa.table({"ts": list(range(9)), "price": [3, 4, 4, 5, 3, 6, 6, 7, 2]})
    text = f"""ORDER BY ts MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n
        {rows} ALL MATCHES PATTERN ({pattern}) DEFINE {'D' if 'D' in pattern else 'C'} AS price <= PREV(price)"""
    plan = compile_query(text, table)
    expected = run_plan(plan, table, ReferenceMatcher).to_pylist()
    assert expected
    assert run_plan(plan, table, use_kernel=True).to_pylist() == expected
    assert run_plan(plan, table, Matcher, use_kernel=False).to_pylist() == expected


SKIP_FAILS = "AFTER MATCH SKIP TO LAST C PATTERN (A B C?) DEFINE B AS price > PREV(price), C AS price < PREV(price)"
ERROR_ORDER_CASES = [
    # The first match's MEASURES divide by zero; the second match has no C to resume at.
    ([3, 5, 1, 4, 6, 2], SKIP_FAILS, None),
    # The first start's matches divide by zero (and two of them take two rows); a later
    # start holds more than 10 label assignments (B and C both take every 7).
    ([3, 7, 1, 7, 7, 7, 7, 7, 7, 7, 7], "ALL MATCHES PATTERN (A B* C*) DEFINE B AS price = 7, C AS price = 7", 10),
]


@pytest.mark.parametrize("prices, rest, bound", ERROR_ORDER_CASES)
@pytest.mark.parametrize("rows", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
@pytest.mark.parametrize("keys", [1, 2])
def test_measures_of_earlier_matches_fail_before_the_selection(prices, rest, bound, rows, keys):
    """Where the selection fails after matches whose MEASURES fail, the kernel and run
    batches report the MEASURES error, as the Python matcher does (it measures each match as
    it selects it): in either output mode, and with a key before (its matches measured
    first); in batches the failing match may be in the batch of the selection's error or in
    an earlier one."""
    n = len(prices)
    lead = [] if keys == 1 else [4, 4]  # a key of two rows first, matched without error
    table = pa.table({"k": [0] * len(lead) + [1] * n, "ts": list(range(len(lead) + n)), "price": lead + prices})
    text = f"PARTITION BY k ORDER BY ts MEASURES 10 / (FIRST(price) - 3) AS r {rows} {rest}"
    plan = compile_query(text, table)
    assert KernelMatcher.for_plan(plan) is not None
    with _bounded(bound or MAX_RUNS):
        expected = _outcome(lambda: run_plan(plan, table, Matcher, use_kernel=False))
        assert _failed(expected) and "division by zero" in expected[1]
        assert _outcome(lambda: run_plan(plan, table, use_kernel=True)) == expected
        for batch in (1, 2, 3, 5, 20):
            assert _outcome(lambda b=batch: run_plan(plan, table, partition_runner=_in_batches(b))) == expected, batch


@pytest.mark.parametrize("prices, rest, bound", ERROR_ORDER_CASES)
@pytest.mark.parametrize("keys", [1, 2])
def test_measure_columns_of_earlier_matches_fail_before_the_selection(prices, rest, bound, keys):
    """ONE ROW PER MATCH measures the kernel computes as columns: a SUM beyond BIGINT (of a
    column no condition reads, so the kernel takes the data) goes to the per-match path, and
    its error comes before the selection's, as on the Python matcher (all keys at once for
    the skip error, key by key for ALL MATCHES)."""
    lead = [] if keys == 1 else [4, 3]  # a key of two rows first, without a match
    n = len(prices)
    table = pa.table({"k": [0] * len(lead) + [1] * n, "ts": list(range(len(lead) + n)),
                      "price": lead + prices, "x": [2**62] * (len(lead) + n)})
    plan = compile_query(f"PARTITION BY k ORDER BY ts MEASURES SUM(x) AS s ONE ROW PER MATCH {rest}", table)
    with _bounded(bound or MAX_RUNS):
        expected = _outcome(lambda: run_plan(plan, table, Matcher, use_kernel=False))
        assert _failed(expected) and "bigint overflow" in expected[1]
        assert _outcome(lambda: run_plan(plan, table, use_kernel=True)) == expected


def test_run_batches_raise_no_error_of_a_start_the_selection_skips():
    """A DEFINE error at a start inside an earlier match is not the query's: the sequential
    engine never searches that start, and neither may run batches (which search a batch's
    starts ahead of the selection)."""
    table = pa.table({"ts": [0, 1, 2, 3], "price": [1, 4, 3, 5]})
    plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B) DEFINE B AS 10 / (price - 3) > 0", table)
    expected = run_plan(plan, table, Matcher, use_kernel=False).to_pylist()
    assert len(expected) == 2
    for batch in (1, 2, 4, 8):
        assert run_plan(plan, table, partition_runner=_in_batches(batch)).to_pylist() == expected, batch


def test_explain_names_the_measures_that_run_per_match():
    df = pd.DataFrame({"ts": range(6), "p": [1, 2, 3, 2, 1, 4]})

    def measures_line(text):
        (line,) = [ln for ln in sparkcep.explain(df, text).splitlines() if ln.startswith("measures:")]
        return line

    head = "ORDER BY ts MEASURES FIRST(A.p) AS a, MIN(B.p) AS lo, CLASSIFIER() AS c, "
    tail = " PATTERN (A B+) DEFINE B AS p > PREV(p)"
    assert measures_line(head + "COUNT(B.*) AS n" + tail) == \
        "measures: whole columns from the compiled matchers' matches"
    assert measures_line(head + "MIN(B.p) + 1 > COUNT(*) AS b, CASE WHEN CLASSIFIER() = 'A' THEN 1 END AS w" + tail) == \
        "measures: whole columns from the compiled matchers' matches"
    assert measures_line(head + "CAST(MIN(B.p) AS varchar(2)) AS b, array_agg(p) AS ps" + tail) == \
        "measures: per match in Python: b, ps"
    assert measures_line(head + "CAST(MIN(B.p) AS varchar) AS b, CAST(AVG(B.p) AS VARCHAR) = '2.0' AS t" + tail) == \
        "measures: whole columns from the compiled matchers' matches"
    assert measures_line(head + "COUNT(B.*) AS n ALL ROWS PER MATCH" + tail) == \
        "measures: whole columns from the compiled matchers' matches"
    # (rows a match leaves out, and unmatched rows, are columns too)
    assert measures_line(head + "COUNT(B.*) AS n ALL ROWS PER MATCH PATTERN (A {- B -} B+) DEFINE B AS p > PREV(p)") == \
        "measures: whole columns from the compiled matchers' matches"
    assert measures_line(head + "COUNT(B.*) AS n ALL ROWS PER MATCH WITH UNMATCHED ROWS" + tail) == \
        "measures: whole columns from the compiled matchers' matches"


def test_a_cast_to_a_large_integer_is_compared_exactly():
    """CAST(double AS BIGINT) past 2^31 compared with a double: exact, as the row evaluator
    compares a Python int with a float (numpy would compare both as doubles)."""
    df = pd.DataFrame({"t": [0, 1], "y": [2.0**53, 1.0]})
    got = sparkcep.match_recognize(df, "ORDER BY t MEASURES CAST(A.y AS BIGINT) + 1 > A.y AS gt "
                                       "PATTERN (A) DEFINE A AS TRUE")
    assert got["gt"].tolist() == [True, True]
    rows = sparkcep.match_recognize(df, "ORDER BY t MEASURES t AS row_t PATTERN (A) DEFINE A AS CAST(y AS BIGINT) + 1 > y")
    assert rows["row_t"].tolist() == [0, 1]


def test_a_double_expression_holding_integers_is_written_as_the_row_evaluator_writes_it():
    """CAST(... AS VARCHAR) of a DOUBLE expression whose rows may hold integers (a CASE with
    an integer branch): the masks and measure columns write what the row evaluator writes."""
    table = pa.table({"t": list(range(6)), "v": [4, 1, 4, 3, 0, 4]})
    text = ("ORDER BY t MEASURES t AS row_t, CAST(CASE WHEN FIRST(A.v) > 2 THEN FIRST(A.v) ELSE 2.5 END AS VARCHAR) "
            "AS s PATTERN (A) DEFINE A AS CAST(CASE WHEN v > 2 THEN v ELSE 2.5 END AS VARCHAR) = '4'")
    plan = compile_query(text, table)
    want = run_plan(plan, table, Matcher, use_kernel=False).to_pylist()
    assert want == [{"row_t": 0, "s": "4"}, {"row_t": 2, "s": "4"}, {"row_t": 5, "s": "4"}]
    assert run_plan(plan, table, use_kernel=True).to_pylist() == want
