"""The ``partition`` (MatchRegex) and ``sequential`` strategies: one task per PARTITION BY
key group (or one task for all rows) runs the local driver on its rows; the result does
not depend on the number of Spark partitions."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.errors import DataError
from sparkcep.query import is_segment_plan, run_plan
from sparkcep.spark.frames import MAX_TASK_ROWS_CONF, ROW, arrow_of, max_task_rows, slots
from sparkcep.spark.wire import errors_to_driver, keyed

_ALL = "__sparkcep_all__"


def by_groups(plan: Plan, base, spark_schema, single: bool):
    from pyspark.sql import functions as F

    payload = cloudpickle.dumps((plan, max_task_rows(base.sparkSession)))

    def task(table: pa.Table) -> pa.Table:
        with errors_to_driver():
            return _group_task(*cloudpickle.loads(payload), table, spark_schema)

    if single or not plan.query.partition_by:
        grouped = base.withColumn(_ALL, F.lit(0)).groupBy(_ALL)

        def drop_and_run(table: pa.Table) -> pa.Table:
            return task(table.drop_columns([_ALL]))

        return grouped.applyInArrow(drop_and_run, spark_schema)
    keys = [k.column for k in plan.query.partition_by]
    # An explicit repartition keeps adaptive execution from merging all groups into one task.
    return base.repartition(slots(base), *keys).groupBy(*keys).applyInArrow(task, spark_schema)


def _group_task(p: Plan, limit: int, table: pa.Table, spark_schema) -> pa.Table:
    order = pc.sort_indices(table, sort_keys=[(ROW, "ascending")])
    t = table.take(order).drop_columns([ROW])
    if t.num_rows > limit:
        # Before matching, whose working memory grows with the rows.
        where = "one key holds" if p.query.partition_by else "the input has"
        raise keyed(DataError(f"{where} {t.num_rows:,} rows, more than one task's bound of {limit:,} "
                              f"(Spark setting {MAX_TASK_ROWS_CONF}); this query needs each partition in one "
                              "task: choose a finer PARTITION BY, or raise the bound if a worker's memory "
                              "holds them"), p, t, 0)
    try:
        out = run_in_task(p, t)
    except DataError as e:
        raise keyed(e, p, t, e.row) from None
    return out.cast(arrow_of(spark_schema))


# A key group this small ends before worker interpreters would be up (a task's groups come
# one call at a time, each its own query): its calls are made in the task.
SPECULATE_ROWS = 1_000


def run_in_task(plan, table: pa.Table) -> pa.Table:
    """A Spark task's run of ``plan`` over its rows (a key group, or all rows). With
    expensive calls, each distinct call is made once; a task given more than one CPU
    (``spark.task.cpus``) also makes them ahead on that many worker processes less one, as
    a query on pandas does, so one hot key's task uses the cores it was given (groups of
    fewer than SPECULATE_ROWS rows make their calls in the task)."""
    from sparkcep.tasks.calls import calls_once
    from sparkcep.tasks.from_sql import calls_expensive

    cpus = task_cpus()
    if cpus <= 1 or table.num_rows < SPECULATE_ROWS or is_segment_plan(plan) or not calls_expensive(plan):
        with calls_once(plan):
            return run_plan(plan, table)
    from sparkcep.tasks.engine import TaskOptions
    from sparkcep.tasks.speculate import Speculation

    spec = Speculation(plan, TaskOptions(workers=cpus - 1).check())
    return run_plan(plan, table, spec.matcher, executor=spec)


def task_cpus() -> int:
    """The CPUs Spark gave the running task (``spark.task.cpus``); 1 outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return int(context.cpus()) if context is not None else 1
