"""The sequential engine over many PARTITION BY keys: RIP's StockTrade stream (a trade a
second) with 50, 1 000 and 10 000 symbols, 1 000 000 events, Q2 (the automaton), Q7
(MAXLENGTH 100, the thread-list kernel) and Q11 (a column scan) per symbol, one core, from
an Arrow table in memory, best of three warm runs. Every partition is selected in one pass
(the masks once, one scan or kernel call for all keys), so the time should barely grow
with the number of keys. Prints a summary line, writes out/bench/keys.json and keys.png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

QUERIES = ("Q2", "Q7", "Q11")
KEYS = (50, 1_000, 10_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()

    import pyarrow as pa

    import sparkcep
    from sparkcep.workloads import rip
    from sparkcep.workloads.stock import stock_trades

    result: dict = {"rows": args.rows, "seconds": {}}
    for keys in KEYS:
        table = pa.Table.from_pandas(stock_trades(args.rows, symbols=keys, seed=1), preserve_index=False)
        for name in QUERIES:
            clause = rip.query(name, maxlength=100 if name == "Q7" else None, partition_by="symbol")
            sparkcep.match_recognize(table.slice(0, 1000), clause)  # compile and warm up
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                matches = sparkcep.match_recognize(table, clause).num_rows
                best = min(best, time.perf_counter() - t0)
            result["seconds"][f"{name}/{keys}"] = best
            print(f"{name} over {keys:,} keys: {best:.2f} s, {matches:,} matches", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "keys.json").write_text(json.dumps(result, indent=2))
    _plot(result, out / "keys.png")
    sec = result["seconds"]
    print("keys: " + "; ".join(f"{q} {sec[f'{q}/{KEYS[0]}'] :.2f} s at {KEYS[0]} keys, "
                               f"{sec[f'{q}/{KEYS[-1]}']:.2f} s at {KEYS[-1]:,}" for q in QUERIES)
          + f" ({args.rows:,} events, one core); JSON and PNG in {out}/")


def _plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for q in QUERIES:
        ax.plot(KEYS, [result["seconds"][f"{q}/{k}"] for k in KEYS], marker="o", label=q)
    ax.set_xscale("log")
    ax.set_xlabel("PARTITION BY keys")
    ax.set_ylabel(f"seconds for {result['rows']:,} events")
    ax.set_ylim(bottom=0)
    ax.set_title("sequential engine, one core: time against the number of keys", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
