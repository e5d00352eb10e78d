"""MATCH_RECOGNIZE over a Spark Structured Streaming DataFrame.

The PARTITION BY keys hash into a fixed number of buckets (``spark.buckets``), and Spark's
applyInPandasWithState keeps one state value per bucket: each call gets every new row of a
bucket's keys at once, as pandas through Arrow. The bucket's keys match together
(``runtime.keyed``): their buffered rows are one Arrow table with a few integers per key (as
bytes, never pickle), and a plain query decides every key in one kernel call. The first
ORDER BY column is event time, with Spark's watermark; a match is emitted once the
watermark has sealed every row that could change it — the batch engine's own selection, so
the stream's output is the batch output, in Append mode. Each key keeps a timer (the first
row still waiting, or a WITHIN deadline); the bucket's event-time timeout is the earliest of
them, so a key makes progress when the watermark moves without new rows for it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from sparkcep.errors import OptionError, QueryError, SparkCepError, guarded
from sparkcep.spark.buckets import MAX_BUCKETS, checkpoint_buckets, session_buckets

BUCKET = "__sparkcep_bucket"
_EVENT_TIME = "__sparkcep_event_time"
_SHIFT_DAYS = 36_525  # see stream(): how far the watermark's column runs ahead of event time
TIMEOUT = "_timeout"  # the column that carries timed-out partial matches (timeouts=True)
LATE_POLICIES = ("drop", "error")


@dataclass
class StreamMetrics:
    """Live figures of a stream, summed from the workers over this run of the query (a
    restarted query starts them again): rows accepted, late rows, matches and timeouts out,
    and, summed over the keys this run has touched, rows buffered in state, undecided start
    rows (partial matches that may still grow) and state bytes; for a stream of rules, the
    rules its latest micro-batch skipped (files that do not parse or analyze, rules stopped
    by the data). Pass one to
    ``stream(..., metrics=)`` and read ``snapshot()``.

    On a classic session Spark accumulators sum them as the tasks finish. A Spark Connect
    session has no accumulators: each bucket's call reports its figures in a row the stream
    observes (``DataFrame.observe``) and drops, and the figures arrive with each
    micro-batch's progress event (a listener this object registers on the session, for the
    session's life), so ``snapshot()`` may trail the running micro-batch by one;
    ``run_to_end`` also reads the query's recent progress when it ends (reports still on
    their way). The stream's columns are then all nullable."""

    rows: Any
    late: Any
    matches: Any
    timeouts: Any
    buffered: Any
    undecided: Any
    state_bytes: Any
    rules_skipped: Any  # a stream of rules': the rules its latest micro-batch skipped
    run: str
    observed: str | None = None  # the observation's name (Connect)
    # (run, batch) of the progress reports counted (Connect: the listener and run_to_end
    # may both see one)
    seen: set = field(default_factory=set, repr=False, compare=False)

    @staticmethod
    def create(spark) -> StreamMetrics:
        import uuid

        from sparkcep.spark.session import is_connect

        run = uuid.uuid4().hex
        if is_connect(spark):
            m = StreamMetrics(*(_Count() for _ in METRICS), run=run, observed=f"sparkcep_metrics_{run}")
            spark.streams.addListener(_observer(m))
            return m
        sc = spark.sparkContext
        return StreamMetrics(*(sc.accumulator(0) for _ in METRICS), run=run)

    def snapshot(self) -> dict[str, int]:
        return {name: getattr(self, name).value for name in METRICS}

    def absorb(self, progress) -> None:
        """Add the figures of micro-batches' progress reports (StreamingQueryProgress) not
        counted yet (Connect; each report counts once, by run and batch)."""
        if self.observed is None:
            return
        with _ABSORBING:  # (the listener's thread and run_to_end's may absorb one report at once)
            for p in progress:
                got = (p["observedMetrics"] or {}).get(self.observed)
                key = (p["runId"], p["batchId"])
                if got is None or key in self.seen:
                    continue
                self.seen.add(key)
                figures = _figures(got)
                for name in METRICS:
                    getattr(self, name).add(figures.get(name) or 0)


METRICS = ("rows", "late", "matches", "timeouts", "buffered", "undecided", "state_bytes", "rules_skipped")
_ABSORBING = threading.Lock()


def _figures(row) -> dict:
    """An observed row's values by name: a progress report read from JSON (Connect's
    recentProgress) may hold the row as its values and schema."""
    d = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(d) == {"values", "schema"}:
        return dict(zip((f["name"] for f in d["schema"]["fields"]), d["values"], strict=True))
    return d


class _Count:
    """One figure where the session has no accumulator (a worker's call, or Connect's client)."""

    def __init__(self):
        self.value = 0

    def add(self, n) -> None:
        self.value += int(n)


def _observer(metrics: StreamMetrics):
    """A StreamingQueryListener that adds each micro-batch's observed figures to ``metrics``."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Observer(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            metrics.absorb([event.progress])

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return Observer()


@guarded
def stream(df, clause: str | None = None, *, watermark: str | float, mode: str = "sql", end_of_input: bool = False,
           late: str = "drop", timeouts: bool = False, metrics: StreamMetrics | None = None,
           max_state_rows: int = 1_000_000, buckets: int | None = None, checkpoint: str | None = None,
           rules=None, event_time: str | None = None, partition_by=()):
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
    MAXLENGTH). ``buckets`` (1 to 38): how many state entries the PARTITION BY keys hash
    into (each Spark call runs one bucket's keys together); by default one per shuffle
    partition when ``spark.sql.shuffle.partitions`` is a power of two up to 32, else 32. The
    count is fixed for the life of a checkpoint and Spark refuses a restart with another;
    ``checkpoint``: the folder the query will be started with (``checkpointLocation``), if
    any: a restart then takes the count stored there, whatever the session's settings, and
    a checkpoint of an incompatible earlier version is refused with what to do.

    ``rules`` instead of ``clause``: a folder of rules read again at each micro-batch (see
    sparkcep.spark.rule_stream), with ``event_time`` (the column every rule orders by first),
    ``partition_by`` (the stream's keys: every rule partitions by them, and may add others)
    and ``checkpoint`` required; rows ``(rule, match)``; ``end_of_input`` and ``metrics`` as
    for a clause (metrics: classic sessions only, for now)."""
    if rules is not None or clause is None:
        if clause is not None:
            raise OptionError("give a clause or rules=, not both")
        if rules is None:
            raise OptionError("give the clause to match (or rules=, a folder of rules)")
        if timeouts:
            raise OptionError("a stream of rules reports no timeouts (yet): run a rule that needs them as its own "
                              "stream")
        if metrics is not None and not isinstance(metrics, StreamMetrics):
            raise OptionError(f"metrics must be a sparkcep.StreamMetrics (its counters are filled in), not {metrics!r}")
        if event_time is None:
            raise OptionError("a stream of rules needs event_time=, the column every rule orders by first")
        from sparkcep.spark.rule_stream import stream_rules

        return stream_rules(df, rules, watermark=watermark, event_time=event_time, partition_by=partition_by,
                            checkpoint=checkpoint, mode=mode, late=late, max_state_rows=max_state_rows,
                            buckets=buckets, end_of_input=end_of_input, metrics=metrics)
    if event_time is not None or partition_by:
        raise OptionError("event_time and partition_by belong to a stream of rules (rules=); a clause says its own")
    from pyspark.sql.streaming.state import GroupStateTimeout

    from sparkcep.analysis.patterns import find_in_pattern
    from sparkcep.language import ast
    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.frames import compile_reading
    from sparkcep.spark.worker_python import check_workers

    if not getattr(df, "isStreaming", False):
        raise OptionError("sparkcep.stream needs a streaming DataFrame (spark.readStream...); "
                          "use sparkcep.match_recognize for a batch DataFrame")
    if late not in LATE_POLICIES:
        raise OptionError(f"late must be one of {', '.join(LATE_POLICIES)}, not {late!r}")
    check_workers(df.sparkSession)
    df, plan, arrow_schema, spark_schema = compile_reading(df, clause, mode)
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
    if metrics is not None and not isinstance(metrics, StreamMetrics):
        raise OptionError(f"metrics must be a sparkcep.StreamMetrics (its counters are filled in), not {metrics!r}")
    keys = [k.column for k in q.partition_by]
    data, wire, delay_millis, buckets = prepared(df, q.order_by[0].column, watermark, keys, buckets, checkpoint,
                                                 arrow_schema)
    if timeouts:
        spark_schema = _with_timeouts(spark_schema, incremental)
    if not isinstance(max_state_rows, int) or max_state_rows < 1:
        raise OptionError("max_state_rows must be a positive number of rows")
    observed = metrics is not None and metrics.observed is not None
    operator = _BucketOperator(clause, mode, arrow_schema.serialize().to_pybytes(), buckets, late, timeouts,
                               None if observed else metrics, max_state_rows, delay_millis, wire,
                               (metrics.run, spark_schema.names) if observed else None)
    out = data.groupBy(BUCKET).applyInPandasWithState(
        operator, outputStructType=with_metrics(spark_schema) if observed else spark_schema,
        stateStructType=state_type(buckets), outputMode="append", timeoutConf=GroupStateTimeout.EventTimeTimeout)
    return observed_output(out, metrics, spark_schema.names) if observed else out


_METRIC = "__sparkcep_metric_{}"


def observed_output(out, metrics: StreamMetrics, names: list[str]):
    """Connect: each call's figures come in a row of their own (``reported``), summed per
    micro-batch by the observation and dropped (see StreamMetrics)."""
    from pyspark.sql import functions as F

    return (out.observe(metrics.observed, *[F.sum(F.col(_METRIC.format(n))).alias(n) for n in METRICS])
            .where(F.col(_METRIC.format("rows")).isNull())
            .select(*[F.col("`" + n.replace("`", "``") + "`") for n in names]))


def reported(frames: Iterator, metrics: StreamMetrics, names: list[str]) -> Iterator:
    """A call's output frames with NULL figure columns, then one row of its figures
    (``metrics``, filled in while the frames were made) for ``observed_output``."""
    for frame in frames:
        yield frame.assign(**{_METRIC.format(n): pd.array([None] * len(frame), dtype="Int64") for n in METRICS})
    figures = {_METRIC.format(n): pd.array([getattr(metrics, n).value], dtype="Int64") for n in METRICS}
    yield pd.DataFrame({**{n: [None] for n in names}, **figures})


def call_metrics(run: str) -> StreamMetrics:
    """One call's figures, where the session has no accumulators (Connect)."""
    return StreamMetrics(*(_Count() for _ in METRICS), run=run)


def prepared(df, time_col: str, watermark, keys: list[str], buckets: int | None, checkpoint: str | None,
             arrow_schema: pa.Schema):
    """The stream's rows as its stateful operator takes them: event time (``time_col``)
    carrying the watermark, each row's bucket of ``keys``, BIGINT, double and timestamp
    columns made to survive pandas. Returns (the DataFrame, how columns crossed pandas, the
    delay in ms, the bucket count)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType, TimestampNTZType, TimestampType

    from sparkcep.spark.buckets import bucket_column

    time_type = df.schema[time_col].dataType
    if isinstance(time_type, (TimestampType, TimestampNTZType)):
        if not isinstance(watermark, str) or not watermark.strip():
            raise OptionError("watermark must be a delay such as '10 minutes' (event time is a timestamp)")
        delay = watermark
        # Spark's event time is the column itself (a TIMESTAMP: a zone-less one is read in
        # the session's zone, UTC); the copy below only carries the watermark.
        event_time = F.col(time_col).cast("timestamp")
    elif isinstance(time_type, NumericType) and type(time_type).__name__ != "DecimalType":
        try:
            units = float(watermark)
        except (TypeError, ValueError):
            raise OptionError(f"watermark must be a number of {time_col}'s units (event time is a number), "
                              f"not {watermark!r}") from None
        if not units >= 0:
            raise OptionError("watermark must not be negative")
        # Spark's watermark runs on timestamps: one unit of the column is one second.
        delay = f"{units!r} seconds"
        event_time = F.timestamp_seconds(F.col(time_col))
    else:
        raise QueryError("NOT_SUPPORTED", f"a stream's event time (the first ORDER BY column, {time_col}) must be "
                         f"a timestamp or a number, not {time_type.simpleString()}")
    delay_millis = delay_ms(df.sparkSession, delay)  # before Spark parses it (its error shows the shifted delay)
    if checkpoint is not None:
        check_checkpoint(checkpoint)
        stored = checkpoint_buckets(checkpoint)
        if buckets is None:
            buckets = stored
        elif stored is not None and stored != buckets:
            raise OptionError(f"the checkpoint at {checkpoint} holds {stored} buckets; buckets={buckets} would "
                              f"look for each key's state in the wrong bucket (leave buckets unset to use the "
                              f"checkpoint's)")
    if buckets is None:
        buckets = session_buckets(df.sparkSession)
    if not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise OptionError(f"buckets must be a whole number from 1 to {MAX_BUCKETS}")
    # Spark drops rows older than the watermark before a stateful operator sees them,
    # silently. The matcher must see them (to count and drop them, or to stop on them), so
    # the column that carries the watermark is event time moved SHIFT ahead, with the delay
    # grown by SHIFT: the watermark itself is unchanged, and only a row later than the delay
    # plus SHIFT (a century) could still be dropped by Spark.
    data = (df.withColumn(_EVENT_TIME, event_time + F.expr(f"INTERVAL {_SHIFT_DAYS} DAYS"))
            .withWatermark(_EVENT_TIME, f"{_SHIFT_DAYS} days {delay}")
            .withColumn(BUCKET, bucket_column(keys, buckets)))
    # That column reaches the operator NULL, with the watermark's metadata kept (which is what
    # Spark checks for event-time timeouts): pandas' nanosecond timestamps end in 2262, and
    # its values run a century ahead of event time (epoch milliseconds read as seconds, far
    # past that).
    carried = F.lit(None).cast("timestamp").alias(_EVENT_TIME, metadata=data.schema[_EVENT_TIME].metadata)
    # (a select, not withColumn: Spark Connect's withColumn drops an alias's metadata)
    data = data.select(*[carried if c == _EVENT_TIME else F.col("`" + c.replace("`", "``") + "`")
                         for c in data.columns])
    data, wire = _exact_for_pandas(data, arrow_schema)
    return data, wire, delay_millis, buckets


def arrived(pdfs, arrow_schema: pa.Schema, wire: tuple) -> pa.Table:
    """The rows a bucket's call got, as one table of ``arrow_schema`` (in arrival order)."""
    # One thread: a call holds a bucket's rows, too few for a thread pool to pay its start.
    tables = [_from_pandas_wire(pa.Table.from_pandas(pdf, preserve_index=False, nthreads=1), arrow_schema,
                                wire).select(arrow_schema.names)
              for pdf in pdfs if len(pdf)]
    if not tables:
        return arrow_schema.empty_table()
    # Timestamps crossed as microseconds (_exact_for_pandas), not as the session's wall time.
    return pa.concat_tables(tables, promote_options="permissive").cast(arrow_schema)


def with_metrics(spark_schema):
    """The operator's output with a column per figure (NULL on output rows); every column
    nullable, as the figures' rows leave the output's empty."""
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([StructField(f.name, f.dataType, True) for f in spark_schema]
                      + [StructField(_METRIC.format(n), LongType(), True) for n in METRICS])


# applyInPandasWithState hands rows over as pandas, where a BIGINT column holding a NULL
# becomes float64 (exact only below 2^53), a double's NaN and NULL both become NaN, and a
# timestamp must fit nanoseconds (1677 to 2262). So a BIGINT crosses as two halves that
# float64 holds exactly, a timestamp as its microseconds in halves, and a double brings a
# flag for its NaNs (_BucketOperator._arrived puts them back). Matches go back out with nullable
# dtypes (_EXACT_PANDAS), which keep both.
_LOW = "__sparkcep_low_{}"
_NAN = "__sparkcep_nan_{}"
_EXACT_PANDAS = {pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(), pa.float32(): pd.Float32Dtype()}


def _exact_for_pandas(data, arrow_schema: pa.Schema):
    """``data`` with its BIGINT and double columns (of those ``arrow_schema`` keeps) made to
    survive pandas, and what was done: (column, "halves" or "nan") pairs."""
    from pyspark.sql import functions as F

    wire = []
    for i, f in enumerate(arrow_schema):
        c = F.col("`" + f.name.replace("`", "``") + "`")  # a name with dots or backticks, quoted
        if pa.types.is_timestamp(f.type) or pa.types.is_int64(f.type):
            # in halves float64 holds exactly; a timestamp as its microseconds (pandas' nanoseconds end in 2262)
            how = "micros" if pa.types.is_timestamp(f.type) else "halves"
            whole = _micros(c, f.type.tz is None) if how == "micros" else c
            data = data.withColumn(_LOW.format(i), whole.bitwiseAND(F.lit(0xFFFFFFFF))).withColumn(
                f.name, F.shiftright(whole, 32))
            wire.append((f.name, how))
        elif pa.types.is_floating(f.type):
            data = data.withColumn(_NAN.format(i), F.isnan(c))
            wire.append((f.name, "nan"))
    return data, tuple(wire)


def _micros(c, wall: bool):
    """A timestamp column's microseconds since the epoch: of the instant, or (``wall``, a
    TIMESTAMP_NTZ) of its wall time read as UTC, whatever the session's zone."""
    from pyspark.sql import functions as F

    if not wall:
        return F.unix_micros(c)
    seconds = F.unix_date(F.to_date(c)).cast("bigint") * 86400 + F.hour(c) * 3600 + F.minute(c) * 60
    return seconds * 1_000_000 + (F.date_part(F.lit("SECOND"), c) * 1_000_000).cast("bigint")


def _from_pandas_wire(table: pa.Table, arrow_schema: pa.Schema, wire: tuple) -> pa.Table:
    """The columns _exact_for_pandas sent, as they were (``table`` is one pandas frame as
    Arrow)."""
    import pyarrow.compute as pc

    for name, how in wire:
        i = arrow_schema.get_field_index(name)
        col = table.column(name)
        if how in ("halves", "micros"):
            high = col.cast(pa.int64())
            low = table.column(_LOW.format(i)).cast(pa.int64())
            value = pc.add(pc.multiply(high, pa.scalar(1 << 32, pa.int64())), low)
            if how == "micros":
                value = value.cast(pa.timestamp("us", arrow_schema.field(i).type.tz))
        else:
            nan = pc.fill_null(table.column(_NAN.format(i)).cast(pa.bool_()), False)
            value = pc.if_else(nan, pa.scalar(float("nan"), col.type), col)
        table = table.set_column(table.schema.get_field_index(name), name, value)
    return table


def delay_ms(spark, delay: str) -> int:
    """The watermark delay in milliseconds, as Spark reads it (its own interval parser)."""
    import datetime as dt

    try:
        value = spark.sql(f"SELECT INTERVAL '{delay.replace(chr(39), '')}' AS d").first()[0]
    except Exception:  # noqa: BLE001 - Spark's parse error, or a year-month interval
        value = None
    if not isinstance(value, dt.timedelta):
        raise OptionError(f"watermark must be a delay in days, hours, minutes or seconds, such as '10 minutes'; "
                          f"not {delay!r}")
    return value // dt.timedelta(milliseconds=1)


def state_type(buckets: int) -> str:
    """The bucket state's Spark type. The bucket count is in the type (a decimal's precision),
    because the key→bucket map depends on it: Spark checks the type of stored state on every
    restart, so a restart with another count stops with STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE
    instead of looking for each key's state in the wrong bucket."""
    return f"blob binary, buckets decimal({buckets}, 0)"


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


def check_checkpoint(checkpoint: str) -> None:
    """Refuse a checkpoint an earlier sparkcep.stream wrote (one transformWithState entry per
    key, before keys were hashed into buckets): Spark would stop with "stateful operator does
    not match"; this says what to do instead. A missing or new checkpoint passes."""
    import glob
    import os

    for path in glob.glob(os.path.join(checkpoint, "state", "*", "_metadata", "v*", "*")):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        if "transformWithStateInPandasExec" in text and "key_state" in text:
            raise SparkCepError(f"the checkpoint at {checkpoint} was written by an earlier sparkcep.stream, which kept "
                                "one state entry per key; this version keeps one per hash bucket of keys and cannot "
                                "read it. Flush it with the earlier version if its last matches matter, then start the "
                                "stream from a new checkpoint (it replays the input its source still holds)")


def flush(spark, clause: str | None, checkpoint: str, *, mode: str = "sql", timeouts: bool = False,
          mark: bool = True):
    """End of input for a stream that has stopped (e.g. after ``trigger(availableNow=True)``):
    the matches still waiting in its checkpoint's state, each key's buffered rows taken as
    the end of its partition (the last watermark moved to +∞), as a batch DataFrame to append
    to the stream's output. With it, stream output + flush equals ``match_recognize`` over
    every row the stream accepted. A checkpoint is flushed once: a marker file in it records
    the call (``mark=False`` leaves that to the caller, see ``mark_flushed``); if writing the
    result fails, delete ``_sparkcep_flushed`` from the checkpoint to flush again. A stream
    that committed no micro-batch (its input was empty) has nothing waiting. ``clause`` None:
    the checkpoint is a stream of rules' (``stream(..., rules=)``), whose rules it keeps;
    rows ``(rule, match)``."""
    import os

    from sparkcep.spark.rule_stream import flush_rules, is_rule_checkpoint

    if not os.path.isdir(checkpoint):
        raise SparkCepError(f"no stream checkpoint at {checkpoint}")
    if is_rule_checkpoint(checkpoint) != (clause is None):
        raise OptionError(f"the checkpoint at {checkpoint} is a stream of rules': flush(spark, None, checkpoint)"
                          if clause is not None else f"the checkpoint at {checkpoint} is a stream of one clause's: "
                          "flush(spark, clause, checkpoint) with the clause it ran")
    refuse_flushed(checkpoint)
    check_checkpoint(checkpoint)
    if clause is None:
        if timeouts:
            raise OptionError("a stream of rules reports no timeouts")
        result = flush_rules(spark, checkpoint, mode=mode)
    else:
        result = _waiting(spark, clause, checkpoint, mode, timeouts)
    if mark:
        mark_flushed(checkpoint)
    return result


def refuse_flushed(checkpoint: str) -> None:
    """A checkpoint's end of input is emitted once."""
    import os

    if os.path.exists(os.path.join(checkpoint, _FLUSHED)):
        raise SparkCepError(f"the stream at {checkpoint} was flushed already: its end of input is behind it")


def mark_flushed(checkpoint: str) -> None:
    """Record in the checkpoint that its end of input has been emitted."""
    import os

    with open(os.path.join(checkpoint, _FLUSHED), "w") as f:
        f.write("flushed\n")


def _state_path(checkpoint: str) -> str:
    """Where Spark's state reader can read ``checkpoint``: a local path that URLs must
    escape (a space) through a link without such characters, since the reader looks for the
    escaped name (Spark 4.3: STDS_COMMITTED_BATCH_UNAVAILABLE)."""
    import atexit
    import os
    import shutil
    import tempfile
    import urllib.parse

    parsed = urllib.parse.urlparse(checkpoint)
    if parsed.scheme == "file":  # file:/x or file:///x
        checkpoint = parsed.path
    elif parsed.scheme:
        return checkpoint  # another file system: its own rules
    path = os.path.abspath(checkpoint)
    if urllib.parse.quote(path) == path:
        return path
    folder = tempfile.mkdtemp(prefix="sparkcep-checkpoint-")
    atexit.register(shutil.rmtree, folder, True)
    link = os.path.join(folder, "checkpoint")
    os.symlink(path, link)
    return link


def state_blobs(spark, checkpoint: str):
    """The stopped stream's state, a DataFrame of one ``blob`` per bucket, or None where no
    micro-batch was committed."""
    import os

    commits = os.path.join(checkpoint, "commits")
    if not os.path.isdir(commits) or not any(n.isdigit() for n in os.listdir(commits)):
        return None
    try:
        states = spark.read.format("statestore").load(_state_path(checkpoint))
        return states.select("value.groupState.blob")
    except Exception as e:  # noqa: BLE001 - Spark's analysis errors: a checkpoint of another operator
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise SparkCepError(f"the checkpoint at {checkpoint} cannot be read as sparkcep.stream's (which keeps one "
                            f"state entry per hash bucket of keys): if another version or query wrote it, start the "
                            f"stream again from a new checkpoint and replay its input ({type(e).__name__}: "
                            f"{first})") from None


def _waiting(spark, clause: str, checkpoint: str, mode: str, timeouts: bool):
    """What a stopped stream's checkpoint still holds, run to the end of each key's partition."""
    from pyspark.sql.types import StructType

    from sparkcep.data.output import output_schema

    blobs = state_blobs(spark, checkpoint)
    first = blobs.limit(1).collect() if blobs is not None else []
    if not first:  # no micro-batch committed, or no key holds rows: no state
        return spark.createDataFrame([], StructType([]))
    arrow_schema = read_bucket(bytes(first[0][0]))[1].rows.schema
    plan = _plan_for(clause, mode, arrow_schema)
    from pyspark.sql.pandas.types import from_arrow_schema

    out_schema = output_schema(plan.query, arrow_schema)
    if timeouts:
        from sparkcep.runtime.incremental import IncrementalMatcher

        timeout_fields = list(IncrementalMatcher(plan, arrow_schema).timeout_schema())
        out_schema = out_schema.append(pa.field(TIMEOUT, pa.struct(timeout_fields)))
    finish = _Finisher(clause, mode, arrow_schema.serialize().to_pybytes(), timeouts)
    return blobs.mapInArrow(finish, from_arrow_schema(out_schema))


def _plan_for(clause: str, mode: str, arrow_schema: pa.Schema):
    """The plan of ``clause`` for rows of ``arrow_schema`` (on the driver and the workers;
    cached, as every plan of a query text is)."""
    from sparkcep.query import compile_query

    return compile_query(clause, arrow_schema.empty_table(), mode)


class _Finisher:
    """Each bucket's saved keys run to the end of their partitions (on the workers)."""

    def __init__(self, clause: str, mode: str, schema: bytes, timeouts: bool = False):
        self.clause, self.mode, self.schema, self.timeouts = clause, mode, schema, timeouts

    def __call__(self, batches):
        from sparkcep.runtime.keyed import KeyedMatcher
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema))
            matcher = KeyedMatcher(_plan_for(self.clause, self.mode, arrow_schema), arrow_schema,
                                   timeouts=self.timeouts)
            for batch in batches:
                for bucket in batch.column(0).to_pylist():
                    if bucket is None:
                        continue
                    done = matcher.finish(read_bucket(bucket, arrow_schema,
                                                      matcher.plan.query.order_by[0].column)[1])
                    table = _output(matcher, done.out, done.timeouts) if self.timeouts else done.out
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


_STATE_MAGIC = b"SPCEPB2\n"  # a bucket's state: meta as JSON, then its keys (runtime.keyed.KeyedState)
_PER_KEY_MAGIC = b"SPCEPB1\n"  # the earlier layout: one KeyState blob per key (migrated on read)


def write_bucket(meta: dict, keys) -> bytes:
    """A bucket's state value: ``meta`` as JSON, then its keys' rows and integers
    (``KeyedState.to_bytes``: Arrow IPC). Never pickle."""
    from sparkcep.data.ingest import pack

    return pack(_STATE_MAGIC, json.dumps(meta).encode(), keys.to_bytes())


def read_bucket(blob: bytes, schema: pa.Schema | None = None, time_column: str | None = None):
    """(meta, KeyedState) of a bucket's state value; a bucket written in the earlier
    one-blob-per-key layout is migrated (``schema``: the rows' schema, else the first key's;
    ``time_column``: the event-time column, for keys that held no rows, see _placeholder)."""
    from sparkcep.data.ingest import table_from_ipc, unpack
    from sparkcep.runtime.incremental import KeyState
    from sparkcep.runtime.keyed import KeyedState

    got = unpack(blob, _STATE_MAGIC)
    if got is not None:
        return json.loads(got[0]), KeyedState.from_bytes(got[1])
    got = unpack(blob, _PER_KEY_MAGIC)
    if got is None:
        raise SparkCepError("this stream's checkpoint holds state this version of sparkcep cannot read; start the "
                            "query again from a new checkpoint (and replay its input)")
    meta = json.loads(got[0])
    keys = table_from_ipc(got[1])
    states = [KeyState.from_bytes(b) for b in keys.column("state").to_pylist()]
    if schema is None:
        schema = next((st.rows.schema for st in states), pa.schema([]))
    for i, st in enumerate(states):
        if not st.rows.num_rows and st.base:
            if time_column is None or not meta["sealed"]:
                raise SparkCepError("this stream's checkpoint was written by an earlier version of sparkcep whose "
                                    "state this one cannot carry over here (a key holds no rows); flush it with that "
                                    "version, then start the stream from a new checkpoint")
            st.rows, st.base = _placeholder(schema, time_column, keys.slice(i, 1), meta["sealed"]), st.base - 1
    return {"buckets": meta["buckets"], "latest": meta["latest"], "sealed": meta["sealed"]}, \
        KeyedState.of_keys(schema, states)


def _placeholder(schema: pa.Schema, time_column: str, key: pa.Table, sealed_ms: int) -> pa.Table:
    """One row standing for a key the earlier layout kept without rows (every row decided,
    none to look back at): its PARTITION BY values, an event time just below what the bucket
    had sealed (so it sorts before any row still to come, and is never waited for), NULL
    elsewhere. Placed before the key's next start, no match or PREV ever reads it; it keeps
    the key's match numbers and row count."""
    from sparkcep.runtime.keyed import EventClock

    t = schema.field(time_column).type
    at = EventClock(t).value(sealed_ms)
    if pa.types.is_timestamp(t):
        import datetime as dt

        at = at - dt.timedelta(microseconds=1)
    else:
        at = at - 1
    cols = [key.column(f.name).cast(f.type) if f.name in key.column_names else
            pa.array([at], t) if f.name == time_column else pa.nulls(1, f.type) for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


class _BucketOperator:
    """What applyInPandasWithState calls for one bucket (on the workers): every row of the
    bucket's keys that arrived in this micro-batch, one state value for the bucket. The
    keys match together (runtime.keyed): every key in one kernel call where the query
    allows, else each key that got rows or whose timer the watermark passed."""

    def __init__(self, clause: str, mode: str, schema: bytes, buckets: int, late: str = "drop",
                 timeouts: bool = False, metrics: StreamMetrics | None = None, max_rows: int = 1_000_000,
                 delay_ms: int = 0, wire: tuple = (), observed: tuple[str, list[str]] | None = None):
        self.clause, self.mode, self.schema_bytes, self.buckets = clause, mode, schema, buckets
        self.delay_ms = delay_ms
        # Connect: (the metrics' run, the output's columns): each call yields its figures
        # in a row of their own (see StreamMetrics).
        self.observed = observed
        self.wire = wire  # how columns crossed pandas (_exact_for_pandas)
        self.late_policy, self.timeouts, self.metrics, self.max_rows = late, timeouts, metrics, max_rows
        self.matcher = None

    def __getstate__(self):
        return {**self.__dict__, "matcher": None}  # built again on the worker

    def _setup(self) -> None:
        import warnings

        from sparkcep.runtime.keyed import KeyedMatcher

        # PySpark's own worker concatenates empty frames around ours and pandas warns about
        # it on every call: noise in the user's console, nothing they can act on.
        warnings.filterwarnings("ignore", category=FutureWarning, message="The behavior of DataFrame concatenation")

        self.arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.schema_bytes))
        plan = _plan_for(self.clause, self.mode, self.arrow_schema)
        self.matcher = KeyedMatcher(plan, self.arrow_schema, max_rows=self.max_rows, timeouts=self.timeouts)
        self.time_column = plan.query.order_by[0].column

    def __call__(self, bucket, pdfs, state) -> Iterator:
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            if self.matcher is None:
                self._setup()
            if self.observed is None:
                yield from self._run(pdfs, state)
                return
            run, names = self.observed
            self.metrics = call_metrics(run)  # this call's figures
            yield from reported(self._run(pdfs, state), self.metrics, names)

    # ------------------------------------------------------------ the bucket's state
    def _load(self, state):
        """(meta, KeyedState): the latest event time the bucket has seen and how far it has
        sealed (Spark's ms), the metrics it last reported; its keys."""
        from sparkcep.runtime.keyed import KeyedState

        if not state.exists:
            return {"latest": 0, "sealed": 0}, KeyedState.empty(self.arrow_schema)
        meta, keys = read_bucket(bytes(state.get[0]), self.arrow_schema, self.time_column)
        if meta["buckets"] != self.buckets:
            raise SparkCepError(f"this stream's checkpoint was written with buckets={meta['buckets']}; restart it "
                                f"with the same number (buckets={self.buckets} now)")
        return meta, keys

    # ------------------------------------------------------------ one call
    def _run(self, pdfs, state) -> Iterator:
        import pyarrow.compute as pc

        ms = state.getCurrentWatermarkMs()
        meta, keys = self._load(state)
        latest, sealed = meta["latest"], meta["sealed"]
        clock, single = self.matcher.clock, self.matcher.single
        fresh = self._arrived(pdfs)
        if fresh.num_rows:
            single.check_times(fresh)
            # Rows below the watermark are late; so are rows below what this bucket has
            # already sealed (see below), should Spark's watermark ever trail it.
            watermark = clock.value(max(ms, sealed))
            fresh, late = single.split_late(fresh, watermark)
            if late.num_rows:
                self._late(late, watermark)
            if fresh.num_rows:
                latest = max(latest, clock.millis(pc.max(fresh.column(single.time_index)).as_py()))
            if self.metrics is not None:
                self.metrics.rows.add(fresh.num_rows)
        # Rows below the latest event time this bucket has seen, less the delay, are sealed
        # now: Spark's next watermark is at least that (it is the latest event time of every
        # bucket, less the delay), so any such row still to come is late. A match decided by
        # this batch's rows comes out in this batch, not one watermark later.
        sealed = max(ms, sealed, latest - self.delay_ms if latest else 0)
        stepped = self.matcher.advance(keys, fresh, clock.value(sealed), due_ms=ms)
        keys = stepped.state
        timers = keys.keys["timer"]
        pending = timers[timers > 0]
        if len(pending):
            # Spark calls the bucket again once the watermark passes the earliest timer (it
            # fires when the watermark is above the timestamp; ours are "sealed at").
            state.setTimeoutTimestamp(max(int(pending.min()) - 1, ms, 1))
        new_meta = {"buckets": self.buckets, "latest": latest, "sealed": sealed}
        m = self.metrics
        if m is not None:
            m.matches.add(stepped.out.num_rows)
            m.timeouts.add(stepped.timeouts.num_rows)
            # Gauges summed over buckets as differences from what this bucket last reported
            # (in this run: a restarted query's buckets report in full when first called).
            now = keys.gauges()
            before = meta.get("reported", [0, 0, 0]) if meta.get("run") == m.run else [0, 0, 0]
            m.buffered.add(now[0] - before[0])
            m.undecided.add(now[1] - before[1])
            m.state_bytes.add(now[2] - before[2])
            new_meta.update(reported=now, run=m.run)
        if keys.count:
            state.update((write_bucket(new_meta, keys), None))
        out = _output(self.matcher, stepped.out, stepped.timeouts) if self.timeouts else stepped.out
        if out.num_rows:
            # Back through pandas: nullable integers and floats keep BIGINT digits and NaN
            # apart from NULL (float64 would round the one and merge the other).
            yield out.to_pandas(use_threads=False, types_mapper=_EXACT_PANDAS.get)

    def _arrived(self, pdfs) -> pa.Table:
        return arrived(pdfs, self.arrow_schema, self.wire)

    def _late(self, late: pa.Table, watermark) -> None:
        import logging

        from sparkcep.errors import DataError

        first = late.column(self.matcher.time_index)[0].as_py()
        key = self.matcher.key_of(late, 0)
        if self.late_policy == "error":
            raise DataError(f"a row arrived after the watermark had passed it: {self.time_column} = {first}, "
                            f"watermark {watermark} (late='error'; with late='drop' such rows are dropped and "
                            "counted)", column=self.time_column, key={**key, self.time_column: first})
        if self.metrics is not None:
            self.metrics.late.add(late.num_rows)
        logging.getLogger("sparkcep").warning("stream: %d late row(s) dropped (the first: %s, %s = %s; watermark %s)",
                                              late.num_rows, key, self.time_column, first, watermark)
