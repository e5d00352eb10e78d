"""The run strategy over input that already stands in ORDER BY order (no PARTITION BY), in
one read of the input and no cache of it.

Each Spark partition is a batch as it lies. Its task checks its rows' order and runs its
*body* (its rows but a few at either end, so that every row the body's matches and PREV
or NEXT read is its own) as a batch task that begins free: the body's summary and its
output rows as if no match came before. The task also sends its first and last rows and
its row count. The driver then knows where each partition lies in the whole order, and
matches the *seams* (the rows at and around the partition edges, the only starts whose
matches may cross one) itself on those rows. The shared driver loop stitches bodies and
seams; a body keeps its first-pass rows from where the true selection joins its own.
A body that cannot is run again from its true entry over the input read again, at once,
whose partitions must be the ones the first read saw (checked by digest: a source that
changed or split otherwise takes the cached path, ``Widen``), as does a task whose search
would leave its window (a pattern without MAXLENGTH whose match runs past the seam). Input
found out of order is sorted (``runs.Unordered``); input that a second read may give
otherwise (a shuffle, a nondeterministic expression) takes the cached path from the start
(``reads_alike``)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import table_from_ipc, table_to_ipc
from sparkcep.data.partitions import already_ordered
from sparkcep.parallel.run_batches import Summary, Task, speculation_from
from sparkcep.runtime.selection import Selection
from sparkcep.spark.frames import ROW, WIN, arrow_of, unpersist
from sparkcep.spark.seams import (
    AT,
    SUMMARY,
    drive,
    kept_rows,
    run_batch,
    side_row,
    summary_from_json,
)
from sparkcep.spark.session import is_connect
from sparkcep.spark.wire import collect_arrow, errors_to_driver
from sparkcep.tasks.calls import calls_once

EDGES = "__sparkcep_edges__"
# A body's window in its task's own rows: the partition's size is unknown there, so its
# batch is told the partition runs on (a window never reaches the end it cannot see).
UNBOUNDED = 1 << 62


class Widen(Exception):  # noqa: N818 - a signal to by_sorted_runs, never raised out
    """A batch needs rows beyond what this path reads (its partition, or a seam's rows)."""


@dataclass(frozen=True)
class Margins:
    """Rows a partition keeps out of its body: ``before`` at its start (what PREV reads
    back, at least one so the body never starts the input), ``after`` at its end (the
    shared part, what NEXT reads ahead, and one more so the body never sees the input's
    end); its first and last ``edge`` rows travel to the driver for the seams."""

    shared: int
    before: int
    after: int

    @classmethod
    def of(cls, plan: Plan, shared: int) -> Margins:
        return cls(shared, max(plan.lookbehind, 1), shared + plan.lookahead + 1)

    @property
    def edge(self) -> int:
        return self.before + self.after

    def body(self, m: int) -> tuple[int, int] | None:
        """The body's own rows [lo, hi) of a partition of ``m`` rows, or None."""
        lo, hi = self.before, m - self.after
        return (lo, hi) if lo < hi else None

    def task(self, m: int) -> Task:
        lo, hi = self.body(m)
        return Task(0, lo, hi, lo, self.shared, lo + self.shared + 1, UNBOUNDED)


def digest(table: pa.Table) -> str:
    """A digest of the rows' values, whatever record batches Spark cut them into (it may
    cut a partition otherwise from one read to the next): a fixed-width column without
    NULLs by its values' bytes (an IPC copy of every row cost 10x more), others as IPC."""
    h = hashlib.sha1(str(table.num_rows).encode(), usedforsecurity=False)
    for col in table.combine_chunks().columns:
        if not col.num_chunks:
            continue
        arr = col.chunk(0)
        t = arr.type
        if arr.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)):
            h.update(np.ascontiguousarray(arr.to_numpy(zero_copy_only=False)).view(np.uint8))
        elif arr.null_count == 0 and (pa.types.is_string(t) or pa.types.is_binary(t)):
            _, offsets, data = arr.buffers()
            at = np.frombuffer(offsets, np.int32)[arr.offset:arr.offset + len(arr) + 1]
            h.update((at - at[0]).view(np.uint8))
            h.update(memoryview(data)[at[0]:at[-1]] if data is not None else b"")
        else:
            h.update(table_to_ipc(pa.table({"c": arr})))
    return h.hexdigest()


def reads_alike(df) -> bool:
    """Whether reading ``df`` twice should give the same partitions: no shuffle (a shuffle's
    output order, and a range partitioning's sampled bounds, may change between reads)
    and no nondeterministic expression but the input position sparkcep adds. A Spark
    Connect client sees the plan only as text: there a shuffle is told from it and a
    nondeterministic expression is not. Either way a second read is checked against the
    first by each partition's digest, so a wrong guess costs time (the cached path after
    the first pass), never rows."""
    if is_connect(df):
        return "Exchange" not in df._explain_string(mode="simple")
    qe = (df.drop(ROW) if ROW in df.columns else df)._jdf.queryExecution()
    return bool(qe.optimizedPlan().deterministic()) and "Exchange" not in qe.executedPlan().toString()


def as_read_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run):
    """The run strategy over ``base`` as it lies (see the module's text); raises
    runs.Unordered or Widen where the caller must sort or cache instead."""
    first, backend = first_pass_job(plan, base, arrow_schema, spark_schema, run, _first_task,
                                    lambda names, margins, first, meta: AsReadBackend(
                                        plan, base, first, names, margins, spark_schema, meta))
    run.rows, run.partitions = backend.n, 1 if backend.n else 0
    if not backend.n:
        unpersist(first)
        return base.sparkSession.createDataFrame([], spark_schema)
    return drive(plan, backend, [backend.n], run, first, {0: backend.layout})


def first_pass_job(plan: Plan, df, arrow_schema: pa.Schema, spark_schema, run, task_of, backend_of):
    """The first pass over ``df``'s partitions, ``task_of(payload, batches)`` in each (the
    payload: plan, input names, Margins, output schema), cached: (that DataFrame, the
    backend ``backend_of(names, margins, first, meta)`` built from the tasks' summary rows).
    The cache is released if this fails."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from sparkcep.parallel.run_batches import default_shared

    names = [f.name for f in arrow_schema]
    margins = Margins.of(plan, max(default_shared(plan, run.batch) if run.shared is None else run.shared, 1))
    schema = StructType([StructField(f.name, f.dataType, True) for f in spark_schema.fields]
                        + [StructField(AT, LongType()), StructField(WIN, LongType()),
                           StructField(SUMMARY, StringType()), StructField(EDGES, BinaryType())])
    payload = cloudpickle.dumps((plan, names, margins, arrow_of(schema)))

    def task(batches):
        with errors_to_driver():
            yield from task_of(cloudpickle.loads(payload), batches)

    first = df.mapInArrow(task, schema).persist()
    try:
        meta = collect_arrow(first.where(F.col(SUMMARY).isNotNull()).select(WIN, SUMMARY, EDGES))
        return first, backend_of(names, margins, first, meta)
    except BaseException:
        unpersist(first)
        raise


def _rows_of(batches, names: list[str]) -> tuple[int, pa.Table] | None:
    """A task's rows and the partition's name: its first row's input position (unique,
    rising with the partitions, and data: a task's index in Spark may be shifted, as
    inside a union)."""
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    return table.column(ROW)[0].as_py(), table.select(names)


def _first_task(payload, batches):
    p, names, margins, schema = payload
    read, ordered = _read_in_order(p, batches)
    if not read:
        return
    if not ordered:  # the run sorts instead: this task stopped reading at the first batch out of order
        from sparkcep.spark.runs import UNORDERED

        yield from side_row(schema, {WIN: pa.array([read[0].column(ROW)[0].as_py()], pa.int64()),
                                     SUMMARY: pa.array([json.dumps({"count": 0, "summary": UNORDERED})]),
                                     EDGES: pa.array([table_to_ipc(pa.table({}))], pa.binary())})
        return
    yield from first_pass(p, *_rows_of(read, names), margins, schema)


def _read_in_order(p: Plan, batches) -> tuple[list[pa.RecordBatch], bool]:
    """The task's non-empty record batches while they stand in ORDER BY order, and whether
    all did (reading stops at the first that does not)."""
    read: list[pa.RecordBatch] = []
    last = None  # the last row read, which the next batch's first must not precede
    for b in batches:
        if not b.num_rows:
            continue
        t = pa.Table.from_batches([b])
        if not already_ordered(t if last is None else pa.concat_tables([last, t]), p.query.order_by):
            return read + [b], False
        read.append(b)
        last = t.slice(t.num_rows - 1)
    return read, True


def first_pass(p: Plan, pid: int, table: pa.Table, margins: Margins, schema: pa.Schema, extra: dict | None = None,
               sorted_here: bool = False):
    """A first-pass task's rows for the piece ``table`` named ``pid`` (a partition, or one
    key's rows of one): its body's output rows as if it began free, then one row with its
    summary (its count, ``extra`` and its digest) and its edge rows. The rows stand in
    ORDER BY order (checked as read, or sorted); ``sorted_here``: rows sparkcep sorted,
    never read again (no digest)."""
    names = table.column_names
    m = table.num_rows
    info = {"count": m, "digest": None if sorted_here else digest(table), **(extra or {})}
    outputs = pa.schema(list(schema)[:-4])
    if margins.body(m) is not None:
        t = margins.task(m)
        w = t.window(p)
        with calls_once(p):
            text, out = run_batch(p, table.slice(w.start, w.end - w.start), names, w, t, None, UNBOUNDED, None,
                                  outputs)
        info["summary"], info["speculated"] = text, out is not None
        if out is not None and out.num_rows:
            k = out.num_rows
            yield from (out.append_column(WIN, pa.array([pid] * k, pa.int64()))
                        .append_column(SUMMARY, pa.nulls(k, pa.string()))
                        .append_column(EDGES, pa.nulls(k, pa.binary())).cast(schema).to_batches())
    if m <= 2 * margins.edge:
        edges = [table]
    else:
        edges = [table.slice(0, margins.edge), table.slice(m - margins.edge)]
    yield from side_row(schema, {WIN: pa.array([pid], pa.int64()), SUMMARY: pa.array([json.dumps(info)]),
                                 EDGES: pa.array([table_to_ipc(pa.concat_tables(edges))], pa.binary())})


@dataclass(frozen=True)
class Part:
    """A non-empty Spark partition of the input: its name (its first row's input
    position), its first row in the whole order, its rows and digest, and its body's batch
    in the layout (None: the partition is all seam)."""

    pid: int
    start: int
    n: int
    digest: str
    body: int | None = None


def _shift(s: Summary, task: Task, by: int) -> Summary:
    """A first-pass body summary, in its partition's rows, moved ``by`` rows into the
    whole order as ``task``."""
    def at(x: int) -> int:
        return x + by if x >= 0 else x

    error = None if s.error is None else (s.error[0] + by, s.error[1])
    return Summary(task, tuple((a + by, r + by, at(last)) for a, r, last in s.chain), s.count_after,
                   at(s.last_after), s.exit + by, None if s.stall is None else s.stall + by, error)


class AsReadBackend:
    """Batch tasks of the as-read path (run_batches.Backend): seams run on the driver over
    the edge rows, bodies come from the first pass or run again in Spark."""

    def __init__(self, plan: Plan, base, first, names: list[str], margins: Margins, spark_schema, meta: pa.Table,
                 sorted_here: bool = False):
        from sparkcep.spark.runs import UNORDERED, Unordered

        self.plan, self.base, self.first, self.names = plan, base, first, names
        self.margins, self.spark_schema = margins, spark_schema
        # Rows sparkcep sorted (``base`` a range sort): their order needs no check, and a
        # second read may not give the first read's pieces (the bounds are sampled again).
        self.sorted_here = sorted_here
        self.held: list = []
        self.kept = 0  # bodies that keep their first-pass rows
        self.again = 0  # bodies run again in Spark (summaries and rows)
        rows = sorted(zip(meta.column(WIN).to_pylist(), meta.column(SUMMARY).to_pylist(),
                          meta.column(EDGES).to_pylist(), strict=True))
        infos = [(pid, json.loads(text), table_from_ipc(edges)) for pid, text, edges in rows]
        if any(info.get("summary") == UNORDERED for _, info, _ in infos):
            raise Unordered
        # Rows the driver holds, as (first row in the whole order, rows): the edges.
        self.pieces: list[tuple[int, pa.Table]] = []
        self.parts: list[Part] = []
        self.layout: list[tuple[int, int]] = []
        self.firsts: dict[int, Summary] = {}  # body batch -> its first-pass summary (whole order)
        self.speculated: set[int] = set()  # body batches that emitted their first-pass rows
        self.n = sum(info["count"] for _, info, _ in infos)
        at = 0  # the whole order's rows so far
        seam = 0  # where the current seam's own rows begin
        for pid, info, edges in infos:
            m = info["count"]
            if self.pieces and not sorted_here and not already_ordered(
                    pa.concat_tables([self.pieces[-1][1].slice(self.pieces[-1][1].num_rows - 1),
                                      edges.slice(0, 1).cast(self.pieces[-1][1].schema)]), plan.query.order_by):
                raise Unordered
            if edges.num_rows == m:
                self.pieces.append((at, edges))
            else:
                self.pieces += [(at, edges.slice(0, margins.edge)), (at + m - margins.edge, edges.slice(margins.edge))]
            body = margins.body(m)
            index = None
            if body is not None:
                lo, hi = at + body[0], at + body[1]
                if seam < lo:
                    self.layout.append((seam, lo))
                index = len(self.layout)
                self.layout.append((lo, hi))
                seam = hi
            self.parts.append(Part(pid, at, m, info["digest"], index))
            at += m
            if index is not None:
                local = summary_from_json(margins.task(m), info["summary"])
                self.firsts[index] = _shift(local, self._task(index), self.parts[-1].start)
                if info.get("speculated"):
                    self.speculated.add(index)
        if seam < at:
            self.layout.append((seam, at))
        self.body_of = {p.body: p for p in self.parts if p.body is not None}

    def _task(self, b: int) -> Task:
        """The first-pass task of batch ``b``, as run_partitions makes it."""
        lo, hi = self.layout[b]
        s = self.margins.shared
        return Task(b, lo, hi, lo, s, lo + s + 1, self.n, 0)

    def _rows(self, lo: int, hi: int) -> pa.Table:
        """The whole order's rows [lo, hi) from the edges the driver holds."""
        got, at = [], lo
        for start, t in self.pieces:
            end = start + t.num_rows
            if end <= at or start >= hi:
                continue
            if start > at:
                break
            got.append(t.slice(at - start, min(hi, end) - at))
            at = min(hi, end)
        if at < hi:
            raise Widen
        return pa.concat_tables([g.cast(got[0].schema) for g in got])

    def _seam(self, t: Task, entry: Selection | None, out_arrow=None):
        w = t.window(self.plan)
        with calls_once(self.plan):
            return run_batch(self.plan, self._rows(w.start, w.end), self.names, w, t, entry, self.n, out_arrow)

    def _local(self, t: Task) -> tuple[Part, Task]:
        """A body task in its partition's own rows; Widen if its window leaves them."""
        part = self.body_of[t.batch]
        by = part.start
        local = replace(t, lo=t.lo - by, hi=t.hi - by, entry=t.entry - by, zone_end=t.zone_end - by, n=UNBOUNDED)
        w = local.window(self.plan)
        if w.start < 0 or w.end >= part.n or w.match_end >= part.n:
            raise Widen
        return part, local

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        out, again = [], []
        for t in tasks:
            if t.batch not in self.body_of:
                text, _ = self._seam(t, None)
                out.append(summary_from_json(t, text))
            elif t == self._task(t.batch):
                out.append(self.firsts[t.batch])
            else:
                again.append(t)
        if again:
            texts, _ = self._again([(t, None) for t in again], None)
            for t in again:
                part, local = self._local(t)
                out.append(_shift(summary_from_json(local, texts[t.batch]), t, part.start))
        return out

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        seams, kept, again = self.output_parts(tasks)
        return output_frame(self.plan, self.first, self.spark_schema, seams, kept,
                            [self._again(again, arrow_of(self.spark_schema))[1]] if again else [])

    def output_parts(self, tasks: list[tuple[Task, Selection]]) -> tuple[list[pa.Table], list, list]:
        """The output rows of ``tasks`` as three parts: the seams' rows (made here), the
        first-pass rows kept (kept_rows' triples: piece, first row kept in its own rows,
        match-number offset) and the bodies to run again."""
        out_arrow = arrow_of(self.spark_schema)
        seams, again, kept = [], [], []
        for t, e in tasks:
            if t.batch not in self.body_of:
                seams.append(self._seam(t, e, out_arrow)[1])
            elif t.batch in self.speculated and (at := speculation_from(self.plan, self.firsts[t.batch], t, e)):
                part = self.body_of[t.batch]
                kept.append((part.pid, at[0] - part.start, at[1]))
            else:
                again.append((t, e))
        self.kept = len(kept)
        return seams, kept, again

    def _again(self, tasks: list[tuple[Task, Selection | None]], out_arrow: pa.Schema | None):
        """Bodies run again in Spark from their entries over the input read again, at once
        and cached: (their summaries as {batch: text}, or None, and the DataFrame of their
        output rows with ``out_arrow``). Each task of that read reports its partition's
        digest; a partition missing or holding other rows than the first read's (a source
        that changed, or one split otherwise this time) is Widen: the cached path."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        if self.sorted_here:
            raise Widen
        self.again += len(tasks)
        by_pid: dict[int, tuple[str, list]] = {}
        for t, e in tasks:
            part, local = self._local(t)
            entry = None if e is None else Selection(e.pos - part.start, e.covered - part.start, e.number)
            by_pid.setdefault(part.pid, (part.digest, []))[1].append((t.batch, local, entry))
        fields = [] if out_arrow is None else [StructField(f.name, f.dataType, True) for f in self.spark_schema.fields]
        schema = StructType(fields + [StructField(WIN, LongType()), StructField(SUMMARY, StringType())])
        payload = cloudpickle.dumps((self.plan, self.names, by_pid, out_arrow, arrow_of(schema)))

        def task(batches):
            with errors_to_driver():
                yield from _again_task(cloudpickle.loads(payload), batches)

        # Every partition's rows reach Python again, as the first pass's did: a filter on
        # spark_partition_id() is evaluated on the driver for a local relation, where all
        # rows are partition 0, so each task skips what it does not run instead.
        rows = self.base.mapInArrow(task, schema).persist()
        self.held.append(rows)
        got = collect_arrow(rows.where(F.col(SUMMARY).isNotNull()).select(WIN, SUMMARY))
        texts = {}
        seen = {}
        for b, text in zip(got.column(WIN).to_pylist(), got.column(SUMMARY).to_pylist(), strict=True):
            info = json.loads(text)
            if "digest" in info:
                seen[b] = info["digest"]
            else:
                texts[b] = text
        if seen != {pid: want for pid, (want, _) in by_pid.items()}:
            raise Widen
        if out_arrow is None:
            return texts, None
        return None, rows.where(F.col(SUMMARY).isNull()).select(*self.spark_schema.names)


def output_frame(plan: Plan, first, spark_schema, seams: list[pa.Table], kept: list, more: list):
    """One DataFrame of output rows: the seams' (one local relation), the kept first-pass
    rows of ``first`` (one join) and the DataFrames ``more``, in as many partitions as the
    session has task slots (each part brings its own: a file written per partition costs
    more than the few matches in it)."""
    from sparkcep.spark.session import parallelism

    spark = first.sparkSession
    frames = []
    if seams:
        # One chunk per column: PySpark 4.3 loses every row of an Arrow table whose
        # first two chunks are empty (as seams without matches give).
        frames.append(spark.createDataFrame(pa.concat_tables(seams).combine_chunks(), spark_schema))
    if kept:
        frames.append(kept_rows(plan, first, kept, spark_schema))
    frames += more
    if not frames:
        return spark.createDataFrame([], spark_schema)
    return functools.reduce(lambda a, b: a.unionByName(b), frames).coalesce(parallelism(spark))


def _again_task(payload, batches):
    p, names, by_pid, out_arrow, schema = payload
    got = _rows_of(batches, names)
    if got is None or got[0] not in by_pid:
        return
    pid, table = got
    want, tasks = by_pid[pid]
    seen = digest(table)
    if seen == want:
        with calls_once(p):
            for b, t, entry in tasks:
                w = t.window(p)
                text, out = run_batch(p, table.slice(w.start, w.end - w.start), names, w, t, entry, UNBOUNDED,
                                      out_arrow)
                if out_arrow is not None:
                    k = out.num_rows
                    out = out.append_column(WIN, pa.array([b] * k, pa.int64())).append_column(
                        SUMMARY, pa.nulls(k, pa.string()))
                    yield from out.cast(schema).to_batches()
                else:
                    yield from _marker(schema, b, text)
    yield from _marker(schema, pid, json.dumps({"digest": seen}))


def _marker(schema: pa.Schema, win: int, text: str):
    """A row with only WIN and SUMMARY: a summary, or a partition's digest."""
    yield from side_row(schema, {WIN: pa.array([win], pa.int64()), SUMMARY: pa.array([text])})
