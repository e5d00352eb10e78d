"""The run strategies' seams on Spark. A batch task, as a worker runs it, selects matches in
its window and reports a summary (as JSON, for the driver's stitching) or emits the batch's
output rows from its true entry state (measures and unmatched rows made in the task); the
driver runs the shared loop of ``parallel.run_batches`` over a backend of such tasks."""

from __future__ import annotations

import json
import weakref

import pyarrow as pa

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import referenced_columns
from sparkcep.data.output import output_table
from sparkcep.data.partitions import LazyColumns, named_by_key
from sparkcep.errors import DataError
from sparkcep.parallel.run_batches import (
    Emitted,
    RunStats,
    Summary,
    Task,
    Window,
    candidate_table,
    emit,
    run_partitions,
    summarize,
    window_data,
)
from sparkcep.runtime.selection import Selection
from sparkcep.spark.frames import WIN, unpersist

AT = "__sparkcep_at__"  # an output row's position in its partition (first-pass rows)
SUMMARY = "__sparkcep_summary__"  # a batch task's summary (JSON) beside output rows


def drive(plan: Plan, backend, sizes: list[int], run, cached, bounds: dict | None = None):
    """The shared driver loop over ``backend``'s tasks; ``run`` (a SparkRun) receives the
    loop's counts. The result is lazy and reads ``cached``: it stays cached until the
    result is garbage (and is released at once on an error)."""
    try:
        stats = RunStats()
        result = run_partitions(plan, sizes, backend, run.batch, run.shared, stats, bounds=bounds)
        run.stats.update(batches=stats.batches, passes=stats.passes, follow_up_tasks=stats.follow_up_starts,
                         matches=stats.matches)
        for name in ("ranged", "kept", "again", "inner_rows"):
            if getattr(backend, name, None) is not None:
                run.stats[name] = getattr(backend, name)
    except BaseException:
        _release([cached, *getattr(backend, "held", [])])
        raise
    weakref.finalize(result, _release, [cached, *getattr(backend, "held", [])])
    return result


def _release(frames: list) -> None:
    for df in frames:
        unpersist(df)


def side_row(schema: pa.Schema, values: dict[str, pa.Array]) -> list[pa.RecordBatch]:
    """One row of ``schema`` holding only ``values`` (a summary or a marker among a task's
    output rows, which hold none of them)."""
    row = {f.name: pa.nulls(1, f.type) for f in schema}
    row.update(values)
    return pa.table(row).cast(schema).to_batches()


def kept_rows(plan: Plan, first, kept: list[tuple[int, int, int]], spark_schema):
    """The cached first-pass output rows (``first``: output rows with AT and WIN, summary
    rows with SUMMARY) of the batches that keep them, from the row where the true selection
    joins: ``kept`` holds (WIN value, first AT kept, match-number offset); a broadcast join
    on WIN, MATCH_NUMBER() measures moved on by the offset."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    table = first.sparkSession.createDataFrame(
        kept, StructType([StructField("__sparkcep_b__", LongType()), StructField("__sparkcep_from__", LongType()),
                          StructField("__sparkcep_offset__", LongType())]))
    rows = (first.where(F.col(SUMMARY).isNull())
            .join(F.broadcast(table), F.col(WIN) == F.col("__sparkcep_b__"))
            .where(F.col(AT) >= F.col("__sparkcep_from__")))
    numbered = {plan.measures[j].name for j in plan.match_number_measures}
    shift = F.col("__sparkcep_offset__")
    return rows.select(*[(F.col(n) + shift).cast(spark_schema[n].dataType).alias(n) if n in numbered
                         else F.col(n) for n in spark_schema.names])


def run_batch(p: Plan, t: pa.Table, names: list[str], w: Window, task: Task, entry: Selection | None, n: int,
              out_arrow: pa.Schema | None, speculate: pa.Schema | None = None) -> tuple[str | None, pa.Table | None]:
    """``t`` holds the window's rows in order (the input columns ``names``; only the ones
    the query reads need be there for a summary). ``entry`` None: (the summary as JSON,
    None), and with ``speculate`` (the output schema) also the output rows as if the batch
    began free, with their rows' positions in column AT (None when the selection stalled or
    failed: see speculation_from); else (None, the output rows from ``entry`` in
    ``out_arrow``)."""
    used = referenced_columns(p.query)
    cols = LazyColumns([t.column(c) if i in used else None for i, c in enumerate(names)])
    order0 = p.query.order_by[0].index if p.query.order_by else None
    part = window_data(cols, order0, w, n)
    local = lambda r: r - w.start  # noqa: E731 - window rows are numbered from its start
    try:
        candidate = candidate_table(p, part, w)
        if entry is not None:
            return None, _output(p, t, names, w, emit(p, part, w, task, entry, local, candidate), out_arrow)
        summary = summarize(p, part, w, task, local, candidate)
    except DataError as e:
        raise named_by_key(e, p.query, t, getattr(e, "position", None) if e.row is None else e.row) from None
    rows = None
    if speculate is not None and summary.error is None and summary.stall is None:
        try:
            out = emit(p, part, w, task, Selection(task.lo, task.lo - 1, 0), local, candidate)
            rows = _output(p, t, names, w, out, speculate).append_column(AT, pa.array(out.rows, pa.int64()))
        except DataError:
            rows = None  # the true entry may never reach the row that failed
    return _summary_to_json(summary, p, t), rows


def _output(p: Plan, t: pa.Table, names: list[str], w: Window, out: Emitted, out_arrow: pa.Schema) -> pa.Table:
    """The output rows as a table of ``out_arrow`` (measure columns kept as the batch gave them)."""
    return output_table(p, t.select(names), out.rows - w.start, out.measures).cast(out_arrow)


def _summary_to_json(s: Summary, p: Plan, t: pa.Table) -> str:
    error = None
    if s.error is not None:
        at, e = s.error
        e = named_by_key(e, p.query, t, e.row)
        error = {"at": at, "message": e.message, "column": e.column, "key": e.key}
    return json.dumps({"chain": s.chain, "count_after": s.count_after, "last_after": s.last_after,
                       "exit": s.exit, "stall": s.stall, "error": error}, default=str)


def summary_from_json(task: Task, text: str) -> Summary:
    d = json.loads(text)
    error = None
    if d["error"] is not None:
        e = d["error"]
        error = (e["at"], DataError(e["message"], column=e["column"], key=e["key"]))
    return Summary(task, tuple(tuple(c) for c in d["chain"]), d["count_after"], d["last_after"], d["exit"],
                   d["stall"], error)
