"""The run strategy (RIP RB+) executed in-process equals the sequential engine: random
queries and data, batch sizes and shared parts, including batches shorter than a match
and matches that cross several batches."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sparkcep.api import compile_query, run_plan
from sparkcep.errors import DataError
from sparkcep.parallel.run_batches import LocalBackend, RunStats, run_partition
from sparkcep.runtime import fast
from tests.test_properties import comparable, queries, tables
from tests.tiers import examples

EXAMPLES = examples(750, scaled=True)


def runs(batch: int, shared: int | None, stats: RunStats | None = None, speculate: bool = True,
         kept: list | None = None):
    def runner(plan, part, row_ids):
        order0 = plan.query.order_by[0].index if plan.query.order_by else None
        backend = LocalBackend(plan, part.cols, order0, part.n, lambda r: row_ids[r], speculate)
        out = run_partition(plan, part.n, backend, batch, shared, lambda r: row_ids[r], stats)
        if kept is not None:
            kept.append(backend.kept)
        return out
    return runner


def _run(plan, table, runner=None):
    try:
        return comparable(run_plan(plan, table, partition_runner=runner).to_pylist())
    except DataError as e:
        return ("error", str(e))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(queries(), tables(), st.integers(1, 4), st.one_of(st.none(), st.integers(0, 3)), st.booleans(),
       st.booleans())
def test_runs_equal_sequential(query, table, batch, shared, speculate, kernel):
    # speculate: a batch's first pass also emits its rows as if it began free, kept when
    # its true entry allows; both paths are compared. kernel: a batch's selection runs in
    # one compiled call where the kernel takes the query, else in Python (forced).
    text, mode = query
    plan = compile_query(text, table, mode)
    assume(not plan.define_match_number)  # the run strategies refuse MATCH_NUMBER() in DEFINE
    with mock.patch.object(fast, "ENABLED", kernel):
        got = _run(plan, table, runs(batch, shared, speculate=speculate))
    assert got == _run(plan, table), f"\\n{text}\\nbatch={batch} shared={shared} speculate={speculate} kernel={kernel}"


def test_first_pass_output_is_kept_only_where_the_entry_allows():
    import pyarrow as pa

    table = pa.table({"ts": list(range(12)), "v": [1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0]})
    clause = "ORDER BY ts MEASURES FIRST(ts) AS t0{} PATTERN (A B) DEFINE A AS v = 1, B AS v = 2"
    for measure, expected_kept in (("", 4), (", MATCH_NUMBER() AS k", 4), (", MATCH_NUMBER() * 10 AS k", 1)):
        # MATCH_NUMBER() as a measure is moved on by the matches before the batch; read
        # inside an expression, only the first batch (no match before it) keeps its
        # first-pass rows, the others are numbered on from their true entry.
        plan = compile_query(clause.format(measure), table)
        kept: list[int] = []
        assert _run(plan, table, runs(3, 1, kept=kept)) == _run(plan, table)
        assert kept == [expected_kept]
    # Matches of three rows over batches of two: most batches are entered past their first
    # row (the match before ends inside them); the first pass's rows from the entry on are
    # kept, numbered on.
    table = pa.table({"ts": list(range(12)), "v": [1, 2, 3, 0] * 3})
    plan = compile_query("ORDER BY ts MEASURES FIRST(ts) AS t0, MATCH_NUMBER() AS k ALL ROWS PER MATCH "
                         "WITH UNMATCHED ROWS PATTERN (A B C) DEFINE A AS v = 1, B AS v = 2, C AS v = 3", table)
    kept = []
    assert _run(plan, table, runs(2, 2, kept=kept)) == _run(plan, table)
    assert kept == [6]


def test_unbounded_pattern_needs_follow_up_passes():
    import pyarrow as pa

    table = pa.table({"ts": list(range(40)), "v": [1] * 39 + [2]})
    plan = compile_query("ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+ B) DEFINE A AS v = 1, B AS v = 2", table)
    stats = RunStats()
    got = run_plan(plan, table, partition_runner=runs(4, 2, stats)).to_pylist()
    assert got == [{"n": 40}]
    assert stats.passes > 2 and stats.batches == 10 and stats.follow_up_starts > 0
