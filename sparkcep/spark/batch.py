"""MATCH_RECOGNIZE on Spark DataFrames.

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

import contextlib
import json
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle

from sparkcep.analysis.analyzer import analyze
from sparkcep.api import run_plan
from sparkcep.compile.plan import Plan
from sparkcep.data import (
    LazyColumns,
    _already_ordered,
    output_schema,
    output_table,
    referenced_columns,
    schema_of,
)
from sparkcep.errors import DataError, InternalError, QueryError, SparkCepError, internal_errors
from sparkcep.language.parser import parse
from sparkcep.parallel.run_batches import (
    RunStats,
    Summary,
    Task,
    Window,
    default_shared,
    emit,
    run_partitions,
    summarize,
    window_data,
)
from sparkcep.runtime.engine import Selection

log = logging.getLogger("sparkcep")

ROW = "__sparkcep_row__"
GIDX = "__sparkcep_gidx__"
WIN = "__sparkcep_win__"
BUCKET = "__sparkcep_bucket__"
STRATEGIES = ("auto", "sequential", "partition", "runs", "rr")
DEFAULT_BATCH = 100_000
_ERROR_TAG = "SPARKCEP_ERROR:"
# Arrow batches from Spark carry timestamps in UTC (the session time zone sparkcep sets).
_TZ = "UTC"


@dataclass
class SparkRun:
    """What a Spark run chose and did (``sparkcep.explain`` and the CLI show it)."""

    strategy: str
    reason: str
    batch: int | None = None
    shared: int | None = None
    partitions: int | None = None
    rows: int | None = None
    stats: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"strategy: {self.strategy} ({self.reason})"]
        if self.batch is not None:
            parts.append(f"batch: {self.batch} rows, shared: {self.shared} rows")
        if self.stats:
            parts.append(", ".join(f"{k}: {v}" for k, v in self.stats.items()))
        return "; ".join(parts)


# ---------------------------------------------------------------- errors across the wire
@contextlib.contextmanager
def _errors_to_driver():
    """Inside a task: sparkcep errors travel to the driver as tagged JSON (Spark wraps worker
    exceptions in its own types and keeps only their text)."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - every failure in a task travels typed
        if not isinstance(e, SparkCepError):
            e = InternalError.wrapping(e, "a Spark task")
        info = {
            "type": "InternalError" if isinstance(e, InternalError) else "DataError",
            "message": getattr(e, "message", str(e)),
            "column": getattr(e, "column", None),
            "row": getattr(e, "row", None),
            "key": getattr(e, "key", None),
        }
        raise RuntimeError(_ERROR_TAG + json.dumps(info, default=str)) from None


def _reraise(exc: Exception) -> None:
    text = str(exc)
    at = text.find(_ERROR_TAG)
    if at < 0:
        raise exc
    blob = text[at + len(_ERROR_TAG) :].split("\n", 1)[0]
    try:
        info = json.loads(blob)
    except ValueError:
        raise exc from None
    if info.get("type") == "InternalError":
        raise InternalError(info["message"]) from None
    raise DataError(info["message"], column=info.get("column"), row=info.get("row"), key=info.get("key")) from None


@contextlib.contextmanager
def collect_errors():
    """Around Spark actions on a sparkcep result: errors raised in workers come back as the
    DataError they were."""
    with internal_errors("a Spark job"):
        try:
            yield
        except SparkCepError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark wraps worker errors in its own types
            _reraise(e)
            raise


def _collect_arrow(df) -> pa.Table:
    try:
        return df.toArrow()
    except Exception as e:  # noqa: BLE001 - Spark wraps worker errors in its own types
        _reraise(e)
        raise


# ---------------------------------------------------------------- compile
def compile_for(df, clause: str, mode: str = "sql", how: str | None = None,
                sharing: bool = True) -> tuple[Plan, pa.Schema, Any]:
    """The plan for a Spark DataFrame, its Arrow input schema and the Spark output schema."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from sparkcep.api import plan_query

    arrow_schema = to_arrow_schema(df.schema, timezone=_TZ)
    plan = plan_query(analyze(parse(clause), schema_of(arrow_schema.empty_table()), mode), how, sharing)
    out = output_schema(plan.query, arrow_schema)
    return plan, arrow_schema, from_arrow_schema(out)


def _sort_columns(plan: Plan):
    from pyspark.sql import functions as F

    q = plan.query
    cols = [F.col(k.column).asc_nulls_last() for k in q.partition_by]
    for k in q.order_by:
        c = F.col(k.column)
        if k.descending:
            cols.append(c.desc_nulls_first() if k.nulls_first else c.desc_nulls_last())
        else:
            cols.append(c.asc_nulls_first() if k.nulls_first else c.asc_nulls_last())
    cols.append(F.col(ROW).asc())
    return cols


# ---------------------------------------------------------------- public entry
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
    if strategy not in STRATEGIES:
        raise SparkCepError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
    if batch is not None and batch < 1:
        raise SparkCepError("batch must be at least 1")
    if shared is not None and shared < 0:
        raise SparkCepError("shared must not be negative")
    if ROW in df.columns or GIDX in df.columns:
        raise DataError("column names starting with __sparkcep_ are reserved", column=ROW)
    how = plan
    plan, arrow_schema, spark_schema = compile_for(df, clause, mode, how, sharing)
    if plan.query.rows_per_match == "ONE":
        # ONE ROW PER MATCH outputs keys and measures only: ship just the columns the query
        # reads to the Python workers (the hand-off is most of the cost).
        used = referenced_columns(plan.query)
        if len(used) < len(df.columns):
            df = df.select(*[c for i, c in enumerate(df.columns) if i in used])
            plan, arrow_schema, spark_schema = compile_for(df, clause, mode, how, sharing)
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
        _choose(plan, base, chosen, batch)
    else:
        _check_strategy(plan, strategy)
        chosen.strategy = strategy
    log.info("sparkcep: %s", chosen.describe())
    if chosen.strategy in ("sequential", "partition"):
        return _by_groups(plan, base, spark_schema, chosen.strategy == "sequential")
    chosen.batch = batch or chosen.batch or DEFAULT_BATCH
    if chosen.strategy == "rr":
        chosen.shared = 0
    else:
        chosen.shared = shared if shared is not None else default_shared(plan, chosen.batch)
    if not plan.query.partition_by:
        return _by_sorted_runs(plan, base, arrow_schema, spark_schema, chosen)
    return _by_runs(plan, base, arrow_schema, spark_schema, chosen)


def choose_strategy(df, clause: str, *, strategy: str = "auto", batch: int | None = None,
                    shared: int | None = None, mode: str = "sql", plan: str | None = None,
                    sharing: bool = True) -> SparkRun:
    """The strategy a run would use (for explain)."""
    from pyspark.sql import functions as F

    plan = compile_for(df, clause, mode, plan, sharing)[0]
    run = SparkRun(strategy, "requested", batch=batch)
    if strategy == "auto":
        _choose(plan, df.withColumn(ROW, F.monotonically_increasing_id()), run, batch)
    if run.strategy in ("runs", "rr"):
        run.batch = batch or DEFAULT_BATCH
        run.shared = 0 if run.strategy == "rr" else (shared if shared is not None else default_shared(plan, run.batch))
    return run


def _whole_partitions(plan: Plan) -> str | None:
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


def _check_strategy(plan: Plan, strategy: str) -> None:
    why = _whole_partitions(plan)
    if why is None:
        return
    allowed = ("sequential",) if "whole input" in why else ("sequential", "partition")
    if strategy not in allowed:
        raise SparkCepError(f"strategy {strategy!r} is not supported here: {why}; use {' or '.join(allowed)}")


def _choose(plan: Plan, base, run: SparkRun, batch: int | None) -> None:
    """auto: look at sizes and key counts, then pick."""
    from pyspark.sql import functions as F

    q = plan.query
    batch = batch or DEFAULT_BATCH
    why = _whole_partitions(plan)
    if why is not None:
        if "whole input" in why or not q.partition_by:
            run.strategy, run.reason = "sequential", why
        else:
            run.strategy, run.reason = "partition", why
        return
    n = base.count()
    run.rows = n
    parallelism = base.sparkSession.sparkContext.defaultParallelism
    if n <= batch:
        run.strategy, run.reason = "sequential", f"{n} rows fit in one batch of {batch}"
        return
    if not q.partition_by:
        run.strategy, run.reason = "runs", f"no PARTITION BY, {n} rows"
        return
    sizes = base.groupBy(*[k.column for k in q.partition_by]).count()
    stats = sizes.agg(F.count("*").alias("keys"), F.max("count").alias("largest")).collect()[0]
    keys, largest = stats["keys"], stats["largest"]
    run.partitions = keys
    if largest > batch and largest * parallelism > n:
        run.strategy = "runs"
        run.reason = (
            f"{keys} keys, the largest holds {largest} of {n} rows: batches inside partitions"
        )
    else:
        run.strategy = "partition"
        run.reason = f"{keys} keys, the largest holds {largest} of {n} rows"


# ---------------------------------------------------------------- partition / sequential
def _by_groups(plan: Plan, base, spark_schema, single: bool):
    from pyspark.sql import functions as F

    payload = cloudpickle.dumps(plan)

    def task(table: pa.Table) -> pa.Table:
        with _errors_to_driver():
            return _group_task(cloudpickle.loads(payload), table, spark_schema)

    if single or not plan.query.partition_by:
        grouped = base.withColumn("__sparkcep_all__", F.lit(0)).groupBy("__sparkcep_all__")

        def drop_and_run(table: pa.Table) -> pa.Table:
            return task(table.drop_columns(["__sparkcep_all__"]))

        return grouped.applyInArrow(drop_and_run, spark_schema)
    keys = [k.column for k in plan.query.partition_by]
    # An explicit repartition keeps adaptive execution from merging all groups into one task.
    slots = 4 * base.sparkSession.sparkContext.defaultParallelism
    return base.repartition(slots, *keys).groupBy(*keys).applyInArrow(task, spark_schema)


def _group_task(p: Plan, table: pa.Table, spark_schema) -> pa.Table:
    order = pc.sort_indices(table, sort_keys=[(ROW, "ascending")])
    t = table.take(order)
    t = t.drop_columns([ROW])
    try:
        out = run_plan(p, t)
    except DataError as e:
        raise _keyed(e, p, t, e.row) from None
    return out.cast(_arrow_of(spark_schema))


def _keyed(e: DataError, p: Plan, t: pa.Table, index: int | None) -> DataError:
    """``e`` with its row named by PARTITION BY and ORDER BY values: a row of a Spark
    DataFrame has no position in the input (``index`` is the row's place in ``t``)."""
    if index is None or not 0 <= index < t.num_rows or isinstance(e, QueryError):
        return e
    names = [k.column for k in p.query.partition_by] + [k.column for k in p.query.order_by]
    key = {n: t.column(n)[index].as_py() for n in dict.fromkeys(names) if n in t.schema.names}
    return DataError(e.message, column=e.column, key=key)


def _arrow_of(spark_schema) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema, timezone=_TZ)


# ---------------------------------------------------------------- runs
@dataclass(frozen=True, order=True)
class _Part:
    start: int  # first global index
    n: int


def _by_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run: SparkRun):
    from pyspark.sql import functions as F

    q = plan.query
    ordered = base.orderBy(*_sort_columns(plan)).zipWithIndex(GIDX).persist()
    try:
        if q.partition_by:
            keys = [k.column for k in q.partition_by]
            bounds = (
                ordered.groupBy(*keys)
                .agg(F.min(GIDX).alias("s"), F.count("*").alias("n"))
                .select("s", "n")
                .collect()
            )
            parts = sorted(_Part(r["s"], r["n"]) for r in bounds)
        else:
            n = ordered.count()
            parts = [_Part(0, n)] if n else []
        run.partitions = len(parts)
        run.rows = sum(p.n for p in parts)
        stats = RunStats()
        backend = _SparkBackend(plan, ordered, parts, arrow_schema, spark_schema, run.batch)
        result = run_partitions(plan, [p.n for p in parts], backend, run.batch, run.shared, stats)
        run.stats.update(batches=stats.batches, passes=stats.passes, follow_up_tasks=stats.follow_up_starts,
                         matches=stats.matches)
    except Exception:
        ordered.unpersist()
        raise
    # The result is lazy and reads the sorted rows: they stay cached until it is garbage.
    weakref.finalize(result, _unpersist, ordered)
    return result


# monotonically_increasing_id() of the sorted (or as-read) rows: unique, increasing in the
# rows' order and by one within a Spark partition; a partition is named by its first value.
POS = "__sparkcep_pos__"


def _by_sorted_runs(plan: Plan, base, arrow_schema: pa.Schema, spark_schema, run: SparkRun):
    """The run strategy without PARTITION BY: one range sort cuts the rows into Spark
    partitions of about ``batch`` rows, and each partition is a batch. A small job collects
    each partition's row count, first rows and last rows; a batch task reads its partition
    with the last rows of the one before (what PREV looks back at) and the first rows of the
    ones after (the shared part), so no row is copied to other tasks. Only follow-up tasks
    that need more than the shared part read their rows through a range join."""
    from pyspark.sql import functions as F

    # Event logs usually stand in ORDER BY order already: checked per input partition (and
    # across their boundaries) in the job that collects the edges, and then not sorted.
    # Cached, so that every job sees the same partitions (a source's split may depend on
    # the plan reading it).
    as_read = base.withColumn(POS, F.monotonically_increasing_id()).persist()
    try:
        backend = _SortedBackend(plan, as_read, arrow_schema, spark_schema, run, check_order=True)
        if backend.in_order:
            run.reason += "; input already in ORDER BY order: not sorted"
            run.rows, run.partitions = backend.n, 1 if backend.n else 0
            stats = RunStats()
            result = run_partitions(plan, [backend.n], backend, run.batch, run.shared, stats,
                                    bounds={0: backend.bounds} if backend.bounds else {})
            run.stats.update(batches=stats.batches, passes=stats.passes, follow_up_tasks=stats.follow_up_starts,
                             matches=stats.matches, ranged=backend.ranged)
            weakref.finalize(result, _unpersist, as_read)
            return result
    except Exception:
        as_read.unpersist()
        raise
    as_read.unpersist()
    n = backend.n
    run.rows, run.partitions = n, 1 if n else 0
    cols = _sort_columns(plan)
    k = max(1, -(-n // run.batch))
    ordered = (base.repartitionByRange(k, *cols).sortWithinPartitions(*cols)
               .withColumn(POS, F.monotonically_increasing_id()).persist())
    try:
        backend = _SortedBackend(plan, ordered, arrow_schema, spark_schema, run)
        stats = RunStats()
        result = run_partitions(plan, [n], backend, run.batch, run.shared, stats, bounds={0: backend.bounds}
                                if backend.bounds else {})
        run.stats.update(batches=stats.batches, passes=stats.passes, follow_up_tasks=stats.follow_up_starts,
                         matches=stats.matches, ranged=backend.ranged)
    except Exception:
        ordered.unpersist()
        raise
    weakref.finalize(result, _unpersist, ordered)
    return result


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class _SortedBackend:
    """Batch tasks over the partitions of one range sort (see _by_sorted_runs)."""

    def __init__(self, plan: Plan, ordered, arrow_schema: pa.Schema, spark_schema, run: SparkRun,
                 check_order: bool = False):
        self.plan, self.ordered, self.arrow_schema, self.spark_schema = plan, ordered, arrow_schema, spark_schema
        order_by = plan.query.order_by
        self.batch = run.batch
        self.names = [f.name for f in arrow_schema]
        # Rows after a partition's end its tasks read in the first pass, and rows before it.
        self.ahead = max(run.shared, 1) + plan.lookahead
        self.behind = plan.lookbehind
        ahead, behind, names = self.ahead, self.behind, self.names

        def edges(batches):
            batches = list(batches)
            if not batches:
                return  # an empty partition
            table = pa.Table.from_batches(batches)
            if table.num_rows == 0:
                return
            pid = table.column(POS)[0].as_py()
            data = table.select(names)
            in_order = (not check_order) or _already_ordered(data, order_by)
            yield pa.RecordBatch.from_pydict({
                "pid": [pid], "n": [table.num_rows], "head": [_ipc(data.slice(0, max(ahead, 1)))],
                "tail": [_ipc(data.slice(max(table.num_rows - max(behind, 1), 0)))], "in_order": [in_order]})

        got = _collect_arrow(ordered.mapInArrow(
            edges, "pid long, n long, head binary, tail binary, in_order boolean")).to_pylist()
        got.sort(key=lambda r: r["pid"])
        self.in_order = all(r["in_order"] for r in got)
        self.pids = [r["pid"] for r in got]
        counts = [r["n"] for r in got]
        heads = [_from_ipc(r["head"]) for r in got]
        tails = [_from_ipc(r["tail"]) for r in got]
        if check_order and self.in_order:
            # Across partitions: each one's last row sorts before (or ties with) the next's first.
            self.in_order = all(_already_ordered(pa.concat_tables([tails[i].slice(tails[i].num_rows - 1),
                                                                   heads[i + 1].slice(0, 1)]), order_by)
                                for i in range(len(got) - 1))
        heads = [h.slice(0, ahead) for h in heads]
        tails = [t.slice(t.num_rows - min(behind, t.num_rows)) for t in tails]
        self.bounds: list[tuple[int, int]] = []
        lo = 0
        for c in counts:
            self.bounds.append((lo, lo + c))
            lo += c
        self.n = lo
        # Per batch: (rows before it, rows after it) as Arrow IPC, read from its neighbours.
        self.context: list[tuple[bytes, bytes]] = []
        for b in range(len(got)):
            before = _take_rows([tails[j] for j in range(b - 1, -1, -1)], behind, True, heads[b].schema)
            after = _take_rows([heads[j] for j in range(b + 1, len(got))], ahead, False, heads[b].schema)
            self.context.append((_ipc(before), _ipc(after)))
        self.ranged = 0  # tasks whose rows came through the range join

    def _local(self, t: Task) -> bool:
        """Whether the task's window lies within its partition and the neighbours' rows."""
        w = t.window(self.plan)
        lo, hi = self.bounds[t.batch]
        return w.start >= lo - self.behind and w.end <= hi + self.ahead and t.entry >= lo

    def _payload(self, tasks: list) -> dict:
        """pid -> (task, entry or None, context) for the tasks run inside their partition."""
        out = {}
        for item in tasks:
            t, entry = item if isinstance(item, tuple) else (item, None)
            out[self.pids[t.batch]] = (t, entry, self.context[t.batch], self.bounds[t.batch])
        return out

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        local = [t for t in tasks if self._local(t)]
        far = [t for t in tasks if not self._local(t)]
        texts: list[tuple[Task, str]] = []
        if local:
            payload = cloudpickle.dumps((self.plan, self._payload(local), self.names, self.n))

            def task(batches):
                with _errors_to_driver():
                    yield from _sorted_task(cloudpickle.loads(payload), batches, None)

            got = _collect_arrow(self._of(local).mapInArrow(task, f"{WIN} long, summary string"))
            by_batch = {t.batch: t for t in local}
            texts += [(by_batch[b], x) for b, x in zip(got.column(WIN).to_pylist(), got.column("summary").to_pylist(),
                                                       strict=True)]
        if far:
            self.ranged += len(far)
            texts += [(s.task, s) for s in self._ranged().summaries(far)]
        return [x if isinstance(x, Summary) else _summary_from_json(t, x) for t, x in texts]

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        spark = self.ordered.sparkSession
        local = [(t, e) for t, e in tasks if self._local(t)]
        far = [(t, e) for t, e in tasks if not self._local(t)]
        parts = []
        if local:
            payload = cloudpickle.dumps((self.plan, self._payload(local), self.names, self.n))
            out_arrow = _arrow_of(self.spark_schema)

            def task(batches):
                with _errors_to_driver():
                    yield from _sorted_task(cloudpickle.loads(payload), batches, out_arrow)

            parts.append(self._of(local).mapInArrow(task, self.spark_schema))
        if far:
            self.ranged += len(far)
            parts.append(self._ranged().outputs(far))
        if not parts:
            return spark.createDataFrame([], self.spark_schema)
        return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])

    def _of(self, tasks):
        """The sorted rows of the partitions these tasks run in."""
        from pyspark.sql import functions as F

        batches = sorted({(t[0] if isinstance(t, tuple) else t).batch for t in tasks})
        if len(batches) == len(self.pids):
            return self.ordered
        pos = F.col(POS)
        keep = F.lit(False)
        for b in batches:
            lo, hi = self.bounds[b]
            keep = keep | pos.between(self.pids[b], self.pids[b] + hi - lo - 1)
        return self.ordered.where(keep)

    def _ranged(self) -> _SparkBackend:
        """Tasks reaching past the neighbours' rows: windows of global rows by range join."""
        from pyspark.sql import functions as F

        pos = F.col(POS)
        shift = F.lit(0)
        for first, (lo, _) in zip(self.pids, self.bounds, strict=True):  # in increasing order
            shift = F.when(pos >= first, F.lit(lo - first)).otherwise(shift)
        with_gidx = self.ordered.withColumn(GIDX, pos + shift)
        return _SparkBackend(self.plan, with_gidx, [_Part(0, self.n)], self.arrow_schema, self.spark_schema,
                             self.batch)


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


def _sorted_task(payload, batches, out_arrow: pa.Schema | None):
    """One partition's batch task: a summary (``out_arrow`` None) or its output rows."""
    p, tasks, names, n = payload
    batches = list(batches)
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    if table.num_rows == 0:
        return
    pid = table.column(POS)[0].as_py()
    if pid not in tasks:
        return
    task, entry, (before_b, after_b), (lo, hi) = tasks[pid]
    own = table.select(names)
    before, after = _from_ipc(before_b), _from_ipc(after_b)
    rows = pa.concat_tables([before, own, after])
    first = lo - before.num_rows
    w = task.window(p)
    t = rows.slice(w.start - first, w.end - w.start)
    used = _used_columns(p)
    cols = LazyColumns([t.column(c) if i in used else None for i, c in enumerate(names)])
    order0 = p.query.order_by[0].index if p.query.order_by else None
    part = window_data(cols, order0, w, n)
    try:
        if out_arrow is None:
            summary = summarize(p, part, w, task, lambda r: r - w.start)
            yield pa.RecordBatch.from_pydict({WIN: [task.batch], "summary": [_summary_to_json(summary, p, t)]})
            return
        out = emit(p, part, w, task, entry, lambda r: r - w.start)
    except DataError as e:
        raise _keyed(e, p, t, getattr(e, "position", None) if e.row is None else e.row) from None
    rows_local = [g - w.start for g, _ in out]
    measures = [list(col) for col in zip(*[v for _, v in out], strict=True)] if out else [[] for _ in p.measures]
    result = output_table(p, t, rows_local, measures).cast(out_arrow)
    yield from result.to_batches()


def _unpersist(df) -> None:
    with contextlib.suppress(Exception):  # the session may be gone at exit
        df.unpersist()


class _SparkBackend:
    """Batch tasks as Spark jobs over the sorted rows (run_batches.Backend): each round of
    summaries is one job whose result (one small record per task) comes to the driver; the
    outputs are a lazy DataFrame computed by the tasks (measures and unmatched rows)."""

    def __init__(self, plan: Plan, ordered, parts: list[_Part], arrow_schema: pa.Schema, spark_schema, batch: int):
        self.plan, self.ordered, self.parts, self.batch = plan, ordered, parts, batch
        self.arrow_schema, self.spark_schema = arrow_schema, spark_schema
        used = sorted(_used_columns(plan))
        self.eval_cols = [arrow_schema.field(i).name for i in used]
        self.all_cols = [f.name for f in arrow_schema]

    def _windows(self, tasks) -> dict[int, tuple[int, Window]]:
        return {i: (t.part, t.window(self.plan)) for i, t in enumerate(tasks)}

    def summaries(self, tasks: list[Task]) -> list[Summary]:
        windows = self._windows(tasks)
        payload = cloudpickle.dumps((self.plan, tasks, windows, self.parts))

        def task(table: pa.Table) -> pa.Table:
            with _errors_to_driver():
                return _summary_task(cloudpickle.loads(payload), table)

        rows = _window_rows(self.ordered, self.parts, windows, self.batch, self.eval_cols)
        rows = rows.repartition(_slots(self.ordered, len(windows)), WIN)
        got = _collect_arrow(rows.groupBy(WIN).applyInArrow(task, f"{WIN} long, summary string"))
        out = []
        for wid, text in zip(got.column(WIN).to_pylist(), got.column("summary").to_pylist(), strict=True):
            out.append(_summary_from_json(tasks[wid], text))
        if len(out) != len(tasks):  # pragma: no cover - every window has rows
            raise SparkCepError(f"internal: {len(out)} summaries for {len(tasks)} batch tasks")
        return out

    def outputs(self, tasks: list[tuple[Task, Selection]]):
        spark = self.ordered.sparkSession
        if not tasks:
            return spark.createDataFrame([], self.spark_schema)
        windows = self._windows([t for t, _ in tasks])
        payload = cloudpickle.dumps((self.plan, tasks, windows, self.parts, self.arrow_schema))
        out_arrow = _arrow_of(self.spark_schema)

        def task(table: pa.Table) -> pa.Table:
            with _errors_to_driver():
                return _emit_task(cloudpickle.loads(payload), table, out_arrow)

        rows = _window_rows(self.ordered, self.parts, windows, self.batch, self.all_cols)
        rows = rows.repartition(_slots(self.ordered, len(windows)), WIN)
        return rows.groupBy(WIN).applyInArrow(task, self.spark_schema)


def _task_data(p: Plan, prts, table: pa.Table, pi: int, w: Window, columns: list[str] | None = None):
    """(window rows sorted, PartitionData) of one task's rows."""
    t = _table_window(table, w, w.end - w.start)
    names = p.query.columns if columns is None else columns
    used = _used_columns(p)
    cols = LazyColumns([t.column(n) if i in used else None for i, n in enumerate(names)])
    order0 = p.query.order_by[0].index if p.query.order_by else None
    return t, window_data(cols, order0, w, prts[pi].n)


def _summary_task(payload, table: pa.Table) -> pa.Table:
    p, tasks, wins, prts = payload
    wid = table.column(WIN)[0].as_py()
    pi, w = wins[wid]
    t, part = _task_data(p, prts, table, pi, w)
    try:
        summary = summarize(p, part, w, tasks[wid], lambda r: r - w.start)
    except DataError as e:
        raise _keyed(e, p, t, getattr(e, "position", None) if e.row is None else e.row) from None
    return pa.table({WIN: [wid], "summary": [_summary_to_json(summary, p, t)]})


def _summary_to_json(s: Summary, p: Plan, t: pa.Table) -> str:
    error = None
    if s.error is not None:
        at, e = s.error
        e = _keyed(e, p, t, e.row)
        error = {"at": at, "message": e.message, "column": e.column, "key": e.key}
    return json.dumps({"chain": s.chain, "count_after": s.count_after, "last_after": s.last_after,
                       "exit": s.exit, "stall": s.stall, "error": error}, default=str)


def _summary_from_json(task: Task, text: str) -> Summary:
    d = json.loads(text)
    error = None
    if d["error"] is not None:
        e = d["error"]
        error = (e["at"], DataError(e["message"], column=e["column"], key=e["key"]))
    return Summary(task, tuple(tuple(c) for c in d["chain"]), d["count_after"], d["last_after"], d["exit"],
                   d["stall"], error)


def _emit_task(payload, table: pa.Table, out_arrow: pa.Schema) -> pa.Table:
    p, tasks, wins, prts, in_schema = payload
    wid = table.column(WIN)[0].as_py()
    pi, w = wins[wid]
    task, entry = tasks[wid]
    t, part = _task_data(p, prts, table, pi, w, [f.name for f in in_schema])
    data = t.select([f.name for f in in_schema])
    try:
        out = emit(p, part, w, task, entry, lambda r: r - w.start)
    except DataError as e:
        raise _keyed(e, p, t, e.row) from None
    rows_local = [g - w.start for g, _ in out]
    measures = [list(col) for col in zip(*[v for _, v in out], strict=True)] if out else [[] for _ in p.measures]
    return output_table(p, data, rows_local, measures).cast(out_arrow)


def _used_columns(plan: Plan) -> set[int]:
    return referenced_columns(plan.query)


def _window_rows(
    ordered,
    parts: list[_Part],
    windows: dict[int, tuple[int, Window]],
    batch: int,
    columns: list[str],
):
    """The rows of every window, tagged with its id: rows fan out to the buckets (blocks of
    ``batch`` global indices) a window may start in, then join the windows on bucket."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    spark = ordered.sparkSession
    recs = []
    span = 1
    for wid, (pi, w) in windows.items():
        gs, ge = parts[pi].start + w.start, parts[pi].start + w.end
        span = max(span, ge - gs)
        recs.append((wid, gs // batch, gs, ge))
    schema = StructType(
        [
            StructField(WIN, LongType()),
            StructField(BUCKET, LongType()),
            StructField("__ws", LongType()),
            StructField("__we", LongType()),
        ]
    )
    wdf = spark.createDataFrame(recs, schema)
    g = F.col(GIDX)
    rows = ordered.select(*columns, ROW, GIDX).withColumn(
        BUCKET, F.explode(F.sequence(F.floor((g - F.lit(span)) / batch), F.floor(g / batch)))
    )
    joined = rows.join(F.broadcast(wdf), on=BUCKET).where(
        (g >= F.col("__ws")) & (g < F.col("__we"))
    )
    return joined.drop(BUCKET, "__ws", "__we")


def _slots(df, windows: int) -> int:
    """Shuffle partitions for window tasks: one per window up to a few per core (an explicit
    count, so adaptive execution does not merge the windows into one task)."""
    return max(1, min(windows, 4 * df.sparkSession.sparkContext.defaultParallelism))


def _table_window(table: pa.Table, w: Window, expected: int) -> pa.Table:
    t = table.take(pc.sort_indices(table, sort_keys=[(GIDX, "ascending")]))
    if t.num_rows != expected:  # pragma: no cover - a bug in window planning, never data
        raise SparkCepError(f"internal: window has {t.num_rows} rows, expected {expected}")
    return t
