"""Aggregates in MEASURES and DEFINE, RUNNING and FINAL.

Trino: aggregates run over all rows of the match, or the rows of a variable / subset named by
the arguments (count(A.*) counts A's rows). Running semantics is the default: in DEFINE the
rows matched so far plus the current row; in ALL ROWS PER MATCH the rows up to the current
one. count(x), sum, avg, min, max skip NULLs; over no rows count is 0, the others NULL.
stddev = stddev_samp, variance = var_samp (NULL for fewer than two rows).
"""

import datetime

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


NULLS = {"id": [1, 2, 3, 4, 5], "v": [10, None, 30, None, 50]}

CASES: list[Case] = [
    Case(
        name="agg_count_forms",
        data=NULLS,
        query="""ORDER BY id
                 MEASURES count(*) AS c_star, count() AS c_empty, count(v) AS cv,
                          count(A.*) AS ca, count(B.*) AS cb, count(A.v) AS cav, count(B.v) AS cbv
                 PATTERN (A+ B)
                 DEFINE A AS id <= 4""",
        expected=rows(("c_star", "c_empty", "cv", "ca", "cb", "cav", "cbv"), (5, 5, 3, 4, 1, 2, 1)),
        note="A = rows 1-4 (v 10, NULL, 30, NULL), B = row 5 (50).",
    ),
    Case(
        name="agg_sum_avg_min_max_skip_nulls",
        data=NULLS,
        query="""ORDER BY id
                 MEASURES sum(v) AS s, avg(v) AS a, min(v) AS mn, max(v) AS mx,
                          sum(A.v) AS sa, avg(A.v) AS aa, min(A.v) AS mna, max(B.v) AS mxb
                 PATTERN (A+ B)
                 DEFINE A AS id <= 4""",
        expected=rows(
            ("s", "a", "mn", "mx", "sa", "aa", "mna", "mxb"), (90, 30.0, 10, 50, 40, 20.0, 10, 50)
        ),
    ),
    Case(
        name="agg_all_null_input",
        data={"id": [1, 2], "v": [None, None]},
        types={"v": "int64"},
        query="""ORDER BY id
                 MEASURES sum(v) AS s, avg(v) AS a, min(v) AS mn, max(v) AS mx,
                          count(v) AS cv, count(*) AS c
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("s", "a", "mn", "mx", "cv", "c"), (None, None, None, None, 0, 2)),
    ),
    Case(
        name="agg_running_final_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES RUNNING sum(v) AS rs, FINAL sum(v) AS fs, sum(v) AS ds,
                          FINAL avg(v) AS fa, RUNNING max(v) AS rm, RUNNING avg(v) AS ra
                 ALL ROWS PER MATCH
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "v": 1, "rs": 1, "fs": 10, "ds": 1, "fa": 2.5, "rm": 1, "ra": 1.0},
            {"id": 2, "v": 2, "rs": 3, "fs": 10, "ds": 3, "fa": 2.5, "rm": 2, "ra": 1.5},
            {"id": 3, "v": 3, "rs": 6, "fs": 10, "ds": 6, "fa": 2.5, "rm": 3, "ra": 2.0},
            {"id": 4, "v": 4, "rs": 10, "fs": 10, "ds": 10, "fa": 2.5, "rm": 4, "ra": 2.5},
        ],
        note="Aggregates default to RUNNING.",
    ),
    Case(
        name="agg_sum_of_variable_in_define",
        data={"id": [1, 2, 3, 4, 5], "v": [100, 3, 4, 5, 1]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, sum(B.v) AS sb
                 PATTERN (A B+)
                 DEFINE B AS sum(B.v) < 10""",
        expected=rows(("s", "e", "sb"), (1, 3, 7), (4, 5, 1)),
        note="sum(B.v) in B's condition includes the current row: 3, 7, then 12 fails at row 4. "
        "Row 4 starts the next match as A; row 5: sum 1.",
    ),
    Case(
        name="agg_avg_universal_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [3, 1, 5, 0, 0, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, avg(v) AS av
                 PATTERN (A+)
                 DEFINE A AS avg(v) > 2""",
        expected=rows(("s", "e", "av"), (1, 1, 3.0), (3, 4, 2.5), (6, 6, 4.0)),
        note="Row 2: avg(3, 1) = 2 is not > 2. From 2: avg(1) fails. From 3: avg(5, 0) = 2.5, "
        "avg(5, 0, 0) = 1.67 fails. From 5: avg(0) fails. From 6: 4.",
    ),
    Case(
        name="agg_count_if",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 5, 2, 7, 3]},
        query="""ORDER BY id
                 MEASURES count_if(v > 2) AS n, count_if(v > 100) AS n_big
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("n", "n_big"), (3, 0)),
    ),
    Case(
        name="agg_bool_and_or_every",
        data={
            "id": [1, 2, 3],
            "flag": [True, True, False],
            "ok": [True, True, True],
            "v": [1, 2, 3],
        },
        types={"flag": "bool", "ok": "bool"},
        query="""ORDER BY id
                 MEASURES bool_and(flag) AS ba, bool_or(flag) AS bo, every(ok) AS ev,
                          bool_and(v > 0) AS pos, bool_or(v > 5) AS big
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("ba", "bo", "ev", "pos", "big"), (False, True, True, True, False)),
    ),
    Case(
        name="agg_bool_and_running_all_rows",
        data={"id": [1, 2, 3], "flag": [True, True, False]},
        types={"flag": "bool"},
        query="""ORDER BY id
                 MEASURES bool_and(flag) AS ba, FINAL bool_or(NOT flag) AS any_false
                 ALL ROWS PER MATCH
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "flag": True, "ba": True, "any_false": True},
            {"id": 2, "flag": True, "ba": True, "any_false": True},
            {"id": 3, "flag": False, "ba": False, "any_false": True},
        ],
    ),
    Case(
        name="agg_max_by_min_by",
        data={"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "v": [0, 9, 1, 7]},
        query="""ORDER BY id
                 MEASURES max_by(name, v) AS mx, min_by(name, v) AS mn,
                          max_by(B.name, B.v) AS mxb, min_by(B.name, B.v) AS mnb,
                          max_by(A.name, A.v) AS mxa, min_by(B.id, B.v) AS mnb_id
                 PATTERN (A B+)
                 DEFINE A AS true""",
        expected=rows(("mx", "mn", "mxb", "mnb", "mxa", "mnb_id"), ("b", "a", "b", "c", "a", 3)),
        note="A = row 1 (v 0), B = rows 2-4 (v 9, 1, 7). Over all rows the minimum is A's row.",
    ),
    Case(
        name="agg_arbitrary_any_value",
        data={"id": [1, 2, 3, 4], "v": [None, 5, None, 5]},
        query="""ORDER BY id
                 MEASURES arbitrary(v) AS ar, any_value(v) AS av
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("ar", "av"), (5, 5)),
        note="Both return a non-NULL value when one exists; every non-NULL value is 5.",
    ),
    Case(
        name="agg_stddev_variance",
        data={"id": [1, 2, 3, 4, 5, 6, 7, 8], "v": [2, 4, 4, 4, 5, 5, 7, 9]},
        query="""ORDER BY id
                 MEASURES stddev(v) AS sd, stddev_samp(v) AS sds, stddev_pop(v) AS sdp,
                          variance(v) AS var, var_samp(v) AS vs, var_pop(v) AS vp
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(
            ("sd", "sds", "sdp", "var", "vs", "vp"),
            (2.138089935299395, 2.138089935299395, 2.0, 4.571428571428571, 4.571428571428571, 4.0),
        ),
        note="Mean 5, squared deviations sum to 32: population variance 4, sample 32/7.",
    ),
    Case(
        name="agg_stddev_variance_single_row",
        data={"id": [1], "v": [5]},
        query="""ORDER BY id
                 MEASURES stddev(v) AS sd, variance(v) AS var, stddev_pop(v) AS sdp, var_pop(v) AS vp
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(("sd", "var", "sdp", "vp"), (None, None, 0.0, 0.0)),
        note="Sample statistics need two rows (NULL); population ones are 0 over one row.",
    ),
    Case(
        name="agg_count_distinct",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 1, None, 2, 3]},
        query="""ORDER BY id
                 MEASURES count(DISTINCT v) AS nd, count(v) AS n
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("nd", "n"), (3, 5)),
        note="Requested by the brief as a feature. Caution: Trino itself rejects DISTINCT in "
        "pattern recognition aggregates (NOT_SUPPORTED: 'Cannot use DISTINCT with aggregate "
        "function in pattern recognition context').",
    ),
    Case(
        name="agg_over_subset",
        data={"id": [1, 2, 3], "v": [1, 10, 100]},
        query="""ORDER BY id
                 MEASURES sum(U.v) AS su, count(U.*) AS cu, avg(U.v) AS au, max(U.v) AS mxu,
                          min(U.v) AS mnu
                 PATTERN (A B C)
                 SUBSET U = (A, C)
                 DEFINE A AS true""",
        expected=rows(("su", "cu", "au", "mxu", "mnu"), (101, 2, 50.5, 100, 1)),
    ),
    Case(
        name="agg_array_join_of_array_agg",
        data={"id": [1, 2, 3], "v": [1, 2, 3], "s": ["x", "y", "z"]},
        query="""ORDER BY id
                 MEASURES array_join(array_agg(v), ',') AS vs, array_join(array_agg(s), '') AS ss
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("vs", "ss"), ("1,2,3", "xyz")),
    ),
    Case(
        name="agg_avg_of_other_variable_with_backtracking",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 9, 3]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, avg(A.v) AS aa
                 PATTERN (A+ B)
                 DEFINE B AS v > 2 * avg(A.v)""",
        expected=rows(("s", "e", "aa"), (1, 3, 1.5)),
        note="Greedy A+ takes rows 1-4 and leaves no B; A = 1-3, B = row 4: 3 > 2*4 fails; "
        "A = 1-2, B = row 3: 9 > 2*1.5 holds. Row 4 then has no B.",
    ),
    Case(
        name="agg_count_variable_running_all_rows",
        data={"id": [1, 2, 3, 4], "v": [0, 1, 1, 2]},
        query="""ORDER BY id
                 MEASURES count(B.*) AS nb, FINAL count(B.*) AS fnb, sum(B.v) AS sb
                 ALL ROWS PER MATCH
                 PATTERN (A B+ C)
                 DEFINE A AS v = 0, B AS v = 1, C AS v = 2""",
        expected=[
            {"id": 1, "v": 0, "nb": 0, "fnb": 2, "sb": None},
            {"id": 2, "v": 1, "nb": 1, "fnb": 2, "sb": 1},
            {"id": 3, "v": 1, "nb": 2, "fnb": 2, "sb": 2},
            {"id": 4, "v": 2, "nb": 2, "fnb": 2, "sb": 2},
        ],
    ),
    Case(
        name="agg_min_max_strings_dates",
        data={
            "id": [1, 2, 3],
            "s": ["pear", "apple", "fig"],
            "d": [datetime.date(2024, 3, 1), datetime.date(2024, 1, 5), datetime.date(2024, 2, 1)],
        },
        types={"d": "date32"},
        query="""ORDER BY id
                 MEASURES min(s) AS mns, max(s) AS mxs, min(d) AS mnd, max(d) AS mxd
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(
            ("mns", "mxs", "mnd", "mxd"),
            ("apple", "pear", datetime.date(2024, 1, 5), datetime.date(2024, 3, 1)),
        ),
    ),
    Case(
        name="agg_integer_sum_double_avg",
        data={"id": [1, 2], "v": [1, 2]},
        query="""ORDER BY id
                 MEASURES sum(v) AS s, avg(v) AS a, sum(v) / count(*) AS q
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("s", "a", "q"), (3, 1.5, 1)),
        note="sum of bigint is bigint; avg is double; bigint / bigint truncates (3 / 2 = 1).",
    ),
    Case(
        name="agg_count_of_variable_in_define",
        data={"id": [1, 2, 3, 4, 5]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, count(A.*) AS na
                 PATTERN (A+ B)
                 DEFINE A AS count(A.*) <= 2""",
        expected=rows(("s", "e", "na"), (1, 3, 2), (4, 5, 1)),
        note="Row 3 would be a third A, so it is B. From row 4: A = 4, 5, then no row for B; "
        "backtrack to A = 4, B = 5.",
    ),
    Case(
        name="agg_count_column_in_define_skips_nulls",
        data={"id": [1, 2, 3, 4, 5], "v": [None, 1, None, 2, 3]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, count(*) AS n
                 PATTERN (A+)
                 DEFINE A AS count(v) < 2""",
        expected=rows(("s", "e", "n"), (1, 3, 3), (4, 4, 1), (5, 5, 1)),
        note="From row 1 count(v) is 0, 1, 1, then 2 at row 4 (fails). From 4: 1, then 2 fails. From 5: 1.",
    ),
    Case(
        name="agg_over_variable_without_rows",
        data={"id": [1], "v": [1]},
        query="""ORDER BY id
                 MEASURES sum(B.v) AS sb, count(B.*) AS cb, count_if(B.v > 0) AS cib,
                          array_agg(B.v) AS ab, max_by(B.id, B.v) AS mbb, count(*) AS n
                 PATTERN (A B?)
                 DEFINE B AS v > 100""",
        expected=rows(("sb", "cb", "cib", "ab", "mbb", "n"), (None, 0, 0, None, None, 1)),
        note="B matched no row: count and count_if give 0 (Trino's count_if over no input is 0), "
        "the others NULL.",
    ),
    Case(
        name="agg_max_min_n_and_max_by_n",
        data={"id": [1, 2, 3, 4, 5], "v": [3, None, 9, 3, 1], "s": ["a", "b", "c", "d", "e"]},
        query="""ORDER BY id
                 MEASURES max(v, 2) AS mx2, min(v, 3) AS mn3, max_by(s, v, 2) AS mb2,
                          min_by(s, v, 2) AS nb2, max(B.v, 2) AS nob
                 PATTERN (A+ B?)
                 DEFINE A AS true, B AS false""",
        expected=rows(("mx2", "mn3", "mb2", "nb2", "nob"), ([9, 3], [1, 3, 3], ["c", "a"], ["e", "a"], None)),
        note="Trino: max(x, n) is the n largest values, largest first; max_by(x, y, n) the x of the "
        "n largest y. NULL keys are skipped; equal keys keep row order (a before d); NULL over no rows.",
    ),
    Case(
        name="agg_match_number_inside_aggregates_and_navigation",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 1, 5]},
        query="""ORDER BY id
                 MEASURES sum(MATCH_NUMBER()) AS s, array_agg(MATCH_NUMBER() * 10 + id) AS a,
                          PREV(v + MATCH_NUMBER()) AS p
                 PATTERN (A B)
                 DEFINE B AS sum(MATCH_NUMBER()) < 5 AND PREV(v * MATCH_NUMBER()) < 5""",
        expected=rows(("s", "a", "p"), (2, [11, 12], 2), (4, [24, 25], 3)),
        note="Trino: MATCH_NUMBER() may stand in aggregate and navigation arguments; it is the number "
        "of the match (in DEFINE, of the match being tried). Match 1 = rows 1-2 (sum 1+1; PREV(v*1) = 1). "
        "From row 3 the tried number is 2: B = row 4 has sum 2+2 = 4 but PREV(v*2) = 6, no match; from "
        "row 4, B = row 5 has PREV(v*2) = 2. Measures of match 2: sum 2+2, [2*10+4, 2*10+5], PREV(v+2) "
        "at row 5 = 1+2.",
    ),
]
