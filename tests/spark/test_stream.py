"""sparkcep.stream on real local Spark: JSON files read as a stream (one file per trigger, in
order), matches written by Spark's Parquet file sink (exactly once with its checkpoint); equal
to the batch engine on the same rows; a stopped query restarted from its checkpoint with more
files loses and repeats nothing."""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

import sparkcep
from tests.spark.helpers import classic_env
from tests.tiers import sample

SCHEMA = StructType([StructField("ts", TimestampType()), StructField("k", StringType()), StructField("v", LongType())])
QUERIES = [
    "PARTITION BY k ORDER BY ts MEASURES FIRST(A.ts) AS s, LAST(B.ts) AS e, COUNT(*) AS c "
    "PATTERN (A B+) DEFINE A AS v < 5, B AS v >= PREV(v)",
    "PARTITION BY k ORDER BY ts MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS cls ALL ROWS PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) WITHIN INTERVAL '4' SECOND DEFINE A AS v > 5, B AS v < A.v",
    "ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e, SUM(v) AS total PATTERN (A+) DEFINE A AS v % 2 = 1",
    # EVENT SELECTION (NFA^b): a rise that skips the rows in between.
    "PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e, COUNT(A.*) AS c "
    "EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A{3,} B) WITHIN INTERVAL '20' SECOND "
    "DEFINE A AS v > 2 AND (COUNT(A.*) = 1 OR v > LAST(A.v, 1)), B AS v < 2",
]


def _write(folder: str, name: str, rows: list[dict], order: int) -> None:
    # Written, then renamed into place (a stream must never see half a file), with
    # modification times in order: the file source takes files by modification time.
    tmp = os.path.join(folder, f".{name}.tmp")
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.utime(tmp, (1_700_000_000 + order * 10, 1_700_000_000 + order * 10))
    os.rename(tmp, os.path.join(folder, name))


def _rows(start: int, n: int) -> list[dict]:
    # Two keys; values cycle so that runs rise and fall; two rows share a second now and then.
    return [{"ts": f"2024-01-01T00:{(i // 2) // 60:02d}:{(i // 2) % 60:02d}", "k": "ab"[i % 2],
             "v": (i * 7 + i // 5) % 10} for i in range(start, start + n)]


def _ends(order: int) -> list[list[dict]]:
    # Rows of each key far past the data (v NULL: they join no match and end every run),
    # then one more file that moves the watermark past them.
    return [[{"ts": "2024-01-01T05:00:00", "k": k, "v": None} for k in "ab"],
            [{"ts": "2024-01-01T09:00:00", "k": k, "v": None} for k in "ab"]]


def _run(spark, query: str, src: str, ckpt: str, out: str, **options) -> list:
    stream = spark.readStream.format("json").schema(SCHEMA).option("maxFilesPerTrigger", 1).load(src)
    matches = sparkcep.stream(stream, query, watermark="3 seconds", **options)
    q = (matches.writeStream.format("parquet").option("path", out).outputMode("append")
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    return sorted(map(tuple, spark.read.schema(matches.schema).parquet(out).collect()), key=repr)


def _json_stream(spark, tmp_path, rows: list[dict], files: int):
    """``rows`` in ``files`` JSON files under tmp_path/in, read as a stream one file a trigger."""
    src = tmp_path / "in"
    src.mkdir()
    per = len(rows) // files
    for f in range(files):
        _write(str(src), f"part{f}.json", rows[f * per:(f + 1) * per], f)
    return spark.readStream.format("json").schema(SCHEMA).option("maxFilesPerTrigger", 1).load(str(src))


def _batch(spark, rows: list[dict], query: str) -> list:
    df = spark.createDataFrame([(r["ts"], r["k"], r["v"]) for r in rows], "ts string, k string, v long")
    df = df.selectExpr("CAST(ts AS TIMESTAMP) AS ts", "k", "v")
    return sorted(map(tuple, sparkcep.match_recognize(df, query).collect()), key=repr)


@pytest.mark.parametrize("query", sample(QUERIES, every=4))
def test_stream_equals_batch(spark, tmp_path, query):
    src = tmp_path / "in"
    src.mkdir()
    rows = _rows(0, 120)
    for f in range(4):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    ends = _ends(4)
    _write(str(src), "end0.json", ends[0], 4)
    _write(str(src), "end1.json", ends[1], 5)
    got = _run(spark, query, str(src), str(tmp_path / "ckpt"), str(tmp_path / "out"))
    want = _batch(spark, rows + ends[0], query)
    assert got == want and len(want) > 3


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo"])
def test_rows_out_of_order_within_the_delay_equal_batch(spark, tmp_path, zone):
    """Rows arrive out of order by less than the watermark delay (three seconds), also across
    files: the rows below a bucket's latest event time less the delay are decided at once,
    and no row still to come can fall among them."""
    import random

    src = tmp_path / "in"
    src.mkdir()
    rows = _rows(0, 160)
    shuffled = []
    for i in range(0, len(rows), 4):  # four rows span two seconds: shuffle each group of four
        block = rows[i:i + 4]
        random.Random(i).shuffle(block)
        shuffled += block
    # The rows three and two seconds before each file's last arrive with the next file: after
    # later rows of their keys, as late as the delay allows.
    files = [shuffled[f * 40:(f + 1) * 40] for f in range(4)]
    for f in range(3):
        files[f + 1] = files[f][-8:-4] + files[f + 1]
        files[f] = files[f][:-8] + files[f][-4:]
    for f, part in enumerate(files):
        _write(str(src), f"part{f}.json", part, f)
    ends = _ends(4)
    _write(str(src), "end0.json", ends[0], 4)
    _write(str(src), "end1.json", ends[1], 5)
    # Spark hands timestamps to Python as wall time in the session's zone (east of UTC here).
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        for query in (QUERIES[0], QUERIES[1]) if zone == "UTC" else (QUERIES[0],):
            got = _run(spark, query, str(src), str(tmp_path / f"ckpt{len(query)}"), str(tmp_path / f"out{len(query)}"))
            assert got == _batch(spark, rows + ends[0], query) and got
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_columns_the_query_does_not_read_stay_out_of_the_operator(spark, tmp_path):
    """ONE ROW PER MATCH outputs keys and measures: an unread column never reaches the
    stateful operator (a VARIANT column, which Spark cannot hand to pandas at all), and the
    matches are the batch engine's."""
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    src.mkdir()
    rows = _rows(0, 60)
    _write(str(src), "part0.json", rows, 0)
    ends = _ends(1)
    _write(str(src), "end0.json", ends[0], 1)
    _write(str(src), "end1.json", ends[1], 2)
    stream = spark.readStream.format("json").schema(SCHEMA).option("maxFilesPerTrigger", 1).load(str(src)) \
        .withColumn("unread", F.parse_json(F.lit('{"a": 1}')))
    matches = sparkcep.stream(stream, QUERIES[0], watermark="3 seconds")
    out = str(tmp_path / "out")
    q = (matches.writeStream.format("parquet").option("path", out).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    got = sorted(map(tuple, spark.read.schema(matches.schema).parquet(out).collect()), key=repr)
    assert got == _batch(spark, rows + ends[0], QUERIES[0]) and got


def test_restart_from_checkpoint_loses_and_repeats_nothing(spark, tmp_path):
    query = QUERIES[0]
    src = tmp_path / "in"
    src.mkdir()
    rows = _rows(0, 120)
    for f in range(2):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    ckpt = str(tmp_path / "ckpt")
    out = str(tmp_path / "out")
    first = _run(spark, query, str(src), ckpt, out)
    # More files arrive while the query is down; it resumes from its checkpoint (state of
    # both keys included) and emits only what the new rows settle.
    for f in range(2, 4):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    ends = _ends(4)
    _write(str(src), "end0.json", ends[0], 4)
    _write(str(src), "end1.json", ends[1], 5)
    both = _run(spark, query, str(src), ckpt, out)
    assert first and len(both) > len(first) and set(first) <= set(both)
    assert both == _batch(spark, rows + ends[0], query)


def test_stream_refusals(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    stream = spark.readStream.format("json").schema(SCHEMA).load(str(src))
    with pytest.raises(sparkcep.SparkCepError, match="watermark"):
        sparkcep.stream(stream, QUERIES[0], watermark="")
    with pytest.raises(sparkcep.QueryError, match="STRICT CONTIGUITY with PARTITION BY"):
        sparkcep.stream(stream, "PARTITION BY k ORDER BY ts EVENT SELECTION STRICT CONTIGUITY PATTERN (A B)",
                        watermark="1 second")
    for buckets in (0, 39, 2.5):
        with pytest.raises(sparkcep.SparkCepError, match="buckets must be"):
            sparkcep.stream(stream, QUERIES[0], watermark="1 second", buckets=buckets)
    with pytest.raises(sparkcep.SparkCepError, match="late must be one of"):
        sparkcep.stream(stream, QUERIES[0], watermark="1 second", late="keep")
    with pytest.raises(sparkcep.QueryError, match="no WITHIN"):
        sparkcep.stream(stream, QUERIES[0], watermark="1 second", timeouts=True)
    with pytest.raises(sparkcep.SparkCepError, match="streaming DataFrame"):
        sparkcep.stream(spark.createDataFrame([(1,)], "ts long"), "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A)", watermark="1 second")
    with pytest.raises(sparkcep.QueryError, match="end_of_input") as e:
        sparkcep.stream(stream, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A+ $) DEFINE A AS v > 1", watermark="1 second")
    assert e.value.column is not None and "^" in str(e.value)
    # With the end of the input declared, $ is decided by the flush.
    assert sparkcep.stream(stream, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A+ $) DEFINE A AS v > 1", watermark="1 second",
                           end_of_input=True).isStreaming
    numeric = spark.readStream.format("json").schema("ts long, v long").load(str(src))
    with pytest.raises(sparkcep.SparkCepError, match="number of ts's units"):
        sparkcep.stream(numeric, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A)", watermark="1 second")
    text = spark.readStream.format("json").schema("ts string, v long").load(str(src))
    with pytest.raises(sparkcep.QueryError, match="timestamp or a number"):
        sparkcep.stream(text, "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A)", watermark="1 second")


def test_buckets_spread_evenly_over_spark_partitions(spark):
    """Bucket b's grouping value hashes (Spark's own murmur3) to b in its low bits, so Spark's
    shuffle puts bucket b on partition b mod P for every P dividing the bucket count."""
    from pyspark.sql import functions as F

    from sparkcep.spark.buckets import bucket_values, murmur3_int

    values = bucket_values(32)
    assert len(set(values)) == 32
    got = spark.createDataFrame([(v,) for v in range(-50, 50)] + [(v,) for v in values], "v int") \
        .select("v", F.hash("v").alias("h")).collect()
    assert all(murmur3_int(r.v) == r.h for r in got)
    for parts in (2, 4):
        df = spark.createDataFrame([(v,) for v in values], "v int").repartition(parts, "v")
        placed = dict(df.select("v", F.spark_partition_id().alias("p")).collect())
        assert [placed[v] for v in values] == [b % parts for b in range(32)]


def test_default_buckets_are_one_per_shuffle_partition():
    from sparkcep.spark.buckets import default_buckets

    # One per partition where the spread is exact (a power of two); 32 otherwise.
    assert [default_buckets(p) for p in (1, 2, 4, 8, 16, 32)] == [1, 2, 4, 8, 16, 32]
    assert [default_buckets(p) for p in (0, 3, 6, 12, 64, 200)] == [32] * 6


def test_a_checkpoint_of_the_per_key_operator_is_refused_with_what_to_do(tmp_path):
    import shutil
    import subprocess
    import sys

    from sparkcep.spark.stream import check_checkpoint

    ckpt = tmp_path / "ckpt"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "fixtures", "stream_checkpoint_v1"), ckpt)
    with pytest.raises(sparkcep.SparkCepError, match="new checkpoint"):
        check_checkpoint(str(ckpt))
    check_checkpoint(str(tmp_path / "none"))  # a new checkpoint passes
    (tmp_path / "q.sql").write_text(QUERIES[0])
    (tmp_path / "in").mkdir()
    run = subprocess.run([sys.executable, "-m", "sparkcep.cli.main", "stream", "-q", "q.sql", "-i", "in", "-o", "out",
                          "--checkpoint", "ckpt", "--watermark", "3 seconds"], cwd=tmp_path, capture_output=True,
                         text=True, env=classic_env(COLUMNS="200"))
    assert run.returncode != 0 and "earlier sparkcep.stream" in run.stderr + run.stdout
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_restart_with_other_buckets_is_refused(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write(str(src), "part0.json", _rows(0, 30), 0)
    from sparkcep.spark.buckets import checkpoint_buckets

    ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
    assert checkpoint_buckets(ckpt) is None
    stream = spark.readStream.format("json").schema(SCHEMA).option("maxFilesPerTrigger", 1).load(str(src))
    # The default count: one bucket per shuffle partition (the session has 4).
    q = (sparkcep.stream(stream, QUERIES[0], watermark="3 seconds").writeStream.format("parquet")
         .option("path", out).option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    assert checkpoint_buckets(ckpt) == 4
    _write(str(src), "part1.json", _rows(30, 30), 1)
    q = (sparkcep.stream(stream, QUERIES[0], watermark="3 seconds", buckets=8).writeStream.format("parquet")
         .option("path", out).option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    # Keys would hash into other buckets: Spark refuses the state's type, which holds the count.
    with pytest.raises(Exception, match="STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE") as e:
        q.awaitTermination()
    assert "DecimalType(4,0)" in str(e.value) and "DecimalType(8,0)" in str(e.value)


def test_real_time_mode_refuses_the_stream_today(spark, tmp_path):
    """Spark 4.3's Real-Time Mode runs Update output mode only, and applyInPandasWithState in
    Append mode (a stream of matches is append-only) only under Append: the query is refused
    when it starts, whichever mode is asked. When this test fails, Real-Time Mode has changed:
    try sparkcep.stream on it."""
    events = spark.readStream.format("rate").option("rowsPerSecond", 10).load() \
        .selectExpr("timestamp AS ts", "CAST(value % 2 AS STRING) AS k", "value AS v")
    matches = sparkcep.stream(events, QUERIES[0], watermark="1 second")
    for mode, refusal in (("append", "OUTPUT_MODE_NOT_SUPPORTED"), ("update", "not supported with Update output mode")):
        writer = matches.writeStream.format("console").outputMode(mode).trigger(realTime="5 seconds") \
            .option("checkpointLocation", str(tmp_path / mode))
        with pytest.raises(Exception, match=refusal):
            writer.start().awaitTermination(10)


@pytest.mark.parametrize("call, says", [
    (lambda ev, q: sparkcep.stream(ev, q), "stream(): missing a required argument: 'watermark'"),
    (lambda ev, q: sparkcep.stream(ev, q, watermark="10 minuets"),
     "watermark must be a delay in days, hours, minutes or seconds, such as '10 minutes'; not '10 minuets'"),
    (lambda ev, q: sparkcep.stream(ev, q, watermark="1 second", metrics="yes"), "metrics must be a sparkcep.StreamMetrics"),
    (lambda ev, q: sparkcep.stream(ev, q, watermark="1 second", lat="drop"), "got an unexpected keyword argument 'lat'"),
    (lambda ev, q: sparkcep.run_to_end(ev, q, "out", "ckpt", watermark="1 second", metrics="yes"),
     "metrics must be a sparkcep.StreamMetrics"),
])
def test_a_bad_stream_argument_is_an_option_error(spark, call, says):
    """A stream's arguments are checked before Spark sees them: a watermark Spark cannot read
    names what the user wrote (Spark's own error showed the delay sparkcep adds to it), and
    a missing or unknown argument or a wrong metrics object is an INVALID_OPTION error, not
    an InternalError or a failure inside a Spark task."""
    events = spark.readStream.format("rate").option("rowsPerSecond", 10).load() \
        .selectExpr("timestamp AS ts", "CAST(value % 2 AS STRING) AS k", "value AS v")
    with pytest.raises(sparkcep.QueryError) as e:
        call(events, QUERIES[0])
    assert e.value.code == "INVALID_OPTION" and says in str(e.value), str(e.value)


def _cli_stream(tmp_path, query: str, rows: list[dict], files: int) -> tuple[list[str], dict]:
    """A folder of ``files`` JSON files of ``rows`` and the query file `sparkcep stream` reads;
    the command line (without trigger options) and its environment."""
    import sys

    (tmp_path / "q.sql").write_text(query)
    (tmp_path / "in").mkdir()
    per = len(rows) // files
    for f in range(files):
        _write(str(tmp_path / "in"), f"part{f}.json", rows[f * per:(f + 1) * per], f)
    env = classic_env(SPARKCEP_MASTER="local[2]", COLUMNS="200")
    args = [sys.executable, "-m", "sparkcep.cli.main", "stream", "-q", "q.sql", "-i", "in", "-o", "out",
            "--checkpoint", "ckpt", "--watermark", "3 seconds", "--schema", "ts timestamp, k string, v long"]
    return args, env


def _cli_output_is_batch(spark, tmp_path, rows: list[dict], query: str) -> None:
    import pyarrow.parquet as pq

    got = [r for f in sorted((tmp_path / "out").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    want = _batch(spark, rows, query)
    assert sorted((r["k"], r["s"].replace(tzinfo=None), r["e"].replace(tzinfo=None), r["c"]) for r in got) == \
        sorted((k, s, e, c) for k, s, e, c in want)


def test_command_line_stream_refuses_a_trigger_it_cannot_read(tmp_path):
    """`--trigger soon`: one line naming the option and what it takes (it was Spark's failure
    to parse an interval), exit code 2, nothing run."""
    import subprocess

    args, env = _cli_stream(tmp_path, QUERIES[0], _rows(0, 20), 1)
    r = subprocess.run(args + ["--trigger", "soon"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and not (tmp_path / "out").exists(), r.stdout + r.stderr
    assert "--trigger must be 'available-now', 'continuous' or an interval such as '5 seconds', not 'soon'" in \
        " ".join(r.stderr.split()), r.stderr


@pytest.mark.slow
def test_command_line_stream_with_end_of_input(spark, tmp_path):
    # `sparkcep stream` as a user runs it: a folder of JSON files, Parquet out, then a second
    # run from the checkpoint with more files and --end-of-input: every match exactly once.
    import subprocess

    from sparkcep.spark.buckets import checkpoint_buckets

    query = QUERIES[0]
    rows = _rows(0, 120)
    args, env = _cli_stream(tmp_path, query, rows[:60], 2)
    src = tmp_path / "in"
    # The first run on one core: 2 shuffle partitions, so 2 buckets. The later runs, on two
    # cores (4 partitions), keep the checkpoint's count: they read it back from the checkpoint.
    r = subprocess.run(args, cwd=tmp_path, env=dict(env, SPARKCEP_MASTER="local[1]"), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches in out" in r.stdout and "watermark" in r.stdout
    assert any(ln.startswith("stream: ") for ln in r.stdout.splitlines()), r.stdout  # the status line ended
    assert checkpoint_buckets(str(tmp_path / "ckpt")) == 2
    for f in range(2, 4):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    r = subprocess.run(args + ["--end-of-input"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(ln.startswith("end of input: ") for ln in r.stdout.splitlines()), r.stdout
    _cli_output_is_batch(spark, tmp_path, rows, query)
    # A second end of input is refused: what it would emit is out already.
    r = subprocess.run(args + ["--end-of-input"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "flushed already" in r.stderr


@pytest.mark.slow
def test_late_rows_are_dropped(spark, tmp_path):
    # A row whose event time the watermark has passed never joins a match: the output is
    # the batch output without it.
    query = QUERIES[0]
    src = tmp_path / "in"
    src.mkdir()
    rows = _rows(0, 60)
    _write(str(src), "part0.json", rows[:30], 0)
    _write(str(src), "part1.json", rows[30:], 1)
    _write(str(src), "late.json", [{"ts": "2024-01-01T00:00:01", "k": "a", "v": 3}], 2)
    ends = _ends(3)
    _write(str(src), "end0.json", ends[0], 3)
    _write(str(src), "end1.json", ends[1], 4)
    metrics = sparkcep.StreamMetrics.create(spark)
    got = _run(spark, query, str(src), str(tmp_path / "ckpt"), str(tmp_path / "out"), metrics=metrics)
    assert got == _batch(spark, rows + ends[0], query)
    m = metrics.snapshot()
    assert m["late"] == 1 and m["rows"] == 60 + 2 + 2 and m["matches"] == len(got)
    assert 0 < m["buffered"] <= 6 and m["state_bytes"] > 0  # the rows past the last watermark, two keys


@pytest.mark.slow
def test_late_rows_can_stop_the_query(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write(str(src), "part0.json", _rows(0, 30), 0)
    _write(str(src), "late.json", [{"ts": "2024-01-01T00:00:01", "k": "a", "v": 3}], 1)
    with pytest.raises(sparkcep.DataError, match="arrived after the watermark") as e:
        try:
            _run(spark, QUERIES[0], str(src), str(tmp_path / "ckpt"), str(tmp_path / "out"), late="error")
        except Exception as exc:  # the query's failure, as the CLI reads it
            from sparkcep.spark.wire import reraise as _reraise

            _reraise(exc)
    assert e.value.column == "ts" and e.value.key["k"] == "a"


@pytest.mark.slow
def test_timeouts_side_output(spark, tmp_path):
    # A WITHIN query: the stream's timed-out partial matches (with its end of input) are those
    # of the incremental matcher run over each key's rows at once.
    import pyarrow as pa

    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.batch import compile_for
    from sparkcep.spark.stream import flush, split_timeouts

    query = ("PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e PATTERN (A B+ C) "
             "WITHIN INTERVAL '4' SECOND DEFINE A AS v > 5, B AS v >= 2, C AS v = 0")
    rows = _rows(0, 120)
    stream = _json_stream(spark, tmp_path, rows, 4)
    out = sparkcep.stream(stream, query, watermark="3 seconds", timeouts=True, end_of_input=True)
    ckpt = str(tmp_path / "ckpt")
    q = (out.writeStream.format("parquet").option("path", str(tmp_path / "out")).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    both = spark.read.schema(out.schema).parquet(str(tmp_path / "out")).unionByName(flush(spark, query, ckpt, timeouts=True))
    matches, timeouts = split_timeouts(both)
    got = sorted((r.k, r.start_time, tuple(r.variables), r.rows, r.expired_at) for r in timeouts.collect())
    assert sorted(map(tuple, matches.collect()), key=repr) == _batch(spark, rows, query)

    df = spark.createDataFrame([(r["ts"], r["k"], r["v"]) for r in rows], "ts string, k string, v long")
    df = df.selectExpr("CAST(ts AS TIMESTAMP) AS ts", "k", "v")
    plan, arrow_schema, _ = compile_for(df, query)
    table = df.toArrow()
    want = []
    for k in "ab":
        matcher = IncrementalMatcher(plan, arrow_schema)
        state = matcher.empty_state()
        matcher.add(state, table.filter(pa.compute.equal(table.column("k"), k)).cast(arrow_schema))
        want += [(r["k"], r["start_time"], tuple(r["variables"]), r["rows"], r["expired_at"])
                 for r in matcher.step(state, final=True)[1].to_pylist()]
    assert len(want) > 3
    assert [(k, s.replace(tzinfo=None), v, n, x.replace(tzinfo=None)) for k, s, v, n, x in got] == \
        sorted((k, s.replace(tzinfo=None), v, n, x.replace(tzinfo=None)) for k, s, v, n, x in want)


@pytest.mark.slow
def test_numeric_event_time(spark, tmp_path):
    # Event time a number (seconds here, any unit): the watermark is a number of its units.
    src = tmp_path / "in"
    src.mkdir()
    rows = [{"ts": i // 2, "k": "ab"[i % 2], "v": (i * 7 + i // 5) % 10} for i in range(120)]
    for f in range(4):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    query = QUERIES[0]
    schema = "ts long, k string, v long"
    stream = spark.readStream.format("json").schema(schema).option("maxFilesPerTrigger", 1).load(str(src))
    out = sparkcep.stream(stream, query, watermark=3, end_of_input=True)
    ckpt = str(tmp_path / "ckpt")
    q = (out.writeStream.format("parquet").option("path", str(tmp_path / "out")).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    from sparkcep.spark.stream import flush

    got = spark.read.schema(out.schema).parquet(str(tmp_path / "out")).unionByName(flush(spark, query, ckpt))
    want = sparkcep.match_recognize(spark.createDataFrame([(r["ts"], r["k"], r["v"]) for r in rows], schema), query)
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, want.collect())) and want.count() > 3


@pytest.mark.slow
def test_killed_mid_stream_and_restarted_emits_every_match_once(spark, tmp_path):
    # `sparkcep stream` with a processing-time trigger is killed (SIGKILL) once it has
    # written some micro-batches; a second run from the checkpoint finishes the input: the
    # output has every match exactly once (a replayed batch replaces its own file).
    import signal
    import subprocess
    import time

    query = QUERIES[0]
    rows = _rows(0, 240)
    args, env = _cli_stream(tmp_path, query, rows, 8)
    proc = subprocess.Popen(args + ["--trigger", "1 second"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    out = tmp_path / "out"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(out.glob("batch-*.parquet"))) < 3:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Python workers, mid-stream
    proc.wait()
    written = len(list(out.glob("batch-*.parquet")))
    assert 3 <= written
    r = subprocess.run(args + ["--end-of-input"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    _cli_output_is_batch(spark, tmp_path, rows, query)


@pytest.mark.slow
def test_command_line_timeouts_and_late_error(spark, tmp_path):
    # --timeouts writes the timed-out partial matches beside the matches; --late error stops
    # the stream with one clear line naming the late row.
    import subprocess

    import pyarrow.parquet as pq

    query = ("PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e, COUNT(*) AS c PATTERN (A B+ C) "
             "WITHIN INTERVAL '4' SECOND DEFINE A AS v > 5, B AS v >= 2, C AS v = 0")
    rows = _rows(0, 120)
    args, env = _cli_stream(tmp_path, query, rows, 4)
    r = subprocess.run(args + ["--timeouts", "--end-of-input"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    timeouts = pq.read_table(tmp_path / "out" / "_timeouts")
    assert timeouts.column_names == ["k", "start_time", "variables", "rows", "expired_at"] and timeouts.num_rows > 3
    # Reading the folder whole gives the matches alone (pyarrow, so pandas, and Spark skip _timeouts)
    whole = pq.read_table(tmp_path / "out")
    assert whole.column_names == ["k", "s", "e", "c"] and sum(c.null_count for c in whole.columns) == 0
    assert spark.read.parquet(str(tmp_path / "out")).count() == whole.num_rows
    assert "timed-out partial matches" in r.stdout
    _cli_output_is_batch(spark, tmp_path, rows, query)

    _write(str(tmp_path / "in"), "late.json", [{"ts": "2024-01-01T00:00:01", "k": "b", "v": 3}], 9)
    r = subprocess.run(args[:-7] + ["out2", "--checkpoint", "ckpt2"] + args[-4:] + ["--late", "error"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "arrived after the watermark" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_state_stays_flat_on_a_rate_source(spark, tmp_path):
    # Spark's rate source for about half a minute (some 10^5 rows over 10 keys): the rows in
    # state stay bounded by what the watermark delay holds back, whatever the stream's length.
    import time

    from pyspark.sql import functions as F

    events = (spark.readStream.format("rate").option("rowsPerSecond", 5000).load()
              .select(F.col("timestamp").alias("ts"), (F.col("value") % 10).alias("k"), "value"))
    query = ("PARTITION BY k ORDER BY ts, value MEASURES FIRST(value) AS s, COUNT(*) AS c PATTERN (A B+) "
             "DEFINE A AS value % 7 = 0, B AS value % 7 <> 0 AND value % 11 <> 0")
    metrics = sparkcep.StreamMetrics.create(spark)
    seen: list[dict] = []
    matches = sparkcep.stream(events, query, watermark="1 second", metrics=metrics)
    q = (matches.writeStream.foreachBatch(lambda df, _id: seen.append({**metrics.snapshot(), "out": df.count()}))
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    time.sleep(40)
    q.stop()
    busy = [s for s in seen if s["rows"] > 0]
    assert len(busy) >= 4 and busy[-1]["rows"] > 50_000 and busy[-1]["matches"] > 1000
    half = len(busy) // 2
    # Rows buffered: at most the last watermark delay's rows (plus a batch), early or late.
    peak_early = max(s["buffered"] for s in busy[:half])
    peak_late = max(s["buffered"] for s in busy[half:])
    assert peak_late <= 2 * peak_early + 5000, (peak_early, peak_late)
    assert busy[-1]["buffered"] < busy[-1]["rows"] / 5


def test_run_to_end_writes_every_match_where_readers_see_it(spark, tmp_path):
    """The stream and its end of input in one folder: spark.read.parquet sees every match,
    equal to the batch engine; a second end of input is refused; so is a file sink's folder."""
    rows = _rows(0, 90)
    stream = _json_stream(spark, tmp_path, rows, 3)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    query = QUERIES[0]
    result = sparkcep.run_to_end(stream, query, out, ckpt, watermark="3 seconds")
    got = sorted(map(tuple, spark.read.parquet(out).collect()), key=repr)
    assert got == _batch(spark, rows, query)
    # The end of input added the keys' last matches (a greedy B+ ends only at the input's end).
    assert result["matches"] == len(got) and result["end_of_input_matches"] > 0 and result["micro_batches"] >= 3
    with pytest.raises(sparkcep.SparkCepError, match="flushed already"):
        sparkcep.run_to_end(stream, query, out, ckpt, watermark="3 seconds")
    with pytest.raises(sparkcep.SparkCepError, match="flushed already"):
        sparkcep.flush(spark, query, ckpt)
    # A folder Spark's file sink wrote: its readers would never see what is added beside its log.
    sunk = str(tmp_path / "sunk")
    q = (sparkcep.stream(stream, query, watermark="3 seconds").writeStream.format("parquet").option("path", sunk)
         .option("checkpointLocation", str(tmp_path / "ckpt2")).trigger(availableNow=True).start())
    q.awaitTermination()
    with pytest.raises(sparkcep.SparkCepError, match="_spark_metadata"):
        sparkcep.run_to_end(stream, query, sunk, str(tmp_path / "ckpt3"), watermark="3 seconds")


@pytest.mark.slow
def test_run_to_end_on_an_empty_input_and_after_a_failed_write(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    stream = spark.readStream.format("json").schema(SCHEMA).option("maxFilesPerTrigger", 1).load(str(src))
    query = QUERIES[0]
    # No input at all: nothing to emit, and the end of input is behind it.
    done = sparkcep.run_to_end(stream, query, str(tmp_path / "empty"), str(tmp_path / "ck0"), watermark="3 seconds")
    assert done["matches"] == 0 and done["end_of_input_matches"] == 0
    with pytest.raises(sparkcep.SparkCepError, match="flushed already"):
        sparkcep.run_to_end(stream, query, str(tmp_path / "empty"), str(tmp_path / "ck0"), watermark="3 seconds")
    # The end of input cannot be written (a folder stands where its file goes): a clear error,
    # and the checkpoint is not marked, so the same call succeeds once the way is clear.
    rows = _rows(0, 60)
    for f in range(2):
        _write(str(src), f"part{f}.json", rows[f * 30:(f + 1) * 30], f)
    out, ckpt = tmp_path / "out", str(tmp_path / "ck1")
    (out / "end-of-input.parquet").mkdir(parents=True)
    with pytest.raises(sparkcep.SparkCepError, match="cannot write"):
        sparkcep.run_to_end(stream, query, str(out), ckpt, watermark="3 seconds")
    (out / "end-of-input.parquet").rmdir()
    done = sparkcep.run_to_end(stream, query, str(out), ckpt, watermark="3 seconds")
    assert done["end_of_input_matches"] > 0
    got = sorted(map(tuple, spark.read.parquet(str(out)).collect()), key=repr)
    assert got == _batch(spark, rows, query)
    # A stream told its checkpoint keeps the checkpoint's bucket count, and refuses another.
    from sparkcep.spark.buckets import checkpoint_buckets

    stored = checkpoint_buckets(ckpt)
    other = 8 if stored != 8 else 16
    with pytest.raises(sparkcep.SparkCepError, match=f"holds {stored} buckets"):
        sparkcep.stream(stream, query, watermark="3 seconds", checkpoint=ckpt, buckets=other)


def test_a_folder_with_timeouts_where_readers_see_them_is_refused(tmp_path):
    # An earlier version wrote timeouts to out/timeouts/, which readers of out/ merge in as
    # rows of NULLs: such a folder is refused with what to do, not appended to.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkcep.spark.sink import FolderSink

    (tmp_path / "out" / "timeouts").mkdir(parents=True)
    pq.write_table(pa.table({"k": [1]}), tmp_path / "out" / "timeouts" / "batch-0000000001.parquet")
    with pytest.raises(sparkcep.SparkCepError, match="move its files into .*_timeouts"):
        FolderSink(str(tmp_path / "out"), timeouts=True)
    (tmp_path / "out" / "timeouts").rename(tmp_path / "out" / "_timeouts")
    FolderSink(str(tmp_path / "out"), timeouts=True)


def test_values_cross_the_pandas_hand_off_exactly(spark, tmp_path):
    """applyInPandasWithState hands rows over as pandas, both ways: a BIGINT holding a NULL
    (float64 there) keeps every digit past 2^53, a double keeps NaN apart from NULL, and
    event time in epoch milliseconds (read as seconds, far past pandas' year 2262) runs,
    and timestamps before 1677 or after 2262 (past pandas' nanoseconds; zoned, and wall
    time) keep every microsecond. The first file's matches go out while the stream runs,
    the rest at its end; all equal match_recognize on the same rows."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = 1_700_000_000_000
    times = [dt.datetime(2300, 1, 1, 0, 0, 1), None, dt.datetime(1500, 6, 1, 12, 34, 56, 789012),
             dt.datetime(2024, 3, 31, 1, 30), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]
    table = pa.table({"k": ["X"] * 10, "ts": [t0 + 1000 * i for i in range(10)],
                      "id": pa.array([2**53 + 1, None, 2**60 + 1, -(2**63), 2**63 - 1] * 2, pa.int64()),
                      "f": pa.array([1.0, float("nan"), None, 3.0, -0.5] * 2),
                      "t": pa.array(times * 2, pa.timestamp("us", "UTC")),
                      "w": pa.array(times[::-1] * 2, pa.timestamp("us"))})
    (tmp_path / "in").mkdir()
    for i in range(2):  # modification times in order: the file source takes files by them
        path = str(tmp_path / "in" / f"part-{i}.parquet")
        pq.write_table(table.slice(5 * i, 5), path)
        os.utime(path, (1_700_000_000 + i * 10, 1_700_000_000 + i * 10))
    query = ("PARTITION BY k ORDER BY ts MEASURES FIRST(id) AS first_id, count_if(f IS NULL) AS nulls, "
             "count_if(f <> f) AS nans, MAX(f) AS top, MIN(t) AS first_t, LAST(w) AS last_w "
             "ALL ROWS PER MATCH PATTERN (A)")
    events = (spark.readStream.format("parquet").schema(spark.read.parquet(str(tmp_path / "in")).schema)
              .option("maxFilesPerTrigger", 1).load(str(tmp_path / "in")))
    out = str(tmp_path / "out")
    result = sparkcep.run_to_end(events, query, out, str(tmp_path / "ckpt"), watermark=500)
    assert result["end_of_input_matches"] < result["matches"] == 10  # some went out while it ran
    got = pq.read_table(out).sort_by("ts").to_pylist()
    expected = sparkcep.match_recognize(table, query).to_pylist()
    assert repr(got) == repr(expected)  # repr: NaN equals NaN
    assert [r["id"] for r in got] == table.column("id").to_pylist() and sum(r["nans"] for r in got) == 2
    assert [r["t"] for r in got] == table.column("t").to_pylist() and [r["w"] for r in got] == table.column("w").to_pylist()


@pytest.mark.slow
def test_run_to_end_with_a_space_in_the_checkpoint_path(spark, tmp_path):
    """Spark's state reader looks for a checkpoint under its escaped name (my%20data): the
    end of input reads it through a link, and gives every match."""
    rows = _rows(0, 40)
    stream = _json_stream(spark, tmp_path, rows, 2)
    out, ckpt = str(tmp_path / "my data" / "out"), str(tmp_path / "my data" / "ckpt")
    result = sparkcep.run_to_end(stream, QUERIES[0], out, ckpt, watermark="3 seconds")
    assert result["end_of_input_matches"] > 0
    assert sorted(map(tuple, spark.read.parquet(out).collect()), key=repr) == _batch(spark, rows, QUERIES[0])
