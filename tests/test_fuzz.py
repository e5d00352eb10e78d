"""Malformed queries end in a positioned QueryError (or compile and run), never in a bare
traceback: random token soups for MATCH_RECOGNIZE and for the SASE+ front end. What compiles
is run on a table with rows (NULLs included), so evaluation is fuzzed too."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.api import compile_query, run_plan
from sparkcep.errors import InternalError, SparkCepError
from sparkcep.language.sase import parse_sase
from tests.tiers import examples

EXAMPLES = examples(500, scaled=True)
TABLE = pa.table({
    "ts": pa.array([0, 1, 2, 3, 4, 5], pa.int64()),
    "price": pa.array([1.0, None, 3.5, float("nan"), 0.0, -2.0], pa.float64()),
    "name": pa.array(["a", "b", None, "a", "ab", ""], pa.string()),
    "t": pa.array([dt.datetime(2024, 1, 1, 0, 0, i) if i != 3 else None for i in range(6)], pa.timestamp("us", "UTC")),
})


def compile_and_run(text) -> None:
    """Compile ``text`` and run it on TABLE and on its first row: only SparkCepErrors that are
    not InternalErrors may come out."""
    try:
        plan = compile_query(text, TABLE)
        for table in (TABLE, TABLE.slice(0, 1)):
            run_plan(plan, table)
    except InternalError:
        raise
    except SparkCepError:
        pass

MR_TOKENS = """PARTITION BY ORDER ASC DESC NULLS FIRST LAST MEASURES AS ONE ROW ROWS PER MATCH ALL SHOW
OMIT EMPTY MATCHES WITH UNMATCHED AFTER SKIP PAST TO NEXT PATTERN PERMUTE WITHIN MAXLENGTH SUBSET
DEFINE EVENT SELECTION STRICT PARTITION CONTIGUITY TILL ANY RUNNING FINAL PREVIOUS AND OR NOT IS
NULL TRUE FALSE CASE WHEN THEN ELSE END INTERVAL '1' HOUR ts price name t A B C U PREV NEXT COUNT
SUM AVG MIN MAX CLASSIFIER MATCH_NUMBER ( ) , . * + ? { } {- -} | ^ $ ! = < > <= >= <> 0 1 2 3.5
'x' - / % CAST TRY_CAST varchar integer double boolean timestamp LIKE ESCAPE ARRAY [ ] EXTRACT FROM
YEAR DISTINCT count_if max_by bool_and stddev array_agg array_join cardinality element_at IF nullif
concat mod round date_trunc 'day' 99999999999999999999999 9223372036854775807 1e400 1e300 2147483648
INTERVAL '1e300' DAY TIMESTAMP '2024-01-01 00:00:02' ts||name""".split() + [
    "(" * 70, ")" * 70, " AND ".join(["price > 0"] * 400), "NOT " * 90]

SASE_TOKENS = """PATTERN SEQ WHERE WITHIN RETURN AS AND OR NOT skip_till_next_match skip_till_any_match
strict_contiguity partition_contiguity Stock Shelf a b c a[] b[] a[i] a[i-1] a[..i-1] a[1] a[a.len]
.price .ts price ts name ( ) , [ ] { } ! + = < > 80%* 500 1 'x' hours EVENTS avg count max - *""".split()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(MR_TOKENS), min_size=0, max_size=40))
def test_match_recognize_text_fails_cleanly(tokens):
    compile_and_run(" ".join(tokens))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(MR_TOKENS), min_size=0, max_size=25))
def test_almost_valid_queries_fail_cleanly(tokens):
    # A valid frame with random content in the DEFINE condition and the pattern.
    half = len(tokens) // 2
    text = (f"ORDER BY ts MEASURES COUNT(*) AS n, {' '.join(tokens[:half]) or 'CLASSIFIER()'} AS m "
            f"PATTERN (A B*) DEFINE A AS {' '.join(tokens[half:]) or 'TRUE'}")
    compile_and_run(text)
    compile_and_run(f"ORDER BY ts PATTERN ({' '.join(tokens[:half]) or 'A'}) DEFINE A AS {' '.join(tokens[half:]) or 'TRUE'}")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(SASE_TOKENS), min_size=0, max_size=30))
def test_sase_text_fails_cleanly(tokens):
    text = "PATTERN SEQ(Stock+ a[], Stock b) WHERE " + " ".join(tokens)
    try:
        query = parse_sase(text, "ts", None)
    except SparkCepError:
        return
    compile_and_run(query)
