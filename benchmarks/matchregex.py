"""MatchRegex's finance benchmarks (finance0–finance5, Table 5) with mode="matchregex" on a
trade stream with 390 symbols: events/s of the local engine (width 1) and of Spark's
partition strategy on local[1] and local[2] (widths 1 and 2, Table 6 / Figure 9).
JSON and PNG in out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from benchmarks.common import peak_memory_mb, report, run_workers
from sparkcep.api import run_local
from sparkcep.workloads import matchregex


def _data(out: pathlib.Path, rows: int) -> pathlib.Path:
    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import trade_stream

    path = out / f"trades_{rows}.parquet"
    if not path.exists():
        write_parquet(trade_stream(rows, seed=1), path)
    return path


def worker(master: str, source: str) -> list[dict]:
    from sparkcep.spark.batch import collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session

    spark = get_session(master, config={"spark.sql.shuffle.partitions": "8"})
    df = spark.read.parquet(source).cache()
    n = df.count()
    match_recognize_spark(df.limit(5000), matchregex.query("finance0"), mode="matchregex", strategy="partition").count()
    out = []
    for name in matchregex.NAMES:
        t0 = time.perf_counter()
        with collect_errors():
            k = match_recognize_spark(df, matchregex.query(name), mode="matchregex", strategy="partition").count()
        dt = time.perf_counter() - t0
        out.append({"width": master, "query": name, "rows": n, "matches": k, "seconds": dt, "events_per_second": n / dt})
        print(f"  {master:9} {name}: {k:6,d} matches {n / dt:10,.0f} events/s", flush=True)
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        report(worker(*args.worker))
        return
    import pandas as pd

    import sparkcep

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = _data(out, args.rows)
    trades = pd.read_parquet(source)
    sparkcep.match_recognize(trades.head(2000), matchregex.query("finance1"), mode="matchregex")  # warm up
    results = []
    for name in matchregex.NAMES:
        stats: dict = {}
        t0 = time.perf_counter()
        k = len(run_local(trades, matchregex.query(name), "matchregex", stats=stats))
        dt = time.perf_counter() - t0
        results.append({"width": "engine", "query": name, "rows": len(trades), "matches": k, "seconds": dt,
                        "events_per_second": len(trades) / dt, "matcher": stats.get("matcher"),
                        "peak_live_runs": stats.get("peak_threads")})
        print(f"  {'engine':9} {name}: {k:6,d} matches {len(trades) / dt:10,.0f} events/s  ({k / len(trades):.2%} selectivity)", flush=True)
    results += run_workers("benchmarks.matchregex", ("local[1]", "local[2]"), str(source))
    peak = peak_memory_mb()
    (out / "matchregex.json").write_text(json.dumps({"rows": args.rows, "peak_rss_mb": peak, "results": results}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    widths = ("engine", "local[1]", "local[2]")
    for j, w in enumerate(widths):
        ys = [next(r["events_per_second"] for r in results if r["width"] == w and r["query"] == q) for q in matchregex.NAMES]
        ax.bar([i + (j - 1) * 0.27 for i in range(len(ys))], ys, 0.27, label=w)
    ax.set_xticks(range(len(matchregex.NAMES)), matchregex.NAMES)
    ax.set_ylabel("events / s")
    ax.set_title(f"MatchRegex finance benchmarks, {args.rows:,} trades, 390 symbols")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "matchregex.png", dpi=100)
    eng = {r["query"]: r["events_per_second"] for r in results if r["width"] == "engine"}
    live = max((r["peak_live_runs"] or 0) for r in results if r["width"] == "engine")
    print("matchregex: engine " + ", ".join(f"{q} {v:,.0f} ev/s" for q, v in eng.items())
          + f"; at most {live} live runs; peak memory {peak:.0f} MB; JSON and PNG in {out}/")


if __name__ == "__main__":
    main()
