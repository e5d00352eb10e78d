"""sparkcep: complex event processing for Python — SQL:2016 MATCH_RECOGNIZE over pandas,
Arrow and Spark tables."""

from typing import TYPE_CHECKING

from sparkcep.errors import (
    DataError,
    ExecutionError,
    InternalError,
    QueryError,
    SparkCepError,
    guarded,
)
from sparkcep.errors import checked as _checked
from sparkcep.functions import register_aggregate, unregister_function
from sparkcep.functions import register_function as _register_function

if TYPE_CHECKING:  # loaded on first use (below): a worker process imports sparkcep without the engine
    from sparkcep.api import explain, explain_rules, match_recognize, match_rules, sase, snoop

_API = frozenset({"explain", "explain_rules", "match_recognize", "match_rules", "sase", "snoop"})


def register_function(name, fn, returns="any", *, deterministic=True, null_on_null=True, cost="cheap") -> None:
    _register_function(name, fn, returns, deterministic=deterministic, null_on_null=null_on_null, cost=cost)
    if cost == "expensive":
        # Its queries run on worker processes: the interpreter they fork from starts now,
        # while the caller prepares its data (sparkcep.tasks.workers.prestart).
        from sparkcep.tasks.workers import prestart

        prestart()


register_function.__doc__ = _register_function.__doc__


@guarded
def sql(spark, statement: str, **options):
    """Run ``SELECT ... FROM t MATCH_RECOGNIZE (...) [AS m] [WHERE ...]`` on Spark."""
    from sparkcep.errors import OptionError
    from sparkcep.spark.sql import sql as _sql

    if not callable(getattr(spark, "sql", None)) or not callable(getattr(spark, "table", None)):
        raise OptionError(f"sql runs on a SparkSession (its first argument), not {type(spark).__name__}")
    if not isinstance(statement, str):
        raise OptionError(f"the statement must be a string, not {type(statement).__name__}")

    _checked(_sql, "sql", (spark, statement), options)
    return _sql(spark, statement, **options)


@guarded
def stream(df, clause: str | None = None, **options):
    """MATCH_RECOGNIZE over a streaming Spark DataFrame: a streaming DataFrame of matches
    (Append mode) as the watermark makes them final. ``watermark="10 minutes"`` is required;
    options ``late``, ``timeouts``, ``end_of_input``, ``metrics`` (see sparkcep.spark.stream).
    ``rules=`` a folder of rules instead of a clause, read again at each micro-batch, with
    ``event_time``, ``partition_by`` and ``checkpoint`` (see sparkcep.spark.rule_stream)."""
    from sparkcep.spark.stream import stream as _stream

    _checked(_stream, "stream", (df, clause), options)
    return _stream(df, clause, **options)


@guarded
def flush(spark, clause: str | None, checkpoint: str, **options):
    """End of input for a stream that has stopped: the matches still waiting in its
    checkpoint, as a batch DataFrame (options ``mode``, ``timeouts``; see
    sparkcep.spark.stream.flush); ``clause`` None for a stream of rules (its checkpoint
    keeps them). Not for a Spark file sink's folder, whose readers see only
    the files in its log: write such a stream with ``run_to_end``."""
    from sparkcep.spark.stream import flush as _flush

    _checked(_flush, "flush", (spark, clause, checkpoint), options)
    return _flush(spark, clause, checkpoint, **options)


@guarded
def run_to_end(df, clause: str | None = None, path: str | None = None, checkpoint: str | None = None, *,
               watermark, **options) -> dict:
    """Run the stream ``df`` over the input it has now and end its input: every match, the
    end of input's included, in the folder ``path`` as Parquet files that
    ``spark.read.parquet(path)`` sees. ``watermark`` is required; options as ``stream``
    (``rules=`` a folder of rules instead of a clause; see sparkcep.spark.sink.run_to_end).
    Returns the counts written."""
    from sparkcep.spark.sink import run_to_end as _run_to_end

    _checked(_run_to_end, "run_to_end", (df, clause, path, checkpoint), dict(options, watermark=watermark))
    return _run_to_end(df, clause, path, checkpoint, watermark=watermark, **options)


@guarded(query=False)
def register_table_function(spark, name: str = "match_recognize") -> None:
    """Register MATCH_RECOGNIZE as the SQL table function ``name`` of the session ``spark``
    (classic or Connect), for ``spark.sql`` and every SQL client of that session:
    ``SELECT * FROM match_recognize(TABLE(trades), 'PARTITION BY symbol ORDER BY ts MEASURES ...
    PATTERN (...) DEFINE ...')`` (see sparkcep.spark.table_function). The functions
    registered with register_function by then go with it to Spark's workers."""
    import re

    from sparkcep.errors import OptionError
    from sparkcep.spark.table_function import register_table_function as _register
    from sparkcep.spark.worker_python import check_workers

    if not callable(getattr(spark, "sql", None)) or getattr(spark, "udtf", None) is None:
        raise OptionError(f"register_table_function takes a SparkSession, not {type(spark).__name__}")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise OptionError(f"the function's name must be a SQL identifier (letters, digits, _), not {name!r}")
    check_workers(spark)  # (the function runs in the session's Python workers)
    _register(spark, name)


@guarded(query=False)
def plot(data, matches, *, x: str, y: str | None, start: str, end: str, **options):
    """Draw ``matches`` over the series ``data`` they were found in, each match shaded and
    chosen points marked, one panel per PARTITION BY value asked for (``y=None``: a timeline,
    a row per key value, events as ticks and matches as bars); returns the matplotlib
    Figure. Options ``x``, ``y``, ``start``, ``end`` (required), ``key``, ``key_values``,
    ``marks``, ``span``, ``title``, ``ax``, ``path``, ``color`` (see sparkcep.charts.plot)."""
    from sparkcep.charts import plot as _plot

    _checked(_plot, "plot", (data, matches), dict(options, x=x, y=y, start=start, end=end))
    return _plot(data, matches, x=x, y=y, start=start, end=end, **options)


def __getattr__(name: str):
    # The engine loads on first use; Spark-side names load Spark only when asked for.
    if name in _API:
        from sparkcep import api

        return getattr(api, name)
    if name == "TaskStats":
        from sparkcep.tasks.engine import TaskStats

        return TaskStats
    if name == "StreamMetrics":
        from sparkcep.spark.stream import StreamMetrics

        return StreamMetrics
    if name == "collect_errors":
        from sparkcep.spark.wire import collect_errors

        return collect_errors
    raise AttributeError(f"module 'sparkcep' has no attribute {name!r}")


__all__ = [
    "DataError",
    "ExecutionError",
    "InternalError",
    "QueryError",
    "SparkCepError",
    "StreamMetrics",
    "TaskStats",
    "collect_errors",
    "explain",
    "explain_rules",
    "flush",
    "match_recognize",
    "match_rules",
    "plot",
    "register_aggregate",
    "register_function",
    "register_table_function",
    "run_to_end",
    "sase",
    "snoop",
    "sql",
    "stream",
    "unregister_function",
]
__version__ = "0.1.0"
