"""The syntax tree of a MATCH_RECOGNIZE clause: frozen dataclasses, each with its span.

Names are kept as written (case folded as SQL does: unquoted names to upper case for
pattern variables, columns looked up case-insensitively by the analyzer).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from sparkcep.errors import Span

NO_SPAN = Span(0, 0)


@dataclass(frozen=True)
class Node:
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


def walk(node: Node):
    """Every node under ``node``, itself first (iteratively: trees may be deep); children
    in tuples and in tuples of tuples (CASE's WHEN pairs) included."""
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        for name in getattr(x, "__dataclass_fields__", ()):
            v = getattr(x, name)
            for y in v if isinstance(v, tuple) else (v,):
                for z in y if isinstance(y, tuple) else (y,):
                    if isinstance(z, Node):
                        stack.append(z)


@dataclass(frozen=True)
class Name(Node):
    """An identifier. ``quoted`` names keep their case; others compare case-insensitively."""

    text: str
    quoted: bool = False

    @property
    def key(self) -> str:
        return self.text if self.quoted else self.text.upper()


# ---------------------------------------------------------------- expressions
class Expr(Node):
    pass


@dataclass(frozen=True)
class Literal(Expr):
    value: Any
    kind: str  # "number", "string", "boolean", "null", "interval", "date", "timestamp"


@dataclass(frozen=True)
class ColumnRef(Expr):
    """``col`` or ``X.col``: qualifier is a pattern variable or subset name."""

    qualifier: Name | None
    column: Name


@dataclass(frozen=True)
class Star(Expr):
    """The ``*`` or ``X.*`` argument of COUNT."""

    qualifier: Name | None


@dataclass(frozen=True)
class Call(Expr):
    """A function call; navigation, aggregates and CLASSIFIER are calls too."""

    name: Name
    args: tuple[Expr, ...]
    semantics: str | None = None  # "RUNNING", "FINAL", "PREVIOUS" or None when not written
    distinct: bool = False  # aggregate(DISTINCT ...)
    extract: bool = False  # EXTRACT(field FROM x): name is the field


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(x AS type)`` or ``TRY_CAST`` (NULL instead of an error)."""

    operand: Expr
    type_name: str  # upper case: INTEGER, VARCHAR, ...
    sizes: tuple[int, ...]  # VARCHAR(n)
    try_: bool
    type_span: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Like(Expr):
    operand: Expr
    pattern: Expr
    escape: Expr | None
    negated: bool = False


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-" or "NOT"
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # + - * / % || = <> < <= > >= AND OR
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class Case(Expr):
    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None


# ---------------------------------------------------------------- row patterns
class PatternNode(Node):
    pass


@dataclass(frozen=True)
class PVar(PatternNode):
    name: Name


@dataclass(frozen=True)
class PEmpty(PatternNode):
    pass


@dataclass(frozen=True)
class PStart(PatternNode):
    pass


@dataclass(frozen=True)
class PEnd(PatternNode):
    pass


@dataclass(frozen=True)
class PConcat(PatternNode):
    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class PAlt(PatternNode):
    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class PQuant(PatternNode):
    child: PatternNode
    min: int
    max: int | None  # None: unbounded
    greedy: bool = True


@dataclass(frozen=True)
class PPermute(PatternNode):
    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class PNot(PatternNode):
    """``!X``: no row between the neighbours of this place satisfies X (SASE negation)."""

    child: PatternNode


@dataclass(frozen=True)
class PExclude(PatternNode):
    child: PatternNode


@dataclass(frozen=True)
class PAnd(PatternNode):
    """T-REX's ``A & B``: both match the same segment."""

    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class PTilde(PatternNode):
    """T-REX's ``~A``: A does not match the segment."""

    child: PatternNode


# ---------------------------------------------------------------- clauses
@dataclass(frozen=True)
class SortItem(Node):
    column: Name
    descending: bool = False
    nulls_first: bool | None = None  # None: the default (NULLS LAST, as Trino)


@dataclass(frozen=True)
class Measure(Node):
    expr: Expr
    name: Name


@dataclass(frozen=True)
class RowsPerMatch(Node):
    mode: str = "ONE"  # "ONE" or "ALL"
    empty: str = "SHOW"  # "SHOW", "OMIT", "UNMATCHED" (ALL ROWS only)


@dataclass(frozen=True)
class SkipTo(Node):
    mode: str  # "PAST_LAST", "NEXT_ROW", "FIRST", "LAST"
    target: Name | None = None


@dataclass(frozen=True)
class Within(Node):
    value: Any  # a number, or a datetime.timedelta
    is_interval: bool


@dataclass(frozen=True)
class SubsetDef(Node):
    name: Name
    members: tuple[Name, ...]


@dataclass(frozen=True)
class Define(Node):
    name: Name
    condition: Expr
    segment: bool = False  # DEFINE SEGMENT v AS ... (T-REX): the condition holds over a segment


@dataclass(frozen=True)
class Query(Node):
    """One MATCH_RECOGNIZE clause."""

    pattern: PatternNode
    partition_by: tuple[Name, ...] = ()
    order_by: tuple[SortItem, ...] = ()
    measures: tuple[Measure, ...] = ()
    rows_per_match: RowsPerMatch = RowsPerMatch()
    skip: SkipTo | None = None
    all_matches: bool = False
    all_matches_span: Span | None = None
    # "PARTITION" (SQL's contiguity), "STRICT", "NEXT" (skip till next match), "ANY".
    event_selection: str = "PARTITION"
    event_selection_span: Span | None = None
    within: Within | None = None
    maxlength: int | None = None
    maxlength_span: Span | None = None
    subsets: tuple[SubsetDef, ...] = ()
    defines: tuple[Define, ...] = ()
    text: str = field(default="", compare=False, repr=False)


def identifiers(tree: Any) -> set[str]:
    """Every identifier in a syntax tree, upper-cased: a superset of the columns it reads."""
    out: set[str] = set()
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            out.add(node.text.upper())
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
        elif is_dataclass(node):
            stack.extend(getattr(node, f.name) for f in fields(node))
    return out
