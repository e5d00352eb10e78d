"""T-REX's tree executor: physical operators that turn a search space into the segments
matching their sub-pattern.

Every operator has ``eval(series, space) -> Segs``. Leaves generate segments (SegGenWindow
when the variable has only window conditions, SegGenIndexing otherwise: conditions read the
partition's shared aggregate indexes). Binary operators join the segments of their children:
SortMerge evaluates both children on their whole search spaces; LeftProbe/RightProbe evaluate
one child first and restrict the other's search space to the join points (Concat) or to the
exact segments (And) found — one vectorized call for all probes. Not materializes the child
once (MaterializeNot) or checks each candidate exactly (ProbeNot); Kleene chains its child's
segments breadth first (MaterializeKleene); Filter evaluates conditions that read other
variables, over the segments a join assembled (their payload).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sparkcep.analysis.bound import BExpr
from sparkcep.segments.candidates import Frame, holds
from sparkcep.segments.series import Series
from sparkcep.segments.space import (
    ANY,
    Segs,
    Space,
    Window,
    concat_segs,
    encode,
    enumerate_space,
)


@dataclass
class Context:
    """What operators share while one partition is evaluated."""

    series: Series
    aggregates: tuple = ()
    user: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, key: str, k: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + k


class Operator:
    name: str = "?"
    window: Window = ANY
    children: tuple[Operator, ...] = ()

    def eval(self, ctx: Context, space: Space) -> Segs:  # pragma: no cover - abstract
        raise NotImplementedError

    def variables(self) -> set[int]:
        out: set[int] = set()
        for c in self.children:
            out |= c.variables()
        return out

    def label(self, names: tuple[str, ...]) -> str:
        return self.name


def in_window(ctx: Context, window: Window, segs: Segs) -> Segs:
    """``segs`` that satisfy ``window`` (rows and spans)."""
    if window.unbounded or len(segs) == 0:
        return segs
    length = segs.ends - segs.starts + 1
    ok = length >= window.min_rows
    if window.max_rows is not None:
        ok &= length <= window.max_rows
    for col, lo, hi, unit in window.spans:
        c = ctx.series.numeric(col)
        span = (c.data[segs.ends] - c.data[segs.starts]).astype(np.float64) / unit
        good = c.valid[segs.starts] & c.valid[segs.ends] & ~np.isnan(span)
        if lo is not None:
            good &= span >= lo - 1e-9 * abs(lo)
        if hi is not None:
            good &= span <= hi + 1e-9 * abs(hi)
        ok &= good
    return segs.where(ok)


def row_bound(ctx: Context, window: Window) -> int | None:
    """At most how many rows a segment within ``window`` can hold in this partition: its row
    bound, or one derived from a span on a column that never decreases (e.g. ORDER BY)."""
    best = window.max_rows
    for col, hi, unit in [(c, h, u) for c, _lo, h, u in window.spans] + list(window.hints):
        if hi is None:
            continue
        c = ctx.series.numeric(col)
        d = c.data.astype(np.float64)
        if len(d) == 0 or not c.valid.all() or np.isnan(d).any() or np.any(np.diff(d) < 0):
            continue
        far = np.searchsorted(d, d + hi * unit * (1 + 1e-9) + 1e-12, side="right") - np.arange(len(d))
        bound = int(far.max())
        best = bound if best is None else min(best, bound)
    return best


# ---------------------------------------------------------------- leaves
@dataclass(eq=False)
class SegGen(Operator):
    """A variable's segments: windowed candidates in the space, filtered by its own
    conditions (none: SegGenWindow). A point variable's segments are single rows."""

    var: int
    segment: bool
    window: Window = ANY
    conditions: tuple[BExpr, ...] = ()
    payload: bool = False  # a condition higher up reads this variable's segment

    @property
    def name(self) -> str:
        return "SegGenIndexing" if self.conditions else "SegGenWindow"

    def variables(self) -> set[int]:
        return {self.var}

    def label(self, names: tuple[str, ...]) -> str:
        w = "" if self.window.unbounded else f" {window_text(self.window)}"
        return f"{self.name}({names[self.var]}{w})"

    def eval(self, ctx: Context, space: Space) -> Segs:
        window = self.window if self.segment else (self.window & Window(1, 1))
        cand = enumerate_space(space, window, ctx.series.n, row_bound(ctx, window))
        cand = in_window(ctx, window, cand)
        ctx.count("candidates", len(cand))
        if self.conditions and len(cand):
            frame = Frame(ctx.series, (cand.starts, cand.ends), own_labels=frozenset({self.var}),
                          aggregates=ctx.aggregates, user=ctx.user)
            ok = np.ones(len(cand), dtype=bool)
            for c in self.conditions:
                idx = np.flatnonzero(ok)
                if len(idx) == 0:
                    break
                sub = Frame(ctx.series, (cand.starts[idx], cand.ends[idx]), own_labels=frame.own_labels,
                            aggregates=ctx.aggregates, user=ctx.user)
                ok[idx] &= holds(c, sub)  # conjuncts in order: later ones see fewer candidates
            cand = cand.where(ok)
        if self.payload:
            cand.payload[self.var] = (cand.starts.copy(), cand.ends.copy())
        return cand


def window_text(w: Window) -> str:
    parts = []
    if w.min_rows > 1 or w.max_rows is not None:
        parts.append(f"rows {w.min_rows}..{w.max_rows if w.max_rows is not None else '∞'}")
    for col, lo, hi, _ in w.spans:
        parts.append(f"span#{col} {lo}..{hi if hi is not None else '∞'}")
    return "[" + ", ".join(parts) + "]"


# ---------------------------------------------------------------- joins
def _join(left: Segs, right: Segs, lkey: np.ndarray, rkey: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with lkey[i] == rkey[j]."""
    return _range_join(lkey, lkey, rkey)


def _range_join(lo: np.ndarray, hi: np.ndarray, rkey: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with lo[i] <= rkey[j] <= hi[i]."""
    order = np.argsort(rkey, kind="stable")
    rs = rkey[order]
    a = np.searchsorted(rs, lo, side="left")
    b = np.searchsorted(rs, hi, side="right")
    counts = np.maximum(b - a, 0)
    li = np.repeat(np.arange(len(lo)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    ri = order[np.repeat(a, counts) + offsets]
    return li, ri


def _combine(left: Segs, right: Segs, li: np.ndarray, ri: np.ndarray, starts, ends) -> Segs:
    payload = {v: (s[li], e[li]) for v, (s, e) in left.payload.items()}
    payload.update({v: (s[ri], e[ri]) for v, (s, e) in right.payload.items()})
    return Segs(starts, ends, payload)


@dataclass(eq=False)
class Concat(Operator):
    """``left right``: the right segment starts where the left ends (``share``) or on the
    next row."""

    left: Operator
    right: Operator
    share: bool
    how: str = "sort_merge"  # "sort_merge", "left_probe", "right_probe"
    window: Window = ANY

    @property
    def children(self):
        return (self.left, self.right)

    @property
    def name(self) -> str:
        return {"sort_merge": "SortMergeConcat", "left_probe": "LeftProbeConcat",
                "right_probe": "RightProbeConcat"}[self.how]

    def eval(self, ctx: Context, space: Space) -> Segs:
        gap = 0 if self.share else 1
        lspace = Space(space.s_lo, space.s_hi, space.s_lo, space.e_hi - gap, starts=space.starts)
        rspace = Space(space.s_lo + gap, space.e_hi, space.e_lo, space.e_hi, ends=space.ends)
        if self.how == "right_probe":
            left = self.left.eval(ctx, lspace)
            right = self.right.eval(ctx, rspace.with_starts(left.ends + gap)) if len(left) else Segs.none()
        elif self.how == "left_probe":
            right = self.right.eval(ctx, rspace)
            left = self.left.eval(ctx, lspace.with_ends(right.starts - gap)) if len(right) else Segs.none()
        else:
            left = self.left.eval(ctx, lspace)
            right = self.right.eval(ctx, rspace)
        ctx.count("joined pairs considered", len(left) + len(right))
        li, ri = _join(left, right, left.ends + gap, right.starts)
        out = _combine(left, right, li, ri, left.starts[li], right.ends[ri])
        out = out.where(space.admits(out.starts, out.ends))
        return in_window(ctx, self.window, out)


@dataclass(eq=False)
class WConcat(Operator):
    """``left W right`` where W is a window-only segment variable of ``lo``..``hi`` rows (hi
    None: a wild window) sharing its boundary rows with both: the right segment starts
    ``lo − 1``..``hi − 1`` rows after the left one ends. T-REX's wild-window concatenation:
    the pairs are joined directly, W's segments are never enumerated. ``bound`` is the
    length bound the parent pushed down (rows, or spans on never-decreasing columns)."""

    left: Operator
    right: Operator
    lo: int
    hi: int | None
    how: str = "sort_merge"
    window: Window = ANY
    bound: Window = ANY

    @property
    def children(self):
        return (self.left, self.right)

    @property
    def name(self) -> str:
        return {"sort_merge": "SortMergeWConcat", "left_probe": "LeftProbeWConcat",
                "right_probe": "RightProbeWConcat"}[self.how]

    def label(self, names: tuple[str, ...]) -> str:
        return f"{self.name}[gap {self.lo}..{self.hi if self.hi is not None else ''} rows]"

    def eval(self, ctx: Context, space: Space) -> Segs:
        g_lo = self.lo - 1
        g_hi = self.hi - 1 if self.hi is not None else space.e_hi + 1
        total = row_bound(ctx, self.window & self.bound)
        top = space.e_hi + 1
        lspace = Space(space.s_lo, space.s_hi, space.s_lo, space.e_hi, starts=space.starts)
        rspace = Space(space.s_lo, space.e_hi, space.e_lo, space.e_hi, ends=space.ends)

        def right_starts(left: Segs) -> tuple[np.ndarray, np.ndarray]:
            hi = left.ends + g_hi
            if total is not None:
                hi = np.minimum(hi, left.starts + total - 1)
            return left.ends + g_lo, hi

        if self.how == "right_probe":
            left = self.left.eval(ctx, lspace)
            lo, hi = right_starts(left)
            right = self.right.eval(ctx, rspace.with_starts(cover(lo, hi, top))) if len(left) else Segs.none()
        elif self.how == "left_probe":
            right = self.right.eval(ctx, rspace)
            lo = right.starts - g_hi
            if total is not None:
                lo = np.maximum(lo, right.ends - total + 1)
            ends = cover(lo, right.starts - g_lo, top)
            left = self.left.eval(ctx, lspace.with_ends(ends)) if len(right) else Segs.none()
        else:
            left = self.left.eval(ctx, lspace)
            right = self.right.eval(ctx, rspace)
        ctx.count("joined pairs considered", len(left) + len(right))
        lo, hi = right_starts(left)
        li, ri = _range_join(lo, hi, right.starts)
        out = _combine(left, right, li, ri, left.starts[li], right.ends[ri])
        if total is not None:
            out = out.where(out.ends - out.starts + 1 <= total)
        out = out.where(space.admits(out.starts, out.ends))
        return in_window(ctx, self.window, out)


@dataclass(eq=False)
class And(Operator):
    left: Operator
    right: Operator
    how: str = "sort_merge"
    window: Window = ANY

    @property
    def children(self):
        return (self.left, self.right)

    @property
    def name(self) -> str:
        return {"sort_merge": "SortMergeAnd", "left_probe": "LeftProbeAnd", "right_probe": "RightProbeAnd"}[self.how]

    def eval(self, ctx: Context, space: Space) -> Segs:
        if self.how == "right_probe":
            left = self.left.eval(ctx, space)
            right = self.right.eval(ctx, space.exactly(left.starts, left.ends)) if len(left) else Segs.none()
        elif self.how == "left_probe":
            right = self.right.eval(ctx, space)
            left = self.left.eval(ctx, space.exactly(right.starts, right.ends)) if len(right) else Segs.none()
        else:
            left = self.left.eval(ctx, space)
            right = self.right.eval(ctx, space)
        li, ri = _join(left, right, encode(left.starts, left.ends), encode(right.starts, right.ends))
        out = _combine(left, right, li, ri, left.starts[li], left.ends[li])
        return in_window(ctx, self.window, out)


@dataclass(eq=False)
class Or(Operator):
    items: tuple[Operator, ...]
    window: Window = ANY
    name: str = "SortMergeOr"

    @property
    def children(self):
        return self.items

    def eval(self, ctx: Context, space: Space) -> Segs:
        out = concat_segs([i.eval(ctx, space) for i in self.items])
        return in_window(ctx, self.window, out).distinct()


@dataclass(eq=False)
class Not(Operator):
    """``~child`` within the space and the window the pattern gives it."""

    child: Operator
    window: Window = ANY
    how: str = "materialize"  # or "probe"

    @property
    def children(self):
        return (self.child,)

    @property
    def name(self) -> str:
        return "MaterializeNot" if self.how == "materialize" else "ProbeNot"

    def eval(self, ctx: Context, space: Space) -> Segs:
        cand = in_window(ctx, self.window, enumerate_space(space, self.window, ctx.series.n,
                                                             row_bound(ctx, self.window)))
        ctx.count("candidates", len(cand))
        if not len(cand):
            return cand
        inner_space = space.exactly(cand.starts, cand.ends) if self.how == "probe" else space
        inner = self.child.eval(ctx, inner_space)
        hit = np.isin(encode(cand.starts, cand.ends), encode(inner.starts, inner.ends))
        return cand.where(~hit)


def cover(lo: np.ndarray, hi: np.ndarray, top: int) -> np.ndarray:
    """The rows in [0, top) inside any of the inclusive ranges [lo[i], hi[i]] (a difference
    array: linear in ``top``, however wide or many the ranges)."""
    lo = np.maximum(np.asarray(lo, dtype=np.int64), 0)
    hi = np.minimum(np.asarray(hi, dtype=np.int64), top - 1)
    keep = lo <= hi
    marks = np.zeros(top + 1, dtype=np.int64)
    np.add.at(marks, lo[keep], 1)
    np.add.at(marks, hi[keep] + 1, -1)
    return np.flatnonzero(np.cumsum(marks[:top]) > 0)


def _trimmed(segs: Segs, bound: int | None) -> Segs:
    """Distinct segments without payload, at most ``bound`` rows long."""
    segs = segs.distinct()
    segs = Segs(segs.starts, segs.ends)
    return segs if bound is None else segs.where(segs.ends - segs.starts + 1 <= bound)


@dataclass(eq=False)
class Kleene(Operator):
    """``child{min,max}`` (min ≥ 1 here): chains of the child's segments, breadth first."""

    child: Operator
    min: int
    max: int | None
    share: bool
    window: Window = ANY
    name: str = "MaterializeKleene"

    @property
    def children(self):
        return (self.child,)

    def label(self, names: tuple[str, ...]) -> str:
        return f"{self.name}{{{self.min},{self.max if self.max is not None else ''}}}"

    def eval(self, ctx: Context, space: Space) -> Segs:
        gap = 0 if self.share else 1
        bound = row_bound(ctx, self.window)
        inner_space = Space(space.s_lo, space.e_hi, space.s_lo, space.e_hi)
        first = space.starts if space.pairs is None else np.unique(space.pairs[0])
        if first is not None and bound is not None:
            # A probe names the start rows: a chain from them stays within `bound` rows, so
            # the child is evaluated (once) only at the start rows those reach.
            inner_space = inner_space.with_starts(cover(first, first + bound - 1, space.e_hi + 1))
        pieces = _trimmed(self.child.eval(ctx, inner_space), bound)
        level = pieces.where(np.isin(pieces.starts, first) if first is not None
                             else (pieces.starts >= space.s_lo) & (pieces.starts <= space.s_hi))
        results = []
        found = np.zeros(0, dtype=np.int64)  # encoded segments of every count reached so far
        r = 1
        while len(level):
            keys = encode(level.starts, level.ends)
            if r >= self.min:
                fresh = ~np.isin(keys, found)
                if r > self.min and not fresh.any():
                    break  # shared boundaries can repeat a segment forever: nothing new comes
                results.append(level)
            found = np.union1d(found, keys)
            if self.max is not None and r >= self.max:
                break
            li, ri = _join(level, pieces, level.ends + gap, pieces.starts)
            level = Segs(level.starts[li], pieces.ends[ri])
            if bound is not None:
                level = level.where(level.ends - level.starts + 1 <= bound)
            level = level.where(level.ends <= space.e_hi).distinct()
            r += 1
            ctx.count("kleene steps")
        out = concat_segs(results).distinct() if results else Segs.none()
        out = out.where(space.admits(out.starts, out.ends))
        return in_window(ctx, self.window, out)


@dataclass(eq=False)
class Filter(Operator):
    """Conditions of ``var`` that read other variables, over the child's segments: each
    variable's segment comes from the payload the join below assembled."""

    child: Operator
    var: int
    conditions: tuple[BExpr, ...]
    labels_of: dict = field(default_factory=dict)  # label set -> variable id
    name: str = "Filter"

    @property
    def children(self):
        return (self.child,)

    def label(self, names: tuple[str, ...]) -> str:
        return f"Filter({names[self.var]})"

    def eval(self, ctx: Context, space: Space) -> Segs:
        segs = self.child.eval(ctx, space)
        if not len(segs):
            return segs
        own = segs.payload[self.var]
        bindings = {labels: segs.payload[v] for labels, v in self.labels_of.items()}
        frame = Frame(ctx.series, own, bindings, own_labels=frozenset({self.var}), aggregates=ctx.aggregates,
                      user=ctx.user)
        ok = np.ones(len(segs), dtype=bool)
        for c in self.conditions:
            ok &= holds(c, frame)
        return segs.where(ok)


def with_window(op: Operator, window: Window) -> Operator:
    """``op`` with ``window`` embedded (intersected with its own)."""
    return replace(op, window=op.window & window)


def walk(op: Operator):
    yield op
    for c in op.children:
        yield from walk(c)
