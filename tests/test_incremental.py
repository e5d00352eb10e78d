"""The incremental matcher (the core of streaming) against the batch engine: rows of one key
arrive shuffled within the watermark delay, in chunks of any size, the watermark trails the
largest event time seen; after ``finish`` the concatenated output equals the batch output
on the rows that were not late, and the state stays bounded and survives a round trip
through bytes between chunks."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.api import compile_query
from sparkcep.runtime.incremental import IncrementalMatcher, KeyState
from tests.tiers import examples

QUERIES = [
    "ORDER BY t MEASURES FIRST(A.t) AS s, LAST(B.t) AS e, COUNT(*) AS c PATTERN (A B+) "
    "DEFINE A AS v < 5, B AS v >= PREV(v)",
    "ORDER BY t MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c ALL ROWS PER MATCH WITH UNMATCHED ROWS "
    "PATTERN (A+ B) DEFINE A AS v > 3, B AS v <= 3",
    "ORDER BY t MEASURES CLASSIFIER() AS c, RUNNING COUNT(*) AS n, RUNNING SUM(B.v) AS sb ALL ROWS PER MATCH "
    "PATTERN (A {- B+ -} C) DEFINE A AS v > 5, B AS v < 5, C AS v >= 5",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e AFTER MATCH SKIP TO NEXT ROW PATTERN (A B* C) "
    "DEFINE A AS v > 2, B AS v > PREV(v), C AS v < PREV(v)",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e ALL MATCHES PATTERN (A+ B?) DEFINE A AS v % 2 = 0",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, SUM(v) AS total PATTERN (A{2,} B) WITHIN 6 "
    "DEFINE A AS v <= NEXT(v), B AS v > 4",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, AVG(A.v) AS av AFTER MATCH SKIP TO LAST A "
    "PATTERN (A{2,} B) DEFINE A AS v < 7, B AS v >= 7 OR MATCH_NUMBER() > 3",
    "ORDER BY t, k MEASURES FIRST(t) AS s, LAST(k) AS lk ONE ROW PER MATCH PATTERN (A B) "
    "DEFINE B AS B.v > A.v",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (A* B) DEFINE A AS true, B AS v = 9",
    "ORDER BY t MEASURES COUNT(*) AS c PATTERN (A) DEFINE A AS true",
    "ORDER BY t MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A+ $) DEFINE A AS v > 1",
    "ORDER BY t MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (^ A B) DEFINE A AS v > 1",
    # EVENT SELECTION and negation (NFA^b): preferred matches, ALL MATCHES with WITHIN.
    "ORDER BY t MEASURES FIRST(A.t) AS s, LAST(B.t) AS e, COUNT(A.*) AS c EVENT SELECTION SKIP TILL NEXT MATCH "
    "PATTERN (A{2,} B) DEFINE A AS v > 3 AND (COUNT(A.*) = 1 OR v >= LAST(A.v, 1)), B AS v < 2",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH "
    "PATTERN (A B) WITHIN 5 DEFINE A AS v > 6, B AS v < A.v",
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e, CLASSIFIER() AS c ALL ROWS PER MATCH "
    "EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A !N B) DEFINE A AS v > 5, N AS v = 0, B AS v > A.v",
    "ORDER BY t MEASURES FIRST(t) AS s, COUNT(*) AS c EVENT SELECTION STRICT CONTIGUITY PATTERN (A B+) "
    "DEFINE A AS v < 3, B AS v > 3",
]


def _table(times, values, keys) -> pa.Table:
    return pa.table({"t": pa.array(times, pa.int64()), "v": pa.array(values, pa.int64()),
                     "k": pa.array(keys, pa.int64())})


@st.composite
def streams(draw):
    n = draw(st.integers(0, 40))
    times = sorted(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)))
    values = draw(st.lists(st.one_of(st.integers(0, 9), st.none()), min_size=n, max_size=n))
    delay = draw(st.integers(0, 8))
    # Arrival: event time plus a jitter within the delay (some rows may still come late
    # when the jitter exceeds what the watermark allows: those are dropped and counted).
    jitter = draw(st.lists(st.integers(0, delay + 2), min_size=n, max_size=n))
    arrival = sorted(range(n), key=lambda i: (times[i] + jitter[i], i))
    cuts = draw(st.lists(st.integers(1, 6), min_size=1, max_size=n + 1))
    roundtrip = draw(st.booleans())
    return times, values, delay, arrival, cuts, roundtrip


def arrivals(times, delay, arrival, cuts):
    """Per chunk of arrivals: its rows on time (late ones dropped) and the watermark after it."""
    watermark = None
    i, c = 0, 0
    while i < len(arrival):
        size = cuts[c % len(cuts)]
        c += 1
        chunk = arrival[i:i + size]
        i += size
        fresh = [r for r in chunk if watermark is None or times[r] >= watermark]  # late rows are dropped
        seen = max(times[r] for r in arrival[:i])
        watermark = seen - delay if watermark is None else max(watermark, seen - delay)
        yield fresh, watermark


def run_stream(query: str, times, values, delay, arrival, cuts, roundtrip, use_kernel=None):
    keys = list(range(len(times)))
    schema = _table([], [], []).schema
    matcher = IncrementalMatcher(compile_query(query, _table([], [], [])), schema, use_kernel)
    state = matcher.empty_state()
    outputs, accepted = [], []
    for fresh, watermark in arrivals(times, delay, arrival, cuts):
        accepted += fresh
        matcher.add(state, _table([times[r] for r in fresh], [values[r] for r in fresh], [keys[r] for r in fresh]))
        outputs.append(matcher.advance(state, watermark))
        if roundtrip:
            state = KeyState.from_bytes(state.to_bytes())
    outputs.append(matcher.finish(state))
    got = pa.concat_tables(outputs) if outputs else None
    # The batch engine sees the accepted rows (in arrival order: ties break by arrival).
    batch_in = _table([times[r] for r in accepted], [values[r] for r in accepted], [keys[r] for r in accepted])
    want = sparkcep.match_recognize(batch_in, query)
    return got, want, state


@pytest.mark.parametrize("query", QUERIES)
@given(data=streams())
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_stream_equals_batch(query, data):
    got, want, _ = run_stream(query, *data)
    assert got.to_pylist() == want.to_pylist()


KERNEL_QUERIES = [q for q in QUERIES
                  if IncrementalMatcher(compile_query(q, _table([], [], [])), _table([], [], []).schema).kernel]


@pytest.mark.parametrize("query", KERNEL_QUERIES)
@given(data=streams())
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_stream_on_the_python_vm_equals_batch(query, data):
    # The queries the kernel answers by default, forced onto the Python VM.
    got, want, _ = run_stream(query, *data, use_kernel=False)
    assert got.to_pylist() == want.to_pylist()


def test_kernel_serves_plain_queries():
    assert len(KERNEL_QUERIES) >= 5


def test_matchregex_mode_streams_too():
    times = list(range(30))
    values = [i % 7 for i in times]
    q = "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (A+ B) DEFINE A AS v < 4, B AS v >= 4"
    arrival = list(range(30))
    matcher = IncrementalMatcher(compile_query(q, _table([], [], []), mode="matchregex"), _table([], [], []).schema)
    state = matcher.empty_state()
    out = []
    for i in range(0, 30, 4):
        matcher.add(state, _table(times[i:i + 4], values[i:i + 4], times[i:i + 4]))
        out.append(matcher.advance(state, times[min(i + 3, 29)] - 1))
    out.append(matcher.finish(state))
    want = sparkcep.match_recognize(_table(times, values, times), q, mode="matchregex")
    assert pa.concat_tables(out).to_pylist() == want.to_pylist()
    del arrival


def test_state_stays_bounded_on_a_long_stream():
    # 20 000 rows through a query whose matches are short: the buffer keeps only the rows
    # of the undecided start and the lookback, never the history.
    q = QUERIES[0]
    matcher = IncrementalMatcher(compile_query(q, _table([], [], [])), _table([], [], []).schema)
    state = matcher.empty_state()
    peak = 0
    total = 0
    for b in range(200):
        ts = list(range(b * 100, b * 100 + 100))
        matcher.add(state, _table(ts, [t % 10 for t in ts], ts))
        total += matcher.advance(state, ts[-1] - 5).num_rows
        peak = max(peak, state.rows.num_rows)
    total += matcher.finish(state).num_rows
    ts = list(range(20_000))
    assert total == sparkcep.match_recognize(_table(ts, [t % 10 for t in ts], ts), q).num_rows
    assert peak <= 120 and state.released > 19_000


def test_streams_refuse_what_they_cannot_do_yet():
    t = _table([], [], [])
    with pytest.raises(sparkcep.QueryError, match="DESC"):
        IncrementalMatcher(compile_query("ORDER BY t DESC PATTERN (A)", t), t.schema)
    with pytest.raises(sparkcep.QueryError, match="STRICT CONTIGUITY with PARTITION BY"):
        IncrementalMatcher(compile_query("PARTITION BY k ORDER BY t EVENT SELECTION STRICT CONTIGUITY PATTERN (A B)",
                                         t), t.schema)


def test_rows_without_event_time_are_a_data_error():
    t = _table([], [], [])
    matcher = IncrementalMatcher(compile_query("ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A)", t), t.schema)
    with pytest.raises(sparkcep.DataError, match="event time"):
        matcher.add(matcher.empty_state(), pa.table({"t": pa.array([1, None], pa.int64()), "v": [1, 2], "k": [1, 2]}))


def test_late_rows_are_split_off():
    t = _table([], [], [])
    matcher = IncrementalMatcher(compile_query("ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A)", t), t.schema)
    fresh, late = matcher.split_late(_table([5, 1, 7, 3], [1, 2, 3, 4], [1, 2, 3, 4]), 4)
    assert fresh.column("t").to_pylist() == [5, 7] and late.column("t").to_pylist() == [1, 3]
    state = matcher.empty_state()
    state.late = 2
    assert KeyState.from_bytes(state.to_bytes()).late == 2


TIMEOUT_QUERIES = [
    "ORDER BY t MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (A B+ C) WITHIN 6 "
    "DEFINE A AS v > 6, B AS v BETWEEN 2 AND 6, C AS v < 2",
    "ORDER BY t MEASURES FIRST(t) AS s ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH PATTERN (A B C) WITHIN 5 "
    "DEFINE A AS v > 6, B AS v < A.v, C AS v = 9",
    "ORDER BY t MEASURES FIRST(t) AS s EVENT SELECTION SKIP TILL NEXT MATCH PATTERN (A B+ C) WITHIN 7 "
    "DEFINE A AS v > 6, B AS v > 3, C AS v = 0",
]


def _timeouts_of(query: str, times, values, chunks: list[int], delay: int):
    t = _table([], [], [])
    matcher = IncrementalMatcher(compile_query(query, t), t.schema)
    state = matcher.empty_state()
    got = []
    i = 0
    for size in chunks:
        ts = times[i:i + size]
        if not ts:
            break
        matcher.add(state, _table(ts, values[i:i + size], ts))
        got.append(matcher.step(state, ts[-1] - delay)[1])
        i += size
    if i < len(times):
        matcher.add(state, _table(times[i:], values[i:], times[i:]))
    got.append(matcher.step(state, final=True)[1])
    return pa.concat_tables(got).to_pylist()


@pytest.mark.parametrize("query", TIMEOUT_QUERIES)
@given(values=st.lists(st.integers(0, 9), max_size=40), chunks=st.lists(st.integers(1, 7), min_size=1, max_size=12),
       delay=st.integers(0, 4))
@settings(max_examples=examples(60), deadline=None)
def test_timeouts_do_not_depend_on_chunks(query, values, chunks, delay):
    # The timed-out partial matches a stream reports are the same whatever the micro-batches.
    times = [i + i // 3 for i in range(len(values))]
    assert _timeouts_of(query, times, values, chunks, delay) == _timeouts_of(query, times, values, [len(values)], 0)


def test_timeouts_report_what_within_ended():
    # A at t=0 takes B at 1 and 2; the next row comes at t=20, past WITHIN 5: the partial
    # match (A B B) timed out at 0 + 5. The A at t=30 died when its next row failed B (not a
    # timeout); the A at t=40 is still alive at the end of input, whose watermark passes
    # every deadline (expired at 45).
    q = "ORDER BY t MEASURES FIRST(t) AS s PATTERN (A B+ C) WITHIN 5 DEFINE A AS v = 7, B AS v = 4, C AS v = 1"
    times = [0, 1, 2, 20, 30, 31, 40, 41]
    values = [7, 4, 4, 0, 7, 0, 7, 4]
    got = _timeouts_of(q, times, values, [3, 2, 3], 1)
    assert got == [{"start_time": 0, "variables": ["A", "B", "B"], "rows": 3, "expired_at": 5},
                   {"start_time": 40, "variables": ["A", "B"], "rows": 2, "expired_at": 45}]
    # A query without WITHIN never times out.
    assert _timeouts_of(q.replace("WITHIN 5 ", ""), times, values, [8], 0) == []


def test_state_is_bounded_with_a_clear_error():
    # A match that never ends keeps its rows: past the bound, a DataError says why.
    t = _table([], [], [])
    matcher = IncrementalMatcher(compile_query("ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A+ B) DEFINE A AS true, B AS v < 0", t), t.schema,
                                 max_rows=50)
    state = matcher.empty_state()
    with pytest.raises(sparkcep.DataError, match="more than 50 rows of one key") as e:
        for b in range(10):
            ts = list(range(b * 10, b * 10 + 10))
            matcher.add(state, _table(ts, ts, ts))
            matcher.advance(state, ts[-1])
    assert e.value.column == "t" and "WITHIN or MAXLENGTH" in str(e.value)


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), float("-inf")])
def test_a_row_without_a_finite_event_time_is_a_data_error(bad):
    t = pa.table({"t": pa.array([1.0, bad, 3.0], pa.float64()), "v": [1, 2, 3]})
    matcher = IncrementalMatcher(compile_query("ORDER BY t MEASURES MATCH_NUMBER() AS m PATTERN (A) DEFINE A AS v > 0", t), t.schema)
    with pytest.raises(sparkcep.DataError) as e:
        matcher.add(matcher.empty_state(), t)
    assert e.value.column == "t" and e.value.row == 1
