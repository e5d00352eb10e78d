"""RIP's run-based strategies on Spark (local[2] by default): RB+ ("runs") against the RB
baseline ("rr"), and the effect of the batch size n and the shared part s on Q1 (the
paper's Figures 8–12). JSON and PNG in out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from benchmarks.common import peak_memory_mb, report, run_workers

BATCHES = (12_500, 25_000, 50_000, 100_000)
SHARED = (0, 10, 50, 99)


def worker(master: str, source: str) -> list[dict]:
    from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session
    from sparkcep.workloads import rip

    spark = get_session(master, config={"spark.sql.shuffle.partitions": "8"})
    df = spark.read.parquet(source).cache()
    n = df.count()
    clause = rip.query("Q1", maxlength=100)
    match_recognize_spark(df.limit(20_000), clause, strategy="runs", batch=5_000).count()  # warm up
    out = []

    def timed(strategy, batch, shared):
        run = SparkRun(strategy, "bench")
        t0 = time.perf_counter()
        with collect_errors():
            k = match_recognize_spark(df, clause, strategy=strategy, batch=batch, shared=shared, run=run).count()
        dt = time.perf_counter() - t0
        out.append({"master": master, "strategy": strategy, "batch": batch, "shared": run.shared, "rows": n,
                    "matches": k, "seconds": dt, "events_per_second": n / dt, "detail": run.describe()})
        print(f"  {master} {strategy:4} n={batch:7,d} s={run.shared:3d}: {n / dt:9,.0f} events/s ({run.describe()})", flush=True)

    for batch in BATCHES:
        timed("runs", batch, None)
        timed("rr", batch, None)
    for shared in SHARED:
        timed("runs", 25_000, shared)
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        report(worker(*args.worker))
        return
    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import stock_trades

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = out / f"stock_{args.rows}.parquet"
    if not source.exists():
        write_parquet(stock_trades(args.rows, seed=1), source)
    results = run_workers("benchmarks.rip_batches", ("local[1]", "local[2]"), str(source))
    # Live runs inside the executors are not visible here; the local engine's for the same
    # query bound what each batch keeps alive.
    import pandas as pd

    from sparkcep.api import run_local
    from sparkcep.workloads import rip

    stats: dict = {}
    run_local(pd.read_parquet(source), rip.query("Q1", maxlength=100), stats=stats)
    peak = peak_memory_mb()
    (out / "rip_batches.json").write_text(json.dumps({"rows": args.rows, "peak_rss_mb": peak,
                                                      "engine_peak_live_runs": stats.get("peak_threads"),
                                                      "results": results}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for master, style in (("local[1]", "--"), ("local[2]", "-")):
        for strategy in ("runs", "rr"):
            pts = [r for r in results if r["master"] == master and r["strategy"] == strategy and r["batch"] in BATCHES
                   and (strategy == "rr" or r["shared"] == 99)]
            pts = sorted({r["batch"]: r for r in pts}.values(), key=lambda r: r["batch"])
            left.plot([r["batch"] for r in pts], [r["events_per_second"] for r in pts], style, marker="o",
                      label=f"{'RB+' if strategy == 'runs' else 'RB'} {master}")
        pts = [r for r in results if r["master"] == master and r["strategy"] == "runs" and r["batch"] == 25_000]
        pts = sorted({r["shared"]: r for r in pts}.values(), key=lambda r: r["shared"])
        right.plot([r["shared"] for r in pts], [r["events_per_second"] for r in pts], style, marker="o", label=f"RB+ {master}")
    left.set_xscale("log")
    left.set_xlabel("batch size n (events)")
    left.set_ylabel("events / s")
    left.set_title("Q1: RB+ vs RB by batch size")
    left.legend()
    right.set_xlabel("shared part s (events), n = 25 000")
    right.set_title("Q1: effect of the shared part")
    right.legend()
    fig.tight_layout()
    fig.savefig(out / "rip_batches.png", dpi=100)
    best = max(results, key=lambda r: r["events_per_second"])
    print(f"rip_batches: {args.rows:,} events; best {best['strategy']} on {best['master']} n={best['batch']:,} "
          f"s={best['shared']}: {best['events_per_second']:,.0f} events/s; engine at most "
          f"{stats.get('peak_threads')} live runs on Q1; peak memory (largest process) {peak:.0f} MB; JSON and PNG in {out}/")


if __name__ == "__main__":
    main()
