"""T-REX's cost-based optimizer (§5): cardinality and cost estimates per physical operator
(Table 1) from search-space range sizes, sampled selectivities and profiled per-operator
costs; at every n-ary And and Concat, dynamic programming over binary splits and the
physical choice of each join picks the cheapest tree.

Estimates follow Table 1 with one change where our executor differs: a probe hands the
probed child all its join points at once, so a right probe of a Concat costs
``COST_right(D(C_l, ℓse), ℓe)`` — one evaluation over D distinct start rows — instead of D
evaluations of ``COST_right(1, ℓe)``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import pathlib
from dataclasses import dataclass, field

import numpy as np

from sparkcep.segments.executor import (
    And,
    Concat,
    Context,
    Filter,
    Kleene,
    Not,
    Operator,
    Or,
    SegGen,
    WConcat,
)
from sparkcep.segments.space import Space, Window, enumerate_space

# Nanoseconds per unit of work (Equation 1's w), measured by ``sparkcep profile`` on this
# machine; the package ships the values measured when it was built.
DEFAULT_PROFILE = pathlib.Path(__file__).with_name("profile.json")
USER_PROFILE = pathlib.Path(os.environ.get("SPARKCEP_PROFILE", pathlib.Path.home() / ".cache" / "sparkcep" / "trex_profile.json"))


@functools.cache
def weights() -> dict[str, float]:
    for path in (USER_PROFILE, DEFAULT_PROFILE):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return {}  # pragma: no cover - the package ships a profile


def w(name: str) -> float:
    return weights().get(name, 1000.0)


@dataclass
class Stats:
    """What the optimizer knows of the data: the series length and, per leaf, the sampled
    selectivity of its conditions within its window and its segments' mean length."""

    n: float
    selectivity: dict[int, float] = field(default_factory=dict)
    mean_length: dict[int, float] = field(default_factory=dict)
    step: dict[int, float] = field(default_factory=dict)  # mean distance between rows, per span column


def distinct(draws: float, items: float) -> float:
    """Expected distinct items in ``draws`` uniform draws with replacement from ``items``."""
    if items <= 0:
        return 0.0
    return items * (1.0 - (1.0 - 1.0 / items) ** max(draws, 0.0)) if items > 1 else min(draws, 1.0)


def rows_of(window: Window, stats: Stats) -> tuple[float, float]:
    """The window's length bounds in rows (spans converted with the column's mean step)."""
    lo, hi = float(window.min_rows), float(window.max_rows) if window.max_rows is not None else math.inf
    for col, slo, shi, unit in window.spans:
        step = stats.step.get(col, 1.0) or 1.0
        if slo is not None:
            lo = max(lo, slo * unit / step + 1)
        if shi is not None:
            hi = min(hi, shi * unit / step + 1)
    return lo, hi


def window_selectivity(window: Window, ls: float, le: float, stats: Stats) -> float:
    """Share of the (start, end) pairs of an ℓs × ℓe space whose length fits the window
    (uniform starts and ends over the start-end range, as T-REX's closed forms assume)."""
    lo, hi = rows_of(window, stats)
    span = max(ls, le, 1.0)
    hi = min(hi, span)
    if lo > hi:
        return 0.0
    # Pairs (s, e), s ≤ e, over a range of `span` rows with e − s + 1 in [lo, hi].
    def pairs_upto(k: float) -> float:
        k = min(max(k, 0.0), span)
        return k * span - k * (k - 1) / 2
    total = span * (span + 1) / 2
    return max(pairs_upto(hi) - pairs_upto(lo - 1), 0.0) / total


class CostModel:
    def __init__(self, stats: Stats, aggregate_cost):
        self.stats = stats
        self.aggregate_cost = aggregate_cost  # SegGen -> (index build ns, ns per candidate)
        # Candidate trees share their subtrees (the same objects): estimate each once per
        # range size. Keyed by object identity, so the operators must outlive the model's use.
        self._memo: dict[tuple, tuple[float, float]] = {}
        self._alive: list[Operator] = []

    def estimate(self, op: Operator, ls: float, le: float, pairs: float | None = None) -> tuple[float, float]:
        """(output cardinality, cost in ns) of ``op`` over a space of range sizes (ℓs, ℓe), or
        over ``pairs`` exact candidate segments."""
        key = (id(op), round(ls, 3), round(le, 3), None if pairs is None else round(pairs, 3))
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = self._estimate(op, ls, le, pairs)
            self._alive.append(op)
        return got

    def mean_length(self, op: Operator) -> float:
        """Rows in an operator's typical segment (sampled for leaves, composed above them)."""
        if isinstance(op, SegGen):
            return self.stats.mean_length.get(op.var, 1.0) if op.segment else 1.0
        if isinstance(op, Concat):
            return self.mean_length(op.left) + self.mean_length(op.right) - (1.0 if op.share else 0.0)
        if isinstance(op, And):
            return max(self.mean_length(op.left), self.mean_length(op.right))
        if isinstance(op, WConcat):
            gap = (op.lo + (op.hi if op.hi is not None else self.stats.n / 3)) / 2
            return self.mean_length(op.left) + self.mean_length(op.right) + gap - 2.0
        if isinstance(op, Kleene):
            return 2.0 * self.mean_length(op.child)
        if isinstance(op, (Or, Not, Filter)):
            inner = [self.mean_length(c) for c in op.children]
            return sum(inner) / len(inner) if inner else 1.0
        return 1.0  # pragma: no cover

    def _estimate(self, op: Operator, ls: float, le: float, pairs: float | None) -> tuple[float, float]:
        s = self.stats
        ls, le = max(ls, 1.0), max(le, 1.0)
        lse = max(ls, le) if (ls > 1 or le > 1) else s.n / 3
        if isinstance(op, SegGen):
            window = op.window if op.segment else (op.window & Window(1, 1))
            cin = pairs * window_selectivity(window, ls, le, s) if pairs is not None else \
                ls * le * window_selectivity(window, ls, le, s)
            if not op.segment:
                cin = min(cin, ls if pairs is None else pairs)
            sel = s.selectivity.get(op.var, 1.0) if op.conditions else 1.0
            cout = cin * sel
            build, per = self.aggregate_cost(op)
            name = "SegGenIndexing" if op.conditions else "SegGenWindow"
            return cout, w(name) * (cin + cout) + build + per * cin
        if isinstance(op, (Concat, WConcat)):
            # A Concat joins each left segment to the right ones starting at one row; a
            # WConcat to those starting in a range of `width` rows after its end (the gap W
            # may take), within the pushed-down bound.
            width, window = 1.0, op.window
            if isinstance(op, WConcat):
                width = max(min(op.hi if op.hi is not None else lse, rows_of(op.bound, s)[1], lse) - op.lo + 1, 1.0)
                window = op.window & op.bound
            if op.how == "right_probe":
                cl, costl = self.estimate(op.left, ls, lse)
                cr, costr = self.estimate(op.right, distinct(cl * width, lse), le)
                key = cl
            elif op.how == "left_probe":
                cr, costr = self.estimate(op.right, lse, le)
                cl, costl = self.estimate(op.left, ls, distinct(cr * width, lse))
                key = cr
            else:
                cl, costl = self.estimate(op.left, ls, lse)
                cr, costr = self.estimate(op.right, lse, le)
                key = cl + cr
            cout = cl * cr * width / lse * window_selectivity(window, ls, le, s)
            if pairs is not None:
                cout = min(cout, pairs)
            return cout, w(op.name.replace("WConcat", "Concat")) * (key + cout) + costl + costr
        if isinstance(op, And):
            ws = max(window_selectivity(op.window, ls, le, s), 1e-9)
            if op.how == "right_probe":
                cl, costl = self.estimate(op.left, ls, le, pairs)
                cr, costr = self.estimate(op.right, ls, le, cl)
                key = cl
            elif op.how == "left_probe":
                cr, costr = self.estimate(op.right, ls, le, pairs)
                cl, costl = self.estimate(op.left, ls, le, cr)
                key = cr
            else:
                cl, costl = self.estimate(op.left, ls, le, pairs)
                cr, costr = self.estimate(op.right, ls, le, pairs)
                key = cl + cr
            space = pairs if pairs is not None else ls * le * ws
            cout = cl * cr / max(space, 1.0)
            return cout, w(op.name) * (key + cout) + costl + costr
        if isinstance(op, Or):
            total, cost = 0.0, 0.0
            for item in op.items:
                c, k = self.estimate(item, ls, le, pairs)
                total += c
                cost += k
            return total, w("SortMergeOr") * total + cost
        if isinstance(op, Not):
            cand = pairs if pairs is not None else ls * le * window_selectivity(op.window, ls, le, s)
            if op.how == "probe":
                cin, costc = self.estimate(op.child, ls, le, cand)
            else:
                cin, costc = self.estimate(op.child, ls, le, pairs)
            cout = max(cand - cin, 0.0)
            return cout, w(op.name) * (cand + cout) + costc
        if isinstance(op, Kleene):
            # Chains grow level by level: with d child segments per start row, a start has
            # about d^r chains of r pieces (at most one per end row of the window), for as many
            # levels as pieces fit in the window. Probed (few start rows), the child is
            # evaluated only where chains from those rows reach.
            wr = min(rows_of(op.window, s)[1], lse)
            probed = ls < lse
            child_ls = min(lse, ls * wr) if probed else lse
            cin, costc = self.estimate(op.child, child_ls, lse)
            d = cin / max(child_ls, 1.0)
            advance = max(self.mean_length(op.child) - (1.0 if op.share else 0.0), 1.0)
            levels = int(min(op.max or math.inf, max(1.0, wr / advance), 10_000))
            # a chain of r pieces spans at least (r − 1)·advance rows: fewer end rows remain
            per_level = [min(max(wr - (r - 1) * advance, 1.0), d ** r) for r in range(1, levels + 1)]
            starts = ls if probed else lse
            work = starts * sum(per_level)
            cout = starts * min(wr, sum(per_level[op.min - 1:])) * min(le / lse, 1.0)
            cout = min(cout, ls * le * window_selectivity(op.window, ls, le, s))
            if pairs is not None:
                cout = min(cout, pairs)
            return cout, w(op.name) * (work + cout) + w("kleene_level") * levels + costc
        if isinstance(op, Filter):
            cin, costc = self.estimate(op.child, ls, le, pairs)
            cout = cin * self.stats.selectivity.get(-100 - op.var, 0.5)
            return cout, w("Filter") * (cin + cout) + costc
        raise TypeError(op)  # pragma: no cover


# ---------------------------------------------------------------- statistics by sampling
def sample_stats(series_list, leaves: list[SegGen], aggregates, user, span_columns: set[int],
                 samples: int = 200, seed: int = 7) -> Stats:
    """Sampled selectivities (T-REX Appendix D.3): for each leaf with conditions, random
    windowed candidate segments of a few series are tested; their mean length is kept for
    the aggregate costs."""
    rng = np.random.default_rng(seed)
    lengths = [s.n for s in series_list]
    stats = Stats(float(np.mean(lengths)) if lengths else 1.0)
    for col in span_columns:
        steps = []
        for s in series_list:
            c = s.numeric(col)
            d = c.data[c.valid].astype(np.float64)
            if len(d) > 1:
                steps.append(abs(d[-1] - d[0]) / (len(d) - 1))
        stats.step[col] = float(np.mean(steps)) if steps and np.mean(steps) > 0 else 1.0
    from sparkcep.segments.candidates import Frame, holds
    from sparkcep.segments.executor import in_window, row_bound

    for leaf in leaves:
        tried = passed = 0
        total_len = 0.0
        for series in series_list:
            if tried >= samples:
                break  # enough candidates: each further series costs a full evaluation
            if series.n == 0:
                continue
            ctx = Context(series, aggregates, user)
            window = leaf.window if leaf.segment else (leaf.window & Window(1, 1))
            starts = np.unique(rng.integers(0, series.n, size=min(series.n, 16)))
            space = Space.whole(series.n).with_starts(starts)
            cand = in_window(ctx, window, enumerate_space(space, window, series.n, row_bound(ctx, window)))
            if len(cand) > samples:
                cand = cand.take(np.sort(rng.choice(len(cand), size=samples, replace=False)))
            if not len(cand):
                continue
            total_len += float((cand.ends - cand.starts + 1).sum())
            tried += len(cand)
            if leaf.conditions:
                frame = Frame(series, (cand.starts, cand.ends), own_labels=frozenset({leaf.var}),
                              aggregates=aggregates, user=user)
                ok = np.ones(len(cand), dtype=bool)
                for c in leaf.conditions:
                    ok &= holds(c, frame)
                passed += int(ok.sum())
        if tried:
            # A selectivity of zero in the sample is kept small but not zero (the optimizer
            # must still compare plans).
            stats.selectivity[leaf.var] = max(passed / tried, 0.5 / tried) if leaf.conditions else 1.0
            stats.mean_length[leaf.var] = total_len / tried
    return stats


# ---------------------------------------------------------------- the optimizer
def aggregate_cost(stats: Stats, aggregates, sharing: bool = True):
    """(index build ns, ns per candidate) of a leaf's conditions (Appendix D.2's cost
    functions: indexes linear in the series, lookups constant, Mann-Kendall quadratic in the
    segment length, other aggregates folded row by row). Without sharing an index is built
    over each candidate's rows instead of once."""
    from sparkcep.analysis.bound import BAgg, nodes
    from sparkcep.functions import user_aggregate

    def cost(leaf: SegGen) -> tuple[float, float]:
        length = stats.mean_length.get(leaf.var, 1.0)
        build = per = 0.0
        seen = set()
        for c in leaf.conditions:
            per += w("lookup")
            for x in nodes(c):
                if not isinstance(x, BAgg) or x.index in seen:
                    continue
                seen.add(x.index)
                f = aggregates[x.index].func
                if f in ("LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED", "COUNT", "SUM", "AVG", "MIN", "MAX"):
                    if sharing:
                        build += w("index_per_row") * stats.n
                        per += w("lookup")
                    else:
                        per += w("index_per_row") * length + w("segment_index")
                elif sharing and f.startswith("USER:") and getattr(user_aggregate(f[5:]), "index", None) is not None:
                    build += w("index_per_row") * stats.n  # index() once, then lookups
                    per += w("lookup")
                elif f == "MANN_KENDALL_TEST":
                    per += w("mk_pair") * length * length / 2
                else:
                    per += w("fold_row") * length
        return build, per
    return cost


def optimize(q, series_list, user, sharing: bool = True) -> tuple[Operator | None, Stats]:
    """The cheapest plan under the cost model, with statistics sampled from ``series_list``
    (``sharing``: whether aggregates use shared indexes)."""
    from sparkcep.segments.executor import walk
    from sparkcep.segments.operators import Planner

    probe = Planner(q, "sort_merge").build()
    leaves = [op for op in walk(probe) if isinstance(op, SegGen) and op.var >= 0] if probe is not None else []
    spans = {col for leaf in leaves for col, *_ in leaf.window.spans}
    stats = sample_stats(series_list, leaves, q.define_aggregates, user, spans)
    model = CostModel(stats, aggregate_cost(stats, q.define_aggregates, sharing))
    return Planner(q, "optimized", model).build(), stats
