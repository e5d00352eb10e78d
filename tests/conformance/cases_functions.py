"""Casts and scalar functions in DEFINE and MEASURES, conditions that read no column,
timestamp literals and intervals.

Trino's documentation: CAST fails on a bad value, TRY_CAST gives NULL; LIKE is case
sensitive, `_` is one character, `%` any run, ESCAPE makes the next character literal;
IF(c, a) is NULL when c is not true; concat is NULL when any argument is NULL (like ||),
concat_ws skips NULL arguments; mod takes the dividend's sign; strpos is 1-based (0 when
absent); greatest/least are NULL when any argument is NULL; round rounds half away from zero.
"""

import datetime

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


ONE = """PATTERN (A)
         DEFINE A AS true"""

UTC = datetime.UTC

CASES: list[Case] = [
    Case(
        name="fn_cast_to_varchar",
        data={"id": [1], "v": [42], "flag": [True]},
        types={"flag": "bool"},
        query="ORDER BY id "
        "MEASURES CAST(A.v AS varchar) || '!' AS sv, CAST(A.flag AS varchar) AS sb " + ONE,
        expected=rows(("sv", "sb"), ("42!", "true")),
    ),
    Case(
        name="fn_cast_varchar_to_numbers",
        data={"id": [1], "s": ["17"]},
        query="ORDER BY id "
        "MEASURES CAST(A.s AS integer) AS i, CAST(A.s AS bigint) + 1 AS b, "
        "CAST(A.s AS double) / 2 AS d " + ONE,
        expected=rows(("i", "b", "d"), (17, 18, 8.5)),
    ),
    Case(
        name="fn_integer_division_and_remainder",
        data={"id": [1, 2], "v": [7, -7]},
        query="ORDER BY id "
        "MEASURES A.v / 2 AS q, A.v % 2 AS r, CAST(A.v AS double) / 2 AS fq " + ONE,
        expected=rows(("q", "r", "fq"), (3, 1, 3.5), (-3, -1, -3.5)),
        note="bigint / bigint truncates toward zero; % takes the dividend's sign.",
    ),
    Case(
        name="fn_cast_double_to_integer_rounds",
        data={"id": [1, 2, 3], "x": [3.7, -3.7, 2.2]},
        query="ORDER BY id MEASURES CAST(A.x AS integer) AS i, CAST(A.x AS bigint) AS b " + ONE,
        expected=rows(("i", "b"), (4, 4), (-4, -4), (2, 2)),
        note="Trino rounds a double to the nearest integer when casting (it does not truncate).",
    ),
    Case(
        name="fn_cast_boolean_and_real",
        data={"id": [1, 2], "s": ["true", "false"], "v": [0, 3], "x": [1.5, 0.25]},
        query="ORDER BY id "
        "MEASURES CAST(A.s AS boolean) AS sb, CAST(A.v AS boolean) AS vb, CAST(A.x AS real) AS r "
        + ONE,
        expected=rows(("sb", "vb", "r"), (True, False, 1.5), (False, True, 0.25)),
        note="An integer casts to boolean as 'not zero'.",
    ),
    Case(
        name="fn_cast_date_timestamp",
        data={
            "id": [1],
            "s": ["2024-02-29"],
            "t": ["2024-01-02 03:04:05"],
            "ts": [datetime.datetime(2024, 5, 6, 7, 8, 9)],
        },
        types={"ts": "timestamp[us]"},
        query="ORDER BY id "
        "MEASURES CAST(A.s AS date) AS d, CAST(A.t AS timestamp) AS t2, CAST(A.ts AS date) AS d2, "
        "CAST(CAST(A.s AS date) AS varchar) AS ds " + ONE,
        expected=rows(
            ("d", "t2", "d2", "ds"),
            (
                datetime.date(2024, 2, 29),
                datetime.datetime(2024, 1, 2, 3, 4, 5),
                datetime.date(2024, 5, 6),
                "2024-02-29",
            ),
        ),
    ),
    Case(
        name="fn_cast_varchar_n_truncates",
        data={"id": [1], "s": ["abcdef"]},
        query="ORDER BY id "
        "MEASURES CAST(A.s AS varchar(3)) AS t, length(CAST(A.s AS varchar(3))) AS n " + ONE,
        expected=rows(("t", "n"), ("abc", 3)),
        note="Trino truncates a varchar cast to a shorter varchar(n).",
    ),
    Case(
        name="fn_try_cast_measures",
        data={"id": [1, 2, 3], "s": ["12", "x1", None]},
        query="ORDER BY id "
        "MEASURES TRY_CAST(A.s AS integer) AS i, TRY_CAST(A.s AS double) AS d " + ONE,
        expected=rows(("i", "d"), (12, 12.0), (None, None), (None, None)),
    ),
    Case(
        name="fn_try_cast_in_define",
        data={"id": [1, 2, 3, 4], "s": ["12", "x1", "7", "abc"]},
        query="""ORDER BY id
                 MEASURES A.id AS i, TRY_CAST(A.s AS integer) * 2 AS twice
                 PATTERN (A)
                 DEFINE A AS TRY_CAST(s AS integer) IS NOT NULL""",
        expected=rows(("i", "twice"), (1, 24), (3, 14)),
    ),
    Case(
        name="fn_like_percent_case_sensitive",
        data={
            "id": [1, 2, 3, 4, 5, 6],
            "name": ["apple", "Apricot", "banana", "avocado", "kiwi", "ax"],
        },
        query="""ORDER BY id
                 MEASURES A.name AS n
                 PATTERN (A)
                 DEFINE A AS name LIKE 'a%'""",
        expected=rows(("n",), ("apple",), ("avocado",), ("ax",)),
        note="LIKE is case sensitive: 'Apricot' does not match 'a%'.",
    ),
    Case(
        name="fn_like_underscore",
        data={
            "id": [1, 2, 3, 4, 5, 6],
            "name": ["apple", "Apricot", "banana", "avocado", "kiwi", "ax"],
        },
        query="""ORDER BY id
                 MEASURES A.name AS n
                 PATTERN (A)
                 DEFINE A AS name LIKE '_i__'""",
        expected=rows(("n",), ("kiwi",)),
    ),
    Case(
        name="fn_not_like",
        data={
            "id": [1, 2, 3, 4, 5, 6],
            "name": ["apple", "Apricot", "banana", "avocado", "kiwi", "ax"],
        },
        query="""ORDER BY id
                 MEASURES A.name AS n
                 PATTERN (A)
                 DEFINE A AS name NOT LIKE '%a%'""",
        expected=rows(("n",), ("Apricot",), ("kiwi",)),
        note="'Apricot' has an upper-case A only.",
    ),
    Case(
        name="fn_like_escape_backslash",
        data={"id": [1, 2, 3, 4], "code": ["a_1", "ab1", "a%1", "a_"]},
        query=r"""ORDER BY id
                 MEASURES A.code AS c
                 PATTERN (A)
                 DEFINE A AS code LIKE 'a\_%' ESCAPE '\'""",
        expected=rows(("c",), ("a_1",), ("a_",)),
        note="'\\_' is a literal underscore; '%' may match nothing.",
    ),
    Case(
        name="fn_like_escape_custom",
        data={"id": [1, 2, 3, 4], "code": ["a_1", "ab1", "a%1", "a_"]},
        query="""ORDER BY id
                 MEASURES A.code AS c
                 PATTERN (A)
                 DEFINE A AS code LIKE 'a!%_' ESCAPE '!'""",
        expected=rows(("c",), ("a%1",)),
        note="'a', a literal '%', then exactly one character.",
    ),
    Case(
        name="fn_if_two_and_three_args",
        data={"id": [1, 2], "v": [1, 3]},
        query="ORDER BY id "
        "MEASURES IF(A.v > 2, 'big') AS x, IF(A.v > 2, 'big', 'small') AS y " + ONE,
        expected=rows(("x", "y"), (None, "small"), ("big", "big")),
    ),
    Case(
        name="fn_nullif",
        data={"id": [1, 2], "v": [0, 5]},
        query="ORDER BY id MEASURES NULLIF(A.v, 0) AS nz " + ONE,
        expected=rows(("nz",), (None,), (5,)),
    ),
    Case(
        name="fn_concat_and_concat_ws",
        data={"id": [1, 2], "a": ["x", "y"], "b": [None, "q"], "c": ["z", "r"]},
        types={"b": "string"},
        query="ORDER BY id "
        "MEASURES concat(A.a, A.b, A.c) AS cc, concat_ws(',', A.a, A.b, A.c) AS ws, "
        "A.a || A.b AS op " + ONE,
        expected=rows(("cc", "ws", "op"), (None, "x,z", None), ("yqr", "y,q,r", "yq")),
    ),
    Case(
        name="fn_sign_mod",
        data={"id": [1, 2, 3], "v": [-7, 0, 7]},
        query="ORDER BY id "
        "MEASURES sign(A.v) AS sg, mod(A.v, 3) AS m3, mod(A.v, -3) AS mn3, A.v % 3 AS r3 " + ONE,
        expected=rows(("sg", "m3", "mn3", "r3"), (-1, -1, -1, -1), (0, 0, 0, 0), (1, 1, 1, 1)),
        note="The remainder has the dividend's sign: -7 mod 3 = -1, 7 mod -3 = 1.",
    ),
    Case(
        name="fn_mod_of_infinity",
        data={"id": [1, 2, 3], "x": [float("inf"), 2.0, float("-inf")]},
        types={"x": "double"},
        query="ORDER BY id MEASURES mod(A.x, 1.5) AS m, A.x % 1.5 AS r ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS NOT (x % 1.5 < 100)",
        expected=rows(("m", "r"), (float("nan"), float("nan")), (float("nan"), float("nan"))),
        note="IEEE's remainder: an infinite dividend gives NaN (the mask and the row evaluator alike).",
    ),
    Case(
        name="fn_trim_replace_strpos_starts_with",
        data={"id": [1], "s": ["  ab c  "], "w": ["banana"]},
        query="ORDER BY id "
        "MEASURES trim(A.s) AS t, replace(A.s, ' ', '') AS r3, replace(A.w, 'a') AS r2, "
        "strpos(A.w, 'na') AS p, strpos(A.w, 'x') AS p0, starts_with(A.w, 'ban') AS sw, "
        "starts_with(A.w, 'an') AS sw2, replace('abc', '', 'x') AS re, replace('abc', '') AS re2 " + ONE,
        expected=rows(
            ("t", "r3", "r2", "p", "p0", "sw", "sw2", "re", "re2"),
            ("ab c", "abc", "bnn", 3, 0, True, False, "xaxbxcx", "abc"),
        ),
        note="Two-argument replace removes every occurrence; an empty search string matches "
        "before, between and after the characters (as in Trino).",
    ),
    Case(
        name="fn_date_trunc",
        data={"id": [1], "ts": [datetime.datetime(2024, 3, 15, 13, 45, 30)]},
        types={"ts": "timestamp[us]"},
        query="ORDER BY id "
        "MEASURES date_trunc('day', A.ts) AS d, date_trunc('hour', A.ts) AS h, "
        "date_trunc('month', A.ts) AS mo, date_trunc('year', A.ts) AS y " + ONE,
        expected=rows(
            ("d", "h", "mo", "y"),
            (
                datetime.datetime(2024, 3, 15, 0, 0),
                datetime.datetime(2024, 3, 15, 13, 0),
                datetime.datetime(2024, 3, 1, 0, 0),
                datetime.datetime(2024, 1, 1, 0, 0),
            ),
        ),
    ),
    Case(
        name="fn_extract_and_field_functions",
        data={"id": [1], "ts": [datetime.datetime(2024, 3, 15, 13, 45, 30)]},
        types={"ts": "timestamp[us]"},
        query="ORDER BY id "
        "MEASURES year(A.ts) AS yr, month(A.ts) AS mo, day(A.ts) AS dy, hour(A.ts) AS hr, "
        "minute(A.ts) AS mi, EXTRACT(YEAR FROM A.ts) AS ex_yr, EXTRACT(MINUTE FROM A.ts) AS ex_mi "
        + ONE,
        expected=rows(
            ("yr", "mo", "dy", "hr", "mi", "ex_yr", "ex_mi"), (2024, 3, 15, 13, 45, 2024, 45)
        ),
    ),
    Case(
        name="fn_math_and_null_handling",
        data={"id": [1], "v": [-3], "x": [2.5], "y": [-2.5], "z": [3.14159], "n": [None]},
        types={"n": "int64"},
        query="ORDER BY id "
        "MEASURES abs(A.v) AS av, round(A.x) AS rx, round(A.y) AS ry, round(A.z, 2) AS rz, "
        "coalesce(A.n, 7) AS cn, greatest(1, 5, 3) AS g, least(4, 2, 8) AS l, "
        "greatest(A.v, A.n) AS gn " + ONE,
        expected=rows(
            ("av", "rx", "ry", "rz", "cn", "g", "l", "gn"), (3, 3.0, -3.0, 3.14, 7, 5, 2, None)
        ),
        note="round is half away from zero; greatest is NULL when an argument is NULL (Trino).",
    ),
    Case(
        name="fn_string_functions",
        data={"id": [1], "s": ["AbC"], "h": ["hello"]},
        query="ORDER BY id "
        "MEASURES lower(A.s) AS lo, upper(A.s) AS up, length(A.h) AS n, substr(A.h, 2, 3) AS s23, "
        "substr(A.h, -3) AS tail, substr(A.h, 2) AS rest " + ONE,
        expected=rows(
            ("lo", "up", "n", "s23", "tail", "rest"), ("abc", "ABC", 5, "ell", "llo", "ello")
        ),
    ),
    Case(
        name="fn_between_in_case",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 3, 5, 2, 4], "s": ["a", "b", "c", "a", "z"]},
        query="""ORDER BY id
                 MEASURES A.id AS i, CASE WHEN A.v > 3 THEN 'hi' ELSE 'lo' END AS c
                 PATTERN (A)
                 DEFINE A AS v BETWEEN 2 AND 4 AND s IN ('a', 'b', 'z')""",
        expected=rows(("i", "c"), (2, "lo"), (4, "lo"), (5, "hi")),
    ),
    Case(
        name="fn_constant_conditions",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A B)
                 DEFINE A AS 1 = 1, B AS NOT FALSE""",
        expected=rows(("s", "e"), (1, 2), (3, 4)),
    ),
    Case(
        name="fn_condition_true_every_row",
        data={"id": [1, 2, 3]},
        query="ORDER BY id MEASURES A.id AS i " + ONE,
        expected=rows(("i",), (1,), (2,), (3,)),
    ),
    Case(
        name="fn_condition_constant_function",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES count(*) AS n
                 PATTERN (A+)
                 DEFINE A AS length('ab') = 2""",
        expected=rows(("n",), (3,)),
    ),
    Case(
        name="fn_condition_null_never_true",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c
                 PATTERN (A | B)
                 DEFINE A AS NULL""",
        expected=rows(("c",), ("B",), ("B",), ("B",)),
        note="A NULL condition rejects the row; B (undefined) takes it.",
    ),
    Case(
        name="fn_timestamp_literal_naive",
        data={
            "id": [1, 2, 3, 4],
            "ts": [datetime.datetime(2024, 1, 1, 9, 0, s) for s in (1, 2, 3, 4)],
        },
        types={"ts": "timestamp[us]"},
        query="""ORDER BY id
                 MEASURES FIRST(A.id) AS s, count(*) AS n
                 PATTERN (A+)
                 DEFINE A AS ts > TIMESTAMP '2024-01-01 09:00:02'""",
        expected=rows(("s", "n"), (3, 2)),
    ),
    Case(
        name="fn_timestamp_literal_utc",
        data={
            "id": [1, 2, 3, 4],
            "ts": [datetime.datetime(2024, 1, 1, 9, 0, s, tzinfo=UTC) for s in (1, 2, 3, 4)],
        },
        types={"ts": "timestamp[us, tz=UTC]"},
        query="""ORDER BY id
                 MEASURES FIRST(A.id) AS s, count(*) AS n, hour(A.ts) AS h
                 PATTERN (A+)
                 DEFINE A AS ts > TIMESTAMP '2024-01-01 09:00:02'""",
        expected=rows(("s", "n", "h"), (3, 2, 9)),
        note="For a UTC column the literal is wall time in UTC.",
    ),
    Case(
        name="fn_interval_between_rows",
        data={
            "id": [1, 2, 3, 4, 5],
            "ts": [
                datetime.datetime(2024, 1, 1, 10, 0, 0),
                datetime.datetime(2024, 1, 1, 10, 0, 30),
                datetime.datetime(2024, 1, 1, 10, 1, 0),
                datetime.datetime(2024, 1, 1, 10, 5, 0),
                datetime.datetime(2024, 1, 1, 10, 5, 20),
            ],
        },
        types={"ts": "timestamp[us]"},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A B+)
                 DEFINE B AS ts - PREV(ts) <= INTERVAL '1' MINUTE""",
        expected=rows(("s", "e"), (1, 3), (4, 5)),
        note="Gaps 30 s, 30 s, 4 min, 20 s.",
    ),
    Case(
        name="fn_date_literal",
        data={
            "id": [1, 2, 3],
            "d": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 3), datetime.date(2024, 1, 5)],
        },
        types={"d": "date32"},
        query="""ORDER BY id
                 MEASURES FIRST(A.id) AS s, count(*) AS n
                 PATTERN (A+)
                 DEFINE A AS d >= DATE '2024-01-03'""",
        expected=rows(("s", "n"), (2, 2)),
    ),
    Case(
        name="fn_concat_ws_array_and_array_max_min",
        data={"id": [1, 2, 3], "s": ["a", None, "c"], "v": [2.0, 7.5, 1.0]},
        query="""ORDER BY id
                 MEASURES concat_ws('-', array_agg(s)) AS joined, array_max(array_agg(v)) AS mx,
                          array_min(array_agg(v)) AS mn, array_max(array_agg(s)) AS smx,
                          array_min(ARRAY[]) AS empty
                 PATTERN (A+)""",
        expected=rows(("joined", "mx", "mn", "smx", "empty"), ("a-c", 7.5, 1.0, None, None)),
        note="concat_ws(sep, array) skips NULL elements; array_max/array_min are NULL when an "
        "element is NULL or the array is empty (Trino).",
    ),
]
