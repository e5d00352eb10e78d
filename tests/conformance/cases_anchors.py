"""Anchors: ^ matches only at the start of the partition (before its first row), $ only at its
end (after its last row), per partition and in ORDER BY order. A match that fails an anchor
is no match at all (not an empty match).
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


THREE = {"id": [1, 2, 3]}

CASES: list[Case] = [
    Case(
        name="anchor_start",
        data=THREE,
        query="""ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (^A)
                 DEFINE A AS true""",
        expected=rows(("a",), (1,)),
    ),
    Case(
        name="anchor_end",
        data=THREE,
        query="""ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (A$)
                 DEFINE A AS true""",
        expected=rows(("a",), (3,)),
    ),
    Case(
        name="anchor_whole_partition",
        data={"p": ["x", "x", "y", "y"], "id": [1, 2, 3, 4], "v": [1, 2, 3, -1]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES count(*) AS n
                 PATTERN (^A+$)
                 DEFINE A AS v > 0""",
        expected=rows(("p", "n"), ("x", 2)),
        note="In y the last row fails A, so A+ cannot reach the partition end.",
    ),
    Case(
        name="anchor_start_per_partition",
        data={"p": ["x", "y", "x", "y"], "id": [1, 2, 3, 4]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (^A)
                 DEFINE A AS true""",
        expected=rows(("p", "a"), ("x", 1), ("y", 2)),
    ),
    Case(
        name="anchor_end_per_partition",
        data={"p": ["x", "y", "x", "y"], "id": [1, 2, 3, 4]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (A$)
                 DEFINE A AS true""",
        expected=rows(("p", "a"), ("x", 3), ("y", 4)),
    ),
    Case(
        name="anchor_start_after_row_never",
        data=THREE,
        query="""ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (A ^B)
                 DEFINE A AS true""",
        expected=[],
        note="After a row has been matched the position is never the partition start.",
    ),
    Case(
        name="anchor_end_before_row_never",
        data=THREE,
        query="""ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (A$ B)
                 DEFINE A AS true""",
        expected=[],
    ),
    Case(
        name="anchor_start_star_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 0, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (^A*)
                 DEFINE A AS v > 0""",
        expected=[{"id": 1, "v": 1, "m": 1, "c": "A"}, {"id": 2, "v": 2, "m": 1, "c": "A"}],
        note="Rows 3 and 4 cannot satisfy ^: no match at all there (not empty matches).",
    ),
    Case(
        name="anchor_start_star_unmatched_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 0, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH WITH UNMATCHED ROWS
                 PATTERN (^A*)
                 DEFINE A AS v > 0""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "c": "A"},
            {"id": 2, "v": 2, "m": 1, "c": "A"},
            {"id": 3, "v": 0, "m": None, "c": None},
            {"id": 4, "v": 3, "m": None, "c": None},
        ],
    ),
    Case(
        name="anchor_start_empty_match",
        data={"id": [1, 2], "v": [0, 1]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (^A*)
                 DEFINE A AS v > 0""",
        expected=rows(("m", "n"), (1, 0)),
        note="At row 1, A fails: an empty match (^ holds). Row 2 cannot satisfy ^.",
    ),
    Case(
        name="anchor_end_star",
        data={"id": [1, 2, 3, 4], "v": [1, 0, 1, 1]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A*$)
                 DEFINE A AS v > 0""",
        expected=rows(("m", "s", "e"), (1, 3, 4)),
        note="Rows 1 and 2 cannot reach the end (row 2 fails A). From row 3: rows 3-4, then $.",
    ),
    Case(
        name="anchor_in_alternation",
        data={"id": [1, 2, 3], "v": [1, 2, 9]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, FIRST(id) AS i
                 PATTERN (^A | B)
                 DEFINE A AS true, B AS v > 5""",
        expected=rows(("c", "i"), ("A", 1), ("B", 3)),
    ),
    Case(
        name="anchor_end_reluctant",
        data=THREE,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, count(*) AS n
                 PATTERN (A+? $)
                 DEFINE A AS true""",
        expected=rows(("s", "e", "n"), (1, 3, 3)),
        note="The reluctant A+? still has to reach the partition end.",
    ),
    Case(
        name="anchor_start_skip_to_next_row",
        data=THREE,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (^A B?)
                 DEFINE A AS true, B AS true""",
        expected=rows(("s", "e"), (1, 2)),
    ),
    Case(
        name="anchor_desc_order",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id DESC
                 MEASURES CLASSIFIER() AS c, FIRST(id) AS i
                 PATTERN (^A | B$)
                 DEFINE A AS true, B AS true""",
        expected=rows(("c", "i"), ("A", 3), ("B", 1)),
        note="In DESC order the partition starts at id 3 and ends at id 1; id 2 matches neither.",
    ),
    Case(
        name="anchor_in_repeated_group",
        data=THREE,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN ((^A)+)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 1)),
        note="A second iteration would need ^ after row 1.",
    ),
    Case(
        name="anchor_end_unmatched_rows_partitions",
        data={"p": ["x", "x", "y"], "id": [1, 2, 3]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH WITH UNMATCHED ROWS
                 PATTERN (A $)
                 DEFINE A AS true""",
        expected=[
            {"p": "x", "id": 1, "m": None},
            {"p": "x", "id": 2, "m": 1},
            {"p": "y", "id": 3, "m": 1},
        ],
    ),
    Case(
        name="anchor_start_unsorted_input",
        data={"p": ["y", "x", "y", "x"], "id": [4, 3, 2, 1]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES A.id AS a
                 PATTERN (^A)
                 DEFINE A AS true""",
        expected=rows(("p", "a"), ("x", 1), ("y", 2)),
    ),
    Case(
        name="anchor_both_star",
        data={"p": ["x", "x", "y"], "id": [1, 2, 3], "v": [1, 1, 0]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES count(*) AS n, MATCH_NUMBER() AS m
                 PATTERN (^A*$)
                 DEFINE A AS v > 0""",
        expected=rows(("p", "n", "m"), ("x", 2, 1)),
        note="In y, A* is empty at row 3 but the position is not the partition end.",
    ),
    Case(
        name="anchor_start_end_empty_never_on_rows",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES count(*) AS n
                 PATTERN (^$)""",
        expected=[],
        note="Before the first row the position is the start but not the end of a non-empty partition.",
    ),
]
