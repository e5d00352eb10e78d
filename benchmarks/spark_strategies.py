"""Spark strategies on RIP's Q1, Q7 and Q11: the local sequential engine, and on Spark the
sequential, partition (stream with a symbol key), runs and rr strategies, on local[1] and
local[2]. Events/s and speedup over local[1]; JSON and PNG in out/bench/.

Each Spark master runs in its own process (one SparkContext per process); timings are warm
(one untimed run first) and end to end (read, match, count the output).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from benchmarks.common import peak_memory_mb, report, run_workers
from sparkcep.api import run_local

QUERIES = ("Q1", "Q7", "Q11")
STRATEGIES = ("sequential", "partition", "runs", "rr")


def _data(out: pathlib.Path, rows: int) -> tuple[pathlib.Path, pathlib.Path]:
    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import stock_trades

    plain, keyed = out / f"stock_{rows}.parquet", out / f"stock_{rows}_50sym.parquet"
    for path, symbols in ((plain, 1), (keyed, 50)):
        if not path.exists():
            write_parquet(stock_trades(rows, symbols=symbols, seed=1), path)
    return plain, keyed


def _query(name: str, keyed: bool) -> str:
    from sparkcep.workloads import rip

    return rip.query(name, maxlength=100, partition_by="symbol" if keyed else None)


def worker(master: str, plain: str, keyed: str, batch: int) -> list[dict]:
    """Time every query and strategy on one master (runs in a child process)."""
    from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session

    spark = get_session(master, config={"spark.sql.shuffle.partitions": "8"})
    # Warm up the JVM and the Python workers once, untimed.
    for strategy in STRATEGIES:
        warm = spark.read.parquet(keyed).limit(20_000)
        match_recognize_spark(warm, _query("Q11", strategy == "partition"), strategy=strategy, batch=5000).count()
    results = []
    for name in QUERIES:
        for strategy in STRATEGIES:
            is_keyed = strategy == "partition"
            source = keyed if is_keyed else plain
            df = spark.read.parquet(source).cache()
            n = df.count()
            clause = _query(name, is_keyed)
            run = SparkRun(strategy, "bench")
            t0 = time.perf_counter()
            with collect_errors():
                matches = match_recognize_spark(df, clause, strategy=strategy, batch=batch, run=run).count()
            seconds = time.perf_counter() - t0
            results.append({"master": master, "query": name, "strategy": strategy, "rows": n, "matches": matches,
                            "seconds": seconds, "events_per_second": n / seconds, "detail": run.describe()})
            print(f"  {master:9} {name:>3} {strategy:>10}: {matches:7,d} matches  {n / seconds:10,.0f} events/s  ({seconds:.1f} s)",
                  flush=True)
            df.unpersist()
    spark.stop()
    return results


def local_engine(plain: str, keyed: str) -> list[dict]:
    import pandas as pd


    out = []
    for name in QUERIES:
        pdf = pd.read_parquet(plain)
        stats: dict = {}
        t0 = time.perf_counter()
        matches = len(run_local(pdf, _query(name, False), stats=stats))
        dt = time.perf_counter() - t0
        out.append({"master": "local engine", "query": name, "strategy": "sequential", "rows": len(pdf),
                    "matches": matches, "seconds": dt, "events_per_second": len(pdf) / dt,
                    "matcher": stats.get("matcher"), "peak_live_runs": stats.get("peak_threads")})
        print(f"  {'engine':9} {name:>3} {'no Spark':>10}: {matches:7,d} matches  {len(pdf) / dt:10,.0f} events/s  ({dt:.1f} s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=None, help="rows per batch (default rows / 8)")
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--worker", nargs=4, metavar=("MASTER", "PLAIN", "KEYED", "BATCH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        master, plain, keyed, batch = args.worker
        report(worker(master, plain, keyed, int(batch)))
        return
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plain, keyed = _data(out, args.rows)
    batch = args.batch or max(1000, args.rows // 8)
    print(f"spark_strategies: {args.rows:,} events, batch {batch:,}", flush=True)
    results = local_engine(str(plain), str(keyed))
    results += run_workers("benchmarks.spark_strategies", ("local[1]", "local[2]"), str(plain), str(keyed), str(batch))
    speedups = {}
    for name in QUERIES:
        for strategy in STRATEGIES:
            one = next(r for r in results if r["master"] == "local[1]" and r["query"] == name and r["strategy"] == strategy)
            two = next(r for r in results if r["master"] == "local[2]" and r["query"] == name and r["strategy"] == strategy)
            speedups[f"{name}/{strategy}"] = one["seconds"] / two["seconds"]
    engine = {r["query"]: r["seconds"] for r in results if r["master"] == "local engine"}
    overhead = {f"{r['query']}/{r['strategy']}": r["seconds"] / engine[r["query"]] for r in results if r["master"] == "local[2]"}
    peak = peak_memory_mb()
    live = max((r.get("peak_live_runs") or 0) for r in results if r["master"] == "local engine")
    (out / "spark_strategies.json").write_text(json.dumps({"rows": args.rows, "batch": batch, "peak_rss_mb": peak,
                                                           "results": results,
                                                           "speedup_local2_over_local1": speedups,
                                                           "local2_time_over_engine_time": overhead}, indent=2))
    _plot(results, out / "spark_strategies.png")
    best = max(speedups.items(), key=lambda kv: kv[1])
    print(f"spark_strategies: {args.rows:,} events; speedup local[2]/local[1] "
          + ", ".join(f"{k} {v:.2f}x" for k, v in speedups.items() if k.split("/")[1] in ("runs", "partition"))
          + f"; best {best[0]} {best[1]:.2f}x; engine at most {live} live runs; peak memory (largest process) "
          f"{peak:.0f} MB; JSON and PNG in {out}/")


def _plot(results: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(QUERIES), figsize=(13, 4), sharey=False)
    for ax, name in zip(axes, QUERIES, strict=True):
        labels = ["engine"] + [f"{s}\n{m}" for s in STRATEGIES for m in ("local[1]", "local[2]")]
        values = [next(r["events_per_second"] for r in results if r["master"] == "local engine" and r["query"] == name)]
        colors = ["#555"]
        for s in STRATEGIES:
            for m, c in (("local[1]", "tab:blue"), ("local[2]", "tab:orange")):
                values.append(next(r["events_per_second"] for r in results if r["master"] == m and r["query"] == name and r["strategy"] == s))
                colors.append(c)
        ax.bar(range(len(values)), values, color=colors)
        ax.set_xticks(range(len(values)), labels, rotation=90, fontsize=7)
        ax.set_title(name)
        ax.set_ylabel("events / s")
    fig.suptitle("sparkcep on Spark: strategies on local[1] (blue) and local[2] (orange)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
