"""The engine against the brute-force reference matcher on random patterns, conditions,
data, skip modes and output modes."""

from __future__ import annotations

import os

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.api import compile_query, run_plan
from sparkcep.errors import DataError
from sparkcep.runtime.reference import ReferenceMatcher
from sparkcep.runtime.vm import Matcher

EXAMPLES = int(os.environ.get("SPARKCEP_PROPERTY_EXAMPLES", "1500"))
VARS = ["A", "B", "C"]


@st.composite
def patterns(draw, depth=0):
    if depth >= 3:
        kind = "var"
    else:
        kind = draw(st.sampled_from(["var", "var", "var", "concat", "concat", "alt", "quant", "quant", "group", "excl", "permute", "empty", "anchor"]))
    if kind == "var":
        return draw(st.sampled_from(VARS))
    if kind == "concat":
        items = draw(st.lists(patterns(depth + 1), min_size=2, max_size=3))
        return " ".join(items)
    if kind == "alt":
        items = draw(st.lists(patterns(depth + 1), min_size=2, max_size=3))
        return "(" + " | ".join(items) + ")"
    if kind == "group":
        return "(" + draw(patterns(depth + 1)) + ")"
    if kind == "excl":
        return "{- " + draw(patterns(depth + 1)) + " -}"
    if kind == "permute":
        items = draw(st.lists(patterns(depth + 2), min_size=2, max_size=3))
        return "PERMUTE(" + ", ".join(items) + ")"
    if kind == "empty":
        return "()"
    if kind == "anchor":
        return draw(st.sampled_from(["^", "$"]))
    q = draw(st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "{,2}", "{2,}", "{0,1}"]))
    reluctant = draw(st.sampled_from(["", "", "?"]))
    return "(" + draw(patterns(depth + 1)) + ")" + q + reluctant


def used_vars(pattern: str) -> list[str]:
    return [v for v in VARS if v in pattern]


@st.composite
def conditions(draw, var: str, names: list[str]):
    other = draw(st.sampled_from(names))
    k = draw(st.integers(0, 3))
    atoms = [
        f"price > {k}",
        f"price < {k}",
        f"price >= {k} OR price IS NULL",
        f"price <= {k}",
        f"price = {k}",
        "price > PREV(price)",
        "price <= PREV(price)",
        f"{var}.price >= PREV({var}.price, 2)",
        f"{other}.price < price",
        f"COUNT({other}.*) < {k + 1}",
        f"SUM({other}.price) > {k}",
        f"FIRST({other}.price) < price",
        f"LAST({other}.price, 1) IS NULL",
        f"AVG(price) > {k}",
        f"price IN ({k}, {k + 1})",
        "NEXT(price) > price",
        f"CLASSIFIER({other}) = '{other}'",
        f"PREV(LAST({other}.price), 1) < {k}",
        f"MAX({other}.price) - MIN({other}.price) <= {k}",
        "price IS NULL",
        f"COUNT(U.*) < {k + 1}",
        "U.price >= price",
        "FIRST(U.price, 1) IS NOT NULL",
    ]
    first = draw(st.sampled_from(atoms))
    if draw(st.booleans()):
        second = draw(st.sampled_from(atoms))
        op = draw(st.sampled_from(["AND", "OR"]))
        return f"{first} {op} {second}"
    return first


@st.composite
def queries(draw):
    pattern = draw(patterns())
    names = used_vars(pattern)
    if not names:
        pattern = pattern + " A"
        names = ["A"]
    defines = []
    for v in names:
        if draw(st.integers(0, 2)) > 0:
            defines.append(f"{v} AS {draw(conditions(v, names))}")
    measure_pool = [
        "MATCH_NUMBER() AS mn",
        "CLASSIFIER() AS cls",
        "COUNT(*) AS cnt",
        "FIRST(price) AS fp",
        "LAST(price) AS lp",
        f"SUM({names[0]}.price) AS s",
        f"LAST({names[-1]}.price, 1) AS l1",
        "PREV(price) AS pp",
        "FINAL COUNT(*) AS fcnt",
        f"FINAL LAST({names[0]}.price) AS flast",
        "COLLECT(ts) AS tss",
        "LAST(U.price) AS lu",
        "RUNNING COUNT(U.*) AS cu",
        "CLASSIFIER(U) AS cls_u",
    ]
    measures = draw(st.lists(st.sampled_from(measure_pool), min_size=1, max_size=4, unique=True))
    has_excl = "{-" in pattern
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH OMIT EMPTY MATCHES"]
                                + ([] if has_excl else ["ALL ROWS PER MATCH WITH UNMATCHED ROWS"])))
    mode = draw(st.sampled_from(["sql", "sql", "sql", "matchregex"]))
    if mode == "matchregex":
        skip = ""
        defines = [d for d in defines if not _reads_partial(d)]
    else:
        target = draw(st.sampled_from(names + ["U"]))
        skip = draw(st.sampled_from(["", "AFTER MATCH SKIP TO NEXT ROW", f"AFTER MATCH SKIP TO FIRST {target}",
                                     f"AFTER MATCH SKIP TO LAST {target}", "ALL MATCHES", "AFTER MATCH SKIP PAST LAST ROW"]))
    partition = draw(st.sampled_from(["", "PARTITION BY k"]))
    bound = draw(st.sampled_from(["", "", "MAXLENGTH 3", "WITHIN 2"]))
    text = f"""{partition}
        ORDER BY ts
        MEASURES {', '.join(measures)}
        {rows}
        {skip}
        PATTERN ({pattern}) {bound}
        SUBSET U = ({names[0]}, {names[-1]})
        {('DEFINE ' + ', '.join(defines)) if defines else ''}"""
    return text, mode


def _reads_partial(define: str) -> bool:
    # matchregex: variables that may start a match cannot aggregate; keep the test simple.
    return any(tok in define for tok in ("COUNT(", "SUM(", "FIRST(", "LAST(", "AVG(", "MAX(", "CLASSIFIER(", ".price <", "A.price", "B.price", "C.price", "U."))


@st.composite
def tables(draw):
    n = draw(st.integers(0, 9))
    prices = draw(st.lists(st.one_of(st.integers(0, 3), st.none()), min_size=n, max_size=n))
    keys = draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n))
    ts = draw(st.permutations(list(range(n))))
    return pa.table({"ts": pa.array(ts, pa.int64()), "k": pa.array(keys, pa.int64()), "price": pa.array(prices, pa.int64())})


def _run(plan, table, factory, use_kernel=None):
    try:
        return run_plan(plan, table, factory, use_kernel=use_kernel).to_pylist()
    except DataError as e:
        return ("error", type(e).__name__, str(e))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(queries(), tables())
def test_engine_equals_reference(query, table):
    text, mode = query
    plan = compile_query(text, table, mode)
    expected = _run(plan, table, ReferenceMatcher)
    assert _run(plan, table, Matcher, use_kernel=False) == expected, f"python matcher\n{text}\nmode={mode}\n{table.to_pylist()}"
    assert _run(plan, table, Matcher, use_kernel=True) == expected, f"kernel\n{text}\nmode={mode}\n{table.to_pylist()}"


