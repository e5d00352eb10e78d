"""Row-local conditions → numpy: one boolean column per pattern variable, computed once per
partition instead of once per thread and row.

A DEFINE condition is split into its AND-ed conjuncts. A conjunct is row-local when every
value it reads is a column of the current row or of a row a fixed distance away (PREV/NEXT of
the variable being defined, or of the universal variable), combined with literals,
arithmetic, comparisons, AND/OR/NOT, BETWEEN, IN and IS NULL. Row-local conjuncts become a
mask that is TRUE exactly where they all are TRUE under SQL's three-valued logic; the other
conjuncts stay closures and run only where the mask is TRUE.

Values are (data, valid) array pairs; integer arithmetic is vectorized only while the
operands are small enough that int64 cannot overflow (checked per partition), otherwise the
conjunct falls back to the row evaluator for that partition. A result that would still leave
64 bits (a sum of several products, -(-2^63)) falls back too: the row evaluator reports the
overflow on the rows it evaluates, naming the row, as it reports a zero divisor.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.analysis.bound import (
    BBetween,
    BBinary,
    BCall,
    BCase,
    BColumn,
    BExpr,
    BIn,
    BIsNull,
    BLiteral,
    BNav,
    BUnary,
    Type,
)
from sparkcep.functions.casts import format_double
from sparkcep.values import (
    BIGINT_MIN,
    FunctionError,
    between_mask,
    checked_int_div,
    checked_int_op,
    fits_bigint,
    in_mask,
    max_magnitude,
)

# int64 arithmetic is exact while |values| stay below this after a few products.
_SAFE_INT = 2**31
SMALL_INT = _SAFE_INT  # integer columns below this in magnitude are "small" (ColumnArrays.small_ints)

Values = tuple[np.ndarray, np.ndarray]  # (data, valid)


class _NotVectorizable(Exception):
    pass


@dataclass(frozen=True)
class ColumnArrays:
    """A partition's columns as numpy: data and validity per column index."""

    data: dict[int, np.ndarray]
    valid: dict[int, np.ndarray]
    n: int
    small_ints: dict[int, bool]
    # Columns without NULLs: their validity is the scalar True in expressions (one pass less).
    no_nulls: dict[int, bool] = field(default_factory=dict)
    # Many partitions one after another: each row's partition (PREV and NEXT stay inside it).
    segments: np.ndarray | None = None


def conjuncts(e: BExpr) -> list[BExpr]:
    if isinstance(e, BBinary) and e.op == "AND":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def is_row_local(e: BExpr, label: int) -> bool:
    try:
        _check(e, label)
        return True
    except _NotVectorizable:
        return False


def _check(e: BExpr, label: int) -> None:
    if isinstance(e, BLiteral):
        if e.type not in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN, Type.VARCHAR, Type.NULL):
            raise _NotVectorizable
        if e.type is Type.BIGINT and abs(e.value) >= _SAFE_INT:
            raise _NotVectorizable
        return
    if isinstance(e, BNav):
        p = e.pointer
        if not (p.last and p.offset == 0 and (p.labels is None or label in p.labels)):
            raise _NotVectorizable
        if not isinstance(e.inner, BColumn) or e.inner.type not in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN, Type.VARCHAR):
            raise _NotVectorizable
        return
    if isinstance(e, BUnary):
        _check(e.operand, label)
        return
    if isinstance(e, BBinary):
        if e.op == "||":
            raise _NotVectorizable
        if e.op in ("/", "%") and not _by_nonzero_number(e):
            raise _NotVectorizable  # a zero divisor is an error only on the rows evaluated
        if e.op == "*" and e.type is Type.BIGINT and (_has_int_product(e.left) or _has_int_product(e.right)):
            raise _NotVectorizable  # two factors below 2**31 fit int64; more might not
        _check(e.left, label)
        _check(e.right, label)
        return
    if isinstance(e, BBetween):
        for x in (e.operand, e.low, e.high):
            _check(x, label)
        return
    if isinstance(e, BIn):
        for x in (e.operand, *e.items):
            _check(x, label)
        return
    if isinstance(e, BIsNull):
        _check(e.operand, label)
        return
    if isinstance(e, BCall) and e.name == "ABS" and len(e.args) == 1 and e.type in (Type.BIGINT, Type.DOUBLE):
        _check(e.args[0], label)
        return
    if isinstance(e, BCall) and _cast_of(e) is not None:
        _check(e.args[0], label)
        return
    if isinstance(e, BCase) and e.type in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN, Type.VARCHAR):
        # every branch is evaluated on every row: only branches that cannot fail (no
        # division by a column, no product of products: see the BBinary rule)
        for x in (e.operand, e.default, *(y for pair in e.whens for y in pair)):
            if x is not None:
                _check(x, label)
        return
    raise _NotVectorizable


def _by_nonzero_number(e: BBinary) -> bool:
    """``x / k`` or ``x % k`` with a nonzero number literal ``k``: no row can divide by zero."""
    k = e.right
    return (isinstance(k, BLiteral) and k.type in (Type.BIGINT, Type.DOUBLE) and k.value is not None
            and k.value != 0 and e.type in (Type.BIGINT, Type.DOUBLE))


def _has_int_product(e: BExpr) -> bool:
    if isinstance(e, BBinary):
        if e.op == "*" and e.type is Type.BIGINT:
            return True
        return _has_int_product(e.left) or _has_int_product(e.right)
    if isinstance(e, BUnary):
        return _has_int_product(e.operand)
    if isinstance(e, BCall):
        return any(_has_int_product(a) for a in e.args)
    return False


def logic(op: str, left: Values, right: Values) -> Values:
    """AND / OR of (data, valid) pairs under SQL's three-valued logic."""
    (a, av), (b, bv) = left, right
    a_true, a_false = av & a.astype(bool), av & ~a.astype(bool)
    b_true, b_false = bv & b.astype(bool), bv & ~b.astype(bool)
    if op == "AND":
        t, f = a_true & b_true, a_false | b_false
    else:
        t, f = a_true | b_true, a_false & b_false
    return t, t | f


def _shift(a: np.ndarray, v: np.ndarray, by: int) -> Values:
    """Values of the row ``by`` rows away (NULL outside the partition)."""
    if by == 0:
        return a, v
    n = len(a)
    data = np.zeros_like(a) if a.dtype != object else np.full(n, None, dtype=object)
    valid = np.zeros(n, dtype=bool)
    if by > 0:
        if by < n:
            data[: n - by] = a[by:]
            valid[: n - by] = v[by:]
    else:
        k = -by
        if k < n:
            data[k:] = a[: n - k]
            valid[k:] = v[: n - k]
    return data, valid


def evaluate(e: BExpr, cols: ColumnArrays) -> Values:
    """Evaluate a row-local expression over every row (the row being labelled is row i)."""
    n = cols.n
    if isinstance(e, BLiteral):
        if e.value is None:
            return np.zeros(n), np.zeros(n, dtype=bool)
        if isinstance(e.value, str):
            return np.full(n, e.value, dtype=object), np.ones(n, dtype=bool)
        # A number stays a scalar: numpy broadcasts it, no column of copies.
        return np.asarray(e.value), np.True_
    if isinstance(e, BNav):
        i = e.inner.index
        if e.inner.type is Type.BIGINT and not cols.small_ints.get(i, False):
            raise _NotVectorizable
        if e.pointer.physical == 0 and cols.no_nulls.get(i, False):
            return cols.data[i], np.True_
        data, valid = _shift(cols.data[i], cols.valid[i], e.pointer.physical)
        if cols.segments is not None and e.pointer.physical:
            seg, has = _shift(cols.segments, np.ones(n, dtype=bool), e.pointer.physical)
            valid = valid & has & (seg == cols.segments)
        return data, valid
    if isinstance(e, BUnary):
        d, v = evaluate(e.operand, cols)
        if e.op == "NOT":
            return ~d.astype(bool), v
        _no_int_min(d, v)  # -(-2^63) leaves 64 bits
        return -d, v
    if isinstance(e, BBinary):
        if e.op in ("AND", "OR"):
            return logic(e.op, evaluate(e.left, cols), evaluate(e.right, cols))
        (a, av), (b, bv) = evaluate(e.left, cols), evaluate(e.right, cols)
        valid = av & bv
        with np.errstate(all="ignore"):
            if e.op in _CMP:
                return _compare(e.op, a, b, valid), valid
            if e.op == "/" and e.type is Type.BIGINT:
                return _int_div(a, b, valid), valid
            if e.op == "/":
                return np.true_divide(a, b), valid
            if e.op in ("+", "-", "*") and a.dtype.kind == "i" and b.dtype.kind == "i":
                return _int_arith(e.op, a, b, valid), valid
            return _ARITH[e.op](a, b), valid
    if isinstance(e, BBetween):
        (x, xv), (lo, lv), (hi, hv) = (evaluate(y, cols) for y in (e.operand, e.low, e.high))
        with np.errstate(all="ignore"):
            ge = _compare(">=", x, lo, xv & lv)
            le = _compare("<=", x, hi, xv & hv)
        return between_mask(ge, xv & lv, le, xv & hv, e.negated)
    if isinstance(e, BIn):
        x, xv = evaluate(e.operand, cols)
        equal = []
        for item in e.items:
            d, v = evaluate(item, cols)
            equal.append((_compare("=", x, d, xv & v), v))
        return in_mask(n, xv, equal, e.negated)
    if isinstance(e, BIsNull):
        _, v = evaluate(e.operand, cols)
        return (v if e.negated else ~v), np.ones(n, dtype=bool)
    if isinstance(e, BCase):
        return _case(e, cols)
    if isinstance(e, BCall) and _cast_of(e) is not None:
        return _cast(e, cols)
    if isinstance(e, BCall):  # ABS (see _check)
        d, v = evaluate(e.args[0], cols)
        _no_int_min(d, v)  # abs(-2^63) leaves 64 bits
        return np.abs(d), v
    raise _NotVectorizable


_CMP = {"=", "<>", "<", "<=", ">", ">="}

# CAST and TRY_CAST between numbers and booleans, and from them to VARCHAR, as
# functions.casts converts one value; to VARCHAR(n) (which may cut or fail), from text, and
# to and from decimals and times they stay per row (formats and rounding of their own).
_CAST = re.compile(r"(TRY_)?CAST AS (DOUBLE|REAL|FLOAT|BIGINT|INTEGER|INT|SMALLINT|TINYINT|BOOLEAN|VARCHAR)")
_INT_BITS = {"BIGINT": 63, "INTEGER": 31, "INT": 31, "SMALLINT": 15, "TINYINT": 7}


def _cast_of(e: BCall) -> tuple[bool, str] | None:
    """(TRY_CAST, target) of a cast computed here, else None."""
    m = _CAST.fullmatch(e.name)
    if m is None or len(e.args) != 1 or e.args[0].type not in (Type.BIGINT, Type.DOUBLE, Type.BOOLEAN):
        return None
    if m.group(2) == "VARCHAR" and e.args[0].type == Type.DOUBLE and not _a_column(e.args[0]):
        # (a DOUBLE expression may hold an integer per row — CASE WHEN ... THEN v ELSE 2.5 —
        # which the row evaluator writes as one: only a column's values are always doubles)
        return None
    return m.group(1) is not None, m.group(2)


def _a_column(e: BExpr) -> bool:
    return isinstance(e, BColumn) or (isinstance(e, BNav) and isinstance(e.inner, BColumn))


def _cast(e: BCall, cols: ColumnArrays) -> Values:
    """A cast over every row. A value CAST cannot convert (an integer out of its type's
    range, a non-finite double to an integer, NaN to BOOLEAN) is NULL under TRY_CAST; under
    CAST the row evaluator reports it at its row."""
    try_, target = _cast_of(e)
    d, v = evaluate(e.args[0], cols)
    d = np.asarray(d)
    if target == "VARCHAR":
        return _to_text(d), v
    if target in ("DOUBLE", "REAL", "FLOAT"):
        return d.astype(np.float64), v
    if target == "BOOLEAN":
        bad = np.isnan(d) if d.dtype.kind == "f" else np.zeros(d.shape, dtype=bool)
        out = d.astype(bool) if d.dtype.kind == "b" else d != 0
    else:
        bits = _INT_BITS[target]
        if d.dtype.kind == "f":
            with np.errstate(all="ignore"):
                r = np.floor(np.abs(d) + 0.5) * np.where(d >= 0, 1.0, -1.0)  # half away from zero
                bad = ~np.isfinite(r) | (r < -(2.0**bits)) | (r >= 2.0**bits)
            out = np.where(bad, 0.0, r).astype(np.int64)
        else:
            out = d.astype(np.int64)
            bad = (out < -(2**bits)) | (out > 2**bits - 1)
    bad = bad & v
    if np.any(bad):
        if not try_:
            raise _NotVectorizable
        v = v & ~bad
    if out.dtype.kind == "i" and max_magnitude(np.where(v, out, 0)) >= SMALL_INT:
        # (integers past 2^31 leave the rule that keeps int64 arithmetic and its comparisons
        # with doubles exact, as an integer column's would: the row evaluator takes them)
        raise _NotVectorizable
    return out, v

def _to_text(d: np.ndarray) -> np.ndarray:
    """Numbers and booleans as CAST(... AS VARCHAR) writes them (functions.casts.to_text):
    integers and booleans by Arrow, doubles in Java's style one by one."""
    if d.dtype.kind == "b":
        return np.where(d, "true", "false").astype(object)
    if d.dtype.kind in "iu":
        return pc.cast(pa.array(d, type=pa.int64()), pa.string()).to_numpy(zero_copy_only=False)
    if d.dtype.kind == "f":
        return np.array([format_double(x) for x in d.tolist()], dtype=object)
    raise _NotVectorizable


_ARITH: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "%": np.fmod,  # the remainder takes the dividend's sign, as SQL's (and math.fmod)
}


def _int_div(a: np.ndarray, b: np.ndarray, valid) -> np.ndarray:
    """BIGINT division truncates toward zero (numpy's // floors); -2^63 / -1 leaves 64 bits
    (the row evaluator reports it)."""
    try:
        return checked_int_div(a, b, valid)
    except FunctionError:
        raise _NotVectorizable from None


def _int_arith(op: str, a: np.ndarray, b: np.ndarray, valid) -> np.ndarray:
    """BIGINT + - * whose result leaves 64 bits on a valid row: the row evaluator reports it
    (operands below 2^31 keep one product exact, not a sum of several)."""
    scalar = a.ndim == 0 and b.ndim == 0
    a, b = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
    try:
        r = checked_int_op(op, a, b, valid)
    except FunctionError:
        raise _NotVectorizable from None
    return r.reshape(()) if scalar else r


def _no_int_min(d: np.ndarray, v) -> None:
    if d.dtype.kind == "i" and np.any((d == BIGINT_MIN) & v):
        raise _NotVectorizable


def _case(e: BCase, cols: ColumnArrays) -> Values:
    """CASE over every row: each row takes the first WHEN that is TRUE (searched) or equal to
    the operand (simple; a NULL on either side never equals), else the default (NULL if
    none), as compile.expressions decides it for one row."""
    n = cols.n
    taken = np.zeros(n, dtype=bool)
    choices, picks = [], []
    operand = evaluate(e.operand, cols) if e.operand is not None else None
    for when, then in e.whens:
        w, wv = evaluate(when, cols)
        if operand is not None:
            x, xv = operand
            ok = np.broadcast_to(xv & wv, (n,))
            hit = _compare("=", x, w, ok) & ok
        else:
            hit = np.broadcast_to(w.astype(bool) & wv, (n,))
        pick = hit & ~taken
        taken |= hit
        choices.append(evaluate(then, cols))
        picks.append(pick)
    default = evaluate(e.default, cols) if e.default is not None else (np.zeros(n), np.zeros(n, dtype=bool))
    data = [np.broadcast_to(d, (n,)) for d, _ in choices] + [np.broadcast_to(default[0], (n,))]
    valid = [np.broadcast_to(v, (n,)) for _, v in choices] + [np.broadcast_to(default[1], (n,))]
    picks.append(~taken)
    if any(d.dtype == object for d in data):
        out = _select_objects(picks, data)
    else:
        out = np.select(picks, data)  # (a NULL branch is float zeros: the declared type comes back)
        out = out.astype({Type.BIGINT: np.int64, Type.BOOLEAN: bool}.get(e.type, out.dtype), copy=False)
    return out, np.select(picks, valid, default=False)


def _select_objects(picks: list[np.ndarray], data: list[np.ndarray]) -> np.ndarray:
    out = np.full(len(picks[0]), None, dtype=object)
    for pick, d in zip(reversed(picks), reversed(data), strict=True):
        out[pick] = d[pick]
    return out


def _compare(op: str, a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        a, b, valid = np.broadcast_arrays(a, b, valid)
        out = np.zeros(len(a), dtype=bool)
        idx = np.nonzero(valid)[0]
        fn = {"=": lambda x, y: x == y, "<>": lambda x, y: x != y, "<": lambda x, y: x < y,
              "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}[op]
        for i in idx:
            out[i] = fn(a[i], b[i])
        return out
    fn = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal,
          ">": np.greater, ">=": np.greater_equal}[op]
    out = fn(a, b)
    if valid is np.True_:
        return out
    out &= valid
    return out


def values_of(e: BExpr, cols: ColumnArrays) -> Values | None:
    """``evaluate``, or None where ``e`` cannot be vectorized over these columns (integers
    past 2^31, which a product could take out of 64 bits)."""
    try:
        return evaluate(e, cols)
    except _NotVectorizable:
        return None


def condition_mask(parts: list[BExpr], cols: ColumnArrays, out: np.ndarray | None = None) -> np.ndarray | None:
    """TRUE where every part is TRUE (written into ``out`` if given); None if a part cannot
    be vectorized here."""
    if out is None:
        mask = np.ones(cols.n, dtype=bool)
    else:
        mask = out
        mask[:] = True
    try:
        for p in parts:
            d, v = evaluate(p, cols)
            mask &= d if d.dtype == bool else d.astype(bool)
            if v is not np.True_:
                mask &= v
    except _NotVectorizable:
        return None
    return mask


def column_arrays(values: dict[int, list], n: int) -> ColumnArrays:
    """numpy columns from the evaluator's Python lists (NULL → invalid)."""
    data, valid, small = {}, {}, {}
    for i, col in values.items():
        v = np.fromiter((x is not None for x in col), dtype=bool, count=n)
        sample = next((x for x in col if x is not None), None)
        if isinstance(sample, bool):
            d = np.fromiter((bool(x) if x is not None else False for x in col), dtype=bool, count=n)
        elif isinstance(sample, int):
            d = np.fromiter((x if x is not None else 0 for x in col), dtype=np.int64, count=n) \
                if all(x is None or fits_bigint(x) for x in col) else np.array(col, dtype=object)
            small[i] = d.dtype != object and max_magnitude(d) < _SAFE_INT
        elif isinstance(sample, float):
            d = np.fromiter((x if x is not None else 0.0 for x in col), dtype=np.float64, count=n)
        else:
            d = np.array(col, dtype=object)
        data[i], valid[i] = d, v
    return ColumnArrays(data, valid, n, small)


def arrays_for(cols, used: set[int], n: int, segments: np.ndarray | None = None) -> ColumnArrays:
    """numpy columns for ``used``: straight from Arrow where ``cols`` can (LazyColumns),
    else from its Python lists; ``segments``: see ColumnArrays."""
    data, valid, small, rest, no_nulls = {}, {}, {}, {}, {}
    numpy = getattr(cols, "numpy", None)
    for i in used:
        got = numpy(i) if numpy is not None else None
        if got is None:
            rest[i] = cols[i]
            continue
        d, v = got
        data[i], valid[i] = d, v
        no_nulls[i] = bool(v.all())
        if d.dtype == np.int64:
            small[i] = max_magnitude(d) < _SAFE_INT  # np.abs(-2^63) is -2^63: not small
    if rest:
        extra = column_arrays(rest, n)
        data.update(extra.data)
        valid.update(extra.valid)
        small.update(extra.small_ints)
    return ColumnArrays(data, valid, n, small, no_nulls, segments)
