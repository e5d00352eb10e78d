"""A Spark Connect session (a local Connect server, as hosted and serverless Spark offer
only Connect): match_recognize on every strategy, explain, sparkcep.sql and the SQL table
function, Extended SNOOP's tasks on Spark and a stream ended by run_to_end (with its
StreamMetrics) give the classic session's answer. In a fresh process, so that its Connect server and the tests' classic session do
not share a JVM."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd

import sparkcep

QUERY = ("ORDER BY ts MEASURES FIRST(A.p) AS top, LAST(C.p) - FIRST(A.p) AS gain, COUNT(*) AS n "
         "PATTERN (A B+ C+) DEFINE B AS p < PREV(p), C AS p > PREV(p)")
DATA = {"ts": list(range(40)), "p": [(i * 7) % 11 + (i % 3) for i in range(40)]}

SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pandas as pd
    from pyspark.sql import SparkSession
    import sparkcep

    spark = (SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    query, data = json.loads(sys.argv[1])
    df = spark.createDataFrame(pd.DataFrame(data))
    out = {"explain": sparkcep.explain(df, query).splitlines()[0]}
    for strategy in ("sequential", "partition", "auto", "runs"):
        try:
            got = sparkcep.match_recognize(df, query, strategy=strategy).toPandas()
            out[strategy] = got.sort_values("top", kind="stable").to_dict("records")
        except Exception as e:
            out[strategy] = f"{type(e).__name__}: {e}"
    # keyed: the partition strategy's shuffle width comes from the session's parallelism
    keyed = sparkcep.match_recognize(df.withColumn("k", df.ts % 3), "PARTITION BY k " + query, strategy="partition")
    out["keyed"] = keyed.toPandas().sort_values(["k", "top"], kind="stable").to_dict("records")
    # and the run strategy over keys: sorted once, keys cut at partitions of 8 rows
    keyed = sparkcep.match_recognize(df.withColumn("k", df.ts % 3), "PARTITION BY k " + query, strategy="runs",
                                     batch=8)
    out["keyed runs"] = keyed.toPandas().sort_values(["k", "top"], kind="stable").to_dict("records")
    # many rules at once: one shuffle for the keyed ones, the run strategy for the other
    rules = {"keyed": "PARTITION BY k " + query, "whole": query}
    got = sparkcep.match_rules(df.withColumn("k", df.ts % 3), rules, strategy="auto")
    got = got.toPandas().sort_values(["rule", "k", "top"], kind="stable")
    out["rules"] = got.astype(object).where(got.notna(), None).to_dict("records")
    # SQL: sparkcep.sql, and the table function from spark.sql
    df.createOrReplaceTempView("events")
    # (the word sparkcep names its result by, and braces, in the user's text stay as written)
    got = sparkcep.sql(spark, "SELECT top, n, '{sparkcep_match}' AS tag FROM events MATCH_RECOGNIZE (" + query
                       + ") AS m WHERE n > 2")
    out["sql"] = got.toPandas().sort_values("top", kind="stable").to_dict("records")
    sparkcep.register_table_function(spark)
    got = spark.sql("SELECT * FROM match_recognize(TABLE(events), '" + query + "')")
    out["table function"] = got.toPandas().sort_values("top", kind="stable").to_dict("records")
    df.withColumn("k", df.ts % 3).createOrReplaceTempView("keyed_events")
    got = spark.sql("SELECT * FROM match_recognize(TABLE(keyed_events), 'PARTITION BY k " + query + "')")
    out["keyed table function"] = got.toPandas().sort_values(["k", "top"], kind="stable").to_dict("records")
    # Extended SNOOP, its tasks evaluated by Spark tasks
    events = pd.DataFrame({"ts": range(60), "type": [("A", "B", "C")[(i * 7) % 3] for i in range(60)],
                           "x": [(i * 5) % 6 for i in range(60)]})
    snoop = ("SELECT * FROM SEQ(A; B; C) WHERE C.x > A.x RETURN A.ts AS a, B.ts AS b, C.ts AS c "
             "CONSUMING A, B, C")
    got = sparkcep.snoop(spark.createDataFrame(events), snoop, order_by="ts", type_column="type", window=10,
                         strategy="tasks", block=16)
    out["snoop"] = [got.toPandas().to_dict("records"),
                    sparkcep.snoop(events, snoop, order_by="ts", type_column="type", window=10,
                                   strategy="sequential").to_dict("records")]
    # The run strategy over ordered Parquet: read once, bodies that read match numbers run
    # again (a second read, checked by digest); a shuffled input is not read as it lies.
    import tempfile
    import pyarrow as pa, pyarrow.parquet as pq
    from sparkcep.spark import as_read
    from sparkcep.spark.batch import SparkRun, match_recognize_spark
    trades = pd.DataFrame({"ts": range(3000), "v": [(i * 7) % 101 for i in range(3000)]})
    path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    pq.write_table(pa.Table.from_pandas(trades, preserve_index=False), path, row_group_size=300)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1k")
    clause = ("ORDER BY ts MEASURES FIRST(ts) AS s, MATCH_NUMBER() * 2 AS m, LAST(v) AS lv "
              "PATTERN (A B{1,5}) DEFINE A AS v > 60, B AS v < PREV(v) AND v < NEXT(v)")
    run = SparkRun("runs", "requested")
    got = match_recognize_spark(spark.read.parquet(path), clause, strategy="runs", shared=10, run=run).toPandas()
    shuffled = spark.read.parquet(path).repartition(3)
    out["as read"] = [got.sort_values("s").to_dict("records"), run.reason, run.stats.get("again", 0),
                      as_read.reads_alike(spark.read.parquet(path)), as_read.reads_alike(shuffled), clause,
                      trades.to_dict("list")]
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    # A stream over JSON files, ended: run_to_end
    d = tempfile.mkdtemp()
    os.mkdir(os.path.join(d, "in"))
    rows = [{"ts": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}", "k": "ab"[i % 2], "p": (i * 7) % 11 + (i % 3)}
            for i in range(90)]
    for f in range(3):
        path = os.path.join(d, "in", f"part{f}.json")
        with open(path, "w") as fh:
            fh.write("\\n".join(json.dumps(r) for r in rows[f * 30:(f + 1) * 30]))
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the stream reads files oldest first
    events = (spark.readStream.format("json").schema("ts timestamp, k string, p long")
              .option("maxFilesPerTrigger", 1).load(os.path.join(d, "in")))
    stream_query = "PARTITION BY k " + query
    metrics = sparkcep.StreamMetrics.create(spark)  # (observed per micro-batch: Connect has no accumulators)
    done = sparkcep.run_to_end(events, stream_query, os.path.join(d, "out"), os.path.join(d, "ck"),
                               watermark="3 seconds", metrics=metrics)
    got = spark.read.parquet(os.path.join(d, "out")).toPandas()
    out["stream"] = [done["matches"], got.sort_values(["k", "top", "gain", "n"]).to_dict("records"), rows,
                     stream_query]
    out["metrics"] = [metrics.snapshot(), done]
    # A stream of rules over the same files, ended (a folder read on the server: same machine)
    folder = os.path.join(d, "rules")
    os.mkdir(folder)
    for name, text in RULES.items():
        with open(os.path.join(folder, name + ".sql"), "w") as fh:
            fh.write(text)
    done = sparkcep.run_to_end(events, path=os.path.join(d, "rules-out"), checkpoint=os.path.join(d, "rules-ck"),
                               rules=folder, event_time="ts", partition_by="k", watermark="3 seconds")
    got = spark.read.parquet(os.path.join(d, "rules-out")).toPandas()
    out["rule stream"] = [done["matches"], [[r, json.loads(m)] for r, m in zip(got["rule"], got["match"])]]
    # the session's task slots, asked again where a range's width is set apart from them
    from sparkcep.spark import session as sessions
    sessions._parallelism.clear()
    spark.conf.set("spark.sql.leafNodeDefaultParallelism", "5")
    out["parallelism"] = [sessions.parallelism(spark), spark.conf.get("spark.sql.leafNodeDefaultParallelism")]
    print("RESULT " + json.dumps(out, default=str))
    spark.stop()
""")


RULES = {"dip": "PARTITION BY k " + QUERY,
         "high": "PARTITION BY k ORDER BY ts MEASURES LAST(B.p) AS high PATTERN (A B) DEFINE A AS p < 5, B AS p > 9"}


def test_a_connect_session_gives_the_classic_answers():
    script = SCRIPT.replace("import sparkcep\n", f"import sparkcep\nRULES = {RULES!r}\n", 1)
    done = subprocess.run([sys.executable, "-c", script, json.dumps([QUERY, DATA])], capture_output=True, text=True,
                          timeout=600)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(lines[0].removeprefix("RESULT "))
    want = sparkcep.match_recognize(pd.DataFrame(DATA), QUERY).sort_values("top", kind="stable")
    want = json.loads(json.dumps(want.to_dict("records"), default=str))
    assert want, "the query should find matches"
    for strategy in ("sequential", "partition", "auto", "runs", "table function"):
        assert got[strategy] == want, (strategy, got[strategy])
    assert got["parallelism"] == [2, "5"]  # local[2], and the user's setting kept
    assert got["sql"] == [{"top": r["top"], "n": r["n"], "tag": "{sparkcep_match}"} for r in want if r["n"] > 2]
    assert got["snoop"][0] == got["snoop"][1] and len(got["snoop"][1]) > 3
    frame = pd.DataFrame(DATA).assign(k=lambda d: d.ts % 3)
    keyed = sparkcep.match_recognize(frame, "PARTITION BY k " + QUERY).sort_values(["k", "top"], kind="stable")
    assert got["keyed"] == got["keyed runs"] == got["keyed table function"] == json.loads(json.dumps(keyed.to_dict("records"), default=str))
    rules = {"keyed": "PARTITION BY k " + QUERY, "whole": QUERY}
    local = sparkcep.match_rules(frame, rules).sort_values(["rule", "k", "top"], kind="stable")
    assert got["rules"] == json.loads(json.dumps(local.astype(object).where(local.notna(), None).to_dict("records"),
                                                 default=str))
    matches, streamed, rows, stream_query = got["stream"]
    frame = pd.DataFrame(rows).assign(ts=lambda d: pd.to_datetime(d.ts))
    batch = sparkcep.match_recognize(frame, stream_query).sort_values(["k", "top", "gain", "n"])
    assert matches == len(batch) > 3
    assert streamed == json.loads(json.dumps(batch.to_dict("records"), default=str))
    rows_got, reason, again, alike, shuffled_alike, clause, trades = got["as read"]
    want = sparkcep.match_recognize(pd.DataFrame(trades), clause).sort_values("s")
    assert rows_got == json.loads(json.dumps(want.to_dict("records"), default=str)) and len(rows_got) > 100
    assert "read once" in reason and again > 0 and alike and not shuffled_alike, (reason, again)
    # StreamMetrics, observed per micro-batch: every row accepted, none late, the stream's own
    # matches (those the end of input added come from flush, not the stream), state left
    figures, done = got["metrics"]
    assert figures["rows"] == len(rows) and figures["late"] == 0 and figures["timeouts"] == 0, figures
    assert figures["matches"] == done["matches"] - done["end_of_input_matches"] > 0, (figures, done)
    assert figures["buffered"] > 0 and figures["state_bytes"] > 0, figures
    assert got["explain"] == sparkcep.explain(pd.DataFrame(DATA), QUERY).splitlines()[0]
    # The stream of rules: each rule's matches (JSON) are the batch engine's over every row.
    count, rows_of_rules = got["rule stream"]
    assert count == len(rows_of_rules) > 3
    for name, text in RULES.items():
        mine = sorted(json.dumps(m, sort_keys=True) for r, m in rows_of_rules if r == name)
        want = sparkcep.match_recognize(frame, text)
        assert mine == sorted(json.dumps(r, sort_keys=True) for r in json.loads(json.dumps(
            want.to_dict("records"), default=str))), name
