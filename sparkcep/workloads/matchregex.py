"""MatchRegex's finance benchmarks (Hirzel, DEBS 2012, Table 5) in sparkcep's language.

The paper gives the patterns and one-line descriptions; predicates are written out here
from those descriptions and Figure 1 (finance1, the M-shape, is the paper's own). In the
paper's predicates ``First(x)`` is the first event of the partial match and ``Last(x)`` the
previous one; over contiguous rows these are ``FIRST(x)`` and ``PREV(x)``. finance3 and
finance4 read the output of an upstream aggregation in the paper (VWAP, min/max): here the
trade generator supplies a running ``vwap`` column and finance4 compares trades directly.
All run with ``mode="matchregex"`` over trades partitioned by symbol.
"""

from __future__ import annotations

_HEAD = """PARTITION BY symbol
ORDER BY ts, seq
MEASURES FIRST(seq) AS first_seq, LAST(seq) AS last_seq, COUNT(*) AS length, {measures}
"""

QUERIES = {
    # Large trade followed by a peak.
    "finance0": ("FIRST(price) AS start_price, MAX(price) AS peak",
                 """PATTERN (LARGE RISE+ DROP)
DEFINE LARGE AS size >= 900,
       RISE AS price > PREV(price),
       DROP AS price < PREV(price)"""),
    # M-shape (double top), Figure 1.
    "finance1": ("FIRST(price) AS start_price, MAX(price) AS top, LAST(price) AS end_price",
                 """PATTERN (S RISE+ DROP+ RISE+ DROP* DEEP)
DEFINE RISE AS price > FIRST(price) AND price >= PREV(price),
       DROP AS price >= FIRST(price) AND price < PREV(price),
       DEEP AS price < FIRST(price) AND price < PREV(price)"""),
    # Rise then flat, within a time window.
    "finance2": ("FIRST(price) AS start_price, LAST(price) AS end_price",
                 """PATTERN (S RISE* RISE_END FLAT* FLAT_END) WITHIN INTERVAL '60' SECOND
DEFINE RISE AS price > PREV(price),
       RISE_END AS price > PREV(price) AND price > FIRST(price) * 1.002,
       FLAT AS ABS(price - PREV(price)) <= 0.0005 * PREV(price),
       FLAT_END AS ABS(price - PREV(price)) <= 0.0005 * PREV(price) AND COUNT(FLAT.*) >= 1"""),
    # Price substantially above the volume-weighted average price.
    "finance3": ("LAST(price) AS price, LAST(vwap) AS vwap",
                 """PATTERN (DIVERGENCE)
DEFINE DIVERGENCE AS price > vwap * 1.01"""),
    # The highest price of the high phase stays below the lowest of the low phase.
    "finance4": ("MAX(HI.price) AS hi_max, MIN(LO.price) AS lo_min",
                 """PATTERN (HI GAP* LO)
DEFINE GAP AS price <= HI.price,
       LO AS price > HI.price * 1.003"""),
    # A large increase within a time window.
    "finance5": ("FIRST(price) AS start_price, LAST(price) AS end_price, DELTA(ts) AS took",
                 """PATTERN (S NOT_TOO_LONG* LARGE_INCREASE)
DEFINE NOT_TOO_LONG AS ts - FIRST(ts) < INTERVAL '30' SECOND,
       LARGE_INCREASE AS ts - FIRST(ts) < INTERVAL '30' SECOND AND price > FIRST(price) * 1.004"""),
}

NAMES = tuple(QUERIES)


def query(name: str) -> str:
    measures, body = QUERIES[name]
    return _HEAD.format(measures=measures) + body
