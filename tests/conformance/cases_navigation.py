"""Row pattern navigation: PREV / NEXT (physical), FIRST / LAST (logical), their nesting,
RUNNING / FINAL, qualified and universal column references, ordering.

Worked out from Trino's MATCH_RECOGNIZE documentation ("Row pattern recognition expressions"):
PREV/NEXT move n physical rows (default 1) from the row the argument refers to and may leave
the match; beyond the partition the result is NULL. FIRST/LAST find the n-th (default 0) row
of the variable's rows in the match (NULL if there is none). Nesting is only logical inside
physical: PREV(LAST(A.x, 1), 2) does the logical step first, then the physical one.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


CASES: list[Case] = [
    Case(
        name="nav_prev_basic",
        data={"id": [1, 2, 3, 4, 5], "v": [10, 12, 11, 15, 14]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A B+)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e"), (1, 2), (3, 4)),
        note="1: A=1, B=2 (12>10), row 3 11>12 fails. 3: A=3, B=4 (15>11), 14>15 fails. 5: no B.",
    ),
    Case(
        name="nav_prev_offset_two",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [5, 1, 6, 2, 7, 3]},
        query="""ORDER BY id
                 MEASURES A.id AS a, B.v AS bv, PREV(B.v, 2) AS p2
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v, 2)""",
        expected=rows(("a", "bv", "p2"), (2, 6, 5), (4, 7, 6)),
        note="From row 1, B=row 2 compares with row 0 (outside the partition: NULL) and fails. "
        "Row 2: B=row 3, 6 > 5. Row 4: B=row 5, 7 > 6. Row 6 has no B.",
    ),
    Case(
        name="nav_next_lookahead_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 3, 2, 5, 6]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, NEXT(LAST(v)) AS nx
                 PATTERN (A+)
                 DEFINE A AS v < NEXT(v)""",
        expected=rows(("s", "e", "nx"), (1, 2, 3), (4, 5, 6)),
        note="NEXT reads rows not yet matched. Row 3: 3 < 2 fails. Row 6: NEXT is beyond the "
        "partition (NULL) so it fails. NEXT(LAST(v)) is the row after the match.",
    ),
    Case(
        name="nav_first_last_offsets_universal",
        data={"id": [1, 2, 3, 4, 5], "v": [10, 20, 30, 40, 50]},
        query="""ORDER BY id
                 MEASURES FIRST(v) AS f0, FIRST(v, 1) AS f1, FIRST(v, 5) AS f5,
                          LAST(v) AS l0, LAST(v, 1) AS l1, LAST(v, 4) AS l4, LAST(v, 5) AS l5
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("f0", "f1", "f5", "l0", "l1", "l4", "l5"), (10, 20, None, 50, 40, 10, None)),
        note="One match of 5 rows; an offset past the match's rows gives NULL.",
    ),
    Case(
        name="nav_first_last_offsets_variable",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 3, 11, 12, 13]},
        query="""ORDER BY id
                 MEASURES FIRST(A.v) AS fa, LAST(A.v) AS la, FIRST(B.v, 1) AS fb1,
                          LAST(B.v, 2) AS lb2, LAST(A.v, 3) AS la3
                 PATTERN (A+ B+)
                 DEFINE A AS v < 10, B AS v >= 10""",
        expected=rows(("fa", "la", "fb1", "lb2", "la3"), (1, 3, 12, 11, None)),
        note="A = rows 1-3, B = rows 4-6. LAST(A.v, 3) would be a 4th A row: NULL.",
    ),
    Case(
        name="nav_nested_logical_in_physical",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 3, 11, 12, 13]},
        query="""ORDER BY id
                 MEASURES PREV(LAST(A.v), 2) AS p, NEXT(FIRST(v)) AS n,
                          PREV(FIRST(B.v)) AS pb, NEXT(LAST(B.v, 1), 3) AS nb,
                          PREV(LAST(A.v, 1), 2) AS pz
                 PATTERN (A+ B+)
                 DEFINE A AS v < 10, B AS v >= 10""",
        expected=rows(("p", "n", "pb", "nb", "pz"), (1, 2, 3, None, None)),
        note="PREV(LAST(A.v),2): last A = row 3, two back = row 1. NEXT(FIRST(v)) = row 2. "
        "PREV(FIRST(B.v)) = row 3. NEXT(LAST(B.v,1),3): row 5 + 3 = row 8, outside the "
        "partition. PREV(LAST(A.v,1),2): row 2 - 2 = row 0, outside.",
    ),
    Case(
        name="nav_partition_bounds",
        data={"p": ["x", "x", "x", "y", "y"], "id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES A.v AS av, PREV(A.v) AS pv, NEXT(A.v) AS nv
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(
            ("p", "av", "pv", "nv"),
            ("x", 1, None, 2),
            ("x", 2, 1, 3),
            ("x", 3, 2, None),
            ("y", 4, None, 5),
            ("y", 5, 4, None),
        ),
        note="PREV/NEXT never cross into another partition: row 3's NEXT and row 4's PREV are NULL.",
    ),
    Case(
        name="nav_partition_interleaved_input",
        data={"p": ["y", "x", "y", "x", "x"], "id": [1, 2, 3, 4, 5], "v": [10, 20, 30, 40, 50]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES A.id AS a, PREV(A.v, 2) AS p2
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(
            ("p", "a", "p2"),
            ("x", 2, None),
            ("x", 4, None),
            ("x", 5, 20),
            ("y", 1, None),
            ("y", 3, None),
        ),
        note="Partition x is ids 2, 4, 5 (v 20, 40, 50); two rows back from id 5 is id 2.",
    ),
    Case(
        name="nav_offset_zero",
        data={"id": [1, 2, 3], "v": [1, 3, 5]},
        query="""ORDER BY id
                 MEASURES PREV(A.v, 0) AS p0, NEXT(A.v, 0) AS n0, A.id AS a
                 PATTERN (A)
                 DEFINE A AS v > 2 AND PREV(v, 0) = v""",
        expected=rows(("p0", "n0", "a"), (3, 3, 2), (5, 5, 3)),
        note="Offset 0 is the row itself.",
    ),
    Case(
        name="nav_running_final_all_rows",
        data={"id": [1, 2, 3, 4], "v": [3, 1, 4, 1]},
        query="""ORDER BY id
                 MEASURES LAST(v) AS l, RUNNING LAST(v) AS rl, FINAL LAST(v) AS fl,
                          LAST(v, 1) AS l1, FINAL LAST(v, 1) AS fl1,
                          FIRST(v) AS f, FINAL FIRST(v) AS ff
                 ALL ROWS PER MATCH
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "v": 3, "l": 3, "rl": 3, "fl": 1, "l1": None, "fl1": 4, "f": 3, "ff": 3},
            {"id": 2, "v": 1, "l": 1, "rl": 1, "fl": 1, "l1": 3, "fl1": 4, "f": 3, "ff": 3},
            {"id": 3, "v": 4, "l": 4, "rl": 4, "fl": 1, "l1": 1, "fl1": 4, "f": 3, "ff": 3},
            {"id": 4, "v": 1, "l": 1, "rl": 1, "fl": 1, "l1": 4, "fl1": 4, "f": 3, "ff": 3},
        ],
        note="Running LAST is the current row; FINAL LAST the match's last row (id 4); "
        "FINAL LAST(v, 1) the one before it (id 3).",
    ),
    Case(
        name="nav_qualified_vs_universal_one_row",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 9]},
        query="""ORDER BY id
                 MEASURES A.v AS av, v AS uv, B.v AS bv, PREV(v) AS pv, PREV(A.v) AS pav
                 PATTERN (A+ B)
                 DEFINE A AS v < 5, B AS v >= 5""",
        expected=rows(("av", "uv", "bv", "pv", "pav"), (3, 9, 9, 3, 2)),
        note="In ONE ROW PER MATCH measures are evaluated at the last row: A.v is the last A "
        "row (3), unqualified v the last row of the match (9). PREV(A.v) is the row before the "
        "last A row.",
    ),
    Case(
        name="nav_qualified_running_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 9]},
        query="""ORDER BY id
                 MEASURES A.v AS av, B.v AS bv
                 ALL ROWS PER MATCH
                 PATTERN (A+ B)
                 DEFINE A AS v < 5, B AS v >= 5""",
        expected=[
            {"id": 1, "v": 1, "av": 1, "bv": None},
            {"id": 2, "v": 2, "av": 2, "bv": None},
            {"id": 3, "v": 3, "av": 3, "bv": None},
            {"id": 4, "v": 9, "av": 3, "bv": 9},
        ],
        note="Running semantics: B.v is NULL until the B row has been reached.",
    ),
    Case(
        name="nav_other_variable_in_define",
        data={"id": [1, 2, 3, 4, 5], "v": [5, 6, 7, 4, 8]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, A.v AS av, LAST(B.v) AS lb
                 PATTERN (A B+)
                 DEFINE B AS v > A.v""",
        expected=rows(("s", "e", "av", "lb"), (1, 3, 5, 7), (4, 5, 4, 8)),
        note="A is undefined (any row). Row 1: B = 6, 7 (> 5); 4 fails. Row 4: B = 8 (> 4).",
    ),
    Case(
        name="nav_own_variable_is_current_row",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 3, 4, 2, 5]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+)
                 DEFINE A AS A.v >= 3""",
        expected=rows(("s", "e"), (2, 3), (5, 5)),
        note="A.v inside A's own condition is the current row (it is tentatively labelled A).",
    ),
    Case(
        name="nav_prev_of_own_variable_leaves_match",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 1, 2]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+)
                 DEFINE A AS A.v > coalesce(PREV(A.v), 0)""",
        expected=rows(("s", "e"), (1, 3), (5, 5)),
        note="PREV(A.v) is the physical row before the current one, in the match or not. Row 1: "
        "1 > coalesce(NULL, 0). Row 4: 1 > 3 fails (and cannot start a match). Row 5 starts a "
        "new match: its PREV is row 4 (1), outside the match, and 2 > 1.",
    ),
    Case(
        name="nav_desc_order",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5]},
        query="""ORDER BY id DESC
                 MEASURES FIRST(id) AS s, LAST(id) AS e, PREV(FIRST(v)) AS pf
                 PATTERN (A B)
                 DEFINE B AS v < PREV(v)""",
        expected=rows(("s", "e", "pf"), (5, 4, None), (3, 2, 4)),
        note="Rows in order 5,4,3,2,1. PREV follows the ORDER BY order: the row before id 3 is id 4.",
    ),
    Case(
        name="nav_unsorted_input",
        data={"id": [3, 1, 2, 5, 4], "v": [30, 10, 20, 50, 40]},
        query="""ORDER BY id
                 MEASURES A.id AS a, C.id AS c, NEXT(C.v) AS nc
                 PATTERN (A B C)
                 DEFINE B AS v > PREV(v), C AS v > PREV(v)""",
        expected=rows(("a", "c", "nc"), (1, 3, 40)),
        note="Sorted: ids 1..5 with v 10..50. Match ids 1-3; then id 4 has only one row after it.",
    ),
    Case(
        name="nav_prev_next_leave_match_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES PREV(v) AS pv, NEXT(v) AS nv, MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=[
            {"id": 1, "v": 1, "pv": None, "nv": 2, "m": 1},
            {"id": 2, "v": 2, "pv": 1, "nv": 3, "m": 1},
            {"id": 3, "v": 3, "pv": 2, "nv": 4, "m": 2},
            {"id": 4, "v": 4, "pv": 3, "nv": None, "m": 2},
        ],
        note="Matches 1-2 and 3-4; PREV/NEXT of the current row read rows of the other match.",
    ),
    Case(
        name="nav_first_in_define",
        data={"id": [1, 2, 3, 4, 5], "v": [5, 7, 3, 9, 6]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A B+)
                 DEFINE B AS v > FIRST(v)""",
        expected=rows(("s", "e"), (1, 2), (3, 5)),
        note="FIRST(v) is the match's first row. Row 1: 7 > 5, 3 > 5 fails. Row 3: 9, 6 > 3.",
    ),
    Case(
        name="nav_last_offset_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [3, 4, 5, 2, 6, 7]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, LAST(v, 1) AS l1
                 PATTERN (X A+)
                 DEFINE A AS v > LAST(v, 1)""",
        expected=rows(("s", "e", "l1"), (1, 3, 4), (4, 6, 6)),
        note="In DEFINE, LAST(v, 1) is the match row before the current one. Row 4: 2 > 5 fails, "
        "so the first match is 1-3; row 4 then starts X.",
    ),
    Case(
        name="nav_prev_of_other_variable_in_define",
        data={"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 12, 0]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, PREV(A.v) AS pa
                 PATTERN (A+ B)
                 DEFINE A AS v <= 3, B AS v = PREV(A.v) + 10""",
        expected=rows(("s", "e", "pa"), (1, 4, 2)),
        note="A = rows 1-3; at row 4, PREV(A.v) is the row before the last A (row 2, v 2): 12 = 12. "
        "Row 5 is an A with no B after it.",
    ),
    Case(
        name="nav_null_values",
        data={"id": [1, 2, 3, 4], "v": [1, None, 3, 4]},
        query="""ORDER BY id
                 MEASURES A.id AS a, PREV(A.v) AS pa
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("a", "pa"), (3, None)),
        note="Comparisons with NULL are NULL, which rejects the row: starts 1 and 2 fail.",
    ),
    Case(
        name="nav_final_first_last_variables_all_rows",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 11, 12]},
        query="""ORDER BY id
                 MEASURES FINAL LAST(A.v) AS fla, FINAL FIRST(B.v) AS ffb, LAST(B.v) AS lb
                 ALL ROWS PER MATCH
                 PATTERN (A+ B+)
                 DEFINE A AS v < 10, B AS v >= 10""",
        expected=[
            {"id": 1, "v": 1, "fla": 2, "ffb": 11, "lb": None},
            {"id": 2, "v": 2, "fla": 2, "ffb": 11, "lb": None},
            {"id": 3, "v": 11, "fla": 2, "ffb": 11, "lb": 11},
            {"id": 4, "v": 12, "fla": 2, "ffb": 11, "lb": 12},
        ],
        note="FINAL sees the whole match from every row; running LAST(B.v) only rows up to the current one.",
    ),
    Case(
        name="nav_running_first_reaches_past_the_current_row",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 11, 12]},
        query="""ORDER BY id
                 MEASURES FIRST(v, 2) AS f2, RUNNING FIRST(B.v) AS fb, LAST(v, 2) AS l2
                 ALL ROWS PER MATCH
                 PATTERN (A+ B+)
                 DEFINE A AS v < 10, B AS v >= 10""",
        expected=[
            {"id": 1, "v": 1, "f2": 11, "fb": 11, "l2": None},
            {"id": 2, "v": 2, "f2": 11, "fb": 11, "l2": None},
            {"id": 3, "v": 11, "f2": 11, "fb": 11, "l2": 1},
            {"id": 4, "v": 12, "f2": 11, "fb": 11, "l2": 2},
        ],
        note="Trino's LogicalIndexNavigation: FIRST counts from the match's first row over the whole "
        "match, RUNNING or not (the third row, and B's first row, are known at rows 1 and 2 too); "
        "RUNNING LAST counts back from the current row.",
    ),
    Case(
        name="nav_first_past_the_current_row_in_define",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES COUNT(*) AS n
                 PATTERN (A+)
                 DEFINE A AS FIRST(v, 1) IS NULL OR FIRST(v, 1) = 2""",
        expected=rows(("n",), (3,)),
        note="In DEFINE the match is the rows so far: FIRST(v, 1) at the first row is NULL.",
    ),
]
