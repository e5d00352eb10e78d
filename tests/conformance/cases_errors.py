"""Queries that must be rejected with a QueryError of the given code.

Each query is otherwise valid, so the only fault is the one named in the case.
"""

import datetime

from tests.conformance.case import Case

DATA = {"id": [1, 2, 3], "v": [1, 2, 3], "s": ["a", "b", "c"]}
TS_DATA = {
    "id": [1, 2],
    "ts": [datetime.datetime(2024, 1, 1, 9, 0, 0), datetime.datetime(2024, 1, 1, 9, 0, 5)],
}


def err(name, query, code, data=DATA, note="", types=None):
    return Case(
        name=name, data=data, query=query, expected=None, error=code, types=types or {}, note=note
    )


DEEP = "(" * 300 + "v > 0" + ")" * 300

CASES: list[Case] = [
    err(
        "err_syntax_unclosed_pattern",
        "ORDER BY id MEASURES A.v AS a PATTERN (A B DEFINE A AS v > 0",
        "SYNTAX",
    ),
    err(
        "err_syntax_measure_without_expression",
        "ORDER BY id MEASURES AS a PATTERN (A) DEFINE A AS v > 0",
        "SYNTAX",
    ),
    err("err_syntax_incomplete_condition", "ORDER BY id PATTERN (A) DEFINE A AS v >", "SYNTAX"),
    err(
        "err_syntax_quantifier_without_operand",
        "ORDER BY id PATTERN (* A) DEFINE A AS v > 0",
        "SYNTAX",
    ),
    err(
        "err_unknown_variable_in_measure",
        "ORDER BY id MEASURES Z.v AS z PATTERN (A) DEFINE A AS v > 0",
        "UNKNOWN_VARIABLE",
    ),
    err(
        "err_unknown_variable_in_define",
        "ORDER BY id PATTERN (A B) DEFINE B AS v > X.v",
        "UNKNOWN_VARIABLE",
    ),
    err(
        "err_unknown_variable_in_count_star",
        "ORDER BY id MEASURES count(Q.*) AS n PATTERN (A) DEFINE A AS true",
        "UNKNOWN_VARIABLE",
    ),
    err(
        "err_unknown_variable_in_skip_to",
        "ORDER BY id AFTER MATCH SKIP TO LAST Q PATTERN (A B) DEFINE A AS true",
        "UNKNOWN_VARIABLE",
    ),
    err(
        "err_unknown_variable_in_subset",
        "ORDER BY id MEASURES count(U.*) AS n PATTERN (A B) SUBSET U = (A, Q) DEFINE A AS true",
        "UNKNOWN_VARIABLE",
    ),
    err(
        "err_unknown_function_in_measure",
        "ORDER BY id MEASURES foo(A.v) AS f PATTERN (A) DEFINE A AS true",
        "UNKNOWN_FUNCTION",
    ),
    err(
        "err_unknown_function_in_define",
        "ORDER BY id PATTERN (A) DEFINE A AS no_such_fn(v) > 1",
        "UNKNOWN_FUNCTION",
    ),
    err(
        "err_type_number_plus_string",
        "ORDER BY id PATTERN (A) DEFINE A AS v + 'x' > 1",
        "TYPE_MISMATCH",
    ),
    err(
        "err_type_condition_not_boolean",
        "ORDER BY id PATTERN (A) DEFINE A AS v",
        "TYPE_MISMATCH",
        note="A defining condition must be boolean; Trino has no implicit bigint -> boolean coercion.",
    ),
    err(
        "err_type_compare_number_string",
        "ORDER BY id PATTERN (A) DEFINE A AS v = 'abc'",
        "TYPE_MISMATCH",
        note="Trino does not convert between character and numeric types implicitly.",
    ),
    err(
        "err_type_compare_string_number",
        "ORDER BY id PATTERN (A) DEFINE A AS s > 1",
        "TYPE_MISMATCH",
    ),
    err(
        "err_type_if_branches",
        "ORDER BY id MEASURES IF(A.v > 1, 'a', 2) AS x PATTERN (A) DEFINE A AS true",
        "TYPE_MISMATCH",
        note="IF's result types must have a common type (varchar vs bigint has none).",
    ),
    err(
        "err_final_navigation_in_define",
        "ORDER BY id PATTERN (A) DEFINE A AS FINAL LAST(v) > 1",
        "INVALID_SEMANTICS",
    ),
    err(
        "err_final_aggregate_in_define",
        "ORDER BY id PATTERN (A+) DEFINE A AS FINAL count(*) > 1",
        "INVALID_SEMANTICS",
    ),
    err(
        "err_nav_physical_in_physical",
        "ORDER BY id PATTERN (A) DEFINE A AS v > PREV(PREV(v))",
        "INVALID_NAVIGATION",
    ),
    err(
        "err_nav_negative_offset",
        "ORDER BY id PATTERN (A) DEFINE A AS v > PREV(v, -1)",
        "INVALID_NAVIGATION",
    ),
    err(
        "err_nav_non_literal_offset",
        "ORDER BY id PATTERN (A) DEFINE A AS v > PREV(v, id)",
        "INVALID_NAVIGATION",
    ),
    err(
        "err_nav_physical_in_logical",
        "ORDER BY id MEASURES LAST(PREV(v)) AS x PATTERN (A) DEFINE A AS true",
        "INVALID_NAVIGATION",
    ),
    err(
        "err_nav_logical_in_logical",
        "ORDER BY id MEASURES FIRST(LAST(v)) AS x PATTERN (A) DEFINE A AS true",
        "INVALID_NAVIGATION",
    ),
    err(
        "err_nav_nesting_not_immediate",
        "ORDER BY id MEASURES PREV(LAST(v) + 1) AS x PATTERN (A) DEFINE A AS true",
        "INVALID_NAVIGATION",
        note="Trino: 'Immediate nesting is required for pattern navigation functions'.",
    ),
    err(
        "err_nav_mixed_variables",
        "ORDER BY id MEASURES LAST(A.v + B.v) AS x PATTERN (A B) DEFINE A AS true",
        "INCONSISTENT_LABELS",
        note="Trino's documentation: all column references inside a navigation must name the same "
        "variable (LAST(A.totalprice + B.totalprice) is incorrect).",
    ),
    err(
        "err_nav_without_column",
        "ORDER BY id MEASURES LAST(1) AS x PATTERN (A) DEFINE A AS true",
        "INVALID_NAVIGATION",
        note="Trino's documentation: a navigation needs a column reference or CLASSIFIER() "
        "(LAST(1) is incorrect). Code chosen by analogy.",
    ),
    err(
        "err_args_abs",
        "ORDER BY id MEASURES abs(A.v, 2) AS x PATTERN (A) DEFINE A AS true",
        "WRONG_ARGUMENTS",
    ),
    err(
        "err_args_length",
        "ORDER BY id MEASURES length(A.s, A.s) AS x PATTERN (A) DEFINE A AS true",
        "WRONG_ARGUMENTS",
    ),
    err(
        "err_args_match_number",
        "ORDER BY id MEASURES MATCH_NUMBER(1) AS x PATTERN (A) DEFINE A AS true",
        "WRONG_ARGUMENTS",
    ),
    err("err_too_complex_nesting", f"ORDER BY id PATTERN (A) DEFINE A AS {DEEP}", "TOO_COMPLEX"),
    err(
        "err_maxlength_out_of_range",
        "ORDER BY id PATTERN (A+) MAXLENGTH 99999999999999999999999 DEFINE A AS true",
        "NUMBER_OUT_OF_RANGE",
    ),
    err(
        "err_interval_out_of_range",
        "ORDER BY ts PATTERN (A B) DEFINE B AS ts - PREV(ts) < INTERVAL '1e300' DAY",
        "NUMBER_OUT_OF_RANGE",
        data=TS_DATA,
        types={"ts": "timestamp[us]"},
    ),
    err(
        "err_exclusion_with_unmatched_rows",
        "ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH WITH UNMATCHED ROWS "
        "PATTERN (A {- B -}) DEFINE A AS true",
        "CONFLICTING_CLAUSES",
        note="Forbidden by Trino's documentation (two clauses that cannot be combined).",
    ),
]

# What stays unsupported: each a positioned QueryError with code NOT_SUPPORTED.
CASES += [
    err("err_unsupported_cast_target", "ORDER BY id MEASURES CAST(LAST(v) AS time(3)) AS x PATTERN (A)",
        "NOT_SUPPORTED"),
    err("err_unsupported_extract_field", "ORDER BY id MEASURES EXTRACT(TIMEZONE_HOUR FROM LAST(ts)) AS x PATTERN (A)",
        "NOT_SUPPORTED", data=TS_DATA),
    err("err_unsupported_distinct_scalar", "ORDER BY id MEASURES lower(DISTINCT LAST(s)) AS x PATTERN (A)",
        "NOT_SUPPORTED"),
    err("err_unsupported_match_number_define_all_matches",
        "ORDER BY id ALL MATCHES PATTERN (A+) DEFINE A AS MATCH_NUMBER() < 3", "NOT_SUPPORTED"),
    err("err_unsupported_prev_classifier_of_variable_with_event_selection",
        "ORDER BY id EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B) DEFINE B AS PREV(CLASSIFIER(A)) = 'A'",
        "NOT_SUPPORTED"),
    err("err_unsupported_negation_in_group", "ORDER BY id PATTERN (A (!B C)+ C) DEFINE A AS true", "NOT_SUPPORTED"),
    err("err_unsupported_anchor_skip_till_next",
        "ORDER BY id EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (^ A B) DEFINE A AS true", "NOT_SUPPORTED"),
    err("err_unsupported_permute_eight", "ORDER BY id PATTERN (PERMUTE(A, B, C, D, E, F, G, H))", "NOT_SUPPORTED"),
    err("err_unsupported_varchar_size_on_integer", "ORDER BY id MEASURES CAST(LAST(v) AS integer(3)) AS x PATTERN (A)",
        "NOT_SUPPORTED"),
    err("err_unsupported_match_number_in_segment_aggregate",
        "ORDER BY id MEASURES SUM(MATCH_NUMBER()) AS x PATTERN (S) DEFINE SEGMENT S AS window(2)", "NOT_SUPPORTED"),
    err("err_too_complex_not_chain", "ORDER BY id PATTERN (A) DEFINE A AS " + "NOT " * 200 + "true", "TOO_COMPLEX"),
    err("err_number_out_of_range_offset", "ORDER BY id MEASURES FIRST(v, 3000000000) AS x PATTERN (A)",
        "NUMBER_OUT_OF_RANGE"),
    err("err_number_out_of_range_quantifier", "ORDER BY id PATTERN (A{99999999999})", "NUMBER_OUT_OF_RANGE"),
    err("err_number_out_of_range_double", "ORDER BY id PATTERN (A) DEFINE A AS v < 1e400", "NUMBER_OUT_OF_RANGE"),
    err("err_reserved_word_as_column", "ORDER BY id PATTERN (A) DEFINE A AS from > 1", "SYNTAX"),
    err("err_cast_type_mismatch", "ORDER BY id MEASURES CAST(LAST(ts) AS double) AS x PATTERN (A)", "TYPE_MISMATCH",
        data=TS_DATA),
    err("err_like_on_number", "ORDER BY id PATTERN (A) DEFINE A AS v LIKE '1%'", "TYPE_MISMATCH"),
    err("err_count_if_not_boolean", "ORDER BY id MEASURES count_if(v) AS x PATTERN (A)", "TYPE_MISMATCH"),
    err("err_max_by_one_argument", "ORDER BY id MEASURES max_by(v) AS x PATTERN (A)", "WRONG_ARGUMENTS"),
    err("err_subscript_not_integer", "ORDER BY id MEASURES array_agg(v)['a'] AS x PATTERN (A)", "TYPE_MISMATCH"),
]
