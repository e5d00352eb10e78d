"""The sparkcep command line: run a MATCH_RECOGNIZE job on Spark, generate workloads,
explain a plan, run benchmarks."""

from __future__ import annotations

import pathlib
import re
import sys
import time
from enum import StrEnum

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparkcep.errors import OptionError, QueryError, SparkCepError, as_sparkcep_error, spark_message

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
# Queries, paths and result values hold brackets and colons: printed as text, never read as
# rich markup or emoji codes (a "[/]" in them crashed the command, a "[x]" vanished). Errors are not wrapped, so an
# excerpt's caret stays under its column.
console = Console(markup=False, emoji=False)
err = Console(stderr=True, markup=False, emoji=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        # The installed distribution's version (pyproject takes it from sparkcep.__version__).
        try:
            console.print(f"sparkcep {version('sparkcep')}")
        except PackageNotFoundError:
            console.print("sparkcep (not installed: run from a checkout)")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit")) -> None:
    """The options before a command."""


class Format(StrEnum):
    parquet = "parquet"
    csv = "csv"
    json = "json"


class Strategy(StrEnum):
    auto = "auto"
    sequential = "sequential"
    partition = "partition"
    runs = "runs"
    rr = "rr"
    tasks = "tasks"  # SNOOP queries: the task engine's worker processes
    reference = "reference"  # SNOOP queries: the brute-force reference


class Structure(StrEnum):
    tree = "tree"
    tree_hash = "tree+hash"
    graph = "graph"


class Queue(StrEnum):
    priority = "priority"
    fifo = "fifo"


class Mode(StrEnum):
    sql = "sql"
    matchregex = "matchregex"


def _fail(message: str) -> None:
    err.print(Text("error:", style="bold red"), message)
    raise typer.Exit(2)


def _format_of(path: str, given: Format | None) -> str:
    if given is not None:
        return given.value
    p = pathlib.Path(path)
    for ext, fmt in ((".parquet", "parquet"), (".csv", "csv"), (".json", "json"), (".jsonl", "json")):
        if p.suffix == ext:
            return fmt
    if p.is_dir():
        names = [f.suffix for f in p.iterdir() if f.is_file() and not f.name.startswith(("_", "."))]
        for ext, fmt in ((".parquet", "parquet"), (".csv", "csv"), (".json", "json")):
            if ext in names:
                return fmt
    return "parquet"


def read_input(spark, path: str, fmt: str):
    """A Spark DataFrame from a Parquet, CSV (header, inferred types) or JSON-lines path."""
    if not pathlib.Path(path).exists():
        raise SparkCepError(f"input {path!r} does not exist")
    try:
        if fmt == "parquet":
            df = spark.read.parquet(path)
        elif fmt == "csv":
            df = spark.read.option("header", True).option("inferSchema", True).option("mode", "FAILFAST").csv(path)
        else:
            df = spark.read.option("mode", "FAILFAST").json(path)
        df.schema  # noqa: B018 - forces the read of the schema here, where errors are clear
    except Exception as e:  # noqa: BLE001 - Spark raises its own types
        raise SparkCepError(f"cannot read {path!r} as {fmt}: {spark_message(e)}") from None
    return df


def write_output(df, path: str, fmt: str) -> None:
    writer = df.write.mode("overwrite")
    if fmt == "parquet":
        writer.parquet(path)
    elif fmt == "csv":
        writer.option("header", True).csv(path)
    else:
        writer.json(path)


@app.command()
def run(
    query: pathlib.Path | None = typer.Option(None, "--query", "-q", help="file with the text inside MATCH_RECOGNIZE ( ... ), a whole SELECT over the view 'input', a SASE+ query (PATTERN SEQ(...)) or an Extended SNOOP query (a .snoop file, SELECT * FROM SEQ(...) ...)"),
    rules: pathlib.Path | None = typer.Option(None, "--rules", help="instead of --query: a folder of .sql files, "
                                              "one MATCH_RECOGNIZE clause each, all run in one pass (the output's "
                                              "first column, rule, names each row's file)"),
    input: str = typer.Option(..., "--input", "-i", help="Parquet, CSV or JSON-lines file or folder"),
    output: str = typer.Option(..., "--output", "-o", help="where to write the matches"),
    format: Format = typer.Option(Format.parquet, "--format", "-f", help="output format"),
    input_format: Format | None = typer.Option(None, "--input-format", help="input format (default: from the path)"),
    master: str | None = typer.Option(None, "--master", help="Spark master URL (default local[*])"),
    remote: str | None = typer.Option(None, "--remote", help="a Spark Connect server, sc://host:port, instead of "
                                      "--master (paths are read and written where the server runs)"),
    strategy: Strategy = typer.Option(Strategy.auto, "--strategy"),
    batch: int | None = typer.Option(None, "--batch", help="rows per batch (runs, rr)"),
    shared: int | None = typer.Option(None, "--shared", help="rows a batch reads past its end (runs)"),
    mode: Mode = typer.Option(Mode.sql, "--mode"),
    show: int = typer.Option(10, "--show", help="print this many matches"),
    order_by: str | None = typer.Option(None, "--order-by", help="SASE+ and SNOOP queries: the column that orders "
                                        "events (SASE+ default: time; SNOOP default: the input order)"),
    type_column: str | None = typer.Option(None, "--type-column", help="SASE+ and SNOOP queries: the event type "
                                           "column (SASE+ default: event_type; '' for none)"),
    partition_by: list[str] = typer.Option([], "--partition-by", help="SNOOP queries: match within each key"),
    workers: int | None = typer.Option(None, "--workers", help="SNOOP queries: task worker processes (default: cores)"),
    block: int = typer.Option(1024, "--block", help="SNOOP queries: raw events per synchronization block"),
    window: int | None = typer.Option(None, "--window", help="SNOOP queries: counter window (events between neighbours)"),
    pm: Structure = typer.Option(Structure.tree_hash, "--pm", help="SNOOP queries: partial-match structure"),
    queue: Queue = typer.Option(Queue.priority, "--queue", help="SNOOP queries: task queue"),
) -> None:
    """Run a MATCH_RECOGNIZE, SASE+ or Extended SNOOP job (or a folder of rules) and write its matches."""
    import sparkcep

    text = _query_or_rules(query, rules)
    if rules is None and is_snoop(query, text):
        _run_snoop(text, input, output, format, input_format, strategy, order_by, type_column, partition_by,
                   dict(workers=workers, block=block, window=window, pm=pm.value, queue=queue.value), show)
        return
    try:
        if rules is None:
            _parses(text, order_by, type_column)  # a mistake in the text is told before Spark starts
    except SparkCepError as e:
        _fail(str(e))
        return
    if master and remote:
        _fail("give --master or --remote, not both")
    in_format = _format_of(input, input_format)
    local_rows = _small_local_input(input, in_format, format.value, master or remote, strategy.value, batch, shared,
                                    text)
    if local_rows is not None:
        _run_in_process(text, input, output, mode, show, order_by, type_column, local_rows, rules)
        return
    from sparkcep.cli.progress import spark_progress
    from sparkcep.spark.batch import SparkRun, collect_errors
    from sparkcep.spark.session import get_session, runs_on

    try:
        t0 = time.perf_counter()
        spark = get_session(master, remote=remote)
        df = read_input(spark, input, in_format)
        run_info = SparkRun(strategy.value, "requested")
        with spark_progress(spark, console, "matching"), collect_errors():
            rows_in = df.count()
            if rows_in == 0 and in_format in ("csv", "json"):
                # Types inferred from no values say nothing (every CSV column came out a
                # string): NULL columns, which take any type, and no rows written.
                from sparkcep.spark.frames import untyped

                df = untyped(df)
            if rules is not None:
                result = sparkcep.match_rules(df, rules, strategy=strategy.value, batch=batch, shared=shared,
                                              mode=mode.value)
                run_info.reason = "chosen per rule; `sparkcep explain --rules` shows what the rules share"
            elif text.lstrip().upper().startswith(("SELECT", "WITH")):
                df.createOrReplaceTempView("input")
                result = sparkcep.sql(spark, text, strategy=strategy.value, batch=batch, shared=shared, mode=mode.value)
            else:
                from sparkcep.spark.batch import match_recognize_spark

                clause = _clause(text, order_by or "time", "event_type" if type_column is None else type_column)
                result = match_recognize_spark(df, clause, strategy=strategy.value, batch=batch, shared=shared,
                                               mode=mode.value, run=run_info)
            result = result.persist()
            write_output(result, output, format.value)
            matches = result.count()
            head = result.limit(show).toPandas() if show else None
        elapsed = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, text)))
        return
    if head is not None and len(head):
        console.print(_table(head, f"first {len(head)} of {matches:,} output rows"))
    summary = Table(title="sparkcep run", show_header=False)
    for k, v in [("input", f"{input} ({rows_in:,} rows)"), ("output", f"{output} ({format.value}, {matches:,} rows)"),
                 ("strategy", run_info.describe().removeprefix("strategy: ")), ("master", runs_on(spark)),
                 ("time", f"{elapsed:.1f} s ({rows_in / max(elapsed, 1e-9):,.0f} rows/s end to end)")]:
        summary.add_row(Text(k), Text(v))
    console.print(summary)


@app.command()
def stream(
    query: pathlib.Path | None = typer.Option(None, "--query", "-q",
                                              help="file with the text inside MATCH_RECOGNIZE ( ... )"),
    rules: pathlib.Path | None = typer.Option(None, "--rules", help="instead of --query: a folder of rules, one "
                                              ".sql file each, read again at each micro-batch (output: rule, match "
                                              "as JSON)"),
    event_time: str | None = typer.Option(None, "--event-time", help="with --rules: the column every rule orders "
                                          "by first"),
    partition_by: str = typer.Option("", "--partition-by", help="with --rules: the stream's key columns, "
                                     "comma-separated (every rule partitions by them)"),
    input: str = typer.Option(..., "--input", "-i", help="folder the stream reads: files added there are new rows"),
    output: str = typer.Option(..., "--output", "-o", help="folder for the matches (one Parquet file per micro-batch)"),
    checkpoint: str = typer.Option(..., "--checkpoint", help="the stream's checkpoint folder (resume from it)"),
    input_format: Format | None = typer.Option(None, "--input-format", help="input format (default: from the files)"),
    schema: str | None = typer.Option(None, "--schema", help="input schema as DDL, e.g. 'ts timestamp, k string, v double' "
                                      "(default: read from the files present)"),
    watermark: str = typer.Option("10 minutes", "--watermark", help="how late a row may arrive"),
    trigger: str = typer.Option("available-now", "--trigger", help="'available-now' (process what is there, then "
                                "stop); 'continuous' (Spark's default: a micro-batch as soon as the last ends, the "
                                "lowest latency); or an interval such as '5 seconds' (at most one micro-batch per "
                                "interval: larger batches, more rows/s, up to the interval more latency)"),
    end_of_input: bool = typer.Option(False, "--end-of-input", help="with available-now: the input ends there; emit "
                                      "what is still waiting (each key's rows end its partition)"),
    master: str | None = typer.Option(None, "--master", help="Spark master URL (default local[*])"),
    mode: Mode = typer.Option(Mode.sql, "--mode"),
    max_files: int = typer.Option(1, "--max-files-per-trigger", help="input files per micro-batch"),
    late: str = typer.Option("drop", "--late", help="a row older than the watermark: 'drop' (counted) or 'error'"),
    timeouts: bool = typer.Option(False, "--timeouts", help="also write the partial matches WITHIN ended, to "
                                  "OUTPUT/_timeouts/ (reading OUTPUT gives the matches alone)"),
) -> None:
    """Match a stream of files with Spark Structured Streaming, exactly once: one query, or a
    folder of rules that may change while the stream runs."""
    import sparkcep
    from sparkcep.spark.session import get_session, is_connect
    from sparkcep.spark.sink import FolderSink, run_to_end
    from sparkcep.spark.stream import StreamMetrics, check_checkpoint
    from sparkcep.spark.wire import reraise as _reraise

    if (query is None) == (rules is None):
        _fail("give --query FILE or --rules FOLDER (one of them)")
    if query is not None and not query.exists():
        _fail(f"query file {str(query)!r} does not exist")
    if rules is not None and not rules.is_dir():
        _fail(f"rules folder {str(rules)!r} does not exist")
    if rules is not None and not event_time:
        _fail("--rules needs --event-time, the column every rule orders by first")
    if rules is None and (event_time or partition_by):
        _fail("--event-time and --partition-by go with --rules (a query says its own)")
    if end_of_input and trigger != "available-now":
        _fail("--end-of-input needs --trigger available-now (an input that ends)")
    text = query.read_text() if query is not None else None
    chosen = {} if rules is None else {"rules": str(rules), "event_time": event_time,
                                       "partition_by": [c.strip() for c in partition_by.split(",") if c.strip()]}
    try:
        check_checkpoint(checkpoint)
        spark = get_session(master)
        if trigger not in ("available-now", "continuous") and not _interval(spark, trigger):
            raise OptionError(f"--trigger must be 'available-now', 'continuous' or an interval such as "
                              f"'5 seconds', not {trigger!r}")
        fmt = _format_of(input, input_format)
        if schema:
            ddl = schema
        elif fmt == "json":  # JSON inference reads timestamps as strings unless told
            read_input(spark, input, fmt)  # a clear error for a missing or unreadable input
            ddl = spark.read.option("inferTimestamp", True).option("mode", "FAILFAST").json(input).schema
        else:
            ddl = read_input(spark, input, fmt).schema
        reader = spark.readStream.format(fmt).schema(ddl).option("maxFilesPerTrigger", max_files)
        if fmt == "csv":
            reader = reader.option("header", True)
        # (a stream of rules on Connect has no metrics yet: its status line has the query's progress)
        metrics = None if rules is not None and is_connect(spark) else StreamMetrics.create(spark)
        options = dict(watermark=watermark, mode=mode.value, late=late, timeouts=timeouts, metrics=metrics, **chosen)
        skipped = (lambda: _skipped(checkpoint)) if rules is not None else None
        if end_of_input:
            result = run_to_end(reader.load(input), text, output, checkpoint,
                                follow=lambda q, sink: _follow(q, sink.totals, metrics, skipped), **options)
            totals = {"matches": result["matches"], "timeouts": result["timeouts"]}
            console.print(f"end of input: {result['end_of_input_matches']:,} more matches"
                          + (f", {result['end_of_input_timeouts']:,} more timeouts" if timeouts else ""))
        else:
            sink = FolderSink(output, timeouts)
            totals = sink.totals
            matches = sparkcep.stream(reader.load(input), text, checkpoint=checkpoint, **options)
            writer = matches.writeStream.foreachBatch(sink.batch).option("checkpointLocation", checkpoint)
            if trigger != "continuous":
                writer = writer.trigger(**({"availableNow": True} if trigger == "available-now"
                                           else {"processingTime": trigger}))
            q = writer.start()
            try:
                _follow(q, totals, metrics, skipped)
            except Exception as e:  # noqa: BLE001 - a worker's DataError comes back as it was
                _reraise(e)
                raise
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, text)))
        return
    console.print(f"stream: {totals['matches']:,} matches in {output}"
                  + (f", {totals['timeouts']:,} timed-out partial matches in {output}/_timeouts" if timeouts else ""))
    if rules is not None:
        from sparkcep.spark.rule_stream import rule_errors

        for name, why in rule_errors(checkpoint).items():
            console.print(f"rule {name} skipped: {why}")


def _skipped(checkpoint: str) -> int:
    """How many rules the stream skipped in its latest micro-batch (the status line's)."""
    from sparkcep.spark.rule_stream import rule_errors

    try:
        return len(rule_errors(checkpoint))
    except (OSError, ValueError):  # (a rule set being written as it is read)
        return 0


def _interval(spark, text: str) -> bool:
    """Whether Spark reads ``text`` as a day-time interval (what a processing-time trigger takes)."""
    from sparkcep.spark.stream import delay_ms

    try:
        delay_ms(spark, text)
    except SparkCepError:
        return False
    return True


def _follow(q, totals: dict, metrics, skipped=None) -> None:
    """A live status line until the query stops: rows in, matches out, partial matches
    alive, state, watermark, late rows; ``skipped()``: the rules a stream of rules skips."""
    from rich.live import Live

    def line() -> str:
        p = q.lastProgress or {}
        ops = p.get("stateOperators") or [{}]
        watermark = (p.get("eventTime") or {}).get("watermark", "-")
        rules = f", rules skipped {skipped()}" if skipped is not None else ""
        if metrics is None:  # only the query's progress
            return (f"rows in batch {p.get('batchId', '-')}: {p.get('numInputRows', 0):,}, matches out "
                    f"{totals['matches']:,}, {ops[0].get('numRowsTotal', 0):,} state entries, watermark "
                    f"{watermark}{rules}")
        m = metrics.snapshot()
        return (f"rows in {m['rows']:,} (batch {p.get('batchId', '-')}), matches out {totals['matches']:,}, "
                f"undecided starts {m['undecided']:,}, rows in state {m['buffered']:,} ({m['state_bytes'] / 1e6:.1f} MB,"
                f" {ops[0].get('numRowsTotal', 0):,} keys), watermark {watermark}, late rows {m['late']:,}{rules}")

    with Live(console=console, refresh_per_second=2, transient=False) as live:
        while q.isActive:
            live.update(line())
            q.awaitTermination(0.5)
        live.update(line())
    if not console.is_terminal:  # a terminal's Live ends the line itself; a file or pipe's does not
        console.line()
    if q.exception() is not None:
        raise q.exception()


def is_snoop(path: pathlib.Path, text: str) -> bool:
    """An Extended SNOOP query: a .snoop file, or SELECT * FROM without MATCH_RECOGNIZE."""
    if path.suffix.lower() == ".snoop":
        return True
    return bool(re.match(r"\s*(--[^\n]*\n\s*)*SELECT\s+\*\s+FROM\b", text, re.IGNORECASE)) \
        and "MATCH_RECOGNIZE" not in text.upper()


def _read_local(path: str, fmt: str):
    """An Arrow table from a Parquet, CSV or JSON-lines file or folder (SNOOP runs here)."""
    import pyarrow.dataset as ds
    import pyarrow.json as pajson

    if not pathlib.Path(path).exists():
        raise SparkCepError(f"input {path!r} does not exist")
    try:
        if fmt == "json" and pathlib.Path(path).is_file():
            return pajson.read_json(path)
        files = ds.dataset(path, format=fmt)
        return files.to_table()
    except Exception as e:  # noqa: BLE001 - Arrow raises its own types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkCepError(f"cannot read {path!r} as {fmt}: {first}") from None


def _write_local(table, path: str, fmt: str) -> None:
    import pyarrow.csv as pacsv

    from sparkcep.spark.sink import write_parquet

    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        write_parquet(table, out)
    elif fmt == "csv":
        pacsv.write_csv(table, out)
    else:
        table.to_pandas().to_json(out, orient="records", lines=True, date_format="iso")


def _run_snoop(text, input, output, format, input_format, strategy, order_by, type_column, partition_by,
               options, show) -> None:
    """An Extended SNOOP job: read the input, run the task engine with a progress bar over
    the events, write the matches."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import sparkcep
    from sparkcep.tasks.engine import TaskStats

    if strategy.value not in ("auto", "tasks", "sequential", "reference"):
        _fail(f"strategy {strategy.value!r} runs MATCH_RECOGNIZE queries; a SNOOP query runs with auto, tasks, "
              "sequential or reference")
    stats = TaskStats()
    try:
        t0 = time.perf_counter()
        table = _read_local(input, _format_of(input, input_format))
        with Progress(TextColumn("[bold]matching"), BarColumn(), MofNCompleteColumn(), TextColumn("events"),
                      TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("matching", total=table.num_rows)
            result = sparkcep.snoop(table, text, order_by=order_by, partition_by=tuple(partition_by),
                                    type_column=type_column or None, strategy=strategy.value, stats=stats,
                                    progress=lambda done: bar.update(task, completed=done), **options)
        _write_local(result, output, format.value)
        elapsed = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, text)))
        return
    if show and result.num_rows:
        console.print(_table(result.slice(0, show).to_pandas(), f"first {min(show, result.num_rows)} of "
                             f"{result.num_rows:,} output rows"))
    summary = Table(title="sparkcep run (Extended SNOOP, task engine)", show_header=False)
    for k, v in [("input", f"{input} ({table.num_rows:,} events)"),
                 ("output", f"{output} ({format.value}, {result.num_rows:,} rows)"),
                 ("strategy", strategy.value), ("tasks", f"{stats.tasks:,} ({stats.true_tasks:,} true, "
                                                         f"{stats.dropped:,} dropped as consumed)"),
                 ("matches", f"{stats.fired:,} fired of {stats.final_matches:,} final matches found"),
                 ("time", f"{elapsed:.2f} s ({table.num_rows / max(elapsed, 1e-9):,.0f} events/s)")]:
        summary.add_row(Text(k), Text(v))
    console.print(summary)


# A Parquet input of at most this many rows runs in this process when no Spark master is
# named: Spark's start (5 s here) and first read cost more than the engine does on two
# million rows (RIP's queries run at 3-120 M events/s on one core).
LOCAL_ROWS = 2_000_000


def _small_local_input(input: str, in_format: str, out_format: str, master: str | None, strategy: str,
                       batch: int | None, shared: int | None, text: str) -> int | None:
    """The input's row count where ``sparkcep run`` answers without Spark: no master named
    (--master or SPARKCEP_MASTER), a strategy this process runs (auto, sequential), no
    batches, a clause rather than a SELECT (Spark SQL runs those), Parquet in and out (Arrow
    reads and writes it as Spark does), and at most LOCAL_ROWS rows (read from the files'
    footers). None: start Spark."""
    import os

    if master or os.environ.get("SPARKCEP_MASTER") or strategy not in ("auto", "sequential"):
        return None
    if batch is not None or shared is not None or text.lstrip().upper().startswith(("SELECT", "WITH")):
        return None
    if in_format != "parquet" or out_format != "parquet" or not pathlib.Path(input).exists():
        return None  # (a missing input is told as Spark's path tells it)
    try:
        import pyarrow.dataset as ds

        rows = ds.dataset(input, format="parquet").count_rows()
    except Exception:  # noqa: BLE001 - not readable by Arrow: Spark reads it, or says why it cannot
        return None
    return rows if rows <= LOCAL_ROWS else None


def _query_or_rules(query: pathlib.Path | None, rules: pathlib.Path | None) -> str:
    """The query's text, or for a rules folder the text the error messages and the choice of
    engine read (its rules, each checked now: a mistake is told before Spark starts)."""
    if (query is None) == (rules is None):
        _fail("give --query FILE or --rules FOLDER (one of them)")
    if rules is None:
        if not query.exists():
            _fail(f"query file {str(query)!r} does not exist")
        return query.read_text()
    from sparkcep.language.parser import parse
    from sparkcep.rules.rule_set import in_rule, load_rules

    try:
        found = load_rules(rules)
        for rule in found:
            try:
                parse(rule.text)
            except QueryError as e:
                raise in_rule(e, rule) from None
    except SparkCepError as e:
        _fail(str(e))
    if not found:
        _fail(f"the folder {str(rules)!r} holds no rule (.sql files)")
    return "\n".join(rule.text for rule in found)


def _run_in_process(text: str, input: str, output: str, mode: Mode, show: int, order_by: str | None,
                    type_column: str | None, rows_in: int, rules: pathlib.Path | None = None) -> None:
    """``sparkcep run`` on a small Parquet input: read with Arrow, matched by the engine
    that takes Arrow tables, written as one Parquet file in the folder ``output`` (replaced,
    as Spark's overwrite does)."""
    import shutil

    import sparkcep
    from sparkcep.spark.sink import write_parquet

    t0 = time.perf_counter()
    try:
        table = _read_local(input, "parquet")
        if rules is not None:
            import pyarrow as pa

            result = sparkcep.match_rules(table, rules, mode=mode.value)  # (its rule column as text, as Spark's)
            result = result.cast(result.schema.set(0, result.schema.field(0).with_type(pa.string())))
        else:
            clause = _clause(text, order_by or "time", "event_type" if type_column is None else type_column)
            result = sparkcep.match_recognize(table, clause, mode=mode.value)
        out = pathlib.Path(output)
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()
        out.mkdir(parents=True)
        write_parquet(result, out / "part-00000.parquet")
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, text)))
        return
    elapsed = time.perf_counter() - t0
    if show and result.num_rows:
        console.print(_table(result.slice(0, show).to_pandas(), f"first {min(show, result.num_rows)} of "
                             f"{result.num_rows:,} output rows"))
    summary = Table(title="sparkcep run", show_header=False)
    for k, v in [("input", f"{input} ({rows_in:,} rows)"), ("output", f"{output} (parquet, {result.num_rows:,} rows)"),
                 ("strategy", "sequential, in this process (no Spark: a small local input; --master starts it)"),
                 ("time", f"{elapsed:.2f} s ({rows_in / max(elapsed, 1e-9):,.0f} rows/s end to end)")]:
        summary.add_row(Text(k), Text(v))
    console.print(summary)


def _parses(text: str, order_by: str | None, type_column: str | None) -> None:
    """Raise the QueryError the query text holds, if any (the data's names are checked later)."""
    from sparkcep.language.parser import parse
    from sparkcep.spark.sql import shift_error, split_statement

    if text.lstrip().upper().startswith(("SELECT", "WITH")):
        clause, offset = split_statement(text)[3:5]
        try:
            parse(clause)
        except QueryError as e:
            raise shift_error(e, text, offset) from None
        return
    clause = _clause(text, order_by or "time", "event_type" if type_column is None else type_column)
    if isinstance(clause, str):
        parse(clause)


def _clause(text: str, order_by: str, type_column: str):
    """The query as the engine takes it: MATCH_RECOGNIZE text, or a SASE+ query (PATTERN
    SEQ(...)) parsed into the same syntax tree."""
    if re.match(r"\s*(--[^\n]*\n\s*)*PATTERN\s+SEQ\b", text, re.IGNORECASE):
        from sparkcep.language.sase import parse_sase

        return parse_sase(text, order_by, type_column or None)
    return text


def _table(pdf, title: str) -> Table:
    t = Table(title=title)
    for c in pdf.columns:
        t.add_column(Text(str(c)))
    for row in pdf.itertuples(index=False):
        t.add_row(*[Text(_cell(v)) for v in row])
    return t


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class Workload(StrEnum):
    stock = "stock"
    trades = "trades"


@app.command()
def generate(
    workload: Workload = typer.Argument(..., help="stock: RIP's StockTrade stream; trades: MatchRegex-style trades with random-walk prices"),
    output: str = typer.Option(..., "--output", "-o"),
    rows: int = typer.Option(1_000_000, "--rows", "-n"),
    symbols: int | None = typer.Option(None, "--symbols", help="default 1 for stock, 390 for trades"),
    seed: int = typer.Option(0, "--seed"),
    format: Format = typer.Option(Format.parquet, "--format", "-f"),
) -> None:
    """Write a seeded synthetic event stream."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import stock_trades, trade_stream

    if rows < 0:
        _fail("--rows must not be negative")
    if symbols is not None and symbols < 1:
        _fail("--symbols must be at least 1")
    if workload is Workload.stock:
        pdf = stock_trades(rows, symbols=1 if symbols is None else symbols, seed=seed)
    else:
        pdf = trade_stream(rows, symbols=390 if symbols is None else symbols, seed=seed)
    path = pathlib.Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    if format is Format.parquet:
        write_parquet(pdf, path)
    elif format is Format.csv:
        pacsv.write_csv(pa.Table.from_pandas(pdf, preserve_index=False), path)
    else:
        pdf.to_json(path, orient="records", lines=True, date_format="iso")
    console.print(f"wrote {rows:,} {workload.value} events to {output} ({format.value})")


@app.command()
def explain(
    query: pathlib.Path | None = typer.Option(None, "--query", "-q"),
    rules: pathlib.Path | None = typer.Option(None, "--rules", help="instead of --query: a folder of .sql rules; "
                                              "shows what they share (sorts or shuffles, conditions, copies)"),
    input: str = typer.Option(..., "--input", "-i"),
    input_format: Format | None = typer.Option(None, "--input-format"),
    master: str | None = typer.Option(None, "--master"),
    strategy: Strategy = typer.Option(Strategy.auto, "--strategy"),
    batch: int | None = typer.Option(None, "--batch"),
    mode: Mode = typer.Option(Mode.sql, "--mode"),
    order_by: str = typer.Option("time", "--order-by", help="SASE+ queries: the column that orders events"),
    type_column: str = typer.Option("event_type", "--type-column", help="SASE+ queries: the event type column ('' for none)"),
    picture: str | None = typer.Option(None, "--picture", help="segment queries: draw the plan tree to this PNG"),
    plan: str | None = typer.Option(None, "--plan", help="segment queries: optimized, left_probe, right_probe or sort_merge"),
) -> None:
    """Show how a query is understood, compiled and which strategy runs it (for a folder of
    rules, what they share)."""
    import sparkcep
    from sparkcep.spark.session import get_session

    text = _query_or_rules(query, rules)
    try:
        spark = get_session(master)
        df = read_input(spark, input, _format_of(input, input_format))
        if rules is not None:
            console.print(sparkcep.explain_rules(df, rules, mode=mode.value))
            return
        clause = _clause(text, order_by, type_column)
        options = {"plan": plan} if plan else {}
        console.print(sparkcep.explain(df, clause, picture=picture, strategy=strategy.value, batch=batch,
                                       mode=mode.value, **options))
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, text)))


@app.command()
def profile(
    output: str | None = typer.Option(None, "--output", "-o", help="where to store the weights (default: the "
                                      "user profile the optimizer reads first)"),
) -> None:
    """Measure the segment operators' costs on this machine for the T-REX optimizer."""
    from sparkcep.cli import profile as segment_profile

    with console.status("profiling the segment operators"):
        weights = segment_profile.measure()
    path = segment_profile.save(weights, pathlib.Path(output) if output else None)
    table = Table(title="segment operator weights (ns per unit of work)")
    table.add_column("operator")
    table.add_column("ns", justify="right")
    for k, v in sorted(weights.items()):
        table.add_row(k, f"{v:,.0f}")
    console.print(table)
    console.print(f"stored in {path}")


BENCHMARKS = {
    "rip": "benchmarks.rip_sequential",
    "numpy": "benchmarks.numpy_reference",
    "peers": "benchmarks.peers",
    "matchregex": "benchmarks.matchregex",
    "spark": "benchmarks.spark_strategies",
    "scale": "benchmarks.spark_scale",
    "batches": "benchmarks.rip_batches",
    "sase": "benchmarks.sase",
    "thesis": "benchmarks.thesis",
    "speculative": "benchmarks.tasks_speculative",
    "rip-sb": "benchmarks.rip_sb",
    "trex": "benchmarks.trex",
    "stream": "benchmarks.stream",
    "keys": "benchmarks.keys",
    "first": "benchmarks.first_answer",
    "rules": "benchmarks.rules",
    "rule-stream": "benchmarks.rule_stream",
}


@app.command()
def bench(
    name: str = typer.Argument(..., help="rip, numpy, peers, matchregex, spark, scale, batches, sase, trex, stream, thesis, speculative, keys, first, "
                                    "rules, rule-stream or rip-sb"),
    rows: int | None = typer.Option(None, "--rows", "-n"),
) -> None:
    """Run a benchmark from a checkout of sparkcep (JSON and PNG land in out/bench/)."""
    import subprocess

    module = BENCHMARKS.get(name)
    if module is None:
        _fail(f"unknown benchmark {name!r} (one of {', '.join(BENCHMARKS)})")
    if not pathlib.Path("benchmarks", module.split(".")[1] + ".py").exists():
        _fail("benchmarks live in the sparkcep repository: run this from a checkout")
    cmd = [sys.executable, "-m", module] + (["--rows", str(rows)] if rows is not None else [])
    raise typer.Exit(subprocess.call(cmd))


@app.command()
def warm() -> None:
    """Compile the common kinds of matching kernel into numba's cache now, so that a first
    query does not pause to compile them (run it once after installing, on each node of a
    cluster, as the user that runs the queries: numba's cache is per CPU and per user where
    the package folder is read-only)."""
    from sparkcep import jit
    from sparkcep.cli import warm as kernels

    jit.silence()
    total, t0 = len(kernels.kinds()), time.perf_counter()
    try:
        with err.status("compiling…") as status:
            for i, (kind, seconds, matcher) in enumerate(kernels.warm(), 1):
                console.print(f"[{i:2d}/{total}] {kind.name} ({matcher}): {seconds:.1f} s")
                status.update(f"compiling… ({i} of {total} kinds ready)")
        jit.write_stamp()  # queries over more than a few rows take the kernels at once
    except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
        _fail(str(as_sparkcep_error(e, "sparkcep warm")))
    console.print(f"{total} kinds are in numba's cache ({time.perf_counter() - t0:.0f} s)")


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="sparkcep")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
