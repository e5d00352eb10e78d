"""A stream of rules (sparkcep.stream(df, rules=FOLDER)) on Spark local[2]: steady-state
rows/s against the number of rules.

Workload: the trades of sparkcep.workloads.rule_sets (50 symbols, a trade a second) in
Parquet files of 200 000 rows, one file per micro-batch (Spark's noop-like sink: each
micro-batch's matches counted); rules from ``rule_sets.stream_rule_set`` (RIP Q1–Q12,
finance0–5 and the cookbook's shapes, constants varied; finance4 bounded by WITHIN, since
unbounded its keys' state grows with the stream), 1, 10 and 100 of them, each run with a
checkpoint of its own; and the 100 with every text made distinct (a comment each), since
copies of a rule (a template without constants) step once. Steady state: the median over micro-batches (the first excluded) of
numInputRows / triggerExecution from StreamingQueryProgress. (Exactness against the
batch engine is the tests' part: tests/spark/test_rule_stream.py.)

Prints a summary line, writes out/bench/rule_stream.json and rule_stream.png.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import time

COUNTS = (1, 10, 100)
PER_BATCH = 200_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_400_000)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkcep.spark.session import get_session
    from sparkcep.workloads import rule_sets

    out = pathlib.Path(args.out)
    work = out / "rule_stream_work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    trades = pa.Table.from_pandas(rule_sets.trades(args.rows), preserve_index=False)
    i = trades.schema.get_field_index("timestamp")
    trades = trades.set_column(i, "timestamp", trades.column("timestamp").cast(pa.timestamp("us", "UTC")))
    for f in range(-(-args.rows // PER_BATCH)):
        pq.write_table(trades.slice(f * PER_BATCH, PER_BATCH), work / "in" / f"part{f:04d}.parquet")
    spark = get_session("local[2]", config={"spark.sql.shuffle.partitions": "2"})
    result: dict = {"rows": args.rows, "rows_per_batch": PER_BATCH, "runs": {}}
    start = time.perf_counter()
    _run(spark, work, 1, "warm")  # the Python workers started, the kernels compiled, the JVM warm
    for n in COUNTS:
        print(f"[{time.perf_counter() - start:5.0f} s] {n} rule(s)", flush=True)
        result["runs"][str(n)] = _run(spark, work, n, f"r{n}")
    print(f"[{time.perf_counter() - start:5.0f} s] 100 rules, every text distinct", flush=True)
    result["distinct"] = _run(spark, work, 100, "d100", distinct=True)
    spark.stop()
    out.mkdir(parents=True, exist_ok=True)
    (out / "rule_stream.json").write_text(json.dumps(result, indent=2))
    _plot(result, out / "rule_stream.png")
    rates = ", ".join(f"{n} rule{'s' if n > 1 else ''} {result['runs'][str(n)]['rows_per_s']:,.0f}" for n in COUNTS)
    print(f"rule_stream: {args.rows:,} trades in {PER_BATCH:,}-row micro-batches, local[2], steady rows/s: {rates} "
          f"(goal for 100 rules: 50,000), 100 rules every text distinct {result['distinct']['rows_per_s']:,.0f}; "
          f"JSON and PNG in {out}/")


def _run(spark, work: pathlib.Path, n: int, tag: str, distinct: bool = False) -> dict:
    import sparkcep
    from sparkcep.workloads import rule_sets

    folder = work / f"rules-{tag}"
    folder.mkdir()
    for i, (name, text) in enumerate(rule_sets.stream_rule_set(n).items()):
        (folder / f"{name}.sql").write_text(f"{text}\n-- rule {i}" if distinct else text)
    schema = spark.read.parquet(str(work / "in")).schema
    source = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(work / "in"))
    checkpoint = str(work / f"ckpt-{tag}")
    matches = sparkcep.stream(source, rules=str(folder), event_time="timestamp", partition_by="symbol",
                              watermark="10 seconds", checkpoint=checkpoint)
    counts: list[int] = []
    q = (matches.writeStream.foreachBatch(lambda df, _id: counts.append(df.count()))
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    batches = [(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in q.recentProgress
               if p["numInputRows"]]
    rates = [rows / ms * 1000 for rows, ms in batches[1:]] or [rows / ms * 1000 for rows, ms in batches]
    return {"rules": n, "rows_per_s": statistics.median(rates), "batch_seconds": [ms / 1000 for _, ms in batches],
            "matches": sum(counts)}


def _plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [int(k) for k in result["runs"]]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(counts, [result["runs"][str(n)]["rows_per_s"] for n in counts], marker="o")
    if "distinct" in result:
        ax.plot([100], [result["distinct"]["rows_per_s"]], marker="s", linestyle="none", color="#dd8452",
                label="100 rules, every text distinct")
    ax.axhline(50_000, color="gray", linestyle=":", linewidth=1, label="goal for 100 rules")
    ax.set_xscale("log")
    ax.set_xlabel("rules in the folder")
    ax.set_ylabel("steady rows/s")
    ax.set_title(f"A stream of rules, {result['rows_per_batch']:,}-row micro-batches, local[2]", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
