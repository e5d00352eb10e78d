"""PERMUTE.

Trino: PERMUTE(A, B, C) is the alternation of all permutations of its items, preferred in the
lexicographic order of the positions in the list: A B C, A C B, B A C, B C A, C A B, C B A.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


LABELS = "MEASURES array_agg(CLASSIFIER()) AS labels"

CASES: list[Case] = [
    Case(
        name="perm_all_true_prefers_listed_order",
        data={"id": [1, 2, 3]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B, C))
                  DEFINE A AS true""",
        expected=rows(("labels",), (["A", "B", "C"],)),
    ),
    Case(
        name="perm_list_order_not_alphabetical",
        data={"id": [1, 2, 3]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(C, A, B))
                  DEFINE A AS true, B AS true, C AS true""",
        expected=rows(("labels",), (["C", "A", "B"],)),
        note="Preference follows the positions in the PERMUTE list, not the names.",
    ),
    Case(
        name="perm_each_of_six_orders",
        data={
            "p": [f"p{i}" for i in range(1, 7) for _ in range(3)],
            "id": list(range(1, 19)),
            "v": [1, 2, 3, 1, 3, 2, 2, 1, 3, 2, 3, 1, 3, 1, 2, 3, 2, 1],
        },
        query=f"""PARTITION BY p ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B, C))
                  DEFINE A AS v = 1, B AS v = 2, C AS v = 3""",
        expected=rows(
            ("p", "labels"),
            ("p1", ["A", "B", "C"]),
            ("p2", ["A", "C", "B"]),
            ("p3", ["B", "A", "C"]),
            ("p4", ["B", "C", "A"]),
            ("p5", ["C", "A", "B"]),
            ("p6", ["C", "B", "A"]),
        ),
    ),
    Case(
        name="perm_only_late_order_fits",
        data={"id": [1, 2, 3], "v": [1, 5, 7]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B, C))
                  DEFINE A AS v > 0, B AS v > 0, C AS v = 1""",
        expected=rows(("labels",), (["C", "A", "B"],)),
        note="C only accepts row 1, so the orders starting with A or B fail; C A B is tried before C B A.",
    ),
    Case(
        name="perm_acb_before_bac",
        data={"id": [1, 2, 3], "v": [2, 1, 2]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B, C))
                  DEFINE A AS v IN (1, 2), B AS v = 2, C AS v IN (1, 2, 3)""",
        expected=rows(("labels",), (["A", "C", "B"],)),
        note="A B C fails (B at row 2). A C B and B A C both fit; A C B comes first.",
    ),
    Case(
        name="perm_bac_before_bca",
        data={"id": [1, 2, 3], "v": [2, 1, 1]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B, C))
                  DEFINE A AS v = 1, B AS v = 2, C AS v IN (1, 3)""",
        expected=rows(("labels",), (["B", "A", "C"],)),
        note="Orders starting with A fail at row 1; B A C and B C A both fit; B A C comes first.",
    ),
    Case(
        name="perm_two_items_repeated_matches",
        data={"id": [1, 2, 3, 4]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B))
                  DEFINE A AS true, B AS true""",
        expected=rows(("labels",), (["A", "B"],), (["A", "B"],)),
    ),
    Case(
        name="perm_quantified_item",
        data={
            "p": ["q1", "q1", "q1", "q2", "q2", "q2"],
            "id": [1, 2, 3, 4, 5, 6],
            "v": [1, 2, 9, 9, 1, 2],
        },
        query=f"""PARTITION BY p ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A+, B))
                  DEFINE A AS v < 5, B AS v >= 5""",
        expected=rows(("p", "labels"), ("q1", ["A", "A", "B"]), ("q2", ["B", "A", "A"])),
    ),
    Case(
        name="perm_optional_item",
        data={"p": ["r1", "r1", "r2", "r2", "r3"], "id": [1, 2, 3, 4, 5], "v": [1, 2, 2, 1, 1]},
        query=f"""PARTITION BY p ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B?))
                  DEFINE A AS v = 1, B AS v = 2""",
        expected=rows(("p", "labels"), ("r1", ["A", "B"]), ("r2", ["B", "A"]), ("r3", ["A"])),
        note="r2: A B? fails at row 3, B? A takes B = row 3, A = row 4. r3: A B? with B? empty.",
    ),
    Case(
        name="perm_consecutive_matches",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 2, 1]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B))
                  DEFINE A AS v = 1, B AS v = 2""",
        expected=rows(("labels",), (["A", "B"],), (["B", "A"],)),
    ),
    Case(
        name="perm_inside_sequence",
        data={"id": [1, 2, 3, 4], "v": [0, 2, 1, 9]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (X PERMUTE(A, B) Y)
                  DEFINE X AS v = 0, A AS v = 1, B AS v = 2, Y AS v = 9""",
        expected=rows(("labels",), (["X", "B", "A", "Y"],)),
    ),
    Case(
        name="perm_all_rows",
        data={"id": [1, 2, 3], "v": [3, 1, 2]},
        query="""ORDER BY id
                 MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (PERMUTE(A, B, C))
                 DEFINE A AS v = 1, B AS v = 2, C AS v = 3""",
        expected=[
            {"id": 1, "v": 3, "c": "C", "m": 1},
            {"id": 2, "v": 1, "c": "A", "m": 1},
            {"id": 3, "v": 2, "c": "B", "m": 1},
        ],
    ),
    Case(
        name="perm_condition_reads_other_item",
        data={"p": ["x", "x", "y", "y"], "id": [1, 2, 3, 4], "v": [5, 3, 3, 5]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES FIRST(v) AS f, LAST(v) AS l, array_agg(CLASSIFIER()) AS labels
                 PATTERN (PERMUTE(A, B))
                 DEFINE B AS v > A.v""",
        expected=rows(("p", "f", "l", "labels"), ("y", 3, 5, ["A", "B"])),
        note="In B A order, B is tested before any A row exists (A.v NULL), so it fails. "
        "Partition x: A B fails (3 > 5 is false); no match.",
    ),
    Case(
        name="perm_with_subset",
        data={"id": [1, 2, 3], "v": [2, 1, 9]},
        query="""ORDER BY id
                 MEASURES LAST(CLASSIFIER(U)) AS lu, FIRST(CLASSIFIER(U)) AS fu
                 PATTERN (PERMUTE(A, B) C)
                 SUBSET U = (A, B)
                 DEFINE A AS v = 1, B AS v = 2, C AS v = 9""",
        expected=rows(("lu", "fu"), ("A", "B")),
    ),
    Case(
        name="perm_repeated",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 2, 1]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A, B)+)
                  DEFINE A AS v = 1, B AS v = 2""",
        expected=rows(("labels",), (["A", "B", "B", "A"],)),
    ),
    Case(
        name="perm_single_item",
        data={"id": [1, 2], "v": [1, 2]},
        query="""ORDER BY id
                 MEASURES A.id AS i
                 PATTERN (PERMUTE(A))
                 DEFINE A AS v > 1""",
        expected=rows(("i",), (2,)),
    ),
    Case(
        name="perm_skip_to_next_row",
        data={"id": [1, 2, 3], "v": [1, 2, 1]},
        query=f"""ORDER BY id {LABELS}, FIRST(id) AS s
                  AFTER MATCH SKIP TO NEXT ROW
                  PATTERN (PERMUTE(A, B))
                  DEFINE A AS v = 1, B AS v = 2""",
        expected=rows(("labels", "s"), (["A", "B"], 1), (["B", "A"], 2)),
    ),
    Case(
        name="perm_greedy_star_item",
        data={"id": [1, 2, 3]},
        query=f"""ORDER BY id {LABELS}
                  PATTERN (PERMUTE(A*, B))
                  DEFINE A AS true, B AS true""",
        expected=rows(("labels",), (["A", "A", "B"],)),
        note="A* B is preferred; greedy A* gives back the last row to B.",
    ),
]
