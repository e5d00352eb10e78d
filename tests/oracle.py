"""An independent brute-force oracle for MATCH_RECOGNIZE, for tests only.

``oracle(q, table)`` computes the output rows of an analysed query straight from the
definitions (SQL:2016 row pattern recognition, Trino's semantics, sparkcep's documented
extensions), sharing nothing with the engine but the analysed tree itself:

- its own sort and partitioning of the input;
- its own enumeration of label assignments by backtracking over the *syntax-tree* pattern
  (``q.pattern``), in preference order;
- its own evaluator of bound expressions (a dispatch table keyed by node class) with SQL's
  three-valued logic, its own navigation, CLASSIFIER, MATCH_NUMBER and aggregates, each
  recomputed from scratch over the rows of the match every time it is read;
- its own AFTER MATCH SKIP loop and its own output (ONE ROW / ALL ROWS PER MATCH, empty and
  unmatched rows).

Exponential and slow on purpose: no automaton, no incremental state, no caching beyond
memoising a DEFINE condition's verdict for one (start row, label assignment).

Not covered (NotImplementedError): EVENT SELECTION other than PARTITION CONTIGUITY and SASE
negation ``!X``; bound node types this module does not know.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from sparkcep.analysis.bound import (
    AggregateSpec,
    AnalyzedQuery,
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
)
from sparkcep.language import ast
from sparkcep.types import is_decimal

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class OracleError(Exception):
    """The query fails on this data (what the engine reports as a DataError)."""


# ====================================================================== input values
def _column_values(col: pa.ChunkedArray) -> list[Any]:
    """A column as Python values for expressions (NULL → None); dictionaries decoded,
    nanosecond timestamps and durations read at microsecond precision."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = col.cast(pa.timestamp("us", t.tz), safe=False)
    elif pa.types.is_duration(t) and t.unit == "ns":
        col = col.cast(pa.duration("us"), safe=False)
    return col.to_pylist()


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


def _compare_sort(a: Any, b: Any, descending: bool, nulls_first: bool) -> int:
    """Sort order of two key values: NULLs first or last (in either direction), NaN above
    every number, then the values (descending flips values and NaN, not NULLs)."""
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (-1 if nulls_first else 1) if a is None else (1 if nulls_first else -1)
    an, bn = _is_nan(a), _is_nan(b)
    if an or bn:
        c = (an > bn) - (an < bn)
    else:
        c = (a > b) - (a < b)
    return -c if descending else c


def _same_group(a: Any, b: Any) -> bool:
    """PARTITION BY groups as GROUP BY: NULL with NULL, NaN with NaN."""
    if a is None or b is None:
        return a is None and b is None
    if _is_nan(a) and _is_nan(b):
        return True
    return a == b


def _partitions(q: AnalyzedQuery, cols: list[list[Any] | None], n: int) -> list[list[int]]:
    """Input row numbers per partition, partitions in ascending key order (NULL keys last),
    rows in ORDER BY order, ties by input position."""
    keys = [(k.index, False, False) for k in q.partition_by] + [(k.index, k.descending, k.nulls_first) for k in q.order_by]

    def cmp(r1: int, r2: int) -> int:
        for idx, desc, nf in keys:
            c = _compare_sort(cols[idx][r1], cols[idx][r2], desc, nf)
            if c:
                return c
        return (r1 > r2) - (r1 < r2)

    order = sorted(range(n), key=functools.cmp_to_key(cmp))
    parts: list[list[int]] = []
    for r in order:
        if parts and all(_same_group(cols[k.index][parts[-1][-1]], cols[k.index][r]) for k in q.partition_by):
            parts[-1].append(r)
        else:
            parts.append([r])
    return parts


# ====================================================================== evaluation
class _Partition:
    def __init__(self, q: AnalyzedQuery, cols: list[list[Any] | None], rows: list[int]):
        self.q = q
        self.cols = cols
        self.rows = rows  # partition row -> input row
        self.n = len(rows)

    def value(self, column: int, r: int) -> Any:
        return self.cols[column][self.rows[r]]


class _Ctx:
    """What an expression sees: the match (its first partition row and the variable of each
    of its rows so far), the current row within it (``cur``; -1: none), the match number,
    the aggregate specs of the clause, and, inside a navigation or aggregate, the partition
    row that bare columns read (``row``)."""

    __slots__ = ("part", "start", "labels", "cur", "number", "aggregates", "row", "row_label")

    def __init__(self, part: _Partition, start: int, labels: tuple[int, ...], cur: int,
                 number: int | None, aggregates: tuple[AggregateSpec, ...], row: int | None = None,
                 row_label: int | None = None):
        self.part = part
        self.start = start
        self.labels = labels
        self.cur = cur
        self.number = number
        self.aggregates = aggregates
        self.row = row
        self.row_label = row_label

    def at_row(self, row: int) -> _Ctx:
        """The view of a row expression at partition row ``row``; CLASSIFIER() there is the
        row's variable when the row is one of the match's rows visible here (else NULL)."""
        i = row - self.start
        label = self.labels[i] if 0 <= i < len(self.labels) else None
        return _Ctx(self.part, self.start, self.labels, self.cur, self.number, self.aggregates, row, label)


def evaluate(node: BExpr, ctx: _Ctx) -> Any:
    fn = _EVAL.get(type(node))
    if fn is None:
        raise NotImplementedError(type(node).__name__)
    return fn(node, ctx)


def _match_index(ctx: _Ctx, labels, running: bool, last: bool, offset: int) -> int | None:
    """Index within the match of the ``offset``-th last row of ``labels`` among the rows up
    to the current one (running) or in the whole match (final); FIRST counts over every row
    the context knows (Trino: the whole match in MEASURES, the rows so far in DEFINE)."""
    limit = ctx.cur if running and last else len(ctx.labels) - 1
    rows = [i for i in range(limit + 1) if labels is None or ctx.labels[i] in labels]
    k = len(rows) - 1 - offset if last else offset
    return rows[k] if 0 <= k < len(rows) else None


def _pointer_row(ctx: _Ctx, p: Pointer) -> int | None:
    i = _match_index(ctx, p.labels, p.running, p.last, p.offset)
    if i is None:
        return None
    r = ctx.start + i + p.physical
    return r if 0 <= r < ctx.part.n else None


def _e_literal(node: BLiteral, ctx: _Ctx) -> Any:
    return node.value


def _e_column(node: BColumn, ctx: _Ctx) -> Any:
    if ctx.row is None:
        raise OracleError(f"column {node.name} read outside a row context")
    return ctx.part.value(node.index, ctx.row)


def _e_nav(node: BNav, ctx: _Ctx) -> Any:
    r = _pointer_row(ctx, node.pointer)
    return None if r is None else evaluate(node.inner, ctx.at_row(r))


def _e_classifier(node: BClassifier, ctx: _Ctx) -> Any:
    """The variable of the row the pointer designates; PREV/NEXT move from there, and a row
    outside the match (as far as it is known: so far in DEFINE, whole in MEASURES) has none."""
    p = node.pointer
    i = _match_index(ctx, p.labels, p.running, p.last, p.offset)
    if i is None:
        return None
    j = i + p.physical
    return ctx.part.q.variables[ctx.labels[j]] if 0 <= j < len(ctx.labels) else None


def _e_row_label(node: BRowLabel, ctx: _Ctx) -> Any:
    return None if ctx.row_label is None else ctx.part.q.variables[ctx.row_label]


def _e_match_number(node: BMatchNumber, ctx: _Ctx) -> Any:
    return ctx.number


def _nan_last_key(v: Any) -> tuple:
    """Order of MIN/MAX and MAX_BY/MIN_BY keys: NaN above every number (as ORDER BY)."""
    return (1, 0) if _is_nan(v) else (0, v)


def _not_distinct(a: Any, b: Any) -> bool:
    """IS NOT DISTINCT FROM, as DISTINCT groups values: NULL with NULL, NaN with NaN."""
    if a is None or b is None:
        return a is None and b is None
    if _is_nan(a) or _is_nan(b):
        return _is_nan(a) and _is_nan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_not_distinct(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(_not_distinct(v, w) for w in out):
            out.append(v)
    return out


def _e_agg(node: BAgg, ctx: _Ctx) -> Any:
    spec = ctx.aggregates[node.index]
    if spec.previous:
        limit = ctx.cur - 1
    else:
        limit = ctx.cur if spec.running else len(ctx.labels) - 1
    rows = [ctx.start + i for i in range(limit + 1) if spec.labels is None or ctx.labels[i] in spec.labels]
    f = spec.func
    distinct = spec.distinct
    if spec.arg is None:  # COUNT(*)
        if f != "COUNT" or distinct:
            raise NotImplementedError(f"{f}(*)")
        return len(rows)
    views = [ctx.at_row(r) for r in rows]
    values = [evaluate(spec.arg, v) for v in views]
    if f in ("MAX_BY", "MIN_BY"):
        if distinct:
            raise NotImplementedError(f"{f}(DISTINCT)")
        best = None  # (key, value): the first row with the greatest (least) non-NULL key
        for v, view in zip(values, views, strict=True):
            k = evaluate(spec.key, view)
            if k is None:
                continue
            if best is None or (_nan_last_key(k) > _nan_last_key(best[0]) if f == "MAX_BY"
                                else _nan_last_key(k) < _nan_last_key(best[0])):
                best = (k, v)
        return None if best is None else best[1]
    if f in ("MAX_N", "MIN_N", "MAX_BY_N", "MIN_BY_N"):
        if distinct:
            raise NotImplementedError(f"{f}(DISTINCT)")
        keys = values if spec.key is None else [evaluate(spec.key, view) for view in views]
        pairs = [(k, v) for k, v in zip(keys, values, strict=True) if k is not None]
        if not pairs:
            return None
        # the n largest (smallest) keys' values, largest (smallest) first; sorted() is stable
        pairs = sorted(pairs, key=lambda kv: _nan_last_key(kv[0]), reverse=f.startswith("MAX"))
        return [v for _, v in pairs[:spec.n]]
    if f == "DELTA":
        if distinct:
            raise NotImplementedError("DELTA(DISTINCT)")
        if not values or values[0] is None or values[-1] is None:
            return None
        return _check_int(values[-1] - values[0], spec.type)
    if f == "COLLECT":
        if not values:
            return None
        return _distinct(values) if distinct else values  # array_agg keeps NULLs (once with DISTINCT)
    present = [v for v in values if v is not None]
    if distinct:
        present = _distinct(present)
    if f == "COUNT":
        return len(present)
    if f == "COUNT_IF":
        return sum(1 for v in present if v is True)
    if not present:
        return None
    if f == "SUM":
        total = present[0]
        with decimal.localcontext(decimal.Context(prec=200)):  # decimals: exact
            for v in present[1:]:
                total = total + v
        return _check_int(total, spec.type)
    if f == "AVG" and is_decimal(spec.type):
        # Trino: the exact mean at the argument's scale, rounded half away from zero
        with decimal.localcontext(decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)):
            mean = sum(present, decimal.Decimal(0)) / len(present)
            return mean.quantize(decimal.Decimal(1).scaleb(-spec.type.scale))
    if f == "AVG":
        return math.fsum(float(v) for v in present) / len(present) if not any(
            _is_nan(v) or (isinstance(v, float) and math.isinf(v)) for v in present) else sum(present) / len(present)
    if f == "MIN":
        return min(present, key=_nan_last_key)
    if f == "MAX":
        return max(present, key=_nan_last_key)
    if f == "BOOL_AND":
        return all(present)
    if f == "BOOL_OR":
        return any(present)
    if f == "ARBITRARY":
        return present[0]
    if f in ("VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP"):
        n = len(present)
        if n < (1 if f.endswith("POP") else 2):
            return None
        xs = [float(v) for v in present]
        mean = sum(xs) / n
        m2 = sum((x - mean) ** 2 for x in xs)
        var = m2 / (n if f.endswith("POP") else n - 1)
        return math.sqrt(var) if f.startswith("STDDEV") else var
    raise NotImplementedError(f"aggregate {f}")


def _e_unary(node: BUnary, ctx: _Ctx) -> Any:
    v = evaluate(node.operand, ctx)
    if v is None:
        return None
    if node.op == "NOT":
        return not v
    if node.op == "-":
        return _check_int(-v, node.type)
    raise NotImplementedError(f"unary {node.op}")


def _check_int(v: Any, t: Type) -> Any:
    if t is Type.BIGINT and isinstance(v, int) and not isinstance(v, bool) and not (_INT64_MIN <= v <= _INT64_MAX):
        raise OracleError("bigint overflow")
    return v


def _divide(a: Any, b: Any, t: Type) -> Any:
    if t is Type.DOUBLE or (t is Type.ANY and (isinstance(a, float) or isinstance(b, float))):
        a, b = float(a), float(b)
        if b == 0.0:
            if a == 0.0 or a != a:
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise OracleError("division by zero")
        q = abs(a) // abs(b)
        return _check_int(q if (a < 0) == (b < 0) else -q, t)
    try:
        return a / b  # interval / number
    except ZeroDivisionError:
        raise OracleError("division by zero") from None


def _modulo(a: Any, b: Any, t: Type) -> Any:
    if t is Type.DOUBLE or (t is Type.ANY and (isinstance(a, float) or isinstance(b, float))):
        a, b = float(a), float(b)
        if b == 0.0 or a != a or b != b or math.isinf(a):
            return math.nan
        return math.fmod(a, b)
    if b == 0:
        raise OracleError("division by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _e_binary(node: BBinary, ctx: _Ctx) -> Any:
    op = node.op
    if op in ("AND", "OR"):
        a = evaluate(node.left, ctx)
        if op == "AND":
            if a is False:
                return False
            b = evaluate(node.right, ctx)
            if b is False:
                return False
            return None if a is None or b is None else True
        if a is True:
            return True
        b = evaluate(node.right, ctx)
        if b is True:
            return True
        return None if a is None or b is None else False
    a = evaluate(node.left, ctx)
    if a is None:
        return None
    b = evaluate(node.right, ctx)
    if b is None:
        return None
    a, b = _aligned(a, b)
    if op in ("=", "<>"):
        r = _equal(a, b)
        return r if op == "=" or r is None else not r
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "||":
        return a + b
    if node.type is Type.DOUBLE and op in ("+", "-", "*"):
        a, b = float(a), float(b)
    if op == "+":
        return _check_int(a + b, node.type)
    if op == "-":
        return _check_int(a - b, node.type)
    if op == "*":
        return _check_int(a * b, node.type)
    if op == "/":
        return _divide(a, b, node.type)
    if op == "%":
        return _modulo(a, b, node.type)
    raise NotImplementedError(f"operator {op}")


def _aligned(a: Any, b: Any) -> tuple[Any, Any]:
    """A naive timestamp against a zoned one reads as wall time in that zone."""
    if isinstance(a, _dt.datetime) and isinstance(b, _dt.datetime):
        if a.tzinfo is None and b.tzinfo is not None:
            return a.replace(tzinfo=b.tzinfo), b
        if b.tzinfo is None and a.tzinfo is not None:
            return a, b.replace(tzinfo=a.tzinfo)
    return a, b


def _equal(a: Any, b: Any) -> bool | None:
    """SQL equality; arrays element by element: FALSE if lengths or a pair differ, else NULL
    if a pair is NULL, else TRUE."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False
        unknown = False
        for x, y in zip(a, b, strict=True):
            r = None if x is None or y is None else _equal(x, y)
            if r is False:
                return False
            if r is None:
                unknown = True
        return None if unknown else True
    return a == b


def _ge(a: Any, b: Any) -> bool:
    return a >= b


def _e_between(node: BBetween, ctx: _Ctx) -> Any:
    x, lo, hi = evaluate(node.operand, ctx), evaluate(node.low, ctx), evaluate(node.high, ctx)
    ge = None if x is None or lo is None else _ge(*_aligned(x, lo))
    le = None if x is None or hi is None else _ge(*_aligned(hi, x))
    if ge is False or le is False:
        r = False
    elif ge is None or le is None:
        r = None
    else:
        r = True
    return r if r is None or not node.negated else not r


def _e_in(node: BIn, ctx: _Ctx) -> Any:
    x = evaluate(node.operand, ctx)
    if x is None:
        return None
    unknown = False
    for item in node.items:
        v = evaluate(item, ctx)
        if v is None:
            unknown = True
            continue
        r = _equal(*_aligned(x, v))
        if r is None:
            unknown = True
        elif r:
            return not node.negated
    return None if unknown else node.negated


def _e_is_null(node: BIsNull, ctx: _Ctx) -> Any:
    v = evaluate(node.operand, ctx)
    return (v is not None) if node.negated else (v is None)


def _e_case(node: BCase, ctx: _Ctx) -> Any:
    if node.operand is None:
        for cond, result in node.whens:
            if evaluate(cond, ctx) is True:
                return evaluate(result, ctx)
    else:
        v = evaluate(node.operand, ctx)
        if v is not None:
            for w, result in node.whens:
                wv = evaluate(w, ctx)
                if wv is not None and _equal(*_aligned(v, wv)) is True:
                    return evaluate(result, ctx)
    return evaluate(node.default, ctx) if node.default is not None else None


def _e_call(node: BCall, ctx: _Ctx) -> Any:
    args = [evaluate(a, ctx) for a in node.args]
    if node.null_on_null and any(a is None for a in args):
        return None
    try:
        return node.impl(*args)
    except Exception as e:  # noqa: BLE001 - whatever the function raised, the query fails
        raise OracleError(f"function {node.name} failed: {e}") from e


_EVAL: dict[type, Callable[[Any, _Ctx], Any]] = {
    BLiteral: _e_literal,
    BColumn: _e_column,
    BNav: _e_nav,
    BAgg: _e_agg,
    BClassifier: _e_classifier,
    BMatchNumber: _e_match_number,
    BUnary: _e_unary,
    BBinary: _e_binary,
    BBetween: _e_between,
    BIn: _e_in,
    BIsNull: _e_is_null,
    BCase: _e_case,
    BCall: _e_call,
    BRowLabel: _e_row_label,
}


# ====================================================================== pattern enumeration
Assignment = tuple[tuple[int, bool], ...]  # (variable id, excluded) per match row


# Pattern steps one search may take. Backtracking over nested quantifiers is exponential in
# the rows (``((A+)+)+`` over rows where A holds and the search fails later): a generated
# example past this is set aside (hypothesis.reject) rather than searched for hours.
STEP_BUDGET = 3_000_000


class _Enumerator:
    """Label assignments of the rows from ``start`` that the pattern accepts, in
    preference order, by backtracking over the syntax-tree pattern."""

    def __init__(self, q: AnalyzedQuery, part: _Partition, order0: list[Any] | None):
        self.q = q
        self.part = part
        self.order0 = order0
        self.var_ids = {name: i for i, name in enumerate(q.variables)}
        self._verdicts: dict[tuple[int, tuple[int, ...]], bool] = {}

    def candidates(self, start: int, number: int | None = None) -> Iterator[Assignment]:
        """``number``: the MATCH_NUMBER a match found here would get (DEFINE may read it)."""
        self._number = number
        self._steps = 0
        for _pos, assign in self._gen(self.q.pattern, start, start, (), False):
            yield assign

    # -- a row tentatively labelled
    def _admits(self, start: int, pos: int) -> bool:
        if pos >= self.part.n:
            return False
        if self.q.maxlength is not None and pos - start + 1 > self.q.maxlength:
            return False
        # The bound holds when |last - first| <= WITHIN (false for NaN: a NaN row never fits).
        if self.q.within is not None and not abs(self.order0[pos] - self.order0[start]) <= self.q.within:
            return False
        return True

    def _holds(self, start: int, labels: tuple[int, ...]) -> bool:
        key = (start, self._number, labels)
        got = self._verdicts.get(key)
        if got is None:
            cond = self.q.defines.get(labels[-1])
            if cond is None:
                got = True
            else:
                ctx = _Ctx(self.part, start, labels, len(labels) - 1, self._number, self.q.define_aggregates)
                got = evaluate(cond, ctx) is True
            self._verdicts[key] = got
        return got

    # -- the pattern
    def _gen(self, node: ast.PatternNode, start: int, pos: int, assign: Assignment,
             excluded: bool) -> Iterator[tuple[int, Assignment]]:
        self._steps += 1
        if self._steps > STEP_BUDGET:
            import hypothesis

            hypothesis.reject()  # (an error outside a property test: a search that long is a bug there)
        if isinstance(node, ast.PVar):
            if not self._admits(start, pos):
                return
            var = self.var_ids[node.name.key]
            new = assign + ((var, excluded),)
            if self._holds(start, tuple(v for v, _ in new)):
                yield pos + 1, new
        elif isinstance(node, ast.PEmpty):
            yield pos, assign
        elif isinstance(node, ast.PStart):
            if pos == 0:
                yield pos, assign
        elif isinstance(node, ast.PEnd):
            if pos == self.part.n:
                yield pos, assign
        elif isinstance(node, ast.PConcat):
            yield from self._seq(node.items, 0, start, pos, assign, excluded)
        elif isinstance(node, ast.PAlt):
            for item in node.items:
                yield from self._gen(item, start, pos, assign, excluded)
        elif isinstance(node, ast.PQuant):
            yield from self._repeat(node, 0, start, pos, assign, excluded)
        elif isinstance(node, ast.PExclude):
            yield from self._gen(node.child, start, pos, assign, True)
        elif isinstance(node, ast.PPermute):
            # itertools.permutations lists the orders lexicographically by item position.
            for order in itertools.permutations(node.items):
                yield from self._seq(order, 0, start, pos, assign, excluded)
        else:
            raise NotImplementedError(type(node).__name__)

    def _seq(self, items, i, start, pos, assign, excluded):
        if i == len(items):
            yield pos, assign
            return
        for p2, a2 in self._gen(items[i], start, pos, assign, excluded):
            yield from self._seq(items, i + 1, start, p2, a2, excluded)

    def _repeat(self, node: ast.PQuant, count: int, start, pos, assign, excluded):
        def another():
            if node.max is not None and count >= node.max:
                return
            for p2, a2 in self._gen(node.child, start, pos, assign, excluded):
                if count >= node.min and p2 == pos:
                    continue  # an iteration beyond the minimum must consume a row
                yield from self._repeat(node, count + 1, start, p2, a2, excluded)

        def enough():
            if count >= node.min:
                yield pos, assign

        if node.greedy:
            yield from another()
            yield from enough()
        else:
            yield from enough()
            yield from another()


# ====================================================================== match selection
class _Found:
    __slots__ = ("start", "assign")

    def __init__(self, start: int, assign: Assignment):
        self.start = start
        self.assign = assign

    @property
    def length(self) -> int:
        return len(self.assign)

    @property
    def last(self) -> int:
        return self.start + len(self.assign) - 1


def _select(q: AnalyzedQuery, part: _Partition, enum: _Enumerator) -> Iterator[tuple]:
    """("match", _Found, number) and ("unmatched", row) items of one partition, in order."""
    n = part.n
    unmatched = q.rows_per_match == "ALL" and q.empty_matches == "UNMATCHED"
    number = 0

    if q.mode == "matchregex":
        pos = 0
        while pos < n:
            best: _Found | None = None
            for s in range(pos, n):
                if best is not None and s > best.last:
                    break  # a later start cannot end earlier (an empty match there ends at s - 1)
                found = None
                for a in enum.candidates(s, number + 1):
                    if found is None or len(a) < len(found.assign):
                        found = _Found(s, a)
                if found is not None and (best is None or found.last < best.last):
                    best = found
            if best is None:
                if unmatched:
                    for r in range(pos, n):
                        yield ("unmatched", r)
                return
            if unmatched:
                for r in range(pos, best.start):
                    yield ("unmatched", r)
            number += 1
            yield ("match", best, number)
            pos = best.last + 1 if best.length else best.start + 1
        return
    if q.mode != "sql":
        raise NotImplementedError(f"mode {q.mode}")

    covered = -1  # the last row inside a match found so far
    pos = 0
    while pos < n:
        if q.skip_mode == "ALL_MATCHES":
            seen = set()
            any_found = False
            for a in enum.candidates(pos):
                if a in seen:
                    continue
                seen.add(a)
                any_found = True
                number += 1
                m = _Found(pos, a)
                yield ("match", m, number)
                covered = max(covered, m.last)
            if not any_found and unmatched and pos > covered:
                yield ("unmatched", pos)
            pos += 1
            continue
        a = next(enum.candidates(pos, number + 1), None)
        if a is None:
            if unmatched and pos > covered:
                yield ("unmatched", pos)
            pos += 1
            continue
        m = _Found(pos, a)
        number += 1
        yield ("match", m, number)
        if not m.length:
            pos += 1
            continue
        covered = max(covered, m.last)
        pos = _resume(q, m)


def _resume(q: AnalyzedQuery, m: _Found) -> int:
    mode = q.skip_mode
    if mode == "PAST_LAST":
        return m.last + 1
    if mode == "NEXT_ROW":
        return m.start + 1
    if mode in ("FIRST", "LAST"):
        idx = [i for i, (v, _) in enumerate(m.assign) if v in q.skip_target]
        if not idx:
            raise OracleError(f"AFTER MATCH SKIP TO {mode} {q.skip_target_name}: no such row in the match")
        at = m.start + (idx[0] if mode == "FIRST" else idx[-1])
        if at == m.start:
            raise OracleError(f"AFTER MATCH SKIP TO {mode} {q.skip_target_name}: would resume at the match's first row")
        return at
    raise NotImplementedError(f"AFTER MATCH SKIP {mode}")


# ====================================================================== output
def _output_columns(q: AnalyzedQuery) -> list[tuple[str, int | None]]:
    """(name, input column) per output column; None: the next measure. ONE ROW: partition
    columns, measures. ALL ROWS: partition columns, ORDER BY columns, measures, the other
    input columns in input order."""
    out: list[tuple[str, int | None]] = [(k.column, k.index) for k in q.partition_by]
    if q.rows_per_match == "ALL":
        for k in q.order_by:
            if all(name != k.column for name, _ in out):
                out.append((k.column, k.index))
    out += [(m.name, None) for m in q.measures]
    if q.rows_per_match == "ALL":
        taken = {name for name, _ in out}
        out += [(name, i) for i, name in enumerate(q.columns) if name not in taken]
    return out


def _measure_value(v: Any, t: Type) -> Any:
    if t is Type.DOUBLE and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v


def _measures(q: AnalyzedQuery, part: _Partition, start: int, labels: tuple[int, ...], cur: int,
              number: int) -> list[Any]:
    """Every measure of the match at ``start`` with the current row at index ``cur``."""
    ctx = _Ctx(part, start, labels, cur, number, q.measure_aggregates)
    return [_measure_value(evaluate(md.expr, ctx), md.type) for md in q.measures]


def oracle(q: AnalyzedQuery, table: pa.Table) -> list[dict]:
    """The output rows of ``q`` over ``table`` as dicts, in output order."""
    if q.event_selection != "PARTITION":
        raise NotImplementedError(f"EVENT SELECTION {q.event_selection}")
    if q.negated:
        raise NotImplementedError("negation")
    n = table.num_rows
    raw = [table.column(i).to_pylist() for i in range(table.num_columns)]
    cols: list[list[Any] | None] = []
    for i in range(table.num_columns):
        try:
            cols.append(_column_values(table.column(i)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            cols.append(None)
    if q.within is not None:
        first = cols[q.order_by[0].index]
        if any(v is None for v in first):
            raise OracleError("WITHIN: NULL in the first ORDER BY column")

    layout = _output_columns(q)
    out: list[dict] = []

    def emit(row: int, values: list[Any]) -> None:
        record: dict[str, Any] = {}
        it = iter(values)
        for (name, idx) in layout:
            record[name] = raw[idx][row] if idx is not None else next(it)
        out.append(record)

    nulls = [None] * len(q.measures)
    for rows in _partitions(q, cols, n):
        part = _Partition(q, cols, rows)
        order0 = [part.value(q.order_by[0].index, r) for r in range(part.n)] if q.order_by else None
        enum = _Enumerator(q, part, order0)
        for item in _select(q, part, enum):
            if item[0] == "unmatched":
                emit(rows[item[1]], nulls)
                continue
            _, m, number = item
            labels = tuple(v for v, _ in m.assign)
            if q.rows_per_match != "ALL":
                emit(rows[m.start], _measures(q, part, m.start, labels, m.length - 1, number))
            elif not m.length:
                if q.empty_matches != "OMIT":
                    emit(rows[m.start], _measures(q, part, m.start, labels, -1, number))
            else:
                for i, (_, excl) in enumerate(m.assign):
                    if not excl:
                        emit(rows[m.start + i], _measures(q, part, m.start, labels, i, number))
    return out
