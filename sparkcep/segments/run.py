"""Run a segment query over a table: partitions, the operator tree per partition, every
distinct matched segment once (ordered by partition, start, end), ONE ROW PER MATCH with
MEASURES over the segment's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sparkcep.analysis.bound import AnalyzedQuery
from sparkcep.compile.expressions import EvaluationError
from sparkcep.data import measure_types, output_table, sort_and_partition
from sparkcep.errors import DataError
from sparkcep.segments.evaluate import Frame, evaluate
from sparkcep.segments.executor import Context, Operator
from sparkcep.segments.plan import build_plan, explain_tree
from sparkcep.segments.series import Series
from sparkcep.segments.space import Segs, Space


@dataclass(frozen=True)
class SegmentPlan:
    """A segment query ready to run: the analysed query and its operator tree."""

    query: AnalyzedQuery
    root: Operator | None
    how: str
    user: dict = field(default_factory=dict, compare=False)

    def explain(self) -> str:
        q = self.query
        head = [
            "segment query (T-REX)",
            f"variables: {', '.join(v + (' (segment)' if i in q.segment_variables else '') for i, v in enumerate(q.variables))}",
            f"partition by: {', '.join(k.column for k in q.partition_by) or '(none)'}",
            f"order by: {', '.join(k.column + (' DESC' if k.descending else '') for k in q.order_by) or '(input order)'}",
            f"plan: {self.how}" + (" (heuristic: probe from the cheaper side)" if self.how == "optimized" else ""),
        ]
        return "\n".join(head + ["operators:", explain_tree(self.root, q.variables, "  ")])


def segment_plan(q: AnalyzedQuery, how: str = "optimized") -> SegmentPlan:
    from sparkcep.functions import user_aggregates

    return SegmentPlan(q, build_plan(q, how), how, user_aggregates())


def run_segments(plan: SegmentPlan, table: pa.Table, stats: dict | None = None) -> pa.Table:
    q = plan.query
    parts = sort_and_partition(table, q)
    order = parts.order
    used = sorted(set(range(table.num_columns)))
    rows_out: list[np.ndarray] = []
    measure_chunks: list[list] = [[] for _ in q.measures]
    types = measure_types(q, table.schema)
    for start, end in parts.bounds:
        idx = pa.array(order[start:end])
        series = Series([table.column(i).take(idx) for i in used], end - start)
        ctx = Context(series, q.define_aggregates, plan.user)
        try:
            segs = _match(plan, ctx)
            values = _measures(q, series, segs, plan.user)
        except EvaluationError as e:
            raise DataError(e.message) from None
        if stats is not None:
            for k, v in ctx.stats.items():
                stats[k] = stats.get(k, 0) + v
        rows_out.append(order[start + segs.starts] if len(segs) else np.zeros(0, dtype=np.int64))
        for j, v in enumerate(values):
            measure_chunks[j].append(v)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    measures = [_join([x for c in chunks for x in c]) for chunks in measure_chunks]
    return output_table(q, table, rows, measures, types)


def _join(values: list) -> list:
    return values


def _match(plan: SegmentPlan, ctx: Context) -> Segs:
    n = ctx.series.n
    if plan.root is None or n == 0:
        return Segs.none()
    segs = plan.root.eval(ctx, Space.whole(n))
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
