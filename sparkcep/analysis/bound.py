"""The analyzer's output: types, bound (name-resolved, type-checked) expressions and the
frozen AnalyzedQuery. Navigation and aggregates are pulled out into value pointers and
aggregate specs (as Trino's LogicalIndexExtractor does), leaving plain expressions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkcep.language import ast
from sparkcep.types import NUMERIC, Type  # noqa: F401 - re-exported: the analyzer's types

# A label set: the variable ids a pointer or aggregate ranges over. None: every row of the
# match (the universal row pattern variable).
LabelSet = frozenset[int] | None


@dataclass(frozen=True)
class Pointer:
    """Which row a navigation refers to.

    Start from the rows of ``labels`` seen so far (RUNNING) or in the whole match (FINAL);
    take the ``offset``-th from the ``last`` (or first) of them; then move ``physical`` rows
    (PREV: negative, NEXT: positive) in the partition.
    """

    labels: LabelSet
    last: bool = True
    offset: int = 0
    physical: int = 0
    running: bool = True


@dataclass(frozen=True)
class AggregateSpec:
    """An aggregate over the rows of ``labels``: ``func`` one of COUNT, SUM, AVG, MIN, MAX,
    DELTA, COLLECT, COUNT_IF, BOOL_AND, BOOL_OR, MAX_BY, MIN_BY, ARBITRARY, STDDEV_SAMP,
    STDDEV_POP, VAR_SAMP, VAR_POP, and the array-valued MAX_N, MIN_N (max(x, n)), MAX_BY_N,
    MIN_BY_N (max_by(x, y, n)); ``arg`` is a row expression (None for COUNT(*)), ``key``
    the second argument of MAX_BY/MIN_BY. ``distinct``: each distinct non-NULL value once.
    ``previous`` (DEFINE only, the PREVIOUS extension): over the rows matched before the
    current one."""

    func: str
    labels: LabelSet
    arg: BExpr | None
    running: bool
    type: Type
    previous: bool = False
    key: BExpr | None = None
    distinct: bool = False
    n: int | None = None  # MAX_N, MIN_N, MAX_BY_N, MIN_BY_N: how many values (max(x, n), max_by(x, y, n))


class BExpr:
    type: Type


@dataclass(frozen=True)
class BLiteral(BExpr):
    value: Any
    type: Type


@dataclass(frozen=True)
class BColumn(BExpr):
    """A column of the row that the enclosing pointer (or aggregate) is at."""

    index: int
    name: str
    type: Type


@dataclass(frozen=True)
class BNav(BExpr):
    """Evaluate ``inner`` (a row expression) at the row ``pointer`` designates; NULL if none."""

    pointer: Pointer
    inner: BExpr
    type: Type


@dataclass(frozen=True)
class BAgg(BExpr):
    index: int  # into AnalyzedQuery.define_aggregates or measure_aggregates
    type: Type


@dataclass(frozen=True)
class BClassifier(BExpr):
    """The variable name of the row ``pointer`` designates (NULL if none)."""

    pointer: Pointer
    type: Type = Type.VARCHAR


@dataclass(frozen=True)
class BMatchNumber(BExpr):
    """MATCH_NUMBER(): in MEASURES the match's number; in DEFINE the number the match being
    tried would get."""

    type: Type = Type.BIGINT


@dataclass(frozen=True)
class BWindow(BExpr):
    """T-REX's window(): the segment's length in rows (``column`` None) or the span
    ``column[end] - column[start]`` in units of ``unit`` (seconds per unit for timestamps, 1
    for numbers) lies in [low, high] (None: unbounded)."""

    column: int | None
    low: float | None
    high: float | None
    unit: float = 1.0
    type: Type = Type.BOOLEAN


@dataclass(frozen=True)
class BRowLabel(BExpr):
    """CLASSIFIER() inside an aggregate's argument: the variable name of the row being
    aggregated."""

    type: Type = Type.VARCHAR


@dataclass(frozen=True)
class BCall(BExpr):
    name: str
    args: tuple[BExpr, ...]
    impl: Callable[..., Any] = field(compare=False)
    null_on_null: bool
    type: Type
    # Registered with cost="expensive": known to the plan itself, so a process without the
    # registry (a Spark task) routes its calls as the driver would.
    expensive: bool = False


@dataclass(frozen=True)
class BUnary(BExpr):
    op: str  # "-", "NOT"
    operand: BExpr
    type: Type


@dataclass(frozen=True)
class BBinary(BExpr):
    op: str
    left: BExpr
    right: BExpr
    type: Type


@dataclass(frozen=True)
class BBetween(BExpr):
    operand: BExpr
    low: BExpr
    high: BExpr
    negated: bool
    type: Type = Type.BOOLEAN


@dataclass(frozen=True)
class BIn(BExpr):
    operand: BExpr
    items: tuple[BExpr, ...]
    negated: bool
    type: Type = Type.BOOLEAN


@dataclass(frozen=True)
class BIsNull(BExpr):
    operand: BExpr
    negated: bool
    type: Type = Type.BOOLEAN


@dataclass(frozen=True)
class BCase(BExpr):
    operand: BExpr | None
    whens: tuple[tuple[BExpr, BExpr], ...]
    default: BExpr | None
    type: Type


@dataclass(frozen=True)
class SortKey:
    column: str
    index: int
    descending: bool
    nulls_first: bool


@dataclass(frozen=True)
class MeasureDef:
    name: str
    expr: BExpr
    type: Type
    span: ast.Span | None = None  # the expression in the query text


@dataclass(frozen=True)
class AnalyzedQuery:
    """Everything later stages need, checked. Variable ids index ``variables``."""

    text: str
    variables: tuple[str, ...]
    subsets: dict[str, frozenset[int]]
    pattern: ast.PatternNode  # as written; compile turns it into the pattern IR
    defines: dict[int, BExpr]  # variable id -> condition (absent: always true)
    define_aggregates: tuple[AggregateSpec, ...]
    measures: tuple[MeasureDef, ...]
    measure_aggregates: tuple[AggregateSpec, ...]
    partition_by: tuple[SortKey, ...]
    order_by: tuple[SortKey, ...]
    rows_per_match: str  # "ONE", "ALL"
    empty_matches: str  # "SHOW", "OMIT", "UNMATCHED"
    skip_mode: str  # "PAST_LAST", "NEXT_ROW", "FIRST", "LAST", "ALL_MATCHES"
    skip_target: frozenset[int] | None
    skip_target_name: str | None
    within: Any | None
    maxlength: int | None
    mode: str  # "sql" or "matchregex"
    columns: tuple[str, ...]  # input column names, in input order
    has_exclusions: bool
    # SASE event selection: "PARTITION" (SQL), "STRICT", "NEXT" or "ANY".
    event_selection: str = "PARTITION"
    negated: frozenset[int] = frozenset()  # variables under ! in PATTERN
    # T-REX: a segment query (SEGMENT variables, & or ~) and its segment variables.
    segment_query: bool = False
    segment_variables: frozenset[int] = frozenset()

    @property
    def gapped(self) -> bool:
        """Whether a match may skip rows between the rows it selects."""
        return self.event_selection in ("NEXT", "ANY")

    @property
    def with_unmatched(self) -> bool:
        """ALL ROWS PER MATCH WITH UNMATCHED ROWS: rows no match covers come out too."""
        return self.rows_per_match == "ALL" and self.empty_matches == "UNMATCHED"

    def variable_id(self, name: str) -> int:
        return self.variables.index(name)


def nodes(e: BExpr):
    """Every node of a bound expression tree, ``e`` first (iteratively: trees may be deep)."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        for name in getattr(x, "__dataclass_fields__", ()):
            if name == "impl":
                continue
            v = getattr(x, name)
            for y in v if isinstance(v, tuple) else (v,):
                for z in y if isinstance(y, tuple) else (y,):
                    if isinstance(z, BExpr):
                        stack.append(z)
