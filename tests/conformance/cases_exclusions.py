"""Pattern exclusions {- ... -}.

Trino: excluded rows are part of the match (matching, DEFINE, MEASURES, navigation and
aggregates all see them, exactly as with plain parentheses) but ALL ROWS PER MATCH does not
output them. ONE ROW PER MATCH is unaffected. (Exclusions with WITH UNMATCHED ROWS are an
error: see cases_errors.)
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


ABBC = {"id": [1, 2, 3, 4], "v": [0, 1, 1, 2]}
ABBC_DEF = "DEFINE A AS v = 0, B AS v = 1, C AS v = 2"

CASES: list[Case] = [
    Case(
        name="excl_middle_all_rows",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES CLASSIFIER() AS c, count(*) AS n, FINAL count(*) AS fn "
        "ALL ROWS PER MATCH PATTERN (A {- B+ -} C) " + ABBC_DEF,
        expected=[
            {"id": 1, "v": 0, "c": "A", "n": 1, "fn": 4},
            {"id": 4, "v": 2, "c": "C", "n": 4, "fn": 4},
        ],
        note="The B rows are not output but are counted: the running count at row 4 is 4.",
    ),
    Case(
        name="excl_one_row_unaffected",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES count(*) AS n, array_agg(CLASSIFIER()) AS labels, sum(B.v) AS sb "
        "PATTERN (A {- B+ -} C) " + ABBC_DEF,
        expected=rows(("n", "labels", "sb"), (4, ["A", "B", "B", "C"], 2)),
    ),
    Case(
        name="excl_navigation_into_excluded_rows",
        data=ABBC,
        query="ORDER BY id "
        "MEASURES PREV(v) AS pv, LAST(B.v) AS lb, PREV(CLASSIFIER()) AS pc, array_agg(v) AS arr "
        "ALL ROWS PER MATCH PATTERN (A {- B+ -} C) " + ABBC_DEF,
        expected=[
            {"id": 1, "v": 0, "pv": None, "lb": None, "pc": None, "arr": [0]},
            {"id": 4, "v": 2, "pv": 1, "lb": 1, "pc": "B", "arr": [0, 1, 1, 2]},
        ],
    ),
    Case(
        name="excl_first_element",
        data={"id": [1, 2, 3], "v": [0, 1, 1]},
        query="""ORDER BY id
                 MEASURES FIRST(v) AS f, CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN ({- A -} B+)
                 DEFINE A AS v = 0, B AS v = 1""",
        expected=[
            {"id": 2, "v": 1, "f": 0, "c": "B", "m": 1},
            {"id": 3, "v": 1, "f": 0, "c": "B", "m": 1},
        ],
        note="FIRST(v) is the excluded row 1.",
    ),
    Case(
        name="excl_everything_all_rows",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES count(*) AS n
                 ALL ROWS PER MATCH
                 PATTERN ({- A+ -})
                 DEFINE A AS true""",
        expected=[],
        note="One non-empty match, every row excluded: nothing is output.",
    ),
    Case(
        name="excl_everything_one_row",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES count(*) AS n
                 PATTERN ({- A+ -})
                 DEFINE A AS true""",
        expected=rows(("n",), (3,)),
    ),
    Case(
        name="excl_in_left_alternative",
        data={"id": [1, 2, 3], "v": [0, 1, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A ({- B -} | C) D)
                 DEFINE A AS v = 0, B AS v = 1, C AS v = 1, D AS v = 3""",
        expected=[{"id": 1, "v": 0, "c": "A"}, {"id": 3, "v": 3, "c": "D"}],
        note="Both B and C accept row 2; the left alternative (excluded B) is preferred.",
    ),
    Case(
        name="excl_right_alternative_not_excluded",
        data={"id": [1, 2, 3], "v": [0, 2, 3]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A ({- B -} | C) D)
                 DEFINE A AS v = 0, B AS v = 1, C AS v = 2, D AS v = 3""",
        expected=[
            {"id": 1, "v": 0, "c": "A"},
            {"id": 2, "v": 2, "c": "C"},
            {"id": 3, "v": 3, "c": "D"},
        ],
    ),
    Case(
        name="excl_with_skip_to_next_row",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A {- B -})
                 DEFINE A AS true""",
        expected=[{"id": 1, "m": 1, "c": "A"}, {"id": 2, "m": 2, "c": "A"}],
        note="Row 2 is excluded in match 1 but output as match 2's A.",
    ),
    Case(
        name="excl_inside_repeated_group",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, count(*) AS n
                 ALL ROWS PER MATCH
                 PATTERN ((A {- B -})+)
                 DEFINE A AS true""",
        expected=[{"id": 1, "c": "A", "n": 1}, {"id": 3, "c": "A", "n": 3}],
    ),
    Case(
        name="excl_all_rows_then_empty_match",
        data={"id": [1, 2], "v": [1, 0]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN ({- A* -})
                 DEFINE A AS v > 0""",
        expected=[{"id": 2, "v": 0, "m": 2}],
        note="Match 1 is row 1, excluded. Row 2 starts an empty match (number 2), shown as its "
        "starting row.",
    ),
    Case(
        name="excl_all_rows_then_empty_match_omitted",
        data={"id": [1, 2], "v": [1, 0]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH OMIT EMPTY MATCHES
                 PATTERN ({- A* -})
                 DEFINE A AS v > 0""",
        expected=[],
    ),
    Case(
        name="excl_skip_to_excluded_variable",
        data={"id": [1, 2, 3, 4, 5]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 AFTER MATCH SKIP TO B
                 PATTERN (A {- B -} C)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "m": 1, "c": "A"},
            {"id": 3, "m": 1, "c": "C"},
            {"id": 2, "m": 2, "c": "A"},
            {"id": 4, "m": 2, "c": "C"},
            {"id": 3, "m": 3, "c": "A"},
            {"id": 5, "m": 3, "c": "C"},
        ],
        note="Matches 1-3, 2-4, 3-5 (each resumes at its B row); rows come out match by match.",
    ),
    Case(
        name="excl_excluded_rows_visible_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [5, 1, 3, 0, 0, 9]},
        query="""ORDER BY id
                 MEASURES B.v AS bv, FINAL LAST(B.v) AS fbv, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (A {- B -} C)
                 DEFINE C AS v > B.v""",
        expected=[
            {"id": 1, "v": 5, "bv": None, "fbv": 1, "m": 1},
            {"id": 3, "v": 3, "bv": 1, "fbv": 1, "m": 1},
            {"id": 4, "v": 0, "bv": None, "fbv": 0, "m": 2},
            {"id": 6, "v": 9, "bv": 0, "fbv": 0, "m": 2},
        ],
        note="C compares with the excluded B row (3 > 1, 9 > 0).",
    ),
    Case(
        name="excl_possibly_empty_group",
        data={"id": [1, 2], "v": [0, 2]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, count(*) AS n
                 ALL ROWS PER MATCH
                 PATTERN (A {- B* -} C)
                 DEFINE A AS v = 0, B AS v = 1, C AS v = 2""",
        expected=[{"id": 1, "v": 0, "c": "A", "n": 1}, {"id": 2, "v": 2, "c": "C", "n": 2}],
    ),
    Case(
        name="excl_partitions",
        data={"p": ["x", "x", "y", "y"], "id": [1, 2, 3, 4]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (A {- B -})
                 DEFINE A AS true""",
        expected=[{"p": "x", "id": 1, "m": 1}, {"p": "y", "id": 3, "m": 1}],
    ),
    Case(
        name="excl_one_row_several_matches",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, array_agg(id) AS ids
                 PATTERN (A {- B -})
                 DEFINE A AS true""",
        expected=rows(("m", "ids"), (1, [1, 2]), (2, [3, 4])),
    ),
    Case(
        name="excl_final_classifier_of_excluded_row",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES FINAL LAST(CLASSIFIER(), 1) AS before_last, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A {- B -} C)
                 DEFINE A AS true""",
        expected=[{"id": 1, "before_last": "B", "c": "A"}, {"id": 3, "before_last": "B", "c": "C"}],
    ),
]
