"""The ``partition`` (MatchRegex) and ``sequential`` strategies: one task per PARTITION BY
key group (or one task for all rows) runs the local driver on its rows; the result does
not depend on the number of Spark partitions."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.errors import DataError
from sparkcep.query import run_plan
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
        out = run_plan(p, t)
    except DataError as e:
        raise keyed(e, p, t, e.row) from None
    return out.cast(arrow_of(spark_schema))
