"""Incremental aggregates: an immutable state per aggregate, advanced one row at a time.

States are small immutable values so that threads (partial matches) can share them when the
matcher forks; no aggregate is ever recomputed from the rows of a match.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkcep.aggregates.kernels import R2_DECIMALS
from sparkcep.analysis.bound import AggregateSpec
from sparkcep.compile.expressions import EvaluationError, compile_row, in_row_errors
from sparkcep.functions.library import sql_less
from sparkcep.types import Type, is_decimal
from sparkcep.values import DECIMAL_CONTEXT, decimal_average, decimal_op, decimal_sum, fits_bigint


@dataclass(frozen=True)
class Aggregate:
    spec: AggregateSpec
    initial: Any
    # (state, cols, pos, label, match number) -> state; the number is what MATCH_NUMBER() in the argument reads
    step: Callable[..., Any]
    result: Callable[[Any], Any]

    @property
    def counts_rows(self) -> bool:
        """COUNT(*) or COUNT(X.*): the result is how many rows it applies to."""
        return self.step is _count_star

    def applies_to(self, label: int) -> bool:
        labels = self.spec.labels
        return labels is None or label in labels


def _count_star(state, cols, pos, label, number=None):
    return state + 1


def _min(a, b):
    return b if sql_less(b, a) else a


def _max(a, b):
    return b if sql_less(a, b) else a


def _distinct_key(v):
    """What DISTINCT compares: NaN equals NaN (one group), as ORDER BY and PARTITION BY treat it."""
    return "\0NaN" if isinstance(v, float) and v != v else v


def _identity(s):
    return s


def _linked(state) -> list:
    """The values of a shared linked list (value, previous), oldest first."""
    out = []
    while state is not None:
        out.append(state[0])
        state = state[1]
    out.reverse()
    return out


def _moments(kind: str) -> tuple[Any, Callable, Callable]:
    """Welford's running mean and sum of squared deviations: (n, mean, m2)."""
    def fold(s, v):
        n, mean, m2 = s
        n += 1
        d = v - mean
        mean += d / n
        return (n, mean, m2 + d * (v - mean))

    def result(s):
        n, _, m2 = s
        if kind.endswith("POP"):
            if n < 1:
                return None
            var = m2 / n
        else:
            if n < 2:
                return None
            var = m2 / (n - 1)
        var = max(var, 0.0)
        return math.sqrt(var) if kind.startswith("STDDEV") else var
    return (0, 0.0, 0.0), fold, result


def _sum(s, v):
    """SUM's fold: a BIGINT total beyond 64 bits is an error (Trino's overflow error), as in
    every other evaluator."""
    if s is None:
        return v
    r = s + v
    if type(r) is int and not fits_bigint(r):
        raise EvaluationError("bigint overflow in sum")
    return r


def _folding(func: str, rtype=None) -> tuple[Any, Callable[[Any, Any], Any], Callable[[Any], Any]]:
    """(initial state, fold(state, non-NULL value), result) of the aggregates that skip NULLs
    (``rtype``: the result type, which makes SUM and AVG of decimals exact)."""
    if is_decimal(rtype) and func == "SUM":
        return None, in_row_errors(decimal_sum(rtype)), _identity
    if is_decimal(rtype) and func == "AVG":
        def average(s):
            return None if s[1] == 0 else in_row_errors(decimal_average)(s[0], s[1], rtype)
        return (0, 0), lambda s, v: (DECIMAL_CONTEXT.add(s[0], v), s[1] + 1), average
    if func == "COUNT":
        return 0, lambda s, v: s + 1, _identity
    if func == "SUM":
        return None, _sum, _identity
    if func == "AVG":
        return (0, 0), lambda s, v: (s[0] + v, s[1] + 1), lambda s: None if s[1] == 0 else s[0] / s[1]
    if func in ("MIN", "MAX"):
        pick = in_row_errors(_min if func == "MIN" else _max)  # values of an 'any' function may not compare
        return None, lambda s, v: v if s is None else pick(s, v), _identity
    if func == "COUNT_IF":
        return 0, lambda s, v: s + (v is True), _identity
    if func == "BOOL_AND":
        return None, lambda s, v: v if s is None else (s and v), _identity
    if func == "BOOL_OR":
        return None, lambda s, v: v if s is None else (s or v), _identity
    if func == "ARBITRARY":  # the first non-NULL value
        return None, lambda s, v: v if s is None else s, _identity
    if func in ("STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP"):
        return _moments(func)
    raise AssertionError(func)  # pragma: no cover


def seconds(v):
    """Timestamps and dates count as seconds since the epoch (naive = UTC) in series aggregates."""
    if isinstance(v, dt.datetime):
        return v.timestamp() if v.tzinfo is not None else (v - _EPOCH).total_seconds()
    if isinstance(v, dt.date):
        return (v - _EPOCH.date()).total_seconds()
    return float(v)


_EPOCH = dt.datetime(1970, 1, 1)


def _regression(signed: bool):
    """R² from Welford's co-moments (n, mean x, mean y, Σdx², Σdy², Σdxdy): exact zeros
    when all values are equal."""
    def fold(s, x, y):
        n, mx, my, sxx, syy, sxy = s
        n += 1
        dx, dy = x - mx, y - my
        mx += dx / n
        my += dy / n
        return (n, mx, my, sxx + dx * (x - mx), syy + dy * (y - my), sxy + dx * (y - my))

    def result(s):
        n, _, _, sxx, syy, sxy = s
        if n < 2 or sxx == 0 or syy == 0:
            return None
        if math.isnan(sxx) or math.isnan(syy) or math.isnan(sxy):
            return math.nan
        r2 = min(max(sxy * sxy / (sxx * syy), 0.0), 1.0)
        if signed:
            r2 *= (sxy > 0) - (sxy < 0)
        return round(r2, R2_DECIMALS) + 0.0
    return (0, 0.0, 0.0, 0.0, 0.0, 0.0), fold, result


def _mann_kendall_result(s):
    count, score = s[1], s[2]
    if count < 2:
        return None
    v = count * (count - 1) * (2 * count + 5) / 18.0
    return (score - 1) / math.sqrt(v) if score > 0 else (score + 1) / math.sqrt(v) if score < 0 else 0.0


# The aggregates that compute with their values (not only compare, count or keep them).
_ARITHMETIC = {"SUM", "AVG", "DELTA", "STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP", "LINEAR_REG_R2",
               "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST"}
# What they may compute with, of a function declared returns='any' (bool is an int to Python).
_NUMBERS = (int, float, decimal.Decimal, dt.timedelta, dt.datetime, dt.date)


def a_number(name: str, v: Any, position: int) -> Any:
    """``v``, a value of a function declared returns='any' at row ``position``, if aggregate
    ``name`` may compute with it (NULL, or a number); else an error on that row."""
    if v is None or (type(v) is not bool and isinstance(v, _NUMBERS)):
        return v
    err = EvaluationError(f"{name} needs numbers, and a function declared returns='any' gave a value of type "
                          f"{type(v).__name__}")
    err.position = position
    raise err


def build(spec: AggregateSpec, names: tuple[str, ...] = ()) -> Aggregate:
    """``names``: the variable names, which CLASSIFIER() in the argument gives."""
    untyped = any(e is not None and e.type is Type.ANY for e in (spec.arg, spec.key))
    if not (untyped and (spec.func in _ARITHMETIC or spec.func.startswith("USER:"))):
        return _build(spec, names)
    # Over values of a function declared returns='any', which analysis could not type: a value
    # that is not a number, or values whose types do not meet (a float and a decimal), is an
    # error on the row, never a sum of strings or Python's TypeError.
    name = spec.func[5:] if spec.func.startswith("USER:") else spec.func

    def numbers_only(e, names_):
        read = compile_row(e, names_)
        if e.type is not Type.ANY:
            return read

        def checked(cols, pos, label, number=None):
            return a_number(name, read(cols, pos, label, number), pos)
        return checked

    agg = _build(spec, names, numbers_only)
    step, result = agg.step, agg.result

    def not_meeting(e: TypeError) -> EvaluationError:
        return EvaluationError(f"{name} cannot combine the values a function declared returns='any' gave: {e}")

    def checked_step(s, cols, pos, label, number=None):
        try:
            return step(s, cols, pos, label, number)
        except TypeError as e:
            err = not_meeting(e)
            err.position = pos
            raise err from None

    def checked_result(state):
        try:
            return result(state)
        except TypeError as e:
            raise not_meeting(e) from None
    return dataclasses.replace(agg, step=checked_step, result=checked_result)


def _build(spec: AggregateSpec, names: tuple[str, ...], compile_arg: Callable = compile_row) -> Aggregate:
    """The aggregate of ``spec``, its argument and key compiled by ``compile_arg``."""
    if spec.arg is None:
        return Aggregate(spec, 0, _count_star, _identity)
    value = compile_arg(spec.arg, names)
    func = spec.func
    if func in ("LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED"):
        key = compile_arg(spec.key, names)
        initial, fold, result = _regression(func.endswith("SIGNED"))

        def step(s, cols, pos, label, number=None):
            x, y = value(cols, pos, label, number), key(cols, pos, label, number)
            return s if x is None or y is None else fold(s, seconds(x), seconds(y))
        return Aggregate(spec, initial, step, result)
    special = _SPECIAL.get("USER" if func.startswith("USER:") else func)
    if special is not None:
        return special(spec, value, names, compile_arg)
    if func == "COLLECT" and not spec.distinct:
        # A shared linked list (value, previous): forks share their common prefix.
        def step(s, cols, pos, label, number=None):
            return (value(cols, pos, label, number), s)
        return Aggregate(spec, None, step, lambda s: None if s is None else _linked(s))
    if func in ("MAX_N", "MIN_N", "MAX_BY_N", "MIN_BY_N"):
        return _top_n(spec, value, compile_arg(spec.key, names) if spec.key is not None else value)
    if spec.distinct:
        return _distinct(spec, value)
    initial, fold, result = _folding(func, spec.type)

    def step(s, cols, pos, label, number=None):
        v = value(cols, pos, label, number)
        return s if v is None else fold(s, v)
    return Aggregate(spec, initial, step, result)


def _mann_kendall_aggregate(spec: AggregateSpec, value, names: tuple[str, ...], compile_arg: Callable) -> Aggregate:
    """MANN_KENDALL_TEST: the score S of the values so far."""
    # (values so far as a shared list, count, S): S grows by the signs against every
    # earlier value, exactly (SQL order: NaN above every number).
    def step(s, cols, pos, label, number=None):
        v = value(cols, pos, label, number)
        if v is None:
            return s
        v = seconds(v)
        score, node = s[2], s[0]
        while node is not None:
            score += sql_less(node[0], v) - sql_less(v, node[0])
            node = node[1]
        return ((v, s[0]), s[1] + 1, score)
    return Aggregate(spec, (None, 0, 0), step, _mann_kendall_result)


def _user_aggregate(spec: AggregateSpec, value, names: tuple[str, ...], compile_arg: Callable) -> Aggregate:
    """A registered user aggregate: the rows collected, the function over them at the end."""
    func = spec.func
    from sparkcep.functions import user_aggregate

    user = user_aggregate(func[5:])
    key = compile_arg(spec.key, names) if spec.key is not None else None

    def step(s, cols, pos, label, number=None):
        row = (value(cols, pos, label, number),) + ((key(cols, pos, label, number),) if key is not None else ())
        return (row, s)

    def result(s):
        rows = _linked(s) if s is not None else []
        arrays = [np.array([math.nan if r[i] is None else seconds(r[i]) for r in rows], dtype=np.float64)
                  for i in range(1 + (key is not None))]
        return user.fn(*arrays)  # checked at registration: a float or None
    return Aggregate(spec, None, step, result)


def _delta_aggregate(spec: AggregateSpec, value, names: tuple[str, ...], compile_arg: Callable) -> Aggregate:
    """DELTA: the last value minus the first of the rows aggregated."""
    # (first value, last value, seen any row): last minus first of the rows aggregated.
    def step(s, cols, pos, label, number=None):
        v = value(cols, pos, label, number)
        return (v, v, True) if not s[2] else (s[0], v, True)

    minus = in_row_errors(decimal_op("-", spec.type)) if is_decimal(spec.type) else (lambda a, b: a - b)

    def result(s):
        if not s[2] or s[0] is None or s[1] is None:
            return None
        return minus(s[1], s[0])
    return Aggregate(spec, (None, None, False), step, result)


def _best_by_aggregate(spec: AggregateSpec, value, names: tuple[str, ...], compile_arg: Callable) -> Aggregate:
    """MAX_BY / MIN_BY: the value of the row with the largest (smallest) key."""
    func = spec.func
    key = compile_arg(spec.key, names)
    # (keys of a function declared returns='any' may not compare: an error on the row)
    better = in_row_errors((lambda k, best: sql_less(best, k)) if func == "MAX_BY" else sql_less)

    # (key, value) of the best row so far; rows whose key is NULL are skipped, ties keep
    # the earlier row.
    def step(s, cols, pos, label, number=None):
        k = key(cols, pos, label, number)
        if k is None or (s is not None and not better(k, s[0])):
            return s
        return (k, value(cols, pos, label, number))
    return Aggregate(spec, None, step, lambda s: None if s is None else s[1])


_SPECIAL = {"MANN_KENDALL_TEST": _mann_kendall_aggregate, "USER": _user_aggregate, "DELTA": _delta_aggregate,
            "MAX_BY": _best_by_aggregate, "MIN_BY": _best_by_aggregate}


def _top_n(spec: AggregateSpec, value, key) -> Aggregate:
    """max(x, n) / min(x, n) / max_by(x, y, n) / min_by(x, y, n): the values of the n rows
    with the largest (smallest) keys, largest (smallest) first; rows whose key is NULL are
    skipped, equal keys keep row order; NULL over no such rows. The state is a shared linked
    list of (key, value), as COLLECT's, so forks share their prefix."""
    largest = spec.func.startswith("MAX")

    def step(s, cols, pos, label, number=None):
        k = key(cols, pos, label, number)
        return s if k is None else ((k, value(cols, pos, label, number)), s)

    @in_row_errors  # keys of a function declared returns='any' may not compare
    def order(a, b):
        (ka, _), (kb, _) = a, b
        if sql_less(ka, kb):
            return 1 if largest else -1
        if sql_less(kb, ka):
            return -1 if largest else 1
        return 0

    def result(s):
        if s is None:
            return None
        rows = sorted(_linked(s), key=functools.cmp_to_key(order))  # stable: ties in row order
        return [v for _, v in rows[:spec.n]]
    return Aggregate(spec, None, step, result)


def _distinct(spec: AggregateSpec, value) -> Aggregate:
    """agg(DISTINCT x): the state keeps the values seen (a frozenset) beside the inner
    state, and each value is folded in once."""
    func = spec.func
    if func == "COLLECT":
        def fold_collect(s, v):
            return (v, s)
        initial, fold, result = None, fold_collect, (lambda s: None if s is None else _linked(s))
    else:
        initial, fold, result = _folding(func, spec.type)

    keep_null = func == "COLLECT"  # array_agg keeps NULL (once, with DISTINCT)

    def step(s, cols, pos, label, number=None):
        v = value(cols, pos, label, number)
        key = _distinct_key(v)
        if (v is None and not keep_null) or key in s[0]:
            return s
        return (s[0] | {key}, fold(s[1], v))
    return Aggregate(spec, (frozenset(), initial), step, lambda s: result(s[1]))
