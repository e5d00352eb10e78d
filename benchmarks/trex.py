"""T-REX's query templates (SIGMOD'23, Appendix E) on sparkcep's segment executor.

Each template is written out below, parenthesised as its prose intends (the extracted
appendix has unbalanced parentheses and typos: ``DN.temp`` for price columns, ``confirmed``
for taxi rides, a missing minus in cld_wave's FALL, FALL for RISE in AFA_Q2). AFA_Q1's
EqualUpDownTicks, which the appendix does not define, is ``equal_up_down_ticks(x)``,
registered below: 1 when the segment has as many rises as falls from row to row, else 0
(with an index of prefix counts, T-REX's index()/lookup()). The paper's large_fall_ratio
(0.725-0.925 on minute bars) is scaled to our daily series (0.96-0.99). Data: the seeded
series of ``sparkcep.workloads.trex_series`` (scaled by ``--scale``), or vega-datasets'
seattle-weather for cld_wave when that package is installed.

For every instance (template × parameter set): the optimizer's plan, the three rule-based
plans (sort_merge, left_probe, right_probe) and the optimizer's plan without computation
sharing (``sharing=False``: every aggregate computed from each segment's rows) are timed and
must return the same segments; the optimizer's estimated costs rank the plans (NDCG against
their measured times); for v_shape and cld_wave the equivalent standard MATCH_RECOGNIZE
query (conditions on a last variable, ALL MATCHES, distinct start/end — the paper's Figure 2
style) runs on the automaton engine too (cld_wave once: the automaton takes minutes). Writes
out/bench/trex.json, trex_speedup.png (median speedup of the optimized plan per template over
each alternative: Figure 8) and trex_ranking.png (NDCG of the optimizer's plan ranking per
template: Figure 13)."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import statistics
import time

import numpy as np
import pyarrow as pa

from sparkcep.workloads import trex_series as series

PLANS = ("optimized", "sort_merge", "left_probe", "right_probe")
# The automaton engine tries every (start, boundary, end): minutes per instance past this.
AUTOMATON_MAX_TOTAL = 30

TEMPLATES: dict[str, dict] = {
    "v_shape": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN (((DN & W) (UP & W)) & WINDOW)
            DEFINE SEGMENT W AS window(15, NULL),
                   SEGMENT DN AS linear_reg_r2_signed(DN.tstamp, DN.price) <= {down},
                   SEGMENT UP AS linear_reg_r2_signed(UP.tstamp, UP.price) >= {up},
                   SEGMENT WINDOW AS window(1, {total})""",
        "params": {"down": [-0.7], "up": [0.7, 0.9], "total": [30, 60, 90]},
        # The automaton engine's equivalent: DN = D+ K, UP = K U+ Z (K the shared row), all
        # conditions on the last row Z; every assignment, distinct (start, end) kept.
        "standard": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            ALL MATCHES PATTERN (D{{14,}} K U{{13,}} Z) MAXLENGTH {total}
            SUBSET DK = (D, K), KUZ = (K, U, Z)
            DEFINE Z AS linear_reg_r2_signed(DK.tstamp, DK.price) <= {down}
                    AND linear_reg_r2_signed(KUZ.tstamp, KUZ.price) >= {up}""",
    },
    "head_shldr": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN (((UP1 & W)
                      (((DN1 & W) (UP2 & W & NECK_TO_HEAD)) & SHLDER_TO_HEAD)
                      (((DN2 & W & HEAD_TO_NECK) (UP3 & W)) & HEAD_TO_SHLDER)
                      (DN3 & W)) & WINDOW)
            DEFINE SEGMENT W AS window(3, 10),
                   SEGMENT DN1 AS linear_reg_r2_signed(DN1.tstamp, DN1.price) <= -{t},
                   SEGMENT DN2 AS linear_reg_r2_signed(DN2.tstamp, DN2.price) <= -{t},
                   SEGMENT DN3 AS linear_reg_r2_signed(DN3.tstamp, DN3.price) <= -{t},
                   SEGMENT UP1 AS linear_reg_r2_signed(UP1.tstamp, UP1.price) >= {t},
                   SEGMENT UP2 AS linear_reg_r2_signed(UP2.tstamp, UP2.price) >= {t},
                   SEGMENT UP3 AS linear_reg_r2_signed(UP3.tstamp, UP3.price) >= {t},
                   SEGMENT NECK_TO_HEAD AS last(NECK_TO_HEAD.price) / first(NECK_TO_HEAD.price) > {r1},
                   SEGMENT HEAD_TO_NECK AS first(HEAD_TO_NECK.price) / last(HEAD_TO_NECK.price) > {r1},
                   SEGMENT SHLDER_TO_HEAD AS last(SHLDER_TO_HEAD.price) / first(SHLDER_TO_HEAD.price) > {r2},
                   SEGMENT HEAD_TO_SHLDER AS first(HEAD_TO_SHLDER.price) / last(HEAD_TO_SHLDER.price) > {r2},
                   SEGMENT WINDOW AS window(1, {total})""",
        "params": {"t": [0.7], "total": [40, 60], "r1": [1.02, 1.05], "r2": [1.0, 1.02]},
    },
    "outlier": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((UP1 OUTLIER UP2) & WINDOW)
            DEFINE OUTLIER AS zscore(price, {ctx}) > {z},
                   SEGMENT UP1 AS linear_reg_r2_signed(UP1.tstamp, UP1.price) >= 0.7,
                   SEGMENT UP2 AS linear_reg_r2_signed(UP2.tstamp, UP2.price) >= 0.7,
                   SEGMENT WINDOW AS window(1, 30)""",
        "params": {"ctx": [15, 20, 25], "z": [2.61, 2.65]},
    },
    "rebound": {
        "data": "covid",
        "query": """PARTITION BY county ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((UP1 (((DOWN & FALL) UP2) & RISE)) & WINDOW)
            DEFINE SEGMENT FALL AS last(FALL.confirmed) / first(FALL.confirmed) < {fall},
                   SEGMENT RISE AS last(RISE.confirmed) / first(RISE.confirmed) > {rise},
                   SEGMENT UP1 AS linear_reg_r2_signed(UP1.tstamp, UP1.confirmed) >= 0.7,
                   SEGMENT UP2 AS linear_reg_r2_signed(UP2.tstamp, UP2.confirmed) >= 0.7,
                   SEGMENT DOWN AS linear_reg_r2_signed(DOWN.tstamp, DOWN.confirmed) <= -0.7,
                   SEGMENT WINDOW AS window(1, 60)""",
        "params": {"fall": [0.4, 0.6, 0.8], "rise": [3, 5]},
    },
    "cld_wave": {
        "data": "weather",
        "query": """PARTITION BY city ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((W1 (DOWN & FALL & W2) W1) & UP_MK & WINDOW)
            DEFINE SEGMENT W1 AS true, SEGMENT W2 AS window(1, 5),
                   SEGMENT FALL AS last(FALL.temp) - first(FALL.temp) < -{fall},
                   SEGMENT DOWN AS linear_reg_r2_signed(DOWN.tstamp, DOWN.temp) <= -{down},
                   SEGMENT WINDOW AS window(25, 30),
                   SEGMENT UP_MK AS mann_kendall_test(temp) >= 3.0""",
        # Seattle's daily maxima drop less than the paper's weather: falls of 8 and 10 °C.
        "params": {"fall": [8, 10], "down": [0.85, 0.95]},
        "automaton_runs": 1,  # 165 s each on this machine
        # W1 = X* K (first) and L1 or L2 Y* Z (last), DOWN = K D{0,3} L (2..5 rows: a 1-row DOWN
        # has no regression), the whole match 25..30 rows; conditions on the last row.
        "standard": """PARTITION BY city ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            ALL MATCHES PATTERN (X* K D{{0,3}} (L1 | L2 Y* Z)) MAXLENGTH 30
            SUBSET DN1 = (K, D, L1), DN2 = (K, D, L2)
            DEFINE L1 AS COUNT(*) >= 25 AND L1.temp - FIRST(K.temp) < -{fall}
                        AND linear_reg_r2_signed(DN1.tstamp, DN1.temp) <= -{down} AND mann_kendall_test(temp) >= 3.0,
                   Z AS COUNT(*) >= 25 AND LAST(L2.temp) - FIRST(K.temp) < -{fall}
                        AND linear_reg_r2_signed(DN2.tstamp, DN2.temp) <= -{down} AND mann_kendall_test(temp) >= 3.0""",
    },
    "rptd_pttrn": {
        "data": "taxi",
        "query": """ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN (((W1 (UP & RISE & W2) W3 (DOWN & FALL & W2) W1) & WINDOW){{{k}}})
            DEFINE SEGMENT W1 AS true, SEGMENT W2 AS window(20), SEGMENT W3 AS window(4),
                   SEGMENT WINDOW AS window(48),
                   SEGMENT UP AS linear_reg_r2_signed(UP.tstamp, UP.rides) >= 0.7,
                   SEGMENT DOWN AS linear_reg_r2_signed(DOWN.tstamp, DOWN.rides) <= -0.7,
                   SEGMENT FALL AS last(FALL.rides) / first(FALL.rides) < 1.0 / {rise},
                   SEGMENT RISE AS last(RISE.rides) / first(RISE.rides) > {rise}""",
        "params": {"k": [1, 2], "rise": [2, 3]},
    },
    "limit_sell": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN (RISE & WINDOW & ~(FALL W))
            DEFINE SEGMENT W AS true,
                   SEGMENT RISE AS last(RISE.price) / first(RISE.price) > {rise},
                   SEGMENT WINDOW AS window(1, {total}),
                   SEGMENT FALL AS last(FALL.price) / first(FALL.price) < {fall}""",
        "params": {"rise": [1.1], "fall": [0.97, 0.99], "total": [15, 30]},
    },
    "AFA_Q1": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((((LARGE_FALL & W) ((FALL & W)+ (RISE & W)+){{{k}}}) & EQ_FALL_AND_RISE) & WINDOW)
            DEFINE SEGMENT W AS window(2),
                   SEGMENT LARGE_FALL AS last(LARGE_FALL.price) / first(LARGE_FALL.price) < {large_fall_ratio},
                   SEGMENT FALL AS last(FALL.price) < first(FALL.price),
                   SEGMENT RISE AS last(RISE.price) > first(RISE.price),
                   SEGMENT EQ_FALL_AND_RISE AS equal_up_down_ticks(EQ_FALL_AND_RISE.price) = 1,
                   SEGMENT WINDOW AS window(1, 30)""",
        "params": {"k": [2, 5], "large_fall_ratio": [0.99, 0.98, 0.97, 0.96]},
    },
    "AFA_Q2": {
        "data": "stocks",
        "query": """PARTITION BY ticker ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((((LARGE_FALL & W) ((FALL & W)+ (RISE & W)+)+) & RECOVER) & WINDOW)
            DEFINE SEGMENT W AS window(2),
                   SEGMENT LARGE_FALL AS last(LARGE_FALL.price) / first(LARGE_FALL.price) < {large_fall_ratio},
                   SEGMENT FALL AS last(FALL.price) < first(FALL.price),
                   SEGMENT RISE AS last(RISE.price) > first(RISE.price),
                   SEGMENT RECOVER AS last(RECOVER.price) >= first(RECOVER.price),
                   SEGMENT WINDOW AS window(1, 30)""",
        "params": {"large_fall_ratio": [0.99, 0.98, 0.975, 0.97, 0.96]},
    },
    "OpenCEP_Q1": {
        "data": "bars",
        "query": """ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((A1 W (A2 & INC1) W (A3 & INC2)) & WINDOW)
            DEFINE SEGMENT W AS true, A1 AS ticker = 'GOOG', A2 AS ticker = 'GOOG', A3 AS ticker = 'GOOG',
                   INC1 AS INC1.peak > A1.peak, INC2 AS INC2.peak > A2.peak,
                   SEGMENT WINDOW AS window(tstamp, 0, {total})""",
        "params": {"total": [5, 10, 20]},
    },
    "OpenCEP_Q2": {
        "data": "bars",
        "query": """ORDER BY tstamp MEASURES FIRST(tstamp) AS s, LAST(tstamp) AS e
            PATTERN ((((A1 W A2) & FALL)+) & WINDOW)
            DEFINE SEGMENT W AS true, A1 AS ticker = 'GOOG', A2 AS ticker = 'GOOG',
                   SEGMENT FALL AS last(FALL.close) < first(FALL.close),
                   SEGMENT WINDOW AS window(tstamp, 0, {total})""",
        "params": {"total": [5, 10]},
    },
}


class _TickIndex:
    """Prefix counts of rises and falls from row to row: equal_up_down_ticks in O(1)."""

    def __init__(self, x: np.ndarray):
        d = np.diff(x)
        self.up = np.concatenate([[0], np.cumsum(d > 0)])
        self.down = np.concatenate([[0], np.cumsum(d < 0)])

    def lookup(self, start: int, end: int) -> float:
        return float(self.up[end] - self.up[start] == self.down[end] - self.down[start])


def equal_up_down_ticks(x: np.ndarray) -> float:
    d = np.diff(x)
    return float((d > 0).sum() == (d < 0).sum())


def register_functions() -> None:
    import sparkcep
    from sparkcep.functions import user_aggregate

    if user_aggregate("equal_up_down_ticks") is None:
        sparkcep.register_aggregate("equal_up_down_ticks", equal_up_down_ticks, index=_TickIndex)


def dataset(name: str, scale: float) -> pa.Table:
    if name == "stocks":
        return series.stocks(max(int(503 * scale), 5))
    if name == "weather":
        try:
            from vega_datasets import local_data

            df = local_data.seattle_weather()
            return pa.table({"city": ["Seattle"] * len(df), "tstamp": list(range(len(df))),
                             "temp": [float(x) for x in df["temp_max"]]})
        except ImportError:
            return series.weather(max(int(36 * scale), 2))
    if name == "covid":
        return series.covid(max(int(3342 * scale), 10))
    if name == "taxi":
        return series.taxi(max(int(10320 * scale), 1000))
    return series.bars(max(int(20_000 * scale), 2000))


def instances(name: str):
    t = TEMPLATES[name]
    keys = list(t["params"])
    for values in itertools.product(*(t["params"][k] for k in keys)):
        yield dict(zip(keys, values, strict=True))


def timed(fn, repeat: int = 1):
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def ndcg(predicted: list[str], times: dict[str, float]) -> float:
    """Normalized DCG of the plans ordered by estimated cost, with the fastest plan the most
    relevant (relevance = plans − rank by measured time)."""
    by_time = sorted(times, key=times.get)
    rel = {p: len(by_time) - i for i, p in enumerate(by_time)}
    dcg = sum(rel[p] / math.log2(i + 2) for i, p in enumerate(predicted))
    ideal = sum(rel[p] / math.log2(i + 2) for i, p in enumerate(by_time))
    return dcg / ideal


def _segments(out: pa.Table) -> list[tuple]:
    """(partition key, start, end) of each output row, sorted."""
    return sorted(zip(out.column(0).to_pylist(), out.column("s").to_pylist(), out.column("e").to_pylist(), strict=True))


def run_instance(name: str, table: pa.Table, params: dict, automaton: bool = True) -> dict:
    import sparkcep
    from sparkcep.api import compile_query
    from sparkcep.segments.operators import build_plan
    from sparkcep.segments.optimizer import CostModel, aggregate_cost, optimize
    from sparkcep.segments.run import partition_series, sample_of

    text = TEMPLATES[name]["query"].format(**params)
    times, results = {}, {}
    for how in PLANS:
        times[how], out = timed(lambda how=how: sparkcep.match_recognize(table, text, plan=how))
        results[how] = _segments(out)
    times["unshared"], out = timed(lambda: sparkcep.match_recognize(table, text, plan="optimized", sharing=False))
    results["unshared"] = _segments(out)
    matches = len(results["optimized"])
    for how in results:
        assert results[how] == results["optimized"], f"{name} {params}: plan {how} differs"
    # The optimizer's estimates for every plan (statistics from the same sample it uses).
    plan = compile_query(text, table, how="optimized")
    q = plan.query
    root, stats = optimize(q, sample_of(partition_series(table, q)[1]), plan.user)
    model = CostModel(stats, aggregate_cost(stats, q.define_aggregates))
    estimates = {"optimized": model.estimate(root, stats.n, stats.n)[1] if root else 0.0}
    for how in PLANS[1:]:
        r = build_plan(q, how)
        estimates[how] = model.estimate(r, stats.n, stats.n)[1] if r else 0.0
    row = {"template": name, "params": params, "matches": matches, "times": times, "estimates": estimates,
           "fastest": min(times[p] for p in PLANS), "ndcg": ndcg(sorted(PLANS[1:], key=estimates.get), {p: times[p] for p in PLANS[1:]})}
    standard = TEMPLATES[name].get("standard")
    if standard and automaton and params.get("total", 0) <= AUTOMATON_MAX_TOTAL:
        t_std, out = timed(lambda: sparkcep.match_recognize(table, standard.format(**params)))
        got = sorted(set(_segments(out)))
        assert got == results["optimized"], f"{name} {params}: the automaton engine's segments differ"
        row["automaton"] = t_std
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=0.1, help="share of the paper's series counts and lengths")
    ap.add_argument("--templates", default=",".join(TEMPLATES))
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    register_functions()
    rows = []
    tables: dict[str, pa.Table] = {}
    for name in args.templates.split(","):
        kind = TEMPLATES[name]["data"]
        if kind not in tables:
            tables[kind] = dataset(kind, args.scale)
        first = next(instances(name))
        for how in PLANS:  # untimed warm-up: imports, compiled kernels
            import sparkcep

            sparkcep.match_recognize(tables[kind], TEMPLATES[name]["query"].format(**first), plan=how)
        automaton_runs = 0
        for params in instances(name):
            # The automaton takes minutes on some templates: at most "automaton_runs" of them.
            r = run_instance(name, tables[kind], params, automaton_runs < TEMPLATES[name].get("automaton_runs", 99))
            automaton_runs += "automaton" in r
            rows.append(r)
            t = r["times"]
            extra = f", automaton {r['automaton']:.2f} s ({r['automaton'] / t['optimized']:.1f}x)" if "automaton" in r else ""
            print(f"  {name:11} {json.dumps(params):42} {r['matches']:6,d} segments; optimized {t['optimized']:.3f} s "
                  f"(fastest {r['fastest']:.3f}), sort_merge {t['sort_merge']:.3f}, left {t['left_probe']:.3f}, "
                  f"right {t['right_probe']:.3f}, unshared {t['unshared']:.3f}; NDCG {r['ndcg']:.2f}{extra}", flush=True)
    (out / "trex.json").write_text(json.dumps({"scale": args.scale, "rows": rows}, indent=2))
    summary = summarize(rows)
    _plot(summary, out)
    print(f"trex: optimizer within 1.2x of the fastest plan on {summary['within']:.0%} of {len(rows)} instances; "
          f"NDCG >= 0.9 on {summary['ndcg_ok']} of {len(summary['ndcg'])} templates; median speedup over the "
          f"automaton engine {summary['automaton'] or 'n/a'}, over no computation sharing {summary['unshared']}; "
          f"JSON and PNGs in {out}/")


def summarize(rows: list[dict]) -> dict:
    within = sum(r["times"]["optimized"] <= 1.2 * r["fastest"] for r in rows) / max(len(rows), 1)
    per = {}
    for r in rows:
        per.setdefault(r["template"], []).append(r)
    ndcgs = {k: statistics.mean(x["ndcg"] for x in v) for k, v in per.items()}
    speedups = {k: statistics.median(x["automaton"] / x["times"]["optimized"] for x in v if "automaton" in x)
                for k, v in per.items() if any("automaton" in x for x in v)}
    auto = f"{statistics.median(speedups.values()):.1f}x" if speedups else None
    # Median over instances of each alternative's time over the optimized plan's, per template.
    over = {k: {alt: statistics.median(x["times"][alt] / x["times"]["optimized"] for x in v)
                for alt in (*PLANS[1:], "unshared")} for k, v in per.items()}
    for k, v in speedups.items():
        over[k]["automaton"] = v
    unshared = statistics.median(o["unshared"] for o in over.values()) if over else 0.0
    return {"within": within, "ndcg": ndcgs, "ndcg_ok": sum(v >= 0.9 for v in ndcgs.values()),
            "speedups": speedups, "automaton": auto, "over": over, "unshared": f"{unshared:.1f}x"}


def _plot(summary: dict, out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary["over"])
    alts = [*PLANS[1:], "unshared", "automaton"]
    fig, a = plt.subplots(figsize=(12, 4.5))
    width = 0.16
    for i, alt in enumerate(alts):
        xs = [k + i * width for k, n in enumerate(names) if alt in summary["over"][n]]
        ys = [summary["over"][n][alt] for n in names if alt in summary["over"][n]]
        a.bar(xs, ys, width, label=alt if alt != "unshared" else "no computation sharing")
    a.axhline(1.0, color="k", lw=0.8)
    a.set_xticks([k + 2 * width for k in range(len(names))], names, rotation=30, ha="right")
    a.set_ylabel("median speedup of the optimized plan")
    a.set_yscale("log")
    a.set_title("T-REX optimized over each alternative, per template (Figure 8 analogue)")
    a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "trex_speedup.png", dpi=100)
    plt.close(fig)

    fig, b = plt.subplots(figsize=(9, 4))
    b.bar(names, [summary["ndcg"][n] for n in names], color="tab:green")
    b.axhline(0.9, color="k", lw=0.8, ls="--")
    b.set_ylim(0, 1.05)
    b.set_ylabel("NDCG of the optimizer's plan ranking")
    b.set_title("plan ranking per template (Figure 13 analogue)")
    b.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(out / "trex_ranking.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
