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
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle

from sparkcep.analysis.analyzer import analyze
from sparkcep.api import run_plan
from sparkcep.compile.plan import Plan
from sparkcep.data import LazyColumns, output_schema, output_table, referenced_columns, schema_of
from sparkcep.errors import DataError, InternalError, QueryError, SparkCepError, internal_errors
from sparkcep.language.parser import parse
from sparkcep.parallel.run_batches import (
    Window,
    default_shared,
    find_candidates,
    make_window,
    measure_window,
    plan_batches,
    window_data,
)
from sparkcep.runtime.engine import select_matches
from sparkcep.runtime.vm import UNRESOLVED, Match

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
    spark = base.sparkSession
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
        batch, shared = run.batch, run.shared
        windows: dict[int, tuple[int, Window]] = {}  # id -> (part index, window)
        for pi, p in enumerate(parts):
            for b, (lo, hi) in enumerate(plan_batches(p.n, batch)):
                windows[len(windows)] = (pi, make_window(plan, p.n, b, lo, hi, hi + shared))
        run.stats["batches"] = len(windows)

        used = sorted(_used_columns(plan))
        eval_cols = [arrow_schema.field(i).name for i in used]
        found: list[dict[int, Any]] = [{} for _ in parts]
        start_rows: list[dict[int, int]] = [{} for _ in parts]
        reach = max(1, shared)
        passes = 0
        follow = 0
        while windows:
            passes += 1
            cands = _candidates(plan, ordered, parts, windows, eval_cols, batch)
            unresolved: dict[tuple[int, int], list[int]] = {}
            for rec in cands.to_pylist():
                pi, s = rec["part"], rec["start"]
                if rec["status"] == 1:
                    unresolved.setdefault((pi, s // batch), []).append(s)
                    continue
                start_rows[pi][s] = rec["row"]
                m = Match(
                    s, rec["end"], tuple(rec["labels"]), tuple(bool(x) for x in rec["excluded"])
                )
                if rec["rank"] >= 0:
                    found[pi].setdefault(s, []).append((rec["rank"], m))
                else:
                    found[pi][s] = m
            reach *= 2
            windows = {}
            for (pi, b), starts in sorted(unresolved.items()):
                lo, hi = plan_batches(parts[pi].n, batch)[b]
                starts.sort()
                follow += len(starts)
                windows[len(windows)] = (
                    pi,
                    make_window(plan, parts[pi].n, b, starts[0], hi, hi + reach, tuple(starts)),
                )
        run.stats.update(passes=passes, follow_up_starts=follow)

        all_matches = q.skip_mode == "ALL_MATCHES" and q.mode != "matchregex"
        items_rows = []
        mwindows: dict[int, tuple[int, Window]] = {}
        selected = 0
        for pi, p in enumerate(parts):
            table = found[pi]
            if all_matches:
                table = {s: [m for _, m in sorted(v)] for s, v in table.items()}
            empty = [] if all_matches else None
            rows = start_rows[pi]
            per_batch: dict[int, list[tuple]] = {}
            for item in select_matches(
                q, p.n, lambda s, t=table, e=empty: t.get(s, e), lambda r, rows=rows: rows.get(r, r)
            ):
                row = item[1] if item[0] == "unmatched" else item[1].start
                per_batch.setdefault(row // batch, []).append(item)
            for b, its in sorted(per_batch.items()):
                lo, hi = plan_batches(p.n, batch)[b]
                end = max([hi] + [it[1].end for it in its if it[0] == "match"])
                wid = len(mwindows)
                mwindows[wid] = (pi, make_window(plan, p.n, b, lo, hi, end))
                for it in its:
                    if it[0] == "unmatched":
                        items_rows.append((wid, 1, it[1], it[1], b"", b"", 0))
                    else:
                        m = it[1]
                        selected += 1
                        items_rows.append(
                            (wid, 0, m.start, m.end, bytes(m.labels), bytes(m.excluded), it[2])
                        )
        run.stats["matches"] = selected
        if not mwindows:
            ordered.unpersist()
            return spark.createDataFrame([], spark_schema)
        return _measures(
            plan, spark, ordered, parts, mwindows, items_rows, arrow_schema, spark_schema, batch
        )
    except Exception:
        ordered.unpersist()
        raise


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


def _candidates(plan: Plan, ordered, parts, windows, eval_cols: list[str], batch: int) -> pa.Table:
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        StructField,
        StructType,
    )

    payload = cloudpickle.dumps((plan, windows, parts))
    out_schema = StructType(
        [
            StructField("part", IntegerType()),
            StructField("start", LongType()),
            StructField("end", LongType()),
            StructField("labels", ArrayType(IntegerType())),
            StructField("excluded", ArrayType(IntegerType())),
            StructField("status", IntegerType()),
            StructField("rank", IntegerType()),
            StructField("row", LongType()),
        ]
    )
    arrow_out = _arrow_of(out_schema)

    def task(table: pa.Table) -> pa.Table:
        with _errors_to_driver():
            return _candidate_task(cloudpickle.loads(payload), table, arrow_out)

    rows = _window_rows(ordered, parts, windows, batch, eval_cols)
    rows = rows.repartition(_slots(ordered, len(windows)), WIN)
    return _collect_arrow(rows.groupBy(WIN).applyInArrow(task, out_schema))


def _candidate_task(payload, table: pa.Table, arrow_out: pa.Schema) -> pa.Table:
    p, wins, prts = payload
    wid = table.column(WIN)[0].as_py()
    pi, w = wins[wid]
    t = _table_window(table, w, w.end - w.start)
    used = _used_columns(p)
    cols = LazyColumns([t.column(n) if i in used else None for i, n in enumerate(p.query.columns)])
    order0 = p.query.order_by[0].index if p.query.order_by else None
    part = window_data(cols, order0, w, prts[pi].n)
    row_ids = t.column(ROW).to_pylist()
    recs = {k: [] for k in ("part", "start", "end", "labels", "excluded", "status", "rank", "row")}

    def add(s, m, status, rank):
        recs["part"].append(pi)
        recs["start"].append(s)
        recs["end"].append(m.end if m is not None else s)
        recs["labels"].append(list(m.labels) if m is not None else [])
        recs["excluded"].append([int(x) for x in m.excluded] if m is not None else [])
        recs["status"].append(status)
        recs["rank"].append(rank)
        recs["row"].append(row_ids[s - w.start])

    try:
        found = find_candidates(p, part, w)
    except DataError as e:
        raise _keyed(e, p, t, getattr(e, "position", None) if e.row is None else e.row) from None
    for s, r in found:
        if r is UNRESOLVED:
            add(s, None, 1, -1)
        elif isinstance(r, list):
            for rank, m in enumerate(r):
                add(s, m, 0, rank)
        else:
            add(s, r, 0, -1)
    return pa.table(recs, schema=arrow_out)


def _measures(
    plan: Plan,
    spark,
    ordered,
    parts,
    mwindows,
    items_rows,
    arrow_schema: pa.Schema,
    spark_schema,
    batch: int,
):
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

    items_schema = StructType(
        [
            StructField(WIN, LongType()),
            StructField("kind", IntegerType()),
            StructField("start", LongType()),
            StructField("end", LongType()),
            StructField("labels", BinaryType()),
            StructField("excluded", BinaryType()),
            StructField("number", LongType()),
        ]
    )
    items_df = spark.createDataFrame(items_rows, items_schema)
    all_cols = [f.name for f in arrow_schema]
    rows = _window_rows(ordered, parts, mwindows, batch, all_cols)
    payload = cloudpickle.dumps((plan, mwindows, parts, arrow_schema))
    out_arrow = _arrow_of(spark_schema)

    def task(rows_t: pa.Table, items_t: pa.Table) -> pa.Table:
        with _errors_to_driver():
            return _measure_task(cloudpickle.loads(payload), rows_t, items_t, out_arrow)

    slots = _slots(ordered, len(mwindows))
    grouped_rows = rows.repartition(slots, WIN).groupBy(WIN)
    grouped_items = items_df.repartition(slots, WIN).groupBy(WIN)
    return grouped_rows.cogroup(grouped_items).applyInArrow(task, spark_schema)


def _measure_task(payload, rows_t: pa.Table, items_t: pa.Table, out_arrow: pa.Schema) -> pa.Table:
    p, wins, prts, in_schema = payload
    if rows_t.num_rows == 0 or items_t.num_rows == 0:
        return out_arrow.empty_table()
    wid = items_t.column(WIN)[0].as_py()
    pi, w = wins[wid]
    t = _table_window(rows_t, w, w.end - w.start)
    data = t.select([f.name for f in in_schema])
    used = _used_columns(p)
    cols = LazyColumns([data.column(i) if i in used else None for i in range(data.num_columns)])
    order0 = p.query.order_by[0].index if p.query.order_by else None
    part = window_data(cols, order0, w, prts[pi].n)
    items = []
    for r in items_t.to_pylist():
        if r["kind"] == 1:
            items.append(("unmatched", r["start"]))
        else:
            m = Match(
                r["start"], r["end"], tuple(r["labels"]), tuple(bool(x) for x in r["excluded"])
            )
            items.append(("match", m, r["number"]))
    try:
        out = measure_window(p, part, w, items, lambda g: g - w.start)
    except DataError as e:
        raise _keyed(e, p, t, e.row) from None
    rows_local = [g - w.start for g, _ in out]
    measures = (
        [list(col) for col in zip(*[v for _, v in out], strict=True)]
        if out
        else [[] for _ in p.measures]
    )
    return output_table(p, data, rows_local, measures).cast(out_arrow)
