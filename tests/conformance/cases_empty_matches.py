"""Empty matches and unmatched rows.

Trino's documentation ("Evaluating expressions in empty matches and unmatched rows"): an
empty match has a starting row and gets a match number; its measures see no rows: column
references, navigation and CLASSIFIER() are NULL, aggregates run over the empty set
(count 0, the others NULL; count_if is 0 in Trino). ONE ROW PER MATCH and ALL ROWS PER MATCH
(SHOW EMPTY MATCHES, the default) output one row for it, from the starting row; OMIT EMPTY
MATCHES drops it (its number is still used). After an empty match matching resumes at the
next row. WITH UNMATCHED ROWS adds the rows that are in no match and start no empty match,
with every measure NULL.
"""

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


STAR = {"id": [1, 2, 3, 4], "v": [1, 0, 2, 3]}

CASES: list[Case] = [
    Case(
        name="empty_star_one_row",
        data=STAR,
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n, FIRST(id) AS s, CLASSIFIER() AS c
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=rows(("m", "n", "s", "c"), (1, 1, 1, "A"), (2, 0, None, None), (3, 2, 3, "A")),
        note="Row 1: A* = row 1. Row 2: A fails, the empty match (number 2). Row 3: rows 3-4.",
    ),
    Case(
        name="empty_star_all_rows_show",
        data=STAR,
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "n": 1, "c": "A"},
            {"id": 2, "v": 0, "m": 2, "n": 0, "c": None},
            {"id": 3, "v": 2, "m": 3, "n": 1, "c": "A"},
            {"id": 4, "v": 3, "m": 3, "n": 2, "c": "A"},
        ],
        note="The empty match is output as its starting row (id 2) with measures over no rows.",
    ),
    Case(
        name="empty_star_all_rows_show_explicit",
        data=STAR,
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH SHOW EMPTY MATCHES
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "c": "A"},
            {"id": 2, "v": 0, "m": 2, "c": None},
            {"id": 3, "v": 2, "m": 3, "c": "A"},
            {"id": 4, "v": 3, "m": 3, "c": "A"},
        ],
    ),
    Case(
        name="empty_star_all_rows_omit",
        data=STAR,
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH OMIT EMPTY MATCHES
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=[
            {"id": 1, "v": 1, "m": 1, "c": "A"},
            {"id": 3, "v": 2, "m": 3, "c": "A"},
            {"id": 4, "v": 3, "m": 3, "c": "A"},
        ],
        note="The omitted empty match still took number 2 (Trino numbers every match found).",
    ),
    Case(
        name="empty_unmatched_rows_nonempty_pattern",
        data={"id": [1, 2, 3, 4], "v": [5, 3, 4, 1]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c, count(*) AS n
                 ALL ROWS PER MATCH WITH UNMATCHED ROWS
                 PATTERN (A B)
                 DEFINE B AS v > PREV(v)""",
        expected=[
            {"id": 1, "v": 5, "m": None, "c": None, "n": None},
            {"id": 2, "v": 3, "m": 1, "c": "A", "n": 1},
            {"id": 3, "v": 4, "m": 1, "c": "B", "n": 2},
            {"id": 4, "v": 1, "m": None, "c": None, "n": None},
        ],
        note="Unmatched rows have every measure NULL, count(*) and MATCH_NUMBER() included.",
    ),
    Case(
        name="empty_unmatched_rows_with_empty_matches",
        data={"id": [1, 2, 3], "v": [0, 1, 0]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH WITH UNMATCHED ROWS
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=[
            {"id": 1, "v": 0, "m": 1, "c": None},
            {"id": 2, "v": 1, "m": 2, "c": "A"},
            {"id": 3, "v": 0, "m": 3, "c": None},
        ],
        note="Rows 1 and 3 start empty matches, so they are not unmatched: they have match numbers.",
    ),
    Case(
        name="empty_optional_one_row",
        data={"id": [1, 2, 3], "v": [1, -1, 2]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n, A.v AS av
                 PATTERN (A?)
                 DEFINE A AS v > 0""",
        expected=rows(("m", "n", "av"), (1, 1, 1), (2, 0, None), (3, 1, 2)),
    ),
    Case(
        name="empty_pattern_partitions",
        data={"p": ["a", "b", "a"], "id": [1, 2, 3]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (())""",
        expected=rows(("p", "m", "n"), ("a", 1, 0), ("a", 2, 0), ("b", 1, 0)),
        note="PATTERN (()) gives an empty match at every row.",
    ),
    Case(
        name="empty_pattern_all_rows_measures",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c, sum(v) AS s, count(v) AS cnt,
                          array_agg(v) AS arr, PREV(v) AS pv, v AS mv
                 ALL ROWS PER MATCH
                 PATTERN (())""",
        expected=[
            {
                "id": i,
                "v": i,
                "m": i,
                "c": None,
                "s": None,
                "cnt": 0,
                "arr": None,
                "pv": None,
                "mv": None,
            }
            for i in (1, 2, 3)
        ],
        note="In an empty match column references and navigation are NULL even where a previous "
        "row exists; the input columns come from the starting row.",
    ),
    Case(
        name="empty_pattern_all_rows_omit",
        data={"id": [1, 2, 3], "v": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH OMIT EMPTY MATCHES
                 PATTERN (())""",
        expected=[],
    ),
    Case(
        name="empty_reluctant_star",
        data={"id": [1, 2, 3]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (A*?)
                 DEFINE A AS true""",
        expected=rows(("m", "n"), (1, 0), (2, 0), (3, 0)),
        note="A*? prefers zero rows, and nothing follows, so every match is empty.",
    ),
    Case(
        name="empty_reluctant_optional_all_rows",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c
                 ALL ROWS PER MATCH
                 PATTERN (A??)
                 DEFINE A AS true""",
        expected=[{"id": 1, "m": 1, "c": None}, {"id": 2, "m": 2, "c": None}],
    ),
    Case(
        name="empty_alternative_preferred",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (() | A)
                 DEFINE A AS true""",
        expected=rows(("m", "n"), (1, 0), (2, 0)),
        note="The left alternative, the empty pattern, is preferred.",
    ),
    Case(
        name="empty_alternative_fallback",
        data={"id": [1, 2], "v": [1, -1]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (A | ())
                 DEFINE A AS v > 0""",
        expected=rows(("m", "n"), (1, 1), (2, 0)),
    ),
    Case(
        name="empty_quantifier_zero",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (A{0})
                 DEFINE A AS true""",
        expected=rows(("m", "n"), (1, 0), (2, 0)),
    ),
    Case(
        name="empty_match_aggregates",
        data={"id": [1], "v": [5]},
        query="""ORDER BY id
                 MEASURES count(*) AS n, count_if(v > 0) AS ci, bool_and(v > 0) AS ba,
                          max_by(id, v) AS mb, array_agg(v) AS arr, sum(v) AS s, avg(v) AS a,
                          cardinality(array_agg(v)) AS card
                 PATTERN (A*)
                 DEFINE A AS v < 0""",
        expected=rows(
            ("n", "ci", "ba", "mb", "arr", "s", "a", "card"),
            (0, 0, None, None, None, None, None, None),
        ),
        note="Aggregates over the empty set: count 0, count_if 0 (Trino's count_if, per "
        "MatchAggregation.aggregateEmpty), the others NULL; cardinality(NULL) is NULL.",
    ),
    Case(
        name="empty_numbering_per_partition",
        data={"p": ["x", "x", "y", "y"], "id": [1, 2, 3, 4], "v": [0, 1, 1, 0]},
        query="""PARTITION BY p ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=rows(("p", "m", "n"), ("x", 1, 0), ("x", 2, 1), ("y", 1, 1), ("y", 2, 0)),
    ),
    Case(
        name="empty_none_when_all_rows_match",
        data={"id": [1, 2], "v": [1, 1]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m
                 ALL ROWS PER MATCH
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=[{"id": 1, "v": 1, "m": 1}, {"id": 2, "v": 1, "m": 1}],
        note="No empty match after the last row: there is no row to start one.",
    ),
    Case(
        name="empty_group_in_sequence",
        data={"id": [1, 2]},
        query="""ORDER BY id
                 MEASURES array_agg(CLASSIFIER()) AS labels
                 PATTERN (A () B)
                 DEFINE A AS true""",
        expected=rows(("labels",), (["A", "B"],)),
    ),
    Case(
        name="empty_after_skip_to_next_row",
        data={"id": [1, 2, 3], "v": [1, 1, 0]},
        query="""ORDER BY id
                 MEASURES MATCH_NUMBER() AS m, count(*) AS n, FIRST(id) AS s
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A*)
                 DEFINE A AS v > 0""",
        expected=rows(("m", "n", "s"), (1, 2, 1), (2, 1, 2), (3, 0, None)),
        note="Row 1: rows 1-2. Next row 2: row 2. Row 3: empty match.",
    ),
]
