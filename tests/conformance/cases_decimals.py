"""DECIMAL(p, s): exact numbers (Trino's documentation, "Fixed-precision" types and the
decimal rules of its arithmetic operators, CAST and aggregates).

- A decimal column is DECIMAL(p, s) as Arrow declares it; results keep exact digits.
- + and - give scale max(s1, s2); * gives s1 + s2; / gives max(s1, s2), rounded half away from
  zero (HALF_UP); BIGINT operands count as DECIMAL(19, 0).
- SUM of DECIMAL(p, s) is DECIMAL(38, s); AVG is DECIMAL(p, s), rounded half up.
- CAST(x AS DECIMAL(p, s)) rounds half up to s digits; a double converts through its shortest
  digits; CAST(decimal AS BIGINT) rounds half up; DECIMAL alone is DECIMAL(38, 0).
- Where a decimal meets a double literal, the literal is the decimal it spells (Trino types
  1.05 as DECIMAL(3, 2)); other doubles turn the decimal into a double.
"""

from decimal import Decimal as D

from tests.conformance.case import Case


def rows(cols, *values):
    return [dict(zip(cols, v, strict=True)) for v in values]


DEC = {"x": "decimal128(9, 2)"}

CASES: list[Case] = [
    Case(
        name="dec_sum_avg_exact",
        data={"id": [1, 2, 3], "x": [D("0.10"), D("0.20"), D("0.30")]},
        types=DEC,
        query="ORDER BY id MEASURES SUM(x) AS s, AVG(x) AS av, COUNT(x) AS c, MAX(x) AS mx "
        "PATTERN (A+) DEFINE A AS true",
        expected=rows(("s", "av", "c", "mx"), (D("0.60"), D("0.20"), 3, D("0.30"))),
        note="0.1 + 0.2 + 0.3 in doubles is 0.6000000000000001",
    ),
    Case(
        name="dec_avg_rounds_half_up",
        data={"id": [1, 2, 3, 4], "x": [D("0.01"), D("0.02"), D("-0.01"), D("-0.02")]},
        types=DEC,
        query="ORDER BY id MEASURES AVG(A.x) AS pos, AVG(B.x) AS neg PATTERN (A{2} B{2}) "
        "DEFINE A AS x > 0, B AS x < 0",
        expected=rows(("pos", "neg"), (D("0.02"), D("-0.02"))),
        note="0.015 rounds half away from zero at scale 2",
    ),
    Case(
        name="dec_arithmetic_scales",
        data={"id": [1], "x": [D("10.05")]},
        types=DEC,
        query="ORDER BY id MEASURES A.x + 1 AS p, A.x * 2.5 AS m, A.x / 3 AS q, -A.x AS n, "
        "A.x % 3 AS r, A.x - 0.005 AS d PATTERN (A) DEFINE A AS true",
        expected=rows(("p", "m", "q", "n", "r", "d"),
                      (D("11.05"), D("25.125"), D("3.35"), D("-10.05"), D("1.05"), D("10.045"))),
    ),
    Case(
        name="dec_casts",
        data={"id": [1], "x": [D("-2.50")]},
        types=DEC,
        query="ORDER BY id MEASURES CAST('1.255' AS DECIMAL(4, 2)) AS a, CAST(-1.255 AS DECIMAL(4, 2)) AS b, "
        "CAST(A.x AS BIGINT) AS c, CAST(A.x AS DOUBLE) AS d, CAST(A.x AS VARCHAR) AS e, "
        "CAST(A.x AS DECIMAL) AS f, CAST(7 AS DECIMAL(5, 2)) AS g, TRY_CAST('x' AS DECIMAL(3, 1)) AS h, "
        "TRY_CAST(1000 AS DECIMAL(3, 1)) AS i PATTERN (A) DEFINE A AS true",
        expected=rows(("a", "b", "c", "d", "e", "f", "g", "h", "i"),
                      (D("1.26"), D("-1.26"), -3, -2.5, "-2.50", D("-3"), D("7.00"), None, None)),
    ),
    Case(
        name="dec_literal_compares_exactly",
        data={"id": [1, 2, 3], "x": [D("0.10"), D("0.30"), D("0.20")]},
        types=DEC,
        query="ORDER BY id MEASURES FIRST(x) AS f, LAST(x) AS l PATTERN (A B) "
        "DEFINE A AS x = 0.1, B AS x + A.x = 0.4",
        expected=rows(("f", "l"), (D("0.10"), D("0.30"))),
        note="as doubles, 0.1 + 0.3 is 0.4 but 0.1 + 0.2 is not 0.3; as decimals both are exact",
    ),
    Case(
        name="dec_define_against_prev_and_running_sum",
        data={"id": [1, 2, 3, 4, 5], "x": [D("1.00"), D("1.10"), D("1.05"), D("1.20"), D("9.99")]},
        types=DEC,
        query="ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, SUM(x) AS total PATTERN (A B+) "
        "DEFINE B AS x >= PREV(x) - 0.05 AND SUM(x) <= 4.35",
        expected=rows(("s", "e", "total"), (1, 4, D("4.35"))),
    ),
    Case(
        name="dec_meets_double_as_double",
        data={"id": [1], "x": [D("1.50")], "y": [0.25]},
        types={**DEC, "y": "double"},
        query="ORDER BY id MEASURES A.x + A.y AS s, sqrt(A.x * 6) AS r, greatest(A.x, A.y) AS g "
        "PATTERN (A) DEFINE A AS true",
        expected=rows(("s", "r", "g"), (1.75, 3.0, 1.5)),
    ),
    Case(
        name="dec_precision_out_of_range",
        data={"id": [1], "x": [D("1.00")]},
        types=DEC,
        query="ORDER BY id MEASURES CAST(A.x AS DECIMAL(39, 2)) AS c PATTERN (A) DEFINE A AS true",
        error="NOT_SUPPORTED",
    ),
    Case(
        name="dec_scale_above_precision",
        data={"id": [1], "x": [D("1.00")]},
        types=DEC,
        query="ORDER BY id MEASURES CAST(A.x AS DECIMAL(3, 4)) AS c PATTERN (A) DEFINE A AS true",
        error="NOT_SUPPORTED",
    ),
    Case(
        name="dec_segment_query_refuses_decimal_cast",
        data={"id": [1, 2], "v": [1, 2]},
        query="ORDER BY id MEASURES CAST(first(v) AS DECIMAL(20, 0)) * 2 AS d PATTERN (S) "
        "DEFINE SEGMENT S AS window(2, 2)",
        error="NOT_SUPPORTED",
    ),
    Case(
        name="dec_segment_query_refuses_decimal",
        data={"id": [1], "x": [D("1.00")]},
        types=DEC,
        query="ORDER BY id MEASURES sum(x) AS s PATTERN (S) DEFINE SEGMENT S AS window(1, 2)",
        error="NOT_SUPPORTED",
    ),
]
