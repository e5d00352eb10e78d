"""MATCH_RECOGNIZE over a Spark Structured Streaming DataFrame.

PARTITION BY keys are Spark's state keys; the first ORDER BY column (a timestamp) is event
time, with Spark's watermark. Each key's ``runtime.incremental.KeyState`` lives in Spark's
state store as one binary value (Arrow rows and four integers, not pickle); new rows and
event-time timers run the incremental matcher, which emits a match once the watermark has
sealed every row that could change it — the batch engine's own selection, so the stream's
output is the batch output, in Append mode. A timer at the first row still waiting makes a
key progress when the watermark moves without new rows for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkcep.errors import QueryError, SparkCepError, guarded

_KEY = "__sparkcep_key"
_EVENT_TIME = "__sparkcep_event_time"
TIMEOUT = "_timeout"  # the column that carries timed-out partial matches (timeouts=True)
LATE_POLICIES = ("drop", "error")


@dataclass
class StreamMetrics:
    """Live figures of a stream, summed by Spark accumulators from the workers over this
    run of the query (a restarted query starts them again): rows accepted, late rows,
    matches and timeouts out, and, summed over the keys this run has touched, rows
    buffered in state, undecided start rows (partial matches that may still grow) and
    state bytes. Pass one to ``stream(..., metrics=)`` and read ``snapshot()``."""

    rows: Any
    late: Any
    matches: Any
    timeouts: Any
    buffered: Any
    undecided: Any
    state_bytes: Any
    run: str

    @staticmethod
    def create(spark) -> StreamMetrics:
        import uuid

        sc = spark.sparkContext
        return StreamMetrics(*(sc.accumulator(0) for _ in range(7)), run=uuid.uuid4().hex)

    def snapshot(self) -> dict[str, int]:
        return {name: getattr(self, name).value for name in
                ("rows", "late", "matches", "timeouts", "buffered", "undecided", "state_bytes")}


@guarded
def stream(df, clause: str, *, watermark: str | float, mode: str = "sql", end_of_input: bool = False,
           late: str = "drop", timeouts: bool = False, metrics: StreamMetrics | None = None,
           max_state_rows: int = 1_000_000):
    """Matches of ``clause`` over the streaming DataFrame ``df``, as a streaming DataFrame
    (Append mode). ``watermark``: how late rows may arrive — a delay such as "10 minutes"
    when event time (the first ORDER BY column) is a timestamp, a number of its units when
    it is a number. A row older than the watermark is late: ``late="drop"`` drops it (counted
    in ``metrics.late`` and logged), ``late="error"`` stops the query with a DataError naming
    it. ``timeouts=True`` adds the column ``_timeout``: null on matches, and on extra rows
    the partial matches WITHIN ended (see ``split_timeouts``). ``end_of_input=True`` declares
    that the input ends (an ``availableNow`` run followed by ``flush``): only then may
    PATTERN use ``$``, which an unbounded stream cannot decide. A key holding more than
    ``max_state_rows`` rows undecided stops the query with a DataError (add WITHIN or
    MAXLENGTH)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType, TimestampNTZType, TimestampType

    from sparkcep.analysis.patterns import find_in_pattern
    from sparkcep.language import ast
    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.frames import compile_for

    if not getattr(df, "isStreaming", False):
        raise SparkCepError("sparkcep.stream needs a streaming DataFrame (spark.readStream...); "
                            "use sparkcep.match_recognize for a batch DataFrame")
    if late not in LATE_POLICIES:
        raise SparkCepError(f"late must be one of {', '.join(LATE_POLICIES)}, not {late!r}")
    plan, arrow_schema, spark_schema = compile_for(df, clause, mode)
    incremental = IncrementalMatcher(plan, arrow_schema)  # refuses what a stream cannot run, before Spark starts
    q = plan.query
    end = find_in_pattern(q.pattern, (ast.PEnd,))
    if end is not None and not end_of_input:
        raise QueryError("NOT_SUPPORTED", "$ (after the partition's last row) cannot be decided on an unbounded "
                         "stream: pass end_of_input=True and flush the stream when its input ends "
                         "(sparkcep.spark.stream.flush, or sparkcep stream --end-of-input)", end.span, clause)
    if timeouts and q.within is None:
        raise QueryError("NOT_SUPPORTED", "timeouts=True reports partial matches that WITHIN ended; this query has "
                         "no WITHIN")
    time_col = q.order_by[0].column
    time_type = df.schema[time_col].dataType
    if isinstance(time_type, (TimestampType, TimestampNTZType)):
        if not isinstance(watermark, str) or not watermark.strip():
            raise SparkCepError("watermark must be a delay such as '10 minutes' (event time is a timestamp)")
        delay = watermark
        # Spark's event time is the column itself (a TIMESTAMP: a zone-less one is read in
        # the session's zone, UTC); the copy below only carries the watermark.
        event_time = F.col(time_col).cast("timestamp")
    elif isinstance(time_type, NumericType) and type(time_type).__name__ != "DecimalType":
        try:
            units = float(watermark)
        except (TypeError, ValueError):
            raise SparkCepError(f"watermark must be a number of {time_col}'s units (event time is a number), "
                                f"not {watermark!r}") from None
        if not units >= 0:
            raise SparkCepError("watermark must not be negative")
        # Spark's watermark runs on timestamps: one unit of the column is one second.
        delay = f"{units!r} seconds"
        event_time = F.timestamp_seconds(F.col(time_col))
    else:
        raise QueryError("NOT_SUPPORTED", f"a stream's event time (the first ORDER BY column, {time_col}) must be "
                         f"a timestamp or a number, not {time_type.simpleString()}")
    keys = [k.column for k in q.partition_by]
    # Spark would drop rows older than the watermark before the matcher sees them, silently;
    # the watermark is set on a copy of event time that is then replaced (so no operator
    # filters by it) and the matcher counts and drops late rows itself, or stops on them.
    data = (df.withColumn(_EVENT_TIME, event_time).withWatermark(_EVENT_TIME, delay)
            .withColumn(_EVENT_TIME, F.col(_EVENT_TIME) + F.expr("INTERVAL 0 SECONDS")))
    if not keys:
        data = data.withColumn(_KEY, F.lit(0))
        keys = [_KEY]
    if timeouts:
        spark_schema = _with_timeouts(spark_schema, incremental)
    if not isinstance(max_state_rows, int) or max_state_rows < 1:
        raise SparkCepError("max_state_rows must be a positive number of rows")
    processor = _MatchProcessor(clause, mode, arrow_schema.serialize().to_pybytes(), late, timeouts, metrics,
                                max_state_rows)
    return data.groupBy(*keys).transformWithStateInPandas(
        statefulProcessor=processor, outputStructType=spark_schema, outputMode="Append", timeMode="EventTime")


def _with_timeouts(spark_schema, incremental):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    struct = from_arrow_type(pa.struct(list(incremental.timeout_schema())))
    return StructType(list(spark_schema.fields) + [StructField(TIMEOUT, struct, True)])


def split_timeouts(df):
    """(matches, timeouts) of a ``stream(..., timeouts=True)`` output (a micro-batch in
    ``foreachBatch``, or the streaming DataFrame itself): the matches without the
    ``_timeout`` column; the timeouts as PARTITION BY columns, start_time, variables, rows
    and expired_at."""
    from pyspark.sql import functions as F

    if TIMEOUT not in df.columns:
        raise SparkCepError("this DataFrame has no timeouts: make it with sparkcep.stream(..., timeouts=True)")
    matches = df.where(F.col(TIMEOUT).isNull()).drop(TIMEOUT)
    timeouts = df.where(F.col(TIMEOUT).isNotNull()).select(f"{TIMEOUT}.*")
    return matches, timeouts


_FLUSHED = "_sparkcep_flushed"


def flush(spark, clause: str, checkpoint: str, *, mode: str = "sql", timeouts: bool = False):
    """End of input for a stream that has stopped (e.g. after ``trigger(availableNow=True)``):
    the matches still waiting in its checkpoint's state, each key's buffered rows taken as
    the end of its partition (the last watermark moved to +∞), as a batch DataFrame to append
    to the stream's output. With it, stream output + flush equals ``match_recognize`` over
    every row the stream accepted. A checkpoint is flushed once (a marker file records it)."""
    import os

    from pyspark.sql.types import StructType

    from sparkcep.data.output import output_schema

    marker = os.path.join(checkpoint, _FLUSHED)
    if not os.path.isdir(checkpoint):
        raise SparkCepError(f"no stream checkpoint at {checkpoint}")
    if os.path.exists(marker):
        raise SparkCepError(f"the stream at {checkpoint} was flushed already: its end of input is behind it")
    states = spark.read.format("statestore").option("stateVarName", "key_state").load(checkpoint)
    blobs = states.select("value.blob")
    first = blobs.limit(1).collect()
    if not first:
        return spark.createDataFrame([], StructType([]))
    from sparkcep.runtime.incremental import KeyState

    arrow_schema = KeyState.from_bytes(bytes(first[0][0])).rows.schema
    plan = _plan_for(clause, mode, arrow_schema)
    from pyspark.sql.pandas.types import from_arrow_schema

    out_schema = output_schema(plan.query, arrow_schema)
    if timeouts:
        from sparkcep.runtime.incremental import IncrementalMatcher

        timeout_fields = list(IncrementalMatcher(plan, arrow_schema).timeout_schema())
        out_schema = out_schema.append(pa.field(TIMEOUT, pa.struct(timeout_fields)))
    finish = _Finisher(clause, mode, arrow_schema.serialize().to_pybytes(), timeouts)
    result = blobs.mapInArrow(finish, from_arrow_schema(out_schema))
    with open(marker, "w") as f:
        f.write("flushed\n")
    return result


def _plan_for(clause: str, mode: str, arrow_schema: pa.Schema):
    """The plan of ``clause`` for rows of ``arrow_schema`` (on the driver and the workers)."""
    from sparkcep.analysis.analyzer import analyze
    from sparkcep.data.ingest import schema_of
    from sparkcep.language.parser import parse
    from sparkcep.query import plan_query

    return plan_query(analyze(parse(clause), schema_of(arrow_schema.empty_table()), mode))


class _Finisher:
    """Each key's saved state run to the end of its partition (on the workers)."""

    def __init__(self, clause: str, mode: str, schema: bytes, timeouts: bool = False):
        self.clause, self.mode, self.schema, self.timeouts = clause, mode, schema, timeouts

    def __call__(self, batches):
        from sparkcep.runtime.incremental import IncrementalMatcher, KeyState
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema))
            matcher = IncrementalMatcher(_plan_for(self.clause, self.mode, arrow_schema), arrow_schema)
            for batch in batches:
                for blob in batch.column(0).to_pylist():
                    if blob is None:
                        continue
                    out, timeouts = matcher.step(KeyState.from_bytes(blob), final=True)
                    table = _output(matcher, out, timeouts) if self.timeouts else out
                    if table.num_rows:
                        yield from table.to_batches()


def _output(matcher, out: pa.Table, timeouts: pa.Table) -> pa.Table:
    """Matches with a null ``_timeout``, then the timed-out partial matches: their
    PARTITION BY columns and ``_timeout``, every other column null."""
    struct_type = pa.struct(list(timeouts.schema))
    keys = {k.column for k in matcher.plan.query.partition_by}
    matches = out.append_column(TIMEOUT, pa.nulls(out.num_rows, struct_type))
    if not timeouts.num_rows:
        return matches
    cols = [timeouts.column(f.name) if f.name in keys else pa.nulls(timeouts.num_rows, f.type) for f in out.schema]
    struct = pa.StructArray.from_arrays([c.combine_chunks() for c in timeouts.columns], fields=list(timeouts.schema))
    late = pa.Table.from_arrays(cols + [struct], schema=matches.schema)
    return pa.concat_tables([matches, late])


def _processor_base():
    from pyspark.sql.streaming import StatefulProcessor

    return StatefulProcessor


class _MatchProcessor(_processor_base()):
    """One key's incremental matcher inside Spark (built on the worker from the clause)."""

    def __init__(self, clause: str, mode: str, schema: bytes, late: str = "drop", timeouts: bool = False,
                 metrics: StreamMetrics | None = None, max_rows: int = 1_000_000):
        self.clause, self.mode, self.schema_bytes = clause, mode, schema
        self.late_policy, self.timeouts, self.metrics, self.max_rows = late, timeouts, metrics, max_rows

    def init(self, handle) -> None:
        from pyspark.sql.types import BinaryType, StructField, StructType

        from sparkcep.runtime.incremental import IncrementalMatcher

        self.handle = handle
        self.state = handle.getValueState("key_state", StructType([StructField("blob", BinaryType(), True)]))
        self.arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema_bytes))
        plan = _plan_for(self.clause, self.mode, self.arrow_schema)
        self.matcher = IncrementalMatcher(plan, self.arrow_schema, max_rows=self.max_rows)
        self.time_column = plan.query.order_by[0].column
        self.time_type = self.arrow_schema.field(plan.query.order_by[0].index).type

    # ------------------------------------------------------------ state
    def _load(self):
        from sparkcep.runtime.incremental import KeyState

        got = self.state.get()  # None when the key is new (one call, not exists() and get())
        if got is not None:
            return KeyState.from_bytes(bytes(got[0]))
        return self.matcher.empty_state()

    def _save(self, st) -> None:
        m = self.metrics
        if m is not None:
            # Gauges summed over keys as differences from what this key last reported (in
            # this run: a restarted query's keys report in full when first touched).
            now = [st.rows.num_rows, max(st.rows.num_rows - (st.selection.pos - st.base), 0), st.rows.nbytes]
            before = st.reported if st.run == m.run else [0, 0, 0]
            m.buffered.add(now[0] - before[0])
            m.undecided.add(now[1] - before[1])
            m.state_bytes.add(now[2] - before[2])
            st.reported, st.run = now, m.run
        self.state.update((st.to_bytes(),))

    def _watermark(self, timer_values):
        """Spark's current watermark as a value of the event-time column (None before the
        first one): a timestamp, or a number (Spark's seconds are the column's units)."""
        ms = timer_values.getCurrentWatermarkInMs()
        if ms <= 0:
            return None
        if pa.types.is_timestamp(self.time_type):
            us = pa.scalar(ms * 1000, type=pa.timestamp("us", self.time_type.tz))
            return us.cast(self.time_type).as_py()
        if pa.types.is_integer(self.time_type):
            return -(-ms // 1000)  # rows below a fractional watermark: below its ceiling
        return ms / 1000

    def _timer_ms(self, t) -> int:
        """The watermark (ms) at which a row of event time ``t`` is sealed."""
        if pa.types.is_timestamp(self.time_type):
            return pa.scalar(t, type=self.time_type).cast(pa.int64()).as_py() * 1000 // _per_second(self.time_type) + 1
        import math

        return math.floor(t * 1000) + 1

    def _step(self, key, st, timer_values, from_timer: bool = False) -> Iterator:
        import pyarrow.compute as pc

        from sparkcep.errors import DataError

        watermark = self._watermark(timer_values)
        try:
            out, timeouts = self.matcher.step(st, watermark)
        except DataError as e:  # a stream's row has no position: name its key
            raise DataError(e.message, column=e.column, key=self._key(key)) from None
        # Wake up when the watermark passes the first row still waiting: one timer per key
        # (the key's state remembers it), moved only when that row changes. A key with new
        # rows has just stepped, so an older timer that would fire now is deleted.
        times = st.rows.column(self.matcher.time_index)
        waiting = times if watermark is None else pc.filter(times, pc.greater_equal(times, pa.scalar(
            watermark, type=times.type)))
        timer = self._timer_ms(pc.min(waiting).as_py()) if len(waiting) else 0
        within = self.matcher.plan.query.within
        first = st.selection.pos - st.base
        if within is not None and 0 <= first < st.rows.num_rows:
            # A quiet key's partial match must still end (and time out) once the watermark
            # passes its deadline.
            deadline = self._timer_ms(times[first].as_py() + within)
            timer = min(timer, deadline) if timer else deadline
        if timer != st.timer:
            if st.timer and st.timer > (timer_values.getCurrentWatermarkInMs() if from_timer else 0):
                self.handle.deleteTimer(st.timer)
            if timer:
                self.handle.registerTimer(timer)
            st.timer = timer
        self._save(st)
        if self.metrics is not None:
            self.metrics.matches.add(out.num_rows)
            self.metrics.timeouts.add(timeouts.num_rows)
        table = _output(self.matcher, out, timeouts) if self.timeouts else out
        if table.num_rows:
            yield table.to_pandas()

    # ------------------------------------------------------------ Spark's calls
    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            st = self._load()
            watermark = self._watermark(timerValues)
            for pdf in rows:  # the query's input columns (not the synthetic key and event time)
                table = pa.Table.from_pandas(pdf, preserve_index=False).select(self.arrow_schema.names)
                fresh, late = self.matcher.split_late(table, watermark)
                if late.num_rows:
                    self._late(key, late, watermark, st)
                self.matcher.add(st, fresh)
                if self.metrics is not None:
                    self.metrics.rows.add(fresh.num_rows)
            yield from self._step(key, st, timerValues)

    def _late(self, key, late: pa.Table, watermark, st) -> None:
        import logging

        from sparkcep.errors import DataError

        first = late.column(self.matcher.time_index)[0].as_py()
        if self.late_policy == "error":
            raise DataError(f"a row arrived after the watermark had passed it: {self.time_column} = {first}, "
                            f"watermark {watermark} (late='error'; with late='drop' such rows are dropped and "
                            "counted)", column=self.time_column,
                            key={**self._key(key), self.time_column: first})
        st.late += late.num_rows
        if self.metrics is not None:
            self.metrics.late.add(late.num_rows)
        logging.getLogger("sparkcep").warning("stream key %s: %d late row(s) dropped (first at %s, watermark %s)",
                                              key, late.num_rows, first, watermark)

    def _key(self, key) -> dict:
        names = [k.column for k in self.matcher.plan.query.partition_by]
        return dict(zip(names, key, strict=False))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            yield from self._step(key, self._load(), timerValues, from_timer=True)

    def close(self) -> None:
        pass


def _per_second(t: pa.TimestampType) -> int:
    return {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit]
