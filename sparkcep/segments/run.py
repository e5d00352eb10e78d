"""Run a segment query over a table: partitions, the operator tree per partition, every
distinct matched segment once (ordered by partition, start, end), ONE ROW PER MATCH with
MEASURES over the segment's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sparkcep.analysis.bound import AnalyzedQuery
from sparkcep.compile.expressions import EvaluationError
from sparkcep.data.ingest import referenced_columns
from sparkcep.data.output import measure_types, output_table
from sparkcep.data.partitions import sort_and_partition
from sparkcep.errors import DataError
from sparkcep.segments.candidates import Frame, evaluate
from sparkcep.segments.executor import Context, Operator
from sparkcep.segments.operators import build_plan, explain_tree
from sparkcep.segments.series import Series
from sparkcep.segments.space import Segs, Space
from sparkcep.values import admit


@dataclass(frozen=True)
class SegmentPlan:
    """A segment query ready to run: the analysed query and its operator tree."""

    query: AnalyzedQuery
    root: Operator | None
    how: str
    user: dict = field(default_factory=dict, compare=False)
    sharing: bool = True  # False: every aggregate computed per segment (no shared index)

    def explain(self, table: pa.Table | None = None, picture: str | None = None) -> str:
        """The operator tree; for the optimized plan over ``table``, the optimizer's choice
        with its estimated cardinality and cost; ``picture``: also drawn there as a PNG."""
        q = self.query
        root = self.root
        estimate = ""
        model, n = None, 1.0
        if self.how == "optimized" and table is not None and table.num_rows:
            from sparkcep.segments.optimizer import optimize

            root, stats = optimize(q, sample_of(partition_series(table, q)[1]), self.user, self.sharing)
            if root is not None:
                from sparkcep.segments.optimizer import CostModel, aggregate_cost

                model, n = CostModel(stats, aggregate_cost(stats, q.define_aggregates, self.sharing)), stats.n
                card, cost = model.estimate(root, n, n)
                estimate = f"estimated per series: {card:,.1f} segments, {cost / 1e6:,.2f} ms"
        head = [
            "segment query (T-REX)",
            f"variables: {', '.join(v + (' (segment)' if i in q.segment_variables else '') for i, v in enumerate(q.variables))}",
            f"partition by: {', '.join(k.column for k in q.partition_by) or '(none)'}",
            f"order by: {', '.join(k.column + (' DESC' if k.descending else '') for k in q.order_by) or '(input order)'}",
            f"plan: {self.how}" + (" (cost-based; without data: probe from the cheaper side)"
                                   if self.how == "optimized" and not estimate else ""),
        ]
        if estimate:
            head.append(estimate)
        if picture is not None:
            from sparkcep.segments.draw import draw_plan

            draw_plan(root, q.variables, picture, model, n,
                      title=f"segment plan ({self.how}); estimates: each operator over a whole series")
            head.append(f"picture: {picture}")
        return "\n".join(head + ["operators:", explain_tree(root, q.variables, "  ")])


def segment_plan(q: AnalyzedQuery, how: str = "optimized", sharing: bool = True) -> SegmentPlan:
    from sparkcep.functions import user_aggregates

    return SegmentPlan(q, build_plan(q, how), how, user_aggregates(), sharing)


def partition_series(table: pa.Table, q: AnalyzedQuery):
    """The partitions (data.Partitions) and each one's rows as a Series, in ORDER BY order."""
    parts = sort_and_partition(table, q)
    return parts, [Series([table.column(i).take(pa.array(parts.order[s:e])) for i in range(table.num_columns)], e - s)
                   for s, e in parts.bounds]


def sample_of(all_series: list[Series], k: int = 5) -> list[Series]:
    """Up to ``k`` partitions spread over the input: what the optimizer samples."""
    return all_series[::max(len(all_series) // k, 1)][:k]


def run_segments(plan: SegmentPlan, table: pa.Table, stats: dict | None = None) -> pa.Table:
    """Every distinct matched segment of ``plan`` over ``table`` (``stats``, if given, receives
    the executor's counters)."""
    q = plan.query
    source = table  # the output copies columns as given (an unsigned column read as BIGINT too)
    table = admit(table, referenced_columns(q))
    if stats is not None:
        stats["matcher"], stats["peak_threads"] = "segments", None
    parts, all_series = partition_series(table, q)
    for series in all_series:
        series.sharing = plan.sharing
    order = parts.order
    rows_out: list[np.ndarray] = []
    measure_chunks: list[list] = [[] for _ in q.measures]
    types = measure_types(q, table.schema)
    root = plan.root
    if plan.how == "optimized" and all_series:
        root = choose(plan, all_series, stats)
    for (start, _end), series in zip(parts.bounds, all_series, strict=True):
        ctx = Context(series, q.define_aggregates, plan.user)
        try:
            segs = _match(root, ctx)
            values = _measures(q, series, segs, plan.user)
        except EvaluationError as e:
            row = None if e.position is None else int(order[start + e.position])
            raise DataError(e.message, row=row) from None
        if stats is not None:
            for k, v in ctx.stats.items():
                stats[k] = stats.get(k, 0) + v
        rows_out.append(order[start + segs.starts] if len(segs) else np.zeros(0, dtype=np.int64))
        for j, v in enumerate(values):
            measure_chunks[j].append(v)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    measures = [[x for c in chunks for x in c] for chunks in measure_chunks]
    return output_table(q, source, rows, measures, types)


def choose(plan: SegmentPlan, all_series: list[Series], stats: dict | None = None) -> Operator | None:
    """The optimizer's plan, from statistics of up to five partitions spread over the input."""
    from sparkcep.segments.optimizer import optimize

    root, _ = optimize(plan.query, sample_of(all_series), plan.user, plan.sharing)
    if stats is not None:
        stats["plan"] = explain_tree(root, plan.query.variables)
    return root


def _match(root: Operator | None, ctx: Context) -> Segs:
    n = ctx.series.n
    if root is None or n == 0:
        return Segs.none()
    segs = root.eval(ctx, Space.whole(n))
    segs = Segs(segs.starts, segs.ends).distinct()
    return segs.sorted()


def _measures(q: AnalyzedQuery, series: Series, segs: Segs, user: dict) -> list[list]:
    if not q.measures:
        return []
    frame = Frame(series, (segs.starts, segs.ends), match_number=np.arange(1, len(segs) + 1, dtype=np.int64),
                  aggregates=q.measure_aggregates, user=user)
    out = []
    for m in q.measures:
        d, v = evaluate(m.expr, frame) if len(segs) else (np.zeros(0), np.zeros(0, dtype=bool))
        out.append([x if ok else None for x, ok in zip(_python(d), v.tolist(), strict=True)])
    return out


def _python(d: np.ndarray) -> list:
    if d.dtype.kind == "f":
        return [float(x) for x in d.tolist()]
    return d.tolist()
