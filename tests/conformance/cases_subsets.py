"""SUBSET (union variables) in MEASURES, DEFINE and AFTER MATCH SKIP.

Trino: U.x refers to the rows labelled with any variable of U; LAST(U.x) is the last such
row; aggregates over U use those rows; CLASSIFIER(U) gives the primary variable of the last U
row; SKIP TO FIRST/LAST U works even when some of U's variables are absent.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


CASES: list[Case] = [
    Case(
        name="sub_basic_last_first_count",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES LAST(U.v) AS lu, FIRST(U.v) AS fu, count(U.*) AS cu, sum(U.v) AS su,
                          U.v AS uv
                 PATTERN (A B C)
                 SUBSET U = (A, B)
                 DEFINE A AS true""",
        expected=rows(("lu", "fu", "cu", "su", "uv"), (2, 1, 2, 3, 2)),
    ),
    Case(
        name="sub_trino_v_shape",
        data={"id": [1, 2, 3, 4, 5, 6, 7], "v": [100, 90, 80, 85, 95, 110, 105]},
        query="""ORDER BY id
                 MEASURES A.v AS starting_price, LAST(B.v) AS bottom_price, LAST(U.v) AS top_price
                 ONE ROW PER MATCH
                 AFTER MATCH SKIP PAST LAST ROW
                 PATTERN (A B+ C+ D+)
                 SUBSET U = (C, D)
                 DEFINE B AS v < PREV(v),
                        C AS v > PREV(v) AND v <= A.v,
                        D AS v > PREV(v)""",
        expected=rows(("starting_price", "bottom_price", "top_price"), (100, 80, 110)),
        note="Trino's documentation example. B = 90, 80; C = 85, 95 (110 > A's 100 ends C); "
        "D = 110 (105 is not a rise). Row 7 cannot start a match.",
    ),
    Case(
        name="sub_classifier_running_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 1, 9]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER(U) AS cu, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN ((A | B)+ C)
                 SUBSET U = (A, B)
                 DEFINE A AS v = 1, B AS v = 2, C AS v = 9""",
        expected=[
            {"id": 1, "v": 1, "cu": "A", "c": "A"},
            {"id": 2, "v": 2, "cu": "B", "c": "B"},
            {"id": 3, "v": 1, "cu": "A", "c": "A"},
            {"id": 4, "v": 9, "cu": "A", "c": "C"},
        ],
    ),
    Case(
        name="sub_aggregate_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 4, 1, 2, 2]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s
                 PATTERN (A B C)
                 SUBSET U = (A, B)
                 DEFINE C AS v > sum(U.v)""",
        expected=rows(("s",), (1,)),
        note="4 > 1 + 2. From row 4: 2 > 1 + 2 fails; from row 5 there are only two rows.",
    ),
    Case(
        name="sub_skip_to_last_subset",
        data={"id": [1, 2, 3, 4, 5, 6, 7, 8]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s
                 AFTER MATCH SKIP TO LAST U
                 PATTERN (A B C D)
                 SUBSET U = (B, C)
                 DEFINE A AS true""",
        expected=rows(("s",), (1,), (3,), (5,)),
    ),
    Case(
        name="sub_skip_to_subset_default_last",
        data={"id": [1, 2, 3, 4, 5, 6]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s
                 AFTER MATCH SKIP TO U
                 PATTERN (A B C)
                 SUBSET U = (A, B)
                 DEFINE A AS true""",
        expected=rows(("s",), (1,), (2,), (3,), (4,)),
        note="Each match resumes at its B row (the last row of U).",
    ),
    Case(
        name="sub_without_rows",
        data={"id": [1], "v": [5]},
        query="""ORDER BY id
                 MEASURES count(U.*) AS cu, LAST(U.v) AS lu, CLASSIFIER(U) AS clu, sum(U.v) AS su
                 PATTERN (A? B? C)
                 SUBSET U = (A, B)
                 DEFINE A AS v < 0, B AS v < 0""",
        expected=rows(("cu", "lu", "clu", "su"), (0, None, None, None)),
    ),
    Case(
        name="sub_two_overlapping_subsets",
        data={"id": [1, 2, 3], "v": [1, 10, 100]},
        query="""ORDER BY id
                 MEASURES sum(U.v) AS su, sum(W.v) AS sw, FIRST(W.v) AS fw, LAST(U.v) AS lu,
                          CLASSIFIER(W) AS cw, CLASSIFIER(U) AS cu,
                          array_agg(W.v) AS aw, array_agg(U.v) AS au
                 PATTERN (A B C)
                 SUBSET U = (A, B), W = (B, C)
                 DEFINE A AS true""",
        expected=rows(
            ("su", "sw", "fw", "lu", "cw", "cu", "aw", "au"),
            (11, 110, 10, 10, "C", "B", [10, 100], [1, 10]),
        ),
    ),
    Case(
        name="sub_running_final_all_rows",
        data={"id": [1, 2, 3], "v": [1, 10, 100]},
        query="""ORDER BY id
                 MEASURES count(U.*) AS cu, FINAL sum(U.v) AS fsu, LAST(U.v) AS lu,
                          FINAL LAST(U.v) AS flu
                 ALL ROWS PER MATCH
                 PATTERN (A B C)
                 SUBSET U = (A, C)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "v": 1, "cu": 1, "fsu": 101, "lu": 1, "flu": 100},
            {"id": 2, "v": 10, "cu": 1, "fsu": 101, "lu": 1, "flu": 100},
            {"id": 3, "v": 100, "cu": 2, "fsu": 101, "lu": 100, "flu": 100},
        ],
    ),
    Case(
        name="sub_logical_offsets",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(U.v, 1) AS f1, LAST(U.v, 1) AS l1, LAST(U.v, 2) AS l2,
                          FIRST(U.v, 3) AS f3
                 PATTERN (A B C D)
                 SUBSET U = (A, C, D)
                 DEFINE A AS true""",
        expected=rows(("f1", "l1", "l2", "f3"), (3, 3, 1, None)),
        note="U rows are 1, 3, 4.",
    ),
    Case(
        name="sub_physical_after_logical",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES PREV(LAST(U.v), 1) AS pl, NEXT(FIRST(U.v), 1) AS nf, PREV(LAST(U.v, 1), 1) AS pl1
                 PATTERN (A B C D)
                 SUBSET U = (A, C, D)
                 DEFINE A AS true""",
        expected=rows(("pl", "nf", "pl1"), (3, 2, 2)),
        note="PREV/NEXT are physical: the row before U's last row (4) is row 3, the row after U's "
        "first (1) is row 2 (a B row); LAST(U.v, 1) is row 3, one back is row 2.",
    ),
    Case(
        name="sub_of_all_variables",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES count(ALLV.*) AS ca, count(*) AS c
                 PATTERN (A B+)
                 SUBSET ALLV = (A, B)
                 DEFINE A AS true""",
        expected=rows(("ca", "c"), (3, 3)),
    ),
    Case(
        name="sub_classifier_in_define",
        data={
            "p": ["p1", "p1", "p1", "p2", "p2", "p2"],
            "id": [1, 2, 3, 4, 5, 6],
            "v": [1, 7, 20, 7, 1, 20],
        },
        query="""PARTITION BY p ORDER BY id
                 MEASURES FIRST(id) AS s, array_agg(CLASSIFIER()) AS labels
                 PATTERN ((A | B)+ C)
                 SUBSET U = (A, B)
                 DEFINE A AS v < 5, B AS v BETWEEN 5 AND 9, C AS CLASSIFIER(U) = 'B' AND v >= 10""",
        expected=rows(("p", "s", "labels"), ("p1", 1, ["A", "B", "C"])),
        note="p1: A B, then C sees the last U row labelled B. p2: B A, C sees A and fails; "
        "with only B before row 5, row 5 (v 1) is no C; from row 5, A then C sees A. No match.",
    ),
    Case(
        name="sub_max_by_min_by",
        data={"id": [1, 2, 3, 4], "v": [5, 1, 9, 3]},
        query="""ORDER BY id
                 MEASURES max_by(U.id, U.v) AS mx, min_by(U.id, U.v) AS mn
                 PATTERN (A B C D)
                 SUBSET U = (B, D)
                 DEFINE A AS true""",
        expected=rows(("mx", "mn"), (4, 2)),
        note="U rows: id 2 (v 1) and id 4 (v 3).",
    ),
    Case(
        name="sub_single_variable",
        data={"id": [1, 2], "v": [3, 4]},
        query="""ORDER BY id
                 MEASURES LAST(U.v) AS lu, count(U.*) AS cu
                 PATTERN (A B)
                 SUBSET U = (A)
                 DEFINE A AS true""",
        expected=rows(("lu", "cu"), (3, 1)),
    ),
    Case(
        name="sub_lower_case_names",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER(u) AS cu, LAST(u.v) AS lu, count(U.*) AS n
                 PATTERN (a b c)
                 SUBSET u = (a, b)
                 DEFINE a AS true""",
        expected=rows(("cu", "lu", "n"), ("B", 2, 2)),
        note="Unquoted names are case-insensitive: u and U are the same subset.",
    ),
    Case(
        name="sub_fixed_repetition",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 2, 1, 9, 9]},
        query="""ORDER BY id
                 MEASURES LAST(U.v) AS lu, CLASSIFIER(U) AS cu, count(C.*) AS nc,
                          array_agg(CLASSIFIER()) AS labels
                 PATTERN ((A | B){3} C+)
                 SUBSET U = (A, B)
                 DEFINE A AS v = 1, B AS v = 2, C AS v = 9""",
        expected=rows(("lu", "cu", "nc", "labels"), (1, "A", 2, ["A", "B", "A", "C", "C"])),
    ),
    Case(
        name="sub_count_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 7, 8, 9, 10]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+ B+)
                 SUBSET U = (A, B)
                 DEFINE A AS v < 5, B AS count(U.*) <= 4""",
        expected=rows(("s", "e"), (1, 4)),
        note="count(U.*) includes the current row: 3 at row 3, 4 at row 4, 5 at row 5 (fails). "
        "Rows 5 and 6 cannot be A.",
    ),
    Case(
        name="sub_skip_to_first_subset_variable_absent",
        data={"id": [1, 2, 3, 4], "v": [0, 2, 0, 2]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO FIRST U
                 PATTERN (A B? C)
                 SUBSET U = (B, C)
                 DEFINE A AS v = 0, B AS v = 1, C AS v = 2""",
        expected=rows(("s", "e"), (1, 2), (3, 4)),
        note="B never matches, but U still has the C row to skip to (row 2, then row 4).",
    ),
]
