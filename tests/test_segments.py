"""Segment queries (T-REX): hand-worked segments, every forced plan, the aggregates against
numpy, and the error table."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest

import sparkcep
from sparkcep.aggregates import kernels as agg
from sparkcep.segments.operators import PLANS

PRICES = pa.table({"t": list(range(7)), "price": [1.0, 2, 3, 2, 1, 2, 3]})


def segments(table, query, **kw) -> list[tuple[int, int]]:
    text = query.replace("PATTERN", "MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN", 1)
    out = None
    for how in PLANS:  # every plan gives the same segments
        got = [(r["s"], r["e"]) for r in sparkcep.match_recognize(table, text, plan=how, **kw).to_pylist()]
        assert out is None or got == out, how
        out = got
    return out


@pytest.mark.parametrize("query, expected", [
    # Segment neighbours share their boundary row (Definition 2.1).
    ("ORDER BY t PATTERN (UP DOWN) DEFINE SEGMENT UP AS last(price) > first(price) AND window(2, NULL), "
     "SEGMENT DOWN AS last(price) < first(price) AND window(2, NULL)",
     [(0, 3), (0, 4), (0, 5), (1, 3), (1, 4), (1, 5)]),
    ("ORDER BY t PATTERN (A & B) DEFINE SEGMENT A AS window(2, 3), SEGMENT B AS last(price) > first(price)",
     [(0, 1), (0, 2), (1, 2), (4, 5), (4, 6), (5, 6)]),
    ("ORDER BY t PATTERN (~A & W) DEFINE SEGMENT A AS last(price) > first(price), SEGMENT W AS window(2, 2)",
     [(2, 3), (3, 4)]),
    ("ORDER BY t PATTERN (A{2}) DEFINE SEGMENT A AS last(price) > first(price) AND window(2, 2)", [(0, 2), (4, 6)]),
    # A segment and a point share the boundary; C alone is a one-row segment.
    ("ORDER BY t PATTERN ((A B) | C) DEFINE SEGMENT A AS window(2, 2), B AS price = 3, C AS price = 1",
     [(0, 0), (1, 2), (4, 4), (5, 6)]),
    # Two point variables joined by & take consecutive rows around them (A C D: no segment).
    ("ORDER BY t PATTERN ((A C) & (A D)) DEFINE A AS price = 1, C AS price = 2, D AS price > 1.5", [(0, 1), (4, 5)]),
    # A reference: INC's row against A1's row, W a segment between them.
    ("ORDER BY t PATTERN (A1 W INC) DEFINE SEGMENT W AS window(1, 3), A1 AS price = 1, INC AS INC.price > A1.price",
     [(0, 1), (0, 2), (4, 5), (4, 6)]),
    # An optional item vanishes and its neighbours meet by their own rule (points: next row).
    ("ORDER BY t PATTERN (A X? B) DEFINE A AS price = 1, B AS price = 2, SEGMENT X AS window(3, 3)",
     [(0, 1), (4, 5)]),
    ("ORDER BY t PATTERN (~(A*) & W) DEFINE A AS price < 3, SEGMENT W AS window(7)", [(0, 6)]),
    ("ORDER BY t PATTERN (() & W) DEFINE SEGMENT W AS window()", []),
])
def test_hand_worked_segments(query, expected):
    assert segments(PRICES, query) == expected


def test_windows_on_columns_and_partitions():
    day = dt.datetime(2024, 1, 1)
    t = pa.table({"k": ["a"] * 5 + ["b"] * 3, "ts": [day + dt.timedelta(days=d) for d in (0, 1, 3, 4, 9, 0, 2, 4)],
                  "v": [1, 5, 2, 6, 3, 1, 2, 3]})
    q = """PARTITION BY k ORDER BY ts MEASURES FIRST(v) AS a, LAST(v) AS b, COUNT(*) AS n, MATCH_NUMBER() AS m
        PATTERN (W & UP) DEFINE SEGMENT W AS window(ts, 2, 3, DAY), SEGMENT UP AS last(v) > first(v)"""
    got = sparkcep.match_recognize(t, q).to_pylist()
    spans = [(r["a"], r["b"], r["n"]) for r in got]
    # a: days 0,1,3,4,9 -> pairs with span 2..3 days: (0,3) (1,3) (1,4); rising: 1→2, 5→2 no, 5→6
    # b: days 0,2,4 -> (0,2) (2,4): 1→2, 2→3
    assert [r["k"] for r in got] == ["a", "a", "b", "b"]
    assert spans == [(1, 2, 3), (5, 6, 3), (1, 2, 2), (2, 3, 2)]
    assert [r["m"] for r in got] == [1, 2, 1, 2]


def test_figure_3_cold_wave_on_a_small_series():
    # T-REX Figure 3 with small bounds: a steep drop of 2..3 days inside a 7..9 day warm-up.
    temps = [10, 11, 12, 13, 14, 6, 4, 15, 16, 17, 18, 19]
    day = dt.datetime(2021, 2, 1)
    t = pa.table({"station": ["x"] * len(temps), "tstamp": [day + dt.timedelta(days=i) for i in range(len(temps))],
                  "temp": [float(x) for x in temps]})
    q = """PARTITION BY station ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
        PATTERN ((W (DOWN & DIFF & WAVE_WINDOW) W) & UP & OVERALL_WINDOW)
        DEFINE SEGMENT W AS true,
               SEGMENT WAVE_WINDOW AS window(tstamp, 1, 2, DAY),
               SEGMENT DIFF AS last(DIFF.temp) - first(DIFF.temp) < -7,
               SEGMENT DOWN AS linear_reg_r2_signed(DOWN.tstamp, DOWN.temp) <= -0.9,
               SEGMENT OVERALL_WINDOW AS window(tstamp, 8, 9, DAY),
               SEGMENT UP AS mann_kendall_test(temp) >= 1.0"""
    got = {(r["s"].day, r["e"].day) for r in sparkcep.match_recognize(t, q).to_pylist()}
    # The drop is days 5..7 (14 → 6 → 4, −10, R² signed ≈ −0.92) or 5..6 (−8, two points:
    # R² −1); windows of 8..9 days around it with a rising trend overall.
    assert got and all(8 <= e - s <= 9 for s, e in got)
    assert all(s <= 5 and e >= 7 for s, e in got)


def test_aggregates_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    y = 2 * x + rng.normal(scale=0.5, size=40)
    y[7] = np.nan
    valid = np.ones(40, dtype=bool)
    valid[11] = False
    cx, cy = agg.Column(x, valid), agg.Column(y, np.ones(40, dtype=bool))
    starts = np.array([0, 3, 10, 20, 5])
    ends = np.array([9, 30, 15, 39, 5])
    reg = agg.Regression(cx, cy)
    r2, ok = reg.r2(starts, ends, signed=True)
    for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
        keep = valid[s:e + 1]
        xs, ys = x[s:e + 1][keep], y[s:e + 1][keep]
        if len(xs) < 2:
            assert not ok[k]
            continue
        if np.isnan(ys).any():
            assert math.isnan(r2[k])
            continue
        c = np.cov(xs, ys, bias=True)
        want = c[0, 1] ** 2 / (c[0, 0] * c[1, 1]) * np.sign(c[0, 1])
        assert ok[k] and r2[k] == pytest.approx(want, abs=1e-9)
    mk = agg.MannKendall(agg.Column(x, valid))
    z, zok = mk.z(starts, ends)
    for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
        v = x[s:e + 1][valid[s:e + 1]]
        n = len(v)
        if n < 2:
            assert not zok[k]
            continue
        S = sum(np.sign(v[j] - v[i]) for i in range(n) for j in range(i + 1, n))
        V = n * (n - 1) * (2 * n + 5) / 18
        want = (S - 1) / math.sqrt(V) if S > 0 else (S + 1) / math.sqrt(V) if S < 0 else 0.0
        assert zok[k] and z[k] == pytest.approx(want)
    sums = agg.Sums(cx)
    s, sok = sums.avg_of(starts, ends)
    table = agg.SparseTable(cx)
    lo, _ = table.min_of(starts, ends)
    hi, _ = table.max_of(starts, ends)
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        v = x[a:b + 1][valid[a:b + 1]]
        assert s[k] == pytest.approx(v.mean()) and lo[k] == v.min() and hi[k] == v.max()
    z, zok = agg.zscore(cx, 4)
    for i in range(4, 40):
        w = x[i - 4:i]
        if not valid[i - 4:i + 1].all():
            assert not zok[i]
            continue
        assert z[i] == pytest.approx((x[i] - w.mean()) / w.std())


def test_r2_is_null_when_flat_and_exact_on_a_line():
    t = pa.table({"t": list(range(6)), "v": [2.0, 2.0, 2.0, 1.0, 3.0, 5.0]})
    q = "ORDER BY t MEASURES FIRST(t) AS s, linear_reg_r2(t, v) AS r2 PATTERN (W) DEFINE SEGMENT W AS window(3, 3)"
    got = [(r["s"], r["r2"]) for r in sparkcep.match_recognize(t, q).to_pylist()]
    assert got[0] == (0, None)  # 2, 2, 2: no variance
    assert got[3] == (3, 1.0)  # 1, 3, 5: a perfect line is exactly 1


def test_user_aggregate_with_and_without_index():
    class Index:
        def __init__(self, v):
            self.p = np.concatenate([[0.0], np.cumsum(v)])

        def lookup(self, s, e):
            return self.p[e + 1] - self.p[s]

    sparkcep.register_aggregate("my_sum", lambda v: float(np.nansum(v)))
    sparkcep.register_aggregate("my_sum_indexed", lambda v: float(np.nansum(v)), index=Index)
    try:
        q = ("ORDER BY t MEASURES FIRST(t) AS s, my_sum(price) AS a, my_sum_indexed(price) AS b "
             "PATTERN (W & S) DEFINE SEGMENT W AS window(2, 2), SEGMENT S AS my_sum_indexed(price) >= 5")
        got = sparkcep.match_recognize(PRICES, q).to_pylist()
        assert [(r["s"], r["a"], r["b"]) for r in got] == [(1, 5.0, 5.0), (2, 5.0, 5.0), (5, 5.0, 5.0)]
    finally:
        sparkcep.unregister_function("my_sum")
        sparkcep.unregister_function("my_sum_indexed")


def test_aggregates_without_sharing_equal_the_shared_ones():
    # NULLs, NaN, ties, integers and a timestamp column: every aggregate that has a shared
    # index gives the same value computed from each segment's rows alone.
    base = dt.datetime(2024, 1, 1)
    t = pa.table({"t": list(range(9)),
                  "ts": [base + dt.timedelta(hours=h * h) for h in range(9)],
                  "v": [2.0, None, 2.0, float("nan"), 3.0, 5.0, 5.0, None, 1.0],
                  "k": [3, 1, None, 4, 1, 5, 9, 2, 6]})
    measures = ", ".join(f"{f} AS m{i}" for i, f in enumerate([
        "count(v)", "sum(v)", "avg(v)", "min(v)", "max(v)", "count(k)", "sum(k)", "avg(k)", "min(k)", "max(k)",
        "linear_reg_r2(t, v)", "linear_reg_r2_signed(ts, k)", "linear_reg_r2(k, t)", "mann_kendall_test(v)",
        "sum(ts)", "count(*)"]))
    q = (f"ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, {measures} PATTERN (W & S) "
         "DEFINE SEGMENT W AS window(1, 6), SEGMENT S AS sum(k) >= 0 OR avg(v) IS NULL OR linear_reg_r2(t, k) >= 0")
    shared = sparkcep.match_recognize(t, q).to_pylist()
    alone = sparkcep.match_recognize(t, q, sharing=False).to_pylist()
    assert len(shared) > 20 and len(shared) == len(alone)
    assert (shared[0]["s"], shared[0]["e"], shared[0]["m14"]) == (0, 0, 1704067200.0)  # timestamps sum as epoch seconds
    for a, b in zip(shared, alone, strict=True):
        for key in a:
            x, y = a[key], b[key]
            assert x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)), \
                (key, a, b)


def test_sharing_option_only_for_segment_queries():
    with pytest.raises(sparkcep.SparkCepError, match="sharing option applies to segment queries"):
        sparkcep.match_recognize(PRICES, "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A)", sharing=False)
    with pytest.raises(sparkcep.SparkCepError, match="sharing must be True or False"):
        sparkcep.match_recognize(PRICES, "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A & B)", sharing="no")


@pytest.mark.parametrize("query, code", [
    ("ORDER BY t PATTERN (A & B) DEFINE SEGMENT A AS price > 1", "BARE_COLUMN"),
    ("ORDER BY t ALL ROWS PER MATCH PATTERN (A & B) DEFINE SEGMENT A AS window(2)", "NOT_SUPPORTED"),
    ("ORDER BY t AFTER MATCH SKIP TO NEXT ROW PATTERN (A & B)", "NOT_SUPPORTED"),
    ("ORDER BY t MEASURES A.price AS p PATTERN (A & B) DEFINE SEGMENT A AS window(2)", "NOT_SUPPORTED"),
    ("ORDER BY t PATTERN (A & B) DEFINE SEGMENT A AS window(t, 1, 2, DAY)", "INVALID_WINDOW"),
    ("ORDER BY t PATTERN ((A B)+ & C) DEFINE B AS B.price > A.price", "INVALID_REFERENCE"),
    ("ORDER BY t PATTERN (A & B) DEFINE SEGMENT A AS window(2) OR first(price) > 1", "INVALID_WINDOW"),
    ("ORDER BY t PATTERN (A & B) DEFINE SEGMENT A AS window(3, 2)", "INVALID_WINDOW"),
    ("ORDER BY t PATTERN (A B) DEFINE A AS window(2)", "INVALID_WINDOW"),
    ("ORDER BY t PATTERN (A & B) DEFINE A AS zscore(price, 0) > 1", "WRONG_ARGUMENTS"),
    ("ORDER BY t PATTERN (A & PERMUTE(B, C))", "NOT_SUPPORTED"),
    ("ORDER BY t PATTERN (A & B) MAXLENGTH 3", "NOT_SUPPORTED"),
    ("ORDER BY t PATTERN (A & B*?)", "NOT_SUPPORTED"),
    ("ORDER BY t MEASURES CLASSIFIER() AS c PATTERN (A & B)", "NOT_SUPPORTED"),
])
def test_error_table(query, code):
    with pytest.raises(sparkcep.QueryError) as e:
        sparkcep.match_recognize(PRICES, query)
    assert e.value.code == code, str(e.value)
    assert e.value.line is not None and e.value.excerpt


def test_plan_option_and_explain():
    q = "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A & B) DEFINE SEGMENT A AS window(2, 3), SEGMENT B AS last(price) > first(price)"
    text = sparkcep.explain(PRICES, q, plan="sort_merge")
    assert "SortMergeAnd" in text or "SegGenIndexing" in text
    with pytest.raises(sparkcep.SparkCepError, match="plan must be one of"):
        sparkcep.match_recognize(PRICES, q, plan="nope")
    with pytest.raises(sparkcep.SparkCepError, match="segment-query plans"):
        sparkcep.match_recognize(PRICES, "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A)", plan="sort_merge")


def test_explain_draws_the_plan(tmp_path):
    q = ("ORDER BY t MEASURES FIRST(t) AS s PATTERN ((UP DOWN) & W) DEFINE SEGMENT W AS window(3, 5), "
         "SEGMENT UP AS linear_reg_r2_signed(t, price) > 0.5, SEGMENT DOWN AS last(price) < first(price)")
    path = tmp_path / "plan.png"
    text = sparkcep.explain(PRICES, q, picture=str(path))
    assert "estimated per series" in text and "operators:" in text
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(sparkcep.SparkCepError, match="segment query"):
        sparkcep.explain(PRICES, "ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A)", picture=str(path))
