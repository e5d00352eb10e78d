"""Arrays: array_agg, ARRAY[...] constructor, subscript, cardinality, element_at, contains,
array_join, array equality, running array_agg in ALL ROWS PER MATCH.

Trino: a[i] is 1-based (out of range is an error, so these cases stay in range);
element_at(a, i) is NULL past the end and counts from the end for i < 0; array_join omits
NULL elements unless a null_replacement is given; array_agg keeps NULL elements, in match
order, and is NULL over no rows.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


TEN = {"id": [1, 2, 3], "v": [10, 20, 30]}
ALL_A = """PATTERN (A+)
           DEFINE A AS true"""

CASES: list[Case] = [
    Case(
        name="arr_array_agg_match_order",
        data={"id": [2, 1, 3], "v": [1, 3, 2]},
        query="ORDER BY id MEASURES array_agg(v) AS vs " + ALL_A,
        expected=rows(("vs",), ([3, 1, 2],)),
        note="Match order is ORDER BY order (ids 1, 2, 3), not input order.",
    ),
    Case(
        name="arr_array_agg_keeps_nulls",
        data={"id": [1, 2, 3], "v": [1, None, 3]},
        query="ORDER BY id MEASURES array_agg(v) AS vs " + ALL_A,
        expected=rows(("vs",), ([1, None, 3],)),
    ),
    Case(
        name="arr_array_agg_per_variable",
        data={"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]},
        query="""ORDER BY id
                 MEASURES array_agg(A.v) AS aa, array_agg(B.v) AS ab, array_agg(C.v) AS ac
                 PATTERN (A B+ C?)
                 DEFINE B AS v > 1, C AS v > 100""",
        expected=rows(("aa", "ab", "ac"), ([1], [2, 3, 4], None)),
        note="C matched no row: array_agg over no rows is NULL.",
    ),
    Case(
        name="arr_constructor",
        data={"id": [1], "v": [7]},
        query="""ORDER BY id
                 MEASURES ARRAY[1, 2, 3] AS lit, ARRAY[A.v, A.v * 2] AS pair
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(("lit", "pair"), ([1, 2, 3], [7, 14])),
    ),
    Case(
        name="arr_subscript_one_based",
        data=TEN,
        query="ORDER BY id "
        "MEASURES array_agg(v)[2] AS el2, array_agg(v)[1] AS el1, ARRAY[5, 6, 7][3] AS el3 "
        + ALL_A,
        expected=rows(("el2", "el1", "el3"), (20, 10, 7)),
    ),
    Case(
        name="arr_subscript_computed_index",
        data=TEN,
        query="ORDER BY id "
        "MEASURES array_agg(v)[count(*)] AS last_el, "
        "array_agg(v)[cardinality(array_agg(v)) - 1] AS before_last " + ALL_A,
        expected=rows(("last_el", "before_last"), (30, 20)),
    ),
    Case(
        name="arr_cardinality",
        data=TEN,
        query="ORDER BY id "
        "MEASURES cardinality(array_agg(v)) AS n, cardinality(ARRAY['a', 'b']) AS two " + ALL_A,
        expected=rows(("n", "two"), (3, 2)),
    ),
    Case(
        name="arr_element_at",
        data=TEN,
        query="ORDER BY id "
        "MEASURES element_at(array_agg(v), -1) AS last_el, element_at(array_agg(v), 10) AS past_end, "
        "element_at(array_agg(v), 2) AS el2, element_at(array_agg(v), -3) AS from_end3, "
        "element_at(array_agg(v), -4) AS before_start " + ALL_A,
        expected=rows(
            ("last_el", "past_end", "el2", "from_end3", "before_start"), (30, None, 20, 10, None)
        ),
    ),
    Case(
        name="arr_element_at_literal_negative",
        data={"id": [1]},
        query="""ORDER BY id
                 MEASURES element_at(ARRAY['a', 'b', 'c'], -2) AS el
                 PATTERN (A)
                 DEFINE A AS true""",
        expected=rows(("el",), ("b",)),
    ),
    Case(
        name="arr_contains",
        data=TEN,
        query="ORDER BY id "
        "MEASURES contains(array_agg(v), 20) AS has20, contains(array_agg(v), 25) AS has25 "
        + ALL_A,
        expected=rows(("has20", "has25"), (True, False)),
    ),
    Case(
        name="arr_array_join_strings_nulls",
        data={"id": [1, 2, 3], "s": ["a", None, "c"]},
        query="ORDER BY id "
        "MEASURES array_join(array_agg(s), ',') AS skipped, "
        "array_join(array_agg(s), ',', 'n/a') AS replaced " + ALL_A,
        expected=rows(("skipped", "replaced"), ("a,c", "a,n/a,c")),
    ),
    Case(
        name="arr_array_join_integers_nulls",
        data={"id": [1, 2, 3], "v": [1, None, 3]},
        query="ORDER BY id "
        "MEASURES array_join(array_agg(v), '|') AS skipped, "
        "array_join(array_agg(v), '|', 'x') AS replaced " + ALL_A,
        expected=rows(("skipped", "replaced"), ("1|3", "1|x|3")),
    ),
    Case(
        name="arr_equality_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 1, 3, 1, 2]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s
                 PATTERN (A B)
                 DEFINE B AS array_agg(v) = ARRAY[1, 2]""",
        expected=rows(("s",), (1,), (5,)),
        note="array_agg(v) in B's condition covers the match so far: [1, 2] from rows 1 and 5; "
        "[1, 3] from row 3 and [3, 1] from row 4 fail.",
    ),
    Case(
        name="arr_equality_in_measures",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES array_agg(CLASSIFIER()) = ARRAY['A', 'B'] AS is_ab,
                          array_agg(CLASSIFIER()) = ARRAY['B', 'A'] AS is_ba
                 PATTERN (A B)
                 DEFINE A AS true""",
        expected=rows(("is_ab", "is_ba"), (True, False)),
    ),
    Case(
        name="arr_running_array_agg_all_rows",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES array_agg(v) AS r, FINAL array_agg(v) AS f,
                          element_at(array_agg(v), -1) AS cur, cardinality(array_agg(v)) AS n
                 ALL ROWS PER MATCH
                 PATTERN (A+)
                 DEFINE A AS true""",
        expected=[
            {"id": 1, "v": 1, "r": [1], "f": [1, 2, 3], "cur": 1, "n": 1},
            {"id": 2, "v": 2, "r": [1, 2], "f": [1, 2, 3], "cur": 2, "n": 2},
            {"id": 3, "v": 3, "r": [1, 2, 3], "f": [1, 2, 3], "cur": 3, "n": 3},
        ],
    ),
    Case(
        name="arr_constructor_of_navigations",
        data=TEN,
        query="ORDER BY id MEASURES ARRAY[FIRST(v), LAST(v)] AS ends " + ALL_A,
        expected=rows(("ends",), ([10, 30],)),
    ),
    Case(
        name="arr_contains_in_define",
        data={"id": [1, 2, 3, 4, 5, 6], "v": [1, 5, 2, 0, 3, 0]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+ C)
                 DEFINE A AS v > 0, C AS contains(array_agg(v), 5)""",
        expected=rows(("s", "e"), (1, 4)),
        note="From row 1: A = 1-3, C = row 4 with [1, 5, 2, 0] containing 5. From row 5: A = 5, "
        "C at row 6 sees [3, 0]: no match.",
    ),
    Case(
        name="arr_cardinality_in_define",
        data={"id": [1, 2, 3, 4, 5]},
        query="""ORDER BY id
                 MEASURES FIRST(id) AS s, LAST(id) AS e
                 PATTERN (A+)
                 DEFINE A AS cardinality(array_agg(id)) <= 2""",
        expected=rows(("s", "e"), (1, 2), (3, 4), (5, 5)),
    ),
    Case(
        name="arr_array_agg_doubles",
        data={"id": [1, 2], "x": [1.5, 2.5]},
        query="ORDER BY id MEASURES array_agg(x) AS xs " + ALL_A,
        expected=rows(("xs",), ([1.5, 2.5],)),
    ),
    Case(
        name="arr_array_agg_classifier_partitions",
        data={"p": ["x", "x", "y"], "id": [1, 2, 3]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES array_agg(CLASSIFIER()) AS labels
                 PATTERN (A B?)
                 DEFINE A AS true, B AS true""",
        expected=rows(("p", "labels"), ("x", ["A", "B"]), ("y", ["A"])),
    ),
    Case(
        name="arr_array_agg_over_subset",
        data={"id": [1, 2, 3], "v": [1, 10, 100]},
        query="""ORDER BY id
                 MEASURES array_agg(U.v) AS uv, array_agg(U.v)[2] AS second_u
                 PATTERN (A B C)
                 SUBSET U = (A, C)
                 DEFINE A AS true""",
        expected=rows(("uv", "second_u"), ([1, 100], 100)),
    ),
]
