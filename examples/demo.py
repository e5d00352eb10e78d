"""The demo job: RIP's head-and-shoulders query (Q1) and an M-shape (double top) over a
generated stock stream, on the local sequential engine. (It moves onto Spark with the Spark
runner.)"""

from __future__ import annotations

import argparse
import time

import pandas as pd

import sparkcep
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades

M_SHAPE = """
PARTITION BY symbol
ORDER BY timestamp, tradeId
MEASURES FIRST(tradeId) AS start_trade, LAST(tradeId) AS end_trade,
         MAX(U1.price) AS first_top, MAX(U2.price) AS second_top, COUNT(*) AS length
PATTERN (R1+ F1+ R2+ F2+) MAXLENGTH 40
SUBSET U1 = (R1), U2 = (R2)
DEFINE R1 AS price > PREV(price),
       F1 AS price < PREV(price),
       R2 AS price > PREV(price) AND price > FIRST(R1.price),
       F2 AS price < PREV(price) AND price < LAST(F1.price)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--symbols", type=int, default=10)
    args = ap.parse_args()

    pd.set_option("display.width", 160)
    trades = stock_trades(args.rows, symbols=args.symbols, seed=42)
    print(f"StockTrade stream: {len(trades):,} trades over {args.symbols} symbols, price uniform in [50, 150]\n")

    q1 = rip.query("Q1", partition_by="symbol", maxlength=100,
                   measures="FIRST(tradeId) AS start_trade, C.price AS left_shoulder, G.price AS head, "
                            "K.price AS right_shoulder, LAST(M.price) AS reversal, COUNT(*) AS length")
    for title, text in (("RIP Q1 head and shoulders", q1), ("M-shape (double top)", M_SHAPE)):
        t0 = time.perf_counter()
        out = sparkcep.match_recognize(trades, text)
        dt = time.perf_counter() - t0
        print(f"== {title}: {len(out):,} matches in {dt:.2f} s ({len(trades) / dt:,.0f} events/s)")
        print(out.head(8).to_string(index=False))
        print()


if __name__ == "__main__":
    main()
