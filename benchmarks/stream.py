"""sparkcep.stream on Spark local[2]: steady-state throughput and latency.

Workload: RIP's StockTrade stream (50 symbols by default, a trade a second) in Parquet files of 100 000
rows, RIP's Q7 per symbol (MAXLENGTH 100).

- Throughput, steady state: the median over micro-batches (the first excluded) of
  numInputRows / triggerExecution from StreamingQueryProgress, with one file (100 000 rows)
  and two files (200 000 rows) per micro-batch, noop sink. In the same run, for ratios: the
  pass-through ceiling of the operator sparkcep.stream uses (the same plan — watermark,
  hash buckets, applyInPandasWithState with a small state per bucket — reading every row and
  emitting nothing) and the batch engine on the same rows in memory.
- Exactness: the stream's matches plus its end-of-input flush equal the batch engine's.
- State: bytes per key in the checkpoint's state after the run (the buckets' rows and integers).
- Latency at steady rates (10 000, 50 000, 100 000 events/s, ≥ 3 runs each): a writer
  publishes one file a second while the query runs with Spark's default trigger; a match's
  latency runs from the publication of the file holding its last row to the end of the
  micro-batch that emitted it (median and p99 per rate, over all runs).

Prints a summary line, writes out/bench/stream.json and stream.png (stream-N-keys.* with --symbols N).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    # 2 M rows: over 1 M, half the 100 000-row micro-batches were still warming up (the
    # JVM's JIT; their times fell from 1.2 s to 0.7 s), so their median was no steady state.
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--symbols", type=int, default=50, help="PARTITION BY keys (symbols)")
    ap.add_argument("--rates", default="10000,50000,100000", help="events per second of the latency runs "
                    "(empty: none)")
    ap.add_argument("--runs", type=int, default=3, help="latency runs per rate")
    ap.add_argument("--seconds", type=int, default=12, help="length of each latency run")
    args = ap.parse_args()

    import pyarrow.parquet as pq

    import sparkcep
    from sparkcep.spark.session import get_session
    from sparkcep.workloads import rip
    from sparkcep.workloads.stock import stock_trades

    out = pathlib.Path(args.out)
    work = out / "stream_work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    trades = _trades(stock_trades, args.rows, seed=1, symbols=args.symbols)
    files = -(-args.rows // 100_000)
    for f in range(files):
        pq.write_table(trades.slice(f * 100_000, 100_000), work / "in" / f"part{f:04d}.parquet")
    clause = rip.query("Q7", maxlength=100, partition_by="symbol")

    t0 = time.perf_counter()
    want = sparkcep.match_recognize(trades, clause).num_rows
    batch_rate = args.rows / (time.perf_counter() - t0)

    spark = get_session(args.master, config={"spark.sql.shuffle.partitions": "2"})
    result: dict = {"rows": args.rows, "symbols": args.symbols, "master": args.master, "matches": want,
                    "batch_engine_rows_per_s": batch_rate}
    start = time.perf_counter()

    def say(step: str) -> None:  # a long job: one line per step
        print(f"[{time.perf_counter() - start:6.0f} s] {step}", flush=True)

    say("warm-up (starts the Python workers)")
    _throughput(spark, work, clause, files_per_batch=1, tag="warm", limit_files=2)
    for per in (1, 2):
        say(f"throughput, {per * 100_000:,}-row micro-batches")
        run = _throughput(spark, work, clause, files_per_batch=per, tag=f"x{per}")
        assert run["matches"] == want, f"stream {run['matches']} matches, batch engine {want}"
        say(f"pass-through ceiling, {per * 100_000:,}-row micro-batches")
        run["passthrough_rows_per_s"] = _passthrough(spark, work, files_per_batch=per, tag=f"p{per}")
        result[f"x{per}"] = run
    latency = {}
    for rate in (int(r) for r in args.rates.split(",") if r.strip()):
        runs = []
        for i in range(args.runs):
            say(f"latency at {rate:,} events/s, run {i + 1} of {args.runs}")
            runs.append(_latency(spark, work, clause, rate, args.seconds, tag=f"{rate}-{i}"))
        lat = sorted(x for r in runs for x in r["latencies"])
        latency[str(rate)] = {"runs": runs, "matches": len(lat), "median": statistics.median(lat) if lat else None,
                              "p99": _p99(lat), "max": lat[-1] if lat else None}
    result["latency"] = latency
    name = "stream" if args.symbols == 50 else f"stream-{args.symbols}-keys"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    _plot(result, out / f"{name}.png")
    x1, x2 = result["x1"], result["x2"]
    lat_text = "; ".join(f"{int(r):,}/s median {v['median']:.2f} s p99 {v['p99']:.2f} s" for r, v in latency.items()
                         if v["median"] is not None)
    print(f"stream: {args.rows:,} events, Q7 over {args.symbols:,} keys, {args.master}: steady state "
          f"{x1['rows_per_s']:,.0f} rows/s "
          f"with 100 000-row micro-batches ({x1['rows_per_s'] / x1['passthrough_rows_per_s']:.0%} of the operator's "
          f"pass-through {x1['passthrough_rows_per_s']:,.0f}; goal 150 000), {x2['rows_per_s']:,.0f} with 200 000 "
          f"({x2['rows_per_s'] / x2['passthrough_rows_per_s']:.0%} of {x2['passthrough_rows_per_s']:,.0f}; goal "
          f"200 000); batch engine {batch_rate:,.0f} rows/s; {want:,} matches = batch engine; state "
          f"{x1['state_bytes_per_key']:,.0f} bytes per key; latency {lat_text}; JSON and PNG in {out}/")


def _trades(stock_trades, rows: int, seed: int, symbols: int = 50):
    import pyarrow as pa

    t = pa.Table.from_pandas(stock_trades(rows, symbols=symbols, seed=seed), preserve_index=False)
    return t.set_column(3, "timestamp", t.column("timestamp").cast(pa.timestamp("us", "UTC")))


def _p99(xs: list[float]) -> float | None:
    return xs[max(int(len(xs) * 0.99) - 1, 0)] if xs else None


def _steady(progress: list[dict]) -> tuple[float, list[float]]:
    """Median rows/s over the micro-batches that read rows, the first excluded."""
    batches = [p for p in progress if p["numInputRows"]]
    rates = [p["numInputRows"] / (p["durationMs"]["triggerExecution"] / 1000) for p in batches[1:]]
    return (statistics.median(rates) if rates else 0.0), [p["durationMs"]["triggerExecution"] / 1000 for p in batches]


def _throughput(spark, work: pathlib.Path, clause: str, files_per_batch: int, tag: str,
                limit_files: int | None = None, buckets: int | None = None) -> dict:
    """One availableNow run over the files, then the end of input flushed."""
    import sparkcep
    from sparkcep.spark.stream import StreamMetrics, flush, read_bucket

    schema = spark.read.parquet(str(work / "in")).schema
    source = spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_batch).parquet(str(work / "in"))
    if limit_files is not None:  # a short run: the first files' rows only
        source = source.where(f"tradeId <= {limit_files * 100_000}")
    metrics = StreamMetrics.create(spark)
    counts: list[int] = []
    matches = sparkcep.stream(source, clause, watermark="10 seconds", metrics=metrics, buckets=buckets)
    ckpt = str(work / f"ckpt-{tag}")
    q = (matches.writeStream.foreachBatch(lambda df, _id: counts.append(df.count()))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    q.awaitTermination()
    rate, durations = _steady(q.recentProgress)
    blobs = [bytes(r[0]) for r in spark.read.format("statestore").load(ckpt).select("value.groupState.blob").collect()]
    keys = sum(read_bucket(b)[1].count for b in blobs)
    state_bytes = sum(len(b) for b in blobs)
    rest = flush(spark, clause, ckpt).count()
    return {"rows_per_s": rate, "batch_seconds": durations, "matches": sum(counts) + rest, "flushed": rest,
            "keys": keys, "state_bytes": state_bytes, "state_bytes_per_key": state_bytes / max(keys, 1),
            "gauges": metrics.snapshot()}


def _passthrough(spark, work: pathlib.Path, files_per_batch: int, tag: str, buckets: int | None = None) -> float:
    """The same plan as sparkcep.stream's (watermark column, hash buckets,
    applyInPandasWithState with event-time timeouts and a small state per bucket), reading
    every row and emitting nothing: the operator's ceiling here."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from sparkcep.spark.buckets import bucket_column, session_buckets

    if buckets is None:  # sparkcep.stream's default
        buckets = session_buckets(spark)

    def read_all(_key, pdfs, state):
        rows = sum(len(pdf) for pdf in pdfs)
        state.update((rows.to_bytes(8, "big") * 16, None))
        return iter(())

    schema = spark.read.parquet(str(work / "in")).schema
    source = spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_batch).parquet(str(work / "in"))
    data = (source.withColumn("et", F.col("timestamp") + F.expr("INTERVAL 36525 DAYS"))
            .withWatermark("et", "36525 days 10 seconds").withColumn("b", bucket_column(["symbol"], buckets)))
    out = data.groupBy("b").applyInPandasWithState(
        read_all, outputStructType="x long", stateStructType=f"blob binary, buckets decimal({buckets}, 0)",
        outputMode="append", timeoutConf=GroupStateTimeout.EventTimeTimeout)
    q = (out.writeStream.format("noop").option("checkpointLocation", str(work / f"ckpt-{tag}"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    return _steady(q.recentProgress)[0]


def _latency(spark, work: pathlib.Path, clause: str, rate: int, seconds: int, tag: str) -> dict:
    """Files of ``rate`` rows published once a second while the query runs."""
    import threading

    import numpy as np
    import pyarrow.parquet as pq

    import sparkcep
    from sparkcep.workloads.stock import stock_trades

    src = work / f"steady-{tag}"
    src.mkdir()
    trades = _trades(stock_trades, rate * seconds, seed=2)
    ids = trades.column("tradeId").to_numpy()
    file_of = dict(zip(ids.tolist(), (np.arange(len(ids)) // rate).tolist(), strict=True))
    pq.write_table(trades.slice(0, 0), work / "schema.parquet")
    schema = spark.read.parquet(str(work / "schema.parquet")).schema
    matches = sparkcep.stream(spark.readStream.schema(schema).parquet(str(src)), clause, watermark="10 seconds")
    published: dict[int, float] = {}
    latencies: list[float] = []
    started = threading.Event()

    def collect(df, _id) -> None:
        last = df.select("last_trade").toArrow().column(0).to_pylist()
        now = time.time()
        latencies.extend(now - published[file_of[t]] for t in last if file_of[t] in published)
        started.set()

    q = matches.writeStream.foreachBatch(collect).option("checkpointLocation", str(work / f"ckpt-{tag}")).start()
    # The first micro-batch (no rows) starts the Python workers: publish once it has run.
    while not q.recentProgress:
        time.sleep(0.2)
    for f in range(seconds):
        time.sleep(max(0.0, 1.0 - (time.time() % 1.0)) if f else 0.0)
        tmp = src / f".part{f:04d}.tmp"
        pq.write_table(trades.slice(f * rate, rate), tmp)
        published[f] = time.time()
        tmp.rename(src / f"part{f:04d}.parquet")
    q.processAllAvailable()
    q.stop()
    lat = sorted(latencies)
    return {"rate": rate, "matches": len(lat), "median": statistics.median(lat) if lat else None, "p99": _p99(lat),
            "latencies": lat}


def _plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4))
    names = ["100 000-row\nmicro-batches", "200 000-row\nmicro-batches"]
    ours = [result["x1"]["rows_per_s"], result["x2"]["rows_per_s"]]
    ceiling = [result["x1"]["passthrough_rows_per_s"], result["x2"]["passthrough_rows_per_s"]]
    xs = range(len(names))
    a.bar([x - 0.2 for x in xs], ours, width=0.4, label="sparkcep.stream, Q7")
    a.bar([x + 0.2 for x in xs], ceiling, width=0.4, label="operator pass-through")
    a.axhline(result["batch_engine_rows_per_s"], color="tab:green", ls="--",
              label=f"batch engine, same rows ({result['batch_engine_rows_per_s']:,.0f}/s)")
    a.set_xticks(list(xs), names)
    a.set_ylabel("rows/s, steady state")
    a.set_yscale("log")
    a.set_title(f"{result['rows']:,} events, {result['symbols']:,} keys, {result['master']}", fontsize=9)
    a.legend(fontsize=8)
    for run, label in ((result["x1"], "100 000"), (result["x2"], "200 000")):
        b.plot(range(len(run["batch_seconds"])), run["batch_seconds"], marker="o", label=f"{label} rows")
    b.set_xlabel("micro-batch")
    b.set_ylabel("triggerExecution (s)")
    b.set_title("micro-batch durations (the first starts the query)", fontsize=9)
    b.legend(fontsize=8)
    lat = result["latency"]
    rates = sorted(lat, key=int)
    if not rates:
        c.set_visible(False)
    else:
        c.boxplot([sorted(x for r in lat[k]["runs"] for x in r["latencies"]) or [0] for k in rates],
                  tick_labels=[f"{int(k):,}/s" for k in rates], whis=(1, 99), showfliers=False)
    c.set_ylabel("latency: file published → match emitted (s)")
    c.set_title("latency at steady rates (whiskers: p1–p99)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
