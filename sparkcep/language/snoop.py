"""Extended SNOOP query text → a plain syntax tree (``SnoopQuery``).

    SELECT *
    FROM SEQ(E1; E2; E3)
    WHERE FILTER
        E1.type = 'A'
        E2.type = 'B' AND E3.type = 'C'
        matches(E1.photo, E2.photo)
    PICK first E1 within 25 events from E2
    WITHIN 10 seconds
    RETURN E1.id AS first_id, 'face seen twice' AS event
    CONSUMING E1, E2, E3

The clauses are parsed by ``snoop.lark``; the predicates and the RETURN outputs are cut out
of the text and parsed by the MATCH_RECOGNIZE expression grammar (``parser.parse_conjuncts``
and ``parse_outputs``), so errors anywhere point into this text with line, column and caret.
The meaning (variables, windows, PICK, CONSUMING) is settled by ``sparkcep.tasks.task_query``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from sparkcep.errors import QueryError, Span
from sparkcep.language import ast
from sparkcep.language.parser import parse_conjuncts, parse_outputs

# Patterns nested deeper than this are refused (the later stages recurse over the tree).
MAX_NESTING = 32
# Units of a duration, in seconds; EVENTS counts positions in the stream instead.
UNIT_SECONDS = {"MILLISECOND": 1e-3, "SECOND": 1.0, "MINUTE": 60.0, "HOUR": 3600.0, "DAY": 86400.0}


@dataclass(frozen=True)
class Var:
    name: str
    span: Span


@dataclass(frozen=True)
class Op:
    """SEQ, OR, ALL or ANY over operand patterns (``k``: how many operands ANY needs; ALL
    has k = the number of operands, SEQ and OR keep k = 0)."""

    kind: str
    items: tuple
    k: int
    span: Span


@dataclass(frozen=True)
class Not:
    """NOT(X) inside a SEQ: no event satisfying X's predicates between its neighbours."""

    name: str
    span: Span


@dataclass(frozen=True)
class Duration:
    amount: float
    unit: str | None  # "EVENTS", a key of UNIT_SECONDS, or None: units of the order column
    span: Span

    @property
    def events(self) -> bool:
        return self.unit == "EVENTS"


@dataclass(frozen=True)
class Pick:
    """``PICK first|last|each X within d from Y``."""

    kind: str  # FIRST, LAST, EACH
    var: str
    var_span: Span
    within: Duration
    source: str
    source_span: Span
    span: Span


@dataclass(frozen=True)
class SnoopQuery:
    pattern: Var | Op | Not
    predicates: tuple[ast.Expr, ...]
    picks: tuple[Pick, ...]
    within: Duration | None
    outputs: tuple[ast.Measure, ...]
    consuming: tuple[tuple[str, Span], ...]
    text: str


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = resources.files("sparkcep.language").joinpath("snoop.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


def _span(item) -> Span:
    if isinstance(item, Token):
        return Span(item.line, item.column, item.end_line, item.end_column)
    if getattr(item, "empty", True):
        return Span(0, 0)
    return Span(item.line, item.column, item.end_line, item.end_column)


def _patterns(children) -> tuple:
    return tuple(c for c in children if isinstance(c, (Var, Op, Not)))


@v_args(meta=True)
class _ToTree(Transformer):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def p_var(self, meta, ch):
        return Var(ch[0].value, _span(ch[0]))

    def p_seq(self, meta, ch):
        return Op("SEQ", _patterns(ch), 0, _span(meta))

    def p_or(self, meta, ch):
        return Op("OR", _patterns(ch), 0, _span(meta))

    def p_all(self, meta, ch):
        items = _patterns(ch)
        return Op("ALL", items, len(items), _span(meta))

    def p_any(self, meta, ch):
        items = _patterns(ch)
        k_tok = ch[1]
        k = int(k_tok.value)
        if not 1 <= k <= len(items):
            raise QueryError("SYNTAX", f"ANY({k}, ...) needs between 1 and {len(items)} of its {len(items)} "
                             "operands", _span(k_tok), self.text)
        return Op("ANY", items, k, _span(meta))

    def p_not(self, meta, ch):
        return Not(ch[-1].value, _span(meta))

    def duration(self, meta, ch):
        unit = ch[1].value.upper().rstrip("S") if len(ch) > 1 else None
        unit = "EVENTS" if unit == "EVENT" else unit
        value = float(ch[0].value)
        if unit == "EVENTS" and not value.is_integer():
            raise QueryError("SYNTAX", "a number of events must be a whole number", _span(ch[0]), self.text)
        if value > 2**31 - 1:
            raise QueryError("NUMBER_OUT_OF_RANGE", f"{ch[0].value} is out of range (at most {2**31 - 1})",
                             _span(ch[0]), self.text)
        return Duration(value, unit, _span(meta))

    def pick(self, meta, ch):
        kind, var, within, source = ch[1], ch[2], ch[4], ch[6]
        return Pick(kind.value.upper(), var.value, _span(var), within, source.value, _span(source), _span(meta))

    def where_clause(self, meta, ch):
        preds: list[ast.Expr] = []
        for c in ch:
            if isinstance(c, Token) and c.type == "PREDICATES":
                preds = parse_conjuncts(self.text, c.start_pos, c.end_pos)
        return ("where", tuple(preds))

    def within_clause(self, meta, ch):
        return ("within", ch[1])

    def return_clause(self, meta, ch):
        tok = ch[1]
        return ("return", parse_outputs(self.text, tok.start_pos, tok.end_pos))

    def consuming_clause(self, meta, ch):
        return ("consuming", tuple((c.value, _span(c)) for c in ch[1:]))

    def start(self, meta, ch):
        pattern = ch[2]
        picks = tuple(c for c in ch[3:] if isinstance(c, Pick))
        parts = dict(c for c in ch[3:] if not isinstance(c, Pick))
        preds = parts.get("where", ())
        return SnoopQuery(pattern, preds, picks, parts.get("within"), parts.get("return", ()),
                          parts.get("consuming", ()), self.text)


def _expected(expected) -> str:
    names = {"NAME": "a name", "INT": "a whole number", "NUMBER": "a number", "UNIT": "a unit (events, seconds, ...)",
             "PICK_KIND": "first, last or each", "PREDICATES": "a condition", "OUTPUTS": "an output",
             "LPAR": "'('", "RPAR": "')'", "SEMICOLON": "';'", "COMMA": "','", "STAR": "'*'", "$END": "end of text"}
    out = sorted({names.get(e, e) for e in expected})
    return ", ".join(out)


def parse_snoop(text: str) -> SnoopQuery:
    """Parse an Extended SNOOP query; a syntax error is a positioned QueryError."""
    if not isinstance(text, str):
        raise QueryError("SYNTAX", f"query text must be a string, not {type(text).__name__}")
    return _parse(text)


@lru_cache(maxsize=128)
def _parse(text: str) -> SnoopQuery:
    try:
        tree = _lark().parse(text)
        _check_nesting(tree, text)
        return _ToTree(text).transform(tree)
    except UnexpectedEOF as e:
        raise QueryError("SYNTAX", f"unexpected end of text; expected {_expected(e.expected)}",
                         _end(text), text) from None
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            raise QueryError("SYNTAX", f"unexpected end of text; expected {_expected(e.expected)}",
                             _end(text), text) from None
        word = (tok.value.split() or [tok.value])[0]
        start = tok.start_pos + tok.value.index(word)
        line = text.count("\n", 0, start) + 1
        column = start - text.rfind("\n", 0, start)
        raise QueryError("SYNTAX", f"unexpected {word!r}; expected {_expected(e.expected)}",
                         Span(line, column, line, column + len(word)), text) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        allowed = _expected(e.allowed) if e.allowed else "something else"
        raise QueryError("SYNTAX", f"unexpected character {ch!r}; expected {allowed}",
                         Span(e.line, e.column), text) from None
    except UnexpectedInput as e:  # pragma: no cover - other lark input errors
        raise QueryError("SYNTAX", str(e).splitlines()[0], Span(e.line, e.column), text) from None
    except VisitError as e:
        if isinstance(e.orig_exc, QueryError):
            raise e.orig_exc.with_text(text) from None
        raise


def _end(text: str) -> Span:
    lines = text.rstrip().splitlines() or [""]
    return Span(len(lines), len(lines[-1]) + 1)


def _check_nesting(tree, text: str) -> None:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if getattr(node, "data", None) in ("p_seq", "p_or", "p_all", "p_any"):
            depth += 1
            if depth > MAX_NESTING:
                first = node.children[0] if node.children else None
                where = _span(first) if isinstance(first, Token) else _span(node.meta)
                raise QueryError("TOO_COMPLEX", f"the pattern nests operators more than {MAX_NESTING} deep",
                                 where, text)
        stack.extend((c, depth) for c in getattr(node, "children", ()))
