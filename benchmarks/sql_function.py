"""The SQL table function against the ``partition`` strategy: RIP's Q7 over trades of 50
symbols (PARTITION BY symbol) read from Parquet, on Spark local[2], each call's matches
written to Spark's no-op sink; and the floor, the same file handed to Python after a
shuffle by key (``groupBy().applyInArrow`` returning nothing). Warm (one untimed call
each first), the median of three calls. Summary line, JSON and PNG in out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

OUT = pathlib.Path("out/bench")
REPEATS = 3


def _clause() -> str:
    from sparkcep.workloads import rip

    return rip.query("Q7", maxlength=100, partition_by="symbol")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=2_000_000)
    args = ap.parse_args()

    import pyarrow as pa

    from sparkcep.spark.batch import match_recognize_spark
    from sparkcep.spark.session import get_session
    from sparkcep.spark.table_function import register_table_function
    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import stock_trades

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"sql_function_{args.rows}.parquet"
    if not path.exists():
        write_parquet(stock_trades(args.rows, symbols=50, seed=1), path)
    spark = get_session("local[2]")
    register_table_function(spark)
    clause = _clause()
    quoted = clause.replace("\\", "\\\\").replace("'", "\\'")

    def sql():
        spark.read.parquet(str(path)).createOrReplaceTempView("trades")
        return spark.sql(f"SELECT * FROM match_recognize(TABLE(trades), '{quoted}')")

    def nothing(_table):
        return pa.table({"n": pa.array([], pa.int64())})

    cases = {
        "floor (shuffle by key, hand to Python)": lambda: spark.read.parquet(str(path)).groupBy("symbol")
        .applyInArrow(nothing, "n long"),
        "partition strategy": lambda: match_recognize_spark(spark.read.parquet(str(path)), clause,
                                                            strategy="partition"),
        "SQL table function": sql,
    }
    results = {}
    for name, make in cases.items():
        make().write.format("noop").mode("overwrite").save()  # warm
        calls = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            make().write.format("noop").mode("overwrite").save()
            calls.append(time.perf_counter() - t0)
        results[name] = sorted(calls)[REPEATS // 2]
        print(f"  {name:>40}: {results[name]:6.2f} s", flush=True)
    spark.stop()
    ratio = results["SQL table function"] / results["partition strategy"]
    print(f"sql_function: {args.rows:,} events, 50 keys: table function {results['SQL table function']:.2f} s, "
          f"partition {results['partition strategy']:.2f} s ({ratio:.1f}x), floor "
          f"{results['floor (shuffle by key, hand to Python)']:.2f} s")
    (OUT / "sql_function.json").write_text(json.dumps({"rows": args.rows, "seconds": results, "ratio": ratio},
                                                      indent=2))
    _plot(results, args.rows)


def _plot(results: dict, rows: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.6))
    names = list(results)
    ax.barh(names, [results[n] for n in names], color=["#999999", "#4c72b0", "#dd8452"])
    ax.set_xlabel("seconds (Spark local[2], warm, median of 3)")
    ax.set_title(f"RIP Q7, {rows:,} events over 50 keys")
    fig.tight_layout()
    fig.savefig(OUT / "sql_function.png", dpi=120)


if __name__ == "__main__":
    main()
