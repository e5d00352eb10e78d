"""Segment aggregates, vectorized over candidate segments.

Every aggregate answers ``lookup(starts, ends)`` for arrays of inclusive segment bounds of
one partition with (values, valid) arrays. Built-ins build a shared structure once per
partition (T-REX's index()) so each lookup is O(1): prefix sums for counts, sums, averages
and the regression; sparse tables for min and max. Mann-Kendall's S is an exact integer,
computed per segment (O(length²), compiled) or from a table of all pairs — the same number
either way, so a plan's choice never changes an answer.

NULL is ``valid == False``; NaN follows SQL's order (above every number).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sparkcep.jit import njit
from sparkcep.values import FunctionError, fits_bigint

Values = tuple[np.ndarray, np.ndarray]  # (data, valid)

# R² is rounded to this many decimals: the prefix-sum form and a direct computation then agree
# on exact fits (a perfect line is 1.0, not 0.9999999999999998).
R2_DECIMALS = 12


@dataclass
class Column:
    """One partition's column as numbers: ``data`` (float64, or int64/object where exact
    values matter), ``valid`` (not NULL)."""

    data: np.ndarray
    valid: np.ndarray

    @property
    def n(self) -> int:
        return len(self.data)


@njit(_nrt=False, inline='always')
def sql_less_number(a, b):
    """a < b in SQL's order for numbers, NaN above every number: the compiled code's rule
    (the kernels' registers, the columnar folds); functions.library.sql_less is the same rule
    for any value."""
    if a != a or b != b:
        return b != b and not a != a
    return a < b


def _prefix(a: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a) + 1, dtype=np.float64 if a.dtype.kind == "f" else np.int64)
    np.cumsum(a, out=out[1:])
    return out


def _range(p: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return p[ends + 1] - p[starts]


# ---------------------------------------------------------------- first / last
def first(col: Column, starts: np.ndarray, ends: np.ndarray) -> Values:
    return col.data[starts], col.valid[starts]


def last(col: Column, starts: np.ndarray, ends: np.ndarray) -> Values:
    return col.data[ends], col.valid[ends]


# ---------------------------------------------------------------- count / sum / avg
class Sums:
    """Prefix sums of a numeric column (NULLs skipped): count, sum, and NaN count."""

    def __init__(self, col: Column):
        data = col.data.astype(np.float64)
        nan = col.valid & np.isnan(data)
        ok = col.valid & ~nan
        self.count = _prefix(col.valid.astype(np.int64))
        self.nans = _prefix(nan.astype(np.int64))
        self.integral = col.data.dtype.kind in "iub"
        if self.integral:
            # int64 prefix sums wrap, but a difference of two is exact modulo 2^64: exact for
            # every segment whose sum fits BIGINT. Float prefix sums find the others.
            self.ints = np.where(col.valid, col.data, 0).astype(np.int64)
            self.sum = _prefix(self.ints)
            self.approx = _prefix(self.ints.astype(np.float64))
        else:
            # Shift by a reference value: prefix sums of large numbers (epoch seconds) lose
            # the digits a segment's difference needs.
            self.ref = float(data[ok][0]) if ok.any() else 0.0
            self.sum = _prefix(np.where(ok, data - self.ref, 0.0))
            self.ok = _prefix(ok.astype(np.int64))

    def count_of(self, starts, ends) -> Values:
        c = _range(self.count, starts, ends)
        return c, np.ones(len(c), dtype=bool)

    def _int_sums(self, starts, ends) -> tuple[np.ndarray, dict[int, int]]:
        """Segment sums of an integer column, and the exact (Python) sums of the segments
        whose sum may lie beyond 64 bits."""
        s = _range(self.sum, starts, ends)
        doubt = np.flatnonzero(np.abs(_range(self.approx, starts, ends)) >= 2.0**62)
        exact = {int(k): int(self.ints[starts[k]:ends[k] + 1].astype(object).sum()) for k in doubt}
        return s, exact

    def sum_of(self, starts, ends) -> Values:
        c = _range(self.count, starts, ends)
        if self.integral:
            s, exact = self._int_sums(starts, ends)
            for v in exact.values():
                if not fits_bigint(v):
                    raise FunctionError("bigint overflow in sum")
            return s, c > 0
        k = _range(self.ok, starts, ends)
        s = _range(self.sum, starts, ends) + k * self.ref
        s = np.where(_range(self.nans, starts, ends) > 0, np.nan, s)
        return s, c > 0

    def avg_of(self, starts, ends) -> Values:
        c = _range(self.count, starts, ends)
        if self.integral:  # AVG of integers is a double of their exact sum (no BIGINT limit)
            s, exact = self._int_sums(starts, ends)
            with np.errstate(all="ignore"):
                out = s / np.maximum(c, 1)
            for k, v in exact.items():
                out[k] = v / max(int(c[k]), 1)
            return out, c > 0
        s, valid = self.sum_of(starts, ends)
        with np.errstate(all="ignore"):
            return s / np.maximum(c, 1), valid


# ---------------------------------------------------------------- min / max
class SparseTable:
    """O(1) range minimum and maximum after an O(n log n) build (NULLs skipped; NaN is the
    largest value, as SQL orders it). Integer columns stay int64 throughout (a float64 table
    would round values beyond 2^53)."""

    def __init__(self, col: Column):
        self.exact = col.data.dtype.kind in "iub"
        if self.exact:
            data = col.data.astype(np.int64)
            nan = np.zeros(len(data), dtype=bool)
            low_fill, high_fill = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        else:
            data = col.data.astype(np.float64)
            nan = col.valid & np.isnan(data)
            low_fill, high_fill = np.inf, -np.inf
        ok = col.valid & ~nan
        self.nans = _prefix(nan.astype(np.int64))
        self.count = _prefix(col.valid.astype(np.int64))
        self.lo = self._build(np.where(ok, data, low_fill), np.minimum)
        self.hi = self._build(np.where(ok, data, high_fill), np.maximum)
        self.ok = _prefix(ok.astype(np.int64))
        self.raw = col.data

    @staticmethod
    def _build(a: np.ndarray, op) -> list[np.ndarray]:
        levels = [a]
        k = 1
        while 2 * k <= len(a):
            prev = levels[-1]
            levels.append(op(prev[:-k], prev[k:]))
            k *= 2
        return levels

    def _query(self, levels, op, starts, ends) -> np.ndarray:
        length = ends - starts + 1
        out = np.zeros(len(starts), dtype=levels[0].dtype)
        if len(length) == 0:
            return out
        k = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
        for level in np.unique(k):
            sel = k == level
            a = levels[level]
            span = 1 << int(level)
            out[sel] = op(a[starts[sel]], a[ends[sel] - span + 1])
        return out

    def min_of(self, starts, ends) -> Values:
        v = self._query(self.lo, np.minimum, starts, ends)
        has_ok = _range(self.ok, starts, ends) > 0
        if self.exact:
            return np.where(has_ok, v, 0), has_ok
        has_nan = _range(self.nans, starts, ends) > 0
        return np.where(has_ok, v, np.nan), has_ok | has_nan  # only NaNs: the minimum is NaN

    def max_of(self, starts, ends) -> Values:
        v = self._query(self.hi, np.maximum, starts, ends)
        has_ok = _range(self.ok, starts, ends) > 0
        if self.exact:
            return np.where(has_ok, v, 0), has_ok
        has_nan = _range(self.nans, starts, ends) > 0
        return np.where(has_nan, np.nan, v), has_ok | has_nan


# ---------------------------------------------------------------- regression
class Regression:
    """Prefix sums of x, y, x², y², xy over the rows where both are non-NULL (each shifted by
    a reference value for precision), and of value changes, to tell "all equal" exactly."""

    def __init__(self, x: Column, y: Column):
        both = x.valid & y.valid
        xd = np.where(both, x.data.astype(np.float64), 0.0)
        yd = np.where(both, y.data.astype(np.float64), 0.0)
        nan = both & (np.isnan(xd) | np.isnan(yd))
        ok = both & ~nan
        xr = float(xd[ok].mean()) if ok.any() else 0.0
        yr = float(yd[ok].mean()) if ok.any() else 0.0
        xs, ys = np.where(ok, xd - xr, 0.0), np.where(ok, yd - yr, 0.0)
        self.n = _prefix(both.astype(np.int64))
        self.nans = _prefix(nan.astype(np.int64))
        self.sx, self.sy = _prefix(xs), _prefix(ys)
        self.sxx, self.syy, self.sxy = _prefix(xs * xs), _prefix(ys * ys), _prefix(xs * ys)
        self.xchange = _changes(xd, both)
        self.ychange = _changes(yd, both)
        self.next_valid = _next_valid(both)

    def r2(self, starts, ends, signed: bool) -> Values:
        n = _range(self.n, starts, ends).astype(np.float64)
        sx, sy = _range(self.sx, starts, ends), _range(self.sy, starts, ends)
        sxx, syy, sxy = (_range(p, starts, ends) for p in (self.sxx, self.syy, self.sxy))
        with np.errstate(all="ignore"):
            cov = sxy / n - (sx / n) * (sy / n)
            vx = sxx / n - (sx / n) ** 2
            vy = syy / n - (sy / n) ** 2
            r2 = np.clip(cov * cov / (vx * vy), 0.0, 1.0)
        if signed:
            r2 = r2 * np.sign(cov)
        r2 = np.round(r2, R2_DECIMALS) + 0.0  # -0.0 becomes 0.0
        # Variance 0 means all values are equal: decided exactly from value changes.
        first_ok = self.next_valid[starts]
        flat_x = _changes_between(self.xchange, first_ok, ends) == 0
        flat_y = _changes_between(self.ychange, first_ok, ends) == 0
        has_nan = _range(self.nans, starts, ends) > 0
        r2 = np.where(has_nan, np.nan, r2)
        valid = (n >= 2) & ~flat_x & ~flat_y
        return np.where(valid, r2, 0.0), valid


@njit
def _r2_direct(x, y, both, starts, ends, signed):
    """R² of each segment from its own rows (two passes, no shared prefix sums)."""
    m = len(starts)
    out = np.zeros(m)
    valid = np.zeros(m, dtype=np.bool_)
    for q in range(m):
        n = 0
        nan = False
        flat_x = True
        flat_y = True
        sx = 0.0
        sy = 0.0
        px = 0.0
        py = 0.0
        for r in range(starts[q], ends[q] + 1):
            if not both[r]:
                continue
            if n > 0:
                if not (x[r] == px or (np.isnan(x[r]) and np.isnan(px))):
                    flat_x = False
                if not (y[r] == py or (np.isnan(y[r]) and np.isnan(py))):
                    flat_y = False
            px, py = x[r], y[r]
            n += 1
            if np.isnan(x[r]) or np.isnan(y[r]):
                nan = True
            else:
                sx += x[r]
                sy += y[r]
        if n < 2 or flat_x or flat_y:
            continue
        valid[q] = True
        if nan:
            out[q] = np.nan
            continue
        mx, my = sx / n, sy / n
        cxy = 0.0
        cxx = 0.0
        cyy = 0.0
        for r in range(starts[q], ends[q] + 1):
            if both[r]:
                dx, dy = x[r] - mx, y[r] - my
                cxy += dx * dy
                cxx += dx * dx
                cyy += dy * dy
        r2 = cxy * cxy / (cxx * cyy)
        r2 = min(max(r2, 0.0), 1.0)
        if signed:
            r2 = r2 * np.sign(cxy)
        out[q] = r2
    return out, valid


def r2_per_segment(x: Column, y: Column, starts, ends, signed: bool) -> Values:
    """``Regression.r2`` computed from each segment's rows alone (no computation sharing)."""
    both = x.valid & y.valid
    out, valid = _r2_direct(np.where(both, x.data.astype(np.float64), 0.0), np.where(both, y.data.astype(np.float64), 0.0),
                            both, starts.astype(np.int64), ends.astype(np.int64), signed)
    return np.where(valid, np.round(out, R2_DECIMALS) + 0.0, 0.0), valid


def _changes(d: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Prefix count of valid rows whose value differs from the previous valid row's."""
    idx = np.flatnonzero(valid)
    c = np.zeros(len(d), dtype=np.int64)
    if len(idx) > 1:
        prev, cur = d[idx[:-1]], d[idx[1:]]
        differs = ~((prev == cur) | (np.isnan(prev) & np.isnan(cur)))
        c[idx[1:]] = differs
    return _prefix(c)


def _next_valid(valid: np.ndarray) -> np.ndarray:
    """For each row, the first valid row at or after it (n when none)."""
    n = len(valid)
    out = np.full(n + 1, n, dtype=np.int64)
    idx = np.flatnonzero(valid)
    if len(idx) == 0:
        return out
    pos = np.searchsorted(idx, np.arange(n))
    out[:n] = np.where(pos < len(idx), idx[np.minimum(pos, len(idx) - 1)], n)
    return out


def _changes_between(p: np.ndarray, first_ok: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Changes at valid rows after ``first_ok`` up to ``ends`` (a change at first_ok itself
    compares with a row before the segment, so it does not count)."""
    lo = np.minimum(first_ok + 1, ends + 1)
    return np.maximum(p[ends + 1] - p[lo], 0)


# ---------------------------------------------------------------- Mann-Kendall
@njit
def _mk_s(x: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    m = len(starts)
    s_out = np.zeros(m, dtype=np.int64)
    n_out = np.zeros(m, dtype=np.int64)
    for q in range(m):
        s = 0
        cnt = 0
        for a in range(starts[q], ends[q] + 1):
            if not valid[a]:
                continue
            cnt += 1
            xa = x[a]
            for b in range(a + 1, ends[q] + 1):
                if valid[b]:
                    xb = x[b]
                    if xb > xa:
                        s += 1
                    elif xb < xa:
                        s -= 1
        s_out[q] = s
        n_out[q] = cnt
    return s_out, n_out


def _sql_rank(col: Column) -> np.ndarray:
    """Values as ranks in SQL order (NaN above every number), so sign(x_l − x_k) is exact."""
    d = col.data.astype(np.float64)
    nan = np.isnan(d)
    _, rank = np.unique(np.where(nan, 0.0, d), return_inverse=True)
    rank = rank.reshape(-1).astype(np.float64)
    return np.where(nan, rank.max(initial=0.0) + 1.0, rank)


class MannKendall:
    """Mann-Kendall Z per segment from the exact integer S (no tie correction)."""

    def __init__(self, col: Column):
        self.x = _sql_rank(col)
        self.valid = col.valid

    def z(self, starts, ends) -> Values:
        s, n = _mk_s(self.x, self.valid, starts.astype(np.int64), ends.astype(np.int64))
        return mann_kendall_z(s, n)


def mann_kendall_z(s: np.ndarray, n: np.ndarray) -> Values:
    nf = n.astype(np.float64)
    with np.errstate(all="ignore"):
        v = nf * (nf - 1) * (2 * nf + 5) / 18.0
        z = np.where(s > 0, (s - 1) / np.sqrt(v), np.where(s < 0, (s + 1) / np.sqrt(v), 0.0))
    valid = n >= 2
    return np.where(valid, z, 0.0), valid


# ---------------------------------------------------------------- zscore (point variables)
def zscore(col: Column, k: int) -> Values:
    """(x_i − mean) / population stdev of x over the k rows before row i; NULL when fewer
    than k rows precede it, when x_i or one of them is NULL, or when they are all equal."""
    n = col.n
    d = col.data.astype(np.float64)
    out = np.zeros(n)
    valid = np.zeros(n, dtype=bool)
    if k < 1:
        return out, valid
    for i in range(k, n):
        if not col.valid[i] or not col.valid[i - k:i].all():
            continue
        w = d[i - k:i]
        if np.isnan(w).any() or math.isnan(d[i]):
            out[i], valid[i] = math.nan, True
            continue
        if (w == w[0]).all():
            continue
        sd = float(np.sqrt(np.mean((w - w.mean()) ** 2)))
        out[i] = (d[i] - w.mean()) / sd
        valid[i] = True
    return out, valid


# ---------------------------------------------------------------- without sharing
def per_segment(make, columns: list[Column], ask, starts: np.ndarray, ends: np.ndarray) -> Values:
    """``ask`` answered by a structure ``make`` builds over each segment's rows alone: the
    same values as the shared structure, at the cost of one build per segment."""
    m = len(starts)
    if m == 0:
        return ask(make(*columns), starts, ends)
    data: list = []
    valid = np.zeros(m, dtype=bool)
    zero = np.zeros(1, dtype=np.int64)
    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        part = make(*(Column(c.data[s:e + 1], c.valid[s:e + 1]) for c in columns))
        d, v = ask(part, zero, np.array([e - s], dtype=np.int64))
        data.append(d[0])
        valid[k] = v[0]
    return np.array(data), valid


# ---------------------------------------------------------------- user aggregates
@dataclass(frozen=True)
class UserAggregate:
    name: str
    fn: Callable[..., float]
    index: Callable[..., object] | None = None  # builds an object with lookup(start, end)


def _as_float(cols: list[Column]) -> list[np.ndarray]:
    return [np.where(c.valid, c.data.astype(np.float64), np.nan) for c in cols]


def user_index(agg: UserAggregate, cols: list[Column]):
    """The registered aggregate's index() over whole columns (NULL as NaN)."""
    return agg.index(*_as_float(cols))


def user_lookup(agg: UserAggregate, cols: list[Column], starts, ends, idx=None, plain: bool = False) -> Values:
    """A registered aggregate over each segment: through its index (built once per series by
    the caller) where it has one, else (or ``plain``) called on the segment's rows (NULL as
    NaN)."""
    arrays = _as_float(cols)
    out = np.zeros(len(starts))
    valid = np.zeros(len(starts), dtype=bool)
    if idx is None and agg.index is not None and not plain:
        idx = agg.index(*arrays)
    for q, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        v = idx.lookup(s, e) if idx is not None else agg.fn(*(a[s:e + 1] for a in arrays))
        if v is not None:  # checked at registration: a float, or None for NULL
            out[q], valid[q] = v, True
    return out, valid
