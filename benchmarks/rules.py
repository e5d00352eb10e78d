"""Many rules at once (sparkcep.match_rules) against one match_recognize call per rule:
rule sets of 1, 10, 100 and 1 000 rules drawn from RIP's Q1–Q12, MatchRegex's finance0–5
and the cookbook's shapes with their constants varied (sparkcep.workloads.rule_sets), over
1 000 000 trades of 50 symbols, warm, in one process.

- pandas, 100 rules: one call against separate calls (each separate call is timed; past 25
  rules the separate calls of the first 25 are scaled up), as generated (copies of a rule
  without constants are identical texts, matched once) and with every text distinct (a
  comment per rule: nothing matched once);
- Arrow, 1 to 1 000 rules: the one call's time against the number of rules;
- Spark (``--spark``, local[2], strategy partition): 100 rules in one call against separate
  calls (the first 5 timed, scaled), each written to Spark's noop sink.

Prints a summary line; writes out/bench/rules.json and rules.png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

COUNTS = (1, 10, 100, 1_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--symbols", type=int, default=50)
    ap.add_argument("--spark", action="store_true", help="also time the partition strategy on Spark local[2]")
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()

    import pyarrow as pa

    import sparkcep
    from sparkcep.workloads import rule_sets

    frame = rule_sets.trades(args.rows, symbols=args.symbols)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    result: dict = {"rows": args.rows, "symbols": args.symbols, "pandas": {}, "arrow": {}, "spark": {}}
    warm = rule_sets.rule_set(max(COUNTS))
    sparkcep.match_rules(table.slice(0, 5_000), warm)  # every kernel kind compiled or loaded
    for label, distinct in (("as generated", False), ("distinct texts", True)):
        rules = _rules(100, distinct)
        one = _timed(lambda r=rules: sparkcep.match_rules(frame, r))
        separate = _separate(lambda text: sparkcep.match_recognize(frame, text), rules, 25)
        result["pandas"][label] = {"rules": 100, "distinct": len(set(rules.values())), "one_call": one,
                                   "separate": separate, "ratio": separate / one}
        print(f"pandas, 100 rules ({label}): one call {one:.2f} s, separate calls {separate:.2f} s, "
              f"{separate / one:.1f}x", flush=True)
    for n in COUNTS:
        rules = _rules(n, False)
        one = _timed(lambda r=rules: sparkcep.match_rules(table, r).num_rows)
        separate = _separate(lambda text: sparkcep.match_recognize(table, text), rules, 25)
        result["arrow"][str(n)] = {"distinct": len(set(rules.values())), "one_call": one, "separate": separate}
        print(f"Arrow, {n:,} rules ({len(set(rules.values()))} distinct): one call {one:.2f} s, separate calls "
              f"{separate:.2f} s", flush=True)
    if args.spark:
        result["spark"] = _spark(frame)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.json").write_text(json.dumps(result, indent=2))
    _plot(result, out / "rules.png")
    p, a = result["pandas"], result["arrow"]
    line = (f"rules: 100 rules over {args.rows:,} events, one call {p['as generated']['ratio']:.1f}x faster than "
            f"separate calls on pandas ({p['distinct texts']['ratio']:.1f}x with every text distinct); 1,000 rules "
            f"take {a['1000']['one_call'] / a['100']['one_call']:.1f}x the time of 100")
    if result["spark"]:
        line += f"; Spark partition {result['spark']['ratio']:.1f}x"
    print(line + f"; JSON and PNG in {out}/")


def _rules(n: int, distinct: bool) -> dict[str, str]:
    from sparkcep.workloads import rule_sets

    rules = rule_sets.rule_set(n)
    if distinct:
        rules = {name: f"{text}\n-- rule {i}" for i, (name, text) in enumerate(rules.items())}
    return rules


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _separate(run, rules: dict[str, str], most: int) -> float:
    """The time of one call per rule: the first ``most`` rules timed, scaled to them all."""
    texts = list(rules.values())[:most]
    spent = sum(_timed(lambda t=t: run(t)) for t in texts)
    return spent * len(rules) / len(texts)


def _spark(frame) -> dict:
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import sparkcep
    from sparkcep.spark.session import get_session

    spark = get_session("local[2]")
    df = spark.createDataFrame(frame).cache()
    df.count()
    rules = _rules(100, False)

    def written(d):
        d.write.format("noop").mode("overwrite").save()

    written(sparkcep.match_rules(df, dict(list(rules.items())[:3]), strategy="partition"))  # warm the workers
    one = _timed(lambda: written(sparkcep.match_rules(df, rules, strategy="partition")))
    separate = _separate(lambda text: written(sparkcep.match_recognize(df, text, strategy="partition")), rules, 5)
    print(f"Spark partition, 100 rules: one call {one:.2f} s, separate calls {separate:.2f} s, "
          f"{separate / one:.1f}x", flush=True)
    df.unpersist()
    return {"rules": 100, "one_call": one, "separate": separate, "ratio": separate / one}


def _plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    counts = [int(k) for k in result["arrow"]]
    left.plot(counts, [result["arrow"][str(n)]["one_call"] for n in counts], marker="o", label="one match_rules call")
    left.plot(counts, [result["arrow"][str(n)]["separate"] for n in counts], marker="s", linestyle="--",
              label="one match_recognize call per rule")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("rules")
    left.set_ylabel(f"seconds, {result['rows']:,} events")
    left.set_title("Arrow: time against the number of rules", fontsize=9)
    left.legend(fontsize=8)
    bars = {f"pandas\n{k}": v["ratio"] for k, v in result["pandas"].items()}
    if result["spark"]:
        bars["Spark\npartition"] = result["spark"]["ratio"]
    right.bar(list(bars), list(bars.values()), color="#4c72b0")
    right.axhline(5, color="gray", linestyle=":", linewidth=1)
    right.set_ylabel("separate calls / one call")
    right.set_title("100 rules: how much faster one call is", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
