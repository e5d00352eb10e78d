"""sparkcep against pandas-match-recognize (a pure-Python MATCH_RECOGNIZE for pandas, from
PyPI) on RIP's queries: the same query text, the same data, equal match counts checked,
speed ratio reported. JSON and PNG in out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import pandas as pd

import sparkcep
from benchmarks.common import peak_memory_mb
from sparkcep.api import run_local
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades


def peer_sql(name: str) -> str:
    # The peer takes a whole statement and Trino's grammar; no MAXLENGTH extension.
    body = rip.query(name, measures="FIRST(tradeId) AS first_trade", skip="AFTER MATCH SKIP PAST LAST ROW")
    body = body.replace("ORDER BY timestamp, tradeId", "ORDER BY tradeId")
    body = body.replace("MEASURES", "MEASURES", 1).replace("\nAFTER MATCH", "\nONE ROW PER MATCH\nAFTER MATCH")
    return f"SELECT * FROM df MATCH_RECOGNIZE (\n{body}\n)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--static-rows", type=int, default=200_000,
                    help="the static queries (conditions on the current row only) again at this size")
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    try:
        from pandas_match_recognize import match_recognize as peer
    except ImportError:
        raise SystemExit("peers: install the optional peer first: pip install 'sparkcep[bench]'") from None
    df = stock_trades(args.rows, seed=1)
    # Warm up both (imports, the kernel's compiled code, the peer's parser), untimed.
    sparkcep.match_recognize(df.head(50), rip.query("Q1"))
    peer(peer_sql("Q12"), df.head(50).copy())
    results = _compare(peer, df, rip.NAMES)
    big = _compare(peer, stock_trades(args.static_rows, seed=1), STATIC) if args.static_rows else []
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    peak = peak_memory_mb()
    (out / "peers.json").write_text(json.dumps({"rows": args.rows, "peak_rss_mb": peak, "results": results,
                                                "static_rows": args.static_rows, "static": big}, indent=2))
    ran = [r for r in results if "speedup" in r]
    _plot(ran, out / "peers.png")
    if ran:
        worst = min(ran, key=lambda r: r["speedup"])
        equal = sum(r["equal_counts"] for r in ran)
        static = [r for r in big if "speedup" in r]
        print(f"peers: {len(ran)} of {len(results)} queries ran on both, {equal} with equal match counts; "
              f"sparkcep faster by {worst['speedup']:.0f}x at least ({worst['query']}); at most "
              f"{max((r['sparkcep_peak_live_runs'] or 0) for r in ran)} live runs; "
              + (f"static queries at {args.static_rows:,} events: {min(r['speedup'] for r in static):.0f}x at least, "
                 f"{min(args.static_rows / r['sparkcep_seconds'] for r in static) / 1e6:.1f} M events/s at least; "
                 if static else "")
              + f"peak memory {peak:.0f} MB; JSON and PNG in {out}/")


# Conditions on the current row only: the peer compiles them to a DFA over row classes, as
# sparkcep's automaton does.
STATIC = ("Q2", "Q8", "Q9", "Q10", "Q11", "Q12")


def _compare(peer, df, names) -> list[dict]:
    """Each query on both engines, one cold call each (after the warm-up)."""
    results = []
    for name in names:
        text = rip.query(name, measures="FIRST(tradeId) AS first_trade")
        stats: dict = {}
        t0 = time.perf_counter()
        ours = run_local(df, text, stats=stats)  # what sparkcep.match_recognize runs
        ours_s = time.perf_counter() - t0
        entry = {"query": name, "rows": len(df), "sparkcep_seconds": ours_s, "sparkcep_matches": len(ours),
                 "sparkcep_matcher": stats.get("matcher"), "sparkcep_peak_live_runs": stats.get("peak_threads")}
        try:
            t0 = time.perf_counter()
            theirs = peer(peer_sql(name), df.copy())
            entry["peer_seconds"] = time.perf_counter() - t0
            entry["peer_matches"] = len(theirs) if isinstance(theirs, pd.DataFrame) else None
            entry["equal_counts"] = entry["peer_matches"] == len(ours)
            entry["speedup"] = entry["peer_seconds"] / ours_s
        except Exception as e:  # noqa: BLE001 - the peer's own failures are data for the report
            entry["peer_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        results.append(entry)
        if "speedup" in entry:
            print(f"  {name:>3} @ {len(df):,}: sparkcep {ours_s * 1000:8.1f} ms ({len(ours)} matches), "
                  f"peer {entry['peer_seconds'] * 1000:9.1f} ms ({entry['peer_matches']} matches)"
                  f"{'' if entry['equal_counts'] else '  COUNTS DIFFER'}  {entry['speedup']:7.0f}x", flush=True)
        else:
            print(f"  {name:>3}: peer failed: {entry['peer_error']}", flush=True)
    return results


def _plot(ran, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([r["query"] for r in ran], [r["speedup"] for r in ran], color="tab:green")
    ax.set_yscale("log")
    ax.set_ylabel("time of pandas-match-recognize / time of sparkcep")
    ax.set_title("sparkcep vs pandas-match-recognize on RIP's queries (same data)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
