"""``sparkcep warm``: compile the common kinds of compiled kernel into numba's cache ahead
of the first query (a fresh installation, a cluster node's bootstrap).

Each kind is a small query over a few thousand trades that reaches one compiled entry: the
thread-list kernel's three selections (SQL's preferred match, matchregex's earliest end,
ALL MATCHES), the automaton of row classes, the column scan, the partitions' one-call paths,
the labels of ALL ROWS PER MATCH, register aggregates, the compiled NFA^b, a stream's
key-by-key search (also that of the run strategy's far follow-up tasks), and segment
aggregates. Each runs from pandas and from Arrow (numba compiles read-only and writable
arrays apart). Other column types need nothing more: the kernels read every number as
float64, and ORDER BY keys narrower than 64 bits are widened to int64 or float64 before
their ordered check. numba's cache is keyed by the CPU: warm on the machine that runs the
queries, as the user that runs them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One kind of query and the compiled code it reaches."""

    name: str
    matcher: str  # the engine that runs it (run_plan's stats["matcher"])
    clause: str
    mode: str = "sql"
    data: str = "plain"  # "plain": trades of one symbol; "keyed": of three; "trades": matchregex's stream
    stream: bool = False  # one key's rows through a stream's incremental matcher, in micro-batches


_SKIP = "AFTER MATCH SKIP PAST LAST ROW"


def kinds() -> list[Kind]:
    from sparkcep.workloads import matchregex, rip

    return [
        Kind("SQL, thread-list kernel", "kernel", rip.query("Q4", maxlength=50)),
        Kind("ALL ROWS PER MATCH", "kernel", rip.query("Q4", maxlength=50, skip="ALL ROWS PER MATCH")),
        Kind("ALL MATCHES", "kernel", rip.query("Q4", skip="ALL MATCHES", maxlength=50)),
        Kind("SKIP TO NEXT ROW", "kernel", rip.query("Q7", skip="AFTER MATCH SKIP TO NEXT ROW")),
        Kind("static pattern, automaton", "automaton", rip.query("Q2", maxlength=50)),
        Kind("static pattern, ALL MATCHES", "kernel", rip.query("Q2", skip="ALL MATCHES", maxlength=50)),
        Kind("static pattern, ALL ROWS PER MATCH", "automaton", rip.query("Q2", maxlength=50, skip="ALL ROWS PER MATCH")),
        Kind("fixed-length pattern, column scan", "column scan", rip.query("Q11", measures="AVG(price) AS mean, COUNT(price) AS n")),
        # The ordered check of a floating-point ORDER BY key (integer keys are tradeId's).
        Kind("ORDER BY a double, column scan", "column scan",
             "ORDER BY price MEASURES COUNT(*) AS n PATTERN (A B) DEFINE A AS tradeId % 2 = 0, B AS tradeId % 3 = 0"),
        Kind("PARTITION BY, kernel", "kernel", rip.query("Q7", partition_by="symbol"), data="keyed"),
        Kind("PARTITION BY, automaton", "automaton", rip.query("Q2", maxlength=50, partition_by="symbol"), data="keyed"),
        Kind("PARTITION BY, column scan", "column scan", rip.query("Q11", partition_by="symbol"), data="keyed"),
        Kind("matchregex: earliest end, aggregates and intervals", "kernel", matchregex.query("finance5"), mode="matchregex",
             data="trades"),
        Kind("EVENT SELECTION, skip till next match", "NFAb kernel",
             "PARTITION BY symbol ORDER BY tradeId MEASURES COUNT(B.*) AS n ALL MATCHES "
             "EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B+) WITHIN 50 "
             "DEFINE A AS price < 70, B AS price > LAST(price, 1)", data="keyed"),
        Kind("EVENT SELECTION, preferred match", "NFAb kernel",
             "PARTITION BY symbol ORDER BY tradeId MEASURES COUNT(B.*) AS n " + _SKIP + " "
             "EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A B+ C) WITHIN 30 "
             "DEFINE A AS price < 70, B AS price > A.price, C AS price > 130", data="keyed"),
        Kind("negation", "NFAb kernel",
             "ORDER BY tradeId MEASURES A.tradeId AS a, C.tradeId AS c " + _SKIP + " "
             "EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A !B C) WITHIN 20 "
             "DEFINE A AS price < 70, B AS price > 120, C AS price > 100"),
        Kind("a stream's key, matchregex", "kernel", matchregex.query("finance4").replace("PARTITION BY symbol\n", ""),
             mode="matchregex", data="trades", stream=True),
        Kind("segments, time-series aggregates", "segments",
             "ORDER BY tradeId MEASURES FIRST(tradeId) AS a, LAST(tradeId) AS b "
             "PATTERN (UP & W) DEFINE SEGMENT W AS window(tradeId, 5, 8), "
             "SEGMENT UP AS linear_reg_r2_signed(UP.tradeId, UP.price) >= 0.5 AND mann_kendall_test(price) >= 1"),
    ]


def warm() -> Iterator[tuple[Kind, float, str]]:
    """Run every kind once (compiling what numba's cache lacks); yields each kind, its
    seconds and the engine that ran it."""
    import pyarrow as pa

    from sparkcep import jit
    from sparkcep.api import run_local
    from sparkcep.workloads.stock import stock_trades, trade_stream

    data = {"plain": stock_trades(3000, symbols=1, seed=3), "keyed": stock_trades(3000, symbols=3, seed=3),
            "trades": trade_stream(3000, symbols=3, seed=3)}
    tables = {k: pa.Table.from_pandas(frame, preserve_index=False) for k, frame in data.items()}
    chunked = {k: pa.concat_tables([t.slice(0, 1000), t.slice(1000)]) for k, t in tables.items()}
    for kind in kinds():
        t0 = time.perf_counter()
        with jit.forcing("on"):  # a few thousand rows would run on the Python matchers
            if kind.stream:
                matcher = _stream(tables[kind.data], kind.clause, kind.mode)
            else:
                stats: dict = {}
                run_local(data[kind.data], kind.clause, mode=kind.mode, stats=stats)
                run_local(chunked[kind.data], kind.clause, mode=kind.mode)
                matcher = stats.get("matcher", "")
        yield kind, time.perf_counter() - t0, matcher


def _stream(table, clause: str, mode: str) -> str:
    """``table`` as one key of a stream, in three micro-batches (a matchregex query there
    decides its starts through the kernel's candidates, not its window selection): the
    engine that ran it."""
    from sparkcep.api import compile_query
    from sparkcep.runtime.incremental import IncrementalMatcher

    plan = compile_query(clause, table, mode)
    matcher = IncrementalMatcher(plan, table.schema)
    state = matcher.empty_state()
    times = table.column(plan.query.order_by[0].index)
    third = table.num_rows // 3
    for k in range(2):
        matcher.add(state, table.slice(k * third, third))
        matcher.advance(state, times[(k + 1) * third - 1].as_py())
    matcher.add(state, table.slice(2 * third))
    matcher.finish(state)
    return "kernel" if matcher.kernel is not None else "python"


def _background(lock: str) -> int:
    """The background compile a first query starts (``jit.warm_in_background``): every kind
    at low priority, then the stamp; the lock is removed once the stamp is written (after a
    failure it stays, so that no process tries again before it is stale)."""
    import os

    from sparkcep import jit

    try:
        os.nice(10)
    except OSError:
        pass
    jit.silence()
    for _ in warm():
        pass
    jit.write_stamp()
    try:
        os.unlink(lock)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--background":
        sys.exit(_background(sys.argv[2]))
    sys.exit("usage: python -m sparkcep.cli.warm --background LOCK (or: sparkcep warm)")
