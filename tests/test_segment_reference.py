"""Tests of the segment-query reference (tests/segment_reference.py) on its own: each aggregate
against a direct numpy computation, and hand-worked segment sets on tiny series.

Positions in the expected sets are 0-based positions within the partition (after ORDER BY);
every table here has a column ``i`` equal to that position, so the matches are read back
through the measures ``first(i)`` / ``last(i)``.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest

from tests.segment_reference import (
    SegmentReferenceError,
    linear_reg_r2,
    mann_kendall_test,
    segment_matches,
    segment_reference,
    zscore,
)

PRICES = [1, 2, 3, 2, 1, 2, 3]


def series(**cols) -> pa.Table:
    n = len(next(iter(cols.values())))
    return pa.table({"i": list(range(n)), **cols})


def spans(query: str, table: pa.Table, aggregates=None) -> list[tuple[int, int]]:
    """(start, end) of every match, read from the measures (partition keys dropped)."""
    q = query.replace("PATTERN", "MEASURES first(i) AS s__, last(i) AS e__ PATTERN", 1)
    return [(r["s__"], r["e__"]) for r in segment_reference(q, table, aggregates)]


def all_segments(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i, n)]


# ====================================================================== aggregates vs numpy
def np_r2(x, y):
    return float(np.corrcoef(x, y)[0, 1] ** 2)


@pytest.mark.parametrize("seed", range(6))
def test_linear_reg_r2_against_corrcoef(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    x = rng.normal(size=n)
    y = 0.7 * x + rng.normal(size=n) * rng.uniform(0.1, 2)
    assert linear_reg_r2(list(x), list(y)) == pytest.approx(np_r2(x, y), rel=1e-9)
    cov = np.cov(x, y, bias=True)[0, 1]
    assert linear_reg_r2(list(x), list(y), signed=True) == pytest.approx(np.sign(cov) * np_r2(x, y), rel=1e-9)


def test_linear_reg_r2_signed_negative_and_perfect():
    x = [1.0, 2.0, 3.0, 4.0]
    assert linear_reg_r2(x, [8.0, 6.0, 4.0, 2.0], signed=True) == pytest.approx(-1.0)
    assert linear_reg_r2(x, [8.0, 6.0, 4.0, 2.0]) == pytest.approx(1.0)
    assert linear_reg_r2([1, 2], [5, 3]) == pytest.approx(1.0)  # two points always fit


@pytest.mark.parametrize(
    "x, y",
    [
        ([1.0], [2.0]),  # one row
        ([1.0, None, 3.0], [2.0, 5.0, None]),  # one complete pair only
        ([2.0, 2.0, 2.0], [1.0, 5.0, 3.0]),  # var(x) = 0
        ([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]),  # var(y) = 0
        ([], []),
    ],
)
def test_linear_reg_r2_null_cases(x, y):
    assert linear_reg_r2(x, y) is None
    assert linear_reg_r2(x, y, signed=True) is None


def test_linear_reg_r2_skips_incomplete_pairs():
    x = [1.0, 2.0, None, 4.0, 5.0, 6.0]
    y = [2.0, 1.0, 7.0, None, 4.0, 9.0]
    keep = [0, 1, 4, 5]
    assert linear_reg_r2(x, y) == pytest.approx(np_r2([x[k] for k in keep], [y[k] for k in keep]))


def np_mann_kendall(values):
    v = np.array([x for x in values if x is not None], dtype=float)
    n = len(v)
    if n < 2:
        return None
    s = 0
    for a in range(n):
        for b in range(a + 1, n):
            s += np.sign(v[b] - v[a])
    var = n * (n - 1) * (2 * n + 5) / 18.0
    return float((s - np.sign(s)) / np.sqrt(var))


@pytest.mark.parametrize("seed", range(6))
def test_mann_kendall_against_double_loop(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 12))
    x = list(np.round(rng.normal(size=n) + np.arange(n) * rng.uniform(-0.5, 0.5), 1))  # ties likely
    if seed % 2:
        x[int(rng.integers(0, n))] = None
    expected = np_mann_kendall(x)
    got = mann_kendall_test(x)
    assert (got is None and expected is None) or got == pytest.approx(expected)


def test_mann_kendall_hand_values():
    # 1 2 3 4: S = 6, V = 4·3·13/18 = 26/3, Z = 5/sqrt(26/3)
    assert mann_kendall_test([1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(26 / 3))
    # 3 1 2: S = -1 - 1 + 1 = -1, Z = 0 for S = -1 (S + 1 = 0)
    assert mann_kendall_test([3, 1, 2]) == 0.0
    assert mann_kendall_test([2, 2, 2]) == 0.0
    assert mann_kendall_test([5]) is None
    assert mann_kendall_test([None, 5, None]) is None


@pytest.mark.parametrize("seed", range(4))
def test_zscore_against_numpy(seed):
    rng = np.random.default_rng(200 + seed)
    k = int(rng.integers(2, 6))
    prev = rng.normal(size=k)
    x = float(rng.normal())
    assert zscore(x, list(prev)) == pytest.approx((x - prev.mean()) / prev.std())


def test_zscore_null_cases():
    assert zscore(None, [1.0, 2.0]) is None
    assert zscore(3.0, [1.0, None]) is None
    assert zscore(3.0, [2.0, 2.0, 2.0]) is None  # stdev 0


def random_table(n=8, seed=7):
    rng = np.random.default_rng(seed)
    return series(
        t=[float(v) for v in np.cumsum(rng.uniform(0.5, 2.0, size=n))],
        x=[float(v) for v in np.round(rng.normal(size=n), 2)],
        k=[int(v) for v in rng.integers(-5, 6, size=n)],
    )


def test_every_aggregate_in_measures_against_numpy():
    table = random_table()
    q = """ORDER BY i
        MEASURES first(i) AS s, last(i) AS e, first(x) AS fx, last(x) AS lx, x AS plain,
                 min(x) AS mn, max(x) AS mx, sum(x) AS sx, avg(x) AS ax, count(x) AS cx,
                 count(*) AS cs, sum(k) AS sk, linear_reg_r2(t, x) AS r2,
                 linear_reg_r2_signed(t, x) AS r2s, mann_kendall_test(x) AS mk,
                 spread(x) AS sp, MATCH_NUMBER() AS num
        PATTERN (S)
        DEFINE SEGMENT S AS window(3, 5)"""
    rows = segment_reference(q, table, {"SPREAD": lambda a: float(np.max(a) - np.min(a))})
    assert [(r["s"], r["e"]) for r in rows] == [(i, j) for i in range(8) for j in range(i, 8) if 3 <= j - i + 1 <= 5]
    t = np.array(table.column("t").to_pylist())
    x = np.array(table.column("x").to_pylist())
    k = np.array(table.column("k").to_pylist())
    for num, r in enumerate(rows, start=1):
        sl = slice(r["s"], r["e"] + 1)
        assert r["num"] == num
        assert r["fx"] == x[sl][0] and r["lx"] == x[sl][-1] and r["plain"] == x[sl][-1]
        assert r["mn"] == x[sl].min() and r["mx"] == x[sl].max()
        assert r["sx"] == pytest.approx(x[sl].sum()) and r["ax"] == pytest.approx(x[sl].mean())
        assert r["cx"] == r["cs"] == len(x[sl])
        assert r["sk"] == int(k[sl].sum()) and isinstance(r["sk"], int)
        assert r["r2"] == pytest.approx(np_r2(t[sl], x[sl]))
        cov = np.cov(t[sl], x[sl], bias=True)[0, 1]
        assert r["r2s"] == pytest.approx(np.sign(cov) * np_r2(t[sl], x[sl]))
        assert r["mk"] == pytest.approx(np_mann_kendall(list(x[sl])))
        assert r["sp"] == pytest.approx(x[sl].max() - x[sl].min())


def test_aggregates_skip_nulls():
    table = series(x=[None, 2.0, None, 5.0, 1.0, None])
    q = """ORDER BY i
        MEASURES first(i) AS s, last(i) AS e, first(x) AS fx, last(x) AS lx, count(x) AS cx,
                 count(*) AS cs, sum(x) AS sx, avg(x) AS ax, min(x) AS mn, max(x) AS mx,
                 mann_kendall_test(x) AS mk, nancount(x) AS nc
        PATTERN (S) DEFINE SEGMENT S AS window()"""
    rows = segment_reference(q, table, {"NANCOUNT": lambda a: float(np.isnan(a).sum())})
    by_span = {(r["s"], r["e"]): r for r in rows}
    assert len(rows) == 21
    r = by_span[(0, 5)]
    assert (r["fx"], r["lx"], r["cx"], r["cs"]) == (None, None, 3, 6)
    assert (r["sx"], r["ax"], r["mn"], r["mx"]) == (8.0, pytest.approx(8 / 3), 1.0, 5.0)
    assert r["mk"] == pytest.approx(np_mann_kendall([2.0, 5.0, 1.0]))
    assert r["nc"] == 3.0  # NULL reaches a user aggregate as NaN
    r = by_span[(2, 2)]  # only a NULL: NULL aggregates, count 0
    assert (r["cx"], r["sx"], r["ax"], r["mn"], r["mx"], r["mk"]) == (0, None, None, None, None, None)
    assert by_span[(1, 2)]["mk"] is None  # one non-NULL value


def test_timestamp_aggregates_count_seconds():
    base = dt.datetime(2024, 1, 1)
    ts = [base + dt.timedelta(hours=h) for h in (0, 1, 3, 6, 10)]
    x = [1.0, 3.0, 2.0, 6.0, 5.0]
    table = series(ts=ts, x=x)
    q = """ORDER BY ts
        MEASURES first(i) AS s, last(i) AS e, first(ts) AS fts, last(ts) AS lts, min(ts) AS mnts,
                 sum(ts) AS sts, avg(ts) AS ats, linear_reg_r2(ts, x) AS r2,
                 mann_kendall_test(ts) AS mk, secs(ts) AS us
        PATTERN (S) DEFINE SEGMENT S AS window(2, 5)"""
    rows = segment_reference(q, table, {"SECS": lambda a: float(a[0])})
    secs = np.array([(v - dt.datetime(1970, 1, 1)).total_seconds() for v in ts])
    assert len(rows) == 10
    for r in rows:
        sl = slice(r["s"], r["e"] + 1)
        assert r["fts"] == ts[r["s"]] and r["lts"] == ts[r["e"]] and r["mnts"] == ts[r["s"]]
        assert isinstance(r["fts"], dt.datetime)
        assert r["sts"] == pytest.approx(secs[sl].sum()) and r["ats"] == pytest.approx(secs[sl].mean())
        assert r["r2"] == pytest.approx(np_r2(secs[sl], np.array(x)[sl]))
        assert r["mk"] == pytest.approx(np_mann_kendall(list(secs[sl])))
        assert r["us"] == secs[r["s"]]


def test_zscore_in_a_point_condition():
    # zscore(x, 3) at row i over rows i-3..i-1:
    #   i=3: prev 1 2 3, mean 2, sd sqrt(2/3): (10-2)/0.816 = 9.8 > 1
    #   i=4: prev 2 3 10, mean 5: 4 is below the mean;  i=5: prev 3 10 4, mean 5.67: below
    #   i=6: prev 10 4 4, mean 6: below;  i=7, i=8: prev 4 4 4, stdev 0 -> NULL (9 > 4 does not count)
    #   i<3: fewer than 3 rows before -> NULL
    x = [1, 2, 3, 10, 4, 4, 4, 4, 9]
    table = series(x=x)
    q = "ORDER BY i PATTERN (Z & W) DEFINE Z AS zscore(x, 3) > 1, SEGMENT W AS true"
    assert spans(q, table) == [(3, 3)]
    q = """ORDER BY i MEASURES first(i) AS s PATTERN (Z & W)
           DEFINE Z AS zscore(x, 3) IS NOT NULL, SEGMENT W AS true"""
    got = {r["s"] for r in segment_reference(q, table)}
    assert got == {3, 4, 5, 6}
    for r in got:
        prev = np.array(x[r - 3:r], dtype=float)
        assert prev.std() > 0
    # population stdev: after 1 2 3, x = 4 scores (4-2)/sqrt(2/3) = 2.449 (a sample stdev of 1
    # would give 2.0); a NULL among the k rows before makes it NULL.
    q = "ORDER BY i PATTERN (Z & W) DEFINE Z AS zscore(x, 3) > 2.2, SEGMENT W AS true"
    assert spans(q, series(x=[1, 2, 3, 4, 1, 2, 3, 4])) == [(3, 3), (7, 7)]
    assert spans(q, series(x=[1, 2, 3, 4, 1, None, 3, 4, 9])) == [(3, 3)]


# ====================================================================== hand-worked segment sets
def test_up_down_share_the_boundary_row():
    # prices 1 2 3 2 1 2 3 (rows 0..6). UP [i,k]: p[k] > p[i], >= 2 rows; DOWN [k,j]: p[j] < p[k].
    # UP ending at 2 (from 0 or 1) + DOWN from 2 ending at 3, 4 or 5: (0|1, 3|4|5)
    # UP ending at 3 (from 0: 2 > 1) + DOWN [3,4]: (0,4). No other UP end has a DOWN after it.
    q = """ORDER BY i PATTERN (UP DOWN)
        DEFINE SEGMENT UP AS last(price) > first(price) AND window(2, NULL),
               SEGMENT DOWN AS last(price) < first(price) AND window(2, NULL)"""
    assert spans(q, series(price=PRICES)) == [(0, 3), (0, 4), (0, 5), (1, 3), (1, 4), (1, 5)]


def test_point_variables_take_consecutive_rows():
    # A: price rose into the row (rows 1, 2, 5, 6); B: price fell (rows 3, 4).
    # A B with point variables only: B on the row after A: (2, 3).
    q = """ORDER BY i PATTERN ((A B) & W)
        DEFINE A AS price > PREV(price), B AS price < PREV(price), SEGMENT W AS true"""
    assert spans(q, series(price=PRICES)) == [(2, 3)]


def test_point_then_segment_share_the_row():
    # A (price = 3: rows 2, 6) then a falling segment D starting on A's own row:
    # D [2,3], [2,4], [2,5]; nothing falls after row 6.
    q = """ORDER BY i PATTERN (A D)
        DEFINE A AS price = 3, SEGMENT D AS last(price) < first(price)"""
    assert spans(q, series(price=PRICES)) == [(2, 3), (2, 4), (2, 5)]


def test_and_of_segments():
    # A: last > first; B: 3 or 4 rows. Of [0,2] [0,3] [1,3] [1,4] [2,4] [2,5] [3,5] [3,6] [4,6]
    # (the 3- and 4-row segments), A holds on [0,2] (1<3), [0,3] (1<2), [3,6] (2<3), [4,6] (1<3).
    q = """ORDER BY i PATTERN (A & B)
        DEFINE SEGMENT A AS last(price) > first(price), SEGMENT B AS window(3, 4)"""
    assert spans(q, series(price=PRICES)) == [(0, 2), (0, 3), (3, 6), (4, 6)]


def test_not_and_any_segment():
    # ~A & W: the segments where last(price) > first(price) is not true, i.e. p[j] <= p[i]:
    # i=0: 0, 4;  i=1: 1, 3, 4, 5;  i=2: 2..6;  i=3: 3, 4, 5;  i=4: 4;  i=5: 5;  i=6: 6  (17)
    q = """ORDER BY i PATTERN ((~A) & W)
        DEFINE SEGMENT A AS last(price) > first(price), SEGMENT W AS true"""
    expected = [(0, 0), (0, 4), (1, 1), (1, 3), (1, 4), (1, 5), (2, 2), (2, 3), (2, 4), (2, 5), (2, 6),
                (3, 3), (3, 4), (3, 5), (4, 4), (5, 5), (6, 6)]
    assert spans(q, series(price=PRICES)) == expected


def test_not_is_not_sql_not_on_null():
    # S is NULL (so does not match) wherever an end is NULL: ~S matches there; NOT(...) does not.
    # S matches (p[j] > p[i], both non-NULL): (0,2) (0,3) (0,5) (2,5) (3,5).
    p = [1, None, 3, 2, None, 5]
    table = series(p=p)
    matched = [(0, 2), (0, 3), (0, 5), (2, 5), (3, 5)]
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS last(p) > first(p)"
    assert spans(q, table) == matched
    q = "ORDER BY i PATTERN ((~S) & W) DEFINE SEGMENT S AS last(p) > first(p), SEGMENT W AS true"
    assert spans(q, table) == [s for s in all_segments(6) if s not in matched]
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS NOT (last(p) <= first(p))"
    assert spans(q, table) == matched


def test_repeated_segment_variable_shares_rows():
    # U{2}: U [i,k], U [k,j] with p[i] < p[k] < p[j]: values 1 (rows 0, 4) < 2 (1, 3, 5) < 3 (2, 6).
    # i=0: k=1 -> j=2, 6; k=3 -> j=6; k=5 -> j=6;  i=4: k=5 -> j=6.  Segments (0,2) (0,6) (4,6).
    q = "ORDER BY i PATTERN (U{2}) DEFINE SEGMENT U AS last(price) > first(price)"
    assert spans(q, series(price=PRICES)) == [(0, 2), (0, 6), (4, 6)]
    # exactly two rows each: rising pairs sharing the middle row -> 3-row rises 1 2 3
    q = "ORDER BY i PATTERN (R{2}) DEFINE SEGMENT R AS window(2, 2) AND last(price) > first(price)"
    assert spans(q, series(price=PRICES)) == [(0, 2), (4, 6)]
    # a point variable repeated takes consecutive rows: rises into rows 1, 2, 5, 6
    q = """ORDER BY i PATTERN (P{2} & W)
        DEFINE P AS price > PREV(price), SEGMENT W AS true"""
    assert spans(q, series(price=PRICES)) == [(1, 2), (5, 6)]


def test_unbounded_repetition_of_a_segment_variable():
    # U+ with U = 2-row rise: chains of rising steps sharing rows: every strictly rising run
    # of >= 2 rows. Rises: 0-1, 1-2, 4-5, 5-6.
    q = "ORDER BY i PATTERN (U+) DEFINE SEGMENT U AS window(2, 2) AND last(price) > first(price)"
    assert spans(q, series(price=PRICES)) == [(0, 1), (0, 2), (1, 2), (4, 5), (4, 6), (5, 6)]
    q = "ORDER BY i PATTERN (U{2,}) DEFINE SEGMENT U AS window(2, 2) AND last(price) > first(price)"
    assert spans(q, series(price=PRICES)) == [(0, 2), (4, 6)]


def test_alternation_of_a_point_sequence_and_a_segment():
    # (A B) | C: A B are point variables and take consecutive rows even though the other
    # branch holds a segment variable: A (price 1: rows 0, 4), B (price 2) on the next row:
    # (0,1), (4,5). C: 3 rows starting at price 3: [2,4] ([6,8] is past the end).
    q = """ORDER BY i PATTERN ((A B) | C)
        DEFINE A AS price = 1, B AS price = 2, SEGMENT C AS window(3, 3) AND first(price) = 3"""
    assert spans(q, series(price=PRICES)) == [(0, 1), (2, 4), (4, 5)]


def test_vanished_item_lets_its_neighbours_decide():
    # v = 1 5 2 1 2 7. P S? Q with P: v = 1 (rows 0, 3), Q: v = 2 (rows 2, 4), S: 3 rows.
    # S present: P[a] S[a, a+2] Q[a+2] share both ends: a=0 -> Q on row 2: (0,2); a=3 -> v5 = 7.
    # S absent: P and Q are point variables, consecutive rows: (3,4).
    q = """ORDER BY i PATTERN (P S? Q)
        DEFINE P AS v = 1, Q AS v = 2, SEGMENT S AS window(3, 3)"""
    assert spans(q, series(v=[1, 5, 2, 1, 2, 7])) == [(0, 2), (3, 4)]


def test_group_junction_is_decided_as_written():
    # CHOICE (nested sequences are not flattened): in ((A B?) C) the junction between the group
    # (A B?) and C is decided by the group as written, which holds the segment variable B, so
    # it shares the boundary row even when B? takes no rows.
    # v = 1 1 2 1; A and C: v = 1 (rows 0, 1, 3); B: 2 rows, rising.
    # B? empty: A[a] C[a] on the same row: (0,0) (1,1) (3,3).
    # B? taken: A[a] B[a, a+1] C[a+1] needs v[a+1] = 1 > v[a] = 1: never.
    # (Flattened, A and C would meet on consecutive rows instead: (0,1) only.)
    q = """ORDER BY i PATTERN ((A B?) C)
        DEFINE A AS v = 1, C AS v = 1, SEGMENT B AS window(2, 2) AND last(v) > first(v)"""
    assert spans(q, series(v=[1, 1, 2, 1])) == [(0, 0), (1, 1), (3, 3)]


def test_not_of_a_star_is_not_of_a_plus():
    # A: price >= 2 (rows 1 2 3 5 6). A+ matches inside the runs 1..3 and 5..6: 9 segments.
    # ~(A*) & W and ~(A+) & W are the other 28 - 9 = 19 segments.
    table = series(price=PRICES)
    runs = [(i, j) for i in range(7) for j in range(i, 7) if all(PRICES[k] >= 2 for k in range(i, j + 1))]
    assert len(runs) == 9
    expected = [s for s in all_segments(7) if s not in runs]
    for quant in ("*", "+"):
        q = f"""ORDER BY i PATTERN ((~(A{quant})) & W)
            DEFINE A AS price >= 2, SEGMENT W AS true"""
        assert spans(q, table) == expected


def test_and_ignores_an_empty_only_operand():
    # (A? & W) matches exactly where A does: an operand's empty match is nothing for &.
    q = "ORDER BY i PATTERN (A? & W) DEFINE A AS price = 2, SEGMENT W AS true"
    assert spans(q, series(price=PRICES)) == [(1, 1), (3, 3), (5, 5)]


def test_undefined_variable_is_any_single_row():
    # X (no DEFINE) is one row; then S shares it: S [k, j] with 2 rows ending at price 3.
    q = "ORDER BY i PATTERN (X S) DEFINE SEGMENT S AS window(2, 2) AND last(price) = 3"
    assert spans(q, series(price=PRICES)) == [(1, 2), (5, 6)]


def test_reference_to_a_point_variable():
    # p = 5 3 4 6 2 7. A1: a drop into the row (rows 1, 4). W: 2 or 3 rows from A1's row.
    # INC ends W (shared row) and must be above A1's price.
    # a=1 (3): INC on row 2 (4 > 3), row 3 (6 > 3);  a=4 (2): row 5 (7 > 2), row 6 is past the end.
    q = """ORDER BY i MEASURES first(i) AS s, last(i) AS e, last(p) - first(p) AS gain
        PATTERN (A1 W INC)
        DEFINE A1 AS p < PREV(p), SEGMENT W AS window(2, 3), INC AS INC.p > A1.p"""
    rows = segment_reference(q, series(p=[5, 3, 4, 6, 2, 7]))
    assert rows == [{"s": 1, "e": 2, "gain": 1}, {"s": 1, "e": 3, "gain": 3}, {"s": 4, "e": 5, "gain": 5}]


def test_reference_to_a_segment_aggregate_and_last_row():
    # p = 5 3 4 6 2 7. DROP [a,k]: p[k] < p[a]; REC [k,b] (shared k) ends above DROP's first price.
    # a=0 (5): k in 1, 2, 4; b > k with p[b] > 5: 3, 5 -> (0,3), (0,5)
    # a=1 (3): k=4 (2); b=5 -> (1,5);  a=2 (4): k=4, b=5 -> (2,5);  a=3 (6): k=4, b=5 (7 > 6) -> (3,5)
    table = series(p=[5, 3, 4, 6, 2, 7])
    q = """ORDER BY i PATTERN (DROP REC)
        DEFINE SEGMENT DROP AS last(p) < first(p),
               SEGMENT REC AS last(p) > first(DROP.p)"""
    assert spans(q, table) == [(0, 3), (0, 5), (1, 5), (2, 5), (3, 5)]
    # DROP.p outside an aggregate is DROP's last row (= REC's first row); REC: 2 rows rising
    # above it. DROP ends at 1 (from 0), 2 (from 0) or 4 (from 0..3); the next row is higher each time.
    q = """ORDER BY i PATTERN (DROP REC)
        DEFINE SEGMENT DROP AS last(p) < first(p),
               SEGMENT REC AS window(2, 2) AND last(p) > DROP.p"""
    assert spans(q, table) == [(0, 2), (0, 3), (0, 5), (1, 5), (2, 5), (3, 5)]


def test_reference_under_not():
    # A1 ((W & (~INC))): INC is a segment variable reading A1's price; under ~ it is decided
    # with A1 fixed by the same match. p = 5 3 4 6 2 7; A1: a drop into the row (rows 1, 4);
    # W: 2-3 rows from A1's row; INC: the segment climbs more than 2 above A1.
    # a=1 (A1 = 3): [1,2] max 4 <= 5 -> ~INC holds -> (1,2);  [1,3] max 6 > 5 -> no.
    # a=4 (A1 = 2): [4,5] max 7 > 4 -> no;  [4,6] is past the end.
    table = series(p=[5, 3, 4, 6, 2, 7])
    q = """ORDER BY i PATTERN (A1 (W & (~INC)))
        DEFINE A1 AS p < PREV(p), SEGMENT W AS window(2, 3), SEGMENT INC AS max(p) > A1.p + 2"""
    assert spans(q, table) == [(1, 2)]
    q = q.replace("(~INC)", "INC")  # the complement within W: (1,3) and (4,5)
    assert spans(q, table) == [(1, 3), (4, 5)]


def test_window_on_a_numeric_column():
    # x = 0 1 1.5 3 4 7; x[e] - x[s] in [2, 3]: (0,3)=3 (1,3)=2 (1,4)=3 (2,4)=2.5 (4,5)=3
    table = series(x=[0.0, 1.0, 1.5, 3.0, 4.0, 7.0])
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(x, 2, 3)"
    assert spans(q, table) == [(0, 3), (1, 3), (1, 4), (2, 4), (4, 5)]
    # no upper bound: spans >= 4: (0,4)=4 (0,5)=7 (1,5)=6 (2,5)=5.5 (3,5)=4
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(x, 4, NULL)"
    assert spans(q, table) == [(0, 4), (0, 5), (1, 5), (2, 5), (3, 5)]
    # a conjunct of a larger condition, qualified by the variable
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(S.x, 2, 3) AND count(*) = 2"
    assert spans(q, table) == [(4, 5)]


def test_window_on_a_timestamp_column():
    base = dt.datetime(2021, 2, 10)
    days = [0, 1, 2, 2.5, 5]
    table = series(ts=[base + dt.timedelta(days=d) for d in days])
    # span in [1, 2] days: (0,1)=1 (0,2)=2 (1,2)=1 (1,3)=1.5
    q = "ORDER BY ts PATTERN (S) DEFINE SEGMENT S AS window(ts, 1, 2, DAY)"
    assert spans(q, table) == [(0, 1), (0, 2), (1, 2), (1, 3)]
    # fractional bounds: [0.5, 1] day: (0,1) (1,2) (2,3)
    q = "ORDER BY ts PATTERN (S) DEFINE SEGMENT S AS window(ts, 0.5, 1, DAY)"
    assert spans(q, table) == [(0, 1), (1, 2), (2, 3)]
    q = "ORDER BY ts PATTERN (S) DEFINE SEGMENT S AS window(ts, 12, 12, HOUR)"
    assert spans(q, table) == [(2, 3)]
    q = "ORDER BY ts PATTERN (S) DEFINE SEGMENT S AS window(ts, 2.5, NULL, DAY)"
    assert spans(q, table) == [(0, 3), (0, 4), (1, 4), (2, 4), (3, 4)]


def test_window_on_a_column_with_nulls():
    # t = 0 1 NULL 3 4: segments starting or ending on row 2 are not TRUE; a NULL inside is fine.
    # t[e] - t[s] in [2, 3]: (0,3)=3 (1,3)=2 (1,4)=3;  (0,4)=4 is too long.
    table = series(t=[0, 1, None, 3, 4])
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(t, 2, 3)"
    assert spans(q, table) == [(0, 3), (1, 3), (1, 4)]
    q = "ORDER BY i PATTERN ((~S) & W) DEFINE SEGMENT S AS window(t, 0, NULL), SEGMENT W AS true"
    assert spans(q, table) == [(0, 2), (1, 2), (2, 2), (2, 3), (2, 4)]


def test_window_row_counts():
    table = series(price=PRICES)
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(0, 2)"  # same as window(1, 2)
    assert spans(q, table) == [s for s in all_segments(7) if s[1] - s[0] + 1 <= 2]
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(6)"
    assert spans(q, table) == [(0, 5), (1, 6)]
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window(6, NULL)"
    assert spans(q, table) == [(0, 5), (0, 6), (1, 6)]
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS window()"
    assert spans(q, table) == all_segments(7)


def test_sql_nulls_in_point_conditions():
    # PREV outside the partition is NULL; NULL comparisons are not TRUE.
    table = series(p=[None, 2, 3, None, 1])
    q = "ORDER BY i PATTERN (A & W) DEFINE A AS PREV(p) IS NULL, SEGMENT W AS true"
    assert spans(q, table) == [(0, 0), (1, 1), (4, 4)]
    q = "ORDER BY i PATTERN (A & W) DEFINE A AS p > PREV(p) OR p < 0, SEGMENT W AS true"
    assert spans(q, table) == [(2, 2)]
    q = "ORDER BY i PATTERN (A & W) DEFINE A AS NOT (p <= NEXT(p, 2)), SEGMENT W AS true"
    # row 0: NULL; row 1: 2 <= NULL: NULL; row 2: 3 <= 1 false -> NOT true
    assert spans(q, table) == [(2, 2)]


def test_partitions_order_and_match_number():
    # partitions a, b, then NULL; within each, ORDER BY t DESC (ties by input position).
    table = pa.table({
        "Sym": ["b", "a", None, "a", "b", None, "a"],
        "t": [1, 1, 5, 2, 2, 6, 2],
        "id": [0, 1, 2, 3, 4, 5, 6],
    })
    q = """PARTITION BY sym ORDER BY t DESC
        MEASURES first(id) AS fid, last(id) AS lid, MATCH_NUMBER() AS mn
        PATTERN (S) DEFINE SEGMENT S AS window(2, 2)"""
    # a: t 2 (id 3), 2 (id 6), 1 (id 1) -> order 3, 6, 1;  b: 4, 0;  NULL: 5, 2
    assert segment_reference(q, table) == [
        {"Sym": "a", "fid": 3, "lid": 6, "mn": 1},
        {"Sym": "a", "fid": 6, "lid": 1, "mn": 2},
        {"Sym": "b", "fid": 4, "lid": 0, "mn": 1},
        {"Sym": None, "fid": 5, "lid": 2, "mn": 1},
    ]
    assert segment_matches(q, table) == [(("a",), 0, 1), (("a",), 1, 2), (("b",), 0, 1), ((None,), 0, 1)]


def test_order_by_nulls_last_by_default():
    table = pa.table({"i": [0, 1, 2], "t": [2, None, 1]})
    q = """ORDER BY t MEASURES first(i) AS a, last(i) AS b
        PATTERN (S) DEFINE SEGMENT S AS window(3, 3)"""
    assert segment_reference(q, table) == [{"a": 2, "b": 1}]
    q = q.replace("ORDER BY t", "ORDER BY t NULLS FIRST")
    assert segment_reference(q, table) == [{"a": 1, "b": 0}]


def test_integer_and_float_division():
    table = series(k=[-7, 2, 0], f=[1.0, 0.0, -1.0])
    q = """ORDER BY i MEASURES first(k) / last(k) AS q, first(f) / last(f) AS fq
        PATTERN (S) DEFINE SEGMENT S AS window(2, 2) AND first(i) = 0"""
    assert segment_reference(q, table) == [{"q": -3, "fq": math.inf}]
    q = """ORDER BY i MEASURES first(k) / last(k) AS q
        PATTERN (S) DEFINE SEGMENT S AS window(2, 2) AND first(i) = 1"""
    with pytest.raises(ZeroDivisionError):
        segment_reference(q, table)
    q = """ORDER BY i MEASURES last(f) / first(f) AS fq
        PATTERN (S) DEFINE SEGMENT S AS window(1, 1) AND first(i) = 1"""
    assert math.isnan(segment_reference(q, table)[0]["fq"])


def test_user_aggregate_in_a_condition():
    # SPREAD = max - min over the segment's rows; >= 2 on prices 1 2 3 2 1 2 3: segments holding
    # both a 1 and a 3.
    table = series(price=PRICES)
    q = "ORDER BY i PATTERN (S) DEFINE SEGMENT S AS spread(price) >= 2"
    got = spans(q, table, {"SPREAD": lambda a: float(a.max() - a.min())})
    assert got == [s for s in all_segments(7) if {1, 3} <= set(PRICES[s[0]:s[1] + 1])]


def test_names_seg_keyword_and_case():
    # SEG is SEGMENT; columns are found case-insensitively; the partition column keeps the
    # table's spelling and a measure the name as written.
    table = pa.table({"Grp": ["x", "x", "x"], "Price": [1, 3, 2], "i": [0, 1, 2]})
    q = """PARTITION BY grp ORDER BY I MEASURES max(PRICE) AS "Top", count(*) AS n
        PATTERN (S) DEFINE SEG S AS window(2, 2)"""
    assert segment_reference(q, table) == [{"Grp": "x", "Top": 3, "n": 2}, {"Grp": "x", "Top": 3, "n": 2}]


def test_reference_rules_are_checked():
    table = series(price=PRICES)
    with pytest.raises(SegmentReferenceError):  # referenced variable under a quantifier
        segment_reference("ORDER BY i PATTERN (A+ S) DEFINE SEGMENT S AS last(price) > A.price", table)
    with pytest.raises(SegmentReferenceError):  # under ~
        segment_reference("ORDER BY i PATTERN ((~A) S) DEFINE SEGMENT S AS last(price) > A.price", table)


def test_bare_column_in_a_segment_condition_is_refused():
    with pytest.raises(SegmentReferenceError):
        segment_reference("ORDER BY i PATTERN (S) DEFINE SEGMENT S AS price > 1", series(price=PRICES))


# ====================================================================== the cold wave (T-REX Figure 3)
COLD_WAVE = """
    PARTITION BY station
    ORDER BY tstamp
    MEASURES first(tstamp) AS start_ts, last(tstamp) AS end_ts, first(i) AS s, last(i) AS e,
             mann_kendall_test(temp) AS mk
    PATTERN ((W (DOWN & DIFF & WAVE_WINDOW) W) & UP & OVERALL_WINDOW)
    DEFINE SEGMENT W AS true,
           SEGMENT WAVE_WINDOW AS window(WAVE_WINDOW.tstamp, 1, 2, DAY),
           SEGMENT DIFF AS last(DIFF.temp) - first(DIFF.temp) < -5,
           SEGMENT DOWN AS linear_reg_r2(DOWN.tstamp, DOWN.temp) >= 0.95,
           SEGMENT OVERALL_WINDOW AS window(tstamp, 7, 9, DAY),
           SEGMENT UP AS mann_kendall_test(temp) >= 2.0
"""


def test_cold_wave_figure_3():
    # The query of Figure 3 with bounds scaled to 10 daily readings: a steep drop of 1-2 days
    # (WAVE_WINDOW), more than 5 degrees (DIFF), nearly linear (DOWN, R² >= 0.95), padded by W on
    # both sides, inside 7-9 days (OVERALL_WINDOW) whose Mann-Kendall Z >= 2 (UP).
    #
    # AUS, days 0..9:  10 12 14 16 18 8 15 20 22 24
    # Wave candidates (span 1-2 days) with last - first < -5:
    #   [4,5] 18 -> 8 (-10): two points, R² = 1                      -> the wave
    #   [3,5] 16 18 8 (-8): x dev -1 0 1, y dev 2 4 -6, cov -8/3, var x 2/3, var y 56/3,
    #         R² = (64/9) / (112/9) = 0.571 < 0.95                    -> not DOWN
    #   every other 2- or 3-row segment falls by at most 3.
    # W [a,4] wave [4,5] W [5,b] share rows: a <= 4, b >= 5; OVERALL 7-9 days: b - a in 7..9:
    #   (0,7) (0,8) (0,9) (1,8) (1,9) (2,9).
    # Mann-Kendall S (later greater minus later smaller, per element):
    #   [0,7] 10 12 14 16 18 8 15 20: 5+4+3+0-1+2+1 = 14, n=8, V=65.33, Z = 13/8.083 = 1.61
    #   [0,8] + 22 above all 8: S = 22, n=9, V=92, Z = 21/9.592 = 2.19
    #   [0,9] + 24 above all 9: S = 31, n=10, V=125, Z = 30/11.18 = 2.68
    #   [1,8] S[0,8] - 10's share (7 greater - 1 smaller = 6) = 16, n=8, Z = 15/8.083 = 1.86
    #   [1,9] S[0,9] - 10's share (8 - 1 = 7) = 24, n=9, Z = 23/9.592 = 2.40
    #   [2,9] S[1,9] - 12's share (7 - 1 = 6) = 18, n=8, Z = 17/8.083 = 2.10
    # UP (Z >= 2): (0,8) (0,9) (1,9) (2,9).
    # BOS is flat (Z = 0 everywhere): nothing.
    base = dt.datetime(2021, 2, 8)
    aus = [10, 12, 14, 16, 18, 8, 15, 20, 22, 24]
    bos = [5] * 10
    table = pa.table({
        "station": ["BOS"] * 10 + ["AUS"] * 10,
        "tstamp": [base + dt.timedelta(days=d) for d in range(10)] * 2,
        "temp": [float(v) for v in bos + aus],
        "i": list(range(10)) * 2,
    })
    rows = segment_reference(COLD_WAVE, table)
    assert [(r["station"], r["s"], r["e"]) for r in rows] == [
        ("AUS", 0, 8), ("AUS", 0, 9), ("AUS", 1, 9), ("AUS", 2, 9)]
    z = {(r["s"], r["e"]): r["mk"] for r in rows}
    assert z[(0, 8)] == pytest.approx(21 / math.sqrt(92))
    assert z[(0, 9)] == pytest.approx(30 / math.sqrt(125))
    assert z[(1, 9)] == pytest.approx(23 / math.sqrt(92))
    assert z[(2, 9)] == pytest.approx(17 / math.sqrt(8 * 7 * 21 / 18))
    assert rows[0]["start_ts"] == base and rows[0]["end_ts"] == base + dt.timedelta(days=8)
    # Z of the two windows that miss the bar, to check the hand arithmetic above
    assert mann_kendall_test(aus[0:8]) == pytest.approx(13 / math.sqrt(8 * 7 * 21 / 18))
    assert mann_kendall_test(aus[1:9]) == pytest.approx(15 / math.sqrt(8 * 7 * 21 / 18))
    assert linear_reg_r2([3, 4, 5], aus[3:6]) == pytest.approx(64 / 112)


def test_cold_wave_without_a_wave():
    # The paper's ~ example: warm-ups (7-9 days, Z >= 2) that hold no cold wave.
    # AUS: the only wave is [4,5], and the warm-ups (0,8) (0,9) (1,9) (2,9) all cover it
    # (W [a,4] wave W [5,b]): nothing.
    # DAL rises every day, so it has no wave, and every 7-9 day window is a warm-up (n = 8:
    # S = 28, Z = 27/8.083 = 3.34; longer ones more): (0,7) (0,8) (0,9) (1,8) (1,9) (2,9).
    q = COLD_WAVE.replace("PATTERN ((W", "PATTERN ((~(W").replace("W) & UP", "W)) & UP")
    base = dt.datetime(2021, 2, 8)
    rising = list(range(10))
    table = pa.table({
        "station": ["AUS"] * 10 + ["DAL"] * 10,
        "tstamp": [base + dt.timedelta(days=d) for d in range(10)] * 2,
        "temp": [float(v) for v in [10, 12, 14, 16, 18, 8, 15, 20, 22, 24] + rising],
        "i": list(range(10)) * 2,
    })
    rows = segment_reference(q, table)
    assert [(r["station"], r["s"], r["e"]) for r in rows] == [
        ("DAL", 0, 7), ("DAL", 0, 8), ("DAL", 0, 9), ("DAL", 1, 8), ("DAL", 1, 9), ("DAL", 2, 9)]
