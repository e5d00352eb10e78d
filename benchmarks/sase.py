"""SASE's experiments (SIGMOD'08, Section 6) on sparkcep's NFA^b, through the SASE front end.

Template: PATTERN SEQ(Stock+ a[], Stock b) WHERE es(a[], b) { [symbol] and a[1].price % 500 = 0
and p(a[i]) and b.volume < 150 } WITHIN W EVENTS, over a two-symbol stock stream whose price
rises with probability p (default 0.7), ALL MATCHES (SASE's default output).
- Expt 1: iterator predicate p (p1 true; p2 a[i].price > a[i-1].price; p3 a[i].price > min,
  max or avg of a[..i-1].price) × strategy (s1 partition contiguity, s2 skip till next match).
- Expt 2: the partition window W from 100 to 1000 events.
- Expt 3: the basic (breadth-first) algorithm vs the backtracking baseline.
- Expts 4–5: basic vs merging of equivalent runs, against W and against p; these use denser
  starts (a[1].price % 25 = 0) so that runs of many starts overlap, which merging needs.
Expt 1 also runs each query as the engine does by default ("engine": the compiled kernel or
the compiled NFA^b where the conditions compile, else the Python NFA^b), beside the Python
NFA^b ("basic"), in the same run.
Throughput (events/s), matches, mean match length and live runs per event; JSON and PNG in
out/bench/."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import pyarrow as pa

PREDICATES = {
    "p1": "",
    "p2": " and a[i].price > a[i-1].price",
    "p3-min": " and a[i].price > min(a[..i-1].price)",
    "p3-max": " and a[i].price > max(a[..i-1].price)",
    "p3-avg": " and a[i].price > avg(a[..i-1].price)",
}
STRATEGIES = {"s1": "partition_contiguity", "s2": "skip_till_next_match"}


def query(pred: str, strategy: str, window: int, start_mod: int = 500) -> str:
    return (f"PATTERN SEQ(Stock+ a[], Stock b) WHERE {STRATEGIES[strategy]}(a[], b) "
            f"{{ [symbol] and a[1].price % {start_mod} = 0{PREDICATES[pred]} and b.volume < 150 }} "
            f"WITHIN {window} EVENTS RETURN count(a[]) AS n")


def measure(table: pa.Table, text: str, algorithm: str = "basic") -> dict:
    from sparkcep.api import compile_query, run_plan
    from sparkcep.language.sase import parse_sase
    from sparkcep.runtime.nfab import Backtrack, NFAbMatcher

    plan = compile_query(parse_sase(text, "ts", None), table)
    if algorithm == "engine":
        stats: dict = {}
        run_plan(plan, table, stats=stats)  # warm: compiled code loaded, as for a later query
        times = []
        for _ in range(3):  # the median of three: one run of a fast query is noisy
            t0 = time.perf_counter()
            out = run_plan(plan, table, stats=stats)
            times.append(time.perf_counter() - t0)
        dt = sorted(times)[1]
        lengths = out.column("n").to_numpy() if out.num_rows else []
        return {"algorithm": algorithm, "events": table.num_rows, "seconds": dt,
                "events_per_second": table.num_rows / dt, "matches": out.num_rows,
                "mean_match_length": float(sum(lengths) / len(lengths) + 1) if len(lengths) else 0.0,
                "peak_partial_matches": stats.get("peak_threads") or 0, "matcher": stats.get("matcher")}
    if algorithm == "backtrack":
        matcher = Backtrack(plan)
    else:
        matcher = NFAbMatcher(plan, merge=algorithm == "merging")
    t0 = time.perf_counter()
    out = run_plan(plan, table, lambda p: matcher)
    dt = time.perf_counter() - t0
    lengths = out.column("n").to_numpy() if out.num_rows else []
    row = {
        "algorithm": algorithm, "events": table.num_rows, "seconds": dt, "events_per_second": table.num_rows / dt,
        "matches": out.num_rows, "mean_match_length": float(sum(lengths) / len(lengths) + 1) if len(lengths) else 0.0,
        "peak_partial_matches": matcher.peak_runs,
    }
    if algorithm == "backtrack":
        row["steps_per_event"] = matcher.steps / table.num_rows
    else:
        row["runs_per_event"] = matcher.run_steps / max(1, matcher.rows_read)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000, help="events per stream")
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    from sparkcep.workloads.stock import sase_ticks

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    streams: dict[float, pa.Table] = {}

    def stream(p: float) -> pa.Table:
        if p not in streams:
            streams[p] = pa.Table.from_pandas(sase_ticks(args.rows, p_increase=p, seed=7), preserve_index=False)
        return streams[p]

    results: list[dict] = []

    def run(expt: str, pred: str, strategy: str, window: int, algorithm: str = "basic", p: float = 0.7,
            start_mod: int = 500) -> dict:
        r = measure(stream(p), query(pred, strategy, window, start_mod), algorithm)
        r.update(expt=expt, predicate=pred, strategy=strategy, window=window, p=p, start_mod=start_mod)
        results.append(r)
        extra = (f"on {r['matcher']}" if algorithm == "engine" else f"{r['runs_per_event']:6.2f} runs/event"
                 if "runs_per_event" in r else f"{r['steps_per_event']:6.2f} steps/event")
        print(f"  {expt} {pred:6} {strategy} W={window:<5} p={p} {algorithm:9} {r['events_per_second']:10,.0f} ev/s "
              f"{r['matches']:7,d} matches, mean length {r['mean_match_length']:6.1f}, {extra}", flush=True)
        return r

    print(f"sase: {args.rows:,} events per stream, two symbols")
    for pred in PREDICATES:
        for s in STRATEGIES:
            run("expt1", pred, s, 500, "engine")
            run("expt1", pred, s, 500)
    for w in (100, 250, 500, 1000):
        for pred in ("p1", "p2", "p3-min"):
            for s in STRATEGIES:
                run("expt2", pred, s, w)
    for pred in ("p1", "p2", "p3-min"):
        for s in STRATEGIES:
            run("expt3", pred, s, 500, "basic")
            run("expt3", pred, s, 500, "backtrack")
    for w in (50, 100, 200, 400):
        for pred in ("p1", "p3-max"):
            for alg in ("basic", "merging"):
                run("expt4", pred, "s2", w, alg, start_mod=25)
    for p in (0.5, 0.6, 0.7, 0.8, 0.9):
        for alg in ("basic", "merging"):
            run("expt5", "p3-max", "s2", 200, alg, p=p, start_mod=25)

    (out / "sase.json").write_text(json.dumps({"rows": args.rows, "results": results}, indent=2))
    _plot(results, out / "sase.png", args.rows)

    def eps(**kw) -> float:
        return next(r["events_per_second"] for r in results if all(r[k] == v for k, v in kw.items()))

    e3 = [eps(expt="expt3", predicate=pr, strategy=s, algorithm="basic") / eps(expt="expt3", predicate=pr, strategy=s, algorithm="backtrack")
          for pr in ("p1", "p2", "p3-min") for s in STRATEGIES]
    e4 = [eps(expt="expt4", predicate=pr, window=w, algorithm="merging") / eps(expt="expt4", predicate=pr, window=w, algorithm="basic")
          for pr in ("p1", "p3-max") for w in (50, 100, 200, 400)]
    e1 = [eps(expt="expt1", predicate=pr, strategy=s, algorithm="engine") / eps(expt="expt1", predicate=pr, strategy=s, algorithm="basic")
          for pr in PREDICATES for s in STRATEGIES]
    print(f"sase: engine s1/s2 at W=500: p2 {eps(expt='expt1', predicate='p2', strategy='s1', algorithm='engine'):,.0f} / "
          f"{eps(expt='expt1', predicate='p2', strategy='s2', algorithm='engine'):,.0f} ev/s, "
          f"{min(e1):.1f}-{max(e1):.1f}x the Python NFA^b; basic over backtrack "
          f"{min(e3):.1f}-{max(e3):.1f}x; merging over basic {min(e4):.2f}-{max(e4):.2f}x; JSON and PNG in {out}/")


def _plot(results: list[dict], path: pathlib.Path, rows: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    ax = axes[0][0]
    e1 = [r for r in results if r["expt"] == "expt1"]
    bars = [(s, alg) for s in STRATEGIES for alg in ("engine", "basic")]
    for j, (s, alg) in enumerate(bars):
        ys = [next(r["events_per_second"] for r in e1 if r["predicate"] == pr and r["strategy"] == s
                   and r["algorithm"] == alg) for pr in PREDICATES]
        ax.bar([i + (j - 1.5) * 0.2 for i in range(len(ys))], ys, 0.2,
               label=f"{s} ({STRATEGIES[s]}), {'engine' if alg == 'engine' else 'Python NFA^b'}")
    ax.set_xticks(range(len(PREDICATES)), list(PREDICATES))
    ax.set_yscale("log")
    ax.set_ylabel("events / s")
    ax.set_title("Expt 1: predicate × strategy, W = 500")
    ax.legend(fontsize=7)

    ax = axes[0][1]
    for pr in ("p1", "p2", "p3-min"):
        for s in STRATEGIES:
            pts = sorted((r["window"], r["events_per_second"]) for r in results
                         if r["expt"] == "expt2" and r["predicate"] == pr and r["strategy"] == s)
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{pr} {s}")
    ax.set_xlabel("W (events)")
    ax.set_yscale("log")
    ax.set_ylabel("events / s")
    ax.set_title("Expt 2: partition window")
    ax.legend(fontsize=7)

    ax = axes[0][2]
    e3 = [r for r in results if r["expt"] == "expt3"]
    labels = [f"{pr} {s}" for pr in ("p1", "p2", "p3-min") for s in STRATEGIES]
    for j, alg in enumerate(("basic", "backtrack")):
        ys = [next(r["events_per_second"] for r in e3 if f"{r['predicate']} {r['strategy']}" == lab and r["algorithm"] == alg)
              for lab in labels]
        ax.bar([i + (j - 0.5) * 0.4 for i in range(len(ys))], ys, 0.4, label=alg)
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_title("Expt 3: basic vs backtrack, W = 500")
    ax.legend(fontsize=7)

    ax = axes[1][0]
    for pr in ("p1", "p3-max"):
        for alg in ("basic", "merging"):
            pts = sorted((r["window"], r["events_per_second"]) for r in results
                         if r["expt"] == "expt4" and r["predicate"] == pr and r["algorithm"] == alg)
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{pr} {alg}")
    ax.set_xlabel("W (events)")
    ax.set_ylabel("events / s")
    ax.set_title("Expt 4: merging vs W (s2, dense starts)")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    for alg in ("basic", "merging"):
        pts = sorted((r["p"], r["events_per_second"]) for r in results if r["expt"] == "expt5" and r["algorithm"] == alg)
        ax.plot(*zip(*pts, strict=True), marker="o", label=alg)
    ax.set_xlabel("probability of a price rise")
    ax.set_ylabel("events / s")
    ax.set_title("Expt 5: merging vs p (p3-max, s2, W = 200)")
    ax.legend(fontsize=7)

    ax = axes[1][2]
    for alg in ("basic", "merging"):
        pts = sorted((r["window"], r["runs_per_event"]) for r in results
                     if r["expt"] == "expt4" and r["predicate"] == "p3-max" and r["algorithm"] == alg)
        ax.plot(*zip(*pts, strict=True), marker="o", label=alg)
    ax.set_xlabel("W (events)")
    ax.set_ylabel("live runs per event")
    ax.set_title("Runs alive (p3-max, s2)")
    ax.legend(fontsize=7)
    fig.suptitle(f"SASE experiments on sparkcep's NFA^b, {rows:,} events per stream")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
