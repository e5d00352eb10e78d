"""Spark at scale: RIP's Q7 (MAXLENGTH 100) end to end — Parquet in, Parquet out — on
Spark local[2] against the local engine on the same rows (read with pyarrow, matched,
written with pyarrow), at 2 M and 10 M events; then the cost of each stage per million
rows on local[1] and local[2], and a model of wall time on more cores fitted to them.

Strategies: ``runs`` on a file already in ORDER BY order (matched where it lies), ``runs``
on the same rows shuffled (one range sort first), ``rr`` (RB, no shared part) on the
ordered file, ``partition`` on trades of 50 symbols (PARTITION BY symbol; its own local
engine time), ``runs`` on those keyed trades too (no key holds a batch: each key whole),
and ``runs`` on trades where one symbol holds half the rows: on two task slots such a key
keeps its slot no longer than the others are busy, so it is matched whole in a task of its
own (what ``auto`` does too); the same case again with the key cut into ranges of about a
batch, the other keys whole (what more slots than two would choose). Each Spark
master runs in its own process; timings are warm (one untimed run first), each the median
of three calls. Summary line, JSON and PNG in out/bench/ (the figure also in docs/figures/).

Each strategy is also set against Spark's *floor*: a job that reads the same file and hands
every row to Python once, returning nothing (``mapInArrow``; for the keyed files, after a
shuffle by key, ``groupBy().applyInArrow``). The same cases and floors run on a Spark
Connect session (a local Connect server over local[2], as hosted and serverless Spark offer
only Connect), where every sparkcep call is DataFrame operations.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import time

from benchmarks.common import report, run_workers

CASES = (  # (name, strategy, file kind)
    ("runs", "runs", "ordered"),
    ("runs, unsorted input", "runs", "shuffled"),
    ("rr", "rr", "ordered"),
    ("partition", "partition", "keyed"),
    ("runs, PARTITION BY", "runs", "keyed"),
    ("runs, a hot key", "runs", "hot"),
    ("runs, a hot key cut", "runs", "hot"),
)
CUT = "runs, a hot key cut"  # the case run with every key above a batch cut (routes.CUT_SHARE 0)
KEYED = ("keyed", "hot")  # the files of 50 symbols (PARTITION BY symbol)
GOALS = {"runs": 3.0, "partition": 2.0, "rr": 4.0}
FLOOR_GOAL = 1.3  # runs over its floor
CONNECT = "connect local[2]"  # a local Connect server: the master name the worker knows it by
CONNECT_CASES = ("runs", "runs, PARTITION BY", "runs, a hot key", CUT, "partition")
REPEATS = 3
CORES = (1, 2, 16, 64, 256)


def _query(keyed: bool) -> str:
    from sparkcep.workloads import rip

    return rip.query("Q7", maxlength=100, partition_by="symbol" if keyed else None)


def _files(out: pathlib.Path, rows: int) -> dict[str, str]:
    import numpy as np
    import pyarrow.parquet as pq

    from sparkcep.workloads.files import write_parquet
    from sparkcep.workloads.stock import stock_trades

    paths = {kind: out / f"scale_{kind}_{rows}.parquet" for kind in ("ordered", "shuffled", *KEYED)}
    if not paths["ordered"].exists():
        write_parquet(stock_trades(rows, symbols=1, seed=1), paths["ordered"])
    if not paths["shuffled"].exists():
        t = pq.read_table(paths["ordered"])
        t = t.take(np.random.default_rng(2).permutation(t.num_rows))
        pq.write_table(t, paths["shuffled"], row_group_size=200_000)
    if not paths["keyed"].exists():
        write_parquet(stock_trades(rows, symbols=50, seed=1), paths["keyed"])
    if not paths["hot"].exists():  # S000 holds about half the trades
        trades = stock_trades(rows, symbols=50, seed=1)
        trades.loc[np.random.default_rng(3).random(rows) < 0.5, "symbol"] = "S000"
        write_parquet(trades, paths["hot"])
    return {k: str(v) for k, v in paths.items()}


def local_engine(files: dict[str, str], tmp: pathlib.Path) -> dict[str, float]:
    """Seconds of the local engine, end to end, for the plain and the keyed query, and of
    its matching alone (``match``: the table already read)."""
    import pyarrow.parquet as pq

    from sparkcep.api import run_local

    out: dict[str, float] = {}
    for kind, keyed in (("ordered", False), ("keyed", True), ("hot", True)):
        for _ in range(2):  # the first run compiles the kernel; the best of two counts
            t0 = time.perf_counter()
            table = pq.read_table(files[kind])
            t1 = time.perf_counter()
            result = run_local(table, _query(keyed))
            t2 = time.perf_counter()
            pq.write_table(result, tmp / f"engine_{kind}.parquet")
            dt = time.perf_counter() - t0
            out[kind] = min(out.get(kind, dt), dt)
            if kind == "ordered":
                out["match"] = min(out.get("match", t2 - t1), t2 - t1)
                out["arrow_bytes_per_event"] = table.nbytes / table.num_rows
    out["file_bytes_per_event"] = pathlib.Path(files["ordered"]).stat().st_size / files["rows"]
    return out


def worker(master: str, spec: str) -> list[dict]:
    """In a child process: every case on every size (``stages_only``: the stage costs)."""
    from sparkcep.spark import routes
    from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
    from sparkcep.spark.session import get_session

    job = json.loads(spec)
    if master == CONNECT:
        import os
        import sys

        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the server's workers: this Python
        spark = (SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.shuffle.partitions", "4").getOrCreate())
        cases = [c for c in CASES if c[0] in CONNECT_CASES]
    else:
        spark = get_session(master)
        cases = list(CASES)
    tmp = pathlib.Path(job["tmp"])
    tag = "".join(ch for ch in master if ch.isalnum())  # Hadoop paths read [] as a glob
    results = []

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    share = routes.CUT_SHARE
    # Warm up the JVM and the Python workers, untimed.
    small = job["sizes"][0]
    for _name, strategy, kind in cases:
        warm = spark.read.parquet(small[kind]).limit(50_000)
        match_recognize_spark(warm, _query(kind in KEYED), strategy=strategy, batch=10_000).count()
    for files in job["sizes"]:
        # With stages_only (local[1]): only the run strategy over ordered input, for the model.
        if not job["stages_only"]:
            for kind in ("ordered", *KEYED):
                calls = sorted(timed(lambda kind=kind, files=files: _floor(spark, files[kind], kind in KEYED))
                               for _ in range(REPEATS))
                results.append({"kind": "floor", "master": master, "file": kind, "rows": files["rows"],
                                "seconds": calls[len(calls) // 2], "calls": calls})
                print(f"  {master:9} {files['rows']:>11,} {'floor, ' + kind:>22}: {calls[len(calls) // 2]:7.1f} s",
                      flush=True)
        for name, strategy, kind in cases[:1] if job["stages_only"] else cases:
                run = SparkRun(strategy, "bench")
                target = str(tmp / f"out_{tag}_{strategy}_{kind}{'_cut' if name == CUT else ''}")

                def go(strategy=strategy, kind=kind, run=run, target=target, files=files, name=name):
                    run.reason, run.stats = "bench", {}  # what the last call chose and did
                    routes.CUT_SHARE = 0.0 if name == CUT else share
                    df = spark.read.parquet(files[kind])
                    with collect_errors():
                        out = match_recognize_spark(df, _query(kind in KEYED), strategy=strategy, run=run,
                                                    batch=job["batch"])
                        out.write.mode("overwrite").parquet(target)

                # The median of three calls: one call's time moves by a second here.
                calls = sorted(timed(go) for _ in range(REPEATS))
                seconds = calls[len(calls) // 2]
                matches = spark.read.parquet(target).count()
                results.append({"kind": "case", "master": master, "case": name, "rows": files["rows"],
                                "seconds": seconds, "calls": calls, "matches": matches, "detail": run.describe()})
                print(f"  {master:9} {files['rows']:>11,} {name:>22}: {seconds:7.1f} s  {matches:8,d} matches  "
                      f"{files['rows'] / seconds:12,.0f} events/s", flush=True)
    if master != CONNECT:
        results += _stages(spark, master, small, tmp / tag)
    spark.stop()
    return results


def _handoff(batches):  # Arrow batches into a Python worker and nothing back
    for b in batches:
        yield b.slice(0, 0)


def _floor(spark, path: str, keyed: bool) -> None:
    """Spark's floor for a strategy: read the file and hand every row to Python once
    (keyed: after a shuffle by key, one Python call per key), writing nothing."""
    df = spark.read.parquet(path)
    if keyed:
        handed = df.groupBy("symbol").applyInArrow(lambda t: t.slice(0, 0), df.schema)
    else:
        handed = df.mapInArrow(_handoff, df.schema)
    handed.write.format("noop").mode("overwrite").save()


def _stages(spark, master: str, files: dict, tmp: pathlib.Path) -> list[dict]:
    """Seconds of each stage alone over the ordered file (and the shuffled one for the sort)."""
    from pyspark.sql import functions as F

    rows = files["rows"]
    used = ["price", "timestamp", "tradeId"]

    def noop(df) -> float:
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t0

    read = noop(spark.read.parquet(files["ordered"]).select(*used))
    python = noop(spark.read.parquet(files["ordered"]).select(*used).mapInArrow(
        _handoff, spark.read.parquet(files["ordered"]).select(*used).schema)) - read
    df = spark.read.parquet(files["shuffled"]).withColumn("__row", F.monotonically_increasing_id())
    k = max(1, rows // 500_000)
    sort = noop(df.repartitionByRange(k, "timestamp", "__row").sortWithinPartitions("timestamp", "__row")) - noop(df)
    # Writing Parquet: the output of a query is small (one row per match); the write of all
    # rows bounds it.
    t0 = time.perf_counter()
    spark.read.parquet(files["ordered"]).write.mode("overwrite").parquet(str(tmp / "copy"))
    write = time.perf_counter() - t0 - read
    from sparkcep.spark.batch import match_recognize_spark

    t0 = time.perf_counter()  # fixed cost of one call: its jobs on a tiny input
    tiny = spark.read.parquet(files["ordered"]).limit(20_000)
    match_recognize_spark(tiny, _query(False), strategy="runs", batch=5_000).write.format("noop").mode(
        "overwrite").save()
    fixed = time.perf_counter() - t0
    out = {"read": read, "to Python": max(python, 0.0), "sort": max(sort, 0.0), "write": max(write, 0.0),
           "fixed per call": fixed}
    print(f"  {master:9} stages over {rows:,} rows: " + ", ".join(f"{k} {v:.2f} s" for k, v in out.items()),
          flush=True)
    return [{"kind": "stages", "master": master, "rows": rows, "seconds": out}]


# A cluster as the model sees it: 16 cores per node, 10 Gbit/s per node.
CORES_PER_NODE = 16
NODE_BYTES_PER_SECOND = 1.25e9


def model(stages: dict[str, dict], engine: dict[str, float], rows: int, runs_one_core: float) -> dict:
    """Seconds per million rows of each stage on one core (local[1]), and the wall time
    the run strategy's one-core time predicts for ``c`` cores over ``n`` events:

        T(c) = fixed + max(n · work / c  [+ n · sort / c],
                           n · bytes per event / (nodes · node bandwidth))

    where work = (runs on local[1] − fixed) / rows: read, one hand-off to Python (the
    batch tasks; the edges jobs stay on the JVM), the cache of the rows as read, matching,
    output. Only the fixed part (the driver's jobs and the seam stitching, O(batches)) is serial. The
    network term is RIP's bound (its Section 5): with ordered input on a distributed file
    system every event crosses the network once as file bytes (if not read locally);
    unsorted input also crosses it once more in the range sort's shuffle."""
    one = stages["local[1]"]
    per_m = {k: v / rows * 1e6 for k, v in one.items() if k not in ("fixed per call", "write")}
    per_m["match"] = engine["match"] / rows * 1e6
    fixed = one["fixed per call"]
    work = (runs_one_core - fixed) / rows * 1e6
    per_m["other (cache, edges jobs, output)"] = max(0.0, work - per_m["read"] - per_m["to Python"]
                                                    - per_m["match"])
    file_bytes, shuffle_bytes = engine["file_bytes_per_event"], engine["arrow_bytes_per_event"]

    def predict(c: int, n: int, unsorted: bool = False) -> float:
        nodes = max(1, c // CORES_PER_NODE)
        wire = n * (file_bytes + (shuffle_bytes if unsorted else 0.0)) / (nodes * NODE_BYTES_PER_SECOND)
        return fixed + max(n / 1e6 * (work + (per_m["sort"] if unsorted else 0.0)) / c, wire)

    return {"per_million_rows_one_core": per_m, "fixed_seconds": fixed, "predict": predict,
            "bytes_per_event": {"file": file_bytes, "shuffle": shuffle_bytes}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 10_000_000])
    ap.add_argument("--batch", type=int, default=250_000, help="rows per batch where the strategy cuts them")
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--worker", nargs=2, metavar=("MASTER", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        report(worker(*args.worker))
        return
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "spark_scale_tmp"
    tmp.mkdir(exist_ok=True)
    sizes = []
    engine: dict[int, dict[str, float]] = {}
    for rows in sorted(args.rows):
        files = _files(out, rows)
        files["rows"] = rows
        sizes.append(files)
        engine[rows] = local_engine(files, tmp)
        print(f"  engine    {rows:>11,} {'local engine':>22}: {engine[rows]['ordered']:7.1f} s plain "
              f"({engine[rows]['match']:.1f} s matching), {engine[rows]['keyed']:.1f} s keyed, "
              f"{engine[rows]['hot']:.1f} s with a hot key", flush=True)
    results = run_workers("benchmarks.spark_scale", ("local[2]", CONNECT), json.dumps(
        {"sizes": sizes, "batch": args.batch, "tmp": str(tmp), "stages_only": False}))
    results += run_workers("benchmarks.spark_scale", ("local[1]",), json.dumps(
        {"sizes": sizes[:1], "batch": args.batch, "tmp": str(tmp), "stages_only": True}))
    shutil.rmtree(tmp, ignore_errors=True)

    ratios = {}
    for r in results:
        if r["kind"] == "case" and r["master"] == "local[2]":
            kind = next(kind for name, _, kind in CASES if name == r["case"])
            base = engine[r["rows"]][kind if kind in KEYED else "ordered"]
            r["ratio_to_engine"] = r["seconds"] / base
            ratios[f"{r['case']} @ {r['rows']:,}"] = r["ratio_to_engine"]
    floors = {(r["master"], r["file"], r["rows"]): r["seconds"] for r in results if r["kind"] == "floor"}
    to_floor = {}
    for r in results:
        if r["kind"] == "case" and r["master"] in ("local[2]", CONNECT):
            kind = next(kind for name, _, kind in CASES if name == r["case"])
            r["ratio_to_floor"] = r["seconds"] / floors[(r["master"], kind if kind in KEYED else "ordered",
                                                         r["rows"])]
            where = "" if r["master"] == "local[2]" else " on Connect"
            to_floor[f"{r['case']}{where} @ {r['rows']:,}"] = r["ratio_to_floor"]
    stages = {r["master"]: r["seconds"] for r in results if r["kind"] == "stages"}
    small = sizes[0]["rows"]
    def runs_seconds(master: str) -> float:
        return next(r["seconds"] for r in results if r["kind"] == "case" and r["case"] == "runs"
                    and r["rows"] == small and r["master"] == master)

    m = model(stages, engine[small], small, runs_seconds("local[1]"))
    runs2 = runs_seconds("local[2]")
    validation = {"predicted_local2_seconds": m["predict"](2, small), "measured_local2_seconds": runs2}
    projection = {c: {"seconds_100M": m["predict"](c, 100_000_000),
                      "events_per_second": 100_000_000 / m["predict"](c, 100_000_000),
                      "events_per_second_unsorted": 100_000_000 / m["predict"](c, 100_000_000, True)}
                  for c in CORES}
    summary = {"rows": args.rows, "batch": args.batch, "engine_seconds": engine, "results": results,
               "ratio_to_engine": ratios, "ratio_to_floor": to_floor, "goals": GOALS, "floor_goal": FLOOR_GOAL,
               "model": {"per_million_rows_one_core": m["per_million_rows_one_core"],
                         "fixed_seconds": m["fixed_seconds"], "bytes_per_event": m["bytes_per_event"],
                         "cores_per_node": CORES_PER_NODE, "node_bytes_per_second": NODE_BYTES_PER_SECOND,
                         "validation_1_to_2_cores": validation,
                         "projection_100M_events": projection}}
    (out / "spark_scale.json").write_text(json.dumps(summary, indent=2, default=str))
    _plot(results, engine, m, projection, out / "spark_scale.png")
    figures = pathlib.Path("docs/figures")
    if figures.is_dir():
        shutil.copy(out / "spark_scale.png", figures / "spark_scale.png")
    big = max(args.rows)
    print("spark_scale: time over the local engine, end to end (Parquet in and out), local[2]: "
          + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items() if k.endswith(f"{big:,}") or k.endswith(f"{small:,}"))
          + "; over Spark's floor (read, hand to Python once): "
          + ", ".join(f"{k} {v:.2f}x" for k, v in to_floor.items())
          + f"; model predicts local[2] {validation['predicted_local2_seconds']:.1f} s for runs over {small:,} rows, "
          f"measured {runs2:.1f} s; 256 cores: {projection[256]['events_per_second'] / 1e6:.0f} M events/s "
          f"(ordered input); JSON and PNG in {out}/")


def _plot(results, engine, m, projection, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, d, b, c) = plt.subplots(1, 4, figsize=(20, 4.2))
    cases = [r for r in results if r["kind"] == "case" and r["master"] == "local[2]"]
    sizes = sorted({r["rows"] for r in cases})
    names = [n for n, _, _ in CASES]
    width = 0.8 / len(sizes)
    for i, rows in enumerate(sizes):
        vals = [next(r["ratio_to_engine"] for r in cases if r["case"] == n and r["rows"] == rows) for n in names]
        a.bar([x + i * width for x in range(len(names))], vals, width, label=f"{rows / 1e6:g} M events")
    for j, n in enumerate(names):
        goal = GOALS.get(n.split(",")[0])
        if goal:
            a.hlines(goal, j - 0.1, j + 0.9, colors="red", linestyles="dashed")
    a.set_xticks([x + width * (len(sizes) - 1) / 2 for x in range(len(names))], names, fontsize=8, rotation=30, ha="right")
    a.set_ylabel("Spark local[2] time / local engine time")
    a.set_title("End to end, Parquet in and out (red: goal)")
    a.legend()
    floored = [r for r in results if r["kind"] == "case" and "ratio_to_floor" in r]
    labels = sorted({(r["case"], r["master"], r["rows"]) for r in floored},
                    key=lambda x: (names.index(x[0]), x[1] != "local[2]", x[2]))
    d.barh(range(len(labels)), [next(r["ratio_to_floor"] for r in floored if (r["case"], r["master"], r["rows"]) == x)
                                for x in labels],
           color=["tab:blue" if x[1] == "local[2]" else "tab:orange" for x in labels])
    d.set_yticks(range(len(labels)), [f"{n}, {'classic' if ms == 'local[2]' else 'Connect'}, {rows / 1e6:g} M"
                                      for n, ms, rows in labels], fontsize=7)
    d.axvline(FLOOR_GOAL, color="red", linestyle="dashed")
    d.invert_yaxis()
    d.set_xlabel("time / Spark's floor (read, hand to Python once)")
    d.set_title("Over Spark's floor (red: runs goal)")
    per = m["per_million_rows_one_core"]
    b.bar(list(per), list(per.values()), color="tab:blue")
    b.set_ylabel("seconds per million rows, one core")
    b.set_title(f"Stage costs (fixed per call: {m['fixed_seconds']:.1f} s)")
    b.tick_params(axis="x", labelsize=7, labelrotation=15)
    cores = list(projection)
    c.loglog(cores, [projection[k]["events_per_second"] for k in cores], "o-", label="ordered input (model)")
    c.loglog(cores, [projection[k]["events_per_second_unsorted"] for k in cores], "s--", label="unsorted input (model)")
    measured = [r for r in cases if r["case"] == "runs" and r["rows"] == sizes[0]]
    c.loglog([2], [sizes[0] / measured[0]["seconds"]], "k*", markersize=12, label="measured, local[2]")
    c.set_xlabel("cores")
    c.set_ylabel("events / s (100 M events)")
    c.set_title("Model: compute-bound until the network")
    c.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
