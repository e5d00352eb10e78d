"""Which strategy runs a query on a Spark DataFrame: what the user asked for if the query
allows it, else (``auto``) by the query's needs, the input's size and its key counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.compile.plan import Plan
from sparkcep.errors import OptionError, SparkCepError
from sparkcep.options import SPARK_STRATEGIES
from sparkcep.parallel.run_batches import default_shared
from sparkcep.spark.frames import MAX_TASK_ROWS_CONF, ROW, max_task_rows, plan_for
from sparkcep.spark.routes import KeySizes, key_sizes
from sparkcep.spark.session import parallelism

STRATEGIES = SPARK_STRATEGIES
DEFAULT_BATCH = 100_000


@dataclass
class SparkRun:
    """What a Spark run chose and did (``sparkcep.explain`` and the CLI show it)."""

    strategy: str
    reason: str
    batch: int | None = None
    shared: int | None = None
    partitions: int | None = None
    rows: int | None = None
    sizes: KeySizes | None = None  # auto's count of the keys, which the run strategy reuses
    stats: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"strategy: {self.strategy} ({self.reason})"]
        if self.batch is not None:
            parts.append(f"batch: {self.batch} rows, shared: {self.shared} rows")
        if self.stats:
            parts.append(", ".join(f"{k}: {v}" for k, v in self.stats.items()))
        return "; ".join(parts)

    def size_batches(self, plan: Plan, batch: int | None, shared: int | None) -> None:
        """Batch and shared part of the run strategies (rr shares nothing)."""
        self.batch = batch or self.batch or DEFAULT_BATCH
        if self.strategy == "rr":
            self.shared = 0
        else:
            self.shared = shared if shared is not None else default_shared(plan, self.batch)


def whole_partitions(plan: Plan) -> str | None:
    """Why a plan needs each partition (or the whole input) in one task, or None."""
    q = plan.query
    if q.segment_query:
        return "segment queries match segments of whole partitions"
    if q.event_selection == "STRICT" and q.partition_by:
        return "STRICT CONTIGUITY with PARTITION BY reads the order of the whole input"
    if q.event_selection != "PARTITION" or q.negated:
        return "EVENT SELECTION and negation need whole partitions"
    if plan.define_match_number:
        return "MATCH_NUMBER() in DEFINE numbers the matches in order, so a partition is matched in one task"
    return None


def check_strategy(plan: Plan, strategy: str) -> None:
    """Refuse a requested strategy the query cannot run on, saying why."""
    why = whole_partitions(plan)
    if why is None:
        return
    allowed = ("sequential",) if "whole input" in why else ("sequential", "partition")
    if strategy not in allowed:
        raise OptionError(f"strategy {strategy!r} is not supported here: {why}; use {' or '.join(allowed)}")


def choose(plan: Plan, base, run: SparkRun, batch: int | None) -> None:
    """auto: look at sizes and key counts, then pick."""
    q = plan.query
    run.sizes = None  # (this query's count, or none: never another's)
    batch = batch or DEFAULT_BATCH
    why = whole_partitions(plan)
    if why is not None:
        if "whole input" in why or not q.partition_by:
            run.strategy, run.reason = "sequential", why
            run.rows = n = base.count()
            limit = max_task_rows(base.sparkSession)
            if n > limit:
                raise SparkCepError(
                    f"{why}, and this input's {n:,} rows would all go to one task, more than its bound of "
                    f"{limit:,} rows; add a PARTITION BY, or raise the bound with the Spark setting "
                    f"{MAX_TASK_ROWS_CONF} if one worker's memory holds them")
        else:
            run.strategy, run.reason = "partition", why
        return
    if not q.partition_by:
        # Whether the rows fit in one batch: a read that stops after batch + 1 rows, not a
        # count of them all (the run strategy needs no count).
        n = base.limit(batch + 1).count()
        if n <= batch:
            run.rows = n
            run.strategy, run.reason = "sequential", f"{n} rows fit in one batch of {batch}"
        else:
            run.strategy, run.reason = "runs", f"no PARTITION BY, more than {batch} rows"
        return
    # The rows, the keys, the largest key's rows and the hot keys in one read of the input
    # (the run strategy cuts by them).
    run.sizes = sizes = key_sizes(plan, base, batch)
    n, keys, largest = sizes.rows, sizes.keys, sizes.largest
    run.rows = n
    if n <= batch:
        run.strategy, run.reason = "sequential", f"{n} rows fit in one batch of {batch}"
        return
    slots_ = parallelism(base.sparkSession)
    run.partitions = keys
    if sizes.worth_cutting(slots_, max_task_rows(base.sparkSession)):
        run.strategy = "runs"
        run.reason = (
            f"{keys} keys, the largest holds {largest} of {n} rows: batches inside partitions"
        )
    else:
        run.strategy = "partition"
        run.reason = f"{keys} keys, the largest holds {largest} of {n} rows"


def choose_strategy(df, clause: str, *, strategy: str = "auto", batch: int | None = None,
                    shared: int | None = None, mode: str = "sql", plan: str | None = None,
                    sharing: bool = True) -> SparkRun:
    """The strategy a run would use (for explain)."""
    from pyspark.sql import functions as F

    plan = plan_for(df, clause, mode, plan, sharing)[0]
    run = SparkRun(strategy, "requested", batch=batch)
    if strategy == "auto":
        choose(plan, df.withColumn(ROW, F.monotonically_increasing_id()), run, batch)
    if run.strategy in ("runs", "rr"):
        run.size_batches(plan, batch, shared)
    return run
