"""Names and types: binding expressions (columns, literals, operators, calls, CAST,
navigation, CLASSIFIER, MATCH_NUMBER, aggregates) into typed, name-resolved trees, with the
standard rules on where each may stand. A mixin of the Analyzer."""

from __future__ import annotations

from sparkcep import functions
from sparkcep.analysis.bound import (
    AggregateSpec,
    BAgg,
    BBetween,
    BBinary,
    BCall,
    BCase,
    BClassifier,
    BColumn,
    BExpr,
    BIn,
    BIsNull,
    BLiteral,
    BMatchNumber,
    BNav,
    BRowLabel,
    BUnary,
    LabelSet,
    Pointer,
    Type,
)
from sparkcep.analysis.patterns import find_in_pattern
from sparkcep.analysis.scope import Scope
from sparkcep.functions import casts, library
from sparkcep.language import ast
from sparkcep.types import MAX_DECIMAL_PRECISION, DecimalType, decimal_arithmetic_type, is_decimal
from sparkcep.values import DECIMAL_CONTEXT, decimal_from_double

_LITERAL_TYPES = {
    "string": Type.VARCHAR,
    "boolean": Type.BOOLEAN,
    "null": Type.NULL,
    "interval": Type.INTERVAL,
    "date": Type.DATE,
    "timestamp": Type.TIMESTAMP,
}


TIME_TYPES = (Type.TIMESTAMP, Type.DATE)


def element_type(e: BExpr, aggregates: list[AggregateSpec]) -> Type:
    """The type of an array's elements where the tree shows it (ANY where it does not)."""
    if isinstance(e, BAgg) and e.index < len(aggregates) and aggregates[e.index].func in _ARRAY_AGGREGATES:
        return aggregates[e.index].arg.type
    if isinstance(e, BCall) and e.name == "ARRAY":
        t = library.unify([a.type for a in e.args])
        return t if t not in (None, Type.NULL) else Type.ANY
    return Type.ANY


_ARRAY_AGGREGATES = {"COLLECT", "MAX_N", "MIN_N", "MAX_BY_N", "MIN_BY_N"}  # arrays of their argument
# Built-in functions that take DECIMAL values as they are (they pick or compare values);
# every other built-in function reads a decimal argument as a double.
_DECIMAL_FUNCTIONS = {"COALESCE", "NULLIF", "GREATEST", "LEAST", "IF", "ABS"}


def as_double(x: BExpr) -> BExpr:
    """``x`` read as a double (the implicit coercion of a decimal where a double is wanted)."""
    if not is_decimal(x.type):
        return x
    return BCall("CAST AS DOUBLE", (x,), casts.cast_function("DOUBLE", (), False), True, Type.DOUBLE)


def _decimal_literal(x: BExpr) -> BLiteral | None:
    """A double literal as the decimal it spells (1.05 is DECIMAL(3, 2), as Trino types it),
    or None when it has no such form (NaN, 1e-50)."""
    if not (isinstance(x, BLiteral) and x.type is Type.DOUBLE and isinstance(x.value, float)):
        return None
    try:
        d = decimal_from_double(x.value)
    except Exception:
        return None
    if not d.is_finite() or d.adjusted() >= MAX_DECIMAL_PRECISION:
        return None  # 1e300: past any decimal's digits (quantize below would trap)
    if d.as_tuple().exponent > 0:
        d = DECIMAL_CONTEXT.quantize(d, 1)
    scale = -d.as_tuple().exponent
    precision = max(len(d.as_tuple().digits), scale, 1)
    if precision > MAX_DECIMAL_PRECISION:
        return None
    return BLiteral(d, DecimalType(precision, scale))


def meet_decimals(xs: list[BExpr]) -> list[BExpr]:
    """Values that stand together (operands, CASE results) where a DECIMAL meets a DOUBLE:
    double literals become the decimals they spell, so ``price > 10.05`` compares exactly;
    otherwise the decimals are read as doubles, as Trino coerces them."""
    if not any(is_decimal(x.type) for x in xs) or not any(x.type is Type.DOUBLE for x in xs):
        return xs
    literals = [_decimal_literal(x) if x.type is Type.DOUBLE else None for x in xs]
    if all(lit is not None for x, lit in zip(xs, literals, strict=True) if x.type is Type.DOUBLE):
        return [lit if lit is not None else x for x, lit in zip(xs, literals, strict=True)]
    return [as_double(x) for x in xs]


_SERIES_AGGREGATES = {"LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST", "ZSCORE"}
_DOUBLE_AGGREGATES = _SERIES_AGGREGATES | {"STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP"}


class ExpressionBinder:
    """Binds expressions for the Analyzer (which supplies error, column, labels_of...)."""

    def bind(self, e: ast.Expr, scope: Scope, in_row: bool, row_labels: list | None = None) -> BExpr:
        """Bind ``e``. Outside a row context column references become pointers; inside one
        (the argument of a navigation or aggregate) they are plain columns of that row, and
        their qualifiers are collected in ``row_labels``."""
        if isinstance(e, ast.Literal):
            return self.bind_literal(e)
        if isinstance(e, ast.ColumnRef):
            return self.bind_column(e, scope, in_row, row_labels)
        if isinstance(e, ast.Star):
            raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", e)
        if isinstance(e, ast.Call):
            return self.bind_call(e, scope, in_row, row_labels)
        if isinstance(e, ast.Unary):
            x = self.bind(e.operand, scope, in_row, row_labels)
            if e.op == "NOT":
                self.expect_bool(x, e.operand, "NOT")
                return BUnary("NOT", x, Type.BOOLEAN)
            if not (x.type.numeric or is_decimal(x.type) or x.type in (Type.NULL, Type.INTERVAL, Type.ANY)):
                raise self.error("TYPE_MISMATCH", f"cannot negate a {x.type.value}", e)
            return BUnary("-", x, x.type if x.type is not Type.NULL else Type.BIGINT)
        if isinstance(e, ast.Binary):
            return self.bind_binary(e, scope, in_row, row_labels)
        if isinstance(e, ast.Between):
            x, lo, hi = meet_decimals([self.bind(v, scope, in_row, row_labels) for v in (e.operand, e.low, e.high)])
            self.expect_comparable([x, lo, hi], e)
            return BBetween(x, lo, hi, e.negated)
        if isinstance(e, ast.InList):
            x, *rest = meet_decimals([self.bind(v, scope, in_row, row_labels) for v in (e.operand, *e.items)])
            items = tuple(rest)
            self.expect_comparable([x, *items], e)
            return BIn(x, items, e.negated)
        if isinstance(e, ast.IsNull):
            return BIsNull(self.bind(e.operand, scope, in_row, row_labels), e.negated)
        if isinstance(e, ast.Cast):
            return self.bind_cast(e, scope, in_row, row_labels)
        if isinstance(e, ast.Like):
            args = [self.bind(x, scope, in_row, row_labels) for x in (e.operand, e.pattern, e.escape) if x is not None]
            for a, node in zip(args, (e.operand, e.pattern, e.escape), strict=False):
                if a.type not in (Type.VARCHAR, Type.NULL, Type.ANY):
                    raise self.error("TYPE_MISMATCH", f"LIKE needs strings, not {a.type.value}", node)
            like = BCall("LIKE", tuple(args), library.like, True, Type.BOOLEAN)
            return BUnary("NOT", like, Type.BOOLEAN) if e.negated else like
        if isinstance(e, ast.Case):
            operand = self.bind(e.operand, scope, in_row, row_labels) if e.operand is not None else None
            whens = []
            for cond, result in e.whens:
                c = self.bind(cond, scope, in_row, row_labels)
                if operand is None:
                    self.expect_bool(c, cond, "WHEN")
                else:
                    self.expect_comparable([operand, c], cond)
                whens.append((c, self.bind(result, scope, in_row, row_labels)))
            default = self.bind(e.default, scope, in_row, row_labels) if e.default is not None else None
            results = meet_decimals([r for _, r in whens] + ([default] if default is not None else []))
            whens = [(c, r) for (c, _), r in zip(whens, results, strict=False)]
            default = results[-1] if default is not None else None
            rtype = library.unify([r.type for _, r in whens] + ([default.type] if default else []))
            if rtype is None:
                raise self.error("TYPE_MISMATCH", "the results of CASE have different types", e)
            return BCase(operand, tuple(whens), default, rtype)
        raise self.error("NOT_SUPPORTED", f"{type(e).__name__} is not supported here", e)  # pragma: no cover

    def bind_cast(self, e: ast.Cast, scope: Scope, in_row: bool, row_labels) -> BExpr:
        x = self.bind(e.operand, scope, in_row, row_labels)
        span = e.type_span if e.type_span is not None else e.span
        if e.type_name in casts.DECIMAL_NAMES:
            target = casts.decimal_target(e.sizes)
            if isinstance(target, str):
                raise self.error("NOT_SUPPORTED", target, span)
            if self.segment:
                raise self.error("NOT_SUPPORTED", "a segment query computes in doubles: CAST to DECIMAL is not "
                                 "supported there", span)
        else:
            target = casts.CAST_TARGETS.get(e.type_name)
            if target is None:
                raise self.error("NOT_SUPPORTED", f"CAST to {e.type_name} is not supported (supported: "
                                 f"{', '.join(sorted((*casts.CAST_TARGETS, 'DECIMAL')))})", span)
            if e.sizes and (target is not Type.VARCHAR or len(e.sizes) > 1):
                raise self.error("NOT_SUPPORTED", f"{e.type_name} takes no size here (only VARCHAR(n) and DECIMAL(p, s))", span)
            if e.sizes and e.sizes[0] < 1:
                raise self.error("NOT_SUPPORTED", "VARCHAR(n) needs n of at least 1", span)
        if x.type not in (Type.NULL, Type.ANY) and not casts.castable(x.type, target):
            raise self.error("TYPE_MISMATCH", f"cannot cast {x.type.value} to {target.value}", e)
        sizes = f"({', '.join(map(str, e.sizes))})" if e.sizes else ""
        what = ("TRY_CAST" if e.try_ else "CAST") + f" AS {e.type_name}{sizes}"
        return BCall(what, (x,), casts.cast_function(e.type_name, e.sizes, e.try_), True, target)

    def bind_literal(self, e: ast.Literal) -> BLiteral:
        if e.kind == "number":
            return BLiteral(e.value, Type.BIGINT if isinstance(e.value, int) else Type.DOUBLE)
        return BLiteral(e.value, _LITERAL_TYPES[e.kind])

    def bind_column(self, e: ast.ColumnRef, scope: Scope, in_row: bool, row_labels: list | None) -> BExpr:
        labels: LabelSet = None
        if e.qualifier is not None:
            labels = self.labels_of(e.qualifier)
            if labels is None:
                raise self.error("UNKNOWN_VARIABLE", f"{e.qualifier.text} is not a pattern variable or subset", e.qualifier)
        idx, col = self.column(e.column)
        if self.segment and is_decimal(col.type):
            # The segment executor computes aggregates over float64 series: never a decimal.
            raise self.error("NOT_SUPPORTED", f"a segment query does not read decimal columns ({col.name!r} is "
                             f"{col.type.value}); cast it to double in the source", e)
        inner = BColumn(idx, col.name, col.type)
        if in_row:
            row_labels.append((labels, e))
            return inner
        return BNav(Pointer(labels), inner, col.type)

    def expect_bool(self, x: BExpr, node: ast.Node, what: str) -> None:
        if x.type not in (Type.BOOLEAN, Type.NULL, Type.ANY):
            raise self.error("TYPE_MISMATCH", f"{what} needs a boolean, not {x.type.value}", node)

    def expect_comparable(self, xs: list[BExpr], node: ast.Node, equality: bool = False) -> None:
        types = [x.type for x in xs]
        if Type.ANY in types:
            return
        if library.unify(types) is None or (Type.ARRAY in types and not equality):
            names = " and ".join(dict.fromkeys(t.value for t in types if t is not Type.NULL))  # in their order
            raise self.error("TYPE_MISMATCH", f"cannot compare {names}", node)

    def bind_binary(self, e: ast.Binary, scope: Scope, in_row: bool, row_labels) -> BExpr:
        left = self.bind(e.left, scope, in_row, row_labels)
        right = self.bind(e.right, scope, in_row, row_labels)
        op = e.op
        lt, rt = left.type, right.type
        if op in ("AND", "OR"):
            self.expect_bool(left, e.left, op)
            self.expect_bool(right, e.right, op)
            return BBinary(op, left, right, Type.BOOLEAN)
        if Type.DOUBLE in (lt, rt):
            left, right = meet_decimals([left, right])
            lt, rt = left.type, right.type
        if op in ("=", "<>", "<", "<=", ">", ">="):
            self.expect_comparable([left, right], e, equality=op in ("=", "<>"))
            return BBinary(op, left, right, Type.BOOLEAN)
        if op == "||":
            if Type.ARRAY in (lt, rt) and all(t in (Type.ARRAY, Type.NULL, Type.ANY) for t in (lt, rt)):
                return BCall("CONCAT", (left, right), functions.lookup("CONCAT").impl, True, Type.ARRAY)
            for t, n in ((lt, e.left), (rt, e.right)):
                if t not in (Type.VARCHAR, Type.NULL, Type.ANY):
                    raise self.error("TYPE_MISMATCH", f"'||' joins strings, not {t.value}", n)
            return BBinary(op, left, right, Type.VARCHAR)
        # Arithmetic.
        if Type.ANY in (lt, rt):
            return BBinary(op, left, right, Type.ANY)
        if lt is Type.NULL or rt is Type.NULL:
            other = rt if lt is Type.NULL else lt
            return BBinary(op, left, right, other if other is not Type.NULL else Type.BIGINT)
        decimal = decimal_arithmetic_type(op, lt, rt)
        if decimal is not None:
            return BBinary(op, left, right, decimal)
        if lt.numeric and rt.numeric:
            rtype = Type.DOUBLE if Type.DOUBLE in (lt, rt) else Type.BIGINT
            return BBinary(op, left, right, rtype)
        if op == "-" and lt in TIME_TYPES and lt is rt:
            return BBinary(op, left, right, Type.INTERVAL)
        # A date moved by whole days stays a date (Trino: date + INTERVAL '1' DAY is a date).
        if op in ("+", "-") and lt in TIME_TYPES and rt is Type.INTERVAL:
            return BBinary(op, left, right, lt)
        if op == "+" and lt is Type.INTERVAL and rt in TIME_TYPES:
            return BBinary(op, left, right, rt)
        if op in ("+", "-") and lt is Type.INTERVAL and rt is Type.INTERVAL:
            return BBinary(op, left, right, Type.INTERVAL)
        if op in ("*", "/") and lt is Type.INTERVAL and rt.numeric:
            return BBinary(op, left, right, Type.INTERVAL)
        if op == "*" and lt.numeric and rt is Type.INTERVAL:
            return BBinary(op, left, right, Type.INTERVAL)
        raise self.error("TYPE_MISMATCH", f"cannot apply '{op}' to {lt.value} and {rt.value}", e)

    def bind_call(self, e: ast.Call, scope: Scope, in_row: bool, row_labels) -> BExpr:
        name = e.name.key if not e.name.quoted else e.name.text.upper()
        if e.semantics is not None:
            if scope.clause == "DEFINE" and e.semantics == "FINAL":
                raise self.error("INVALID_SEMANTICS", "FINAL is not allowed in DEFINE (conditions see only the rows matched so far)", e)
            if e.semantics == "PREVIOUS":
                if scope.clause != "DEFINE":
                    raise self.error("INVALID_SEMANTICS", "PREVIOUS is only allowed in DEFINE (the rows matched before the current row)", e)
                if name not in functions.AGGREGATES:
                    raise self.error("INVALID_SEMANTICS", f"PREVIOUS applies to aggregates, not {e.name.text} (use LAST(X.col, 1) for the previous row of X)", e)
            if name not in ("FIRST", "LAST", "CLASSIFIER") and name not in functions.AGGREGATES:
                raise self.error("INVALID_SEMANTICS", f"RUNNING and FINAL apply to FIRST, LAST, CLASSIFIER and aggregates, not {e.name.text}", e)
        if name == "WINDOW" and not e.name.quoted and functions.lookup(name) is None:
            if not self.segment or scope.clause != "DEFINE":
                raise self.error("INVALID_WINDOW", "window(...) is a condition of a variable in a segment query's "
                                 "DEFINE (DEFINE SEGMENT v AS window(...))", e)
            if in_row:
                raise self.error("INVALID_WINDOW", "window(...) cannot be nested", e)
            return self.bind_window(e)
        if name == "CLASSIFIER" and self.segment:
            raise self.error("NOT_SUPPORTED", "CLASSIFIER is not supported in a segment query", e)
        if name in functions.NAVIGATION:
            if in_row:
                raise self.error("INVALID_NAVIGATION", f"{e.name.text} cannot be nested here (only FIRST/LAST inside PREV/NEXT)", e)
            return self.bind_navigation(e, name, scope)
        if name in functions.AGGREGATES or functions.user_aggregate(name) is not None:
            if in_row:
                raise self.error("INVALID_AGGREGATE", f"aggregate {e.name.text} cannot be used inside a navigation or another aggregate", e)
            return self.bind_aggregate(e, name, scope)
        if name == "CLASSIFIER":
            labels = self.classifier_labels(e)
            if in_row:
                # Inside an aggregate: the label of the row being aggregated; CLASSIFIER(U)
                # limits the rows to U's, as U.col would.
                row_labels.append((labels, e))
                return BRowLabel()
            running = e.semantics != "FINAL"
            return BClassifier(Pointer(labels, running=running))
        if name == "MATCH_NUMBER":
            if e.args:
                raise self.error("WRONG_ARGUMENTS", "MATCH_NUMBER takes no arguments", e)
            if in_row and self.segment:
                raise self.error("NOT_SUPPORTED", "MATCH_NUMBER inside an aggregate of a segment query is not supported", e)
            if scope.clause == "DEFINE" and self.q.all_matches:
                raise self.error("NOT_SUPPORTED", "MATCH_NUMBER in DEFINE is not supported with ALL MATCHES (the "
                                 "matches from one row are numbered only once all are found)", e)
            return BMatchNumber()
        if e.extract and name not in library.TIME_FIELDS:
            raise self.error("NOT_SUPPORTED", f"EXTRACT({e.name.text} FROM ...) is not supported (fields: "
                             f"{', '.join(sorted(library.TIME_FIELDS))})", e.name)
        fn = functions.lookup(name)
        if fn is None:
            raise self.error("UNKNOWN_FUNCTION", f"unknown function {e.name.text} (register your own with sparkcep.register_function)", e.name)
        for a in e.args:
            if isinstance(a, ast.Star):
                raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", a)
        if name == "MOD" and not fn.user_defined and len(e.args) == 2 and not e.distinct:
            # mod(n, m) is n % m (Trino): one typing and one evaluation for both (its own typed
            # mod(bigint, double) as a bigint, and truncated the remainder)
            return self.bind_binary(ast.Binary("%", e.args[0], e.args[1], span=e.span), scope, in_row, row_labels)
        args = tuple(self.bind(a, scope, in_row, row_labels) for a in e.args)
        if not fn.user_defined and any(is_decimal(a.type) for a in args):
            if name not in _DECIMAL_FUNCTIONS:
                args = tuple(as_double(a) for a in args)
            else:
                args = tuple(meet_decimals(list(args)))
                if name == "ABS" and is_decimal(args[0].type):
                    return BCall(name, args, library.decimal_abs, True, args[0].type)
        if len(args) < fn.min_args or (fn.max_args is not None and len(args) > fn.max_args):
            want = str(fn.min_args) if fn.max_args == fn.min_args else f"{fn.min_args} to {fn.max_args if fn.max_args is not None else 'any number of'}"
            noun = "argument" if want == "1" else "arguments"
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes {want} {noun}, got {len(args)}", e)
        rtype = fn.result([a.type for a in args]) if not fn.user_defined else fn.result([])
        if isinstance(rtype, str):
            label = "the subscript" if name == "$SUBSCRIPT" else e.name.text
            raise self.error("TYPE_MISMATCH", f"{label} {rtype}", e)
        if name in ("$SUBSCRIPT", "ELEMENT_AT", "ARRAY_MAX", "ARRAY_MIN") and args[0].type is Type.ARRAY:
            rtype = element_type(args[0], self.aggregates_of(scope))
        if e.distinct:
            raise self.error("NOT_SUPPORTED", f"DISTINCT applies to aggregates, not {e.name.text}", e)
        return BCall(name, args, fn.impl, fn.null_on_null, rtype, expensive=fn.cost == "expensive")

    def aggregates_of(self, scope: Scope) -> list[AggregateSpec]:
        return scope.aggregates

    def classifier_labels(self, e: ast.Call) -> LabelSet:
        if len(e.args) > 1:
            raise self.error("WRONG_ARGUMENTS", "CLASSIFIER takes at most one pattern variable", e)
        if not e.args:
            return None
        arg = e.args[0]
        if not (isinstance(arg, ast.ColumnRef) and arg.qualifier is None):
            raise self.error("WRONG_ARGUMENTS", "the argument of CLASSIFIER is a pattern variable or subset name", arg)
        labels = self.labels_of(arg.column)
        if labels is None:
            raise self.error("UNKNOWN_VARIABLE", f"{arg.column.text} is not a pattern variable or subset", arg)
        return labels

    def offset_arg(self, e: ast.Call, idx: int) -> int:
        if len(e.args) <= idx:
            return 1 if e.name.key in ("PREV", "NEXT") else 0
        a = e.args[idx]
        if not (isinstance(a, ast.Literal) and a.kind == "number" and isinstance(a.value, int)):
            raise self.error("INVALID_NAVIGATION", f"the offset of {e.name.text} must be a whole-number literal", a)
        if a.value < 0:
            raise self.error("INVALID_NAVIGATION", f"the offset of {e.name.text} must not be negative", a)
        if a.value > 2**31 - 1:
            raise self.error("NUMBER_OUT_OF_RANGE", f"the offset of {e.name.text} is out of range (at most {2**31 - 1})", a)
        return a.value

    def row_expression(self, arg: ast.Expr, scope: Scope, what: str, node: ast.Node) -> tuple[BExpr, LabelSet, bool]:
        """Bind a navigation or aggregate argument; its column references must all refer to
        one label set. Returns (expression, label set, whether any column was referenced)."""
        refs: list = []
        inner = self.bind(arg, scope, in_row=True, row_labels=refs)
        sets = {labels for labels, _ in refs}
        if len(sets) > 1:
            raise self.error("INCONSISTENT_LABELS", f"all column references in {what} must use the same pattern variable", node)
        labels = next(iter(sets)) if sets else None
        return inner, labels, bool(refs)

    def bind_navigation(self, e: ast.Call, name: str, scope: Scope) -> BExpr:
        if not e.args or len(e.args) > 2:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes an expression and an optional offset", e)
        offset = self.offset_arg(e, 1)
        arg = e.args[0]
        if isinstance(arg, ast.Star):
            raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", arg)
        running = e.semantics != "FINAL"
        if isinstance(arg, ast.Call) and arg.name.key == "CLASSIFIER" and not arg.name.quoted:
            # CLASSIFIER navigated: the label of the row the navigation reaches (NULL outside
            # the match).
            labels = self.classifier_labels(arg)
            if name in ("PREV", "NEXT"):
                physical = -offset if name == "PREV" else offset
                self.check_classifier_define(scope, labels, physical, e)
                return BClassifier(Pointer(labels, True, 0, physical, running))
            return BClassifier(Pointer(labels, name == "LAST", offset, 0, running))
        if name in ("PREV", "NEXT"):
            physical = -offset if name == "PREV" else offset
            if isinstance(arg, ast.Call) and arg.name.key in ("FIRST", "LAST"):
                nested = self.bind_navigation(arg, arg.name.key, scope)
                p = nested.pointer
                if isinstance(nested, BClassifier):
                    self.check_classifier_define(scope, p.labels, physical, e)
                    return BClassifier(Pointer(p.labels, p.last, p.offset, physical, p.running))
                return BNav(Pointer(p.labels, p.last, p.offset, physical, p.running), nested.inner, nested.type)
            if isinstance(arg, ast.Call) and arg.name.key in ("PREV", "NEXT"):
                raise self.error("INVALID_NAVIGATION", f"{arg.name.text} cannot be nested in {e.name.text}", arg)
            inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
            if not has_col:
                raise self.error("INVALID_NAVIGATION", f"the argument of {e.name.text} must reference a column", arg)
            return BNav(Pointer(labels, True, 0, physical, True), inner, inner.type)
        if isinstance(arg, ast.Call) and arg.name.key in functions.NAVIGATION:
            raise self.error("INVALID_NAVIGATION", f"{arg.name.text} cannot be nested in {e.name.text} (only FIRST/LAST inside PREV/NEXT)", arg)
        inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
        if not has_col:
            raise self.error("INVALID_NAVIGATION", f"the argument of {e.name.text} must reference a column", arg)
        return BNav(Pointer(labels, name == "LAST", offset, 0, running), inner, inner.type)

    def check_classifier_define(self, scope: Scope, labels: LabelSet, physical: int, node: ast.Node) -> None:
        """In DEFINE, PREV/NEXT of a variable's CLASSIFIER needs the label of the row next
        to that variable's row: the match so far knows it where rows are contiguous, not
        where event selection or negation lets a match skip rows."""
        if (scope.clause == "DEFINE" and physical and labels is not None
                and (self.q.event_selection != "PARTITION" or find_in_pattern(self.q.pattern, (ast.PNot,)))):
            raise self.error("NOT_SUPPORTED", "in DEFINE, PREV/NEXT of CLASSIFIER(v) is not supported when a match "
                             "may skip rows (EVENT SELECTION or negation); CLASSIFIER() is", node)

    def bind_aggregate(self, e: ast.Call, name: str, scope: Scope) -> BExpr:
        name = functions.AGGREGATE_ALIASES.get(name, name)
        running = e.semantics != "FINAL"
        previous = e.semantics == "PREVIOUS"
        user = functions.user_aggregate(name) if name not in functions.AGGREGATES else None
        if user is not None:
            name = "USER:" + name
        if name == "ZSCORE":
            return self.bind_zscore(e, scope)
        want = 2 if name in ("MAX_BY", "MIN_BY", "LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED") else 1
        if user is not None and len(e.args) == 2:
            want = 2
        args = e.args
        count = None
        if (name in ("MAX", "MIN") and len(args) == 2) or (name in ("MAX_BY", "MIN_BY") and len(args) == 3):
            # max(x, n) / max_by(x, y, n): the n largest as an array (Trino)
            count = self.count_argument(e, args[-1])
            args, name = args[:-1], name + "_N"
        if name == "COUNT" and not args and not e.distinct:
            args = (ast.Star(None, span=e.span),)  # count() is count(*)
        if len(args) != want:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes {want} argument{'s' if want > 1 else ''}", e)
        arg = args[0]
        if isinstance(arg, ast.Star):
            if name != "COUNT" or e.distinct:
                raise self.error("WRONG_ARGUMENTS", f"'*' is only allowed as the argument of COUNT, not {e.name.text}", arg)
            labels: LabelSet = None
            if arg.qualifier is not None:
                labels = self.labels_of(arg.qualifier)
                if labels is None:
                    raise self.error("UNKNOWN_VARIABLE", f"{arg.qualifier.text} is not a pattern variable or subset", arg.qualifier)
            spec = AggregateSpec("COUNT", labels, None, running, Type.BIGINT, previous)
        else:
            inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
            key = None
            if want == 2:
                key, key_labels, key_col = self.row_expression(args[1], scope, e.name.text, e)
                if has_col and key_col and key_labels != labels:
                    raise self.error("INCONSISTENT_LABELS", f"all column references in {e.name.text} must use the same pattern variable", e)
                labels = labels if has_col else key_labels
                if key.type is Type.ARRAY:
                    raise self.error("TYPE_MISMATCH", f"{e.name.text} needs a key that can be ordered, not array", args[1])
            if name in _DOUBLE_AGGREGATES or name.startswith("USER:"):
                inner = as_double(inner)  # statistics of decimals are computed in doubles
                key = as_double(key) if key is not None else None
            rtype = self.aggregate_type(name, inner.type, arg)
            if count is not None and e.distinct:
                raise self.error("NOT_SUPPORTED", f"DISTINCT with {e.name.text}(..., n) is not supported", e)
            spec = AggregateSpec(name, labels, inner, running, rtype, previous, key, e.distinct, count)
        if spec in scope.aggregates:
            index = scope.aggregates.index(spec)
        else:
            scope.aggregates.append(spec)
            index = len(scope.aggregates) - 1
        return BAgg(index, spec.type)

    def count_argument(self, e: ast.Call, arg: ast.Node) -> int:
        if not (isinstance(arg, ast.Literal) and arg.kind == "number" and isinstance(arg.value, int) and arg.value >= 1):
            raise self.error("WRONG_ARGUMENTS", f"the last argument of {e.name.text}(..., n) is a whole number ≥ 1", arg)
        if arg.value > 10_000:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text}(..., n) keeps at most 10000 values", arg)
        return arg.value

    def aggregate_type(self, name: str, t: Type, arg: ast.Node) -> Type:
        numeric_ok = t.numeric or t in (Type.NULL, Type.ANY)
        if name in _SERIES_AGGREGATES or name.startswith("USER:"):
            if not (numeric_ok or t in TIME_TYPES):
                raise self.error("TYPE_MISMATCH", f"{name.removeprefix('USER:')} needs numbers or timestamps, not {t.value}", arg)
            return Type.DOUBLE
        if name == "COUNT" or name == "COUNT_IF":
            if name == "COUNT_IF" and t not in (Type.BOOLEAN, Type.NULL, Type.ANY):
                raise self.error("TYPE_MISMATCH", f"COUNT_IF needs a boolean condition, not {t.value}", arg)
            return Type.BIGINT
        if name in ("SUM", "AVG") and self.segment and t in TIME_TYPES:
            return Type.DOUBLE  # a segment query counts timestamps as seconds since the epoch
        if is_decimal(t) and name in ("SUM", "AVG", "DELTA"):
            # Exact (Trino): SUM keeps the scale at 38 digits, AVG the input type, DELTA a difference.
            return (DecimalType(MAX_DECIMAL_PRECISION, t.scale) if name == "SUM"
                    else t if name == "AVG" else decimal_arithmetic_type("-", t, t))
        if name == "SUM":
            if not (numeric_ok or t is Type.INTERVAL):
                raise self.error("TYPE_MISMATCH", f"SUM needs numbers, not {t.value}", arg)
            return t if t is not Type.NULL else Type.BIGINT
        if name in ("AVG", "STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP"):
            if not numeric_ok:
                raise self.error("TYPE_MISMATCH", f"{name} needs numbers, not {t.value}", arg)
            return Type.DOUBLE
        if name in ("MIN", "MAX"):
            if t is Type.ARRAY:
                raise self.error("TYPE_MISMATCH", f"{name} needs values that can be ordered, not {t.value}", arg)
            return t
        if name in ("BOOL_AND", "BOOL_OR"):
            if t not in (Type.BOOLEAN, Type.NULL, Type.ANY):
                raise self.error("TYPE_MISMATCH", f"{name} needs booleans, not {t.value}", arg)
            return Type.BOOLEAN
        if name in ("MAX_BY", "MIN_BY", "ARBITRARY"):
            return t
        if name in ("MAX_N", "MIN_N"):
            if t is Type.ARRAY:
                raise self.error("TYPE_MISMATCH", f"{name[:3]} needs values that can be ordered, not {t.value}", arg)
            return Type.ARRAY
        if name in ("MAX_BY_N", "MIN_BY_N"):
            return Type.ARRAY
        if name == "DELTA":
            if t in TIME_TYPES:
                return Type.INTERVAL
            if numeric_ok or t is Type.INTERVAL:
                return t if t is not Type.NULL else Type.BIGINT
            raise self.error("TYPE_MISMATCH", f"DELTA needs numbers or timestamps, not {t.value}", arg)
        return Type.ARRAY  # COLLECT
