"""Malformed queries end in a positioned QueryError (or compile), never in a bare traceback:
random token soups for MATCH_RECOGNIZE and for the SASE+ front end."""

from __future__ import annotations

import os

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.api import compile_query
from sparkcep.errors import SparkCepError
from sparkcep.language.sase import parse_sase

EXAMPLES = int(os.environ.get("SPARKCEP_PROPERTY_EXAMPLES", "1500")) // 3
TABLE = pa.table({"ts": pa.array([], pa.int64()), "price": pa.array([], pa.float64()),
                  "name": pa.array([], pa.string()), "t": pa.array([], pa.timestamp("us"))})

MR_TOKENS = """PARTITION BY ORDER ASC DESC NULLS FIRST LAST MEASURES AS ONE ROW ROWS PER MATCH ALL SHOW
OMIT EMPTY MATCHES WITH UNMATCHED AFTER SKIP PAST TO NEXT PATTERN PERMUTE WITHIN MAXLENGTH SUBSET
DEFINE EVENT SELECTION STRICT PARTITION CONTIGUITY TILL ANY RUNNING FINAL PREVIOUS AND OR NOT IS
NULL TRUE FALSE CASE WHEN THEN ELSE END INTERVAL '1' HOUR ts price name t A B C U PREV NEXT COUNT
SUM AVG MIN MAX CLASSIFIER MATCH_NUMBER ( ) , . * + ? { } {- -} | ^ $ ! = < > <= >= <> 0 1 2 3.5
'x' - / %""".split()

SASE_TOKENS = """PATTERN SEQ WHERE WITHIN RETURN AS AND OR NOT skip_till_next_match skip_till_any_match
strict_contiguity partition_contiguity Stock Shelf a b c a[] b[] a[i] a[i-1] a[..i-1] a[1] a[a.len]
.price .ts price ts name ( ) , [ ] { } ! + = < > 80%* 500 1 'x' hours EVENTS avg count max - *""".split()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(MR_TOKENS), min_size=0, max_size=40))
def test_match_recognize_text_fails_cleanly(tokens):
    text = " ".join(tokens)
    try:
        compile_query(text, TABLE)
    except SparkCepError:
        pass


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(MR_TOKENS), min_size=0, max_size=25))
def test_almost_valid_queries_fail_cleanly(tokens):
    # A valid frame with random content in the DEFINE condition and the pattern.
    half = len(tokens) // 2
    text = (f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN ({' '.join(tokens[:half]) or 'A'}) "
            f"DEFINE A AS {' '.join(tokens[half:]) or 'TRUE'}")
    try:
        compile_query(text, TABLE)
    except SparkCepError:
        pass


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(SASE_TOKENS), min_size=0, max_size=30))
def test_sase_text_fails_cleanly(tokens):
    text = "PATTERN SEQ(Stock+ a[], Stock b) WHERE " + " ".join(tokens)
    try:
        compile_query(parse_sase(text, "ts", None), TABLE)
    except SparkCepError:
        pass
