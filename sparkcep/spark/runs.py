"""The run strategy on sorted Spark partitions (RIP's RB+ and RB): batches are Spark
partitions of the rows in PARTITION BY, ORDER BY order (cut further where a key begins).
Input already in that order (without PARTITION BY) is matched where it lies. Keyed input
is counted by key first (``spark.routes``): with no key worth cutting (none larger than a
batch, or none that would keep its task slot busy well after the others) each key is
matched whole, as the partition strategy does; else a hot key's rows are cut into ranges
at values of its order, the other keys go whole to buckets, and one pass matches them
(``spark.sorted_once``). Other input takes one range sort and the same one pass; what
follows here is the cached path, for runs that one pass cannot settle. Small JVM jobs collect
each partition's row count, first rows and last rows (and each key's rows); a partition's
task reads its rows with the last rows of the one before (what PREV looks back at) and the
first rows of the ones after (the shared part), so no row is copied to other tasks and rows
reach Python once. Only follow-up tasks that need more than that read their rows through
the range join of ``spark.windows``."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import table_from_ipc, table_to_ipc
from sparkcep.data.partitions import already_ordered
from sparkcep.parallel.run_batches import Summary, Task, speculation_from
from sparkcep.runtime.selection import Selection
from sparkcep.spark.frames import GIDX, POS, WIN, arrow_of, max_task_rows, sort_columns, unpersist
from sparkcep.spark.seams import (
    AT,
    SUMMARY,
    drive,
    kept_rows,
    run_batch,
    side_row,
    summary_from_json,
)
from sparkcep.spark.windows import Part, WindowBackend
from sparkcep.spark.wire import collect_arrow, errors_to_driver
from sparkcep.tasks.calls import calls_once

SPECULATED = "__sparkcep_speculated__"
# Input that must be sorted is matched in one pass over the sorted rows (spark.sorted_once)
# before it is sorted and cached here; tests turn it off to reach the cached path.
SORT_ONCE = True
# Keyed input is routed by its keys' counts (spark.routes) rather than range-sorted;
# tests turn it off to reach the range sort.
ROUTE_KEYS = True


def by_sorted_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run):
    """The run strategy: without PARTITION BY over the input as it lies when it is already
    in ORDER BY order, else (and with PARTITION BY) over range-sorted partitions."""
    from pyspark.sql import functions as F

    n = None
    unordered = False
    if not plan.query.partition_by and run.strategy == "runs":
        # In one read where the input stands in order and the seams' rows settle every
        # batch; else input found out of order is sorted, and a batch needing more rows
        # takes the cached path below.
        from sparkcep.spark.as_read import Widen, as_read_runs, reads_alike

        if reads_alike(base):
            try:
                result = as_read_runs(plan, base, arrow_schema, spark_schema, run)
            except Unordered:
                unordered = True
            except Widen:
                pass
            else:
                run.reason += "; input already in ORDER BY order: not sorted, read once"
                return result
    if not plan.query.partition_by and not unordered:
        # Event logs usually stand in ORDER BY order already: the partitions' edge rows are
        # checked on the driver and each first-pass task checks its own rows; only input
        # found out of order is sorted. Cached, so that every job sees the same partitions
        # (a source's split may depend on the plan reading it).
        as_read = base.withColumn(POS, F.monotonically_increasing_id()).persist()
        backend = _backend(plan, as_read, arrow_schema, spark_schema, run, check_order=True)
        run.rows, run.partitions = backend.n, 1 if backend.n else 0
        if backend.in_order:
            try:
                result = drive(plan, backend, [k.n for k in backend.keys], run, as_read, backend.layout())
            except Unordered:
                pass  # a task found its rows out of order (drive released the cached rows)
            else:
                run.reason += "; input already in ORDER BY order: not sorted"
                return result
        as_read.unpersist()
        n = backend.n
    cols = sort_columns(plan)
    if plan.query.partition_by:
        result = _by_keys(plan, base, arrow_schema, spark_schema, run)
        if result is not None:
            return result
        n = run.rows
    if n is None:  # the sort's width: from the edges above, from auto's count, or counted
        n = run.rows if run.rows is not None else base.count()
    k = max(1, -(-n // run.batch))
    if SORT_ONCE and not plan.measure_match_number:  # (else every body but the first would need its rows again)
        from sparkcep.spark.as_read import Widen
        from sparkcep.spark.sorted_once import sorted_once_runs

        try:
            result = sorted_once_runs(plan, base, arrow_schema, spark_schema, run, k)
        except Widen:
            pass  # a batch needs rows only a second sort would give: sorted and cached below
        else:
            run.reason += "; sorted, read once"
            return result
    ordered = (base.repartitionByRange(k, *cols).sortWithinPartitions(*cols)
               .withColumn(POS, F.monotonically_increasing_id()).persist())
    backend = _backend(plan, ordered, arrow_schema, spark_schema, run)
    run.rows, run.partitions = backend.n, len(backend.keys)
    return drive(plan, backend, [k.n for k in backend.keys], run, ordered, backend.layout())


def _by_keys(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run):
    """Keyed runs from one count of the keys (auto's, or counted here): with no key worth
    cutting (KeySizes.worth_cutting) every key is matched whole as the partition strategy
    does, a key above a batch in a task of its own; else routed (``spark.routes``), a hot
    key cut at values of its order. None where the rows must be range-sorted instead
    (run.rows then holds their count)."""
    from sparkcep.spark.as_read import Widen
    from sparkcep.spark.partition import by_groups
    from sparkcep.spark.routes import CUT_SHARE, key_sizes, routes
    from sparkcep.spark.session import parallelism
    from sparkcep.spark.sorted_once import routed_once_runs

    sizes = run.sizes if run.sizes is not None and run.sizes.fits(plan, run.batch) else key_sizes(plan, base, run.batch)
    run.rows = sizes.rows
    if not ROUTE_KEYS:
        return None
    slots = parallelism(base.sparkSession)
    if not sizes.worth_cutting(slots, max_task_rows(base.sparkSession)):
        run.partitions = sizes.keys
        why = (f"no key holds more than a batch ({run.batch} rows)" if not sizes.hot else
               f"the largest key ({sizes.largest} of {sizes.rows} rows) holds at most {CUT_SHARE} times a "
               f"share of {slots} task slots: cutting it would not pay")
        run.reason += f"; {why}: each key whole, as in partition"
        return by_groups(plan, base, spark_schema, single=False, sizes=sizes)
    if not SORT_ONCE or plan.measure_match_number:
        return None
    r = routes(plan, base, sizes)
    if r is None:
        return None
    try:
        result = routed_once_runs(plan, base, arrow_schema, spark_schema, run, sizes, r)
    except Widen:
        return None
    hot = f"{len(sizes.hot)} hot key" + ("s" if len(sizes.hot) > 1 else "")
    run.reason += f"; {hot} cut into {r.ranges} ranges by its order's values, read once"
    return result


class Unordered(Exception):  # noqa: N818 - a signal between the first pass and by_sorted_runs, never raised out
    """A first-pass task found its partition's rows out of ORDER BY order."""


UNORDERED = "unordered"  # the summary text of such a task


def _backend(plan: Plan, cached, arrow_schema: pa.Schema, spark_schema, run, check_order: bool = False):
    """The backend over ``cached`` rows (its edges jobs run here); the rows are released
    if they fail."""
    try:
        return SortedBackend(plan, cached, arrow_schema, spark_schema, run, check_order)
    except BaseException:
        cached.unpersist()
        raise


def _edges(ordered, names: list[str], ahead: int, behind: int
           ) -> tuple[list[int], list[int], list[pa.Table], list[pa.Table]]:
    """Each non-empty partition's first row id, row count, first ``ahead`` rows and last
    ``behind`` rows, in two jobs that keep the rows on the JVM: the first id and count of
    each partition, then the edge rows by their place in it (row ids rise by one within a
    partition; the high bits need not name it, as where Spark computed them on the driver)."""
    from pyspark.sql import functions as F

    got = collect_arrow(ordered.select(F.spark_partition_id().alias("p"), POS).groupBy("p")
                        .agg(F.min(POS).alias("first"), F.count(F.lit(1)).alias("n")))
    parts = sorted(zip(got.column("first").to_pylist(), got.column("n").to_pylist(), got.column("p").to_pylist(),
                       strict=True))
    if not parts:
        return [], [], [], []

    def of_partition(values):
        return F.element_at(F.create_map(*[F.lit(x) for p, v in zip(parts, values, strict=True)
                                           for x in (p[2], v)]), F.spark_partition_id())
    at = F.col(POS) - of_partition([first for first, _, _ in parts])
    tail_from = of_partition([n - behind for _, n, _ in parts])
    rows = collect_arrow(ordered.where((at < ahead) | (at >= tail_from)).select(*names, POS)).sort_by(POS)
    pos = rows.column(POS).to_numpy()
    heads, tails = [], []
    for first, n, _ in parts:
        lo, hi = (int(x) for x in np.searchsorted(pos, [first, first + n]))
        data = rows.slice(lo, hi - lo).select(names)
        heads.append(data.slice(0, ahead))
        tails.append(data.slice(max(data.num_rows - behind, 0)))
    return [first for first, _, _ in parts], [n for _, n, _ in parts], heads, tails


@dataclass(frozen=True)
class Piece:
    """One batch: the rows [lo, hi) of run partition ``part`` (a key's rows, or all rows)
    that lie in Spark partition ``spark``; ``index`` numbers it among its part's batches."""

    part: int
    index: int
    spark: int
    lo: int
    hi: int


def _key_parts(plan: Plan, ordered, global_index) -> list[Part]:
    """Each PARTITION BY key's rows in the sorted order, (first global row, count), from one
    JVM job (``global_index``: a row's place in the sorted order, SortedBackend.global_index)."""
    from pyspark.sql import functions as F

    keys = [k.column for k in plan.query.partition_by]
    # Internal names: a key column may be called anything.
    g, s, n = GIDX, "__sparkcep_start__", "__sparkcep_count__"
    got = collect_arrow(ordered.select(*keys, global_index.alias(g)).groupBy(*keys)
                        .agg(F.min(g).alias(s), F.count(F.lit(1)).alias(n)).select(s, n))
    return sorted(Part(a, b) for a, b in zip(got.column(s).to_pylist(), got.column(n).to_pylist(), strict=True))


def _pieces(keys: list[Part], bounds: list[tuple[int, int]]) -> list[Piece]:
    """The batches: each key's rows cut where Spark partitions begin (rows key-local)."""
    out = []
    j = 0
    for part, key in enumerate(keys):
        at, end, index = key.start, key.start + key.n, 0
        while at < end:
            while bounds[j][1] <= at:
                j += 1
            stop = min(end, bounds[j][1])
            out.append(Piece(part, index, j, at - key.start, stop - key.start))
            index += 1
            at = stop
    return out


class SortedBackend:
    """Batch tasks over sorted Spark partitions (run_batches.Backend): each partition's rows
    of one key are one batch, and one Spark task runs every batch of its partition."""

    def __init__(self, plan: Plan, ordered, arrow_schema: pa.Schema, spark_schema, run, check_order: bool = False):
        self.plan, self.ordered, self.arrow_schema, self.spark_schema = plan, ordered, arrow_schema, spark_schema
        order_by = plan.query.order_by
        self.batch = run.batch
        self.names = [f.name for f in arrow_schema]
        # Rows after a partition's end its tasks read in the first pass, and rows before it.
        self.ahead = max(run.shared, 1) + plan.lookahead
        self.behind = plan.lookbehind
        ahead, behind = self.ahead, self.behind
        # One row more each way than the tasks need: the seams' order check reads them.
        self.pids, counts, heads, tails = _edges(ordered, self.names, max(ahead, 1), max(behind, 1))
        self.check_order = check_order
        # Out of order at an edge or a seam: each partition's last row sorts before (or
        # ties with) the next one's first. Rows inside a partition its first-pass task checks.
        self.in_order = not check_order or (
            all(already_ordered(t, order_by) for t in heads + tails)
            and all(already_ordered(pa.concat_tables([tails[i].slice(tails[i].num_rows - 1), heads[i + 1].slice(0, 1)]),
                                    order_by) for i in range(len(heads) - 1)))
        heads = [h.slice(0, ahead) for h in heads]
        tails = [t.slice(t.num_rows - min(behind, t.num_rows)) for t in tails]
        # Spark partition j holds the rows [bounds[j][0], bounds[j][1]) of the sorted order.
        self.bounds: list[tuple[int, int]] = []
        lo = 0
        for c in counts:
            self.bounds.append((lo, lo + c))
            lo += c
        self.n = lo
        if not self.n:
            self.keys = []
        elif plan.query.partition_by:
            self.keys = _key_parts(plan, ordered, self.global_index())
        else:
            self.keys = [Part(0, self.n)]
        self.pieces = _pieces(self.keys, self.bounds)
        self.piece_of = {(pc.part, pc.index): i for i, pc in enumerate(self.pieces)}
        # Per Spark partition: (rows before it, rows after it) as Arrow IPC, from its neighbours.
        self.context: list[tuple[bytes, bytes]] = []
        for b in range(len(heads)):
            before = _take_rows([tails[j] for j in range(b - 1, -1, -1)], behind, True, heads[b].schema)
            after = _take_rows([heads[j] for j in range(b + 1, len(heads))], ahead, False, heads[b].schema)
            self.context.append((table_to_ipc(before), table_to_ipc(after)))
        self.ranged = 0  # tasks whose rows came through the range join
        # The first pass also emits each batch's rows as if it began free (cached): a batch
        # keeps them from the row where its true selection joins the first pass's
        # (speculation_from), and its rows go to Python once. first: piece -> its first-pass
        # summary; kept: batches that took them.
        self.first: dict[int, Summary] = {}
        self.speculated: set[int] = set()
        self.spec = None
        self.held: list = []  # DataFrames cached for the result (released with it)
        self.kept = 0

    def layout(self) -> dict[int, list[tuple[int, int]]]:
        """Each run partition's batches: its rows in each Spark partition."""
        out: dict[int, list[tuple[int, int]]] = {}
        for pc in self.pieces:
            out.setdefault(pc.part, []).append((pc.lo, pc.hi))
        return out

    def _piece(self, t: Task) -> int:
        return self.piece_of[(t.part, t.batch)]

    def _local(self, t: Task) -> bool:
        """Whether the task's window lies within its partition and the neighbours' rows."""
        w = t.window(self.plan)
        start = self.keys[t.part].start
        lo, hi = self.bounds[self.pieces[self._piece(t)].spark]
        return start + w.start >= lo - self.behind and start + w.end <= hi + self.ahead and t.entry >= t.lo

    def _run(self, tasks: list[tuple[Task, Selection | None]], out_arrow: pa.Schema | None, speculate: bool = False):
        """The local tasks as one mapInArrow over their partitions: summaries (with
        ``speculate``, the first pass: also each batch's rows as if it began free, and the
        order check of its rows where the input was not sorted), or output rows."""
        from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

        by_pid: dict[int, tuple] = {}
        for t, entry in tasks:
            i = self._piece(t)
            j = self.pieces[i].spark
            key = self.keys[t.part]
            by_pid.setdefault(self.pids[j], (self.context[j], self.bounds[j][0], []))[2].append(
                (i, t, entry, key.start, key.n))
        if out_arrow is not None:
            schema = self.spark_schema
        elif speculate:
            schema = StructType([StructField(f.name, f.dataType, True) for f in self.spark_schema.fields]
                                + [StructField(AT, LongType()), StructField(WIN, LongType()),
                                   StructField(SUMMARY, StringType()), StructField(SPECULATED, BooleanType())])
        else:
            schema = StructType([StructField(WIN, LongType()), StructField(SUMMARY, StringType())])
        payload = cloudpickle.dumps((self.plan, by_pid, self.names, out_arrow,
                                     arrow_of(schema) if speculate else None, speculate and self.check_order))

        def task(batches):
            with errors_to_driver():
                yield from _sorted_task(cloudpickle.loads(payload), batches)

        return self._of([t for t, _ in tasks]).mapInArrow(task, schema)

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        from pyspark.sql import functions as F

        local = [t for t in tasks if self._local(t)]
        far = [t for t in tasks if not self._local(t)]
        out: list[Summary] = []
        if local:
            first_pass = not self.first
            if first_pass:
                self.spec = self._run([(t, None) for t in local], None, speculate=True).persist()
                self.held.append(self.spec)
                got = collect_arrow(self.spec.where(F.col(SUMMARY).isNotNull()).select(WIN, SUMMARY, SPECULATED))
                if UNORDERED in got.column(SUMMARY).to_pylist():
                    raise Unordered
                self.speculated = {b for b, ok in zip(got.column(WIN).to_pylist(), got.column(SPECULATED).to_pylist(),
                                                      strict=True) if ok}
            else:
                got = collect_arrow(self._run([(t, None) for t in local], None))
            by_piece = {self._piece(t): t for t in local}
            got = [summary_from_json(by_piece[i], x)
                   for i, x in zip(got.column(WIN).to_pylist(), got.column(SUMMARY).to_pylist(), strict=True)]
            if first_pass:
                self.first = {self._piece(s.task): s for s in got}
            out += got
        if far:
            self.ranged += len(far)
            out += self._ranged().summaries(far)
        return out

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        kept = {i: at for t, e in tasks if (i := self._piece(t)) in self.speculated
                and (at := speculation_from(self.plan, self.first[i], t, e)) is not None}
        self.kept = len(kept)
        tasks = [(t, e) for t, e in tasks if self._piece(t) not in kept]
        local = [(t, e) for t, e in tasks if self._local(t)]
        far = [(t, e) for t, e in tasks if not self._local(t)]
        parts = []
        if kept:
            parts.append(self._kept(kept))
        elif self.spec is not None:
            unpersist(self.spec)
        if local:
            parts.append(self._run(local, arrow_of(self.spark_schema)))
        if far:
            self.ranged += len(far)
            parts.append(self._ranged().outputs(far))
        if not parts:
            return self.ordered.sparkSession.createDataFrame([], self.spark_schema)
        return functools.reduce(lambda a, b: a.unionByName(b), parts)

    def _kept(self, kept: dict[int, tuple[int, int]]):
        """The cached first-pass rows of the batches that keep them (piece -> (row,
        match-number offset))."""
        return kept_rows(self.plan, self.spec, [(b, at, offset) for b, (at, offset) in kept.items()],
                         self.spark_schema)

    def _of(self, tasks: list[Task]):
        """The rows of the partitions these tasks run in (neighbouring partitions' row ids
        merged into ranges; the filter is a balanced tree, so many batches stay shallow)."""
        from pyspark.sql import functions as F

        batches = sorted({self.pieces[self._piece(t)].spark for t in tasks})
        if len(batches) == len(self.pids):
            return self.ordered
        ranges: list[list[int]] = []
        for b in batches:
            lo, hi = self.bounds[b]
            first, last = self.pids[b], self.pids[b] + hi - lo - 1
            if ranges and ranges[-1][1] + 1 == first:
                ranges[-1][1] = last
            else:
                ranges.append([first, last])
        pos = F.col(POS)
        return self.ordered.where(_balanced([pos.between(a, z) for a, z in ranges], lambda x, y: x | y))

    def global_index(self):
        """A row's place in the sorted order as a Column: its row id shifted by its
        partition's (partition i holds row ids from pids[i]; a binary search as a balanced
        CASE tree finds i)."""
        from pyspark.sql import functions as F

        pos = F.col(POS)

        def shift(i: int, j: int):
            if j - i == 1:
                return F.lit(self.bounds[i][0] - self.pids[i])
            mid = (i + j) // 2
            return F.when(pos < F.lit(self.pids[mid]), shift(i, mid)).otherwise(shift(mid, j))

        return pos + shift(0, len(self.pids))

    def _ranged(self) -> WindowBackend:
        """Tasks reaching past the neighbours' rows: windows of global rows by range join."""
        with_gidx = self.ordered.withColumn(GIDX, self.global_index())
        return WindowBackend(self.plan, with_gidx, self.keys, self.arrow_schema, self.spark_schema, self.batch)


def _balanced(items: list, join):
    """``join`` over the items as a balanced tree (depth log n, not n)."""
    while len(items) > 1:
        items = [join(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _partition_table(batches) -> pa.Table | None:
    batches = list(batches)
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    return table if table.num_rows else None


def _take_rows(tables: list[pa.Table], rows: int, from_end: bool, schema: pa.Schema) -> pa.Table:
    """Up to ``rows`` rows from consecutive neighbours (nearest first)."""
    got: list[pa.Table] = []
    have = 0
    for t in tables:
        if have >= rows:
            break
        take = min(rows - have, t.num_rows)
        got.append(t.slice(t.num_rows - take) if from_end else t.slice(0, take))
        have += take
    if from_end:
        got.reverse()
    return pa.concat_tables(got) if got else schema.empty_table()


def _sorted_task(payload, batches):
    """One Spark partition's batch tasks: each one's summary (``out_arrow`` None; with
    ``spec``, the schema holding both, its rows as if it began free too) or output rows."""
    p, by_pid, names, out_arrow, spec, check_order = payload
    table = _partition_table(batches)
    if table is None:
        return
    pid = table.column(POS)[0].as_py()
    if pid not in by_pid:
        return
    (before_b, after_b), first, tasks = by_pid[pid]
    if check_order and not already_ordered(table.select(names), p.query.order_by):
        yield from _summary_row(tasks[0][0], UNORDERED, False, spec)
        return
    own = table.select(names)
    # The neighbours' rows came through toArrow (timestamps in UTC), this partition's through
    # mapInArrow (in the session's time zone): the same instants, one schema.
    before, after = table_from_ipc(before_b).cast(own.schema), table_from_ipc(after_b).cast(own.schema)
    rows = pa.concat_tables([before, own, after])  # from global row first - len(before)
    outputs = pa.schema(list(spec)[:-4]) if spec is not None else None
    with calls_once(p):
        yield from _batch_rows(p, rows, tasks, first, before, names, out_arrow, outputs, spec)


def _batch_rows(p, rows, tasks, first, before, names, out_arrow, outputs, spec):
    for piece, task, entry, start, n in tasks:
        w = task.window(p)
        t = rows.slice(start + w.start - (first - before.num_rows), w.end - w.start)
        text, out = run_batch(p, t, names, w, task, entry, n, out_arrow, outputs)
        if out_arrow is not None:
            yield from out.to_batches()
        elif spec is None:
            yield pa.RecordBatch.from_pydict({WIN: [piece], SUMMARY: [text]})
        else:
            # One schema for both kinds of row: a summary row has no output values, an
            # output row no summary.
            if out is not None and out.num_rows:
                k = out.num_rows
                yield from (out.append_column(WIN, pa.array([piece] * k, pa.int64()))
                            .append_column(SUMMARY, pa.nulls(k, pa.string()))
                            .append_column(SPECULATED, pa.nulls(k, pa.bool_())).cast(spec).to_batches())
            yield from _summary_row(piece, text, out is not None, spec)


def _summary_row(batch: int, text: str, speculated: bool, spec: pa.Schema):
    """A first-pass task's summary row: no output values, its summary text."""
    yield from side_row(spec, {WIN: pa.array([batch], pa.int64()), SUMMARY: pa.array([text]),
                               SPECULATED: pa.array([speculated])})
