"""RIP's state-based baselines against its run-based strategy, on one machine (RIP's Fig. 11,
13, 14 and Table 2 shapes): Q1, Q4 and Q7 over the StockTrade stream with a CPU-heavy
predicate (every DEFINE also calls ``heavy``, which burns a fixed amount of arithmetic), run
sequentially, with SB (one process per pattern variable), SB+ (the first one doubled) and
RB+ (batches of events on a pool of worker processes, shared tail = MAXLENGTH - 1). Every
strategy returns the same rows (checked). JSON and PNG in out/bench/; the summary line gives
each strategy's speed-up over sequential."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import time

QUERIES = ("Q7", "Q4", "Q1")
SPIN = 2000  # iterations of arithmetic per call: about a third of a millisecond


def heavy(x: float) -> bool:
    acc = 0.0
    for i in range(SPIN):
        acc += (x * i) % 7.0
    return acc >= 0.0


def clause(name: str) -> str:
    from sparkcep.workloads import rip

    text = rip.query(name, maxlength=40)
    head, _, defines = text.partition("DEFINE")
    items = [d.strip() for d in re.split(r",\s*\n", defines.strip())]
    named = {d.split(" AS ")[0].strip(): d for d in items}
    pattern = re.search(r"PATTERN \(([^)]*)\)", text).group(1)
    variables = [re.sub(r"[*+?]", "", v) for v in pattern.split()]
    out = []
    for v in variables:
        cond = named.get(v)
        out.append(f"{cond} AND heavy({v}.price)" if cond else f"{v} AS heavy({v}.price)")
    return head + "DEFINE\n  " + ",\n  ".join(out)


def run(table, text: str, strategy: str, workers: int):
    import sparkcep
    from sparkcep.api import compile_query, run_plan
    from sparkcep.parallel.run_batches import ProcessBackend, run_partition

    if strategy in ("sequential", "sb", "sb+"):
        return sparkcep.match_recognize(table, text, strategy=strategy)
    plan = compile_query(text, table)
    backends = []

    def runner(plan, part, row_ids):
        order0 = plan.query.order_by[0].index if plan.query.order_by else None
        backend = ProcessBackend(plan, part.cols, order0, part.n, lambda r: row_ids[r], workers=workers)
        backends.append(backend)
        return run_partition(plan, part.n, backend, max(1000, part.n // (4 * workers)), None)

    try:
        return run_plan(plan, table, partition_runner=runner)
    finally:
        for b in backends:
            b.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8_000)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args(argv)

    import pyarrow as pa

    import sparkcep
    from sparkcep.workloads.stock import stock_trades

    sparkcep.register_function("heavy", heavy, "boolean")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(stock_trades(args.rows, seed=11), preserve_index=False)
    cores = os.cpu_count() or 1
    rows = []
    for name in QUERIES:
        text = clause(name)
        states = len(re.search(r"PATTERN \(([^)]*)\)", text).group(1).split())
        expected = None
        run(table.slice(0, 300), text, "sequential", cores)  # compile the plan untimed
        for strategy in ("sequential", "sb", "sb+", "rb+"):
            t0 = time.perf_counter()
            got = run(table, text, strategy, cores)
            seconds = time.perf_counter() - t0
            if expected is None:
                expected = got
            elif not got.equals(expected):
                raise SystemExit(f"{strategy} differs from sequential on {name}")
            processes = {"sequential": 1, "sb": states, "sb+": states + 1, "rb+": cores}[strategy]
            rows.append({"query": name, "strategy": strategy, "rows": table.num_rows, "seconds": seconds,
                         "events_per_second": table.num_rows / seconds, "matches": got.num_rows,
                         "processes": processes, "states": states, "cores": cores})
            print(f"  {name} {strategy:10} {processes:2} processes: {table.num_rows / seconds:9,.0f} events/s "
                  f"({got.num_rows} matches)", flush=True)
    for r in rows:
        base = next(x for x in rows if x["query"] == r["query"] and x["strategy"] == "sequential")
        r["speedup"] = base["seconds"] / r["seconds"]
    (out / "rip_sb.json").write_text(json.dumps(rows, indent=1))
    plot(rows, out / "rip_sb.png")
    parts = []
    for name in QUERIES:
        sel = {r["strategy"]: r["speedup"] for r in rows if r["query"] == name}
        parts.append(f"{name} SB {sel['sb']:.2f}x SB+ {sel['sb+']:.2f}x RB+ {sel['rb+']:.2f}x")
    print(f"rip-sb on {cores} cores, speed-up over sequential: " + "; ".join(parts)
          + f"; figure {out / 'rip_sb.png'}")


def plot(rows, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    strategies = ("sequential", "sb", "sb+", "rb+")
    width = 0.2
    for i, s in enumerate(strategies):
        sel = [next(r for r in rows if r["query"] == q and r["strategy"] == s) for q in QUERIES]
        ax.bar([j + i * width for j in range(len(QUERIES))], [r["events_per_second"] for r in sel], width,
               label=f"{s}")
        for j, r in enumerate(sel):
            ax.text(j + i * width, r["events_per_second"], f"{r['speedup']:.1f}x\n{r['processes']}p",
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + 1.5 * width for j in range(len(QUERIES))],
                  [f"{q} ({rows[[r['query'] for r in rows].index(q)]['states']} states)" for q in QUERIES])
    ax.set(ylabel="events/s", title=f"SB vs SB+ vs RB+ with a CPU-heavy predicate ({rows[0]['cores']} cores)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
