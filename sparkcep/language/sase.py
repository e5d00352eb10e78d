"""SASE+ pattern queries → the MATCH_RECOGNIZE syntax tree (the same analyzer, compiler and
runtime then run them).

    PATTERN SEQ(Shelf a, !(Register b), Exit c)
    WHERE skip_till_next_match(a, b, c) { [tag_id] }
    WITHIN 12 hours
    RETURN a.tag_id, c.time

Translation (written down in the README):
- Events of several types share one table; ``Shelf a`` selects rows whose ``type_column``
  equals 'Shelf' (no type test when ``type_column`` is None). Variables become upper-case
  pattern variables (A, B, ...).
- A Kleene component ``Stock+ a[]`` becomes two variables, ``A_1 A_I*`` (the first event and
  the later ones) and ``SUBSET A = (A_1, A_I)``. In predicates ``a[1]`` is A_1's row,
  ``a[i]`` the current A_I row, ``a[i-k]`` the k-th previously selected one
  (``LAST(A.x, k)``), ``f(a[..i-1].x)`` an aggregate over the events selected before
  (``PREVIOUS f(A.x)``), and ``a[a.len]`` / ``f(a[].x)`` the last event / an aggregate of a
  finished Kleene closure, read from a later component.
- Each predicate goes to the DEFINE of the component it names last (SASE's placement by the
  last identifier); ``[attr]`` becomes PARTITION BY attr. The strategy function sets EVENT
  SELECTION (default: partition contiguity, SQL's). ``WITHIN n EVENTS`` is MAXLENGTH n,
  ``WITHIN n hours`` (or a bare number) bounds the ``order_by`` column.
- Output is SASE's default, every match (ALL MATCHES): one row per match with the RETURN
  expressions, or without RETURN every row of every match with its match number and
  variable.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.language.ast import Span
from sparkcep.language.parser import MAX_COUNT, check_depth

AGGREGATES = {"AVG", "SUM", "MIN", "MAX", "COUNT"}
_UNITS = {"HOUR": "hours", "MINUTE": "minutes", "SECOND": "seconds", "DAY": "days", "MILLISECOND": "milliseconds"}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    text = (Path(__file__).with_name("sase.lark")).read_text()
    return Lark(text, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)


def _span(meta_or_tok) -> Span:
    if isinstance(meta_or_tok, Token):
        return Span(meta_or_tok.line, meta_or_tok.column, meta_or_tok.end_line, meta_or_tok.end_column)
    if getattr(meta_or_tok, "empty", True):
        return Span(0, 0)
    return Span(meta_or_tok.line, meta_or_tok.column, meta_or_tok.end_line, meta_or_tok.end_column)


# ---------------------------------------------------------------- the parse, as plain data
@dataclass(frozen=True)
class Component:
    kind: str  # "single", "kleene", "negated"
    type: str
    var: str  # as written
    span: Span


@dataclass(frozen=True)
class Ref:
    var: str
    index: tuple | None  # None, ("num", k), ("i",), ("prev", k), ("before", k), ("len",), ("all",)
    attr: str | None
    span: Span


@dataclass(frozen=True)
class Node:
    op: str  # "bin", "not", "neg", "lit", "pct", "equiv", "call", "and", "or"
    args: tuple
    span: Span


@v_args(meta=True)
class _Parse(Transformer):
    def single(self, meta, ch):
        return Component("single", ch[0].value, ch[1].value, _span(meta))

    def kleene(self, meta, ch):
        return Component("kleene", ch[0].value, ch[1].value, _span(meta))

    def negated(self, meta, ch):
        return Component("negated", ch[0].value, ch[1].value, _span(meta))

    def seq(self, meta, ch):
        return ("seq", [c for c in ch if isinstance(c, Component)])

    def strategy(self, meta, ch):
        return ch[0].type

    def strategy_arg(self, meta, ch):
        return ch[0]

    def where_strategy(self, meta, ch):
        return ("where", ch[1], ch[2:-1], ch[-1])

    def where_strategy_only(self, meta, ch):
        return ("where", ch[1], ch[2:], None)  # a strategy without predicates (valid SASE+)

    def where_plain(self, meta, ch):
        return ("where", None, [], ch[1])

    def time_unit(self, meta, ch):
        return ch[0].value.upper().rstrip("S")

    def within(self, meta, ch):
        value = ch[1].value
        number = float(value) if "." in value else int(value)
        return ("within", number, ch[2] if len(ch) > 2 else None, _span(meta))

    def return_item(self, meta, ch):
        expr = ch[0]
        name = ch[-1].value if len(ch) > 1 else None
        return (expr, name, _span(meta))

    def return_clause(self, meta, ch):
        return ("return", [c for c in ch if isinstance(c, tuple)])

    def _chain(self, meta, ch, op):
        items = [c for c in ch if not isinstance(c, Token)]
        return items[0] if len(items) == 1 else Node(op, tuple(items), _span(meta))

    def or_(self, meta, ch):
        return self._chain(meta, ch, "or")

    def and_(self, meta, ch):
        return self._chain(meta, ch, "and")

    def not_(self, meta, ch):
        return Node("not", (ch[-1],), _span(meta))

    def neg(self, meta, ch):
        return Node("neg", (ch[0],), _span(meta))

    def binary(self, meta, ch):
        left, op, right = ch
        text = {"!=": "<>"}.get(op.value, op.value)
        return Node("bin", (text, left, right), _span(meta))

    def percent(self, meta, ch):
        pct = float(ch[0].value.split("%")[0]) / 100.0
        return Node("bin", ("*", Node("lit", (pct, "number"), _span(ch[0])), ch[1]), _span(meta))

    def number(self, meta, ch):
        v = ch[0].value
        return Node("lit", (float(v) if "." in v else int(v), "number"), _span(meta))

    def string(self, meta, ch):
        return Node("lit", (ch[0].value[1:-1].replace("''", "'"), "string"), _span(meta))

    def true(self, meta, ch):
        return Node("lit", (True, "boolean"), _span(meta))

    def false(self, meta, ch):
        return Node("lit", (False, "boolean"), _span(meta))

    def equivalence(self, meta, ch):
        return Node("equiv", tuple(c.value for c in ch), _span(meta))

    def idx_number(self, meta, ch):
        return ("num", int(ch[0].value))

    def idx_i(self, meta, ch):
        _expect_i(ch[0])
        return ("i",)

    def idx_prev(self, meta, ch):
        _expect_i(ch[0])
        return ("prev", int(ch[1].value))

    def idx_before(self, meta, ch):
        _expect_i(ch[0])
        if int(ch[1].value) != 1:
            raise QueryError("NOT_SUPPORTED", "only a[..i-1] (the events selected before) is supported", _span(ch[1]))
        return ("before", 1)

    def idx_len(self, meta, ch):
        if ch[1].value.lower() != "len":
            raise QueryError("SYNTAX", f"expected {ch[0].value}.len inside [ ]", _span(ch[1]))
        return ("len", ch[0].value)

    def idx_all(self, meta, ch):
        return ("all",)

    def ref(self, meta, ch):
        index = ch[1] if len(ch) == 3 else None
        return Ref(ch[0].value, index, ch[-1].value, _span(meta))

    def ref_arg(self, meta, ch):
        index = next((c for c in ch[1:] if isinstance(c, tuple)), None)
        attr = ch[-1].value if isinstance(ch[-1], Token) and len(ch) > 1 else None
        return Ref(ch[0].value, index, attr, _span(meta))

    def call(self, meta, ch):
        return Node("call", (ch[0].value.upper(), ch[1]), _span(meta))

    def start(self, meta, ch):
        return [c for c in ch if isinstance(c, tuple)]


def _expect_i(tok: Token) -> None:
    if tok.value != "i":
        raise QueryError("SYNTAX", f"expected i (the current event of the Kleene closure), not {tok.value!r}", _span(tok))


# ---------------------------------------------------------------- translation
class _Translator:
    def __init__(self, text: str, order_by: str, type_column: str | None):
        self.text = text
        self.order_by = order_by
        self.type_column = type_column

    def error(self, code: str, message: str, span: Span) -> QueryError:
        return QueryError(code, message, span, self.text)

    def run(self, parts: list) -> ast.Query:
        clauses = {p[0]: p for p in parts}
        comps: list[Component] = clauses["seq"][1]
        self.comps = {}
        for pos, c in enumerate(comps):
            key = c.var.lower()
            if key in self.comps:
                raise self.error("DUPLICATE_NAME", f"variable {c.var} is declared twice", c.span)
            self.comps[key] = (pos, c)
        selection = "PARTITION"
        conjuncts: list = []
        if "where" in clauses:
            _, strategy, args, body = clauses["where"]
            if strategy is not None:
                selection = {"STRICT_CONTIGUITY": "STRICT", "PARTITION_CONTIGUITY": "PARTITION",
                             "SKIP_TILL_NEXT_MATCH": "NEXT", "SKIP_TILL_ANY_MATCH": "ANY"}[strategy]
                names = [a.value.lower() for a in args]
                if sorted(names) != sorted(self.comps):
                    raise self.error("INVALID_PATTERN", "the strategy function must list every component of SEQ",
                                     _span(args[0]) if args else Span(0, 0))
            conjuncts = _flatten_and(body) if body is not None else []

        partition: list[ast.Name] = []
        defines: dict[str, list[ast.Expr]] = {}
        for c in conjuncts:
            if isinstance(c, Node) and c.op == "equiv":
                partition += [ast.Name(a, span=c.span) for a in c.args]
                continue
            target = self.target(c)
            defines.setdefault(target, []).append(self.expr(c, target))
        for _, c in self.comps.values():
            if self.type_column is None:
                continue
            test = ast.Binary("=", ast.ColumnRef(None, ast.Name(self.type_column, span=c.span), span=c.span),
                              ast.Literal(c.type, "string", span=c.span), span=c.span)
            for v in self.variables_of(c):
                defines.setdefault(v, []).insert(0, test)

        pattern_items: list[ast.PatternNode] = []
        subsets = []
        for _, c in sorted(self.comps.values(), key=lambda pc: pc[0]):
            if c.kind == "single":
                pattern_items.append(ast.PVar(_name(c.var.upper(), c.span), span=c.span))
            elif c.kind == "negated":
                pattern_items.append(ast.PNot(ast.PVar(_name(c.var.upper(), c.span), span=c.span), span=c.span))
            else:
                first, rest = self.variables_of(c)
                pattern_items.append(ast.PVar(_name(first, c.span), span=c.span))
                pattern_items.append(ast.PQuant(ast.PVar(_name(rest, c.span), span=c.span), 0, None, True, span=c.span))
                subsets.append(ast.SubsetDef(_name(c.var.upper(), c.span),
                                             (_name(first, c.span), _name(rest, c.span)), span=c.span))
        pattern = pattern_items[0] if len(pattern_items) == 1 else ast.PConcat(tuple(pattern_items), span=comps[0].span)

        within = None
        maxlength = None
        maxlength_span = None
        if "within" in clauses:
            _, number, unit, span = clauses["within"]
            if unit == "EVENT":
                if not isinstance(number, int):
                    raise self.error("INVALID_WITHIN", "WITHIN n EVENTS needs a whole number", span)
                if number > MAX_COUNT:
                    raise self.error("NUMBER_OUT_OF_RANGE", f"WITHIN {number} EVENTS is out of range (at most "
                                     f"{MAX_COUNT})", span)
                maxlength, maxlength_span = number, span
            elif unit is None:
                within = ast.Within(number, False, span=span)
            else:
                try:
                    within = ast.Within(dt.timedelta(**{_UNITS[unit]: number}), True, span=span)
                except (OverflowError, ValueError):
                    raise self.error("NUMBER_OUT_OF_RANGE", f"WITHIN {number} {unit.lower()}s is out of range "
                                     "(at most 999999999 days)", span) from None

        if "return" in clauses:
            measures = []
            for i, (expr, name, span) in enumerate(clauses["return"][1]):
                label = name or _auto_name(expr, i)
                measures.append(ast.Measure(self.expr(expr, None), _name(label, span), span=span))
            rows = ast.RowsPerMatch("ONE")
        else:
            span = comps[0].span
            measures = [
                ast.Measure(ast.Call(_name("MATCH_NUMBER", span), (), span=span), _name("match_id", span), span=span),
                ast.Measure(ast.Call(_name("CLASSIFIER", span), (), span=span), _name("variable", span), span=span),
            ]
            rows = ast.RowsPerMatch("ALL")

        define_nodes = []
        for var, exprs in defines.items():
            cond = exprs[0]
            for e in exprs[1:]:
                cond = ast.Binary("AND", cond, e, span=e.span)
            define_nodes.append(ast.Define(_name(var, cond.span), cond, span=cond.span))
        return ast.Query(
            pattern=pattern,
            partition_by=tuple(partition),
            order_by=(ast.SortItem(_name(self.order_by, Span(0, 0))),),
            measures=tuple(measures),
            rows_per_match=rows,
            all_matches=True,
            event_selection=selection,
            within=within,
            maxlength=maxlength,
            maxlength_span=maxlength_span,
            subsets=tuple(subsets),
            defines=tuple(define_nodes),
            text=self.text,
            span=Span(1, 1),
        )

    def variables_of(self, c: Component) -> tuple[str, ...]:
        v = c.var.upper()
        return (v + "_1", v + "_I") if c.kind == "kleene" else (v,)

    def component(self, ref: Ref) -> tuple[int, Component]:
        got = self.comps.get(ref.var.lower())
        if got is None:
            raise self.error("UNKNOWN_VARIABLE", f"{ref.var} is not a component of SEQ", ref.span)
        return got

    def refs(self, node) -> list[Ref]:
        if isinstance(node, Ref):
            return [node]
        if isinstance(node, Node):
            out = []
            for a in node.args:
                if isinstance(a, (Ref, Node)):
                    out += self.refs(a)
            return out
        return []

    def target(self, pred) -> str:
        """The pattern variable whose DEFINE takes ``pred``: the one named last (SASE)."""
        best = None
        for r in self.refs(pred):
            pos, c = self.component(r)
            if c.kind == "kleene":
                kind = r.index[0] if r.index else None
                if kind is None:
                    raise self.error("INVALID_REFERENCE", f"{r.var} is a Kleene closure: write {r.var}[1], {r.var}[i] or {r.var}[{r.var}.len]", r.span)
                rank = (pos, 0) if kind == "num" else (pos, 1) if kind in ("i", "prev", "before") else (pos, 2)
                var = c.var.upper() + ("_1" if kind == "num" else "_I")
            else:
                if r.index is not None:
                    raise self.error("INVALID_REFERENCE", f"{r.var} is a single event; it takes no index", r.span)
                rank, var = (pos, 0), c.var.upper()
            if best is None or rank > best[0]:
                best = (rank, var, r)
        if best is None:
            # A predicate naming no event (a constant, `{ true }`) holds or fails for every
            # match alike: it goes to the first component a match binds.
            pos, c = min((pc for pc in self.comps.values() if pc[1].kind != "negated"), key=lambda pc: pc[0])
            return c.var.upper() + ("_1" if c.kind == "kleene" else "")
        if best[0][1] == 2:
            raise self.error("NOT_SUPPORTED", f"a predicate on {best[2].var}[{best[2].var}.len] or all of {best[2].var}[] must also name a later event", best[2].span)
        return best[1]

    def expr(self, node, target: str | None) -> ast.Expr:
        """``node`` as a MATCH_RECOGNIZE expression in the DEFINE of ``target`` (None: RETURN)."""
        if isinstance(node, Ref):
            return self.ref(node, target)
        op, args, span = node.op, node.args, node.span
        if op == "lit":
            return ast.Literal(args[0], args[1], span=span)
        if op == "bin":
            return ast.Binary(args[0], self.expr(args[1], target), self.expr(args[2], target), span=span)
        if op in ("and", "or"):
            out = self.expr(args[0], target)
            for a in args[1:]:
                out = ast.Binary(op.upper(), out, self.expr(a, target), span=span)
            return out
        if op == "not":
            return ast.Unary("NOT", self.expr(args[0], target), span=span)
        if op == "neg":
            return ast.Unary("-", self.expr(args[0], target), span=span)
        if op == "equiv":
            raise self.error("NOT_SUPPORTED", "an equivalence test [attr] must be one of the predicates joined by AND", span)
        if op == "call":
            return self.aggregate(args[0], args[1], target, span)
        raise AssertionError(op)  # pragma: no cover

    def ref(self, r: Ref, target: str | None) -> ast.Expr:
        pos, c = self.component(r)
        if r.attr is None:
            raise self.error("SYNTAX", f"name an attribute: {r.var}.attr", r.span)
        col = _name(r.attr, r.span)
        var = c.var.upper()
        kind = r.index[0] if r.index else None
        if c.kind == "negated" and target != var:
            raise self.error("INVALID_REFERENCE", f"{r.var} is negated: only its own predicates can read it", r.span)
        if c.kind != "kleene":
            return ast.ColumnRef(_name(var, r.span), col, span=r.span)
        if kind == "num":
            if r.index[1] != 1:
                raise self.error("NOT_SUPPORTED", f"only {r.var}[1] of the first events is supported", r.span)
            return ast.ColumnRef(_name(var + "_1", r.span), col, span=r.span)
        if kind in ("i", "prev"):
            if target != var + "_I":
                raise self.error("INVALID_REFERENCE", f"{r.var}[i] only makes sense in a predicate on the Kleene closure's events", r.span)
            if kind == "i":
                return ast.ColumnRef(_name(var + "_I", r.span), col, span=r.span)
            return _call("LAST", (ast.ColumnRef(_name(var, r.span), col, span=r.span),
                                  ast.Literal(r.index[1], "number", span=r.span)), r.span)
        if kind == "len":
            return _call("LAST", (ast.ColumnRef(_name(var, r.span), col, span=r.span),), r.span)
        raise self.error("INVALID_REFERENCE", f"{r.var}[..i-1] and {r.var}[] are sets of events: use them inside avg, sum, min, max or count", r.span)

    def aggregate(self, func: str, r: Ref, target: str | None, span: Span) -> ast.Expr:
        if func not in AGGREGATES:
            raise self.error("UNKNOWN_FUNCTION", f"unknown function {func.lower()} (SASE aggregates: avg, sum, min, max, count)", span)
        pos, c = self.component(r)
        kind = r.index[0] if r.index else None
        if c.kind != "kleene" or kind not in ("before", "all"):
            raise self.error("INVALID_REFERENCE", f"{func.lower()} aggregates a Kleene closure: {r.var}[..i-1] or {r.var}[]", r.span)
        var = c.var.upper()
        if r.attr is None:
            if func != "COUNT":
                raise self.error("SYNTAX", f"name an attribute: {func.lower()}({r.var}[].attr)", r.span)
            arg: ast.Expr = ast.Star(_name(var, r.span), span=r.span)
        else:
            arg = ast.ColumnRef(_name(var, r.span), _name(r.attr, r.span), span=r.span)
        if kind == "before":
            if target != var + "_I":
                raise self.error("INVALID_REFERENCE", f"{r.var}[..i-1] only makes sense in a predicate on the Kleene closure's events", r.span)
            return ast.Call(_name(func, span), (arg,), "PREVIOUS", span=span)
        return ast.Call(_name(func, span), (arg,), span=span)


def _flatten_and(node) -> list:
    if isinstance(node, Node) and node.op == "and":
        out = []
        for a in node.args:
            out += _flatten_and(a)
        return out
    return [node]


def _name(text: str, span: Span) -> ast.Name:
    return ast.Name(text, span=span)


def _call(name: str, args: tuple, span: Span) -> ast.Call:
    return ast.Call(_name(name, span), args, span=span)


def _auto_name(expr, i: int) -> str:
    if isinstance(expr, Ref):
        idx = ""
        if expr.index is not None:
            idx = {"num": lambda x: f"_{x[1]}", "len": lambda x: "_last"}.get(expr.index[0], lambda x: "")(expr.index)
        return f"{expr.var}{idx}_{expr.attr}"
    if isinstance(expr, Node) and expr.op == "call":
        return f"{expr.args[0].lower()}_{expr.args[1].var}" + (f"_{expr.args[1].attr}" if expr.args[1].attr else "")
    return f"col{i + 1}"


def parse_sase(text: str, order_by: str = "time", type_column: str | None = "event_type") -> ast.Query:
    """Parse a SASE+ query into the MATCH_RECOGNIZE syntax tree."""
    if not isinstance(text, str):
        raise QueryError("SYNTAX", f"query text must be a string, not {type(text).__name__}")
    try:
        tree = _lark().parse(text)
        check_depth(tree, text)  # the transform below recurses
        parts = _Parse().transform(tree)
    except UnexpectedEOF:
        lines = text.splitlines() or [""]
        raise QueryError("SYNTAX", "unexpected end of text", Span(len(lines), len(lines[-1]) + 1), text) from None
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            lines = text.splitlines() or [""]
            raise QueryError("SYNTAX", "unexpected end of text", Span(len(lines), len(lines[-1]) + 1), text) from None
        raise QueryError("SYNTAX", f"unexpected {tok.value!r}", _span(tok), text) from None
    except UnexpectedCharacters as e:
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        raise QueryError("SYNTAX", f"unexpected character {ch!r}", Span(e.line, e.column), text) from None
    except UnexpectedInput as e:  # pragma: no cover
        raise QueryError("SYNTAX", str(e).splitlines()[0], Span(e.line, e.column), text) from None
    except VisitError as e:
        if isinstance(e.orig_exc, QueryError):
            raise e.orig_exc.with_text(text) from None
        raise
    return _Translator(text, order_by, type_column).run(parts)
