"""The run strategy over input it must sort (rows out of ORDER BY order, or PARTITION BY,
where a hot key's rows are cut into batches), in one range sort (or, keyed, one shuffle
by route: ``spark.routes``), one pass and no cache of the rows.

The range sort by (PARTITION BY, ORDER BY, input position) makes Spark partitions that
follow each other in the whole order; one pass hands each to Python once. In a partition,
the keys between its first and its last are whole there: its task matches them as the
``partition`` strategy does, and their rows are final. Its first and last keys' rows may go
on in the neighbours: each is a *piece*, which the as-read path (``spark.as_read``) treats
as it treats a partition of ordered input — a body matched as if it began free, edge rows
to the driver — and the driver stitches each such key's pieces as one run partition.

Routed rows come unsorted: a task sorts each route's rows as the local engine sorts. A
hot key's range is a piece, named by its route; a bucket's keys are all final.

A body that cannot keep its first pass would need the sorted rows again, and a second sort
may sample other bounds: such a run takes the cached path instead — a query reading
MATCH_NUMBER() inside an expression from the start (runs.by_sorted_runs), a search that
runs past the shared rows once found (``Widen``)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json

import numpy as np
import pyarrow as pa

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import table_from_ipc
from sparkcep.data.partitions import key_runs, named_by_key, sort_and_partition
from sparkcep.errors import DataError
from sparkcep.parallel.run_batches import Summary, Task
from sparkcep.runtime.selection import Selection
from sparkcep.spark.as_read import (
    EDGES,
    AsReadBackend,
    Margins,
    Widen,
    first_pass,
    first_pass_job,
    output_frame,
)
from sparkcep.spark.frames import ROW, WIN, sort_columns
from sparkcep.spark.routes import ROUTE, KeySizes, Routes, placed
from sparkcep.spark.seams import AT, SUMMARY, drive

PID = "__sparkcep_pid__"  # a row's Spark partition after the range sort
INNER = -1  # the WIN of a partition's inner keys' rows, final in the first pass
ONE_HASH = "one_hash"  # a range's summary: it holds another key of its hot key's hash
PIECE_BITS = 32  # a piece's name: its partition << PIECE_BITS | its key's place there


def sorted_once_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run, k: int):
    """The run strategy over ``base`` range-sorted into ``k`` partitions (see the module's
    text); raises Widen where the caller must take the cached path."""
    from pyspark.sql import functions as F

    cols = sort_columns(plan)
    ordered = (base.repartitionByRange(k, *cols).sortWithinPartitions(*cols)
               .withColumn(PID, F.spark_partition_id()))
    return _once(plan, ordered, arrow_schema, spark_schema, run)


def routed_once_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run, sizes: KeySizes, r: Routes):
    """The run strategy over ``base`` routed by key (``spark.routes``): a hot key's ranges
    are its pieces, a bucket's keys are whole; raises Widen as sorted_once_runs does."""
    ordered = placed(plan, base, r).withColumnRenamed(ROUTE, PID)
    return _once(plan, ordered, arrow_schema, spark_schema, run, r.ranges, sizes, r.spans())


def _once(plan: Plan, ordered, arrow_schema: pa.Schema, spark_schema, run, whole_from: int | None = None,
          sizes: KeySizes | None = None, spans: list[tuple[int, int]] | None = None):
    first, backend = first_pass_job(plan, ordered, arrow_schema, spark_schema, run,
                                    functools.partial(_first_task, whole_from=whole_from),
                                    lambda names, margins, first, meta: PiecesBackend(
                                        plan, ordered, first, names, margins, spark_schema, meta, sizes, spans))
    run.rows, run.partitions = backend.rows, backend.keys
    return drive(plan, backend, backend.sizes, run, first, backend.layout)


def _first_task(payload, batches, whole_from: int | None = None):
    """A task's rows, by piece name (PID: its Spark partition after a range sort, its rows
    sorted there; or its route, of which a task may hold more than one, its rows in no
    order): keys inside a name's rows are final here, its first and last keys are pieces;
    from route ``whole_from`` on, every key is final."""
    p, names, margins, schema = payload
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    pid = table.column(PID).to_numpy()
    if whole_from is not None:
        # By route, then input position (which breaks ORDER BY ties); each route's rows are
        # sorted below as the local engine sorts.
        at = np.lexsort((table.column(ROW).to_numpy(), pid))
        table, pid = table.take(pa.array(at)), pid[at]
    starts = [0, *(np.flatnonzero(pid[1:] != pid[:-1]) + 1).tolist(), len(pid)]
    table = table.select(names)
    for lo, hi in itertools.pairwise(starts):
        part = int(pid[lo])
        rows = table.slice(lo, hi - lo)
        if whole_from is not None and part >= whole_from:
            yield from _inner(p, rows, schema).to_batches()  # a bucket: whole keys
            continue
        if whole_from is not None:
            parts = sort_and_partition(rows, p.query)
            rows = rows.take(pa.array(parts.order))
            if len(parts.bounds) > 1:  # another key of a hot key's hash (the sort found its keys)
                yield from first_pass(p, part << PIECE_BITS, rows.slice(0, 0), margins, schema, {ONE_HASH: True},
                                      sorted_here=True)
                continue
        yield from _named(p, part, rows, margins, schema)


def _named(p: Plan, part: int, table: pa.Table, margins, schema: pa.Schema):
    runs = key_runs(table, p.query.partition_by)
    inner = _inner(p, table.slice(runs[1][0], runs[-2][1] - runs[1][0]), schema) if len(runs) > 2 else None
    if inner is not None:
        yield from inner.to_batches()
    for i in sorted({0, len(runs) - 1}):
        lo, hi = runs[i]
        extra = {"partition_rows": table.num_rows, "partition_keys": len(runs),
                 "inner_rows": 0 if inner is None else inner.num_rows} if i == 0 else None
        yield from first_pass(p, part << PIECE_BITS | i, table.slice(lo, hi - lo), margins, schema, extra,
                              sorted_here=True)


def _inner(p: Plan, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The final rows of keys whole in this partition, as the partition strategy makes them."""
    from sparkcep.spark.partition import run_in_task

    try:
        out = run_in_task(p, table)
    except DataError as e:
        raise named_by_key(e, p.query, table, e.row) from None
    k = out.num_rows
    out = out.cast(pa.schema(list(schema)[:-4]))
    return (out.append_column(AT, pa.nulls(k, pa.int64())).append_column(WIN, pa.array([INNER] * k, pa.int64()))
            .append_column(SUMMARY, pa.nulls(k, pa.string())).append_column(EDGES, pa.nulls(k, pa.binary()))
            .cast(schema))


class PiecesBackend:
    """Batch tasks over the pieces (run_batches.Backend): each key whose rows touch a
    partition's edge is a run partition of its pieces, stitched by an AsReadBackend of its
    own (which knows itself as partition 0)."""

    def __init__(self, plan: Plan, ordered, first, names: list[str], margins: Margins, spark_schema, meta: pa.Table,
                 sizes: KeySizes | None = None, spans: list[tuple[int, int]] | None = None):
        self.plan, self.first, self.spark_schema = plan, first, spark_schema
        meta = meta.sort_by(WIN)
        groups: list[list[int]] = []  # rows of meta, per key
        self.rows = self.keys = 0
        self.inner_rows: int | None = 0  # output rows of the keys whole in one partition (made in the first pass)
        last = None
        for j, (text, edges) in enumerate(zip(meta.column(SUMMARY).to_pylist(), meta.column(EDGES).to_pylist(),
                                              strict=True)):
            info = json.loads(text)
            if info.get(ONE_HASH):
                raise Widen  # a range holding two keys: their pieces would not follow each other
            self.rows += info.get("partition_rows", 0)
            self.keys += info.get("partition_keys", 0)
            self.inner_rows += info.get("inner_rows", 0)
            head = table_from_ipc(edges).slice(0, 1)
            if last is not None and len(key_runs(pa.concat_tables([last, head.cast(last.schema)]),
                                                 plan.query.partition_by)) == 1:
                groups[-1].append(j)  # the key goes on from the partition before
                self.keys -= 1
            else:
                groups.append([j])
            last = head
        if spans is not None:
            # Routed: a hot key's routes hold its pieces alone, one group; more than one is
            # another key of its hash between them (its pieces would not follow each other).
            firsts = [meta.column(WIN)[g[0]].as_py() >> PIECE_BITS for g in groups]
            if any(sum(lo <= f < hi for f in firsts) > 1 for lo, hi in spans):
                raise Widen
        if sizes is not None:  # routed: buckets send no summary, the key count told all
            self.rows, self.keys = sizes.rows, sizes.keys
            self.inner_rows = None  # (a bucket's output rows are not counted)
        self.subs = [AsReadBackend(plan, ordered, first, names, margins, spark_schema, meta.take(g),
                                   sorted_here=True)
                     for g in groups]
        self.sizes = [b.n for b in self.subs]
        self.layout = {i: b.layout for i, b in enumerate(self.subs)}
        self.held: list = []

    @property
    def kept(self) -> int:
        return sum(b.kept for b in self.subs)

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        by_part: dict[int, list[Task]] = {}
        for t in tasks:
            by_part.setdefault(t.part, []).append(dataclasses.replace(t, part=0))
        out = []
        for part, own in by_part.items():
            out += [dataclasses.replace(s, task=dataclasses.replace(s.task, part=part))
                    for s in self.subs[part].summaries(own)]
        return out

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        from pyspark.sql import functions as F

        by_part: dict[int, list[tuple[Task, Selection]]] = {}
        for t, e in tasks:
            by_part.setdefault(t.part, []).append((dataclasses.replace(t, part=0), e))
        seams, kept = [], []
        for part, own in by_part.items():
            s, k, again = self.subs[part].output_parts(own)
            if again:
                raise Widen  # its rows again would take a second sort
            seams += s
            kept += k
        inner = self.first.where(F.col(WIN) == INNER).select(*self.spark_schema.names)
        return output_frame(self.plan, self.first, self.spark_schema, seams, kept, [inner])
