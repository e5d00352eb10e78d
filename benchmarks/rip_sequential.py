"""Sequential throughput on RIP's Q1–Q12 (StockTrade stream, price uniform in [50, 150]),
with the SQL default (AFTER MATCH SKIP PAST LAST ROW) and RIP's ALL MATCHES output.

Prints one summary line; writes out/bench/rip_sequential.json and .png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import time

from sparkcep.api import run_local
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    trades = stock_trades(args.rows, seed=1)
    results = []
    for name in rip.NAMES:
        for label, skip in (("sql", ""), ("all", "ALL MATCHES")):
            text = rip.query(name, skip=skip, maxlength=100)
            stats: dict = {}
            run_local(trades.head(2000), text)  # untimed: loads the compiled kernels once
            t0 = time.perf_counter()
            # What match_recognize does, with the matcher's statistics kept.
            n = len(run_local(trades, text, stats=stats))
            dt = time.perf_counter() - t0
            results.append({"query": name, "output": label, "matches": n, "seconds": dt,
                            "events_per_second": args.rows / dt, **stats})
            live = stats.get("peak_threads")
            print(f"  {name:>3} {label:>3}: {n:7,d} matches  {args.rows / dt:12,.0f} events/s  "
                  f"({stats['matcher']}{'' if not live else f', at most {live} live runs'})", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (out / "rip_sequential.json").write_text(json.dumps({"rows": args.rows, "peak_rss_mb": peak_mb, "results": results}, indent=2))
    _plot(results, out / "rip_sequential.png")
    sql = [r["events_per_second"] for r in results if r["output"] == "sql"]
    print(f"rip_sequential: {args.rows:,} events, Q1-Q12 sequential, min {min(sql):,.0f} / max {max(sql):,.0f} events/s "
          f"(SQL default); peak memory {peak_mb:,.0f} MB; JSON and PNG in {out}/")


def _plot(results, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rip.NAMES)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.4
    for k, (label, offset) in enumerate((("sql", -width / 2), ("all", width / 2))):
        ys = [next(r["events_per_second"] for r in results if r["query"] == q and r["output"] == label) for q in names]
        ax.bar([i + offset for i in range(len(names))], ys, width, label=("SKIP PAST LAST ROW" if k == 0 else "ALL MATCHES"))
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("events / s (one core)")
    ax.set_title("sparkcep sequential engine on RIP's queries")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
