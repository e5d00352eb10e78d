"""MATCH_RECOGNIZE on Spark DataFrames: the entry point. The rooms behind it: ``choice``
(which strategy), ``partition`` (sequential and partition), ``runs`` (the run strategy
on sorted partitions), ``windows`` (its follow-up tasks past a partition's neighbours), ``seams``
(a batch task and the driver loop's call), ``wire`` (errors between workers and driver),
``frames`` (shared DataFrame plumbing).

Strategies (all return exactly the sequential engine's rows, as a multiset):
- ``sequential``: every row to one task, which runs the sequential engine.
- ``partition`` (MatchRegex): one task per PARTITION BY key group (``applyInArrow``); the
  result does not depend on the number of Spark partitions.
- ``runs`` (RIP RB+): rows get a global order; each partition is cut into batches of
  ``batch`` rows read with ``shared`` following rows; see ``sparkcep.parallel.run_batches``.
- ``rr`` (RIP RB, the paper's baseline): batches with no shared part; every match that
  crosses a batch end is finished by a follow-up pass.
- ``auto``: ``partition`` when keys are many and even, ``runs`` when there is no key or a
  key holds a large share of the rows, ``sequential`` for small inputs.

Ties in ORDER BY are broken by ``monotonically_increasing_id()`` taken from the input
DataFrame (the order ``toPandas()`` gives), so results are deterministic for a
deterministic source.
"""

from __future__ import annotations

import logging

from sparkcep.errors import DataError, OptionError
from sparkcep.options import check_rows
from sparkcep.spark.choice import STRATEGIES, SparkRun, check_strategy, choose, choose_strategy
from sparkcep.spark.frames import ROW, compile_for, compile_reading
from sparkcep.spark.partition import by_groups
from sparkcep.spark.runs import by_sorted_runs
from sparkcep.spark.wire import collect_errors
from sparkcep.spark.worker_python import check_workers

__all__ = ["SparkRun", "choose_strategy", "collect_errors", "compile_for", "match_recognize_spark"]

log = logging.getLogger("sparkcep")


def match_recognize_spark(
    df,
    clause: str,
    *,
    strategy: str = "auto",
    batch: int | None = None,
    shared: int | None = None,
    mode: str = "sql",
    run: SparkRun | None = None,
    plan: str | None = None,
    sharing: bool = True,
):
    """Run ``MATCH_RECOGNIZE ( clause )`` over a Spark DataFrame; returns a DataFrame."""
    check_call(df, strategy, batch, shared)
    how = plan
    df, plan, arrow_schema, spark_schema = compile_reading(df, clause, mode, how, sharing)
    from pyspark.sql import functions as F

    q = plan.query
    if q.within is not None:
        # WITHIN measures the first ORDER BY column: a NULL there is an error on every strategy
        # (the batch tasks of the run strategies would not all see it).
        order0 = q.order_by[0].column
        bad = df.filter(F.col(order0).isNull()).limit(1).collect()
        if bad:
            names = [k.column for k in q.partition_by] + [k.column for k in q.order_by]
            raise DataError("WITHIN needs a value in the first ORDER BY column; this row has NULL", column=order0,
                            key={n: bad[0][n] for n in dict.fromkeys(names)})
    base = df.withColumn(ROW, F.monotonically_increasing_id())
    chosen = run if run is not None else SparkRun(strategy, "requested")
    if strategy == "auto":
        choose(plan, base, chosen, batch)
    else:
        check_strategy(plan, strategy)
        chosen.strategy = strategy
    log.info("sparkcep: %s", chosen.describe())
    if chosen.strategy in ("sequential", "partition"):
        return by_groups(plan, base, spark_schema, chosen.strategy == "sequential", sizes=chosen.sizes)
    chosen.size_batches(plan, batch, shared)
    return by_sorted_runs(plan, base, arrow_schema, spark_schema, chosen)


def check_call(df, strategy: str, batch: int | None, shared: int | None) -> None:
    """What a batch call on Spark checks first: its strategy and batch sizes, the input's
    column names, the workers' Python."""
    if strategy not in STRATEGIES:
        raise OptionError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
    check_rows(batch, shared)
    reserved = [c for c in df.columns if c.lower().startswith("__sparkcep_")]
    if reserved:
        raise DataError("column names starting with __sparkcep_ are reserved", column=reserved[0])
    check_workers(df.sparkSession)
