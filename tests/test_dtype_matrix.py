"""The dtype matrix: every column dtype users hand over from pandas or Arrow, crossed with
every entry point (standard and segment MATCH_RECOGNIZE, SNOOP, SASE, the task engine).

For each dtype case hypothesis draws a short input (0 to 8 rows, NULLs included) and builds
two tables holding the same SQL values: one with the column under test, one canonical plain
Arrow table (int64 / float64 / string / bool / date32 / timestamp[us, UTC]). The same query
must give the same rows on both (compared as Python values: NULL, NA, NaN and NaT as None,
timestamps as instants), and on the canonical table the same rows as the independent
references (tests/oracle.py for standard queries, tests/segment_reference.py for segment
queries, the SNOOP reference strategy for SNOOP). An exception that escapes must be a
SparkCepError and never an InternalError.

One dtype is an error by definition: a UInt64 value at or above 2^63 (a DataError naming the
column and the row, when the query reads the column); it passes through untouched when the
query does not read it. Decimals are DECIMAL(p, s): exact, compared against a float copy.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep import DataError, QueryError, SparkCepError
from sparkcep.analysis.analyzer import analyze
from sparkcep.data.ingest import schema_of
from sparkcep.errors import InternalError
from sparkcep.language.parser import parse
from tests.oracle import oracle
from tests.segment_reference import segment_reference

BERLIN = ZoneInfo("Europe/Berlin")
UTC = dt.UTC
EXAMPLES = 25
FEW = 4  # the task engine's worker processes: a few examples per dtype
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


# ====================================================================== registered functions
# Each returns a numpy scalar (the value boundary turns it into a SQL value) computed from a
# property both inputs of a case agree on: a zoned instant and the same instant in UTC have
# the same minute and epoch seconds (Berlin's offsets are whole hours).
def dm_flag(x: Any) -> np.bool_:
    if isinstance(x, (bool, np.bool_)):
        return np.bool_(not x)
    if isinstance(x, (int, float, decimal.Decimal, np.integer, np.floating)):
        return np.bool_(x > 1)
    if isinstance(x, str):
        return np.bool_(x > "b")
    if isinstance(x, dt.datetime):
        return np.bool_(x.minute == 0)
    if isinstance(x, dt.date):
        return np.bool_(x.day % 2 == 0)
    raise TypeError(f"dm_flag: unexpected {type(x).__name__}")


def dm_rank(x: Any) -> np.int64:
    if isinstance(x, (bool, np.bool_, int, np.integer)):
        return np.int64(x)
    if isinstance(x, (float, decimal.Decimal, np.floating)):
        return np.int64(math.floor(x))
    if isinstance(x, str):
        return np.int64(1000 * len(x) + (ord(x[0]) if x else 0))
    if isinstance(x, dt.datetime):
        return np.int64(x.timestamp())
    if isinstance(x, dt.date):
        return np.int64(x.toordinal())
    raise TypeError(f"dm_rank: unexpected {type(x).__name__}")


def dm_real(x: Any) -> np.float32:
    if isinstance(x, (bool, np.bool_, int, np.integer, float, decimal.Decimal, np.floating)):
        return np.float32(x)
    if isinstance(x, str):
        return np.float32(len(x))
    if isinstance(x, dt.datetime):
        return np.float32(x.minute)
    if isinstance(x, dt.date):
        return np.float32(x.day)
    raise TypeError(f"dm_real: unexpected {type(x).__name__}")


FUNCTIONS = [("dm_flag", dm_flag, "boolean"), ("dm_rank", dm_rank, "bigint"), ("dm_real", dm_real, "double")]


@pytest.fixture(scope="module", autouse=True)
def numpy_functions():
    for name, fn, returns in FUNCTIONS:
        sparkcep.register_function(name, fn, returns=returns)
    yield
    for name, _, _ in FUNCTIONS:
        sparkcep.unregister_function(name)


# ====================================================================== literals
def sql_literal(v: Any) -> str:
    """A non-NULL Python value as a SQL literal; an aware timestamp as wall time in UTC."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.astimezone(UTC):%Y-%m-%d %H:%M:%S}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise TypeError(v)


def berlin_literal(v: dt.datetime) -> str:
    """The same instant next to a Europe/Berlin column: a TIMESTAMP literal is read as wall
    time in the column's zone."""
    return f"TIMESTAMP '{v.astimezone(BERLIN):%Y-%m-%d %H:%M:%S}'"


# ====================================================================== the dtype cases
@dataclass(frozen=True)
class DtypeCase:
    """One input dtype: ``build`` turns Python values (None = NULL) into the column under
    test (a pandas Series: the input is a DataFrame, also run as pa.Table.from_pandas; an
    Arrow array: the input is an Arrow table); ``canonical`` holds the same SQL values."""

    name: str
    build: Callable[[list], pd.Series | pa.Array]
    canonical: pa.DataType
    values: st.SearchStrategy
    family: str  # which query templates apply: int, float, string, bool, date, timestamp
    sample: Any  # a value for fixed examples: one row of it, and the literal
    literals: st.SearchStrategy | None = None  # non-NULL values to write as literals
    literal: Callable[[Any], str] = sql_literal  # a literal next to the column under test
    canonical_literal: Callable[[Any], str] = sql_literal
    untyped: bool = False  # Arrow's null type: no type of its own

    def __repr__(self) -> str:
        return self.name


def _nullable(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(values, st.none())


def _dst_instants() -> list[dt.datetime]:
    """Every 20 minutes over 00:00-03:00 UTC on both 2024 DST changes in Berlin
    (2024-03-31 01:00 UTC: 02:00 CET becomes 03:00 CEST; 2024-10-27 01:00 UTC: 03:00 CEST
    becomes 02:00 CET)."""
    days = [dt.datetime(2024, 3, 31, tzinfo=UTC), dt.datetime(2024, 10, 27, tzinfo=UTC)]
    return [d + dt.timedelta(minutes=20 * k) for d in days for k in range(10)]


INSTANTS = _dst_instants()
# Wall times 02:00-02:59 on 2024-10-27 happen twice in Berlin: not written as literals.
UNAMBIGUOUS = [t for t in INSTANTS if not (t.month == 10 and t.hour < 2)]

INTS = st.sampled_from([-3, -1, 0, 1, 2, 3, 2**53 + 1, -(2**62)])
UINTS = st.sampled_from([0, 1, 2, 3, 4, 2**53 + 1, 2**63 - 1])
FLOATS = st.sampled_from([-1.5, 0.0, 0.5, 1.0, 2.25, 3.0, 2.0**24])  # exact in float32
STRINGS = st.sampled_from(["a", "b", "c", "ab", "", "é"])
CATEGORIES = ["é", "c", "b", "", "ab", "a"]  # not in sort order, on purpose
DATES = st.sampled_from([dt.date(2024, 2, 27) + dt.timedelta(days=k) for k in range(4)])


def _berlin_series(values: list) -> pd.Series:
    stamps = pd.to_datetime([None if v is None else v.astimezone(UTC).replace(tzinfo=None) for v in values])
    return pd.Series(stamps, dtype="datetime64[ns]").dt.tz_localize("UTC").dt.tz_convert("Europe/Berlin")


def _masked(values: list, dtype: type) -> pd.Series:
    """A pandas Int64 / UInt64 column built from numpy, exactly (pd.array(list, dtype="UInt64")
    goes through float64 when a value is 2^63 or more, and rounds 2^53 + 1)."""
    data = np.array([0 if v is None else v for v in values], dtype=dtype)
    return pd.Series(pd.arrays.IntegerArray(data, np.array([v is None for v in values], dtype=bool)))


def _float32_series(values: list) -> pd.Series:
    return pd.Series(np.array([np.nan if v is None else v for v in values], dtype=np.float32))


CASES = [
    DtypeCase("all-None object ~ bigint", lambda vs: pd.Series(vs, dtype=object), pa.int64(), st.none(), "int", 1,
              literals=st.integers(-3, 3), untyped=True),
    DtypeCase("all-None object ~ varchar", lambda vs: pd.Series(vs, dtype=object), pa.string(), st.none(), "string",
              "a", literals=STRINGS, untyped=True),
    DtypeCase("pandas Int64", lambda vs: _masked(vs, np.int64), pa.int64(), _nullable(INTS), "int",
              2**53 + 1),
    DtypeCase("pandas UInt64 below 2^63", lambda vs: _masked(vs, np.uint64), pa.int64(),
              _nullable(UINTS), "int", 2**63 - 1),
    DtypeCase("pandas boolean", lambda vs: pd.Series(pd.array(vs, dtype="boolean")), pa.bool_(),
              _nullable(st.booleans()), "bool", True),
    DtypeCase("pandas string[pyarrow]", lambda vs: pd.Series(pd.array(vs, dtype="string[pyarrow]")), pa.string(),
              _nullable(STRINGS), "string", "é"),
    DtypeCase("pandas categorical", lambda vs: pd.Series(pd.Categorical(vs, categories=CATEGORIES)), pa.string(),
              _nullable(STRINGS), "string", ""),
    DtypeCase("Arrow dictionary strings", lambda vs: pa.array(vs, pa.string()).dictionary_encode(), pa.string(),
              _nullable(STRINGS), "string", "ab"),
    DtypeCase("numpy float32", _float32_series, pa.float64(), _nullable(FLOATS), "float", 2.25),
    DtypeCase("Arrow float32 with NaN", lambda vs: pa.array(vs, pa.float32()), pa.float64(),
              _nullable(st.one_of(FLOATS, st.just(math.nan))), "float", -1.5, literals=FLOATS),
    DtypeCase("Arrow date32", lambda vs: pa.array(vs, pa.date32()), pa.date32(), _nullable(DATES), "date",
              dt.date(2024, 2, 29)),
    DtypeCase("pandas Europe/Berlin across DST", _berlin_series, pa.timestamp("us", tz="UTC"),
              _nullable(st.sampled_from(INSTANTS)), "timestamp", INSTANTS[3], literals=st.sampled_from(UNAMBIGUOUS),
              literal=berlin_literal),
    DtypeCase("Arrow Europe/Berlin across DST", lambda vs: pa.array(vs, pa.timestamp("us", tz="Europe/Berlin")),
              pa.timestamp("us", tz="UTC"), _nullable(st.sampled_from(INSTANTS)), "timestamp", INSTANTS[-1],
              literals=st.sampled_from(UNAMBIGUOUS), literal=berlin_literal),
]


# ====================================================================== query templates
# ``x`` is the column under test, ``id`` a permutation of the row numbers, ``{lit}`` a literal
# of x's type. Every template reads x.
STANDARD = [
    # DEFINE against PREV and a literal; MIN/MAX/FIRST/LAST/COUNT in MEASURES
    "ORDER BY id MEASURES FIRST(x) AS f, LAST(x) AS l, MIN(x) AS mn, MAX(x) AS mx, COUNT(x) AS c, "
    "COUNT(*) AS n PATTERN (A B+) DEFINE A AS x IS NULL OR x <= {lit}, B AS x > PREV(x)",
    # CASE and IS NULL in MEASURES, the literal on either side
    "ORDER BY id MEASURES A.id AS a, CASE WHEN A.x IS NULL THEN 'null' WHEN A.x = {lit} THEN 'eq' "
    "WHEN {lit} > A.x THEN 'lt' ELSE 'gt' END AS how, PREV(A.x) AS p PATTERN (A)",
    # CASE in DEFINE, a registered function returning np.bool_
    "ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, COUNT(B.x) AS cb, LAST(B.x) AS lb PATTERN (A B* C?) "
    "DEFINE A AS CASE WHEN x IS NULL THEN FALSE ELSE x >= {lit} END, B AS dm_flag(x), C AS x IS NULL",
    # ORDER BY the column (NULLs last, ties by id); np.int64 and np.float32 results in MEASURES
    "ORDER BY x, id MEASURES A.id AS a, A.x AS ax, dm_rank(A.x) AS r, dm_real(A.x) AS q PATTERN (A)",
    "ORDER BY x DESC NULLS FIRST, id MEASURES FIRST(id) AS s, COUNT(*) AS n, MAX(x) AS mx, MIN(x) AS mn "
    "PATTERN (A B*) DEFINE B AS x = PREV(x)",
    # PARTITION BY the column: the NULLs form one partition
    "PARTITION BY x ORDER BY id MEASURES COUNT(*) AS n, FIRST(id) AS s, LAST(x) AS l PATTERN (A+)",
    # ALL ROWS PER MATCH WITH UNMATCHED ROWS: running and final aggregates, x passed through
    "ORDER BY id MEASURES RUNNING MIN(x) AS rmn, FINAL MAX(x) AS fmx, RUNNING COUNT(x) AS rc, "
    "CLASSIFIER() AS cls ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B+) "
    "DEFINE A AS x IS NOT NULL, B AS x <> PREV(x) OR dm_rank(x) >= dm_rank(A.x)",
    # numpy numbers compared in DEFINE, every match
    "ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, FIRST(x) AS f ALL MATCHES PATTERN (A B+) "
    "DEFINE A AS dm_real(x) >= dm_real({lit}), B AS dm_rank(x) <= dm_rank(PREV(x))",
    # BETWEEN, IN and a reluctant quantifier, skip to the next row
    "ORDER BY id MEASURES FIRST(id) AS s, COUNT(*) AS n, LAST(x) AS l AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A+? B) DEFINE A AS x BETWEEN PREV(x) AND {lit} OR x IS NULL, B AS x IN ({lit}, FIRST(x))",
]
STANDARD_BY_FAMILY = {
    "int": ["ORDER BY id MEASURES FIRST(id) AS s, SUM(x) AS sm, AVG(x) AS av, LAST(x) - FIRST(x) AS d "
            "PATTERN (A B*) DEFINE B AS x - PREV(x) BETWEEN -1 AND 1",
            "ORDER BY x, id MEASURES FIRST(id) AS s, COUNT(*) AS n PATTERN (A B*) WITHIN 2 DEFINE B AS true"],
    "float": ["ORDER BY id MEASURES FIRST(id) AS s, SUM(x) AS sm, AVG(x) AS av, LAST(x) - FIRST(x) AS d "
              "PATTERN (A B*) DEFINE B AS x - PREV(x) BETWEEN -1 AND 1",
              "ORDER BY x, id MEASURES FIRST(id) AS s, COUNT(*) AS n PATTERN (A B*) WITHIN 1.5 DEFINE B AS true"],
    "string": ["ORDER BY id MEASURES FIRST(id) AS s, LAST(x) || FIRST(x) AS cat, length(LAST(x)) AS len "
               "PATTERN (A B*) DEFINE A AS x LIKE 'a%', B AS upper(x) <> upper(PREV(x))"],
    "bool": ["ORDER BY id MEASURES FIRST(id) AS s, bool_and(x) AS ba, bool_or(x) AS bo, count_if(x) AS ci "
             "PATTERN (A B*) DEFINE A AS x, B AS NOT x OR x IS NULL"],
    "date": ["ORDER BY x, id MEASURES FIRST(id) AS s, day(LAST(x)) AS dd, month(FIRST(x)) AS mm "
             "PATTERN (A B*) DEFINE B AS x > PREV(x) AND year(x) = 2024"],
    "timestamp": ["ORDER BY x, id MEASURES FIRST(id) AS s, LAST(x) - FIRST(x) AS span, "
                  "LAST(x) + INTERVAL '20' MINUTE AS later, minute(LAST(x)) AS mi PATTERN (A B*) "
                  "WITHIN INTERVAL '40' MINUTE DEFINE B AS x - PREV(x) <= INTERVAL '20' MINUTE",
                  "ORDER BY id MEASURES A.id AS a, B.id AS b, B.x - A.x AS gap PATTERN (A B) "
                  "DEFINE B AS B.x > A.x AND B.x < A.x + INTERVAL '1' HOUR"],
}

# (template, whether tests/segment_reference.py can evaluate it: it calls no user functions)
SEGMENT = [
    ("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, first(x) AS f, last(x) AS l, min(x) AS mn, "
     "max(x) AS mx, count(x) AS c PATTERN (S) DEFINE SEGMENT S AS window(1, 3) AND "
     "(last(x) >= first(x) OR first(x) IS NULL)", True),
    ("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, count(x) AS c, max(x) AS mx PATTERN (A S) "
     "DEFINE A AS x >= {lit} OR x IS NULL, SEGMENT S AS window(2, 4) AND max(x) <= {lit}", True),
    ("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, min(x) AS mn PATTERN (A S B) "
     "DEFINE A AS x > PREV(x), B AS x IS NULL, SEGMENT S AS window(1, 3) AND count(x) = count(*)", True),
    ("PARTITION BY x ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, count(*) AS n PATTERN (S) "
     "DEFINE SEGMENT S AS window(2, NULL)", True),
    ("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, last(x) AS l PATTERN (S & ~(T)) "
     "DEFINE SEGMENT S AS window(2, 3), SEGMENT T AS min(x) = max(x)", True),
    ("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, first(x) AS f PATTERN (A S) "
     "DEFINE A AS dm_flag(x), SEGMENT S AS window(1, 3) AND dm_rank(first(x)) <= dm_rank(last(x))", False),
]
SEGMENT_BY_FAMILY = {
    "int": [("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, sum(x) AS sm, avg(x) AS av PATTERN (S) "
             "DEFINE SEGMENT S AS window(1, 3) AND sum(x) >= {lit}", True)],
    "float": [("ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS e, sum(x) AS sm, avg(x) AS av PATTERN (S) "
               "DEFINE SEGMENT S AS window(1, 3) AND sum(x) >= {lit}", True)],
}

# (template, options besides order_by="id")
SNOOP = [
    ("SELECT * FROM SEQ(A; B) WHERE B.x > A.x RETURN A.id AS a, B.id AS b, A.x AS ax", {}),
    ("SELECT * FROM SEQ(A; B; C) WHERE A.x IS NULL AND dm_flag(B.x) AND C.x >= {lit} "
     "RETURN A.id AS a, B.id AS b, C.id AS c CONSUMING A, B, C", {}),
    ("SELECT * FROM SEQ(A; NOT(N); B) WHERE A.x = B.x AND N.x <> A.x RETURN A.id AS a, B.id AS b", {}),
    ("SELECT * FROM SEQ(A; B) WHERE dm_rank(A.x) <= dm_rank(B.x) PICK first A within 3 events from B "
     "RETURN A.id AS a, B.id AS b, CASE WHEN B.x = {lit} THEN 1 ELSE 0 END AS hit CONSUMING A", {}),
    ("SELECT * FROM OR(A, B) WHERE A.x = {lit} AND B.x IS NULL RETURN A.id AS a, B.id AS b", {}),
    ("SELECT * FROM SEQ(A; B) WHERE A.x <> {lit} RETURN A.id AS a, B.id AS b, B.x AS bx", {"partition_by": "x"}),
]

# SASE+ over events of one type E, ordered by id, no type column. SASE's predicate language
# has comparisons, numbers, strings and booleans (no IS NULL, CASE, dates, timestamps or
# registered functions): the templates with a literal apply to the families it can write.
SASE = [
    "PATTERN SEQ(E a, E b) WHERE skip_till_next_match(a, b) { b.x > a.x } WITHIN 4 EVENTS "
    "RETURN a.id AS ai, b.id AS bi, a.x AS ax",
    "PATTERN SEQ(E+ a[], E b) WHERE skip_till_any_match(a[], b) { a[i].x >= a[i-1].x and b.x <= a[1].x } "
    "WITHIN 4 EVENTS RETURN a[1].id AS s, b.id AS e, count(a[]) AS n, max(a[].x) AS mx, min(a[].x) AS mn",
    "PATTERN SEQ(E a, !(E n), E c) WHERE skip_till_next_match(a, n, c) { [x] } WITHIN 5 EVENTS "
    "RETURN a.id AS ai, c.id AS ci",
    "PATTERN SEQ(E a, !(E n), E c) WHERE skip_till_next_match(a, n, c) { n.x > a.x and c.x = a.x } "
    "WITHIN 5 EVENTS RETURN a.id AS ai, c.id AS ci, c.x AS cx",
]
SASE_WITH_LITERALS = [
    "PATTERN SEQ(E a, E b) WHERE a.x = {lit} or b.x <> a.x RETURN a.id AS ai, b.id AS bi, b.x AS bx",
    "PATTERN SEQ(E+ a[], E b) WHERE skip_till_next_match(a[], b) { a[i].x > a[i-1].x and b.x <= {lit} } "
    "WITHIN 4 EVENTS RETURN a[1].id AS s, b.id AS e, a[a.len].x AS top",
]
SASE_LITERAL_FAMILIES = {"int", "float", "string", "bool"}

TASKS = [
    # ALL MATCHES + SKIP TILL ANY MATCH over a sequence: ⟨transition, partial match, event⟩ tasks
    "ORDER BY id MEASURES A.id AS a, B.id AS b ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH "
    "PATTERN (A B) DEFINE A AS A.x IS NOT NULL, B AS B.x >= A.x OR dm_flag(B.x)",
    # any other query: its expensive calls made ahead on the workers (speculation)
    "PARTITION BY x ORDER BY id MEASURES COUNT(*) AS n, FIRST(id) AS s PATTERN (A B*) DEFINE B AS dm_flag(x)",
    STANDARD[0],
    STANDARD[6],
]


# ====================================================================== examples
@dataclass
class Example:
    case: DtypeCase
    template: str
    ids: list[int]
    values: list
    lit: Any
    options: dict = field(default_factory=dict)

    @property
    def query(self) -> str:  # for the column under test
        return self.template.replace("{lit}", self.case.literal(self.lit))

    @property
    def canonical_query(self) -> str:
        return self.template.replace("{lit}", self.case.canonical_literal(self.lit))

    def canonical(self) -> pa.Table:
        return pa.table({"id": pa.array(self.ids, pa.int64()), "x": pa.array(self.values, self.case.canonical)})

    def inputs(self) -> list[tuple[str, pd.DataFrame | pa.Table]]:
        """The column under test as given and, from pandas, as Arrow converts the DataFrame."""
        col = self.case.build(self.values)
        held = col.tolist() if isinstance(col, pd.Series) else col.to_pylist()
        assert same_value([normalize(v) for v in held], [normalize(v) for v in self.values]), (
            f"the builder of {self.case.name}: {held}")
        if isinstance(col, pd.Series):
            df = pd.DataFrame({"id": np.array(self.ids, dtype=np.int64), "x": col.reset_index(drop=True)})
            return [("pandas", df), ("pandas as Arrow", pa.Table.from_pandas(df, preserve_index=False))]
        return [("arrow", pa.table({"id": pa.array(self.ids, pa.int64()), "x": col}))]

    def describe(self) -> str:
        return f"\ncase: {self.case.name}\nquery: {self.query}\nvalues: {self.values}\nids: {self.ids}"


@st.composite
def examples(draw, case: DtypeCase, templates: list) -> Example:
    n = draw(st.integers(0, 8))
    values = draw(st.lists(case.values, min_size=n, max_size=n))
    ids = draw(st.permutations(list(range(n))))
    literals = case.literals if case.literals is not None else case.values.filter(lambda v: v is not None)
    template = draw(st.sampled_from(templates))
    options = {}
    if isinstance(template, tuple):
        template, options = template
    return Example(case, template, list(ids), values, draw(literals), options)


# ====================================================================== outcomes
@dataclass(frozen=True)
class Failed:
    """A query that raised a SparkCepError: its kind, a QueryError's code, and where a
    DataError points."""

    kind: str
    code: str | None = None
    column: str | None = None
    row: int | None = None


def normalize(v: Any) -> Any:
    """A result value as a plain Python value: NULL, NA, NaN and NaT as None, numpy scalars
    as Python ones, timestamps with a zone as instants (in UTC)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        v = v.to_pydatetime()
    elif isinstance(v, pd.Timedelta):
        v = v.to_pytimedelta()
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    if isinstance(v, (list, tuple, np.ndarray)):
        return [normalize(x) for x in v]
    return v


def rows_of(result: pa.Table | pd.DataFrame | list[dict]) -> list[dict]:
    if isinstance(result, pa.Table):
        records = result.to_pylist()
    elif isinstance(result, pd.DataFrame):
        records = result.to_dict("records")
    else:
        records = result
    return [{k: normalize(v) for k, v in r.items()} for r in records]


def outcome(run: Callable[[], Any]) -> list[dict] | Failed:
    """The rows ``run`` returns, or how it failed; an exception that is not a SparkCepError,
    or an InternalError, fails the test."""
    try:
        result = run()
    except InternalError as e:
        raise AssertionError(f"InternalError (a bug): {e}") from e
    except QueryError as e:
        return Failed("QueryError", e.code)
    except DataError as e:
        return Failed("DataError", column=e.column, row=e.row)
    except SparkCepError as e:
        return Failed(type(e).__name__)
    except Exception as e:  # noqa: BLE001 - whatever escapes is a bug
        raise AssertionError(f"{type(e).__name__} escaped (not a SparkCepError): {e}") from e
    return rows_of(result)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b  # an int and a float compare exactly


def same(got: list[dict] | Failed, want: list[dict] | Failed) -> bool:
    if isinstance(got, Failed) or isinstance(want, Failed):
        return got == want
    return len(got) == len(want) and all(
        list(g) == list(w) and all(same_value(g[k], w[k]) for k in w) for g, w in zip(got, want, strict=True))


def assert_same(got, want, what: str, ex: Example) -> None:
    assert same(got, want), f"{what}{ex.describe()}\ngot:  {got}\nwant: {want}"


def assert_accepted(want, ex: Example) -> None:
    """The templates are meant to be valid for the family: a refusal is a broken template
    (or a regression), not a pass."""
    assert not (isinstance(want, Failed) and want.kind == "QueryError"), f"query refused: {want}{ex.describe()}"


def oracle_outcome(text: str, table: pa.Table) -> list[dict] | Failed:
    q = analyze(parse(text), schema_of(table))
    try:
        return rows_of(oracle(q, table))
    except Exception:  # noqa: BLE001 - any failure of the oracle stands for a DataError
        return Failed("DataError")


def segment_reference_outcome(text: str, table: pa.Table) -> list[dict] | Failed:
    """tests/segment_reference.py's rows; it computes with Python's unbounded integers, so a
    BIGINT out of range stands for the engine's overflow error."""
    try:
        rows = rows_of(segment_reference(text, table))
    except (ZeroDivisionError, OverflowError):
        return Failed("DataError")
    if any(isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63
           for r in rows for v in r.values()):
        return Failed("DataError")
    return rows


def _segment_reference_applies(case: DtypeCase, template: str) -> bool:
    """The segment reference calls no registered functions, and compares a TIMESTAMP literal
    with zoned values by Python's rules (it has no rule for wall time in a zone)."""
    calls_functions = not dict(_segment(case))[template]
    return not calls_functions and not (case.family == "timestamp" and "{lit}" in template)


def agrees_with_reference(got, want) -> bool:
    """A reference knows that a query fails, not the engine's column and row."""
    if isinstance(got, Failed) and isinstance(want, Failed):
        return got.kind == want.kind
    return same(got, want)


# ====================================================================== the matrix
def _standard(case: DtypeCase) -> list:
    templates = STANDARD + STANDARD_BY_FAMILY.get(case.family, [])
    # WITHIN needs a numeric or timestamp first ORDER BY column; the analyzer refuses the
    # null type there (TYPE_MISMATCH, by design: it cannot tell a number from a timestamp).
    return [t for t in templates if not (case.untyped and "WITHIN" in t)]


def _segment(case: DtypeCase) -> list:
    return SEGMENT + SEGMENT_BY_FAMILY.get(case.family, [])


def _sase(case: DtypeCase) -> list:
    return SASE + (SASE_WITH_LITERALS if case.family in SASE_LITERAL_FAMILIES else [])


def check_standard(ex: Example) -> None:
    canonical = ex.canonical()
    want = outcome(lambda: sparkcep.match_recognize(canonical, ex.canonical_query))
    assert_accepted(want, ex)
    reference = oracle_outcome(ex.canonical_query, canonical)
    assert agrees_with_reference(want, reference), f"engine vs oracle{ex.describe()}\ngot:  {want}\nwant: {reference}"
    for kind, table in ex.inputs():
        got = outcome(lambda t=table: sparkcep.match_recognize(t, ex.query))
        assert_same(got, want, f"match_recognize, {kind} input", ex)


def check_segment(ex: Example) -> None:
    canonical = ex.canonical()
    want = outcome(lambda: sparkcep.match_recognize(canonical, ex.canonical_query))
    assert_accepted(want, ex)
    if _segment_reference_applies(ex.case, ex.template):
        reference = segment_reference_outcome(ex.canonical_query, canonical)
        assert agrees_with_reference(want, reference), (
            f"engine vs segment reference{ex.describe()}\ngot:  {want}\nwant: {reference}")
    for kind, table in ex.inputs():
        got = outcome(lambda t=table: sparkcep.match_recognize(t, ex.query))
        assert_same(got, want, f"segment query, {kind} input", ex)


def check_snoop(ex: Example) -> None:
    canonical = ex.canonical()
    opts = {"order_by": "id", **ex.options}
    want = outcome(lambda: sparkcep.snoop(canonical, ex.canonical_query, strategy="sequential", **opts))
    assert_accepted(want, ex)
    reference = outcome(lambda: sparkcep.snoop(canonical, ex.canonical_query, strategy="reference", **opts))
    assert agrees_with_reference(want, reference), f"sequential vs reference{ex.describe()}\ngot:  {want}\nwant: {reference}"
    for kind, table in ex.inputs():
        for strategy in ("sequential", "reference"):
            got = outcome(lambda t=table, s=strategy: sparkcep.snoop(t, ex.query, strategy=s, **opts))
            assert_same(got, want, f"snoop strategy={strategy}, {kind} input", ex)


def check_sase(ex: Example) -> None:
    canonical = ex.canonical()
    want = outcome(lambda: sparkcep.sase(canonical, ex.canonical_query, order_by="id", type_column=None))
    assert_accepted(want, ex)
    for kind, table in ex.inputs():
        got = outcome(lambda t=table: sparkcep.sase(t, ex.query, order_by="id", type_column=None))
        assert_same(got, want, f"sase, {kind} input", ex)


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_standard_queries(case, data):
    check_standard(data.draw(examples(case, _standard(case))))


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_segment_queries(case, data):
    check_segment(data.draw(examples(case, [t for t, _ in _segment(case)])))


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_snoop(case, data):
    check_snoop(data.draw(examples(case, SNOOP)))


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_sase(case, data):
    check_sase(data.draw(examples(case, _sase(case))))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_every_template_on_empty_and_one_row_input(case):
    """Every template of every entry point, not left to chance: no rows, and one row (NULLs
    in single rows are left to hypothesis)."""
    inputs = [[], [None] if case.untyped else [case.sample]]
    checks = [(check_standard, _standard(case)), (check_segment, [t for t, _ in _segment(case)]),
              (check_snoop, SNOOP), (check_sase, _sase(case))]
    for check, templates in checks:
        for template in templates:
            template, options = template if isinstance(template, tuple) else (template, {})
            for values in inputs:
                check(Example(case, template, list(range(len(values))), values, case.sample, options))


@pytest.mark.parametrize("case", CASES, ids=repr)
@settings(max_examples=FEW, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_task_engine(case, data):
    """match_recognize(strategy="tasks", workers=1) and snoop(strategy="tasks", workers=1)
    against the default engine on the canonical table."""
    ex = data.draw(examples(case, TASKS))
    canonical = ex.canonical()
    want = outcome(lambda: sparkcep.match_recognize(canonical, ex.canonical_query))
    assert_accepted(want, ex)
    for kind, table in ex.inputs():
        got = outcome(lambda t=table: sparkcep.match_recognize(t, ex.query, strategy="tasks", workers=1))
        assert_same(got, want, f"match_recognize strategy=tasks, {kind} input", ex)
    snoop = data.draw(examples(case, SNOOP))
    opts = {"order_by": "id", **snoop.options}
    canonical = snoop.canonical()
    want = outcome(lambda: sparkcep.snoop(canonical, snoop.canonical_query, strategy="sequential", **opts))
    for kind, table in snoop.inputs():
        got = outcome(lambda t=table: sparkcep.snoop(t, snoop.query, strategy="tasks", workers=1, **opts))
        assert_same(got, want, f"snoop strategy=tasks, {kind} input", snoop)


# ====================================================================== zoned fields across DST
@SETTINGS
@given(st.lists(_nullable(st.sampled_from(INSTANTS)), max_size=8))
@example(INSTANTS)
def test_zoned_fields_and_truncation_are_in_the_zone(instants):
    """Fields and date_trunc of a Berlin column are Berlin wall time (per Python's zoneinfo),
    on both sides of each DST change; the output keeps the instant."""
    df = pd.DataFrame({"id": np.arange(len(instants), dtype=np.int64), "x": _berlin_series(instants)})
    q = ("ORDER BY id MEASURES A.x AS t, hour(A.x) AS h, minute(A.x) AS mi, day(A.x) AS d, "
         "date_trunc('hour', A.x) AS th, date_trunc('day', A.x) AS td PATTERN (A)")
    for kind, data in [("pandas", df), ("pandas as Arrow", pa.Table.from_pandas(df, preserve_index=False))]:
        got = outcome(lambda d=data: sparkcep.match_recognize(d, q))
        want = []
        for t in instants:
            if t is None:
                want.append({"t": None, "h": None, "mi": None, "d": None, "th": None, "td": None})
                continue
            wall = t.astimezone(BERLIN)
            hour = wall.replace(minute=0, second=0)  # keeps fold: the repeated hour stays apart
            day = dt.datetime(wall.year, wall.month, wall.day, tzinfo=BERLIN)
            want.append({"t": t, "h": wall.hour, "mi": wall.minute, "d": wall.day,
                         "th": hour.astimezone(UTC), "td": day.astimezone(UTC)})
        assert not isinstance(got, Failed) and len(got) == len(want), f"{kind}: {got}"
        wrong = [(g, w) for g, w in zip(got, want, strict=True) if not same([g], [w])]
        assert not wrong, f"{kind}: {len(wrong)} of {len(want)} rows differ, e.g.\ngot:  {wrong[0][0]}\nwant: {wrong[0][1]}"


# ====================================================================== errors by definition
def _entry_points(table_or_df) -> list[tuple[str, Callable[[], Any]]]:
    """Every entry point running a query that reads x."""
    mr = sparkcep.match_recognize
    return [
        ("standard", lambda: mr(table_or_df, STANDARD[0].replace("{lit}", "1"))),
        ("standard, column only in ORDER BY", lambda: mr(table_or_df, "ORDER BY x, id MEASURES A.id AS a PATTERN (A)")),
        ("segment", lambda: mr(table_or_df, SEGMENT[0][0])),
        ("tasks", lambda: mr(table_or_df, TASKS[0], strategy="tasks", workers=1)),
        ("snoop sequential", lambda: sparkcep.snoop(table_or_df, SNOOP[0][0], order_by="id", strategy="sequential")),
        ("snoop reference", lambda: sparkcep.snoop(table_or_df, SNOOP[0][0], order_by="id", strategy="reference")),
        ("sase", lambda: sparkcep.sase(table_or_df, SASE[0], order_by="id", type_column=None)),
    ]


PASS_THROUGH = "ORDER BY id MEASURES A.id AS a ALL ROWS PER MATCH PATTERN (A)"


@st.composite
def uint64_beyond_bigint(draw):
    """UInt64 values with at least one at or above 2^63; the first such position."""
    n = draw(st.integers(1, 8))
    values = draw(st.lists(_nullable(UINTS), min_size=n, max_size=n))
    big = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    for i in big:
        values[i] = draw(st.sampled_from([2**63, 2**63 + 1, 2**64 - 1]))
    return values, min(big), draw(st.permutations(list(range(n))))


@pytest.mark.parametrize("arrow", [False, True], ids=["pandas", "pandas as Arrow"])
@SETTINGS
@given(uint64_beyond_bigint())
def test_uint64_beyond_bigint_names_column_and_row(arrow, drawn):
    values, first_big, ids = drawn
    df = pd.DataFrame({"id": np.array(ids, dtype=np.int64), "x": _masked(values, np.uint64)})
    assert df.x.tolist() == [pd.NA if v is None else v for v in values]
    data = pa.Table.from_pandas(df, preserve_index=False) if arrow else df
    for name, run in _entry_points(data):
        got = outcome(run)
        assert got == Failed("DataError", column="x", row=first_big), f"{name}: {values} ids={ids}: {got}"
    # A query that does not read x passes it through untouched, in ORDER BY order.
    got = outcome(lambda: sparkcep.match_recognize(data, PASS_THROUGH))
    assert not isinstance(got, Failed), got
    by_id = sorted(zip(ids, values, strict=True))
    assert [r["x"] for r in got] == [v for _, v in by_id]


DECIMALS = st.sampled_from([decimal.Decimal(s) for s in ("-1.25", "0", "0.5", "3.10")])


@st.composite
def decimals(draw, least: int):
    """0 to 8 decimals or NULLs, at least ``least`` of them not NULL (a pandas object column
    of Nones alone is no decimal column)."""
    n = draw(st.integers(least, 8))
    values = draw(st.lists(_nullable(DECIMALS), min_size=n, max_size=n))
    for i in draw(st.lists(st.integers(0, n - 1), min_size=least, max_size=least)) if n else []:
        values[i] = draw(DECIMALS)
    return values, draw(st.permutations(list(range(n))))


def _as_float(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, list):
        return [_as_float(x) for x in v]
    return v


# Decimal-only queries: exact SUM/AVG/DELTA, arithmetic at Trino's scales, CAST, literals
# spelled as decimals.
DECIMAL_QUERIES = [
    "ORDER BY id MEASURES FIRST(id) AS s, SUM(x) AS sm, AVG(x) AS av, LAST(x) - FIRST(x) AS d, "
    "delta(x) AS dl PATTERN (A B*) DEFINE B AS x - PREV(x) BETWEEN -1 AND 1",
    "ORDER BY id MEASURES A.id AS a, A.x * 3 AS m, A.x / 3 AS q, -A.x AS n, abs(A.x) AS ab, "
    "CAST(A.x AS DECIMAL(3, 1)) AS c, CAST(A.x AS VARCHAR) AS v, A.x = 0.5 AS h PATTERN (A)",
]


@pytest.mark.parametrize("source", ["arrow", "pandas objects"])
@SETTINGS
@given(data=st.data())
def test_a_decimal_column_reads_as_its_float_copy(source, data):
    """Decimal columns are DECIMAL(p, s) values: every entry point returns what it returns on
    a float64 copy of the same (exactly representable) values, and decimal measures stay
    Decimals at the column's scale."""
    values, ids = data.draw(decimals(0 if source == "arrow" else 1))
    table = pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(values, pa.decimal128(9, 2))})
    floats = pa.table({"id": pa.array(ids, pa.int64()),
                       "x": pa.array([None if v is None else float(v) for v in values], pa.float64())})
    data = table if source == "arrow" else pd.DataFrame({"id": np.array(ids, dtype=np.int64),
                                                         "x": pd.Series(values, dtype=object)})
    # pandas objects are read at the scale Arrow infers from them
    scale = 2 if source == "arrow" else pa.array(data["x"], from_pandas=True).type.scale
    for (name, run), (_, run_float) in zip(_entry_points(data), _entry_points(floats), strict=True):
        got, want = outcome(run), outcome(run_float)
        if name == "segment":  # segment aggregates are float64 series: decimals are refused
            assert got == Failed("QueryError", "NOT_SUPPORTED"), got
            continue
        if isinstance(want, Failed):
            assert got == want, f"{name}: {values}: {got} against {want}"
            continue
        assert not isinstance(got, Failed), f"{name}: {values}: {got}"
        assert [{k: _as_float(v) for k, v in r.items()} for r in got] == want, f"{name}: {values}"
        for r in got:
            for k, v in r.items():
                if isinstance(v, decimal.Decimal):
                    assert v.as_tuple().exponent == -scale, f"{name}: {k}={v!r} lost the column's scale"
    # Exact arithmetic against Python's decimal module row by row.
    rows = outcome(lambda: sparkcep.match_recognize(data, DECIMAL_QUERIES[1]))
    by_id = dict(zip(ids, values, strict=True))
    for r in rows:
        x = by_id[r["a"]]
        unit = decimal.Decimal(1).scaleb(-scale)
        x = x if x is None else x.quantize(unit)  # at the column's scale
        if x is None:
            assert r["m"] is None and r["q"] is None and r["h"] is None
            continue
        q = (x / 3).quantize(unit, rounding=decimal.ROUND_HALF_UP)
        assert (r["m"], r["q"], r["n"], r["ab"]) == (x * 3, q, -x, abs(x)), r
        assert r["c"] == x.quantize(decimal.Decimal("0.1"), rounding=decimal.ROUND_HALF_UP), r
        assert r["v"] == format(x, "f") and r["h"] == (x == decimal.Decimal("0.5")), r
    got = outcome(lambda: sparkcep.match_recognize(data, DECIMAL_QUERIES[0]))
    want = outcome(lambda: sparkcep.match_recognize(floats, DECIMAL_QUERIES[0]))
    assert len(got) == len(want), values
    for g, w in zip(got, want, strict=True):
        for k in g:  # AVG is rounded half up at the scale; the rest is exact
            close = g[k] == w[k] or abs(float(g[k]) - w[k]) <= 0.5 * 10.0**-scale + 1e-12
            assert close, f"{k}: {g} against {w} ({values})"
    got = outcome(lambda: sparkcep.match_recognize(data, PASS_THROUGH))
    assert not isinstance(got, Failed), got
    assert [r["x"] for r in got] == [v for _, v in sorted(zip(ids, values, strict=True))]
