"""Offline profiling of the segment operators (T-REX Appendix D.1): each operator runs on
synthetic series of several sizes; its time over its units of work (Equation 1: inputs plus
outputs, or the probing side plus outputs) fits one weight in nanoseconds per unit. The
package ships weights measured this way; ``sparkcep profile`` measures this machine's and
stores them where the optimizer looks first. (It runs whole queries, so it sits with the
command line, above the dispatcher.)"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa

from sparkcep.segments import optimizer


def _query(pattern: str, defines: str) -> str:
    return f"ORDER BY t MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE {defines}"


# (weight name, pattern, defines, plan): queries whose work is dominated by one operator.
CASES = [
    ("SegGenWindow", "W & V", "SEGMENT W AS window(2, {w}), SEGMENT V AS window(1, {w})", "sort_merge"),
    ("SegGenIndexing", "W & U", "SEGMENT W AS window(2, {w}), SEGMENT U AS last(v) > first(v)", "right_probe"),
    ("SortMergeConcat", "A B", "SEGMENT A AS window(2, {w}) AND last(v) > first(v), "
                               "SEGMENT B AS window(2, {w}) AND last(v) < first(v)", "sort_merge"),
    ("RightProbeConcat", "A B", "SEGMENT A AS window(2, {w}) AND last(v) > first(v), "
                                "SEGMENT B AS window(2, {w}) AND last(v) < first(v)", "right_probe"),
    ("LeftProbeConcat", "A B", "SEGMENT A AS window(2, {w}) AND last(v) > first(v), "
                               "SEGMENT B AS window(2, {w}) AND last(v) < first(v)", "left_probe"),
    ("SortMergeAnd", "(A & B) & W", "SEGMENT A AS last(v) > first(v), SEGMENT B AS max(v) - min(v) > 1, "
                                    "SEGMENT W AS window(2, {w})", "sort_merge"),
    ("RightProbeAnd", "(A & B) & W", "SEGMENT A AS last(v) > first(v), SEGMENT B AS max(v) - min(v) > 1, "
                                     "SEGMENT W AS window(2, {w})", "right_probe"),
    ("LeftProbeAnd", "(A & B) & W", "SEGMENT A AS last(v) > first(v), SEGMENT B AS max(v) - min(v) > 1, "
                                    "SEGMENT W AS window(2, {w})", "left_probe"),
    ("SortMergeOr", "(A | B) & W", "SEGMENT A AS last(v) > first(v), SEGMENT B AS last(v) < first(v), "
                                   "SEGMENT W AS window(2, {w})", "sort_merge"),
    ("MaterializeNot", "~A & W", "SEGMENT A AS last(v) > first(v), SEGMENT W AS window(2, {w})", "sort_merge"),
    ("ProbeNot", "~A & W", "SEGMENT A AS last(v) > first(v), SEGMENT W AS window(2, {w})", "optimized"),
    ("MaterializeKleene", "(A{1,3}) & W", "SEGMENT A AS window(2, 3) AND last(v) > first(v), "
                                          "SEGMENT W AS window(2, {w})", "sort_merge"),
    ("Filter", "A1 W INC", "A1 AS v < 5, SEGMENT W AS window(1, {w}), INC AS INC.v > A1.v", "sort_merge"),
]


def measure(sizes=(2000, 6000), windows=(8, 24), repeat: int = 2) -> dict[str, float]:
    """Weights in ns per unit of work, from least squares through the origin."""
    from sparkcep.query import compile_query, run_plan

    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for name, pattern, defines, how in CASES:
        units, times = [], []
        for n in sizes:
            t = pa.table({"t": np.arange(n), "v": rng.integers(0, 10, size=n)})
            for wsize in windows:
                q = _query(pattern, defines.format(w=wsize))
                stats: dict = {}
                best = None
                for _ in range(repeat):
                    t0 = time.perf_counter_ns()
                    plan = compile_query(q, t, how=how)
                    run_plan(plan, t, stats=stats)
                    dt = time.perf_counter_ns() - t0
                    best = dt if best is None else min(best, dt)
                work = max(stats.get("candidates", 0) + stats.get("joined pairs considered", 0), 1)
                units.append(work)
                times.append(best)
        u, tt = np.array(units, dtype=float), np.array(times, dtype=float)
        out[name] = float((u @ tt) / (u @ u))
    out.update(_aggregate_weights(rng))
    return out


def _aggregate_weights(rng) -> dict[str, float]:
    """Aggregate costs (Appendix D.2): index building per row and lookups per candidate
    (the regression's prefix sums), Mann-Kendall per pair of rows, a row-by-row fold per row."""
    from sparkcep.aggregates import kernels as agg
    from sparkcep.analysis.bound import AggregateSpec, BColumn, Type
    from sparkcep.compile.aggregates import build

    n = 200_000
    x = agg.Column(rng.normal(size=n), np.ones(n, dtype=bool))
    t0 = time.perf_counter_ns()
    reg = agg.Regression(x, x)
    index_per_row = (time.perf_counter_ns() - t0) / n
    starts = rng.integers(0, n - 50, size=n)
    ends = starts + rng.integers(0, 50, size=n)
    t0 = time.perf_counter_ns()
    reg.r2(starts, ends, signed=False)
    lookup = (time.perf_counter_ns() - t0) / n
    mk = agg.MannKendall(x)
    mk.z(starts[:10], ends[:10])  # compile first
    s, e = starts[:5000], starts[:5000] + 40
    t0 = time.perf_counter_ns()
    mk.z(s, e)
    mk_pair = (time.perf_counter_ns() - t0) / (5000 * 40 * 41 / 2)
    spec = AggregateSpec("DELTA", None, BColumn(0, "x", Type.DOUBLE), True, Type.DOUBLE)
    a = build(spec)
    cols = [x.data.tolist()]
    t0 = time.perf_counter_ns()
    state = a.initial
    for r in range(20_000):
        state = a.step(state, cols, r, None)
    fold_row = (time.perf_counter_ns() - t0) / 20_000
    # Without sharing: one structure per segment (a fixed cost per candidate).
    small = [agg.Column(x.data[:20], x.valid[:20])]
    t0 = time.perf_counter_ns()
    agg.per_segment(agg.Sums, small, agg.Sums.sum_of, starts[:2000] % 10, starts[:2000] % 10 + 5)
    segment_index = (time.perf_counter_ns() - t0) / 2000
    return {"index_per_row": index_per_row, "lookup": lookup, "mk_pair": mk_pair, "fold_row": fold_row,
            "segment_index": segment_index, "kleene_level": _kleene_level()}


def _kleene_level() -> float:
    """The fixed cost of one breadth-first level of MaterializeKleene (joins, de-duplication),
    from a chain that grows one row per level from a single start."""
    from sparkcep.segments.executor import Context, Kleene, SegGen
    from sparkcep.segments.series import Series
    from sparkcep.segments.space import Space, Window

    n = 40  # short: the level's fixed cost, not the de-duplication that grows with the chain
    leaf = SegGen(var=-1, segment=True, conditions=(), window=Window(2, 2))
    op = Kleene(leaf, 1, None, share=True)
    series = Series([pa.array(np.arange(n))], n)
    best = None
    for _ in range(3):
        ctx = Context(series)
        t0 = time.perf_counter_ns()
        op.eval(ctx, Space.whole(n).with_starts(np.array([0])))
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    return best / max(ctx.stats.get("kleene steps", 1), 1)


def save(weights: dict[str, float], path=None) -> str:
    path = path or optimizer.USER_PROFILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(weights, indent=1, sort_keys=True))
    optimizer.weights.cache_clear()
    return str(path)
