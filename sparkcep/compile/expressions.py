"""Bound expressions → Python closures, with SQL's three-valued logic and NULL rules.

Two kinds of closure come out:
- row closures ``f(cols, pos, label=None, number=None)`` evaluate an expression on one row (navigation and
  aggregate arguments); ``label`` is the row's variable id, which CLASSIFIER() in an
  aggregate's argument reads;
- match closures ``g(ctx)`` evaluate DEFINE conditions and MEASURES against a context that
  resolves value pointers (``ctx.at(pid)``), aggregates (``ctx.agg(i)``), classifiers
  (``ctx.label_at(pid)``) and the match number; ``ctx.cols`` holds the partition's columns.

Nothing here evaluates text: the closures are built from the checked syntax tree only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sparkcep.analysis.bound import (
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
    Pointer,
    Type,
    nodes,
)
from sparkcep.errors import DataError
from sparkcep.functions.library import array_equal
from sparkcep.types import is_decimal
from sparkcep.values import (
    DECIMAL_CONTEXT,
    FunctionError,
    any_decimal_op,
    decimal_negate,
    decimal_op,
    fits_bigint,
    mixed_types,
    shift,
    sql_and,
    sql_between,
    sql_in,
    sql_or,
    zones_aligned,
)


class EvaluationError(DataError):
    """An expression failed on a value (e.g. integer division by zero). ``position`` is the
    row within its partition, filled in by the matcher; the engine maps it to the input row."""

    position: int | None = None

    def at(self, position: int, where: str) -> EvaluationError:
        err = EvaluationError(f"{self.message} {where}")
        err.position = position
        return err


def _div(a, b):
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        if b == 0:
            raise EvaluationError("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    try:
        return a / b
    except ZeroDivisionError:
        if isinstance(a, (int, float)):
            return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1, b)
        raise EvaluationError("division by zero") from None


def _mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise EvaluationError("division by zero")
        return a - b * _div(a, b)
    return _fmod(a, b)


def _fdiv(a, b):
    """Division of doubles (IEEE: x/0 is ±Inf, 0/0 NaN), whatever Python type the values
    have (COALESCE(x, 0) in a double expression gives the int 0)."""
    a, b = float(a), float(b)
    if b == 0:
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _fmod(a, b):
    a, b = float(a), float(b)
    # IEEE's remainder: NaN for a zero divisor and for an infinite dividend (math.fmod raises there)
    return math.nan if b == 0 or math.isinf(a) else math.fmod(a, b)


def _checked(fn: Callable[[Any, Any], Any], what: str) -> Callable[[Any, Any], Any]:
    """``fn`` with SQL's range rules: a bigint result outside 64 bits and a float or
    interval overflow are errors on the row, not Python exceptions."""
    def op(a, b):
        try:
            r = fn(a, b)
        except OverflowError:
            raise EvaluationError(f"{what} is out of range") from None
        if type(r) is int and not fits_bigint(r):
            raise EvaluationError(f"bigint overflow in {what}")
        return r
    return op


def negate(v):
    """``-v`` with SQL's range rules: -(-2^63) is a bigint overflow on the row, an interval
    past Python's range an error too (as _checked's operators)."""
    try:
        r = -v
    except OverflowError:
        raise EvaluationError("negation is out of range") from None
    if type(r) is int and not fits_bigint(r):
        raise EvaluationError("bigint overflow in negation")
    return r


def negate_any(v):
    if isinstance(v, decimal.Decimal):
        return DECIMAL_CONTEXT.minus(v)
    if isinstance(v, _NOT_ARITHMETIC):  # a value of a function declared returns='any'
        raise EvaluationError(f"cannot negate a value of type {type(v).__name__}")
    return negate(v)


def in_row_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose refusals (a decimal overflow, a division by zero) are errors on the row."""
    def op(*args):
        try:
            return fn(*args)
        except FunctionError as exc:
            raise EvaluationError(str(exc)) from None
    return op


_VERB = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "take the remainder of", "||": "concatenate"}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": _checked(lambda a, b: a + b, "addition"),
    "-": _checked(lambda a, b: a - b, "subtraction"),
    "*": _checked(lambda a, b: a * b, "multiplication"),
    "/": _checked(_div, "division"),
    "%": _mod,
    "||": lambda a, b: a + b,
}

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _zones_aligned(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn`` on timestamps where one side may carry a time zone and the other not
    (values.zones_aligned)."""
    def op(a, b):
        return fn(*zones_aligned(a, b))
    return op


def _time_plus(a, b):
    """timestamp + interval (either order) on the instant, in the timestamp's zone; other
    operands (intervals, numbers) add as usual."""
    if isinstance(a, dt.datetime) and isinstance(b, dt.timedelta):
        return shift(a, b)
    if isinstance(b, dt.datetime) and isinstance(a, dt.timedelta):
        return shift(b, a)
    if isinstance(b, dt.date) and isinstance(a, dt.timedelta):
        a, b = b, a
    if isinstance(a, dt.date) and isinstance(b, dt.timedelta):
        return a + _whole_days(b)
    return a + b


def _time_minus(a, b):
    if isinstance(a, dt.datetime) and isinstance(b, dt.timedelta):
        return shift(a, -b)
    if isinstance(a, dt.date) and isinstance(b, dt.timedelta):
        return a - _whole_days(b)
    return a - b  # two instants (values.ZoneAt makes Python subtract instants), two intervals


def _whole_days(d: dt.timedelta) -> dt.timedelta:
    """An interval added to a date: whole days only (as Trino refuses hours on a date)."""
    if d.seconds or d.microseconds:
        raise EvaluationError("cannot add hours, minutes or seconds to a date")
    return d


_TIME_COMPARE = {k: _zones_aligned(f) for k, f in _COMPARE.items()}
_DOUBLE_ARITH = {"/": _checked(_fdiv, "division"), "%": _fmod}
_TIME_ARITH = {**{k: _zones_aligned(f) for k, f in _ARITH.items()},
               "+": _zones_aligned(_checked(_time_plus, "addition")),
               "-": _zones_aligned(_checked(_time_minus, "subtraction"))}


def _is_time(*es: BExpr | None) -> bool:
    return any(x is not None and x.type in (Type.TIMESTAMP, Type.DATE, Type.ANY) for x in es)


def _array_eq(a, b):
    return array_equal(a, b) if isinstance(a, list) and isinstance(b, list) else a == b


def _array_ne(a, b):
    r = _array_eq(a, b)
    return None if r is None else not r


def comparison(op: str, *operands: BExpr) -> Callable[[Any, Any], bool]:
    """The function for comparison ``op`` between values of ``operands``' types."""
    untyped = any(x is not None and x.type is Type.ANY for x in operands)
    if op in ("=", "<>") and any(x is not None and x.type in (Type.ARRAY, Type.ANY) for x in operands):
        fn = _array_eq if op == "=" else _array_ne
        return _typed_values(fn, "compare") if untyped else fn
    fn = (_TIME_COMPARE if _is_time(*operands) else _COMPARE)[op]
    return _typed_values(fn, "compare") if untyped else fn


def binary_operator(e: BBinary) -> Callable[[Any, Any], Any]:
    """The function of a comparison or arithmetic node on two non-NULL values, with SQL's
    rules for its types (every evaluator that works value by value uses it)."""
    if e.op in _COMPARE:
        return comparison(e.op, e.left, e.right)
    if is_decimal(e.type):
        return in_row_errors(decimal_op(e.op, e.type))  # exact, at the node's scale
    if e.op in ("/", "%") and e.type is Type.DOUBLE:
        return _DOUBLE_ARITH[e.op]  # the node's type decides, not the values'
    op = (_TIME_ARITH if _is_time(e.left, e.right) else _ARITH)[e.op]
    if e.type is Type.ANY and e.op != "||":
        op = in_row_errors(any_decimal_op(e.op, op))  # decimals may arrive untyped
    if Type.ANY in (e.type, e.left.type, e.right.type):
        op = _typed_values(op if e.op == "||" else _numeric_only(op), _VERB[e.op])
    return op


def _numeric_only(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn`` refusing what Python's operators accept but SQL arithmetic does not ('ab' * 2,
    'a' + 'b', True + 1): values of a function declared returns='any' are not typed."""
    def op(a, b):
        if isinstance(a, _NOT_ARITHMETIC) or isinstance(b, _NOT_ARITHMETIC):
            raise TypeError
        return fn(a, b)
    return op


_NOT_ARITHMETIC = (str, bytes, list, tuple, bool)


def _typed_values(fn: Callable[[Any, Any], Any], what: str) -> Callable[[Any, Any], Any]:
    """``fn`` over values of a function declared returns='any', whose types may not meet:
    an error on the row, not Python's TypeError."""
    def op(a, b):
        try:
            return fn(a, b)
        except TypeError:
            raise EvaluationError(str(mixed_types(what, a, b))) from None
        except (EvaluationError, FunctionError):
            raise
        except Exception as e:  # noqa: BLE001 - an untyped object's own operator failed (a raising __eq__)
            raise EvaluationError(f"cannot {what} values of types {type(a).__name__} and {type(b).__name__}: "
                                  f"{type(e).__name__}: {e}") from None
    return op


class PointerTable:
    """Assigns each distinct Pointer an id (the index contexts resolve)."""

    def __init__(self):
        self.pointers: list[Pointer] = []

    def id(self, p: Pointer) -> int:
        try:
            return self.pointers.index(p)
        except ValueError:
            self.pointers.append(p)
            return len(self.pointers) - 1


class CallRoute(Protocol):
    """Where calls of expensive functions go while it is set (tasks.speculate's memo)."""

    def call(self, name: str, impl: Callable[..., Any], vals: list[Any]) -> Any: ...


# Per thread: a route for expensive calls, or None to call the function here.
_routes = threading.local()


def set_call_route(route: CallRoute | None) -> CallRoute | None:
    """Send this thread's expensive calls to ``route`` (None: call them directly); returns
    the route it replaces."""
    old = getattr(_routes, "route", None)
    _routes.route = route
    return old


def current_call_route() -> CallRoute | None:
    # A function, not the thread-local itself, in closures: closures shipped to worker
    # processes (cloudpickle) take their globals along, and a thread-local does not pickle.
    return getattr(_routes, "route", None)


def call_function(name: str, impl: Callable[..., Any], vals: list[Any] | tuple[Any, ...]) -> Any:
    """``impl(*vals)``, anything it raises an EvaluationError naming the function (the one
    message every evaluator gives, workers included)."""
    try:
        return impl(*vals)
    except FunctionError as exc:  # a value the function refuses (a bad cast, an index)
        raise EvaluationError(str(exc)) from None
    except (Exception, SystemExit) as exc:  # a user function may raise anything (sys.exit too): name it
        what = f"SystemExit({exc.code!r})" if isinstance(exc, SystemExit) else exc
        raise EvaluationError(f"function {name} failed: {what}") from exc


def compile_row(e: BExpr, names: tuple[str, ...] = ()) -> Callable[..., Any]:
    """A closure ``f(cols, pos, label=None, number=None)`` for a row expression (columns of a single row;
    ``names`` are the variable names CLASSIFIER() gives)."""
    return _compile(e, None, row=True, names=names)


def compile_match(e: BExpr, pointers: PointerTable, names: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """A closure ``g(ctx)`` for a DEFINE condition or a measure."""
    return _compile(e, pointers, row=False, names=names)


def reads_match_number(e: BExpr) -> bool:
    """Whether a row expression reads MATCH_NUMBER() (its caller then passes the number)."""
    return any(isinstance(x, BMatchNumber) for x in nodes(e))


def reads_row_label(e: BExpr) -> bool:
    """Whether a row expression reads its row's label (CLASSIFIER() inside it)."""
    return any(isinstance(x, BRowLabel) for x in nodes(e))


@dataclass(frozen=True)
class _Compiling:
    """Where an expression compiles: for a row (``row``: closures over (cols, pos, label,
    number)) or a match context (closures over ctx, navigation through ``pointers``)."""

    pointers: PointerTable | None
    row: bool
    names: tuple[str, ...]

    def sub(self, x: BExpr):
        return _compile(x, self.pointers, self.row, self.names)


def _compile(e: BExpr, pointers: PointerTable | None, row: bool, names: tuple[str, ...] = ()):
    build = _COMPILERS.get(type(e))
    if build is None:  # pragma: no cover
        raise AssertionError(f"cannot compile {e!r}")
    return build(e, _Compiling(pointers, row, names))


def _literal(e: BLiteral, c: _Compiling):
    v = e.value
    return (lambda cols, pos, label=None, number=None: v) if c.row else (lambda ctx: v)


def _column(e: BColumn, c: _Compiling):
    i = e.index
    if not c.row:  # pragma: no cover - the analyzer wraps columns in BNav
        raise AssertionError("bare column outside a row context")
    return lambda cols, pos, label=None, number=None: cols[i][pos]


def _row_label(e: BRowLabel, c: _Compiling):
    names = c.names
    return lambda cols, pos, label=None, number=None: None if label is None else names[label]


def _navigation(e: BNav, c: _Compiling):
    pid = c.pointers.id(e.pointer)
    inner = _compile(e.inner, None, row=True, names=c.names)
    if reads_row_label(e.inner):
        # CLASSIFIER() inside the navigated expression: the label of the row reached.
        ids = {name: i for i, name in enumerate(c.names)}

        def nav_labelled(ctx):
            q = ctx.at(pid)
            if q is None:
                return None
            label = ctx.label_at(pid)
            return inner(ctx.cols, q, None if label is None else ids[label], ctx.match_number)
        return nav_labelled

    if reads_match_number(e.inner):
        def nav_numbered(ctx):
            q = ctx.at(pid)
            return None if q is None else inner(ctx.cols, q, None, ctx.match_number)
        return nav_numbered

    def nav(ctx):
        q = ctx.at(pid)
        return None if q is None else inner(ctx.cols, q)
    return nav


def _aggregate(e: BAgg, c: _Compiling):
    i = e.index
    return lambda ctx: ctx.agg(i)


def _classifier(e: BClassifier, c: _Compiling):
    pid = c.pointers.id(e.pointer)
    return lambda ctx: ctx.label_at(pid)


def _match_number(e: BMatchNumber, c: _Compiling):
    if c.row:  # inside a navigation or an aggregate: the number its caller passes
        return lambda cols, pos, label=None, number=None: number
    return lambda ctx: ctx.match_number


def _unary(e: BUnary, c: _Compiling):
    f = c.sub(e.operand)
    if e.op == "NOT":
        def op(v):
            return None if v is None else not v
    else:
        neg = (in_row_errors(decimal_negate) if is_decimal(e.type)
               else negate_any if e.type is Type.ANY else negate)

        def op(v):
            return None if v is None else neg(v)
    if c.row:
        return lambda cols, pos, label=None, number=None: op(f(cols, pos, label, number))
    return lambda ctx: op(f(ctx))


def _binary(e: BBinary, c: _Compiling):
    lf, rf = c.sub(e.left), c.sub(e.right)
    if e.op in ("AND", "OR"):
        short = False if e.op == "AND" else True
        comb = sql_and if e.op == "AND" else sql_or
        if c.row:
            def logic_row(cols, pos, label=None, number=None):
                a = lf(cols, pos, label, number)
                return short if a is short else comb(a, rf(cols, pos, label, number))
            return logic_row

        def logic(ctx):
            a = lf(ctx)
            return short if a is short else comb(a, rf(ctx))
        return logic
    op = binary_operator(e)
    if c.row:
        def binop_row(cols, pos, label=None, number=None):
            a = lf(cols, pos, label, number)
            if a is None:
                return None
            b = rf(cols, pos, label, number)
            return None if b is None else op(a, b)
        return binop_row

    def binop(ctx):
        a = lf(ctx)
        if a is None:
            return None
        b = rf(ctx)
        return None if b is None else op(a, b)
    return binop


def _between(e: BBetween, c: _Compiling):
    xf, lof, hif = c.sub(e.operand), c.sub(e.low), c.sub(e.high)
    neg = e.negated
    ge, le = comparison(">=", e.operand, e.low, e.high), comparison("<=", e.operand, e.low, e.high)

    def between(*args):
        x, lo, hi = xf(*args), lof(*args), hif(*args)
        return sql_between(None if x is None or lo is None else ge(x, lo),
                           None if x is None or hi is None else le(x, hi), neg)
    return between


def _in(e: BIn, c: _Compiling):
    xf = c.sub(e.operand)
    items = [c.sub(i) for i in e.items]
    neg = e.negated
    eq = comparison("=", e.operand, *e.items)

    def in_list(*args):
        x = xf(*args)
        if x is None:
            return sql_in(False, (), neg)
        return sql_in(True, (None if v is None else bool(eq(v, x)) for v in (f(*args) for f in items)), neg)
    return in_list


def _is_null(e: BIsNull, c: _Compiling):
    xf = c.sub(e.operand)
    if e.negated:
        return lambda *args: xf(*args) is not None
    return lambda *args: xf(*args) is None


def _case(e: BCase, c: _Compiling):
    of = c.sub(e.operand) if e.operand is not None else None
    whens = [(c.sub(w), c.sub(r)) for w, r in e.whens]
    df = c.sub(e.default) if e.default is not None else (lambda *args: None)
    eq = comparison("=", e.operand, *(w for w, _ in e.whens)) if e.operand is not None else None

    def case(*args):
        if of is None:
            for w, r in whens:
                if w(*args) is True:
                    return r(*args)
        else:
            v = of(*args)
            if v is not None:
                for w, r in whens:
                    x = w(*args)
                    if x is not None and eq(x, v):
                        return r(*args)
        return df(*args)
    return case


def _call(e: BCall, c: _Compiling):
    fs = [c.sub(a) for a in e.args]
    impl = e.impl
    null_on_null = e.null_on_null
    name = e.name

    if e.expensive:
        def expensive_call(*args):
            vals = [f(*args) for f in fs]
            if null_on_null and any(v is None for v in vals):
                return None
            route = current_call_route()
            if route is not None:
                return route.call(name, impl, vals)
            return call_function(name, impl, vals)
        return expensive_call

    def call(*args):
        vals = [f(*args) for f in fs]
        if null_on_null and any(v is None for v in vals):
            return None
        return call_function(name, impl, vals)
    return call


_COMPILERS = {BLiteral: _literal, BColumn: _column, BRowLabel: _row_label, BNav: _navigation, BAgg: _aggregate,
              BClassifier: _classifier, BMatchNumber: _match_number, BUnary: _unary, BBinary: _binary,
              BBetween: _between, BIn: _in, BIsNull: _is_null, BCase: _case, BCall: _call}
