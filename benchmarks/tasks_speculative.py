"""Speculative evaluation of an expensive predicate on one stream (no PARTITION BY needed):
the sequential engine against 1 and 2 workers, on four query shapes.

The predicate ``similar(a, b)`` computes for a fixed CPU time (2 ms; the sweep varies it),
spinning on its thread's CPU clock as image or text comparison would compute, and answers
a deterministic boolean. Shapes:
- ``abc``: A B C, SKIP PAST LAST ROW, ONE ROW PER MATCH (the query users write first);
- ``kleene``: A B+ C, each B compared with A (navigation into a bound variable);
- ``alternation``: A (B | C) D;
- ``hot key``: the ``abc`` query PARTITION BY a key, one key holding 90 % of the rows.

Each runs sequentially, then with 1 and 2 workers: first query (no worker running: the
kept ones are ended) and warm (the median of the three runs after it). ``auto`` is timed too, and the sequential
engine again, all in one run. A sweep of the predicate's cost (0.1 to 10 ms) gives the
picture: speedup of 2 workers (and of ``auto``) against cost. JSON and PNG in out/bench/;
the summary line gives the ratios against the goals.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np
import pyarrow as pa

COST = {"seconds": 0.002}


def similar(a: int, b: int) -> bool:
    """Computes for COST seconds (what a worker inherits is the default 2 ms unless set)."""
    end = time.thread_time() + COST["seconds"]
    while time.thread_time() < end:
        pass
    return (a * 7 + b * 3) % 5 < 3


def _spin_cost(seconds: float):
    # The workers import this module by name: a cost other than the default travels in a
    # function of its own, a closure over the value.
    def similar_at(a: int, b: int) -> bool:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        return (a * 7 + b * 3) % 5 < 3
    return similar_at


BASE = "ORDER BY ts MEASURES A.ts AS a_ts, LAST(ts) AS end_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
SHAPES = {
    "abc": BASE + "PATTERN (A B C) DEFINE A AS x % 2 = 0, B AS similar(A.x, B.x), C AS similar(B.x, C.x)",
    "kleene": BASE + "PATTERN (A B+ C) DEFINE A AS x % 2 = 0, B AS similar(A.x, B.x), C AS x % 3 = 0",
    "alternation": BASE + ("PATTERN (A (B | C) D) DEFINE A AS x % 2 = 0, B AS x % 3 = 0 AND similar(A.x, B.x), "
                           "C AS similar(B.x, C.x), D AS similar(A.x, D.x)"),
    "hot key": "PARTITION BY k " + BASE + ("PATTERN (A B C) DEFINE A AS x % 2 = 0, B AS similar(A.x, B.x), "
                                           "C AS similar(B.x, C.x)"),
}


def table(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = np.where(rng.random(n) < 0.9, 0, rng.integers(1, 10, n))
    # Values from a wide range: the same arguments seldom come twice, so the memo saves nothing
    # the sequential engine would not also compute.
    return pa.table({"ts": np.arange(n), "x": rng.integers(0, 1_000_000_000, n), "k": keys})


def timed(data: pa.Table, query: str, **options) -> tuple[float, pa.Table, object]:
    import sparkcep
    from sparkcep.tasks.engine import TaskStats

    stats = TaskStats()
    if options.get("strategy") != "sequential":
        options["stats"] = stats
    t0 = time.perf_counter()
    out = sparkcep.match_recognize(data, query, **options)
    return time.perf_counter() - t0, out, stats


def shape_row(name: str, data: pa.Table, query: str) -> dict:
    from sparkcep.tasks.workers import end_kept_workers

    timed(data.slice(0, 50), query, strategy="sequential")  # compiled once, outside the timings
    seq, expected, _ = timed(data, query, strategy="sequential")
    row = {"shape": name, "rows": data.num_rows, "matches": expected.num_rows, "sequential_s": seq}
    for workers in (1, 2):
        end_kept_workers()
        first, got, st = timed(data, query, strategy="tasks", workers=workers)
        assert got.equals(expected), f"{name}: {workers} workers (first query) differ from the sequential engine"
        # Warm: the median of three runs after the first (one run moves by about ±0.07×).
        runs = sorted((timed(data, query, strategy="tasks", workers=workers) for _ in range(3)), key=lambda r: r[0])
        warm, got, st = runs[1]
        assert all(r[1].equals(expected) for r in runs), f"{name}: {workers} workers differ from the sequential engine"
        row[f"w{workers}_first_s"] = first
        row[f"w{workers}_warm_s"] = warm
        row[f"w{workers}_calls_made"] = st.calls_made
        row[f"w{workers}_calls_used"] = st.calls_used
        row[f"w{workers}_calls_waited"] = st.calls_waited
    auto, got, _ = timed(data, query)  # the defaults: one worker fewer than the cores
    assert got.equals(expected), f"{name}: auto differs from the sequential engine"
    row["auto_s"] = auto
    row["sequential_again_s"] = timed(data, query, strategy="sequential")[0]
    base = (seq + row["sequential_again_s"]) / 2
    for k in ("w1_first", "w1_warm", "w2_first", "w2_warm", "auto"):
        row[f"{k}_speedup"] = base / row[f"{k}_s"]
    row["waste"] = row["w2_calls_made"] / max(1, row["w2_calls_used"])
    return row


def cost_row(ms: float, rows: int) -> dict:
    import sparkcep

    sparkcep.register_function("similar", _spin_cost(ms / 1000), "boolean", cost="expensive")
    data = table(rows, seed=2)
    query = SHAPES["abc"]
    timed(data.slice(0, 50), query, strategy="sequential")
    expected = timed(data, query, strategy="sequential")[1]
    timed(data, query, strategy="tasks", workers=2)  # the workers up, and kept
    # Cheap calls make runs of a few tenths of a second, where one sample is noise (the
    # virtual machine's CPU steal moves one by 5-10 %): the best of five.
    tries = 5 if ms < 1 else 1
    two, got, st = min((timed(data, query, strategy="tasks", workers=2) for _ in range(tries)), key=lambda r: r[0])
    assert got.equals(expected)
    # The sequential engine and auto (the defaults) alternate, so that the machine's drift
    # falls on both; once each, the sequential engine runs before and after.
    seqs, autos = [], []
    for _ in range(tries):
        seqs.append(timed(data, query, strategy="sequential")[0])
        auto, got, _ = timed(data, query)
        assert got.equals(expected)
        autos.append(auto)
    if tries == 1:
        seqs.append(timed(data, query, strategy="sequential")[0])
        base, auto = sum(seqs) / 2, autos[0]
    else:
        base, auto = min(seqs), min(autos)
    return {"cost_ms": ms, "rows": rows, "sequential_s": base, "w2_s": two, "auto_s": auto,
            "w2_speedup": base / two, "auto_speedup": base / auto, "calls_made": st.calls_made,
            "calls_used": st.calls_used}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1200)
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args(argv)

    import sparkcep
    from benchmarks import tasks_speculative as me  # by module name: the workers import it

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sparkcep.register_function("similar", me.similar, "boolean", cost="expensive")
    data = table(args.rows)
    shapes = []
    for name, query in SHAPES.items():
        r = shape_row(name, data, query)
        shapes.append(r)
        print(f"  {name:12} {r['matches']:4} matches: sequential {r['sequential_s']:.2f} s; 2 workers warm "
              f"{r['w2_warm_speedup']:.2f}x, first {r['w2_first_speedup']:.2f}x; 1 worker warm "
              f"{r['w1_warm_speedup']:.2f}x; auto {r['auto_speedup']:.2f}x; calls made/used "
              f"{r['w2_calls_made']}/{r['w2_calls_used']}", flush=True)
    costs = []
    for ms in (0.05, 0.1, 0.3, 1.0, 3.0, 10.0):
        rows = int(min(6000, max(150, args.rows * 2.0 / ms)))
        r = cost_row(ms, rows)
        costs.append(r)
        print(f"  cost {ms:5.2f} ms ({rows} rows): 2 workers {r['w2_speedup']:.2f}x, auto {r['auto_speedup']:.2f}x",
              flush=True)
    sparkcep.register_function("similar", me.similar, "boolean", cost="expensive")
    (out / "tasks_speculative.json").write_text(json.dumps({"shapes": shapes, "costs": costs}, indent=1))
    plot(shapes, costs, out / "tasks_speculative.png")
    abc = shapes[0]
    others = ", ".join(f"{r['shape']} {r['w2_warm_speedup']:.2f}x (bound {two_cores(r):.2f}x)" for r in shapes[1:])
    cheap = [r for r in costs if r["cost_ms"] < 0.2]
    print(f"tasks_speculative: {abc['shape']} 2 workers warm {abc['w2_warm_speedup']:.2f}x (goal >= 1.8; two cores "
          f"and the calls made allow {two_cores(abc):.2f}x), first {abc['w2_first_speedup']:.2f}x (goal >= 1.5); {others} "
          f"(goal >= 1.7 each); calls made/used at most "
          f"{max(r['waste'] for r in shapes):.2f} (goal <= 2); auto below 0.2 ms/call "
          f"{min(r['auto_speedup'] for r in cheap):.2f}x of sequential (goal >= 0.95); figure "
          f"{out / 'tasks_speculative.png'}")


def two_cores(row: dict) -> float:
    """The speedup two cores allow with 2 workers when every call made costs its CPU time,
    used or not (this process's own work not counted)."""
    return 2 * row["w2_calls_used"] / max(1, row["w2_calls_made"])


def plot(shapes: list[dict], costs: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [r["shape"] for r in shapes]
    xs = np.arange(len(names))
    for i, (key, label) in enumerate((("w1_warm", "1 worker"), ("w2_first", "2 workers, first query"),
                                      ("w2_warm", "2 workers, warm"))):
        left.bar(xs + (i - 1) * 0.27, [r[f"{key}_speedup"] for r in shapes], 0.27, label=label)
    left.scatter(xs, [two_cores(r) for r in shapes], marker="_", s=900,
                 color="black", zorder=3, label="2 cores, calls made (bound)")
    left.axhline(1, color="grey", lw=0.8)
    left.set_xticks(xs, names)
    left.set_ylabel("speedup over the sequential engine")
    left.set_title(f"2 ms predicate (CPU time), {shapes[0]['rows']} rows")
    left.set_ylim(0, 2.6)
    left.legend(fontsize=8, loc="upper center", ncol=2)
    c = [r["cost_ms"] for r in costs]
    right.plot(c, [r["w2_speedup"] for r in costs], "o-", label="strategy tasks, 2 workers")
    right.plot(c, [r["auto_speedup"] for r in costs], "s--", label="auto")
    right.axhline(1, color="grey", lw=0.8)
    right.axvline(0.2, color="grey", ls=":", lw=0.8)
    right.set_xscale("log")
    right.set_xlabel("predicate cost (ms per call)")
    right.set_ylabel("speedup over the sequential engine")
    right.set_title("A B C against predicate cost")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
