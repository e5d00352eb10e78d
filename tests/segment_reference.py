"""An independent brute-force reference for segment queries (the T-REX extension of
MATCH_RECOGNIZE: SEGMENT variables, ``&`` and ``~``), for tests only.

``segment_reference(query, table, aggregates)`` computes the ONE ROW PER MATCH output of a
segment query straight from the definitions, sharing nothing with the engine but the parser's
syntax tree (``sparkcep.language.ast``):

- its own sort and partitioning of the input (Python comparisons, NULLs last);
- every segment [i, j] of a partition is tried, and the pattern is decided by recursion over
  the syntax tree, memoised per (node, i, j);
- variable references (``X.col`` of another variable in a condition) are handled by fixing
  the segment of every referenced variable first (each occurs exactly once in the pattern,
  outside quantifiers, ``~`` and ``|``, so every decomposition gives it exactly one segment),
  then deciding the pattern under that binding; a segment matches when some binding does;
- its own evaluator of expressions (SQL three-valued logic) and aggregates, recomputed from
  scratch over the rows each time.

Exponential on purpose; meant for series of a dozen rows.

Choices where the brief leaves room (see also the report that came with this file):

- a PConcat is taken as written: ``(A B?) C`` is the two-item sequence ``(A B?)``, ``C`` (no
  flattening), so the junction between them is decided by ``(A B?)`` as a whole;
- an aggregate in a point variable's condition over its own (unqualified) columns reads the
  single row of the point; over ``X.col`` it reads X's segment;
- all column references inside one aggregate must name the same rows (own or one other
  variable); two-segment aggregates such as ``corr(C.x, UP.x)`` are refused;
- ``window(col, lo, hi)`` on a timestamp column without a unit counts seconds; a unit on a
  numeric column is refused; ``window(col, size [, unit])`` means a span of exactly ``size``;
  a column window whose column is NULL on the first or last row is NULL (not TRUE, not FALSE);
- decimals are read as floats.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from sparkcep.language import ast
from sparkcep.language.parser import parse

__all__ = [
    "SegmentReferenceError",
    "segment_reference",
    "segment_matches",
    "linear_reg_r2",
    "mann_kendall_test",
    "zscore",
]


class SegmentReferenceError(Exception):
    """A query (or part of one) this reference does not define."""


_EPOCH = dt.datetime(1970, 1, 1)
_UNIT_SECONDS = {"DAY": 86400.0, "HOUR": 3600.0, "MINUTE": 60.0, "SECOND": 1.0}
_AGGREGATES = {"FIRST", "LAST", "MIN", "MAX", "SUM", "AVG", "COUNT", "LINEAR_REG_R2",
               "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST"}


# ====================================================================== pure aggregates
def seconds(v: Any) -> float | None:
    """A value as a float for numeric aggregates: timestamps as seconds since the epoch
    (naive = UTC), dates as midnight UTC, intervals as seconds."""
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        d = v - _EPOCH
        return (d.days * 86400 + d.seconds) + d.microseconds / 1e6
    if isinstance(v, dt.date):
        return float((v - _EPOCH.date()).days * 86400)
    if isinstance(v, dt.timedelta):
        return (v.days * 86400 + v.seconds) + v.microseconds / 1e6
    if isinstance(v, (bool, int, float)):
        return float(v)
    if isinstance(v, decimal.Decimal):
        return float(v)
    raise SegmentReferenceError(f"not a number: {v!r}")


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def linear_reg_r2(xs: list, ys: list, signed: bool = False) -> float | None:
    """R² = cov(x,y)² / (var(x)·var(y)) with population moments over the rows where both
    are non-NULL; NULL with fewer than 2 such rows or when either side is constant.
    ``signed``: times sign(cov)."""
    pairs = [(seconds(x), seconds(y)) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n < 2:
        return None
    px = [p[0] for p in pairs]
    py = [p[1] for p in pairs]
    if all(v == px[0] for v in px) or all(v == py[0] for v in py):
        return None
    mx = math.fsum(px) / n
    my = math.fsum(py) / n
    cov = math.fsum((x - mx) * (y - my) for x, y in pairs) / n
    vx = math.fsum((x - mx) ** 2 for x in px) / n
    vy = math.fsum((y - my) ** 2 for y in py) / n
    r2 = cov * cov / (vx * vy)
    return r2 * _sign(cov) if signed else r2


def mann_kendall_test(xs: list) -> float | None:
    """Z of the Mann-Kendall trend test over the non-NULL values in order (no tie
    correction); NULL with fewer than 2 values."""
    v = [seconds(x) for x in xs if x is not None]
    n = len(v)
    if n < 2:
        return None
    s = sum(_sign(v[b] - v[a]) for a in range(n) for b in range(a + 1, n))
    var = n * (n - 1) * (2 * n + 5) / 18
    if s > 0:
        return (s - 1) / math.sqrt(var)
    if s < 0:
        return (s + 1) / math.sqrt(var)
    return 0.0


def zscore(x: Any, previous: list) -> float | None:
    """(x − mean) / population stdev of ``previous`` (the k values before the row); NULL when
    x or one of them is NULL, or when they are all equal."""
    if x is None or any(p is None for p in previous) or not previous:
        return None
    p = [seconds(v) for v in previous]
    if all(v == p[0] for v in p):
        return None
    k = len(p)
    mean = math.fsum(p) / k
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in p) / k)
    return (seconds(x) - mean) / sd


def _nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


def _minmax(values: list, pick_max: bool) -> Any:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    # NaN above every number (as ORDER BY places it)
    key = functools.cmp_to_key(_cmp_values)
    return max(vals, key=key) if pick_max else min(vals, key=key)


def _sum(values: list) -> Any:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if all(isinstance(v, int) for v in vals):  # bool is an int
        total = sum(int(v) for v in vals)
        if not -(2**63) <= total < 2**63:
            # a BIGINT sum beyond 64 bits is the engine's DataError wherever it is evaluated,
            # a DEFINE condition's candidate segment included (getting-started: limits)
            raise OverflowError("bigint overflow in sum")
        return total
    total = 0.0
    for v in vals:
        total += seconds(v)
    return total


def _avg(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if all(isinstance(v, int) for v in vals):
        return sum(int(v) for v in vals) / len(vals)
    total = 0.0
    for v in vals:
        total += seconds(v)
    return total / len(vals)


# ====================================================================== input
def _cmp_values(a: Any, b: Any) -> int:
    """Non-NULL values; NaN above every number."""
    an, bn = _nan(a), _nan(b)
    if an or bn:
        return (an > bn) - (an < bn)
    return (a > b) - (a < b)


def _column_values(col: pa.ChunkedArray) -> list:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = col.cast(pa.timestamp("us", t.tz), safe=False)
    if pa.types.is_duration(t) and t.unit == "ns":
        col = col.cast(pa.duration("us"), safe=False)
    values = col.to_pylist()
    if pa.types.is_decimal(t):
        values = [None if v is None else float(v) for v in values]
    return values


@dataclass
class _Part:
    key: tuple  # partition key values (as in the table)
    cols: dict[str, list]  # actual column name -> values in partition order
    n: int


class _Columns:
    """Case-insensitive column lookup."""

    def __init__(self, names: list[str]):
        self.names = names

    def find(self, name: ast.Name | str) -> str:
        text = name.text if isinstance(name, ast.Name) else name
        if text in self.names:
            return text
        hits = [c for c in self.names if c.lower() == text.lower()]
        if len(hits) != 1:
            raise SegmentReferenceError(f"no column {text!r}" if not hits else f"ambiguous column {text!r}")
        return hits[0]


def _partitions(q: ast.Query, table: pa.Table, columns: _Columns) -> list[_Part]:
    data = {name: _column_values(table.column(name)) for name in table.column_names}
    n = table.num_rows
    pcols = [columns.find(nm) for nm in q.partition_by]

    def norm(v):
        return ("NaN",) if _nan(v) else v

    groups: dict[tuple, list[int]] = {}
    for r in range(n):
        groups.setdefault(tuple(norm(data[c][r]) for c in pcols), []).append(r)

    def cmp_keys(a: tuple, b: tuple) -> int:
        for x, y in zip(a, b, strict=True):
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return 1 if x is None else -1  # NULL keys last
            x = float("nan") if x == ("NaN",) else x
            y = float("nan") if y == ("NaN",) else y
            c = _cmp_values(x, y)
            if c:
                return c
        return 0

    order_keys = [(data[columns.find(s.column)], s.descending, bool(s.nulls_first)) for s in q.order_by]

    def cmp_rows(r1: int, r2: int) -> int:
        for vals, desc, nulls_first in order_keys:
            a, b = vals[r1], vals[r2]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                if nulls_first:
                    return -1 if a is None else 1
                return 1 if a is None else -1
            c = _cmp_values(a, b)
            if c:
                return -c if desc else c
        return r1 - r2

    parts = []
    for key in sorted(groups, key=functools.cmp_to_key(cmp_keys)):
        rows = sorted(groups[key], key=functools.cmp_to_key(cmp_rows))
        key_values = tuple(data[c][rows[0]] for c in pcols)
        parts.append(_Part(key_values, {c: [data[c][r] for r in rows] for c in table.column_names}, len(rows)))
    return parts


# ====================================================================== expressions
@dataclass(frozen=True)
class _Ctx:
    part: _Part
    var: str | None  # the variable whose condition this is (None: a measure)
    seg: tuple[int, int]  # its rows (the match's rows for a measure)
    row: int | None  # the row unqualified columns read outside aggregates (None: none may)
    beta: Any  # referenced variable -> its segment
    in_agg: bool = False
    agg_owner: str | None = None  # inside an aggregate: whose rows are read
    shift: int = 0  # PREV/NEXT offset applied to every row read
    match_number: int | None = None


_OWN = object()


def _and(a, b):
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a, b):
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a):
    return None if a is None else (not a)


def _as_bool(v: Any) -> bool | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    raise SegmentReferenceError(f"not a boolean: {v!r}")


def _div(a, b):
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        if b == 0:
            raise ZeroDivisionError("integer division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if isinstance(a, dt.timedelta) and isinstance(b, (int, float)):
        return a / b
    with np.errstate(all="ignore"):
        return float(np.float64(seconds(a) if not isinstance(a, (int, float)) else a) / np.float64(b))


def _mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("integer modulo by zero")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    with np.errstate(all="ignore"):
        return float(np.fmod(np.float64(a), np.float64(b)))


def _arith(op: str, a, b):
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _div(a, b)
    if op == "%":
        return _mod(a, b)
    if op == "||":
        return _text(a) + _text(b)
    raise SegmentReferenceError(f"operator {op}")


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _compare(op: str, a, b):
    if a is None or b is None:
        return None
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise SegmentReferenceError(f"operator {op}")


def _like(s, pattern, escape) -> bool | None:
    if s is None or pattern is None:
        return None
    out, k = [], 0
    while k < len(pattern):
        ch = pattern[k]
        if escape is not None and ch == escape and k + 1 < len(pattern):
            out.append(re.escape(pattern[k + 1]))
            k += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        k += 1
    return re.fullmatch("".join(out), s, re.DOTALL) is not None


def _cast(v, type_name: str, try_: bool):
    if v is None:
        return None
    try:
        if type_name in ("INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT"):
            if isinstance(v, str):
                return int(v.strip())
            if isinstance(v, float):
                if not math.isfinite(v):
                    raise ValueError(v)
                return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
            return int(v)
        if type_name in ("DOUBLE", "REAL", "FLOAT", "DECIMAL", "NUMERIC"):
            return float(v) if not isinstance(v, (dt.date, dt.timedelta)) else seconds(v)
        if type_name in ("VARCHAR", "STRING", "CHAR", "TEXT"):
            return _text(v)
        if type_name == "BOOLEAN":
            if isinstance(v, str):
                return {"true": True, "false": False}[v.strip().lower()]
            return bool(v)
    except (ValueError, KeyError, TypeError):
        if try_:
            return None
        raise
    raise SegmentReferenceError(f"CAST to {type_name}")


def _scalar(name: str, args: list):
    if name == "COALESCE":
        return next((a for a in args if a is not None), None)
    if name == "NULLIF":
        return None if args[0] is not None and args[0] == args[1] else args[0]
    if any(a is None for a in args):
        return None
    if name in ("GREATEST", "LEAST"):
        return max(args) if name == "GREATEST" else min(args)
    fns: dict[str, Callable] = {
        "ABS": abs, "SQRT": math.sqrt, "EXP": math.exp, "LN": math.log, "LOG10": math.log10,
        "POWER": math.pow, "POW": math.pow, "FLOOR": math.floor, "CEIL": math.ceil, "CEILING": math.ceil,
        "SIGN": lambda x: type(x)(_sign(x)), "MOD": _mod,
    }
    if name == "ROUND":
        x = args[0]
        d = int(args[1]) if len(args) > 1 else 0
        if isinstance(x, int):
            return x
        f = 10.0 ** d
        return math.floor(abs(x) * f + 0.5) / f * (1 if x >= 0 else -1)
    if name in fns:
        return fns[name](*args)
    raise SegmentReferenceError(f"function {name}")


class _Evaluator:
    def __init__(self, pattern_vars: set[str], columns: _Columns, aggregates: dict[str, Callable]):
        self.pattern_vars = pattern_vars
        self.columns = columns
        self.aggregates = aggregates

    # ------------------------------------------------------------------ dispatch
    def ev(self, e: ast.Expr, c: _Ctx) -> Any:
        meth = getattr(self, "_" + type(e).__name__, None)
        if meth is None:
            raise SegmentReferenceError(f"expression {type(e).__name__}")
        return meth(e, c)

    def truth(self, e: ast.Expr, c: _Ctx) -> bool | None:
        return _as_bool(self.ev(e, c))

    def _Literal(self, e: ast.Literal, c: _Ctx):
        return e.value

    def _qual(self, name: ast.Name | None, c: _Ctx):
        """_OWN for the rows being read (unqualified or the own variable), else the variable."""
        if name is None:
            return _OWN
        key = name.key
        if c.in_agg:
            if key == c.agg_owner:
                return _OWN
        elif key == c.var:
            return _OWN
        if key not in self.pattern_vars:
            raise SegmentReferenceError(f"{key} is not a pattern variable")
        if c.var is None:
            raise SegmentReferenceError("MEASURES are unqualified in segment queries")
        return key

    def _row_value(self, column: str, r: int, c: _Ctx):
        r += c.shift
        if r < 0 or r >= c.part.n:
            return None
        return c.part.cols[column][r]

    def _ColumnRef(self, e: ast.ColumnRef, c: _Ctx):
        column = self.columns.find(e.column)
        q = self._qual(e.qualifier, c)
        if q is _OWN:
            if c.row is None:
                raise SegmentReferenceError(
                    f"column {e.column.text} outside an aggregate in segment variable {c.var}'s condition")
            return self._row_value(column, c.row, c)
        if c.in_agg:
            raise SegmentReferenceError("an aggregate mixes the rows of two variables")
        return self._row_value(column, c.beta[q][1], c)  # another variable: its last row

    def _Unary(self, e: ast.Unary, c: _Ctx):
        v = self.ev(e.operand, c)
        if e.op == "NOT":
            return _not(_as_bool(v))
        return None if v is None else -v

    def _Binary(self, e: ast.Binary, c: _Ctx):
        if e.op == "AND":
            a = self.truth(e.left, c)
            if a is False:
                return False
            return _and(a, self.truth(e.right, c))
        if e.op == "OR":
            a = self.truth(e.left, c)
            if a is True:
                return True
            return _or(a, self.truth(e.right, c))
        a, b = self.ev(e.left, c), self.ev(e.right, c)
        if e.op in ("=", "<>", "<", "<=", ">", ">="):
            return _compare(e.op, a, b)
        return _arith(e.op, a, b)

    def _Between(self, e: ast.Between, c: _Ctx):
        v, lo, hi = self.ev(e.operand, c), self.ev(e.low, c), self.ev(e.high, c)
        r = _and(_compare(">=", v, lo), _compare("<=", v, hi))
        return _not(r) if e.negated else r

    def _InList(self, e: ast.InList, c: _Ctx):
        v = self.ev(e.operand, c)
        items = [self.ev(x, c) for x in e.items]
        if v is None:
            r = None
        elif any(x is not None and x == v for x in items):
            r = True
        elif any(x is None for x in items):
            r = None
        else:
            r = False
        return _not(r) if e.negated else r

    def _IsNull(self, e: ast.IsNull, c: _Ctx):
        v = self.ev(e.operand, c)
        return (v is not None) if e.negated else (v is None)

    def _Case(self, e: ast.Case, c: _Ctx):
        if e.operand is not None:
            base = self.ev(e.operand, c)
            for when, then in e.whens:
                if _compare("=", base, self.ev(when, c)) is True:
                    return self.ev(then, c)
        else:
            for when, then in e.whens:
                if self.truth(when, c) is True:
                    return self.ev(then, c)
        return self.ev(e.default, c) if e.default is not None else None

    def _Cast(self, e: ast.Cast, c: _Ctx):
        return _cast(self.ev(e.operand, c), e.type_name, e.try_)

    def _Like(self, e: ast.Like, c: _Ctx):
        r = _like(self.ev(e.operand, c), self.ev(e.pattern, c),
                  self.ev(e.escape, c) if e.escape is not None else None)
        return _not(r) if e.negated else r

    # ------------------------------------------------------------------ calls
    def _Call(self, e: ast.Call, c: _Ctx):
        name = e.name.key
        if e.extract:
            v = self.ev(e.args[0], c)
            return None if v is None else getattr(v, name.lower())
        if name in ("PREV", "NEXT"):
            k = self._const_int(e.args[1], c) if len(e.args) > 1 else 1
            if k is None:
                return None
            return self.ev(e.args[0], replace(c, shift=c.shift + (-k if name == "PREV" else k)))
        if name == "MATCH_NUMBER":
            if c.match_number is None:
                raise SegmentReferenceError("MATCH_NUMBER() outside MEASURES")
            return c.match_number
        if name == "WINDOW":
            return self._window(e, c)
        if name == "ZSCORE":
            return self._zscore(e, c)
        if name in _AGGREGATES or name in self.aggregates:
            return self._aggregate(e, name, c)
        return _scalar(name, [self.ev(a, c) for a in e.args])

    def _const_int(self, e: ast.Expr, c: _Ctx) -> int | None:
        v = self.ev(e, c)
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            raise SegmentReferenceError(f"needs a whole number, got {v!r}")
        return v

    def _rows_of(self, args, c: _Ctx) -> tuple[tuple[int, int], str | None]:
        """The rows an aggregate (or window) over ``args`` reads, and whose they are."""
        quals: set = set()

        def walk(x):
            if isinstance(x, (ast.ColumnRef, ast.Star)):
                quals.add(self._qual(x.qualifier, c))
            elif isinstance(x, ast.Call) and (x.name.key in _AGGREGATES or x.name.key in self.aggregates) \
                    and not x.extract:
                raise SegmentReferenceError("nested aggregate")
            if isinstance(x, ast.Node):
                for v in x.__dict__.values():
                    walk(v)
            elif isinstance(x, tuple):
                for v in x:
                    walk(v)

        if c.in_agg:
            raise SegmentReferenceError("nested aggregate")
        walk(tuple(args))
        quals.discard(_OWN)
        if not quals:
            return c.seg, c.var
        if len(quals) > 1:
            raise SegmentReferenceError("an aggregate reads the rows of two variables")
        (x,) = quals
        return c.beta[x], x

    def _arg_values(self, arg: ast.Expr, seg, owner, c: _Ctx) -> list:
        if c.shift:
            raise SegmentReferenceError("an aggregate inside PREV/NEXT")
        sub = replace(c, in_agg=True, agg_owner=owner)
        return [self.ev(arg, replace(sub, row=r)) for r in range(seg[0], seg[1] + 1)]

    def _aggregate(self, e: ast.Call, name: str, c: _Ctx):
        seg, owner = self._rows_of(e.args, c)
        if name == "COUNT" and (not e.args or isinstance(e.args[0], ast.Star)):
            return seg[1] - seg[0] + 1
        cols = [self._arg_values(a, seg, owner, c) for a in e.args]
        if e.distinct:
            if name not in ("COUNT", "SUM", "AVG", "MIN", "MAX") or len(cols) != 1:
                raise SegmentReferenceError(f"{name}(DISTINCT ...)")
            seen, kept = set(), []
            for v in cols[0]:
                k = ("NaN",) if _nan(v) else v
                if v is not None and k not in seen:
                    seen.add(k)
                    kept.append(v)
            cols = [kept]
        if name == "FIRST":
            return cols[0][0]
        if name == "LAST":
            return cols[0][-1]
        if name == "MIN":
            return _minmax(cols[0], False)
        if name == "MAX":
            return _minmax(cols[0], True)
        if name == "SUM":
            return _sum(cols[0])
        if name == "AVG":
            return _avg(cols[0])
        if name == "COUNT":
            return sum(v is not None for v in cols[0])
        if name == "LINEAR_REG_R2":
            return linear_reg_r2(cols[0], cols[1])
        if name == "LINEAR_REG_R2_SIGNED":
            return linear_reg_r2(cols[0], cols[1], signed=True)
        if name == "MANN_KENDALL_TEST":
            return mann_kendall_test(cols[0])
        fn = self.aggregates[name]
        arrays = [np.array([np.nan if v is None else seconds(v) for v in col], dtype=np.float64) for col in cols]
        out = fn(*arrays)
        return None if out is None else float(out)

    def _zscore(self, e: ast.Call, c: _Ctx):
        if c.row is None or c.in_agg:
            raise SegmentReferenceError("zscore() belongs in a point variable's condition")
        k = self._const_int(e.args[1], c)
        if k is None:
            return None
        if k < 1:
            raise SegmentReferenceError("zscore() needs k >= 1")
        if c.row + c.shift - k < 0:
            return None
        x = self.ev(e.args[0], c)
        prev = [self.ev(e.args[0], replace(c, shift=c.shift - d)) for d in range(k, 0, -1)]
        return zscore(x, prev)

    def _window(self, e: ast.Call, c: _Ctx):
        args = list(e.args)
        if args and isinstance(args[0], ast.ColumnRef) and not _is_unit(args[0]):
            col_ref = args[0]
            unit = None
            if len(args) >= 3 and _is_unit(args[-1]):
                unit = _unit_of(args[-1])
                args = args[:-1]
            if len(args) == 2:  # window(col, size [, unit]): exactly size
                lo = hi = self.ev(args[1], c)
            elif len(args) == 3:
                lo, hi = self.ev(args[1], c), self.ev(args[2], c)
            else:
                raise SegmentReferenceError("window(col, lo, hi [, unit])")
            seg, owner = self._rows_of([col_ref], c)
            sub = replace(c, in_agg=True, agg_owner=owner)
            first = self.ev(col_ref, replace(sub, row=seg[0]))
            last = self.ev(col_ref, replace(sub, row=seg[1]))
            if first is None or last is None:
                return None
            temporal = isinstance(first, (dt.date, dt.datetime))
            if unit is not None and not temporal:
                raise SegmentReferenceError("a time unit on a numeric window column")
            if temporal:
                span = seconds(last) - seconds(first)
                scale = _UNIT_SECONDS[unit] if unit else 1.0
                lo = None if lo is None else lo * scale
                hi = None if hi is None else hi * scale
            else:
                span = last - first
            if lo is not None and span < lo:
                return False
            if hi is not None and span > hi:
                return False
            return True
        length = c.seg[1] - c.seg[0] + 1
        vals = [self.ev(a, c) for a in args]
        if len(vals) == 0:
            return True
        if len(vals) == 1:
            lo = hi = vals[0]
        elif len(vals) == 2:
            lo, hi = vals
        else:
            raise SegmentReferenceError("window(lo, hi) takes at most two counts")
        if lo is not None and length < lo:
            return False
        if hi is not None and length > hi:
            return False
        return True


def _unit_word(e: Any) -> str | None:
    if isinstance(e, ast.ColumnRef) and e.qualifier is None:
        w = e.column.text.upper()
    elif isinstance(e, ast.Name):
        w = e.text.upper()
    elif isinstance(e, ast.Literal) and isinstance(e.value, str):
        w = e.value.upper()
    elif isinstance(e, str):
        w = e.upper()
    else:
        return None
    w = w[:-1] if w.endswith("S") and w[:-1] in _UNIT_SECONDS else w
    return w if w in _UNIT_SECONDS else None


def _is_unit(e: Any) -> bool:
    return _unit_word(e) is not None


def _unit_of(e: Any) -> str:
    w = _unit_word(e)
    assert w is not None
    return w


# ====================================================================== patterns
def _kind(node) -> str:
    return type(node).__name__


def _children(node) -> tuple:
    k = _kind(node)
    if k in ("PConcat", "PAlt", "PAnd"):
        return tuple(node.items)
    if k in ("PQuant", "PTilde"):
        return (node.child,)
    if k in ("PVar", "PEmpty"):
        return ()
    raise SegmentReferenceError(f"pattern element {k} in a segment query")


def _pattern_vars(node) -> list[str]:
    if _kind(node) == "PVar":
        return [node.name.key]
    return [v for ch in _children(node) for v in _pattern_vars(ch)]


def _qualifiers(e: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(e, (ast.ColumnRef, ast.Star)) and e.qualifier is not None:
        out.add(e.qualifier.key)
    if isinstance(e, ast.Node):
        for v in e.__dict__.values():
            out |= _qualifiers(v)
    elif isinstance(e, tuple):
        for v in e:
            out |= _qualifiers(v)
    return out


def _check_referenced_once(node, var: str, blocked: bool = False) -> int:
    """Occurrences of ``var``; raises if one lies under a quantifier, ``~`` or ``|``."""
    k = _kind(node)
    if k == "PVar":
        if node.name.key == var and blocked:
            raise SegmentReferenceError(f"referenced variable {var} under a quantifier, ~ or |")
        return int(node.name.key == var)
    inner = blocked or k in ("PQuant", "PTilde", "PAlt")
    return sum(_check_referenced_once(ch, var, inner) for ch in _children(node))


class _Query:
    def __init__(self, q: ast.Query, columns: _Columns, aggregates: dict[str, Callable]):
        self.q = q
        self.pattern = q.pattern
        self.vars = set(_pattern_vars(q.pattern))
        self.defines: dict[str, ast.Expr] = {}
        self.segment_vars: set[str] = set()
        for d in q.defines:
            self.defines[d.name.key] = d.condition
            if getattr(d, "segment", False):
                self.segment_vars.add(d.name.key)
        self.evaluator = _Evaluator(self.vars | set(self.defines), columns, aggregates)
        # references: variable -> the other variables its condition reads
        self.reads: dict[str, set[str]] = {}
        for v, cond in self.defines.items():
            others = _qualifiers(cond) - {v}
            if others:
                self.reads[v] = others
        self.referenced: list[str] = sorted(set().union(*self.reads.values())) if self.reads else []
        for x in self.referenced:
            if x not in self.vars:
                raise SegmentReferenceError(f"referenced variable {x} is not in the pattern")
            if _check_referenced_once(self.pattern, x) != 1:
                raise SegmentReferenceError(f"referenced variable {x} occurs more than once")
        self.dependent_vars = set(self.referenced) | set(self.reads)
        self._seglike: dict[int, bool] = {}
        self._nullable: dict[int, bool] = {}
        self._dependent: dict[int, bool] = {}

    # ------------------------------------------------------------------ static facts
    def seglike(self, node) -> bool:
        """Contains a segment variable or ``~``, as written."""
        key = id(node)
        if key not in self._seglike:
            k = _kind(node)
            if k == "PVar":
                r = node.name.key in self.segment_vars
            elif k == "PTilde":
                r = True
            else:
                r = any(self.seglike(ch) for ch in _children(node))
            self._seglike[key] = r
        return self._seglike[key]

    def nullable(self, node) -> bool:
        """Can match the empty sequence (and so vanish inside a concatenation)."""
        key = id(node)
        if key not in self._nullable:
            k = _kind(node)
            if k == "PEmpty":
                r = True
            elif k in ("PVar", "PAnd", "PTilde"):
                r = False
            elif k == "PQuant":
                r = node.min == 0 or self.nullable(node.child)
            elif k == "PConcat":
                r = all(self.nullable(ch) for ch in node.items)
            elif k == "PAlt":
                r = any(self.nullable(ch) for ch in node.items)
            else:
                raise SegmentReferenceError(f"pattern element {k}")
            self._nullable[key] = r
        return self._nullable[key]

    def dependent(self, node) -> bool:
        """Its verdict depends on the referenced variables' segments."""
        key = id(node)
        if key not in self._dependent:
            self._dependent[key] = any(v in self.dependent_vars for v in _pattern_vars(node))
        return self._dependent[key]


class _Matcher:
    """Decides whether a pattern node matches the non-empty segment [i, j] of one partition,
    under one binding ``beta`` of the referenced variables."""

    def __init__(self, qq: _Query, part: _Part, beta: dict[str, tuple[int, int]], shared: dict):
        self.qq = qq
        self.part = part
        self.beta = beta
        self.shared = shared  # verdicts that do not depend on beta (kept across bindings)
        self.own: dict = {}

    def cond(self, var: str, i: int, j: int) -> bool:
        memo = self.own if var in self.qq.dependent_vars else self.shared
        key = ("cond", var, i, j)
        if key not in memo:
            memo[key] = self._cond(var, i, j)
        return memo[key]

    def _cond(self, var: str, i: int, j: int) -> bool:
        qq = self.qq
        segment = var in qq.segment_vars
        if not segment and i != j:
            return False
        cond = qq.defines.get(var)
        if cond is None:
            return True
        ctx = _Ctx(self.part, var, (i, j), None if segment else i, self.beta)
        return qq.evaluator.truth(cond, ctx) is True

    def m(self, node, i: int, j: int) -> bool:
        memo = self.own if self.qq.dependent(node) else self.shared
        key = (id(node), i, j)
        if key not in memo:
            memo[key] = self._m(node, i, j)
        return memo[key]

    def _m(self, node, i: int, j: int) -> bool:
        k = _kind(node)
        if k == "PVar":
            v = node.name.key
            if v in self.beta and self.beta[v] != (i, j):
                return False
            return self.cond(v, i, j)
        if k == "PEmpty":
            return False
        if k == "PAlt":
            return any(self.m(ch, i, j) for ch in node.items)
        if k == "PAnd":
            return all(self.m(ch, i, j) for ch in node.items)
        if k == "PTilde":
            return not self.m(node.child, i, j)
        if k == "PConcat":
            return self._sequence(list(node.items), i, j)
        if k == "PQuant":
            return self._repeat(node, i, j)
        raise SegmentReferenceError(f"pattern element {k}")

    def _sequence(self, items: list, i: int, j: int) -> bool:
        qq = self.qq
        n = len(items)

        @functools.cache
        def finish(t: int, p: int) -> bool:
            # item t (non-vanishing) ended at row p: can items t+1.. end the match at j?
            if p == j and all(qq.nullable(items[u]) for u in range(t + 1, n)):
                return True
            for u in range(t + 1, n):
                start = p if (qq.seglike(items[t]) or qq.seglike(items[u])) else p + 1
                for q in range(start, j + 1):
                    if self.m(items[u], start, q) and finish(u, q):
                        return True
                if not qq.nullable(items[u]):
                    break
            return False

        for t0 in range(n):
            for q in range(i, j + 1):
                if self.m(items[t0], i, q) and finish(t0, q):
                    return True
            if not qq.nullable(items[t0]):
                break
        return False

    def _repeat(self, node, i: int, j: int) -> bool:
        child, hi = node.child, node.max
        share = self.qq.seglike(child)
        # repetitions that match the empty sequence vanish: a non-empty match needs at least
        # one non-empty repetition, and min is met by padding with empty ones
        lo = 1 if self.qq.nullable(child) else max(node.min, 1)
        if hi is not None and hi < lo:
            return False
        cap = hi if hi is not None else lo  # counts above lo are all alike when unbounded
        seen = {(q, 1) for q in range(i, j + 1) if self.m(child, i, q)}
        frontier = set(seen)
        while frontier:
            new = set()
            for p, cnt in frontier:
                if hi is not None and cnt >= hi:
                    continue
                start = p if share else p + 1
                for q in range(start, j + 1):
                    if self.m(child, start, q):
                        state = (q, min(cnt + 1, cap))
                        if state not in seen:
                            seen.add(state)
                            new.add(state)
            frontier = new
        return any(p == j and cnt >= lo for p, cnt in seen)


def _bindings(qq: _Query, part: _Part, shared: dict):
    """Every binding of the referenced variables to segments that their own conditions accept."""
    if not qq.referenced:
        yield {}
        return
    choices = []
    for x in qq.referenced:
        if x in qq.segment_vars:
            choices.append([(s, e) for s in range(part.n) for e in range(s, part.n)])
        else:
            choices.append([(s, s) for s in range(part.n)])
    for combo in itertools.product(*choices):
        beta = dict(zip(qq.referenced, combo, strict=True))
        m = _Matcher(qq, part, beta, shared)
        if all(m.cond(x, *beta[x]) for x in qq.referenced):
            yield beta


def _match_segments(qq: _Query, part: _Part) -> list[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    shared: dict = {}
    for beta in _bindings(qq, part, shared):
        m = _Matcher(qq, part, beta, shared)
        lo = min((s for s, _ in beta.values()), default=part.n)
        hi = max((e for _, e in beta.values()), default=-1)
        for i in range(part.n):
            if i > lo:
                break
            for j in range(max(i, hi), part.n):
                if (i, j) not in found and m.m(qq.pattern, i, j):
                    found.add((i, j))
    return sorted(found)


# ====================================================================== entry points
def _prepare(query: str | ast.Query, table: pa.Table, aggregates: dict | None):
    q = parse(query)
    if q.rows_per_match.mode != "ONE":
        raise SegmentReferenceError("segment queries give ONE ROW PER MATCH")
    # clauses the segment semantics does not define: refused rather than silently ignored
    if q.skip is not None or q.all_matches or q.within is not None or q.maxlength is not None \
            or q.subsets or q.event_selection != "PARTITION":
        raise SegmentReferenceError("AFTER MATCH SKIP / ALL MATCHES / WITHIN / MAXLENGTH / SUBSET / "
                                    "EVENT SELECTION in a segment query")
    columns = _Columns(list(table.column_names))
    aggs = {k.upper(): v for k, v in (aggregates or {}).items()}
    return q, columns, _Query(q, columns, aggs), _partitions(q, table, columns)


def segment_matches(query: str | ast.Query, table: pa.Table, aggregates: dict | None = None
                    ) -> list[tuple[tuple, int, int]]:
    """(partition key, start, end) of every matched segment, positions within the partition,
    in output order."""
    _, _, qq, parts = _prepare(query, table, aggregates)
    return [(p.key, i, j) for p in parts for i, j in _match_segments(qq, p)]


def segment_reference(query: str | ast.Query, table: pa.Table, aggregates: dict | None = None) -> list[dict]:
    """The output rows (ONE ROW PER MATCH) of a segment query: partition columns (named as in
    the table), then the measures (named as written), one dict per matched segment, ordered by
    partition key (NULLs last), start, end."""
    q, columns, qq, parts = _prepare(query, table, aggregates)
    pnames = [columns.find(nm) for nm in q.partition_by]
    out = []
    for part in parts:
        for number, (i, j) in enumerate(_match_segments(qq, part), start=1):
            row = dict(zip(pnames, part.key, strict=True))
            ctx = _Ctx(part, None, (i, j), j, {}, match_number=number)
            for m in q.measures:
                row[m.name.text] = qq.evaluator.ev(m.expr, ctx)
            out.append(row)
    return out
