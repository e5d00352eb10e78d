"""CLASSIFIER() and MATCH_NUMBER().

Trino: CLASSIFIER() returns the primary pattern variable of the row (varchar); CLASSIFIER(v)
limits the rows to a variable or subset (the last such row); it may be used inside
navigation and aggregates (array_agg(CLASSIFIER()), LAST(... || CLASSIFIER())). A row
outside the match has no classifier (NULL). MATCH_NUMBER() numbers the matches of a
partition from 1; in DEFINE it is the number the match being attempted would get.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


# A B B C over v = 0, 1, 1, 2
ABBC = {"id": [1, 2, 3, 4], "v": [0, 1, 1, 2]}
ABBC_PATTERN = """PATTERN (A B+ C)
                  SUBSET U = (A, B)
                  DEFINE A AS v = 0, B AS v = 1, C AS v = 2"""

CASES: list[Case] = [
    Case(
        name="cls_all_rows_alternation",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 5, 2, 6, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN ((L | H)+)
                 DEFINE L AS v < 4, H AS v >= 4""",
        expected=[
            {"id": 1, "v": 1, "c": "L", "m": 1},
            {"id": 2, "v": 5, "c": "H", "m": 1},
            {"id": 3, "v": 2, "c": "L", "m": 1},
            {"id": 4, "v": 6, "c": "H", "m": 1},
            {"id": 5, "v": 3, "c": "L", "m": 1},
        ],
    ),
    Case(
        name="cls_one_row_last_label",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 5, 2, 6, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m, array_agg(CLASSIFIER()) AS labels
                 PATTERN ((L | H)+)
                 DEFINE L AS v < 4, H AS v >= 4""",
        expected=rows(("c", "m", "labels"), ("L", 1, ["L", "H", "L", "H", "L"])),
        note="ONE ROW PER MATCH evaluates at the last row: its label is L.",
    ),
    Case(
        name="cls_lower_case_names_upper_cased",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (a b)
                 DEFINE b AS v > PREV(v)""",
        expected=[
            {"id": 1, "v": 1, "c": "A", "m": 1},
            {"id": 2, "v": 2, "c": "B", "m": 1},
            {"id": 3, "v": 3, "c": "A", "m": 2},
            {"id": 4, "v": 4, "c": "B", "m": 2},
        ],
        note="Unquoted identifiers are case-insensitive and reported in upper case.",
    ),
    Case(
        name="cls_of_variable_and_subset",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 9, 5]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER(U) AS cu, CLASSIFIER(A) AS ca, CLASSIFIER(B) AS cb,
                          CLASSIFIER() AS c
                 PATTERN ((A | B)+ C)
                 SUBSET U = (A, B)
                 DEFINE A AS v = 1, B AS v = 2, C AS v > 5""",
        expected=rows(("cu", "ca", "cb", "c"), ("B", "A", "B", "C")),
        note="Match A B C (rows 1-3). CLASSIFIER(U) is the label of the last row in U (row 2).",
    ),
    Case(
        name="cls_of_absent_variable_is_null",
        data={"id": [1], "v": [5]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER(A) AS ca, CLASSIFIER() AS c
                 PATTERN (A? B)
                 DEFINE A AS v < 0""",
        expected=rows(("ca", "c"), (None, "B")),
    ),
    Case(
        name="cls_prev_classifier_all_rows",
        data={"id": [1, 2, 3, 4, 5, 6]},
        query="""ORDER BY id
                 MEASURES PREV(CLASSIFIER()) AS pc, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (A B C)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "pc": None, "m": 1},
            {"id": 2, "pc": "A", "m": 1},
            {"id": 3, "pc": "B", "m": 1},
            {"id": 4, "pc": None, "m": 2},
            {"id": 5, "pc": "A", "m": 2},
            {"id": 6, "pc": "B", "m": 2},
        ],
        note="Row 4's previous row (id 3) belongs to the earlier match, not to this one: no "
        "classifier (NULL).",
    ),
    Case(
        name="cls_prev_next_classifier_one_row",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES PREV(CLASSIFIER()) AS pc, PREV(CLASSIFIER(), 2) AS pc2,
                          PREV(CLASSIFIER(), 3) AS pc3, NEXT(CLASSIFIER()) AS nc
                 PATTERN (A B C)
                 DEFINE A AS true""",
        expected=rows(("pc", "pc2", "pc3", "nc"), ("B", "A", None, None)),
        note="Evaluated at the last row (C). Row 4 exists but is outside the match: NEXT gives NULL; "
        "3 rows back is outside the partition.",
    ),
    Case(
        name="cls_next_classifier_running_all_rows",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, NEXT(CLASSIFIER()) AS nc
                 ALL ROWS PER MATCH
                 PATTERN (A B C)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "c": "A", "nc": "B"},
            {"id": 2, "c": "B", "nc": "C"},
            {"id": 3, "c": "C", "nc": None},
        ],
        note="As Trino computes measures (MeasureComputation): a measure sees every label of the match, "
        "in RUNNING and FINAL semantics alike, so NEXT(CLASSIFIER()) is the next row's label inside "
        "the match and NULL past its end. (In DEFINE the rows after the current one have no label yet.)",
    ),
    Case(
        name="cls_first_last_classifier_offsets",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES FIRST(CLASSIFIER()) AS fc, LAST(CLASSIFIER(U)) AS lu, LAST(CLASSIFIER(), 1) AS l1, "
        "FIRST(CLASSIFIER(), 3) AS f3, LAST(CLASSIFIER(U), 2) AS lu2, FIRST(CLASSIFIER(U), 3) AS fu3 "
        + ABBC_PATTERN,
        expected=rows(("fc", "lu", "l1", "f3", "lu2", "fu3"), ("A", "B", "B", "C", "A", None)),
        note="Labels A B B C; U rows are 1 (A), 2 (B), 3 (B).",
    ),
    Case(
        name="cls_running_final_last_all_rows",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES CLASSIFIER() AS c, RUNNING LAST(CLASSIFIER()) AS rl, "
        "FINAL LAST(CLASSIFIER()) AS fl, FINAL LAST(CLASSIFIER(U)) AS flu "
        "ALL ROWS PER MATCH " + ABBC_PATTERN,
        expected=[
            {"id": 1, "v": 0, "c": "A", "rl": "A", "fl": "C", "flu": "B"},
            {"id": 2, "v": 1, "c": "B", "rl": "B", "fl": "C", "flu": "B"},
            {"id": 3, "v": 1, "c": "B", "rl": "B", "fl": "C", "flu": "B"},
            {"id": 4, "v": 2, "c": "C", "rl": "C", "fl": "C", "flu": "B"},
        ],
    ),
    Case(
        name="cls_array_agg_running_final",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES array_agg(CLASSIFIER()) AS r, FINAL array_agg(CLASSIFIER()) AS f "
        "ALL ROWS PER MATCH " + ABBC_PATTERN,
        expected=[
            {"id": 1, "v": 0, "r": ["A"], "f": ["A", "B", "B", "C"]},
            {"id": 2, "v": 1, "r": ["A", "B"], "f": ["A", "B", "B", "C"]},
            {"id": 3, "v": 1, "r": ["A", "B", "B"], "f": ["A", "B", "B", "C"]},
            {"id": 4, "v": 2, "r": ["A", "B", "B", "C"], "f": ["A", "B", "B", "C"]},
        ],
    ),
    Case(
        name="cls_min_max_count_if",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES max(CLASSIFIER()) AS mx, min(CLASSIFIER()) AS mn, "
        "count_if(CLASSIFIER() = 'B') AS nb " + ABBC_PATTERN,
        expected=rows(("mx", "mn", "nb"), ("C", "A", 2)),
    ),
    Case(
        name="cls_concat_in_array_agg",
        data={"id": [1, 2, 3, 4], "v": [0, 1, 1, 2], "s": ["p", "q", "r", "s"]},
        query="ORDER BY id MEASURES array_agg(s || CLASSIFIER()) AS tagged " + ABBC_PATTERN,
        expected=rows(("tagged",), (["pA", "qB", "rB", "sC"],)),
    ),
    Case(
        name="cls_in_navigation_expression",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES LAST('v_' || CLASSIFIER()) AS lc, FIRST(lower(CLASSIFIER())) AS fl, "
        "LAST(CLASSIFIER() = 'B', 1) AS was_b " + ABBC_PATTERN,
        expected=rows(("lc", "fl", "was_b"), ("v_C", "a", True)),
        note="Navigation of an expression over CLASSIFIER(), as in Trino's LAST('...' || CLASSIFIER()).",
    ),
    Case(
        name="cls_prev_classifier_in_define",
        data={"id": [1, 2, 3, 4, 5], "v": [0, 5, 5, 0, 5]},
        query="""ORDER BY id
                 MEASURES array_agg(CLASSIFIER()) AS labels
                 PATTERN (A (B | C)+)
                 DEFINE A AS v = 0, B AS PREV(CLASSIFIER()) = 'A', C AS true""",
        expected=rows(("labels",), (["A", "B", "C", "C", "C"],)),
        note="Row 2: the previous row is labelled A, so B. Rows 3-5: previous label is B or C, "
        "B fails and C takes the row.",
    ),
    Case(
        name="cls_classifier_in_define_is_candidate",
        data={"id": [1, 2], "v": [1, 2]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 PATTERN (B | A)
                 DEFINE B AS CLASSIFIER() = 'A', A AS CLASSIFIER() = 'A'""",
        expected=rows(("c", "m"), ("A", 1), ("A", 2)),
        note="In a variable's condition CLASSIFIER() is that variable: B's condition is 'B' = 'A'.",
    ),
    Case(
        name="cls_prev_classifier_in_define_outside_match",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c
                 PATTERN (S | T)
                 DEFINE S AS PREV(CLASSIFIER()) IS NULL, T AS true""",
        expected=rows(("c",), ("S",), ("S",), ("S",)),
        note="Each match is one row; the previous row belongs to an earlier match, not the current "
        "one, so PREV(CLASSIFIER()) is NULL and S is chosen every time.",
    ),
    Case(
        name="cls_max_by_min_by_classifier",
        data={"id": [1, 2, 3], "v": [3, 9, 1]},
        query="""ORDER BY id
                 MEASURES max_by(CLASSIFIER(), v) AS top, min_by(CLASSIFIER(), v) AS low
                 PATTERN (A B C)
                 DEFINE A AS true""",
        expected=rows(("top", "low"), ("B", "C")),
    ),
    Case(
        name="cls_subset_running_all_rows",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER(U) AS cu
                 ALL ROWS PER MATCH
                 PATTERN (A B C)
                 SUBSET U = (A, C)
                 DEFINE A AS true""",
        expected=[{"id": 1, "cu": "A"}, {"id": 2, "cu": "A"}, {"id": 3, "cu": "C"}],
        note="At row 2 the last U row so far is row 1 (A).",
    ),
    Case(
        name="mn_partitions_restart",
        data={"p": ["a", "b", "a", "b", "b"], "id": [1, 2, 3, 4, 5]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, A.id AS i
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(
            ("p", "m", "i"), ("a", 1, 1), ("a", 2, 3), ("b", 1, 2), ("b", 2, 4), ("b", 3, 5)
        ),
    ),
    Case(
        name="mn_in_define_limits_matches",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES A.id AS i, MATCH_NUMBER() AS m
                 PATTERN (A)
                 DEFINE A AS MATCH_NUMBER() <= 2""",
        expected=rows(("i", "m"), (1, 1), (2, 2)),
        note="From row 3 on the attempted match would be number 3, so A fails.",
    ),
    Case(
        name="mn_in_define_alternation",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 PATTERN (A | B)
                 DEFINE A AS MATCH_NUMBER() % 2 = 1""",
        expected=rows(("c", "m"), ("A", 1), ("B", 2), ("A", 3), ("B", 4)),
    ),
    Case(
        name="mn_in_define_first_match_only",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 5, 1]},
        query="""ORDER BY id
                 MEASURES array_agg(CLASSIFIER()) AS labels, MATCH_NUMBER() AS m
                 PATTERN (A+ | B)
                 DEFINE A AS MATCH_NUMBER() = 1 AND v < 3, B AS true""",
        expected=rows(("labels", "m"), (["A", "A"], 1), (["B"], 2), (["B"], 3)),
        note="Match 1: A+ takes rows 1-2 (row 3 has v 5). Later matches may not use A.",
    ),
    Case(
        name="cls_prev_classifier_of_a_variable_in_define",
        data={"id": [1, 2, 3, 4, 5, 6]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A B* C D)
                 SUBSET U = (A, C)
                 DEFINE B AS id <= 3, C AS PREV(CLASSIFIER(A)) IS NULL AND PREV(CLASSIFIER(U)) = 'B',
                        D AS PREV(CLASSIFIER(U)) = 'B' AND NEXT(CLASSIFIER(C)) = 'D'""",
        expected=[{"id": 1, "c": "A"}, {"id": 2, "c": "B"}, {"id": 3, "c": "B"}, {"id": 4, "c": "C"},
                  {"id": 5, "c": "D"}],
        note="Trino: in DEFINE, PREV/NEXT of CLASSIFIER(v) is the label of the row next to v's last row "
        "in the match so far (NULL outside it). At row 4 as C: A's row is 1, the row before it is outside "
        "the match (NULL); U's last row is the current row 4, the row before it is a B. At row 5 as D: U's "
        "last row is 4 (C), the row before it is a B, and the row after C's row is the current row, D.",
    ),
]
