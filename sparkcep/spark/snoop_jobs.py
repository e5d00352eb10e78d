"""Extended SNOOP queries on Spark.

- ``tasks``: the coordinator runs on the driver over the collected events (the thesis keeps
  raw events and partial matches in one place); the tasks of each round — everything queued
  when the workers are free — are evaluated by Spark tasks across the cluster. Each Spark
  task compiles the query once per Python worker from a broadcast payload (query, options,
  events as Arrow IPC; cloudpickle carries registered functions along with the plan).
- ``partition`` (with ``partition_by``): one coordinator per key group, each in a Spark task
  (``applyInArrow``), evaluating its own tasks; groups run in parallel.

Both return exactly the local engine's rows (tests compare them).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle

from sparkcep import functions
from sparkcep.compile.expressions import EvaluationError
from sparkcep.data.ingest import table_from_ipc, table_to_ipc
from sparkcep.data.output import output_schema
from sparkcep.errors import DataError, OptionError, SparkCepError
from sparkcep.spark.frames import arrow_of, check_typed_measures, slots
from sparkcep.spark.session import is_connect, parallelism
from sparkcep.spark.wire import collect_errors, errors_to_driver
from sparkcep.tasks.engine import TaskOptions, TaskStats, run_tasks, sorted_data
from sparkcep.tasks.evaluate import Evaluator
from sparkcep.tasks.strategies import snoop_table
from sparkcep.tasks.task_query import compile_snoop

_EVALUATORS: dict[str, tuple[Evaluator, Any]] = {}  # per Python worker: payload id -> evaluator, order


def _evaluator(payload: bytes) -> tuple[Evaluator, Any]:
    key, text, compile_opts, ipc, registered = cloudpickle.loads(payload)
    got = _EVALUATORS.get(key)
    if got is None:
        functions.install_user_functions(registered)
        table = table_from_ipc(ipc)
        tq = compile_snoop(text, table, **compile_opts)
        part, _, order_np = sorted_data(tq, table)
        _EVALUATORS.clear()  # one query at a time per worker
        got = _EVALUATORS[key] = (Evaluator(tq, part), order_np)
    return got


def _key_at(ev: Evaluator, pos: int) -> dict:
    q = ev.tq.plan.query
    cols = ev.part.py()
    return {k.column: cols[k.index][pos] for k in (*q.partition_by, *q.order_by)}


class _Slot:
    def __init__(self):
        self.chunk = None
        self.wire = None


class SparkTaskPool:
    """The worker pool's interface (idle / submit / busy / results) over Spark: chunks
    submitted while slots are free are evaluated together as one Spark job."""

    def __init__(self, spark, payload: bytes, slots_: int):
        self.spark = spark
        # The query and its table reach each worker once: a broadcast where the session has
        # a SparkContext; on Spark Connect (none) inside each job's function.
        self.connect = is_connect(spark)
        self.payload = payload if self.connect else spark.sparkContext.broadcast(payload)
        self.workers = [_Slot() for _ in range(slots_)]
        self.restarts = 0  # Spark retries failed tasks itself
        self.jobs = 0

    def idle(self) -> list[_Slot]:
        return [w for w in self.workers if w.chunk is None]

    @property
    def busy(self) -> int:
        return sum(w.chunk is not None for w in self.workers)

    def submit(self, worker: _Slot, chunk: list, wire: list[tuple]) -> None:
        worker.chunk, worker.wire = chunk, wire

    def results(self) -> list[tuple[list, list[bool]]]:
        busy = [w for w in self.workers if w.chunk is not None]
        items = [(i, w.wire) for i, w in enumerate(busy)]
        self.jobs += 1
        with collect_errors():
            got = self._on_connect(items) if self.connect else self._on_rdd(items)
        out = []
        for i, w in enumerate(busy):
            out.append((w.chunk, got[i]))
            w.chunk = w.wire = None
        return out

    def _on_rdd(self, items: list) -> dict:
        payload = self.payload

        def evaluate(rows):
            yield from _evaluate(payload.value, rows)

        return dict(self.spark.sparkContext.parallelize(items, len(items)).mapPartitions(evaluate).collect())

    def _on_connect(self, items: list) -> dict:
        """One task per chunk, from DataFrame operations alone (Connect has no RDD)."""
        payload = self.payload

        def evaluate(batches):
            rows = ((i, cloudpickle.loads(w)) for b in batches
                    for i, w in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True))
            for i, result in _evaluate(payload, rows):
                yield pa.RecordBatch.from_pydict({"i": pa.array([i], pa.int32()),
                                                  "out": pa.array([cloudpickle.dumps(result)], pa.binary())})

        df = self.spark.createDataFrame([(i, cloudpickle.dumps(w)) for i, w in items], "i int, wire binary")
        rows = df.repartitionByRange(len(items), "i").mapInArrow(evaluate, "i int, out binary").collect()
        return {r["i"]: cloudpickle.loads(r["out"]) for r in rows}

    def close(self) -> None:
        if not self.connect:
            self.payload.unpersist()


def _evaluate(payload: bytes, rows):
    """(chunk number, its tasks' results) for each chunk, in a Spark task."""
    with errors_to_driver():
        ev, _ = _evaluator(payload)
        for i, wire in rows:
            try:
                yield i, ev.tasks(wire)
            except EvaluationError as e:
                # A distributed DataFrame has no row positions: name the row by its keys.
                key = _key_at(ev, e.position) if e.position is not None else None
                raise DataError(e.message, e.column, key=key) from None


def snoop_spark(df, query: str, *, order_by: str | None, partition_by: tuple[str, ...],
                type_column: str | None, strategy: str = "auto", **options: Any):
    """A SNOOP query over a Spark DataFrame; the result is a Spark DataFrame."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if order_by is None:
        raise SparkCepError("a SNOOP query over a Spark DataFrame needs order_by= (a distributed DataFrame has "
                            "no input order)")
    if strategy == "auto":
        strategy = "partition" if partition_by else "tasks"
    if strategy not in ("tasks", "partition"):
        raise OptionError(f"strategy must be auto, tasks or partition for a SNOOP query on Spark, not {strategy!r}")
    compile_opts = {"order_by": order_by, "partition_by": tuple(partition_by), "type_column": type_column}
    arrow_schema = arrow_of(df.schema)
    tq = compile_snoop(query, arrow_schema.empty_table(), **compile_opts)  # errors before any Spark job
    check_typed_measures(tq.plan.query, arrow_schema, query)
    out_schema = output_schema(tq.plan.query, arrow_schema)
    spark = df.sparkSession
    local = sorted({"workers", "start"} & set(options))
    if local:
        raise SparkCepError(f"{', '.join(local)} set(s) local worker processes; on Spark the cluster's task slots "
                            "evaluate tasks")
    if strategy == "partition":
        if not partition_by:
            raise OptionError("strategy 'partition' runs one coordinator per key group; pass partition_by=")
        # Each key group's coordinator evaluates in its own Spark task (no workers, no
        # driver-side stats or progress).
        engine_opts = {k: v for k, v in options.items() if k in ("pm", "queue", "block", "window", "chunk")}
        payload = cloudpickle.dumps((query, compile_opts, engine_opts, functions.user_functions()))
        spark_schema = from_arrow_schema(out_schema)

        def group(table: pa.Table) -> pa.Table:
            with errors_to_driver():
                text, copts, opts, registered = cloudpickle.loads(payload)
                functions.install_user_functions(registered)
                opts = {**opts, "workers": 0}
                try:
                    return snoop_table(table, text, strategy="sequential", **copts, **opts).cast(out_schema)
                except DataError as e:
                    if e.row is None:
                        raise
                    keys = (*copts["partition_by"], copts["order_by"])
                    key = {c: table.column(c)[e.row].as_py() for c in keys}
                    raise DataError(e.message, e.column, key=key) from None

        return df.repartition(slots(df), *partition_by).groupBy(*partition_by).applyInArrow(group, spark_schema)

    stats = options.pop("stats", None) or TaskStats()
    progress = options.pop("progress", None)
    with collect_errors():
        table = df.toArrow()
    opts = TaskOptions(**{k: v for k, v in options.items() if k in ("pm", "queue", "block", "window", "chunk")})
    slots_ = max(2, parallelism(spark))
    opts.workers = slots_
    opts.check()
    payload = cloudpickle.dumps((uuid.uuid4().hex, query, compile_opts, table_to_ipc(table),
                                 functions.user_functions()))
    tq = compile_snoop(query, table, **compile_opts)
    result = run_tasks(tq, table, opts, stats, progress,
                       pool_factory=lambda evaluator: SparkTaskPool(spark, payload, slots_))
    # One chunk per column: PySpark 4.3 loses every row of an Arrow table whose first two
    # chunks are empty.
    return spark.createDataFrame(result.cast(out_schema).combine_chunks() if result.num_rows
                                 else out_schema.empty_table())

