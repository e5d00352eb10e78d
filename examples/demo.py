"""The demo job, on Spark local: RIP's head-and-shoulders query (Q1) over a generated
StockTrade stream, MatchRegex's M-shape (finance1) over a trade stream with 390 symbols, and a
SASE-style rising trend that skips the dips (EVENT SELECTION SKIP TILL NEXT MATCH) on the same
trades. Writes Parquet, prints the first matches and saves a chart with matches marked. Then
the same trend query as a Structured Streaming job: generated trade files read as a stream
(available-now, one file per micro-batch), matches written exactly once, the end of input
flushed, and the result checked against the batch engine."""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from rich.console import Console
from rich.table import Table

from sparkcep.errors import SparkCepError
from sparkcep.workloads import matchregex, rip
from sparkcep.workloads.files import write_parquet
from sparkcep.workloads.stock import stock_trades, trade_stream

console = Console()

# At least six rising trades per symbol, skipping the trades in between that do not rise (SASE's
# skip till next match), then a trade 0.5 % below the top, within 300 trades of the symbol.
TREND = """PARTITION BY symbol ORDER BY seq
MEASURES FIRST(A.seq) AS first_seq, LAST(A.seq) AS top_seq, B.seq AS last_seq,
         COUNT(A.*) AS rises, FIRST(A.price) AS low, LAST(A.price) AS top, B.price AS drop_price
EVENT SELECTION SKIP TILL NEXT MATCH
PATTERN (A{6,} B) MAXLENGTH 300
DEFINE A AS COUNT(A.*) = 1 OR A.price > LAST(A.price, 1),
       B AS B.price < 0.995 * LAST(A.price)"""


# The trend query on a stream: event time is the trade's timestamp, with WITHIN instead of
# MAXLENGTH (rows arrive in time order; a partial match expires with its window).
STREAM_TREND = TREND.replace("ORDER BY seq", "ORDER BY ts").replace("MAXLENGTH 300", "WITHIN INTERVAL '30' SECOND")


def _show(pdf, title: str, n: int = 8) -> None:
    t = Table(title=title)
    for c in pdf.columns:
        t.add_column(str(c))
    for row in pdf.head(n).itertuples(index=False):
        t.add_row(*[f"{v:.2f}" if isinstance(v, float) else str(v) for v in row])
    console.print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--out", default="out/demo")
    ap.add_argument("--master", default=None)
    args = ap.parse_args()
    out = pathlib.Path(args.out)

    from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session

    try:
        spark = get_session(args.master)
    except SparkCepError as e:
        console.print(f"[bold red]cannot start Spark:[/] {e}")
        return 1
    console.print(f"Spark {spark.version} on {spark.sparkContext.master}")

    stock_path, trades_path = out / "stock.parquet", out / "trades.parquet"
    stock = stock_trades(args.rows, seed=42)
    trades = trade_stream(args.rows, symbols=390, seed=42)
    write_parquet(stock, stock_path)
    write_parquet(trades, trades_path)
    console.print(f"generated {len(stock):,} StockTrade events and {len(trades):,} trades over 390 symbols in {out}/")

    jobs = [
        ("RIP Q1 head and shoulders", stock_path, out / "q1_matches",
         rip.query("Q1", maxlength=100, measures="FIRST(tradeId) AS start_trade, LAST(tradeId) AS end_trade, "
                   "C.price AS left_shoulder, G.price AS head, K.price AS right_shoulder, LAST(M.price) AS reversal"),
         "sql"),
        ("MatchRegex finance1 M-shape", trades_path, out / "finance1_matches", matchregex.query("finance1"), "matchregex"),
        ("Rising trend despite dips, then a drop (skip till next match)", trades_path, out / "trend_matches",
         TREND, "sql"),
    ]
    results = {}
    for title, src, dst, clause, mode in jobs:
        run = SparkRun("auto", "")
        t0 = time.perf_counter()
        with collect_errors():
            df = spark.read.parquet(str(src))
            result = match_recognize_spark(df, clause, mode=mode, run=run).persist()
            result.write.mode("overwrite").parquet(str(dst))
            matches = result.toPandas()
        dt = time.perf_counter() - t0
        console.print(f"\n[bold]{title}[/]: {len(matches):,} matches in {dt:.1f} s — {run.describe()}")
        sort_key = "start_trade" if "start_trade" in matches else "first_seq"
        matches = matches.sort_values(sort_key).reset_index(drop=True)
        _show(matches, f"first matches (all in {dst}/)")
        results[title] = matches

    chart = out / "matches.png"
    _chart(stock, results["RIP Q1 head and shoulders"], trades, results["MatchRegex finance1 M-shape"],
           results["Rising trend despite dips, then a drop (skip till next match)"], chart)
    console.print(f"\nchart of prices with matches marked: {chart}")
    try:
        return _stream_demo(spark, out)
    except SparkCepError as e:
        console.print(f"[bold red]the streaming job failed:[/] {e}")
        return 1


def _stream_demo(spark, out: pathlib.Path, rows: int = 30_000, files: int = 6) -> int:
    """The trend query over files that arrive as a stream; its output equals the batch's."""
    import os
    import shutil

    import sparkcep
    from sparkcep.spark.batch import collect_errors
    from sparkcep.spark.stream import StreamMetrics

    root = out / "stream"
    shutil.rmtree(root, ignore_errors=True)  # a fresh checkpoint each run
    src = root / "in"
    trades = trade_stream(rows, symbols=20, seed=7)
    per = -(-rows // files)
    for f in range(files):
        path = src / f"trades-{f:03d}.parquet"
        write_parquet(trades.iloc[f * per:(f + 1) * per], path)
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source reads in modification order
    console.print(f"\n[bold]Streaming[/]: {rows:,} trades of 20 symbols in {files} files under {src}/, read as a stream")
    t0 = time.perf_counter()
    with collect_errors():
        schema = spark.read.parquet(str(src)).schema
        events = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
        metrics = StreamMetrics.create(spark)
        ckpt, dst = str(root / "checkpoint"), str(root / "matches")
        # The stream over the files there, then the end of its input: every match in dst.
        done = sparkcep.run_to_end(events, STREAM_TREND, dst, ckpt, watermark="2 seconds", metrics=metrics)
        got = spark.read.parquet(dst).toPandas()
        want = sparkcep.match_recognize(spark.read.parquet(str(src)), STREAM_TREND).toPandas()
    dt = time.perf_counter() - t0
    m = metrics.snapshot()
    key = ["symbol", "first_seq"]
    same = got.sort_values(key).reset_index(drop=True).equals(want.sort_values(key).reset_index(drop=True))
    console.print(f"{len(got):,} matches ({done['end_of_input_matches']:,} at the end of input) in {dt:.1f} s over "
                  f"{done['micro_batches']} micro-batches; {m['rows']:,} rows in, {m['late']} late; the same as "
                  f"the batch engine: {'yes' if same else 'NO'}")
    _show(got.sort_values(key), f"first streamed matches (in {dst}/)")
    return 0 if same else 1


def _chart(stock, q1, trades, m_shapes, trends, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import sparkcep

    fig, (top, bottom, third) = plt.subplots(3, 1, figsize=(12, 10))
    first = int(q1.start_trade.iloc[0]) if len(q1) else 1
    sparkcep.plot(stock, q1, x="tradeId", y="price", start="start_trade", end="end_trade", ax=top,
                  span=(max(1, first - 40), first + 160),
                  title="RIP Q1 head and shoulders on the StockTrade stream (matches shaded)")
    sym, span = _busiest(m_shapes)  # the demo's data always has matches of both queries
    sparkcep.plot(trades, m_shapes, x="seq", y="price", start="first_seq", end="last_seq", key="symbol",
                  key_values=[sym], span=span, ax=bottom, color="tab:blue",
                  title=f"MatchRegex finance1 M-shape, symbol {sym} (matches shaded)")
    sym, span = _busiest(trends)
    sparkcep.plot(trades, trends, x="seq", y="price", start="first_seq", end="last_seq", key="symbol",
                  key_values=[sym], span=span, ax=third, color="tab:green",
                  marks={"top": ("top_seq", "top"), "drop": ("last_seq", "drop_price")},
                  title=f"Rising trend despite dips, then a drop (SKIP TILL NEXT MATCH), symbol {sym}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def _busiest(matches) -> tuple[object, tuple[int, int]]:
    """The symbol with the most matches, and the range of seq up to its fourth match and a
    little after."""
    sym = matches.symbol.value_counts().index[0]
    ms = matches[matches.symbol == sym]
    return sym, (0, int(ms.last_seq.iloc[min(len(ms) - 1, 3)]) + 200)


if __name__ == "__main__":
    sys.exit(main())
