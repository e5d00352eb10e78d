"""Many keys matched together (a stream's bucket, runtime.keyed) against the batch engine:
rows of several keys arrive shuffled within the watermark delay, in chunks of any size;
after ``finish`` the output equals the batch output over the rows that were not late, on
the one-kernel-call path and on the key-at-a-time path alike, with the state round-tripped
through bytes between chunks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.api import compile_query
from sparkcep.data.partitions import sort_and_partition
from sparkcep.errors import DataError
from sparkcep.runtime.keyed import EventClock, KeyedMatcher, KeyedState
from tests.test_incremental import _table, arrivals
from tests.tiers import examples

_HEAD = "PARTITION BY k ORDER BY t "
# Plain queries whose ONE ROW measures are columns: every key in one kernel call.
BULK = [_HEAD + q for q in [
    "MEASURES FIRST(t) AS s, LAST(t) AS e, COUNT(*) AS c, MATCH_NUMBER() AS m PATTERN (A B+) "
    "DEFINE A AS v < 5, B AS v >= PREV(v)",
    "MEASURES FIRST(t) AS s, LAST(t) AS e, SUM(v) AS total AFTER MATCH SKIP TO NEXT ROW PATTERN (A B* C) "
    "DEFINE A AS v > 2, B AS v > PREV(v), C AS v < PREV(v)",
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (^ A B) DEFINE A AS v > 1",
    "MEASURES FIRST(t) AS s, LAST(v) AS lv, MAX(v) AS top PATTERN (A B) DEFINE A AS v <= NEXT(v), B AS B.v > A.v",
    "MEASURES FIRST(t) AS s, PREV(FIRST(v)) AS before, MATCH_NUMBER() AS m AFTER MATCH SKIP TO LAST A "
    "PATTERN (A{2,} B) DEFINE A AS v < 7, B AS v >= 7",
    "MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (A* B) DEFINE A AS true, B AS v = 9",
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A+ $) DEFINE A AS v > 1",
    # PREV and NEXT at a key's first and last rows read nothing of the keys beside it.
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A B) DEFINE A AS v < PREV(v) OR v = PREV(v, 2), "
    "B AS B.v <= A.v",
    "MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (B A) DEFINE A AS v < NEXT(v) OR NEXT(v) IS NULL, "
    "B AS B.v < A.v",
    # ... in MEASURES too, of a variable's row: measure columns over the matchers' labels.
    "MEASURES PREV(A.t) AS before, LAST(B.t) AS e, NEXT(B.v) AS after PATTERN (A B+) "
    "DEFINE A AS v < 5, B AS v >= PREV(v)",
    # ALL ROWS PER MATCH leaving excluded rows out: the matches' exclusion flags come along.
    "MEASURES CLASSIFIER() AS c, RUNNING COUNT(*) AS n, RUNNING SUM(B.v) AS sb ALL ROWS PER MATCH "
    "PATTERN (A {- B+ -} C) DEFINE A AS v > 5, B AS v < 5, C AS v >= 5",
]]
# Measures that read rows of their match only: one kernel call, then measured match by match.
MATCHWISE = [_HEAD + q for q in [
    "MEASURES FIRST(A.t) AS s, LAST(B.t) AS e, AVG(B.v) AS av PATTERN (A B+) DEFINE A AS v < 5, B AS v >= PREV(v)",
    "MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c, RUNNING SUM(v) AS run ALL ROWS PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B? C*) DEFINE A AS v > 5, C AS v < A.v",
    "MEASURES PREV(A.t) AS before, LAST(B.t) + 1 AS e PATTERN (A B+) DEFINE A AS v < 5, B AS v >= PREV(v)",
]]
# Queries that step key by key (unmatched rows, WITHIN, event selection, PREV in MEASURES
# beyond what measure columns take).
EACH = [_HEAD + q for q in [
    "MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c ALL ROWS PER MATCH WITH UNMATCHED ROWS "
    "PATTERN (A+ B) DEFINE A AS v > 3, B AS v <= 3",
    "MEASURES PREV(A.t) AS before, CAST(LAST(B.t) AS varchar(3)) AS e PATTERN (A B+) "
    "DEFINE A AS v < 5, B AS v >= PREV(v)",
    "MEASURES FIRST(t) AS s, LAST(t) AS e, SUM(v) AS total PATTERN (A{2,} B) WITHIN 6 "
    "DEFINE A AS v <= NEXT(v), B AS v > 4",
    "MEASURES FIRST(A.t) AS s, COUNT(A.*) AS c EVENT SELECTION SKIP TILL NEXT MATCH "
    "PATTERN (A{2,} B) DEFINE A AS v > 3, B AS v < 2",
]]


# WITHIN without timeouts reported: the kernel, ending searches at the watermark.
WITHIN = [_HEAD + q for q in [
    "MEASURES FIRST(t) AS s, LAST(t) AS e, SUM(v) AS total PATTERN (A{2,} B) WITHIN 6 "
    "DEFINE A AS v <= NEXT(v), B AS v > 4",
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A B+ C) WITHIN 4 DEFINE B AS v > PREV(v), C AS v < PREV(v)",
    "MEASURES FIRST(t) AS s, LAST(t) AS e AFTER MATCH SKIP TO NEXT ROW PATTERN (A B*) WITHIN 3 "
    "DEFINE A AS v > 5, B AS v < 5",
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A+ B | C) WITHIN 5 DEFINE A AS v > 2, B AS v = 0, "
    "C AS v = 9",
]]


@st.composite
def streams(draw):
    n = draw(st.integers(0, 50))
    times = sorted(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)))
    values = draw(st.lists(st.one_of(st.integers(0, 9), st.none()), min_size=n, max_size=n))
    keys = draw(st.lists(st.one_of(st.integers(0, 3), st.none()), min_size=n, max_size=n))
    delay = draw(st.integers(0, 6))
    jitter = draw(st.lists(st.integers(0, delay + 2), min_size=n, max_size=n))
    arrival = sorted(range(n), key=lambda i: (times[i] + jitter[i], i))
    cuts = draw(st.lists(st.integers(1, 12), min_size=1, max_size=n + 1))
    return times, values, keys, delay, arrival, cuts, draw(st.booleans())


def run_keyed(query: str, times, values, keys, delay, arrival, cuts, roundtrip, bulk, timeouts=True,
              presorted=False):
    schema = _table([], [], []).schema
    matcher = KeyedMatcher(compile_query(query, _table([], [], [])), schema, bulk=bulk, timeouts=timeouts)
    state = KeyedState.empty(schema)
    outputs, accepted = [], []
    for fresh, watermark in arrivals(times, delay, arrival, cuts):
        accepted += fresh
        rows = _table([times[r] for r in fresh], [values[r] for r in fresh], [keys[r] for r in fresh])
        bounds = None
        if presorted:  # sorted once for every rule that sorts alike (a stream of rules)
            parts = sort_and_partition(rows, matcher.plan.query)
            rows, bounds = rows.take(pa.array(parts.order, pa.int64())), parts.bounds
        got = matcher.advance(state, rows, watermark, due_ms=watermark * 1000 + 1, fresh_bounds=bounds)
        outputs.append(got.out)
        state = KeyedState.from_bytes(got.state.to_bytes()) if roundtrip else got.state
    outputs.append(matcher.finish(state).out)
    got = pa.concat_tables(outputs)
    want = sparkcep.match_recognize(_table([times[r] for r in accepted], [values[r] for r in accepted],
                                           [keys[r] for r in accepted]), query)
    return got, want, matcher


def _rows(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=repr)


@pytest.mark.parametrize("query", BULK + MATCHWISE)
@given(data=streams())
@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_one_kernel_call_for_every_key_equals_batch(query, data):
    got, want, matcher = run_keyed(query, *data, bulk=True)
    assert matcher.bulk
    assert _rows(got) == _rows(want)


@pytest.mark.parametrize("query", BULK[:3] + MATCHWISE + EACH)
@given(data=streams())
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_key_by_key_equals_batch(query, data):
    got, want, matcher = run_keyed(query, *data, bulk=False)
    assert not matcher.bulk
    assert _rows(got) == _rows(want)


@pytest.mark.parametrize("bulk", [True, False])
@pytest.mark.parametrize("query", WITHIN)
@given(data=streams())
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_within_on_the_kernel_ends_searches_at_the_watermark(query, bulk, data):
    got, want, matcher = run_keyed(query, *data, bulk=bulk, timeouts=False)
    assert matcher.single.kernel is not None and matcher.bulk == bulk
    assert _rows(got) == _rows(want)


@pytest.mark.parametrize("query", BULK[:2] + WITHIN[:2] + EACH[:1])
@given(data=streams())
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_new_rows_sorted_once_merge_with_each_keys_buffer(query, data):
    got, want, _ = run_keyed(query, *data, bulk=None, timeouts=False, presorted=True)
    assert _rows(got) == _rows(want)


def test_within_stays_on_the_vm_where_timeouts_are_reported():
    schema = _table([], [], []).schema
    for q in WITHIN:
        assert KeyedMatcher(compile_query(q, schema.empty_table()), schema).single.kernel is None
        assert KeyedMatcher(compile_query(q, schema.empty_table()), schema, timeouts=False).bulk


@pytest.mark.parametrize("bulk,timeouts", [(True, False), (False, False), (False, True)])
def test_a_quiet_keys_search_ends_when_the_watermark_passes_its_deadline(bulk, timeouts):
    # Key 0: A at t=0 and B at t=1, then nothing; key 1's rows move the watermark on. Once
    # it passes t=0 + WITHIN, no row of key 0 still to come can extend the match: it is out
    # then, not at the end of input; until then the key's timer is that deadline.
    query = WITHIN[2]
    schema = _table([], [], []).schema
    matcher = KeyedMatcher(compile_query(query, schema.empty_table()), schema, bulk=bulk, timeouts=timeouts)
    first = matcher.advance(KeyedState.empty(schema), _table([0, 1, 2], [9, 1, 0], [0, 0, 1]), 2, due_ms=2001)
    assert first.out.num_rows == 0
    assert 3001 in first.state.keys["timer"].tolist()  # (t=0 + WITHIN 3, on the watermark's clock)
    second = matcher.advance(first.state, _table(list(range(3, 12)), [0] * 9, [1] * 9), 8, due_ms=3002)
    assert second.out.to_pylist() == [{"k": 0, "s": 0, "e": 1}]


@pytest.mark.parametrize("bulk", [True, False])
def test_a_quiet_keys_deadline_on_a_timestamp_column(bulk):
    # As above with event time a timestamp (the bulk path's deadlines are whole columns there).
    import datetime as dt

    def at(seconds):
        return [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=x) for x in seconds]

    def rows(seconds, values, keys):
        return pa.table({"t": pa.array(at(seconds), pa.timestamp("us", "UTC")), "v": pa.array(values, pa.int64()),
                         "k": pa.array(keys, pa.int64())})

    query = WITHIN[2].replace("WITHIN 3", "WITHIN INTERVAL '3' SECOND")
    schema = rows([], [], []).schema
    matcher = KeyedMatcher(compile_query(query, schema.empty_table()), schema, bulk=bulk, timeouts=False)
    clock = EventClock(schema.field("t").type)
    first = matcher.advance(KeyedState.empty(schema), rows([0, 1, 2], [9, 1, 0], [0, 0, 1]), at([2])[0])
    assert first.out.num_rows == 0 and clock.timer(at([3])[0]) in first.state.keys["timer"].tolist()
    second = matcher.advance(first.state, rows(list(range(3, 12)), [0] * 9, [1] * 9), at([8])[0],
                             due_ms=clock.timer(at([8])[0]))  # (Spark calls a key whose timer is due)
    assert [(r["k"], r["s"], r["e"]) for r in second.out.to_pylist()] == [(0, *at([0, 1]))]


def test_bulk_is_chosen_for_plain_queries_only():
    schema = _table([], [], []).schema
    assert all(KeyedMatcher(compile_query(q, schema.empty_table()), schema).bulk for q in BULK + MATCHWISE)
    assert not any(KeyedMatcher(compile_query(q, schema.empty_table()), schema).bulk for q in EACH)


def test_many_keys_in_one_call_keep_their_own_numbers_and_anchors():
    # 200 keys, rows arriving in two calls: MATCH_NUMBER and ^ continue per key.
    query = _HEAD + "MEASURES MATCH_NUMBER() AS m, FIRST(t) AS s PATTERN (^ A | B) DEFINE A AS v > 0, B AS v = 0"
    n = 2000
    table = _table(list(range(n)), [i % 3 for i in range(n)], [i % 200 for i in range(n)])
    schema = table.schema
    matcher = KeyedMatcher(compile_query(query, table), schema)
    assert matcher.bulk
    first = matcher.advance(KeyedState.empty(schema), table.slice(0, 1000), 1000)
    second = matcher.advance(first.state, table.slice(1000), 1500)
    last = matcher.finish(second.state)
    got = pa.concat_tables([first.out, second.out, last.out])
    assert _rows(got) == _rows(sparkcep.match_recognize(table, query))
    assert first.state.count == 200


def test_a_key_holding_too_many_rows_is_named():
    query = _HEAD + "MEASURES COUNT(*) AS c PATTERN (A+ B) DEFINE A AS v > 0, B AS v = 0"
    table = _table(list(range(50)), [1] * 50, [7] * 25 + [8] * 25)
    for bulk in (True, False):
        matcher = KeyedMatcher(compile_query(query, table), table.schema, max_rows=10, bulk=bulk)
        with pytest.raises(DataError, match="more than 10 rows of one key") as e:
            matcher.advance(KeyedState.empty(table.schema), table, 100)
        assert e.value.key == {"k": 7}


def test_timers_are_the_first_row_each_key_still_waits_for():
    query = _HEAD + "MEASURES COUNT(*) AS c PATTERN (A B) DEFINE B AS v > 0"
    table = _table([1, 2, 3, 10, 11], [0, 1, 0, 0, 1], [1, 1, 2, 2, 3])
    for bulk in (True, False):
        matcher = KeyedMatcher(compile_query(query, table), table.schema, bulk=bulk)
        got = matcher.advance(KeyedState.empty(table.schema), table, 3)
        # below 3 is sealed. key 1: all sealed; key 2 waits for t=3, key 3 for t=11 (seconds on Spark's clock)
        assert got.state.keys["timer"].tolist() == [0, 3_001, 11_001]


@pytest.mark.parametrize("kind", [pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us", "UTC"),
                                  pa.timestamp("ns"), pa.int64(), pa.float64()])
def test_the_clock_vectorized_equals_one_value_at_a_time(kind):
    values = [-1_500, -1, 0, 1, 1_700_000_000, 2_000_000_001]
    if pa.types.is_floating(kind):
        values = [v / 7 for v in values] + [0.0004, -0.0004]
    arr = pa.array(values, pa.int64()).cast(kind) if not pa.types.is_floating(kind) else pa.array(values, kind)
    clock = EventClock(kind)
    assert clock.timers(arr).tolist() == [clock.timer(v) for v in arr.to_pylist()]


@pytest.mark.parametrize("kind, far", [(pa.int64(), -(2**63)), (pa.int64(), 2**62), (pa.float64(), 1e300),
                                       (pa.timestamp("s"), -(2**62)), (pa.timestamp("ms"), 2**63 - 1)])
def test_an_event_time_past_the_clock_is_a_data_error_naming_the_column(kind, far):
    """Seconds whose milliseconds need more than 64 bits: an error, not a wrapped timer
    (np.abs(-2^63) is -2^63, which passed a range test by absolute value)."""
    clock = EventClock(kind, "ts")
    arr = pa.array([far, 5], pa.int64()).cast(kind) if not pa.types.is_floating(kind) else pa.array([far, 5.0], kind)
    with pytest.raises(DataError, match="outside the watermark's clock") as e:
        clock.timers(arr)
    assert e.value.column == "ts"


def _per_key_bucket(meta: dict, keys: pa.Table) -> bytes:
    """A bucket's state in the earlier layout (one KeyState blob per key), as it was written."""
    import json

    from sparkcep.data.ingest import table_to_ipc

    head = json.dumps(meta).encode()
    return b"SPCEPB1\n" + len(head).to_bytes(4, "big") + head + table_to_ipc(keys)  # written out: a fixed layout


def test_a_bucket_of_the_per_key_layout_is_carried_over():
    # Two keys stepped by the one-key matcher and saved as the earlier layout did; read back,
    # the rest of the rows give the batch engine's answer.
    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.stream import read_bucket

    query = BULK[0]
    n = 400
    table = _table(list(range(n)), [(i * 7) % 10 for i in range(n)], [i % 2 for i in range(n)])
    plan = compile_query(query, table)
    one = IncrementalMatcher(plan, table.schema)
    outs, blobs = [], []
    for key in (0, 1):
        st_ = one.empty_state()
        rows = table.filter(pa.compute.equal(table.column("k"), key))
        one.add(st_, rows.slice(0, 100))
        outs.append(one.advance(st_, 150))
        blobs.append(st_.to_bytes())
    old = _per_key_bucket({"buckets": 2, "latest": 199_000, "sealed": 150_000},
                          pa.table({"k": [0, 1], "state": pa.array(blobs, pa.binary()), "timer": [0, 0]}))
    meta, state = read_bucket(old, table.schema)
    assert meta == {"buckets": 2, "latest": 199_000, "sealed": 150_000} and state.count == 2
    matcher = KeyedMatcher(plan, table.schema)
    rest = matcher.advance(state, table.slice(200), 300)
    outs += [rest.out, matcher.finish(rest.state).out]
    assert _rows(pa.concat_tables(outs)) == _rows(sparkcep.match_recognize(table, query))
    # Without its event-time column, a key the earlier layout kept without rows is refused.
    from sparkcep.runtime.incremental import KeyState

    gone = KeyState(table.schema.empty_table(), base=5)
    with pytest.raises(sparkcep.SparkCepError, match="flush it with that version"):
        read_bucket(_per_key_bucket({"buckets": 2, "latest": 1, "sealed": 1}, pa.table(
            {"k": [0], "state": pa.array([gone.to_bytes()], pa.binary()), "timer": [0]})), table.schema)


def test_a_quiet_key_of_the_per_key_layout_keeps_its_match_numbers():
    # Every row of the key decided and nothing to look back at: the earlier layout kept no
    # rows for it. Carried over, its next match is number 2 and `^` does not match again.
    from sparkcep.runtime.incremental import IncrementalMatcher
    from sparkcep.spark.stream import read_bucket

    query = _HEAD + ("MEASURES MATCH_NUMBER() AS m, FIRST(t) AS s, LAST(t) AS e PATTERN (^ A B | A B C) "
                     "DEFINE A AS v > 0, B AS v > A.v, C AS v < B.v")
    table = _table([1, 2, 3, 4, 5, 6, 7], [1, 2, 0, 0, 5, 6, 1], [0] * 7)
    plan = compile_query(query, table)
    one = IncrementalMatcher(plan, table.schema)
    st_ = one.empty_state()
    one.add(st_, table.slice(0, 4))
    first = one.advance(st_, 5)  # rows below 5 sealed: a row still to come is at 5 or later
    assert st_.rows.num_rows == 0 and st_.base == 4 and first.to_pylist() == [{"k": 0, "m": 1, "s": 1, "e": 2}]
    old = _per_key_bucket({"buckets": 1, "latest": 4_000, "sealed": 5_000},
                          pa.table({"k": [0], "state": pa.array([st_.to_bytes()], pa.binary()), "timer": [0]}))
    _, state = read_bucket(old, table.schema, "t")
    matcher = KeyedMatcher(plan, table.schema)
    rest = matcher.advance(state, table.slice(4), 100)
    got = pa.concat_tables([first, rest.out, matcher.finish(rest.state).out])
    assert got.to_pylist() == sparkcep.match_recognize(table, query).to_pylist() == [
        {"k": 0, "m": 1, "s": 1, "e": 2}, {"k": 0, "m": 2, "s": 5, "e": 7}]


# The batch engine decides all partitions in one kernel call too (runtime.local): each key's
# rows alone (one partition, the per-partition path) must give what they give among others.
BATCH = BULK + [_HEAD + q for q in [
    "MEASURES FIRST(t) AS s, COUNT(*) AS c PATTERN (A B+ C) WITHIN 5 DEFINE B AS v > PREV(v), C AS v < A.v",
    "MEASURES FIRST(t) AS s, LAST(t) AS e AFTER MATCH SKIP TO FIRST B PATTERN (A B? C) "
    "DEFINE A AS v > 4, B AS v = 5, C AS v < PREV(v)",
    # Column scans (a fixed sequence of row-local conditions): skips, WITHIN, a skip error.
    "MEASURES FIRST(t) AS s, MATCH_NUMBER() AS m AFTER MATCH SKIP TO NEXT ROW PATTERN (A B C) WITHIN 4 "
    "DEFINE A AS v > PREV(v), B AS v >= PREV(v), C AS v < PREV(v) OR NEXT(v) IS NULL",
    "MEASURES FIRST(t) AS s, LAST(t) AS e PATTERN (A B) DEFINE A AS v <= NEXT(v), B AS v > 2",
    "MEASURES FIRST(t) AS s AFTER MATCH SKIP TO FIRST A PATTERN (A B) DEFINE A AS v < 3, B AS v > PREV(v)",
]]


@pytest.mark.parametrize("query", BATCH)
@given(data=streams())
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_batch_over_many_keys_equals_each_key_alone(query, data):
    times, values, keys = data[:3]
    table = _table(times, values, keys)

    def run(t):
        try:
            return _rows(sparkcep.match_recognize(t, query))
        except DataError as e:
            return type(e)

    got = run(table)
    alone = [run(table.filter(pa.array([k == key for k in keys]))) for key in sorted(set(keys), key=repr)]
    if DataError in alone:
        assert got is DataError
    else:
        assert got == sorted((r for rows in alone for r in rows), key=repr)


# Queries that fail on some data: in DEFINE, in MEASURES (as columns, match by match, or with
# unmatched rows), and in AFTER MATCH SKIP (no row to resume at).
FAILING = [_HEAD + q for q in [
    "MEASURES FIRST(t) AS s PATTERN (A B) DEFINE B AS 10 / (v - 3) > 0",
    "MEASURES SUM(10 / (v - 3)) AS s PATTERN (A B) DEFINE B AS v > 0",
    "MEASURES FIRST(A.t) AS s, 10 / (LAST(B.v) - 3) AS q PATTERN (A B+) DEFINE B AS v > PREV(v)",
    "MEASURES FIRST(t) AS s AFTER MATCH SKIP TO LAST C PATTERN (A B C?) DEFINE B AS v > PREV(v), C AS v < PREV(v)",
    "MEASURES FIRST(t) AS s, 10 / (LAST(v) - 3) AS q ALL ROWS PER MATCH WITH UNMATCHED ROWS "
    "PATTERN (A B) DEFINE B AS v > 4",
    # A match's MEASURES fail before a later match has no row to resume at: that error wins.
    "MEASURES 10 / (FIRST(v) - 3) AS q AFTER MATCH SKIP TO LAST C PATTERN (A C?) DEFINE A AS v > 0, C AS v = 2",
    "MEASURES SUM(10 / (v - 3)) AS q AFTER MATCH SKIP TO LAST C PATTERN (A C?) DEFINE A AS v > 0, C AS v = 2",
]]


@pytest.mark.parametrize("query", FAILING)
@pytest.mark.parametrize("bulk", [True, False])
@given(data=streams())
# A match whose MEASURES fail (v = 3 first), then one with no C to resume at: decided in one
# call, or the first match before the second's rows arrive; two keys, the first without error.
@example(data=([0, 1, 2, 3], [3, 2, 5, 5], [7, 7, 7, 7], 0, [0, 1, 2, 3], [4], False))
@example(data=([0, 1, 2, 3], [3, 2, 5, 5], [7, 7, 7, 7], 0, [0, 1, 2, 3], [2, 1], True))
@example(data=([0, 1, 2, 3, 4, 5], [5, 2, 3, 2, 5, 5], [1, 1, 2, 2, 2, 2], 1, [0, 1, 2, 3, 4, 5], [6], False))
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_stream_error_names_its_row_by_key_and_time(query, bulk, data):
    """A stream's row has no input position, so an error names it by its PARTITION BY and
    ORDER BY values: those of the row the batch engine names for that key's rows alone (keys
    fail in the order their rows seal, so the stream's first error may be another key's)."""
    times, values, keys, *_ = data
    try:
        run_keyed(query, *data, bulk=bulk)
    except DataError as e:
        got = e
    else:
        got = None
    accepted = _accepted(*data)
    whole = _table([times[r] for r in accepted], [values[r] for r in accepted], [keys[r] for r in accepted])
    try:
        sparkcep.match_recognize(whole, query)
    except DataError:
        assert got is not None, "the batch engine fails on these rows"
    else:
        assert got is None, got
        return
    assert got.row is None and set(got.key) == {"k", "t"}, got.key
    mine = [r for r in accepted if keys[r] == got.key["k"]]
    with pytest.raises(DataError) as alone:
        sparkcep.match_recognize(_table([times[r] for r in mine], [values[r] for r in mine], [keys[r] for r in mine]),
                                 query)
    assert alone.value.message == got.message
    assert got.key == {"k": keys[mine[alone.value.row]], "t": times[mine[alone.value.row]]}


def _accepted(times, values, keys, delay, arrival, cuts, roundtrip) -> list[int]:
    """The rows a stream takes (those not late), in arrival order."""
    return [r for fresh, _ in arrivals(times, delay, arrival, cuts) for r in fresh]


@st.composite
def _split_tables(draw):
    """A table cut in two, a head of n rows and the rest; ``ordered``: the stream's usual
    case, every head row at or before every other row's time."""
    n = draw(st.integers(0, 30))
    m = draw(st.integers(0, 60))
    ordered = draw(st.booleans())
    keys = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"]))
    early = st.sampled_from([0.0, 1.0]) if ordered else st.one_of(st.none(), st.sampled_from([0.0, 2.0, float("nan")]))
    late = st.sampled_from([1.0, 2.0, 3.0]) if ordered else early
    head = draw(st.lists(st.tuples(keys, early, st.integers(0, 3)), min_size=n, max_size=n))
    tail = draw(st.lists(st.tuples(keys, late, st.integers(0, 3)), min_size=m, max_size=m))
    rows = head + tail
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], n, ordered


@given(data=_split_tables(), descending=st.booleans())
@settings(max_examples=examples(300), deadline=None)
def test_a_sorted_tail_merges_as_the_whole_sorts(data, descending):
    from sparkcep.data.partitions import merge_sorted, sort_and_partition

    keys, times, seqs, n, ordered = data
    table = pa.table({"k": pa.array(keys, pa.string()), "t": pa.array(times, pa.float64()),
                      "s": pa.array(seqs, pa.int64())})
    q = compile_query("PARTITION BY k ORDER BY t" + (" DESC" if descending else "") + " MEASURES COUNT(*) AS c "
                      "PATTERN (A) DEFINE A AS true", table).query
    head, tail = table.slice(0, n), table.slice(n)
    tail_parts = sort_and_partition(tail, q)
    tail = tail.take(pa.array(tail_parts.order, pa.int64()))
    want = sort_and_partition(pa.concat_tables([head, tail]), q)
    got = merge_sorted(head, tail, tail_parts.bounds, q)
    if got is not None:
        assert got.order.tolist() == want.order.tolist() and got.bounds == want.bounds
    else:  # only where a head row sorts after a row of the tail of its key
        assert not (ordered and not descending)
        assert any((want.order[a:b][int(np.argmax(want.order[a:b] >= n)):] < n).any()
                   for a, b in want.bounds if (want.order[a:b] >= n).any())
