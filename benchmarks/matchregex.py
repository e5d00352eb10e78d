"""MatchRegex's benchmarks (Table 5) with mode="matchregex".

finance0–finance5 on a trade stream with 390 symbols: events/s of the local engine (width 1)
and of Spark's partition strategy on local[1] and local[2] (widths 1 and 2, Table 6 /
Figure 9). twitter0–twitter2 on 200,000 Atom-XML tweets from 6,142 authors, partitioned by
author, ParseTweet and the tag predicates as expensive user functions: the local engine,
the task engine's key groups on 2 worker processes, and Spark's partition strategy on
local[2], side by side. JSON and PNG in out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from benchmarks.common import peak_memory_mb, report, run_workers
from sparkcep.api import run_local
from sparkcep.workloads import matchregex, twitter


def _data(out: pathlib.Path, rows: int) -> pathlib.Path:
    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import trade_stream

    path = out / f"trades_{rows}.parquet"
    if not path.exists():
        write_parquet(trade_stream(rows, seed=1), path)
    return path


def _tweets(out: pathlib.Path, events: int) -> pathlib.Path:
    from sparkcep.workloads.files import write_parquet

    path = out / f"tweets_{events}.parquet"
    if not path.exists():
        write_parquet(twitter.tweet_stream(events), path)
    return path


def run_twitter(out: pathlib.Path, events: int) -> list[dict]:
    """twitter0–2: the local engine, the task engine (2 workers) and Spark local[2]."""
    import pandas as pd

    import sparkcep

    twitter.register()
    source = _tweets(out, events)
    tweets = pd.read_parquet(source)
    for warm in ({"strategy": "sequential"}, {"strategy": "tasks", "workers": 2}):  # compile; start the workers
        sparkcep.match_recognize(tweets.head(500), twitter.query("twitter1"), mode="matchregex", **warm)
    results = []
    for label, options in (("engine", {"strategy": "sequential"}), ("tasks, 2 workers", {"strategy": "tasks", "workers": 2})):
        for name in twitter.NAMES:
            t0 = time.perf_counter()
            k = len(sparkcep.match_recognize(tweets, twitter.query(name), mode="matchregex", **options))
            dt = time.perf_counter() - t0
            results.append({"width": label, "query": name, "rows": len(tweets), "matches": k, "seconds": dt,
                            "events_per_second": len(tweets) / dt})
            print(f"  {label:16} {name}: {k:6,d} matches {len(tweets) / dt:8,.0f} events/s"
                  f"  ({k / len(tweets):.2%} selectivity)", flush=True)
    return results + run_workers("benchmarks.matchregex", ("local[2]",), str(source), "twitter")


def plot_bars(results: list[dict], names: tuple[str, ...], widths, title: str, path: pathlib.Path,
              figsize=(9, 4)) -> None:
    """Events/s per query, one bar per width (engine, strategy or Spark master)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    for j, w in enumerate(widths):
        ys = [next(r["events_per_second"] for r in results if r["width"] == w and r["query"] == q) for q in names]
        ax.bar([i + (j - 1) * 0.27 for i in range(len(ys))], ys, 0.27, label=w)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("events / s")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def worker(master: str, source: str, suite: str = "finance") -> list[dict]:
    """One suite on Spark's partition strategy under ``master``."""
    from sparkcep.spark.batch import collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session

    workload, label = (twitter, f"spark {master}") if suite == "twitter" else (matchregex, master)
    if suite == "twitter":
        twitter.register()
    spark = get_session(master, config={"spark.sql.shuffle.partitions": "8"})
    df = spark.read.parquet(source).cache()
    n = df.count()
    match_recognize_spark(df.limit(2000), workload.query(workload.NAMES[0]), mode="matchregex", strategy="partition").count()
    out = []
    for name in workload.NAMES:
        t0 = time.perf_counter()
        with collect_errors():
            k = match_recognize_spark(df, workload.query(name), mode="matchregex", strategy="partition").count()
        dt = time.perf_counter() - t0
        out.append({"width": label, "query": name, "rows": n, "matches": k, "seconds": dt, "events_per_second": n / dt})
        print(f"  {label:15} {name}: {k:6,d} matches {n / dt:10,.0f} events/s", flush=True)
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--tweets", type=int, default=200_000, help="events of the twitter benchmarks")
    ap.add_argument("--suite", choices=("all", "finance", "twitter"), default="all")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        report(worker(*args.worker))
        return
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.suite in ("all", "finance"):
        run_finance(args, out)
    if args.suite in ("all", "twitter"):
        results = run_twitter(out, args.tweets)
        (out / "matchregex_twitter.json").write_text(json.dumps({"events": args.tweets, "results": results}, indent=2))
        plot_bars(results, twitter.NAMES, list(dict.fromkeys(r["width"] for r in results)),
                  f"MatchRegex twitter benchmarks, {args.tweets:,} Atom-XML tweets, 6,142 authors (2 cores)",
                  out / "matchregex_twitter.png", figsize=(8, 4))
        eps = {(r["width"], r["query"]): r["events_per_second"] for r in results}
        print("matchregex twitter: " + "; ".join(
            f"{q} engine {eps['engine', q]:,.0f}, tasks {eps['tasks, 2 workers', q]:,.0f} "
            f"({eps['tasks, 2 workers', q] / eps['engine', q]:.2f}x), spark local[2] {eps['spark local[2]', q]:,.0f} ev/s"
            for q in twitter.NAMES) + f"; JSON and PNG in {out}/")


def run_finance(args, out: pathlib.Path) -> None:
    import pandas as pd

    import sparkcep

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
    plot_bars(results, matchregex.NAMES, ("engine", "local[1]", "local[2]"),
              f"MatchRegex finance benchmarks, {args.rows:,} trades, 390 symbols", out / "matchregex.png")
    eng = {r["query"]: r["events_per_second"] for r in results if r["width"] == "engine"}
    live = max((r["peak_live_runs"] or 0) for r in results if r["width"] == "engine")
    print("matchregex: engine " + ", ".join(f"{q} {v:,.0f} ev/s" for q, v in eng.items())
          + f"; at most {live} live runs; peak memory {peak:.0f} MB; JSON and PNG in {out}/")


if __name__ == "__main__":
    main()
