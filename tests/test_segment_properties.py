"""Segment queries against the independent brute-force reference (tests/segment_reference.py,
written from the definitions alone): random patterns over point and segment variables with
every operator, windows, quantifiers, aggregates and references, on short series; every
forced plan and the optimizer's must give the reference's segments."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.segments.operators import PLANS
from tests.conformance.test_conformance import same_rows
from tests.segment_reference import SegmentReferenceError, segment_reference
from tests.tiers import examples

EXAMPLES = examples(500, scaled=True)

SEGMENT_CONDITIONS = [
    "last(price) > first(price)", "last(price) < first(price)", "window(2, 3)", "window(1, 2)", "window(3)",
    "window(2, NULL)", "window(t, 1, 2)", "avg(price) >= {k}", "max(price) - min(price) <= {k}",
    "count(price) >= 2", "sum(price) < {k} + 3", "linear_reg_r2_signed(t, price) > 0.5",
    "linear_reg_r2(t, price) IS NULL", "mann_kendall_test(price) > 0", "first(price) IS NULL",
    "count(*) = 2", "true",
]
POINT_CONDITIONS = [
    "price > {k}", "price <= {k}", "price > PREV(price)", "price IS NULL", "NEXT(price) < price",
    "zscore(price, 2) > 0", "price = {k}", "true",
]


@st.composite
def patterns(draw, names, depth=0):
    kind = "var" if depth >= 3 else draw(st.sampled_from(
        ["var", "var", "var", "concat", "concat", "and", "alt", "not", "quant", "group"]))
    if kind == "var":
        return draw(st.sampled_from(names))
    sub = lambda: draw(patterns(names, depth + 1))  # noqa: E731
    if kind == "concat":
        return " ".join(sub() for _ in range(draw(st.integers(2, 3))))
    if kind == "and":
        return "(" + " & ".join(sub() for _ in range(2)) + ")"
    if kind == "alt":
        return "(" + " | ".join(sub() for _ in range(2)) + ")"
    if kind == "not":
        return "~(" + sub() + ")"
    if kind == "group":
        return "(" + sub() + ")"
    q = draw(st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "{0,2}"]))
    return "(" + sub() + ")" + q


@st.composite
def segment_queries(draw):
    names = ["A", "B", "C"]
    segment = {v: draw(st.booleans()) for v in names}
    pattern = draw(patterns(names))
    if "&" not in pattern and "~" not in pattern and not any(segment[v] for v in names if v in pattern):
        segment["A"] = True
        pattern = f"({pattern}) & A"
    defines = []
    for v in names:
        if v not in pattern or not draw(st.integers(0, 3)):
            continue
        pool = SEGMENT_CONDITIONS if segment[v] else POINT_CONDITIONS
        conds = [draw(st.sampled_from(pool)).format(k=draw(st.integers(0, 3))) for _ in range(draw(st.integers(1, 2)))]
        defines.append(("SEGMENT " if segment[v] else "") + f"{v} AS " + " AND ".join(conds))
    for v in names:  # a segment variable without DEFINE is still declared
        if segment[v] and v in pattern and not any(d.endswith(f"{v} AS") or f" {v} AS " in f" {d}" for d in defines):
            defines.append(f"SEGMENT {v} AS true")
    partition = draw(st.sampled_from(["", "PARTITION BY k"]))
    measures = draw(st.lists(st.sampled_from([
        "FIRST(t) AS s", "LAST(t) AS e", "COUNT(*) AS n", "MATCH_NUMBER() AS m", "sum(price) AS sp",
        "avg(price) AS ap", "linear_reg_r2(t, price) AS r2", "mann_kendall_test(price) AS mk", "max(price) AS mx",
    ]), min_size=2, max_size=4, unique=True))
    if "FIRST(t) AS s" not in measures:
        measures.insert(0, "FIRST(t) AS s")
    return (f"{partition} ORDER BY t MEASURES {', '.join(measures)} PATTERN ({pattern}) "
            + ("DEFINE " + ", ".join(defines) if defines else ""))


@st.composite
def wild_window_queries(draw):
    """Sequences with a window-only segment variable W between two items: the shapes the
    planner fuses into a wild-window concatenation (WConcat)."""
    shape = draw(st.sampled_from(["A W B", "A W B W C", "(A W B) & C", "A W (B | C)", "(A W B)+", "A W ~B",
                                  "A W B C", "(A B) W C", "A W B*"]))
    window = draw(st.sampled_from(["true", "window(2, 3)", "window(1, 2)", "window(2, NULL)", "window(1)"]))
    defines = [f"SEGMENT W AS {window}"]
    for v in "ABC":
        if v not in shape:
            continue
        segment = draw(st.booleans())
        pool = SEGMENT_CONDITIONS if segment else POINT_CONDITIONS
        cond = draw(st.sampled_from(pool)).format(k=draw(st.integers(0, 3)))
        defines.append(("SEGMENT " if segment else "") + f"{v} AS {cond}")
    bound = draw(st.sampled_from(["", " & Z"]))
    if bound:
        defines.append(f"SEGMENT Z AS {draw(st.sampled_from(['window(1, 5)', 'window(t, 0, 3)']))}")
    partition = draw(st.sampled_from(["", "PARTITION BY k"]))
    return (f"{partition} ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, COUNT(*) AS n "
            f"PATTERN (({shape}){bound}) DEFINE {', '.join(defines)}")


@st.composite
def series(draw):
    n = draw(st.integers(0, 8))
    prices = draw(st.lists(st.one_of(st.integers(0, 4), st.none()), min_size=n, max_size=n))
    keys = draw(st.lists(st.sampled_from(["x", "y"]), min_size=n, max_size=n))
    return pa.table({"t": pa.array(list(range(n)), pa.int64()), "k": pa.array(keys, pa.string()),
                     "price": pa.array(prices, pa.int64())})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(segment_queries(), series())
def test_every_plan_equals_the_reference(query, table):
    try:
        want = segment_reference(query, table)
    except SegmentReferenceError:
        want = "refused"
    except ZeroDivisionError:
        want = "error"
    # Every plan with shared aggregate indexes, and one with each aggregate computed per
    # segment (sharing=False): all must equal the reference.
    for how, sharing in [(p, True) for p in PLANS] + [("optimized", False), ("sort_merge", False)]:
        try:
            got = sparkcep.match_recognize(table, query, plan=how, sharing=sharing).to_pylist()
        except sparkcep.QueryError as e:
            # Only what the reference refuses too may be refused (window placement rules
            # are the engine's own: the reference has no such rule).
            assume(e.code in ("INVALID_WINDOW", "INVALID_REFERENCE", "NOT_SUPPORTED", "BARE_COLUMN"))
            return
        except sparkcep.DataError:
            assert want == "error", f"{how} sharing={sharing}: engine error, reference {want}\n{query}"
            continue
        assert want != "refused", f"{how}: the reference refuses\n{query}"
        assert same_rows(got, want), f"{how} sharing={sharing}\n{query}\n{table.to_pylist()}\ngot:  {got}\nwant: {want}"


@pytest.mark.parametrize("how", PLANS)
def test_figure_5_style_reference_on_every_plan(how):
    # A point variable reads another's row across a segment (OpenCEP Q1's INC1.peak > A1.peak).
    t = pa.table({"t": list(range(10)), "peak": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]})
    q = ("ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN ((A1 W INC) & WIN) "
         "DEFINE SEGMENT W AS window(1, 3), SEGMENT WIN AS window(2, 5), A1 AS peak < 4, INC AS INC.peak > A1.peak")
    assert sparkcep.match_recognize(t, q, plan=how).to_pylist() == segment_reference(q, t)


@settings(max_examples=max(EXAMPLES // 2, 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(wild_window_queries(), series())
def test_wild_window_concatenation_equals_the_reference(query, table):
    want = segment_reference(query, table)
    for how in PLANS:
        got = sparkcep.match_recognize(table, query, plan=how).to_pylist()
        assert same_rows(got, want), f"{how}\n{query}\n{table.to_pylist()}\ngot:  {got}\nwant: {want}"
    assert "WConcat" in sparkcep.explain(table, query, plan="sort_merge")
