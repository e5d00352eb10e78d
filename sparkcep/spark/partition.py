"""The ``partition`` (MatchRegex) and ``sequential`` strategies: each PARTITION BY key's rows
lie in one task (hash partitions of the keys, or one task for all rows), which runs the
local engine over all its keys at once; the result does not depend on the number of Spark
partitions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.data.partitions import named_by_key, sort_and_partition
from sparkcep.errors import DataError
from sparkcep.query import is_segment_plan, run_plan
from sparkcep.spark.frames import MAX_TASK_ROWS_CONF, ROW, arrow_of, max_task_rows, slots
from sparkcep.spark.routes import ROUTE, KeySizes, placed, whole_routes
from sparkcep.spark.wire import errors_to_driver


def by_groups(plan: Plan, base, spark_schema, single: bool, sizes: KeySizes | None = None):
    """Rows hash-partitioned by the PARTITION BY keys (or all to one task), each Spark
    partition's rows matched in one call: the local engine takes all its keys in one pass,
    where one Python call per key group cost Spark a sort and the engine a call per key.
    With the keys counted (``sizes``), each key larger than a batch has a task of its own."""
    payload = cloudpickle.dumps((plan, max_task_rows(base.sparkSession)))

    def task(batches):
        with errors_to_driver():
            yield from _partition_task(*cloudpickle.loads(payload), batches, spark_schema)

    return spread(plan, base, single, sizes).mapInArrow(task, spark_schema)


def spread(plan: Plan, base, single: bool, sizes: KeySizes | None = None):
    """``base`` in one partition, or in partitions by ``plan``'s PARTITION BY keys, each key
    whole in one; with the keys counted (``sizes``), a key of more than a batch with no
    other key than those of its hash."""
    keys = [k.column for k in plan.query.partition_by]
    if single or not keys:
        return base.repartition(1)
    routed = None if sizes is None or not sizes.hot else whole_routes(base, sizes)
    if routed is not None:
        # One shuffle as below, but a hot key shares its task with no other key (by hash,
        # a key of half the rows took an eighth of the others along on eight partitions).
        return placed(plan, base, routed).drop(ROUTE)
    # An explicit width keeps adaptive execution from merging all keys into one task.
    return base.repartition(slots(base), *keys)


def _partition_task(p: Plan, limit: int, batches, spark_schema):
    batches = list(batches)
    if not batches or not sum(b.num_rows for b in batches):
        return
    table = pa.Table.from_batches(batches)
    # The shuffle brings rows in no set order: input position first, which breaks ORDER BY ties.
    row = table.column(ROW).to_numpy()
    if len(row) > 1 and not (row[1:] > row[:-1]).all():
        table = table.take(pa.array(np.argsort(row, kind="stable")))
    t = table.drop_columns([ROW])
    schema = arrow_of(spark_schema)
    for part in within_bound(p, t, limit):
        try:
            out = run_in_task(p, part)
        except DataError as e:
            raise named_by_key(e, p.query, part, e.row) from None
        yield from out.cast(schema).to_batches()


def within_bound(p: Plan, t: pa.Table, limit: int):
    """``t`` whole, or cut at key boundaries into parts of at most ``limit`` rows; a key
    holding more is an error (a matcher's working memory grows with its partition's rows)."""
    if t.num_rows <= limit:
        yield t
        return
    if not p.query.partition_by:
        raise named_by_key(DataError(_too_many("the input has", t.num_rows, limit)), p.query, t, 0)
    parts = sort_and_partition(t, p.query)
    at = 0
    while at < len(parts.bounds):
        lo = parts.bounds[at][0]
        hi = parts.bounds[at][1]
        if hi - lo > limit:
            raise named_by_key(DataError(_too_many("one key holds", hi - lo, limit)), p.query, t, int(parts.order[lo]))
        while at + 1 < len(parts.bounds) and parts.bounds[at + 1][1] - lo <= limit:
            at += 1
            hi = parts.bounds[at][1]
        at += 1
        # (in input order: the position breaks ORDER BY ties, for this query and others run over it)
        yield t.take(pa.array(np.sort(parts.order[lo:hi])))


def _too_many(where: str, rows: int, limit: int) -> str:
    return (f"{where} {rows:,} rows, more than one task's bound of {limit:,} (Spark setting {MAX_TASK_ROWS_CONF}); "
            "this query needs each partition in one task: choose a finer PARTITION BY, or raise the bound if a "
            "worker's memory holds them")


# A key group this small ends before worker interpreters would be up (a task's groups come
# one call at a time, each its own query): its calls are made in the task.
SPECULATE_ROWS = 1_000


def run_in_task(plan, table: pa.Table, sorts=None) -> pa.Table:
    """A Spark task's run of ``plan`` over its rows (a key group, or all rows). With
    expensive calls, each distinct call is made once; a task given more than one CPU
    (``spark.task.cpus``) also makes them ahead on that many worker processes less one, as
    a query on pandas does, so one hot key's task uses the cores it was given (groups of
    fewer than SPECULATE_ROWS rows make their calls in the task; ``sorts``: the rows sorted
    for other rules run over them, runtime.local.SharedSorts)."""
    from sparkcep.tasks.calls import calls_once
    from sparkcep.tasks.from_sql import calls_expensive

    cpus = task_cpus()
    if cpus <= 1 or table.num_rows < SPECULATE_ROWS or is_segment_plan(plan) or not calls_expensive(plan):
        with calls_once(plan):
            return run_plan(plan, table, sorts=sorts)
    from sparkcep.tasks.engine import TaskOptions
    from sparkcep.tasks.speculate import Speculation

    spec = Speculation(plan, TaskOptions(workers=cpus - 1).check())
    return run_plan(plan, table, spec.matcher, executor=spec)


def task_cpus() -> int:
    """The CPUs Spark gave the running task (``spark.task.cpus``); 1 outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return int(context.cpus()) if context is not None else 1
