"""Batch tasks over windows of globally numbered rows, read through a range join: the
follow-up tasks of the run strategy that need more rows than a partition's neighbours hold
(a match longer than the shared part)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import referenced_columns
from sparkcep.errors import SparkCepError
from sparkcep.parallel.run_batches import Summary, Task, Window
from sparkcep.runtime.selection import Selection
from sparkcep.spark.frames import BUCKET, GIDX, ROW, WIN, arrow_of, slots
from sparkcep.spark.seams import run_batch, summary_from_json
from sparkcep.spark.wire import collect_arrow, errors_to_driver
from sparkcep.tasks.calls import calls_once


@dataclass(frozen=True, order=True)
class Part:
    start: int  # first global index
    n: int


class WindowBackend:
    """Batch tasks as Spark jobs over the numbered rows (run_batches.Backend): each round of
    summaries is one job whose result (one small record per task) comes to the driver; the
    outputs are a lazy DataFrame computed by the tasks (measures and unmatched rows)."""

    def __init__(self, plan: Plan, ordered, parts: list[Part], arrow_schema: pa.Schema, spark_schema, batch: int):
        self.plan, self.ordered, self.parts, self.batch = plan, ordered, parts, batch
        self.spark_schema = spark_schema
        self.all_cols = [f.name for f in arrow_schema]
        self.eval_cols = [self.all_cols[i] for i in sorted(referenced_columns(plan.query))]

    def _windows(self, tasks) -> dict[int, tuple[int, Window]]:
        return {i: (t.part, t.window(self.plan)) for i, t in enumerate(tasks)}

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        windows = self._windows(tasks)
        payload = cloudpickle.dumps((self.plan, [(t, None) for t in tasks], windows, self.parts, self.all_cols, None))

        def task(table: pa.Table) -> pa.Table:
            with errors_to_driver():
                wid, (text, _) = _window_task(cloudpickle.loads(payload), table)
                return pa.table({WIN: [wid], "summary": [text]})

        rows = self._rows(windows, self.eval_cols)
        got = collect_arrow(rows.groupBy(WIN).applyInArrow(task, f"{WIN} long, summary string"))
        out = [summary_from_json(tasks[wid], text)
               for wid, text in zip(got.column(WIN).to_pylist(), got.column("summary").to_pylist(), strict=True)]
        if len(out) != len(tasks):  # pragma: no cover - every window has rows
            raise SparkCepError(f"internal: {len(out)} summaries for {len(tasks)} batch tasks")
        return out

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        if not tasks:
            return self.ordered.sparkSession.createDataFrame([], self.spark_schema)
        windows = self._windows([t for t, _ in tasks])
        payload = cloudpickle.dumps((self.plan, tasks, windows, self.parts, self.all_cols,
                                     arrow_of(self.spark_schema)))

        def task(table: pa.Table) -> pa.Table:
            with errors_to_driver():
                return _window_task(cloudpickle.loads(payload), table)[1][1]

        return self._rows(windows, self.all_cols).groupBy(WIN).applyInArrow(task, self.spark_schema)

    def _rows(self, windows, columns):
        rows = _window_rows(self.ordered, self.parts, windows, self.batch, columns)
        return rows.repartition(slots(self.ordered, len(windows)), WIN)


def _window_task(payload, table: pa.Table):
    """(window id, summary JSON or output rows) of the window whose rows ``table`` holds."""
    p, tasks, wins, parts, names, out_arrow = payload
    wid = table.column(WIN)[0].as_py()
    pi, w = wins[wid]
    task, entry = tasks[wid]
    t = table.take(pc.sort_indices(table, sort_keys=[(GIDX, "ascending")]))
    if t.num_rows != w.end - w.start:  # pragma: no cover - a bug in window planning, never data
        raise SparkCepError(f"internal: window has {t.num_rows} rows, expected {w.end - w.start}")
    with calls_once(p):
        return wid, run_batch(p, t, names, w, task, entry, parts[pi].n, out_arrow)


def _window_rows(ordered, parts: list[Part], windows: dict[int, tuple[int, Window]], batch: int,
                 columns: list[str]):
    """The rows of every window, tagged with its id: rows fan out to the buckets (blocks of
    ``batch`` global indices) a window may start in, then join the windows on bucket."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    spark = ordered.sparkSession
    recs = []
    span = 1
    for wid, (pi, w) in windows.items():
        gs, ge = parts[pi].start + w.start, parts[pi].start + w.end
        span = max(span, ge - gs)
        recs.append((wid, gs // batch, gs, ge))
    schema = StructType([StructField(WIN, LongType()), StructField(BUCKET, LongType()),
                         StructField("__ws", LongType()), StructField("__we", LongType())])
    wdf = spark.createDataFrame(recs, schema)
    g = F.col(GIDX)
    rows = ordered.select(*columns, ROW, GIDX).withColumn(
        BUCKET, F.explode(F.sequence(F.floor((g - F.lit(span)) / batch), F.floor(g / batch))))
    joined = rows.join(F.broadcast(wdf), on=BUCKET).where((g >= F.col("__ws")) & (g < F.col("__we")))
    return joined.drop(BUCKET, "__ws", "__we")
