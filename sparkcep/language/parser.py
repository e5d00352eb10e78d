"""Text → syntax tree. The grammar is ``match_recognize.lark``; this module only shapes
lark's parse tree into ``ast`` nodes and turns lark's errors into positioned QueryErrors."""

from __future__ import annotations

import datetime as dt
import functools
import math
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from sparkcep.errors import QueryError, Span
from sparkcep.language import ast
from sparkcep.values import BIGINT_MAX

_KEYWORD_TYPES = frozenset(
    """PARTITION BY ORDER ASC DESC NULLS FIRST LAST MEASURES AS ONE ROW ROWS PER MATCH MATCHES
    ALL SHOW OMIT EMPTY WITH UNMATCHED AFTER SKIP PAST TO NEXT PATTERN PERMUTE WITHIN MAXLENGTH
    SUBSET DEFINE OR AND NOT BETWEEN IN IS NULL TRUE FALSE CASE WHEN THEN ELSE END RUNNING FINAL
    INTERVAL DATE TIMESTAMP EXCL_OPEN EXCL_CLOSE PREVIOUS EVENT SELECTION STRICT CONTIGUITY TILL
    ANY CAST TRY_CAST LIKE ESCAPE ARRAY EXTRACT FROM DISTINCT SEGMENT SEG""".split()
)

# Words that cannot stand for a column without quotes: where one is read as a column, an
# expression is missing (``MEASURES AS x``).
_RESERVED = frozenset("""AS AND OR NOT IS IN BETWEEN LIKE ESCAPE CASE WHEN THEN ELSE END DEFINE PATTERN
    MEASURES SUBSET PARTITION ORDER BY FROM DISTINCT""".split())

_UNIT_SECONDS = {
    "DAY": 86400.0,
    "HOUR": 3600.0,
    "MINUTE": 60.0,
    "SECOND": 1.0,
    "MILLISECOND": 1e-3,
    "MICROSECOND": 1e-6,
}

# Permutations are expanded eagerly; beyond this the alternation would be enormous.
MAX_PERMUTE_ITEMS = 7
# Levels of the parse tree (two per parenthesis); deeper trees would exhaust Python's stack
# in the later (recursive) stages, so they are refused with a position instead.
MAX_DEPTH = 128
# Counts and lengths (MAXLENGTH, quantifier bounds, navigation offsets) fit 32 bits.
MAX_COUNT = 2**31 - 1
MAX_BIGINT = BIGINT_MAX


@functools.cache
def _lark() -> Lark:
    grammar = resources.files("sparkcep.language").joinpath("match_recognize.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False,
                start=["start", "expr", "outputs"], cache=True)  # lark keeps the built tables in a temp file keyed by the grammar


def _span_of(item) -> Span:
    if isinstance(item, Token):
        return Span(item.line, item.column, item.end_line, item.end_column)
    if isinstance(item, Tree):
        m = item.meta
        if not getattr(m, "empty", True):
            return Span(m.line, m.column, m.end_line, m.end_column)
    if isinstance(item, ast.Node):
        return item.span
    return Span(0, 0)


def _meta_span(meta) -> Span:
    if getattr(meta, "empty", True):
        return Span(0, 0)
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _plain(children):
    """Children without keyword tokens."""
    return [c for c in children if not (isinstance(c, Token) and c.type in _KEYWORD_TYPES)]


def _has(children, keyword: str) -> bool:
    return any(isinstance(c, Token) and c.type == keyword for c in children)


@v_args(meta=True)
class _ToAst(Transformer):
    # ------------------------------------------------------------ names and literals
    def name(self, meta, ch):
        tok = ch[0]
        if tok.type == "QUOTED_NAME":
            return ast.Name(tok.value[1:-1].replace('""', '"'), True, span=_span_of(tok))
        return ast.Name(tok.value, False, span=_span_of(tok))

    def column_name(self, meta, ch):
        return ch[0]

    def number(self, meta, ch):
        text = ch[0].value
        value = float(text) if any(c in text for c in ".eE") else int(text)
        if isinstance(value, int) and value > MAX_BIGINT:
            raise _err("NUMBER_OUT_OF_RANGE", f"{text} does not fit a bigint (at most {MAX_BIGINT})", ch[0])
        if isinstance(value, float) and not math.isfinite(value):
            raise _err("NUMBER_OUT_OF_RANGE", f"{text} is out of range for a double", ch[0])
        return ast.Literal(value, "number", span=_meta_span(meta))

    def string(self, meta, ch):
        return ast.Literal(ch[0].value[1:-1].replace("''", "'"), "string", span=_meta_span(meta))

    def true(self, meta, ch):
        return ast.Literal(True, "boolean", span=_meta_span(meta))

    def false(self, meta, ch):
        return ast.Literal(False, "boolean", span=_meta_span(meta))

    def null(self, meta, ch):
        return ast.Literal(None, "null", span=_meta_span(meta))

    def time_unit(self, meta, ch):
        return ch[0].type

    def interval(self, meta, ch):
        raw = ch[1].value[1:-1].strip()
        unit = ch[2]
        try:
            amount = float(raw)
        except ValueError:
            raise _err("SYNTAX", f"interval value {raw!r} is not a number; write e.g. INTERVAL '5' MINUTE", ch[1]) from None
        return ast.Literal(_duration(amount, unit, ch[1]), "interval", span=_meta_span(meta))

    def date_lit(self, meta, ch):
        raw = ch[1].value[1:-1]
        try:
            value = dt.date.fromisoformat(raw)
        except ValueError:
            raise _err("SYNTAX", f"{raw!r} is not a date (YYYY-MM-DD)", ch[1]) from None
        return ast.Literal(value, "date", span=_meta_span(meta))

    def timestamp_lit(self, meta, ch):
        raw = ch[1].value[1:-1]
        try:
            value = dt.datetime.fromisoformat(raw)
        except ValueError:
            raise _err("SYNTAX", f"{raw!r} is not a timestamp (YYYY-MM-DD HH:MM:SS)", ch[1]) from None
        return ast.Literal(value, "timestamp", span=_meta_span(meta))

    # ------------------------------------------------------------ expressions
    def column_ref(self, meta, ch):
        if len(ch) == 1:
            name = ch[0]
            if not name.quoted and name.text.upper() in _RESERVED:
                raise QueryError("SYNTAX", f"{name.text.upper()} is a reserved word, not a column; an expression "
                                 f"is missing here (quote it, \"{name.text}\", to name a column)", name.span)
            return ast.ColumnRef(None, ch[0], span=_meta_span(meta))
        return ast.ColumnRef(ch[0], ch[1], span=_meta_span(meta))

    def args(self, meta, ch):
        return tuple(ch)

    def star_arg(self, meta, ch):
        return (ast.Star(None, span=_meta_span(meta)),)

    def var_star_arg(self, meta, ch):
        return (ast.Star(ch[0], span=_meta_span(meta)),)

    def distinct_args(self, meta, ch):
        return ("DISTINCT", tuple(_plain(ch)))

    def call(self, meta, ch):
        args = ch[1] if len(ch) > 1 else ()
        if isinstance(args, tuple) and len(args) == 2 and args[0] == "DISTINCT":
            return ast.Call(ch[0], args[1], distinct=True, span=_meta_span(meta))
        return ast.Call(ch[0], args, span=_meta_span(meta))

    def type_name(self, meta, ch):
        name, *sizes = ch
        return (name, tuple(_count(t, "a type size") for t in sizes), _meta_span(meta))

    def cast_expr(self, meta, ch):
        kind = ch[0].type
        operand, (name, sizes, tspan) = _plain(ch)
        return ast.Cast(operand, name.text.upper(), sizes, kind == "TRY_CAST", type_span=tspan, span=_meta_span(meta))

    def array_ctor(self, meta, ch):
        return ast.Call(ast.Name("ARRAY", span=_meta_span(meta)), tuple(_plain(ch)), span=_meta_span(meta))

    def subscript(self, meta, ch):
        base, index = ch
        return ast.Call(ast.Name("$SUBSCRIPT", True, span=_meta_span(meta)), (base, index), span=_meta_span(meta))

    def extract_expr(self, meta, ch):
        field, operand = _plain(ch)
        return ast.Call(ast.Name(field.text.upper(), span=field.span), (operand,), extract=True, span=_meta_span(meta))

    def like(self, meta, ch):
        items = _plain(ch)
        escape = items[2] if len(items) > 2 else None
        return ast.Like(items[0], items[1], escape, _has(ch, "NOT"), span=_meta_span(meta))

    def semantics(self, meta, ch):
        return ch[0].type

    def with_semantics(self, meta, ch):
        sem, call = ch
        return ast.Call(call.name, call.args, sem, distinct=call.distinct, span=_meta_span(meta))

    def neg(self, meta, ch):
        operand = ch[0]
        if isinstance(operand, ast.Literal) and operand.kind in ("number", "interval"):
            return ast.Literal(-operand.value, operand.kind, span=_meta_span(meta))
        return ast.Unary("-", operand, span=_meta_span(meta))

    def not_(self, meta, ch):
        return ast.Unary("NOT", _plain(ch)[0], span=_meta_span(meta))

    def _chain(self, meta, ch, op):
        # A balanced tree: AND and OR are associative, and a chain of thousands of
        # conjuncts then stays shallow for the recursive stages after the parser
        # (evaluation still runs left to right).
        def build(items):
            if len(items) == 1:
                return items[0]
            mid = len(items) // 2
            left, right = build(items[:mid]), build(items[mid:])
            return ast.Binary(op, left, right,
                              span=Span(left.span.line, left.span.column, right.span.end_line, right.span.end_column))
        return build(_plain(ch))

    def or_(self, meta, ch):
        return self._chain(meta, ch, "OR")

    def and_(self, meta, ch):
        return self._chain(meta, ch, "AND")

    def comp_op(self, meta, ch):
        return ch[0].value

    add_op = mul_op = comp_op

    def binary(self, meta, ch):
        left, op, right = ch
        return ast.Binary(op, left, right, span=_meta_span(meta))

    def compare(self, meta, ch):
        left, op, right = ch
        normal = {"!=": "<>", "≠": "<>", "≤": "<=", "≥": ">="}.get(op, op)
        return ast.Binary(normal, left, right, span=_meta_span(meta))

    def between(self, meta, ch):
        operand, low, high = _plain(ch)
        return ast.Between(operand, low, high, _has(ch, "NOT"), span=_meta_span(meta))

    def in_list(self, meta, ch):
        items = _plain(ch)
        return ast.InList(items[0], tuple(items[1:]), _has(ch, "NOT"), span=_meta_span(meta))

    def is_null(self, meta, ch):
        return ast.IsNull(_plain(ch)[0], _has(ch, "NOT"), span=_meta_span(meta))

    def when_clause(self, meta, ch):
        return tuple(_plain(ch))

    def else_clause(self, meta, ch):
        return ("ELSE", _plain(ch)[0])

    def case_expr(self, meta, ch):
        items = _plain(ch)
        operand = None
        whens = []
        default = None
        for item in items:
            if isinstance(item, tuple) and len(item) == 2 and item[0] == "ELSE":
                default = item[1]
            elif isinstance(item, tuple):
                whens.append(item)
            else:
                operand = item
        return ast.Case(operand, tuple(whens), default, span=_meta_span(meta))

    # ------------------------------------------------------------ patterns
    def p_var(self, meta, ch):
        return ast.PVar(ch[0], span=_meta_span(meta))

    def p_empty(self, meta, ch):
        return ast.PEmpty(span=_meta_span(meta))

    def p_start(self, meta, ch):
        return ast.PStart(span=_meta_span(meta))

    def p_end(self, meta, ch):
        return ast.PEnd(span=_meta_span(meta))

    def p_not(self, meta, ch):
        return ast.PNot(_plain(ch)[0], span=_meta_span(meta))

    def p_exclude(self, meta, ch):
        return ast.PExclude(_plain(ch)[0], span=_meta_span(meta))

    def p_alt(self, meta, ch):
        return ch[0] if len(ch) == 1 else ast.PAlt(tuple(ch), span=_meta_span(meta))

    def p_concat(self, meta, ch):
        return ch[0] if len(ch) == 1 else ast.PConcat(tuple(ch), span=_meta_span(meta))

    def p_and(self, meta, ch):
        return ch[0] if len(ch) == 1 else ast.PAnd(tuple(ch), span=_meta_span(meta))

    def p_tilde(self, meta, ch):
        return ast.PTilde(ch[0], span=_meta_span(meta))

    def p_permute(self, meta, ch):
        items = _plain(ch)
        if len(items) > MAX_PERMUTE_ITEMS:
            raise QueryError(
                "NOT_SUPPORTED",
                f"PERMUTE with {len(items)} items is not supported (at most {MAX_PERMUTE_ITEMS})",
                _meta_span(meta),
            )
        return ast.PPermute(tuple(items), span=_meta_span(meta))

    def q_star(self, meta, ch):
        return (0, None)

    def q_plus(self, meta, ch):
        return (1, None)

    def q_opt(self, meta, ch):
        return (0, 1)

    def q_exact(self, meta, ch):
        n = _count(ch[0], "a quantifier bound")
        return (n, n)

    def q_range(self, meta, ch):
        return (_count(ch[0], "a quantifier bound"), _count(ch[1], "a quantifier bound"))

    def q_min(self, meta, ch):
        return (_count(ch[0], "a quantifier bound"), None)

    def q_max(self, meta, ch):
        return (0, _count(ch[0], "a quantifier bound"))

    def quantifier(self, meta, ch):
        low, high = ch[0]
        greedy = not any(isinstance(c, Token) and c.type == "RELUCTANT" for c in ch)
        return (low, high, greedy, _meta_span(meta))

    def p_quant(self, meta, ch):
        child, (low, high, greedy, qspan) = ch
        if high is not None and low > high:
            raise QueryError("INVALID_QUANTIFIER", f"quantifier minimum {low} exceeds maximum {high}", qspan)
        return ast.PQuant(child, low, high, greedy, span=_meta_span(meta))

    # ------------------------------------------------------------ clauses
    def partition_clause(self, meta, ch):
        return ("partition_by", tuple(_plain(ch)))

    def asc(self, meta, ch):
        return False

    def desc(self, meta, ch):
        return True

    def nulls_first(self, meta, ch):
        return ("nulls", True)

    def nulls_last(self, meta, ch):
        return ("nulls", False)

    def sort_item(self, meta, ch):
        name = ch[0]
        descending = False
        nulls_first = None
        for c in ch[1:]:
            if isinstance(c, tuple):
                nulls_first = c[1]
            else:
                descending = c
        return ast.SortItem(name, descending, nulls_first, span=_meta_span(meta))

    def order_clause(self, meta, ch):
        return ("order_by", tuple(_plain(ch)))

    def measure(self, meta, ch):
        items = _plain(ch)
        return ast.Measure(items[0], items[1], span=_meta_span(meta))

    def output(self, meta, ch):
        items = _plain(ch)
        return ast.Measure(items[0], items[1] if len(items) > 1 else None, span=_meta_span(meta))

    def outputs(self, meta, ch):
        return tuple(_plain(ch))

    def measures_clause(self, meta, ch):
        return ("measures", tuple(_plain(ch)))

    def one_row(self, meta, ch):
        return ("rows_per_match", ast.RowsPerMatch("ONE", "SHOW", span=_meta_span(meta)))

    def show_empty(self, meta, ch):
        return "SHOW"

    def omit_empty(self, meta, ch):
        return "OMIT"

    def with_unmatched(self, meta, ch):
        return "UNMATCHED"

    def all_rows(self, meta, ch):
        opts = _plain(ch)
        return ("rows_per_match", ast.RowsPerMatch("ALL", opts[0] if opts else "SHOW", span=_meta_span(meta)))

    def skip_past_last(self, meta, ch):
        return ast.SkipTo("PAST_LAST", span=_meta_span(meta))

    def skip_next_row(self, meta, ch):
        return ast.SkipTo("NEXT_ROW", span=_meta_span(meta))

    def skip_first(self, meta, ch):
        return ast.SkipTo("FIRST", _plain(ch)[0], span=_meta_span(meta))

    def skip_last(self, meta, ch):
        return ast.SkipTo("LAST", _plain(ch)[0], span=_meta_span(meta))

    def skip_to(self, meta, ch):
        return ast.SkipTo("LAST", _plain(ch)[0], span=_meta_span(meta))

    def skip(self, meta, ch):
        target = _plain(ch)[0]
        return ("skip", ast.SkipTo(target.mode, target.target, span=_meta_span(meta)))

    def all_matches(self, meta, ch):
        return ("all_matches", _meta_span(meta))

    def sel_strict(self, meta, ch):
        return "STRICT"

    def sel_partition(self, meta, ch):
        return "PARTITION"

    def sel_next(self, meta, ch):
        return "NEXT"

    def sel_any(self, meta, ch):
        return "ANY"

    def selection_kind(self, meta, ch):  # pragma: no cover - every alternative is aliased
        return ch[0]

    def event_selection(self, meta, ch):
        return ("event_selection", _plain(ch)[0], _meta_span(meta))

    def within_number(self, meta, ch):
        return ast.Within(ch[0].value, False, span=_meta_span(meta))

    def within_interval(self, meta, ch):
        return ast.Within(ch[0].value, True, span=_meta_span(meta))

    def within_duration(self, meta, ch):
        return ast.Within(_duration(float(ch[0].value), ch[1], ch[0]), True, span=_meta_span(meta))

    def within(self, meta, ch):
        w = _plain(ch)[0]
        return ("within", ast.Within(w.value, w.is_interval, span=_meta_span(meta)))

    def maxlength(self, meta, ch):
        return ("maxlength", _count(_plain(ch)[0], "MAXLENGTH"), _meta_span(meta))

    def tail_maxlength(self, meta, ch):
        return ("tail_maxlength", _count(_plain(ch)[0], "MAXLENGTH"), _meta_span(meta))

    def pattern_bounds(self, meta, ch):
        return list(ch)

    def pattern_clause(self, meta, ch):
        items = _plain(ch)
        pattern = ast.PEmpty(span=_meta_span(meta))
        bounds = []
        for item in items:
            if isinstance(item, list):
                bounds = item
            else:
                pattern = item
        return ("pattern", pattern, bounds)

    def subset_def(self, meta, ch):
        return ast.SubsetDef(ch[0], tuple(ch[1:]), span=_meta_span(meta))

    def subset_clause(self, meta, ch):
        return ("subsets", tuple(_plain(ch)))

    def segment_kw(self, meta, ch):
        return "SEGMENT"

    def define_item(self, meta, ch):
        segment = bool(ch) and ch[0] == "SEGMENT"
        items = [c for c in _plain(ch) if c != "SEGMENT"]
        return ast.Define(items[0], items[1], segment, span=_meta_span(meta))

    def define_clause(self, meta, ch):
        return ("defines", tuple(_plain(ch)))

    def start(self, meta, ch):
        fields: dict = {}
        maxlength_spans = []
        for item in ch:
            key = item[0]
            if key == "pattern":
                fields["pattern"] = item[1]
                for bound in item[2]:
                    if bound[0] == "within":
                        fields["within"] = bound[1]
                    else:
                        fields["maxlength"] = bound[1]
                        maxlength_spans.append(bound[2])
            elif key == "tail_maxlength":
                maxlength_spans.append(item[2])
                if "maxlength" in fields:
                    raise QueryError(
                        "CONFLICTING_CLAUSES",
                        "MAXLENGTH is given twice (after PATTERN and at the end); keep one",
                        item[2],
                    )
                fields["maxlength"] = item[1]
            elif key == "event_selection":
                fields["event_selection"] = item[1]
                fields["event_selection_span"] = item[2]
            elif key == "all_matches":
                fields["all_matches"] = True
                fields["all_matches_span"] = item[1]
            elif key in ("skip",):
                fields["skip"] = item[1]
            else:
                fields[key] = item[1]
        if maxlength_spans:
            fields["maxlength_span"] = maxlength_spans[0]
        return ast.Query(span=_meta_span(meta), **fields)


def _err(code: str, message: str, tok: Token) -> QueryError:
    return QueryError(code, message, _span_of(tok))


def _count(tok: Token, what: str) -> int:
    """A whole number that counts rows (MAXLENGTH, quantifier bounds)."""
    text = tok.value
    if any(c in text for c in ".eE"):
        raise _err("SYNTAX", f"{what} must be a whole number, not {text}", tok)
    value = int(text)
    if value > MAX_COUNT:
        raise _err("NUMBER_OUT_OF_RANGE", f"{what} of {text} is out of range (at most {MAX_COUNT})", tok)
    return value


def _duration(amount: float, unit: str, tok: Token) -> dt.timedelta:
    try:
        return dt.timedelta(seconds=amount * _UNIT_SECONDS[unit])
    except (OverflowError, ValueError):
        raise _err("NUMBER_OUT_OF_RANGE", f"an interval of {amount:g} {unit.lower()}s is out of range "
                   "(at most 999999999 days)", tok) from None


def check_depth(tree: Tree, text: str) -> None:
    """Refuse parse trees deeper than MAX_DEPTH (iteratively: the check itself must not
    recurse), pointing at the first token that lies too deep."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            tok = _first_token(node)
            span = _span_of(tok) if tok is not None else _span_of(node)
            raise QueryError("TOO_COMPLEX", f"the query nests too deeply (its parse tree passes {MAX_DEPTH} "
                             "levels: about 60 parentheses deep in an expression, 40 groups in PATTERN); "
                             "simplify it", span, text)
        if isinstance(node, Tree):
            stack.extend((c, depth + 1) for c in node.children)


def _first_token(node) -> Token | None:
    """The first token under ``node`` (iteratively, as lark's scan_values is not)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Token):
            return n
        if isinstance(n, Tree):
            stack.extend(reversed(n.children))
    return None


def _describe_expected(expected) -> str:
    names = sorted({_pretty_terminal(e) for e in expected})
    if len(names) > 12:
        names = names[:12] + ["..."]
    return ", ".join(names)


_PUNCT = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "DOT": "'.'", "STAR": "'*'", "PLUS": "'+'",
    "MINUS": "'-'", "QMARK": "'?'", "VBAR": "'|'", "LBRACE": "'{'", "RBRACE": "'}'",
    "CIRCUMFLEX": "'^'", "DOLLAR": "'$'", "EQUAL": "'='", "NAME": "a name", "QUOTED_NAME": "a quoted name",
    "NUMBER": "a number", "STRING": "a string", "COMP_OP": "a comparison", "ADD_OP": "'+', '-' or '||'",
    "RELUCTANT": "'?'", "$END": "end of text", "EXCL_OPEN": "'{-'", "EXCL_CLOSE": "'-}'",
}


def _pretty_terminal(name: str) -> str:
    if name in _PUNCT:
        return _PUNCT[name]
    if name.startswith("__ANON"):
        return "a symbol"
    return name


def parse(text: str | ast.Query) -> ast.Query:
    """Parse the text that stands inside ``MATCH_RECOGNIZE ( ... )`` (a syntax tree from
    another front end, such as language.sase, passes through)."""
    if isinstance(text, ast.Query):
        return text
    if not isinstance(text, str):
        raise QueryError("SYNTAX", f"query text must be a string, not {type(text).__name__}")
    return _parse_text(text)


def _parse_rule(text: str, rule: str, source: str, fragment: bool = True) -> Any:
    """Parse ``text`` from grammar rule ``rule``; errors point into ``source`` (the same
    positions: another front end passes its own text with everything but a fragment blanked)."""
    try:
        tree = _lark().parse(text, start=rule)
        check_depth(tree, source)
        return _ToAst().transform(tree)
    except UnexpectedEOF as e:
        raise QueryError("SYNTAX", f"unexpected end of text; expected {_describe_expected(e.expected)}",
                         _end_span(text, fragment), source) from None
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            span = _end_span(text, fragment)
            what = "end of text"
        else:
            span = _span_of(tok)
            what = repr(tok.value)
        raise QueryError("SYNTAX", f"unexpected {what}; expected {_describe_expected(e.expected)}", span, source) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        raise QueryError("SYNTAX", f"unexpected character {ch!r}", Span(e.line, e.column), source) from None
    except UnexpectedInput as e:  # pragma: no cover - other lark input errors
        raise QueryError("SYNTAX", str(e).splitlines()[0], Span(e.line, e.column), source) from None
    except VisitError as e:
        if isinstance(e.orig_exc, QueryError):
            raise e.orig_exc.with_text(source) from None
        raise


def _end_span(text: str, fragment: bool) -> Span:
    # A fragment ends where its last character does; the blanks after it are not its text.
    lines = (text.rstrip() if fragment else text).splitlines() or [""]
    return Span(len(lines), len(lines[-1]) + 1)


def _blank_outside(text: str, start: int, end: int) -> str:
    """``text`` with every character outside [start, end) but line breaks made a space, so
    positions in the fragment keep their line and column."""
    def blank(part: str) -> str:
        return "".join(c if c == "\n" else " " for c in part)

    return blank(text[:start]) + text[start:end] + blank(text[end:])


def parse_outputs(text: str, start: int, end: int) -> tuple[ast.Measure, ...]:
    """A comma-separated list of ``expr [AS name]`` at text[start:end] (name may be None)."""
    return _parse_rule(_blank_outside(text, start, end), "outputs", text)


def parse_conjuncts(text: str, start: int, end: int) -> list[ast.Expr]:
    """The conditions at text[start:end]: expressions joined by AND or written one per line
    (a line that begins where the expression before it is complete starts the next one)."""
    out: list[ast.Expr] = []
    while text[start:end].strip():
        try:
            _lark().parse(_blank_outside(text, start, end), start="expr")
            stop = end
        except UnexpectedToken as e:
            tok = e.token
            line_start = text.rfind("\n", 0, tok.start_pos) + 1 if tok.type != "$END" else -1
            if tok.type == "$END" or tok.start_pos <= start:
                _parse_rule(_blank_outside(text, start, end), "expr", text)  # raises the positioned error
                raise
            if text[line_start:tok.start_pos].strip():
                try:  # a complete condition before the token: two conditions on one line
                    _lark().parse(_blank_outside(text, start, tok.start_pos), start="expr")
                except UnexpectedInput:
                    _parse_rule(_blank_outside(text, start, end), "expr", text)
                    raise
                raise QueryError("SYNTAX", f"unexpected {tok.value!r} after a complete condition; join "
                                 "conditions with AND or write each on its own line", _span_of(tok), text) from None
            stop = tok.start_pos
        except UnexpectedInput:
            _parse_rule(_blank_outside(text, start, end), "expr", text)
            raise
        out.append(_parse_rule(_blank_outside(text, start, stop), "expr", text))
        start = stop
    return out


@functools.lru_cache(maxsize=256)
def _parse_text(text: str) -> ast.Query:
    # The tree is immutable, so a query run again (a loop, a benchmark, every Spark task)
    # is parsed once.
    query = _parse_rule(text, "start", text, fragment=False)
    return ast.Query(**{**query.__dict__, "text": text})
