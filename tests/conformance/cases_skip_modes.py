"""AFTER MATCH SKIP modes, and the preference order (greedy / reluctant quantifiers,
alternation) that decides where a match ends.

Trino: PAST LAST ROW (default) resumes after the match; TO NEXT ROW at the row after the
match's first row; TO FIRST v / TO LAST v / TO v (= TO LAST v) at that row of the match
(v a primary or union variable). Greedy quantifiers prefer more repetitions, reluctant ones
fewer; in an alternation the leftmost alternative that leads to a match is chosen.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


RISE5 = {"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5]}
EIGHT = {"id": [1, 2, 3, 4, 5, 6, 7, 8]}

CASES: list[Case] = [
    Case(
        name="skip_past_last_row_explicit",
        data=RISE5,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, MATCH_NUMBER() AS m
                 AFTER MATCH SKIP PAST LAST ROW
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e", "m"), (1, 2, 1), (3, 4, 2)),
    ),
    Case(
        name="skip_to_next_row",
        data=RISE5,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e, MATCH_NUMBER() AS m
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e", "m"), (1, 2, 1), (2, 3, 2), (3, 4, 3), (4, 5, 4)),
    ),
    Case(
        name="skip_to_next_row_overlapping_plus",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, count(*) AS n
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=rows(("s", "n"), (1, 3), (2, 2), (3, 1)),
    ),
    Case(
        name="skip_to_last_var",
        data=EIGHT,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO LAST B
                 PATTERN (A B{2} C)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 4), (3, 6), (5, 8)),
        note="Match 1-4 has B = 2, 3: resume at 3. Then 3-6 (B = 4, 5): resume at 5: 5-8. "
        "From 7 only two rows remain.",
    ),
    Case(
        name="skip_to_first_var",
        data=EIGHT,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO FIRST B
                 PATTERN (A B{2} C)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 4), (2, 5), (3, 6), (4, 7), (5, 8)),
        note="The first B is always the match's second row.",
    ),
    Case(
        name="skip_to_var_means_last",
        data=EIGHT,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO B
                 PATTERN (A B{2} C)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 4), (3, 6), (5, 8)),
        note="SKIP TO B is SKIP TO LAST B.",
    ),
    Case(
        name="skip_to_first_subset",
        data={"id": [1, 2, 3, 4, 5]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s
                 AFTER MATCH SKIP TO FIRST U
                 PATTERN (A B C)
                 SUBSET U = (B, C)
                 DEFINE A AS true""",
        expected=rows(("s",), (1,), (2,), (3,)),
    ),
    Case(
        name="skip_to_last_final_variable",
        data={"id": [1, 2, 3, 4, 5, 6, 7]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO LAST C
                 PATTERN (A B C)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 3), (3, 5), (5, 7)),
        note="Consecutive matches share their boundary row.",
    ),
    Case(
        name="skip_to_next_row_all_rows",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "c": "A"},
            {"id": 2, "v": 2, "m": 1, "c": "B"},
            {"id": 2, "v": 2, "m": 2, "c": "A"},
            {"id": 3, "v": 3, "m": 2, "c": "B"},
        ],
        note="Row 2 is output once per match it belongs to.",
    ),
    Case(
        name="skip_unmatched_not_repeated_after_next_row",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH WITH UNMATCHED ROWS
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B)
                 DEFINE A AS v = 1, B AS v = 2""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "c": "A"},
            {"id": 2, "v": 2, "m": 1, "c": "B"},
            {"id": 3, "v": 3, "m": None, "c": None},
        ],
        note="No match starts at row 2, but row 2 is inside match 1, so it is not output again "
        "as unmatched; row 3 is in no match.",
    ),
    Case(
        name="skip_reluctant_plus",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+? B)
                 DEFINE B AS v > 2""",
        expected=rows(("s", "e"), (1, 3)),
        note="A+? takes as few rows as possible: A = 1 leaves B = row 2 (fails); A = 1-2, B = 3. "
        "Row 4 alone cannot match.",
    ),
    Case(
        name="skip_greedy_plus",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+ B)
                 DEFINE B AS v > 2""",
        expected=rows(("s", "e"), (1, 4)),
        note="A+ takes all four rows first, then gives back row 4 to B.",
    ),
    Case(
        name="skip_alternation_left_preferred",
        data={"id": [1, 2, 3, 4], "v": [1, 20, 2, 3]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A B | A)
                 DEFINE A AS true, B AS v > 10""",
        expected=rows(("s", "e"), (1, 2), (3, 3), (4, 4)),
    ),
    Case(
        name="skip_alternation_short_first",
        data={"id": [1, 2, 3, 4], "v": [1, 20, 2, 3]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A | A B)
                 DEFINE A AS true, B AS v > 10""",
        expected=rows(("s", "e"), (1, 1), (2, 2), (3, 3), (4, 4)),
        note="The left alternative always succeeds, so the longer one is never used.",
    ),
    Case(
        name="skip_bounded_greedy",
        data={"id": [1, 2, 3, 4, 5, 6, 7]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A{2,3})
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 3), (4, 6)),
    ),
    Case(
        name="skip_bounded_reluctant",
        data={"id": [1, 2, 3, 4, 5, 6, 7]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A{2,3}?)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 2), (3, 4), (5, 6)),
    ),
    Case(
        name="skip_exact_count",
        data={"id": [1, 2, 3, 4, 5, 6, 7]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A{3})
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 3), (4, 6)),
    ),
    Case(
        name="skip_to_next_row_shorter_matches",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 1]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B+)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e"), (1, 3), (2, 3)),
    ),
    Case(
        name="skip_to_next_row_partitions",
        data={"p": ["x", "x", "x", "y", "y"], "id": [1, 2, 3, 4, 5]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B)
                 DEFINE A AS true""",
        expected=rows(("p", "s", "e"), ("x", 1, 2), ("x", 2, 3), ("y", 4, 5)),
        note="Matches never cross partitions: row 3 has no B in partition x.",
    ),
    Case(
        name="skip_to_first_quantified_var",
        data=RISE5,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO FIRST B
                 PATTERN (A B+)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e"), (1, 5), (2, 5), (3, 5), (4, 5)),
    ),
    Case(
        name="skip_to_last_quantified_var",
        data=RISE5,
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO LAST B
                 PATTERN (A B+)
                 DEFINE B AS v > PREV(v)""",
        expected=rows(("s", "e"), (1, 5)),
        note="Resumes at row 5 (the last B), which has no row after it for B.",
    ),
    Case(
        name="skip_to_next_row_repeated_group",
        data={"id": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN ((A B)+)
                 DEFINE A AS true""",
        expected=rows(("s", "e"), (1, 4), (2, 3), (3, 4)),
        note="From row 2: A B = 2-3, a second iteration would need rows 4 and 5.",
    ),
]
