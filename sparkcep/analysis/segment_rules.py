"""The rules of segment queries (T-REX): where segment variables, window() and the time-series
aggregates may stand, and which references a segment condition may make. A mixin of the
Analyzer."""

from __future__ import annotations

from sparkcep.analysis.binding import TIME_TYPES
from sparkcep.analysis.bound import (
    AggregateSpec,
    BAgg,
    BClassifier,
    BExpr,
    BLiteral,
    BNav,
    BWindow,
    Type,
)
from sparkcep.analysis.patterns import (
    calls_named,
    expr_children,
    find_in_pattern,
    places_of,
    reluctant,
)
from sparkcep.analysis.scope import Scope
from sparkcep.language import ast

_WINDOW_UNITS = {"DAY": 86400.0, "HOUR": 3600.0, "MINUTE": 60.0, "SECOND": 1.0}


def conjuncts_ast(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary) and e.op == "AND":
        return conjuncts_ast(e.left) + conjuncts_ast(e.right)
    return [e]


def bare_column(e: ast.Expr) -> ast.ColumnRef | None:
    """A column reference outside every function call (aggregate, navigation, window)."""
    if isinstance(e, ast.ColumnRef):
        return e
    if isinstance(e, ast.Call):
        return None
    for c in expr_children(e):
        got = bare_column(c)
        if got is not None:
            return got
    return None


class SegmentRules:
    def check_segment_query(self, pattern: ast.PatternNode, defined: dict[str, ast.Define]) -> None:
        """What a segment query may contain (the rest is refused with the reason)."""
        q = self.q
        unsupported = [
            (q.rows_per_match.mode == "ALL", q.rows_per_match, "ALL ROWS PER MATCH"),
            (q.skip is not None, q.skip, "AFTER MATCH SKIP (segment queries return every matched segment; ALL MATCHES may be written)"),
            (q.event_selection != "PARTITION", q.event_selection_span, "EVENT SELECTION"),
            (q.within is not None, q.within, "WITHIN (use window(col, lo, hi, unit) on a variable)"),
            (q.maxlength is not None, q.maxlength_span, "MAXLENGTH (use window(lo, hi) on a variable)"),
            (bool(q.subsets), q.subsets[0] if q.subsets else None, "SUBSET"),
            (self.mode == "matchregex", None, "the matchregex mode"),
        ]
        for bad, node, what in unsupported:
            if bad:
                raise self.error("NOT_SUPPORTED", f"{what} is not supported in a segment query (one with SEGMENT "
                                 "variables, & or ~)", node)
        other = find_in_pattern(pattern, (ast.PExclude, ast.PPermute, ast.PNot, ast.PStart, ast.PEnd))
        if other is not None:
            what = {ast.PExclude: "exclusions {- -}", ast.PPermute: "PERMUTE", ast.PNot: "SASE negation !X",
                    ast.PStart: "the anchor ^", ast.PEnd: "the anchor $"}[type(other)]
            raise self.error("NOT_SUPPORTED", f"{what} is not supported in a segment query", other)
        quant = find_in_pattern(pattern, (ast.PQuant,))
        if quant is not None and reluctant(pattern):
            raise self.error("NOT_SUPPORTED", "reluctant quantifiers have no meaning in a segment query (every "
                             "matched segment is returned)", reluctant(pattern))

    def check_segment_condition(self, d: ast.Define) -> None:
        """window() only as the condition or a conjunct of it; in a segment variable's
        condition every column inside an aggregate, a navigation or window()."""
        for call in calls_named(d.condition, "WINDOW"):
            if not any(call is c for c in conjuncts_ast(d.condition)):
                raise self.error("INVALID_WINDOW", "window(...) must be the whole condition or one of its AND-ed "
                                 "conditions", call)
        if d.segment:
            bare = bare_column(d.condition)
            if bare is not None:
                raise self.error("BARE_COLUMN", f"in a segment variable's condition every column sits inside an "
                                 f"aggregate or window() (write first({bare.column.text}), last(...), avg(...), ...)",
                                 bare)

    def check_references(self, pattern: ast.PatternNode, defines: dict[int, BExpr], scope: Scope) -> None:
        """A variable another condition reads occurs once, outside quantifiers, ~ and |; so
        does (for now) the variable whose condition reads it."""
        from sparkcep.analysis.bound import nodes

        for var, cond in defines.items():
            reads = set()
            for x in nodes(cond):
                labels = None
                if isinstance(x, (BNav, BClassifier)):
                    labels = x.pointer.labels
                elif isinstance(x, BAgg):
                    labels = scope.aggregates[x.index].labels
                if labels is not None and labels != frozenset({var}):
                    reads |= set(labels)
            if not reads:
                continue
            for v, role in [(r, "is read by another variable's condition") for r in sorted(reads)] + [
                    (var, "reads another variable (not supported yet when it repeats)")]:
                name = self.variables[v]
                places = places_of(pattern, name)
                if len(places) != 1 or places[0]:
                    node = next(d for d in self.q.defines if d.name.key == self.variables[var])
                    raise self.error("INVALID_REFERENCE", f"{name} {role}, so it must occur exactly once in PATTERN, "
                                     "outside quantifiers, ~ and |", node)

    def check_segment_measure(self, m: ast.Measure, expr: BExpr, scope: Scope) -> None:
        from sparkcep.analysis.bound import nodes

        for x in nodes(expr):
            labels = x.pointer.labels if isinstance(x, (BNav, BClassifier)) else (
                scope.aggregates[x.index].labels if isinstance(x, BAgg) else None)
            if isinstance(x, BClassifier) or labels is not None:
                raise self.error("NOT_SUPPORTED", "MEASURES of a segment query read the matched segment's rows: "
                                 "variable-qualified references and CLASSIFIER are not supported there yet", m.expr)

    def bind_window(self, e: ast.Call) -> BWindow:
        args = list(e.args)
        if self.defining is None:
            raise self.error("INVALID_WINDOW", "window(...) is a condition of a variable in DEFINE", e)
        column = None
        unit = 1.0
        if args and isinstance(args[0], ast.ColumnRef):
            ref = args.pop(0)
            if ref.qualifier is not None and (self.labels_of(ref.qualifier) != frozenset({self.defining})):
                raise self.error("INVALID_WINDOW", "window(col, ...) measures the variable's own segment", ref)
            idx, col = self.column(ref.column)
            if not (col.type.numeric or col.type in TIME_TYPES):
                raise self.error("TYPE_MISMATCH", f"window() spans need a numeric or timestamp column, not {col.type.value}", ref)
            column = idx
            last = args[-1] if args else None
            if isinstance(last, ast.ColumnRef) and last.qualifier is None:
                args.pop()
                name = last.column.text.upper()
                name = name[:-1] if name.endswith("S") else name
                if name not in _WINDOW_UNITS:
                    raise self.error("INVALID_WINDOW", "the unit of a window is DAY, HOUR, MINUTE or SECOND", last)
                if col.type not in TIME_TYPES:
                    raise self.error("INVALID_WINDOW", f"a unit is for timestamp columns; {col.name!r} is {col.type.value} "
                                     "(its span is in its own units)", last)
                unit = _WINDOW_UNITS[name]
            if len(args) not in (1, 2):
                raise self.error("WRONG_ARGUMENTS", "window(col, lo, hi [, unit]) or window(col, size [, unit]) takes a "
                                 "column, its bounds and, for timestamps, a unit (seconds by default)", e)
        elif len(args) > 2:
            raise self.error("WRONG_ARGUMENTS", "window() takes (), (n), (lo, hi), or (col, lo, hi [, unit])", e)
        bounds = []
        for a in args:
            if isinstance(a, ast.Literal) and a.kind == "null":
                bounds.append(None)
            elif isinstance(a, ast.Literal) and a.kind == "number" and a.value >= 0:
                if column is None and not isinstance(a.value, int):
                    raise self.error("INVALID_WINDOW", "a window in rows takes whole numbers", a)
                bounds.append(a.value)
            else:
                raise self.error("INVALID_WINDOW", "window bounds are numbers ≥ 0 (or NULL for no upper bound)", a)
        if len(bounds) == 1:
            bounds = [bounds[0], bounds[0]]
        low, high = (bounds + [None, None])[:2]
        if low is None and high is not None:
            raise self.error("INVALID_WINDOW", "a window needs a lower bound (0 for none)", e)
        if low is not None and high is not None and low > high:
            raise self.error("INVALID_WINDOW", f"the window's lower bound {low} exceeds its upper bound {high}", e)
        return BWindow(column, low, high, unit)

    def bind_zscore(self, e: ast.Call, scope: Scope) -> BExpr:
        if not self.segment or self.defining is None or self.defining in {
                self.variables.index(d.name.key) for d in self.q.defines if d.segment}:
            raise self.error("NOT_SUPPORTED", "zscore(x, k) is a condition of a point variable in a segment query", e)
        if len(e.args) != 2:
            raise self.error("WRONG_ARGUMENTS", "zscore takes a column and a number of rows", e)
        k = e.args[1]
        if not (isinstance(k, ast.Literal) and k.kind == "number" and isinstance(k.value, int) and k.value >= 1):
            raise self.error("WRONG_ARGUMENTS", "the second argument of zscore is a whole number of rows ≥ 1", k)
        inner, labels, _ = self.row_expression(e.args[0], scope, e.name.text, e)
        self.aggregate_type("ZSCORE", inner.type, e.args[0])
        spec = AggregateSpec("ZSCORE", labels, inner, True, Type.DOUBLE, False, BLiteral(k.value, Type.BIGINT))
        if spec not in scope.aggregates:
            scope.aggregates.append(spec)
        return BAgg(scope.aggregates.index(spec), Type.DOUBLE)
