"""Rule sets for many-rules runs: ``count`` MATCH_RECOGNIZE clauses drawn from RIP's Q1–Q12,
MatchRegex's finance0–5 and the cookbook's shapes, each with its constants varied as an
analyst's copies of a rule vary them, all over one table of trades (``trades``) partitioned
by symbol."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sparkcep.workloads import matchregex, rip
from sparkcep.workloads.stock import stock_trades

# The cookbook's shapes, over the same trades.
SHAPES = {
    "v_shape": ("FIRST(A.price) AS start_price, LAST(C.price) AS end_price, COUNT(*) AS length",
                "PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price) AND price > 60"),
    "w_shape": ("FIRST(A.price) AS start_price, COUNT(*) AS length",
                "PATTERN (A B+ C+ D+ E+) DEFINE B AS price < PREV(price), C AS price > PREV(price), "
                "D AS price < PREV(price), E AS price > PREV(price) AND price > 120"),
    "small_then_large": ("COUNT(S.*) AS small_trades, LAST(L.size) AS large_size, COUNT(*) AS length",
                         "PATTERN (S{3,} L) DEFINE S AS size < 100, L AS size > 900"),
    "cold_wave": ("FIRST(A.price) AS start_price, COUNT(*) AS length",
                  "PATTERN (A{4,}) DEFINE A AS price < 65"),
    "spike": ("LAST(B.price) AS peak, COUNT(*) AS length",
              "PATTERN (A B) DEFINE A AS price < 60, B AS price > 140 AND size > 500"),
}

TEMPLATES = tuple([f"rip_{n}" for n in rip.NAMES] + [f"{n}" for n in matchregex.NAMES] + list(SHAPES))


def trades(n: int, *, symbols: int = 50, seed: int = 0) -> pd.DataFrame:
    """RIP's StockTrade rows (price uniform in [50, 150], a trade a second) with a size
    (1–999) and a running volume-weighted price per symbol (the last 20 trades), the columns
    the finance rules read."""
    df = stock_trades(n, symbols=symbols, seed=seed)
    rng = np.random.default_rng(seed + 1)
    df["size"] = rng.integers(1, 1000, n)
    sym = df["symbol"]
    pv = (df["price"] * df["size"]).groupby(sym).transform(lambda s: s.rolling(20, min_periods=1).sum())
    vol = df["size"].groupby(sym).transform(lambda s: s.rolling(20, min_periods=1).sum())
    df["vwap"] = np.round(pv / vol, 4)
    return df


def rule_set(count: int, *, seed: int = 0) -> dict[str, str]:
    """``count`` rules named ``{template}_{i}``: templates in turn, whole-number constants of
    each varied by -10..+10 in steps of 5 (so copies of one rule share some conditions)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(count):
        name = TEMPLATES[i % len(TEMPLATES)]
        out[f"{name}_{i}"] = _varied(template(name), rng)
    return out


# Templates whose searches may stay undecided for ever on an unbounded stream: finance4's
# GAP* takes every row after a high that no later trade passes, so its keys' buffered rows
# grow with the stream. A stream's copy bounds them, as the streams page advises.
UNBOUNDED = {"finance4": "WITHIN INTERVAL '30' MINUTE"}


def stream_rule_set(count: int, *, seed: int = 0) -> dict[str, str]:
    """rule_set's rules, those of UNBOUNDED templates with their bound (for streams)."""
    out = {}
    for name, text in rule_set(count, seed=seed).items():
        bound = UNBOUNDED.get(name.rsplit("_", 1)[0])
        out[name] = text if bound is None else re.sub(r"(PATTERN\s*\([^()]*\))", r"\1 " + bound, text, count=1)
    return out


def template(name: str) -> str:
    """The clause of one template, partitioned by symbol, ordered by timestamp and tradeId."""
    if name.startswith("rip_"):
        q = name.removeprefix("rip_")
        return rip.query(q, partition_by="symbol", measures=rip.user_measures(q))
    if name in SHAPES:
        measures, body = SHAPES[name]
        return f"PARTITION BY symbol ORDER BY timestamp, tradeId\nMEASURES {measures}\n{body}"
    text = matchregex.query(name).replace("ORDER BY ts, seq", "ORDER BY timestamp, tradeId")
    return re.sub(r"\bseq\b", "tradeId", re.sub(r"\bts\b", "timestamp", text))


def _varied(text: str, rng) -> str:
    head, sep, body = text.partition("DEFINE")
    if not sep:
        head, sep, body = text.partition("PATTERN")
    return head + sep + re.sub(r"(?<![\w.'])(\d{2,})(?![\w.'])",
                                lambda m: str(int(m.group(1)) + int(rng.choice([-10, -5, 0, 5, 10]))), body)
