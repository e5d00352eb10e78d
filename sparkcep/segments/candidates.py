"""Bound expressions evaluated over a batch of candidate segments at once.

A condition or measure of a segment query is evaluated for many segments together: every
value is a (data, valid) pair of arrays with one entry per candidate. Navigation reads rows of
the segments a ``Frame`` assigns to each variable (the candidate's own segment, or the
segments the match gives the variables it references); aggregates come from the partition's
shared indexes (segments.aggregates). SQL's three-valued logic throughout: ``valid`` False is
NULL, and a condition holds only where it is TRUE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparkcep.aggregates import kernels as agg
from sparkcep.analysis.bound import (
    AggregateSpec,
    BAgg,
    BBetween,
    BBinary,
    BCall,
    BCase,
    BColumn,
    BExpr,
    BIn,
    BIsNull,
    BLiteral,
    BMatchNumber,
    BNav,
    BUnary,
    BWindow,
    LabelSet,
    Type,
)
from sparkcep.compile.aggregates import a_number, seconds
from sparkcep.compile.expressions import EvaluationError, binary_operator, call_function, negate_any
from sparkcep.compile.vectorize import logic
from sparkcep.segments.series import Series
from sparkcep.values import (
    FunctionError,
    between_mask,
    checked_int_div,
    checked_int_negate,
    checked_int_op,
    in_mask,
)

Values = tuple[np.ndarray, np.ndarray]


@dataclass
class Frame:
    """What the expressions of one batch see: per label set, the (starts, ends) of the
    segment it stands for in each candidate; ``own`` for unqualified references."""

    series: Series
    own: tuple[np.ndarray, np.ndarray]
    bindings: dict[frozenset[int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    own_labels: frozenset[int] | None = None
    match_number: np.ndarray | None = None
    aggregates: tuple[AggregateSpec, ...] = ()
    user: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.own[0])

    def segment(self, labels: LabelSet) -> tuple[np.ndarray, np.ndarray]:
        if labels is None or labels == self.own_labels:
            return self.own
        got = self.bindings.get(labels)
        if got is None:  # pragma: no cover - the analyzer and the planner rule this out
            raise AssertionError(f"no segment bound for {sorted(labels)}")
        return got


def holds(e: BExpr, frame: Frame) -> np.ndarray:
    """Where the condition ``e`` is TRUE."""
    d, v = evaluate(e, frame)
    return v & d.astype(bool)


def evaluate(e: BExpr, frame: Frame) -> Values:
    fn = _DISPATCH.get(type(e))
    if fn is None:  # pragma: no cover - the analyzer refuses what segments cannot evaluate
        raise AssertionError(f"cannot evaluate {type(e).__name__} over segments")
    return fn(e, frame)


def _full(value: Any, n: int) -> Values:
    if value is None:
        return np.zeros(n), np.zeros(n, dtype=bool)
    if isinstance(value, bool):
        return np.full(n, value), np.ones(n, dtype=bool)
    if isinstance(value, (int, float)):
        return np.full(n, value), np.ones(n, dtype=bool)
    out = np.empty(n, dtype=object)
    out[:] = [value] * n
    return out, np.ones(n, dtype=bool)


def _literal(e: BLiteral, frame: Frame) -> Values:
    return _full(e.value, frame.size)


def _rows_value(column: int, rows: np.ndarray, ok: np.ndarray, frame: Frame, t: Type) -> Values:
    """Column ``column`` at ``rows`` where ``ok``."""
    series = frame.series
    safe = np.where(ok, rows, 0)
    if t in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN):
        col = series.numeric(column)
        d = col.data[safe] if series.n else np.zeros(len(rows))
        v = ok & (col.valid[safe] if series.n else ok)
        return (d.astype(bool) if t is Type.BOOLEAN else d), v
    values = series.objects(column)
    out = np.empty(len(rows), dtype=object)
    valid = np.zeros(len(rows), dtype=bool)
    for k in np.flatnonzero(ok).tolist():
        x = values[int(rows[k])]
        out[k] = x
        valid[k] = x is not None
    return out, valid


def _nav(e: BNav, frame: Frame) -> Values:
    p = e.pointer
    starts, ends = frame.segment(p.labels)
    rows = (ends - p.offset) if p.last else (starts + p.offset)
    ok = (rows >= starts) & (rows <= ends)
    rows = rows + p.physical
    ok &= (rows >= 0) & (rows < frame.series.n)
    if not isinstance(e.inner, BColumn):  # an expression at that row: evaluate row by row
        return _row_expression(e.inner, rows, ok, frame)
    return _rows_value(e.inner.index, rows, ok, frame, e.inner.type)


def _row_expression(inner: BExpr, rows: np.ndarray, ok: np.ndarray, frame: Frame) -> Values:
    from sparkcep.compile.expressions import compile_row

    f = compile_row(inner)
    cols = _ObjectColumns(frame.series)
    out = np.empty(len(rows), dtype=object)
    valid = np.zeros(len(rows), dtype=bool)
    for k in np.flatnonzero(ok).tolist():
        x = f(cols, int(rows[k]))
        out[k] = x
        valid[k] = x is not None
    return _narrow(out, valid, inner.type)


class _ObjectColumns:
    """Columns as Python lists, for the row evaluator (compile.expressions)."""

    def __init__(self, series: Series):
        self.series = series

    def __getitem__(self, i: int):
        return self.series.objects(i)


def _narrow(out: np.ndarray, valid: np.ndarray, t: Type) -> Values:
    """An object array of numbers as a numeric array (the fast paths want those)."""
    if t in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN):
        fill = False if t is Type.BOOLEAN else 0
        data = np.array([x if ok else fill for x, ok in zip(out.tolist(), valid.tolist(), strict=True)],
                        dtype=bool if t is Type.BOOLEAN else (np.int64 if t is Type.BIGINT else np.float64))
        if t is Type.BIGINT and len(data) == 0:
            data = data.astype(np.int64)
        return data, valid
    return out, valid


def _window(e: BWindow, frame: Frame) -> Values:
    starts, ends = frame.own
    n = frame.size
    ok = np.ones(n, dtype=bool)
    length = ends - starts + 1
    if e.column is None:
        if e.low is not None:
            ok &= length >= max(int(e.low), 1)
        if e.high is not None:
            ok &= length <= e.high
        return ok, np.ones(n, dtype=bool)
    col = frame.series.numeric(e.column)
    if frame.series.n == 0:
        return ok, ok
    span = (col.data[ends] - col.data[starts]).astype(np.float64) / e.unit
    valid = col.valid[starts] & col.valid[ends]
    if e.low is not None:
        ok &= span >= e.low - 1e-9 * abs(e.low)
    if e.high is not None:
        ok &= span <= e.high + 1e-9 * abs(e.high)
    ok &= valid & ~np.isnan(span)
    return ok, np.ones(n, dtype=bool)  # a window is TRUE or FALSE, never NULL


# ---------------------------------------------------------------- aggregates
def _agg(e: BAgg, frame: Frame) -> Values:
    spec = frame.aggregates[e.index]
    starts, ends = frame.segment(spec.labels)
    series = frame.series
    if spec.arg is None:  # COUNT(*)
        return (ends - starts + 1).astype(np.int64), np.ones(len(starts), dtype=bool)
    if series.n == 0:
        return np.zeros(len(starts)), np.zeros(len(starts), dtype=bool)
    f = spec.func
    if f in ("COUNT", "SUM", "AVG") and not spec.distinct and _numeric(spec.arg):
        ask = {"COUNT": agg.Sums.count_of, "SUM": agg.Sums.sum_of, "AVG": agg.Sums.avg_of}[f]
        return _indexed(series, ("sums", spec.arg), agg.Sums, [_column(spec.arg, series)], ask, starts, ends)
    if f in ("MIN", "MAX") and _numeric(spec.arg) and spec.arg.type is not Type.TIMESTAMP:
        ask = agg.SparseTable.min_of if f == "MIN" else agg.SparseTable.max_of
        d, v = _indexed(series, ("sparse", spec.arg), agg.SparseTable, [_column(spec.arg, series)], ask, starts, ends)
        return (d.astype(bool), v) if spec.type is Type.BOOLEAN else (d, v)  # booleans are held as 0/1
    if f in ("LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED"):
        signed = f.endswith("SIGNED")
        if not series.sharing:  # compiled, so the baseline measures sharing, not Python
            return agg.r2_per_segment(_column(spec.arg, series), _column(spec.key, series), starts, ends, signed)
        return _indexed(series, ("regression", spec.arg, spec.key), agg.Regression,
                        [_column(spec.arg, series), _column(spec.key, series)],
                        lambda r, s, e: r.r2(s, e, signed=signed), starts, ends)
    if f == "MANN_KENDALL_TEST":
        m = series.index(("mann-kendall", spec.arg), lambda: agg.MannKendall(_column(spec.arg, series)))
        return m.z(starts, ends)
    if f == "ZSCORE":
        z = series.index(("zscore", spec.arg, spec.key),
                         lambda: agg.zscore(_column(spec.arg, series), int(spec.key.value)))
        return z[0][ends], z[1][ends]
    if f.startswith("USER:"):
        user = frame.user[f[5:]]
        cols = [_column(a, series) for a in (spec.arg, spec.key) if a is not None]
        if user.index is not None and series.sharing:
            idx = series.index(("user", f, spec.arg, spec.key), lambda: agg.user_index(user, cols))
            return agg.user_lookup(user, cols, starts, ends, idx)
        return agg.user_lookup(user, cols, starts, ends, plain=True)
    return _fold(spec, starts, ends, frame)


def _indexed(series: Series, key, make, columns: list[agg.Column], ask, starts, ends) -> Values:
    """``ask(structure, starts, ends)`` of the structure ``make(*columns)``: built once per
    series and shared by every segment (T-REX's index()), or, with sharing off, built over
    each segment's own rows (the paper's baseline without computation sharing)."""
    if series.sharing:
        return ask(series.index(key, lambda: make(*columns)), starts, ends)
    return agg.per_segment(make, columns, ask, starts, ends)


def _numeric(e: BExpr) -> bool:
    return e.type in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN, Type.TIMESTAMP)


def _column(e: BExpr, series: Series) -> agg.Column:
    """A row expression over the whole partition as a numeric column."""
    if isinstance(e, BColumn):
        return series.numeric(e.index)

    def build() -> agg.Column:
        from sparkcep.compile.expressions import compile_row

        f = compile_row(e)
        cols = _ObjectColumns(series)
        vals = [f(cols, i) for i in range(series.n)]
        if e.type is Type.ANY:  # a function declared returns='any': analysis could not type it
            for i, v in enumerate(vals):
                a_number("a series aggregate", v, i)
        valid = np.array([v is not None for v in vals], dtype=bool)
        data = np.array([_as_number(v) for v in vals], dtype=np.float64)
        return agg.Column(data, valid)
    return series.index(("row", e), build)


def _as_number(v) -> float:
    return 0.0 if v is None else seconds(v)


def _fold(spec: AggregateSpec, starts, ends, frame: Frame) -> Values:
    """Any other aggregate, folded row by row over each segment (compile.aggregates)."""
    from sparkcep.compile.aggregates import build

    a = build(spec)
    cols = _ObjectColumns(frame.series)
    out = np.empty(len(starts), dtype=object)
    valid = np.zeros(len(starts), dtype=bool)
    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        state = a.initial
        for r in range(s, e + 1):
            state = a.step(state, cols, r, None)
        x = a.result(state)
        out[k] = x
        valid[k] = x is not None
    return _narrow(out, valid, spec.type)


def _match_number(e: BMatchNumber, frame: Frame) -> Values:
    return frame.match_number, np.ones(frame.size, dtype=bool)


# ---------------------------------------------------------------- operators
def _elementwise(fn: Callable[..., Any], args: list[Values], t: Type, null_on_null: bool = True) -> Values:
    n = len(args[0][0]) if args else 0
    out = np.empty(n, dtype=object)
    valid = np.zeros(n, dtype=bool)
    lists = [(d.tolist(), v.tolist()) for d, v in args]
    for k in range(n):
        vals = [d[k] if v[k] else None for d, v in lists]
        if null_on_null and any(x is None for x in vals):
            continue
        x = fn(*vals)
        if x is not None:
            out[k], valid[k] = x, True
    return _narrow(out, valid, t)


def _numeric_arrays(*vals: Values) -> bool:
    return all(d.dtype.kind in "biuf" for d, _ in vals)


def _binary(e: BBinary, frame: Frame) -> Values:
    if e.op in ("AND", "OR"):
        return logic(e.op, evaluate(e.left, frame), evaluate(e.right, frame))
    left, right = evaluate(e.left, frame), evaluate(e.right, frame)
    (a, av), (b, bv) = left, right
    valid = av & bv
    if _numeric_arrays(left, right) and e.op in _NP_OPS and e.type is not Type.ANY:
        if e.op == "/" and e.type is Type.BIGINT:
            if np.any(valid & (b == 0)):
                raise EvaluationError("division by zero")
            if a.dtype.kind in "iu" and b.dtype.kind in "iu":
                # truncated toward zero (np.abs would wrap -2^63); -2^63 / -1 is an error on
                # the row, as in the row evaluator
                try:
                    return checked_int_div(a.astype(np.int64), b.astype(np.int64), valid), valid
                except FunctionError as exc:
                    raise EvaluationError(str(exc)) from None
            with np.errstate(all="ignore"):
                q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
            return np.where((a >= 0) == (b >= 0), q, -q), valid
        if e.op in ("+", "-", "*") and a.dtype.kind in "iu" and b.dtype.kind in "iu":
            # BIGINT arithmetic: outside 64 bits is an error on the row, as in the row evaluator
            try:
                return checked_int_op(e.op, a.astype(np.int64), b.astype(np.int64), valid), valid
            except FunctionError as exc:
                raise EvaluationError(str(exc)) from None
        with np.errstate(all="ignore"):
            return _NP_OPS[e.op](a.astype(np.float64) if e.op == "/" else a, b), valid
    return _elementwise(binary_operator(e), [left, right], e.type)


_NP_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "=": np.equal,
           "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def _unary(e: BUnary, frame: Frame) -> Values:
    d, v = evaluate(e.operand, frame)
    if e.op == "NOT":
        return ~d.astype(bool), v
    if d.dtype.kind in "iu":
        try:  # -(-2^63) is an error on the row, as in the row evaluator
            return checked_int_negate(d.astype(np.int64), v), v
        except FunctionError as exc:
            raise EvaluationError(str(exc)) from None
    if d.dtype.kind == "f":
        return -d, v
    return _elementwise(negate_any, [(d, v)], e.type)


def _between(e: BBetween, frame: Frame) -> Values:
    ge, ge_known = _binary(BBinary(">=", e.operand, e.low, Type.BOOLEAN), frame)
    le, le_known = _binary(BBinary("<=", e.operand, e.high, Type.BOOLEAN), frame)
    return between_mask(ge.astype(bool), ge_known, le.astype(bool), le_known, e.negated)


def _in(e: BIn, frame: Frame) -> Values:
    x = evaluate(e.operand, frame)
    equal = []
    for item in e.items:
        eq, known = _binary(BBinary("=", e.operand, item, Type.BOOLEAN), frame)
        equal.append((eq.astype(bool), known))
    return in_mask(frame.size, x[1], equal, e.negated)


def _is_null(e: BIsNull, frame: Frame) -> Values:
    _, v = evaluate(e.operand, frame)
    return (v if e.negated else ~v), np.ones(frame.size, dtype=bool)


def _case(e: BCase, frame: Frame) -> Values:
    n = frame.size
    decided = np.zeros(n, dtype=bool)
    out = np.empty(n, dtype=object)
    valid = np.zeros(n, dtype=bool)
    for cond, result in e.whens:
        if e.operand is not None:
            c, cv = _binary(BBinary("=", e.operand, cond, Type.BOOLEAN), frame)
        else:
            c, cv = evaluate(cond, frame)
        take = ~decided & cv & c.astype(bool)
        r, rv = evaluate(result, frame)
        out[take] = r[take]
        valid[take] = rv[take]
        decided |= take
    if e.default is not None:
        r, rv = evaluate(e.default, frame)
        rest = ~decided
        out[rest] = r[rest]
        valid[rest] = rv[rest]
    return _narrow(out, valid, e.type)


def _call(e: BCall, frame: Frame) -> Values:
    args = [evaluate(a, frame) for a in e.args]

    def call(*vals):
        return call_function(e.name, e.impl, vals)  # the one rule for what a function raises
    return _elementwise(call, args, e.type, e.null_on_null)


_DISPATCH: dict[type, Callable[[Any, Frame], Values]] = {
    BLiteral: _literal,
    BNav: _nav,
    BWindow: _window,
    BAgg: _agg,
    BMatchNumber: _match_number,
    BBinary: _binary,
    BUnary: _unary,
    BBetween: _between,
    BIn: _in,
    BIsNull: _is_null,
    BCase: _case,
    BCall: _call,
}

__all__ = ["Frame", "evaluate", "holds"]
