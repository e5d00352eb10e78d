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

import pyarrow as pa

from sparkcep.errors import QueryError, SparkCepError

_KEY = "__sparkcep_key"


def stream(df, clause: str, *, watermark: str, mode: str = "sql", end_of_input: bool = False):
    """Matches of ``clause`` over the streaming DataFrame ``df``, as a streaming DataFrame
    (Append mode). ``watermark``: how late rows may arrive, e.g. "10 minutes" (Spark's
    withWatermark delay on the first ORDER BY column). Spark drops rows older than the
    watermark before they reach the matcher; any that still reach it are dropped too (counted
    in the key's state, logged): they would fall among rows already decided.
    ``end_of_input=True`` declares that the input ends (an ``availableNow`` run followed by
    ``flush``): only then may PATTERN use ``$``, which an unbounded stream cannot decide."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    from sparkcep.analysis.analyzer import find_in_pattern
    from sparkcep.language import ast
    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.batch import compile_for

    if not getattr(df, "isStreaming", False):
        raise SparkCepError("sparkcep.stream needs a streaming DataFrame (spark.readStream...); "
                            "use sparkcep.match_recognize for a batch DataFrame")
    if not isinstance(watermark, str) or not watermark.strip():
        raise SparkCepError("watermark must be a delay such as '10 minutes'")
    plan, arrow_schema, spark_schema = compile_for(df, clause, mode)
    IncrementalMatcher(plan, arrow_schema)  # refuses what a stream cannot run, before Spark starts
    q = plan.query
    end = find_in_pattern(q.pattern, (ast.PEnd,))
    if end is not None and not end_of_input:
        raise QueryError("NOT_SUPPORTED", "$ (after the partition's last row) cannot be decided on an unbounded "
                         "stream: pass end_of_input=True and flush the stream when its input ends "
                         "(sparkcep.spark.stream.flush, or sparkcep stream --end-of-input)", end.span, clause)
    time_col = q.order_by[0].column
    if not isinstance(df.schema[time_col].dataType, (TimestampType, TimestampNTZType)):
        raise QueryError("NOT_SUPPORTED", f"a stream's event time (the first ORDER BY column, {time_col}) must be "
                         f"a timestamp, not {df.schema[time_col].dataType.simpleString()}")
    keys = [k.column for k in q.partition_by]
    data = df.withWatermark(time_col, watermark)
    if not keys:
        data = data.withColumn(_KEY, F.lit(0))
        keys = [_KEY]
    processor = _MatchProcessor(clause, mode, arrow_schema.serialize().to_pybytes())
    return data.groupBy(*keys).transformWithStateInPandas(
        statefulProcessor=processor, outputStructType=spark_schema, outputMode="Append", timeMode="EventTime")


_FLUSHED = "_sparkcep_flushed"


def flush(spark, clause: str, checkpoint: str, *, mode: str = "sql"):
    """End of input for a stream that has stopped (e.g. after ``trigger(availableNow=True)``):
    the matches still waiting in its checkpoint's state, each key's buffered rows taken as
    the end of its partition (the last watermark moved to +∞), as a batch DataFrame to append
    to the stream's output. With it, stream output + flush equals ``match_recognize`` over
    every row the stream accepted. A checkpoint is flushed once (a marker file records it)."""
    import os

    from pyspark.sql.types import StructType

    from sparkcep.data import output_schema

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
    finish = _Finisher(clause, mode, arrow_schema.serialize().to_pybytes())
    result = blobs.mapInArrow(finish, from_arrow_schema(out_schema))
    with open(marker, "w") as f:
        f.write("flushed\n")
    return result


def _plan_for(clause: str, mode: str, arrow_schema: pa.Schema):
    """The plan of ``clause`` for rows of ``arrow_schema`` (on the driver and the workers)."""
    from sparkcep.analysis.analyzer import analyze
    from sparkcep.api import plan_query
    from sparkcep.data import schema_of
    from sparkcep.language.parser import parse

    return plan_query(analyze(parse(clause), schema_of(arrow_schema.empty_table()), mode))


class _Finisher:
    """Each key's saved state run to the end of its partition (on the workers)."""

    def __init__(self, clause: str, mode: str, schema: bytes):
        self.clause, self.mode, self.schema = clause, mode, schema

    def __call__(self, batches):
        from sparkcep.runtime.incremental import IncrementalMatcher, KeyState

        arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema))
        matcher = IncrementalMatcher(_plan_for(self.clause, self.mode, arrow_schema), arrow_schema)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                if blob is None:
                    continue
                out = matcher.finish(KeyState.from_bytes(blob))
                if out.num_rows:
                    yield from out.to_batches()


def _processor_base():
    from pyspark.sql.streaming import StatefulProcessor

    return StatefulProcessor


class _MatchProcessor(_processor_base()):
    """One key's incremental matcher inside Spark (built on the worker from the clause)."""

    def __init__(self, clause: str, mode: str, schema: bytes):
        self.clause, self.mode, self.schema_bytes = clause, mode, schema

    def init(self, handle) -> None:
        from pyspark.sql.types import BinaryType, StructField, StructType

        from sparkcep.runtime.incremental import IncrementalMatcher

        self.handle = handle
        self.state = handle.getValueState("key_state", StructType([StructField("blob", BinaryType(), True)]))
        self.arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema_bytes))
        plan = _plan_for(self.clause, self.mode, self.arrow_schema)
        self.matcher = IncrementalMatcher(plan, self.arrow_schema)
        self.time_type = self.arrow_schema.field(plan.query.order_by[0].index).type

    # ------------------------------------------------------------ state
    def _load(self):
        from sparkcep.runtime.incremental import KeyState

        if self.state.exists():
            return KeyState.from_bytes(bytes(self.state.get()[0]))
        return self.matcher.empty_state()

    def _save(self, st) -> None:
        self.state.update((st.to_bytes(),))

    def _watermark(self, timer_values) -> pa.Scalar:
        """Spark's current watermark as a value of the event-time column's type."""
        ms = timer_values.getCurrentWatermarkInMs()
        us = pa.scalar(max(ms, 0) * 1000, type=pa.timestamp("us", getattr(self.time_type, "tz", None)))
        return us.cast(self.time_type)

    def _step(self, st, timer_values) -> Iterator:
        import pyarrow.compute as pc

        from sparkcep.errors import as_sparkcep_error

        watermark = self._watermark(timer_values)
        try:
            out = self.matcher.advance(st, watermark.as_py())
        except Exception as e:  # noqa: BLE001 - typed for the driver
            raise as_sparkcep_error(e, self.clause) from None
        self._save(st)
        # Wake up when the watermark passes the first row still waiting.
        times = st.rows.column(self.matcher.time_index)
        waiting = pc.greater_equal(times, watermark)
        if pc.any(waiting).as_py():
            first = pc.min(pc.filter(times, waiting)).cast(pa.int64()).as_py()  # microseconds
            self.handle.registerTimer(first // 1000 + 1)
        if out.num_rows:
            yield out.to_pandas()

    # ------------------------------------------------------------ Spark's calls
    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        st = self._load()
        watermark = self._watermark(timerValues).as_py()
        for pdf in rows:  # add() keeps the query's input columns (not the synthetic key)
            fresh, late = self.matcher.split_late(pa.Table.from_pandas(pdf, preserve_index=False), watermark)
            if late.num_rows:
                self._late(key, late, watermark, st)
            self.matcher.add(st, fresh)
        yield from self._step(st, timerValues)

    def _late(self, key, late: pa.Table, watermark, st) -> None:
        import logging

        first = late.column(self.matcher.time_index)[0].as_py()
        st.late += late.num_rows
        logging.getLogger("sparkcep").warning("stream key %s: %d late row(s) dropped (first at %s, watermark %s)",
                                              key, late.num_rows, first, watermark)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        yield from self._step(self._load(), timerValues)

    def close(self) -> None:
        pass
