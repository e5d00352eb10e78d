"""MEASURES, output shape, data handling, functions and errors, with hand-worked results."""

import datetime as dt

import pandas as pd
import pyarrow as pa
import pytest

import sparkcep
from sparkcep import DataError, QueryError
from sparkcep.errors import SparkCepError, UnknownColumnError

PRICES = pd.DataFrame({
    "sym": ["x"] * 7,
    "ts": range(7),
    "price": [10, 8, 6, 7, 9, 5, 6],
})

V_SHAPE = """
    PARTITION BY sym ORDER BY ts
    MEASURES {measures}
    {rows}
    PATTERN (A B+ C+)
    SUBSET U = (B, C)
    DEFINE B AS price < PREV(price), C AS price > PREV(price)
"""


def run(df, measures, rows="ONE ROW PER MATCH", **kw):
    return sparkcep.match_recognize(df, V_SHAPE.format(measures=measures, rows=rows), **kw)


def test_one_row_per_match_columns_and_aggregates():
    out = run(PRICES, "A.price AS top, MIN(B.price) AS bottom, LAST(C.price) AS last_up, COUNT(*) AS n, "
                      "SUM(U.price) AS s, AVG(C.price) AS avg_up, DELTA(price) AS change, COLLECT(price) AS path, "
                      "FIRST(U.price, 1) AS second_of_u, MATCH_NUMBER() AS mn, CLASSIFIER() AS last_label")
    assert list(out.columns) == ["sym", "top", "bottom", "last_up", "n", "s", "avg_up", "change", "path",
                                 "second_of_u", "mn", "last_label"]
    rows = out.to_dict("records")
    assert len(rows) == 1  # rows 5-6 (5, 6) have no falling B after A
    first = rows[0]
    assert (first["top"], first["bottom"], first["last_up"], first["n"], first["s"]) == (10, 6, 9, 5, 8 + 6 + 7 + 9)
    assert first["avg_up"] == 8.0 and first["change"] == 9 - 10 and list(first["path"]) == [10, 8, 6, 7, 9]
    assert first["second_of_u"] == 6 and first["mn"] == 1 and first["last_label"] == "C"


def test_all_rows_running_and_final():
    out = run(PRICES, "RUNNING LAST(price) AS cur, FINAL LAST(price) AS fin, RUNNING COUNT(*) AS k, "
                      "FINAL COUNT(*) AS total, CLASSIFIER() AS lab, PREV(price) AS before, NEXT(price) AS after",
              rows="ALL ROWS PER MATCH")
    # Partition columns, order columns, measures, then the remaining input columns.
    assert list(out.columns) == ["sym", "ts", "cur", "fin", "k", "total", "lab", "before", "after", "price"]
    first = out[out.ts <= 4]
    assert first.cur.tolist() == [10, 8, 6, 7, 9]
    assert first.fin.tolist() == [9] * 5
    assert first.k.tolist() == [1, 2, 3, 4, 5] and first.total.tolist() == [5] * 5
    assert first.lab.tolist() == ["A", "B", "B", "C", "C"]
    # PREV/NEXT may look outside the match (within the partition).
    assert pd.isna(first.before.tolist()[0]) and first.after.tolist()[-1] == 5


def test_with_unmatched_rows_and_omit_empty():
    df = pd.DataFrame({"ts": range(4), "v": [0, 1, 1, 0]})
    q = """ORDER BY ts MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS lab
           ALL ROWS PER MATCH {opt} PATTERN (B+) DEFINE B AS v = 1"""
    out = sparkcep.match_recognize(df, q.format(opt="WITH UNMATCHED ROWS"))
    assert out.ts.tolist() == [0, 1, 2, 3]
    assert out.lab.tolist() == [None, "B", "B", None]
    assert out.mn.isna().tolist() == [True, False, False, True]
    # B* matches empty at rows 0 and 3: shown by default, omitted on request.
    shown = sparkcep.match_recognize(df, q.replace("B+", "B*").format(opt="SHOW EMPTY MATCHES"))
    assert shown.mn.tolist() == [1, 2, 2, 3] and shown.lab.tolist()[0] is None
    omitted = sparkcep.match_recognize(df, q.replace("B+", "B*").format(opt="OMIT EMPTY MATCHES"))
    assert omitted.ts.tolist() == [1, 2] and omitted.mn.tolist() == [2, 2]


def test_empty_match_one_row_has_null_measures_and_zero_count():
    df = pd.DataFrame({"ts": [0], "v": [0]})
    out = sparkcep.match_recognize(df, "ORDER BY ts MEASURES COUNT(*) AS n, LAST(v) AS lv, MATCH_NUMBER() AS mn "
                                       "PATTERN (B*) DEFINE B AS v = 1")
    assert out.n.tolist() == [0] and out.lv.isna().all() and out.mn.tolist() == [1]


def test_engine_sorts_input_and_breaks_ties_by_input_position():
    df = pd.DataFrame({"k": ["b", "a", "a", "b", "a"], "ts": [1, 2, 1, 0, 2], "tag": ["b1", "a2", "a1", "b0", "a2x"]})
    out = sparkcep.match_recognize(df, "PARTITION BY k ORDER BY ts MEASURES A.tag AS t ALL ROWS PER MATCH PATTERN (A)")
    assert out.t.tolist() == ["a1", "a2", "a2x", "b0", "b1"]
    desc = sparkcep.match_recognize(df, "PARTITION BY k ORDER BY ts DESC MEASURES A.tag AS t ALL ROWS PER MATCH PATTERN (A)")
    assert desc.t.tolist() == ["a2", "a2x", "a1", "b1", "b0"]


def test_nulls_order_and_null_partition_keys():
    t = pa.table({"k": ["a", None, "a", None], "ts": [None, 1, 2, 0], "v": [1, 2, 3, 4]})
    q = "PARTITION BY k ORDER BY ts {nulls} MEASURES A.v AS vv, MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN (A)"
    last = sparkcep.match_recognize(t, q.format(nulls="")).to_pylist()
    # NULL keys form their own partition; NULL order values sort last by default.
    assert [(r["k"], r["vv"]) for r in last] == [("a", 3), ("a", 1), (None, 4), (None, 2)]
    first = sparkcep.match_recognize(t, q.format(nulls="NULLS FIRST")).to_pylist()
    assert [r["vv"] for r in first if r["k"] == "a"] == [1, 3]


def test_null_values_make_conditions_unknown():
    df = pd.DataFrame({"ts": range(4), "v": [1.0, float("nan"), 3.0, 4.0]})  # pandas NaN is NULL
    out = sparkcep.match_recognize(df, "ORDER BY ts MEASURES COUNT(*) AS n, FIRST(v) AS f PATTERN (A+) DEFINE A AS v > 0")
    assert out.n.tolist() == [1, 2] and out.f.tolist() == [1.0, 3.0]


def test_arrow_nan_is_not_null_and_compares_false():
    t = pa.table({"ts": [0, 1, 2], "v": [1.0, float("nan"), 2.0]})
    out = sparkcep.match_recognize(t, "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS v > 0 OR v IS NULL")
    assert isinstance(out, pa.Table) and out.column("n").to_pylist() == [1, 1]


def test_within_interval_on_timestamps():
    base = dt.datetime(2024, 1, 1, 9, 0)
    df = pd.DataFrame({"ts": [base + dt.timedelta(minutes=m) for m in (0, 2, 4, 7, 8)], "v": [1, 1, 1, 1, 1]})
    out = sparkcep.match_recognize(df, "ORDER BY ts MEASURES COUNT(*) AS n, FIRST(ts) AS t0 "
                                       "PATTERN (A+) WITHIN INTERVAL '5' MINUTE DEFINE A AS v = 1")
    assert out.n.tolist() == [3, 2]
    assert out.t0.tolist()[1] == pd.Timestamp(base + dt.timedelta(minutes=7))


def test_functions_and_expressions():
    df = pd.DataFrame({"ts": range(3), "name": ["Ab", "cd", "EF"], "v": [-2.5, 4.0, 9.0]})
    out = sparkcep.match_recognize(df, """ORDER BY ts
        MEASURES abs(A.v) AS a, sqrt(LAST(v)) AS r, round(2.5) AS rd, upper(FIRST(name)) AS up,
                 length(A.name) AS len, A.name || '!' AS bang, substr(B.name, 2) AS sub, greatest(1, 3, 2) AS g,
                 coalesce(NULL, 7) AS co, CASE WHEN COUNT(*) > 2 THEN 'long' ELSE 'short' END AS kind,
                 power(2, 10) AS p, 7 / 2 AS idiv, -7 % 3 AS imod, 7.0 / 2 AS fdiv
        PATTERN (A B C)
        DEFINE B AS v BETWEEN 0 AND 5 AND name IN ('cd', 'xx'), C AS NOT (v < PREV(v)) AND name IS NOT NULL""")
    r = out.to_dict("records")[0]
    assert r["len"] == 2 and r["bang"] == "Ab!"
    assert r["a"] == 2.5 and r["r"] == 3.0 and r["rd"] == 3 and r["up"] == "AB" and r["sub"] == "d"
    assert r["g"] == 3 and r["co"] == 7 and r["kind"] == "long" and r["p"] == 1024.0
    assert r["idiv"] == 3 and r["imod"] == -1 and r["fdiv"] == 3.5


def test_user_defined_function_must_be_registered():
    df = pd.DataFrame({"ts": range(3), "tags": ["a,b", "b,c", "x"]})
    q = "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS shares_tag(tags, PREV(tags))"
    with pytest.raises(QueryError) as e:
        sparkcep.match_recognize(df, q)
    assert e.value.code == "UNKNOWN_FUNCTION"
    sparkcep.register_function("shares_tag", lambda a, b: bool(set(a.split(",")) & set(b.split(","))), returns=bool)
    try:
        assert sparkcep.match_recognize(df, q).n.tolist() == [2]
    finally:
        sparkcep.unregister_function("shares_tag")


def test_define_and_measure_aggregates_agree():
    # A run whose every price is above the running average of the run so far.
    df = pd.DataFrame({"ts": range(6), "p": [1, 5, 6, 2, 8, 9]})
    out = sparkcep.match_recognize(df, """ORDER BY ts MEASURES COUNT(*) AS n, AVG(p) AS a
        PATTERN (S U+) DEFINE U AS p >= AVG(p)""")
    assert out.to_dict("records") == [{"n": 3, "a": 4.0}, {"n": 3, "a": 19 / 3}]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("query, code, line, column", [
    ("ORDER BY ts PATTERN (A B", "SYNTAX", 1, 25),
    ("ORDER BY ts\nPATTERN (A)\nDEFINE A AS price >", "SYNTAX", 3, 20),
    ("ORDER BY ts PATTERN (A) DEFINE B AS price > 1", "UNKNOWN_VARIABLE", 1, 32),
    ("ORDER BY ts PATTERN (A) DEFINE A AS X.price > 1", "UNKNOWN_VARIABLE", 1, 37),
    ("ORDER BY ts PATTERN (A) DEFINE A AS price", "TYPE_MISMATCH", 1, 37),
    ("ORDER BY ts PATTERN (A) DEFINE A AS price > 'x'", "TYPE_MISMATCH", 1, 37),
    ("ORDER BY ts PATTERN (A) DEFINE A AS FINAL LAST(price) > 1", "INVALID_SEMANTICS", 1, 37),
    ("ORDER BY ts ALL MATCHES PATTERN (A) DEFINE A AS MATCH_NUMBER() > 1", "NOT_SUPPORTED", 1, 49),
    ("ORDER BY ts PATTERN (A B) DEFINE A AS PREV(A.price + B.price) > 1", "INCONSISTENT_LABELS", 1, 39),
    ("ORDER BY ts PATTERN (A) DEFINE A AS PREV(price, -1) > 1", "INVALID_NAVIGATION", 1, 49),
    ("ORDER BY ts PATTERN (A) DEFINE A AS PREV(price, ts) > 1", "INVALID_NAVIGATION", 1, 49),
    ("ORDER BY ts PATTERN (A) DEFINE A AS LAST(PREV(price)) > 1", "INVALID_NAVIGATION", 1, 42),
    ("ORDER BY ts PATTERN (A) DEFINE A AS SUM(PREV(price)) > 1", "INVALID_NAVIGATION", 1, 41),
    ("ORDER BY ts PATTERN (A) DEFINE A AS SUM(SUM(price)) > 1", "INVALID_AGGREGATE", 1, 41),
    ("ORDER BY ts MEASURES A.price AS x, A.price AS x PATTERN (A)", "DUPLICATE_NAME", 1, 47),
    ("ORDER BY ts MEASURES A.price AS price ALL ROWS PER MATCH PATTERN (A)", "DUPLICATE_NAME", 1, 33),
    ("ORDER BY ts PATTERN (A) SUBSET A = (A)", "DUPLICATE_NAME", 1, 32),
    ("ORDER BY ts PATTERN (A) SUBSET U = (B)", "UNKNOWN_VARIABLE", 1, 37),
    ("ORDER BY ts AFTER MATCH SKIP TO LAST Z PATTERN (A)", "UNKNOWN_VARIABLE", 1, 38),
    ("ORDER BY ts ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A {- B -})", "CONFLICTING_CLAUSES", 1, 13),
    ("PATTERN (A) WITHIN 5", "WITHIN_NEEDS_ORDER", 1, 13),
    ("ORDER BY ts PATTERN (A) WITHIN INTERVAL '1' HOUR", "TYPE_MISMATCH", 1, 25),
    ("ORDER BY ts PATTERN (A) MAXLENGTH 5 DEFINE A AS price > 1 MAXLENGTH 6", "CONFLICTING_CLAUSES", 1, 59),
    ("ORDER BY ts PATTERN (A{3,2})", "INVALID_QUANTIFIER", 1, 23),
    ("ORDER BY ts PATTERN (A) DEFINE A AS nosuch(price)", "UNKNOWN_FUNCTION", 1, 37),
    ("ORDER BY ts PATTERN (A) DEFINE A AS abs(price, 1) > 0", "WRONG_ARGUMENTS", 1, 37),
    ("ORDER BY ts PATTERN (A) DEFINE A AS SUM(*) > 0", "WRONG_ARGUMENTS", 1, 41),
])
def test_query_errors_have_code_and_position(query, code, line, column):
    df = pd.DataFrame({"ts": [1], "price": [1.0]})
    with pytest.raises(QueryError) as e:
        sparkcep.match_recognize(df, query)
    assert e.value.code == code, str(e.value)
    if line is not None:
        assert (e.value.line, e.value.column) == (line, column), str(e.value)
        assert "^" in e.value.excerpt


def test_matchregex_first_transition_may_not_aggregate():
    df = pd.DataFrame({"ts": [1], "price": [1.0]})
    with pytest.raises(QueryError) as e:
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A B) DEFINE A AS price > AVG(B.price)", mode="matchregex")
    assert e.value.code == "MATCHREGEX_FIRST_AGGREGATE"
    # The same condition on a variable that cannot start a match is fine.
    sparkcep.match_recognize(df, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A B) DEFINE B AS price > AVG(A.price)", mode="matchregex")


def test_data_errors_name_column_and_row():
    df = pd.DataFrame({"ts": [1, 2], "price": [1.0, 2.0]})
    with pytest.raises(DataError) as e:
        sparkcep.match_recognize(df, "ORDER BY tss MEASURES MATCH_NUMBER() AS m PATTERN (A)")
    assert e.value.column == "tss" and "did you mean 'ts'" in str(e.value)
    assert e.value.message == "the data has no column 'tss' (did you mean 'ts'?)"  # not the rendered error
    t = pa.table({"ts": [1, None], "price": [1.0, 2.0]})
    with pytest.raises(DataError) as e:
        sparkcep.match_recognize(t, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A) WITHIN 3")
    assert e.value.column == "ts" and e.value.row == 1
    for t in (pa.table({"ts": [1], "price": pa.array([{"a": 1}])}),  # a struct
              pa.table({"ts": [1], "price": pa.array([1], pa.decimal256(40, 2))})):  # above 38 digits
        with pytest.raises(DataError) as e:
            sparkcep.match_recognize(t, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A) DEFINE A AS price IS NOT NULL")
        assert e.value.column == "price"
        # An unsupported type that the query does not read passes through untouched.
        out = sparkcep.match_recognize(t, "ORDER BY ts MEASURES A.ts AS t ALL ROWS PER MATCH PATTERN (A)")
        assert out.column("price").type == t.schema.field("price").type


def _raised(query: str, data) -> SparkCepError:
    with pytest.raises(SparkCepError) as e:
        sparkcep.match_recognize(data, query)
    return e.value


def _raise_in_child(err: SparkCepError) -> None:
    raise err


def test_errors_cross_processes_whole():
    """A worker process's error reaches its parent as it was: QueryError's __init__ takes
    the parts, where pickle passed the rendered text (a TypeError in the parent, which a
    process pool reports as a broken pool)."""
    import concurrent.futures
    import multiprocessing
    import pickle

    df = pd.DataFrame({"ts": [2, 1], "price": [1.0, 0.0]})
    errors = [
        _raised("ORDER BY ts PATTERN (A{3,2})", df),  # QueryError, with its excerpt
        _raised("ORDER BY tss PATTERN (A)", df),  # UnknownColumnError: a QueryError and a DataError
        _raised("ORDER BY ts MEASURES 1 / 0 AS x PATTERN (A) DEFINE A AS true", df),  # a DataError at a row
        _raised("ORDER BY ts PATTERN (A) DEFINE A AS 1 / price > 0", df),
    ]
    assert {type(e) for e in errors} >= {QueryError, UnknownColumnError, DataError}
    for err in errors:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and back.__dict__ == err.__dict__
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        for err in errors:
            with pytest.raises(type(err)) as e:
                pool.submit(_raise_in_child, err).result()
            assert str(e.value) == str(err) and e.value.__dict__ == err.__dict__


def test_division_by_zero_names_the_row():
    df = pd.DataFrame({"ts": [2, 1, 0], "d": [1, 0, 1]})
    with pytest.raises(DataError) as e:
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A+) DEFINE A AS 10 / d > 1")
    assert e.value.row == 1 and "division by zero in the condition of A" in str(e.value)
    with pytest.raises(DataError) as e:
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES 1 / (COUNT(*) - 1) AS x PATTERN (A)")
    assert e.value.row == 2 and "MEASURES" in str(e.value)


def test_bad_data_argument_and_options():
    with pytest.raises(sparkcep.SparkCepError, match="pandas DataFrame, a pyarrow Table or a Spark DataFrame"):
        sparkcep.match_recognize([1, 2], "MEASURES MATCH_NUMBER() AS m PATTERN (A)")
    with pytest.raises(sparkcep.SparkCepError, match="unknown option"):
        sparkcep.match_recognize(pd.DataFrame({"a": [1]}), "MEASURES MATCH_NUMBER() AS m PATTERN (A)", strategie="x")
    with pytest.raises(sparkcep.SparkCepError, match="needs a Spark DataFrame"):
        sparkcep.match_recognize(pd.DataFrame({"a": [1]}), "MEASURES MATCH_NUMBER() AS m PATTERN (A)", strategy="runs")


Q = "ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e PATTERN (A+)"
OPTION_ERRORS = [  # (call, what the message says)
    (lambda d, m: sparkcep.match_recognize(d, Q, strategy="fast"), "unknown strategy 'fast' (one of auto,"),
    (lambda d, m: sparkcep.explain(d, Q, strategy=3), "unknown strategy 3"),
    (lambda d, m: sparkcep.match_recognize(d, Q, strategy="runs"), "strategy 'runs' needs a Spark DataFrame"),
    (lambda d, m: sparkcep.match_recognize(d, Q, batch="10"), "batch must be a whole number of rows >= 1, not '10'"),
    (lambda d, m: sparkcep.match_recognize(d, Q, batch=True), "batch must be a whole number"),
    (lambda d, m: sparkcep.match_recognize(d, Q, shared=-1), "shared must be a whole number of rows >= 0"),
    (lambda d, m: sparkcep.match_recognize(d, Q, stats="x"), "stats must be a sparkcep.TaskStats"),
    (lambda d, m: sparkcep.match_recognize(d, Q, plan="x"), "the plan option chooses among segment-query plans"),
    (lambda d, m: sparkcep.match_recognize(d, Q, sharing="yes"), "sharing must be True or False"),
    (lambda d, m: sparkcep.match_recognize(d, Q, workers=-5), "workers must be a whole number >= 0"),
    (lambda d, m: sparkcep.match_recognize(d, Q, mode="regex"), "mode must be 'sql' or 'matchregex'"),
    (lambda d, m: sparkcep.match_recognize(d, Q, nope=1), "unknown option(s): nope"),
    (lambda d, m: sparkcep.match_recognize(d), "match_recognize(): missing a required argument: 'clause'"),
    (lambda d, m: sparkcep.sase(d, "PATTERN SEQ(Stock a)", order_by=3), "order_by must name the column"),
    (lambda d, m: sparkcep.plot(d, m), "plot(): missing a required argument: 'x'"),
    (lambda d, m: sparkcep.plot(d, m, x="ts", y="price", start="s", end="e", colour="red"),
     "plot(): got an unexpected keyword argument 'colour'"),
]


@pytest.mark.parametrize("call, says", OPTION_ERRORS)
def test_a_bad_argument_is_an_option_error(call, says):
    """Every argument of a call that cannot be (a name, a value, one left out) is a QueryError
    coded INVALID_OPTION, without a position, saying what it takes: not an InternalError
    blaming sparkcep, nor a TypeError from inside."""
    data = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    with pytest.raises(QueryError) as e:
        call(data, sparkcep.match_recognize(data, Q))
    assert e.value.code == "INVALID_OPTION" and e.value.line is None
    assert says in str(e.value), str(e.value)


@pytest.mark.parametrize("left, right", [("volume", "1.5"), ("volume", "4"), ("volume", "-3"), ("d", "2"),
                                         ("d", "0.4"), ("price", "-2.0"), ("volume", "price"), ("volume", "0.0")])
def test_mod_is_the_remainder_operator(left, right):
    """mod(n, m) is n % m, as in Trino: the same type (mod of a bigint by a double is a
    double; it was typed bigint and truncated, 7 mod 1.5 gave 1) and the same values."""
    import decimal

    df = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.5, 3.0], "volume": [7, -8, 9],
                       "d": [decimal.Decimal("7.5"), decimal.Decimal("-8.25"), decimal.Decimal("9")]})
    got = sparkcep.match_recognize(pa.Table.from_pandas(df), f"ORDER BY ts MEASURES mod({left}, {right}) AS m, "
                                   f"{left} % {right} AS r ALL ROWS PER MATCH PATTERN (A)")
    assert got.schema.field("m").type == got.schema.field("r").type
    assert repr(got.column("m").to_pylist()) == repr(got.column("r").to_pylist())  # repr: NaN equals NaN
    if (left, right) == ("volume", "1.5"):
        assert got.column("m").to_pylist() == [1.0, -0.5, 0.0]


@pytest.mark.parametrize("call", [
    lambda d: sparkcep.match_recognize(d, "ORDER BY ts PATTERN (" + "(" * 400 + "A" + ")" * 400 + ")"),
    lambda d: sparkcep.match_recognize(d, "ORDER BY ts PATTERN (A) DEFINE A AS " + "(" * 5000 + "price" + ")" * 5000 + " > 0"),
    lambda d: sparkcep.sase(d, "PATTERN SEQ(Stock a, Stock b) WHERE " + "(" * 500 + "a.price > 1" + ")" * 500,
                            order_by="ts", type_column=None),
    lambda d: sparkcep.snoop(d, "SELECT * FROM SEQ(A; B) WHERE " + "(" * 600 + "A.price > 1" + ")" * 600,
                             order_by="ts", type_column=None),
])
def test_nesting_far_past_the_limit_is_too_complex(call):
    """Hundreds or thousands of nested parentheses: the positioned TOO_COMPLEX error (the
    depth check, and SASE+'s tree transform, recursed into a RecursionError past ~375)."""
    data = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    with pytest.raises(QueryError) as e:
        call(data)
    assert e.value.code == "TOO_COMPLEX" and e.value.line == 1 and e.value.excerpt


def test_a_decimal_meets_a_double_literal_past_every_decimal():
    """dec < 1e300: a literal no DECIMAL(38) holds compares as a double (it was an
    InternalError from decimal's quantize); one that fits compares exactly."""
    import decimal

    df = pd.DataFrame({"ts": [1, 2], "dec": [decimal.Decimal("1.5"), decimal.Decimal("2.5")]})
    for cond, want in (("dec < 1e300", [1, 2]), ("dec > -1e300", [1, 2]), ("dec > 1e300", []), ("dec < 1e40", [1, 2]),
                       ("dec < 2.5", [1]), ("dec < 1e-50", [])):
        got = sparkcep.match_recognize(df, f"ORDER BY ts MEASURES A.ts AS t PATTERN (A) DEFINE A AS {cond}")
        assert got.t.tolist() == want, cond
    got = sparkcep.match_recognize(df, "ORDER BY ts MEASURES dec + 1e300 AS t PATTERN (A)")
    assert got.t.tolist() == [1e300, 1e300]


def test_clause_conflicts_point_at_the_clause():
    """matchregex with ALL MATCHES points at ALL MATCHES (it had no position); a key named
    twice in PARTITION BY is refused where it stands (the output held two columns of one name)."""
    df = pd.DataFrame({"s": ["X", "X", "Y"], "ts": [1, 2, 1]})
    text = "ORDER BY ts MEASURES COUNT(*) AS n ALL MATCHES PATTERN (A)"
    with pytest.raises(QueryError) as e:
        sparkcep.match_recognize(df, text, mode="matchregex")
    assert (e.value.code, e.value.column) == ("CONFLICTING_CLAUSES", text.index("ALL MATCHES") + 1)
    text = "PARTITION BY s, S ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A)"
    with pytest.raises(QueryError, match="PARTITION BY names 's' twice") as e:
        sparkcep.match_recognize(df, text)
    assert (e.value.code, e.value.column) == ("DUPLICATE_NAME", text.index("S ORDER") + 1)


def test_a_type_mismatch_names_the_operands_in_their_order():
    df = pd.DataFrame({"ts": [1, 2], "symbol": ["a", "b"]})
    with pytest.raises(QueryError, match="cannot compare varchar and bigint"):
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES A.ts AS t PATTERN (A) DEFINE A AS symbol > 5")


def test_explain_shows_program():
    text = sparkcep.explain(PRICES, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A B*) DEFINE B AS price > PREV(price)")
    assert "0: match A\n  1: split 2, 4\n  2: match B\n  3: jump 1\n  4: accept" in text


def test_date_and_timestamp_name_columns_except_before_a_string():
    # Real data often has a `date` column (vega's stocks, weather): as in Trino, DATE and
    # TIMESTAMP start a literal only when a string follows.
    t = pd.DataFrame({"date": pd.date_range("2024-01-01", periods=5), "timestamp": [1, 2, 3, 4, 5],
                      "price": [3.0, 2, 1, 2, 3]})
    got = sparkcep.match_recognize(t, """ORDER BY date
        MEASURES FIRST(date) AS s, LAST(timestamp) AS ts, DATE '2024-01-02' AS d, CAST(date AS DATE) AS x
        PATTERN (A B+) DEFINE B AS price < PREV(price) AND date < TIMESTAMP '2030-01-01 00:00:00'""")
    assert got.to_dict("records") == [{"s": pd.Timestamp("2024-01-01"), "ts": 3, "d": dt.date(2024, 1, 2),
                                       "x": dt.date(2024, 1, 3)}]
