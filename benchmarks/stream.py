"""sparkcep.stream throughput on Spark local[2]: RIP's StockTrade stream (50 symbols, one
trade a second) cut into Parquet files read one per micro-batch, RIP's Q7 per symbol
(MAXLENGTH 100), every micro-batch's matches collected by foreachBatch, then the end of input
flushed. Reports events/s end to end, each micro-batch's duration (median, p99: the latency
a file waits from the start of its batch to its commit), the state (keys, bytes) after each
batch, and checks the total against the batch engine. Then latency at a steady rate: a
writer publishes one file a second (``--rate`` events each) while the query runs with
Spark's default trigger; a match's latency is from the publication of the file holding its
last row to the end of the micro-batch that emitted it (median, p99). Writes
out/bench/stream.json and stream.png."""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--rate", type=int, default=10_000, help="events per second in the latency run")
    ap.add_argument("--seconds", type=int, default=20, help="length of the latency run")
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    import sparkcep
    from sparkcep.spark.session import get_session
    from sparkcep.workloads import rip
    from sparkcep.workloads.stock import stock_trades

    out = pathlib.Path(args.out)
    work = out / "stream_work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    trades = pa.Table.from_pandas(stock_trades(args.rows, symbols=50, seed=1), preserve_index=False)
    trades = trades.set_column(3, "timestamp", trades.column("timestamp").cast(pa.timestamp("us", "UTC")))
    per = -(-args.rows // args.files)
    for f in range(args.files):
        pq.write_table(trades.slice(f * per, per), work / "in" / f"part{f:04d}.parquet")
    clause = rip.query("Q7", maxlength=100, partition_by="symbol")

    spark = get_session(args.master, config={"spark.sql.shuffle.partitions": "2"})
    # A short run first: the Python workers start once, outside the measured runs.
    _throughput(spark, work, clause, per_trigger=args.files, tag="warm", warm_up=True)
    runs = {n: _throughput(spark, work, clause, per_trigger=n, tag=f"x{n}")
            for n in sorted({1, max(args.files // 2, 1), args.files})}
    want = sparkcep.match_recognize(trades, clause).num_rows
    for n, r in runs.items():
        assert r["matches"] == want, f"stream {r['matches']} matches ({n} files a batch), batch engine {want}"
    result = {"rows": args.rows, "files": args.files, "master": args.master, "matches": want,
              "runs": {str(n): r for n, r in runs.items()}, **runs[1]}
    result["latency"] = _latency(spark, work, clause, args.rate, args.seconds)
    lat = result["latency"]
    (out / "stream.json").write_text(json.dumps(result, indent=2))
    _plot(result, out / "stream.png")
    speeds = ", ".join(f"{r['events_per_second']:,.0f} events/s with {r['rows_per_batch']:,}-row micro-batches"
                       for r in runs.values())
    print(f"stream: {args.rows:,} events through sparkcep.stream on {args.master}: {speeds} (goal 200 000); "
          f"10 000-row micro-batch median {result['median_batch']:.2f} s, p99 {result['p99_batch']:.2f} s; state at the "
          f"end {result['final_state_bytes']:,} bytes over {result['final_keys']} keys; {want:,} matches = batch engine; "
          f"at {args.rate:,} events/s: latency median "
          f"{lat['median']:.2f} s, p99 {lat['p99']:.2f} s (goal p99 < 2 s) over {lat['matches']:,} matches; "
          f"JSON and PNG in {out}/")


def _throughput(spark, work: pathlib.Path, clause: str, per_trigger: int, tag: str, warm_up: bool = False) -> dict:
    """One run over the files, ``per_trigger`` files a micro-batch, then the end of input."""
    import sparkcep
    from sparkcep.spark.stream import StreamMetrics, flush

    schema = spark.read.parquet(str(work / "in")).schema
    source = spark.readStream.schema(schema).option("maxFilesPerTrigger", per_trigger).parquet(str(work / "in"))
    if warm_up:
        source = source.where("tradeId <= 1000")
    metrics = StreamMetrics.create(spark)
    matches = sparkcep.stream(source, clause, watermark="10 seconds", metrics=metrics)
    counts: list[int] = []
    gauges: list[dict] = []

    def collect(df, _id) -> None:
        counts.append(df.count())
        gauges.append(metrics.snapshot())

    ckpt = str(work / f"ckpt-{tag}")
    t0 = time.perf_counter()
    q = matches.writeStream.foreachBatch(collect).option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    streamed = time.perf_counter() - t0
    # sparkcep's own state at the end (each key's buffered rows and counters, as stored):
    # RocksDB's memory metric also counts its write buffers.
    from pyspark.sql import functions as F

    own = spark.read.format("statestore").option("stateVarName", "key_state").load(ckpt) \
        .agg(F.count("*"), F.sum(F.length("value.blob"))).first()
    rest = flush(spark, clause, ckpt).count()
    total = time.perf_counter() - t0
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in q.recentProgress]
    state = [{"batch": p["batchId"], "keys": (p.get("stateOperators") or [{}])[0].get("numRowsTotal", 0),
              "bytes": (p.get("stateOperators") or [{}])[0].get("memoryUsedBytes", 0)} for p in q.recentProgress]
    return {"matches": sum(counts) + rest, "flushed": rest, "stream_seconds": streamed, "total_seconds": total,
            "events_per_second": rows / total, "rows_per_batch": rows // max(len([d for d in q.recentProgress
                                                                                   if d["numInputRows"]]), 1),
            "batch_seconds": durations, "median_batch": statistics.median(durations),
            "p99_batch": sorted(durations)[max(int(len(durations) * 0.99) - 1, 0)], "state": state,
            "final_keys": own[0], "final_state_bytes": own[1], "gauges": gauges}


def _latency(spark, work: pathlib.Path, clause: str, rate: int, seconds: int) -> dict:
    """Files published at a steady rate while the query runs; per match, the time from its
    last row's file being published to the end of the micro-batch that emitted it."""
    import threading

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import sparkcep
    from sparkcep.spark.stream import StreamMetrics
    from sparkcep.workloads.stock import stock_trades

    src = work / "steady"
    src.mkdir()
    trades = pa.Table.from_pandas(stock_trades(rate * seconds, symbols=50, seed=2), preserve_index=False)
    trades = trades.set_column(3, "timestamp", trades.column("timestamp").cast(pa.timestamp("us", "UTC")))
    ids = trades.column("tradeId").to_numpy()
    file_of = dict(zip(ids.tolist(), (np.arange(len(ids)) // rate).tolist(), strict=True))
    pq.write_table(trades.slice(0, 0), work / "schema.parquet")
    schema = spark.read.parquet(str(work / "schema.parquet")).schema
    metrics = StreamMetrics.create(spark)
    matches = sparkcep.stream(spark.readStream.schema(schema).parquet(str(src)), clause, watermark="10 seconds",
                              metrics=metrics)
    published: dict[int, float] = {}
    latencies: list[float] = []
    timeline: list[dict] = []

    def collect(df, _id) -> None:
        last = df.select("last_trade").toArrow().column(0).to_pylist()
        now = time.time()
        latencies.extend(now - published[file_of[t]] for t in last)
        timeline.append({"t": now, **metrics.snapshot()})

    q = (matches.writeStream.foreachBatch(collect).option("checkpointLocation", str(work / "steady_ckpt")).start())
    time.sleep(15)  # the first micro-batch starts the Python workers; publish once it runs

    def publish() -> None:
        start = time.time()
        for f in range(seconds):
            time.sleep(max(0.0, start + f - time.time()))
            tmp = src / f".part{f:04d}.tmp"
            pq.write_table(trades.slice(f * rate, rate), tmp)
            tmp.rename(src / f"part{f:04d}.parquet")
            published[f] = time.time()

    writer = threading.Thread(target=publish)
    t0 = time.time()
    writer.start()
    writer.join()
    q.processAllAvailable()
    q.stop()
    lat = sorted(latencies)
    return {"rate": rate, "seconds": seconds, "matches": len(lat), "median": statistics.median(lat) if lat else None,
            "p99": lat[max(int(len(lat) * 0.99) - 1, 0)] if lat else None, "max": lat[-1] if lat else None,
            "timeline": [{**x, "t": x["t"] - t0} for x in timeline], "latencies": lat}


def _plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c, d) = plt.subplots(1, 4, figsize=(20, 4))
    a.plot(range(len(result["batch_seconds"])), result["batch_seconds"], marker="o")
    a.set_xlabel("micro-batch")
    a.set_ylabel("duration (s)")
    a.set_title(f"10 000-row micro-batches: {result['events_per_second']:,.0f} events/s", fontsize=9)
    runs = sorted(result["runs"].values(), key=lambda r: r["rows_per_batch"])
    b.plot([r["rows_per_batch"] for r in runs], [r["events_per_second"] for r in runs], marker="o")
    b.set_xscale("log")
    b.set_xlabel("rows per micro-batch (50 keys)")
    b.set_ylabel("events/s end to end")
    b.set_title(f"{result['rows']:,} events, Q7; own state at the end {result['final_state_bytes'] / 1e3:.0f} kB",
                fontsize=9)
    lat = result["latency"]
    c.hist(lat["latencies"], bins=40)
    c.axvline(lat["p99"], color="tab:red", ls="--", label=f"p99 {lat['p99']:.2f} s")
    c.axvline(lat["median"], color="tab:green", ls="--", label=f"median {lat['median']:.2f} s")
    c.set_xlabel("latency: file published → its matches committed (s)")
    c.set_title(f"{lat['rate']:,} events/s for {lat['seconds']} s", fontsize=9)
    c.legend()
    tl = lat["timeline"]
    d.plot([x["t"] for x in tl], [x["state_bytes"] / 1e3 for x in tl], marker="o", label="state (kB)")
    d.plot([x["t"] for x in tl], [x["buffered"] / 10 for x in tl], marker=".", label="rows buffered / 10")
    d.set_xlabel("time since the first file (s)")
    d.set_title("sparkcep's own state over the steady run (50 keys)", fontsize=9)
    d.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
