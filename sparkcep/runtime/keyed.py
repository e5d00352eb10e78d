"""Incremental matching of many partition keys at once (a stream's hash bucket).

A ``KeyedState`` holds every key's buffered rows in one Arrow table, key after key, and one
row of integers per key: where its selection stands (runtime.incremental's ``Selection``
and ``base``), rows released so far, and its timer. Each call sorts the buffered rows with
the new ones by PARTITION BY, ORDER BY and arrival in one pass (the batch engine's own
sort, so keys group as in batch), seals each key's rows below the watermark, and decides:

- queries the compiled kernel runs (no WITHIN, contiguous rows, not ALL MATCHES) whose
  measures read rows of their match only: every key's sealed rows in one kernel call
  (``KernelMatcher.select_windows``), then the measures as columns in one pass (or match
  by match), no Python per key;
- everything else: each key that got rows or whose timer fell due steps through
  ``IncrementalMatcher.step`` on a slice of the table, as a stream of one key does.

Late-row checks, trimming the rows no decision can read, the state bound and timers are
vectorized over the bucket. A key always keeps at least one row (the rows carry their
key's values, so a key's place in the integer table is found from its rows, never by
comparing key values in Python).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.analysis.bound import BNav, nodes
from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import pack, table_from_ipc, table_to_ipc, unpack
from sparkcep.data.output import output_table
from sparkcep.data.partitions import LazyColumns, merge_sorted, named_by_key, sort_and_partition
from sparkcep.errors import DataError
from sparkcep.runtime import columnar as columnar_measures
from sparkcep.runtime.fast import numbered_within
from sparkcep.runtime.incremental import IncrementalMatcher, KeyState
from sparkcep.runtime.matches import PartitionData, Spans, matches_from_arrays
from sparkcep.runtime.selection import Selection, measure_rows
from sparkcep.values import BIGINT_MAX, BIGINT_MIN, EXACT_FLOAT, max_magnitude


class EventClock:
    """Spark's watermark clock for an event-time column: milliseconds since the epoch (a
    number column's unit is one second, as ``timestamp_seconds`` reads it)."""

    def __init__(self, time_type: pa.DataType, column: str | None = None):
        self.type = time_type
        self.column = column  # named in the error for a time the clock cannot hold

    def timers(self, values: pa.Array) -> np.ndarray:
        """The watermark (ms) at which each row of these event times is sealed: one above
        its own millisecond (Spark fires a timer once the watermark is past it)."""
        t = self.type
        # Integer ranges through max_magnitude: np.abs wraps -2^63 to itself.
        if pa.types.is_timestamp(t):
            v = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
            if t.unit == "s":
                if max_magnitude(v) < EXACT_FLOAT // 1000:
                    return v * 1000 + 1
                return np.array([self._checked(int(x) * 1000, int(x)) + 1 for x in v], dtype=np.int64)
            per_ms = {"ms": 1, "us": 1_000, "ns": 1_000_000}[t.unit]
            if len(v) == 0 or v.max() < BIGINT_MAX:  # + 1 must not wrap
                return v // per_ms + 1
            return np.array([self._checked(int(x) // per_ms, int(x)) + 1 for x in v], dtype=np.int64)
        elif pa.types.is_integer(t):
            v = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
            if max_magnitude(v) < EXACT_FLOAT // 1000:
                return v * 1000 + 1
        elif pa.types.is_floating(t):
            v = np.floor(values.cast(pa.float64()).to_numpy(zero_copy_only=False) * 1000)
            if len(v) == 0 or np.abs(v).max() < 2**62:  # floats: np.abs does not wrap (NaN fails)
                return v.astype(np.int64) + 1
        return np.array([self.timer(x) for x in values.to_pylist()], dtype=np.int64)

    def timer(self, value) -> int:
        """``timers`` of one event-time value."""
        import math

        if pa.types.is_timestamp(self.type):
            ms = self.millis(value)
        elif isinstance(value, float) and not math.isfinite(value):
            ms = None
        else:
            ms = math.floor(value * 1000)
        return self._checked(ms, value) + 1

    def _checked(self, ms: int | None, value) -> int:
        if ms is None or not BIGINT_MIN <= ms < BIGINT_MAX:
            raise DataError(f"the event time {value!r} is outside the watermark's clock (milliseconds since "
                            "1970 in 64 bits)", column=self.column)
        return ms

    def millis(self, value) -> int:
        """An event time on Spark's clock (ms): a timestamp floored to its millisecond; a
        number of seconds as ``timestamp_seconds`` then Spark's milliseconds read it."""
        t = self.type
        if pa.types.is_timestamp(t):
            per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit]
            return pa.scalar(value, type=t).cast(pa.int64()).as_py() * 1000 // per_second
        micros = int(value * 1_000_000)
        return micros // 1000 if micros >= 0 else -(-micros // 1000)

    def value(self, ms: int):
        """A watermark (ms) as a value of the event-time column (None before the first)."""
        t = self.type
        if ms <= 0:
            return None
        if pa.types.is_timestamp(t):
            return pa.scalar(ms * 1000, type=pa.timestamp("us", t.tz)).cast(t).as_py()
        if pa.types.is_integer(t):
            return -(-ms // 1000)  # rows below a fractional watermark: below its ceiling
        return ms / 1000


# One int64 column each, one row per key (in the order of the keys' rows).
FIELDS = ("size", "base", "pos", "covered", "number", "released", "timer")
_MAGIC = b"SPCEPS2\n"  # 2: pack's 4-byte head length


@dataclass
class KeyedState:
    """Every key's buffered rows (``rows``: key after key, each in match order) and per key
    (``keys``: FIELDS as int64 arrays, same key order) how many rows it holds, the partition
    row number of its first one, its selection (next start, covered row, matches so far),
    rows released and its timer (the watermark, in ms, at which it must step again; 0:
    none)."""

    rows: pa.Table
    keys: dict[str, np.ndarray]

    @staticmethod
    def empty(schema: pa.Schema) -> KeyedState:
        return KeyedState(schema.empty_table(), {f: np.zeros(0, dtype=np.int64) for f in FIELDS})

    @property
    def count(self) -> int:
        return len(self.keys["size"])

    def to_bytes(self) -> bytes:
        keys = table_to_ipc(pa.table({f: pa.array(self.keys[f], pa.int64()) for f in FIELDS}))
        return pack(_MAGIC, keys, table_to_ipc(self.rows))

    @staticmethod
    def from_bytes(data: bytes) -> KeyedState:
        got = unpack(data, _MAGIC)
        if got is None:
            raise ValueError("not a sparkcep bucket state")
        keys, rows = table_from_ipc(got[0]), table_from_ipc(got[1])
        return KeyedState(rows, {f: keys.column(f).to_numpy().astype(np.int64) for f in FIELDS})

    @staticmethod
    def of_keys(schema: pa.Schema, states: list[KeyState]) -> KeyedState:
        """The same keys as one state (a checkpoint of the per-key layout, migrated)."""
        states = [s for s in states if s.rows.num_rows]
        if not states:
            return KeyedState.empty(schema)
        keys = {"size": [s.rows.num_rows for s in states], "base": [s.base for s in states],
                "pos": [s.selection.pos for s in states], "covered": [s.selection.covered for s in states],
                "number": [s.selection.number for s in states], "released": [s.released for s in states],
                "timer": [s.timer for s in states]}
        rows = pa.concat_tables([s.rows.cast(schema) for s in states])
        return KeyedState(rows, {f: np.array(keys[f], dtype=np.int64) for f in FIELDS})

    def gauges(self) -> list[int]:
        """[rows buffered, undecided start rows, bytes of rows] over the keys."""
        k = self.keys
        undecided = np.maximum(k["size"] - (k["pos"] - k["base"]), 0)
        return [self.rows.num_rows, int(undecided.sum()), self.rows.nbytes]


@dataclass
class Stepped:
    """What one call decided: output rows, timed-out partial matches, and the keys' new state."""

    out: pa.Table
    timeouts: pa.Table
    state: KeyedState


class KeyedMatcher:
    """Many keys' incremental matching (see the module): ``advance`` with the rows that
    arrived, ``finish`` at the end of input."""

    def __init__(self, plan: Plan, schema: pa.Schema, use_kernel: bool | None = None,
                 max_rows: int | None = None, bulk: bool | None = None, timeouts: bool = True):
        kw = {} if max_rows is None else {"max_rows": max_rows}
        self.single = IncrementalMatcher(plan, schema, use_kernel, timeouts=timeouts, **kw)
        self.plan, self.schema = plan, schema
        q = plan.query
        self.clock = EventClock(schema.field(q.order_by[0].index).type, q.order_by[0].column)
        # One kernel call for every key: what the kernel window of one key runs (no WITHIN,
        # contiguous rows, not ALL MATCHES), with measures as columns or inside the match.
        # bulk=False forces the per-key path (tests compare the two).
        can = (self.single.kernel is not None and q.mode != "matchregex" and not q.with_unmatched
               and (self.single.columnar or _measures_inside_match(plan)))
        self.bulk = can if bulk is None else (bulk and can)
        self.time_index = q.order_by[0].index

    def key_of(self, rows: pa.Table, row: int) -> dict:
        """A row's PARTITION BY values by column name (for messages)."""
        return {k.column: rows.column(k.index)[row].as_py() for k in self.plan.query.partition_by}

    # ------------------------------------------------------------------ one call
    def advance(self, state: KeyedState, fresh: pa.Table, seal, due_ms: int = 0, final: bool = False,
                fresh_bounds: list[tuple[int, int]] | None = None) -> Stepped:
        """Buffer ``fresh`` (rows on time, in arrival order) and decide what the rows below
        ``seal`` (an event-time value; None: nothing sealed) settle, for every key that got
        rows or whose timer is at most ``due_ms``, and on the bulk path for every key.
        ``final``: each key's rows end its partition. ``fresh_bounds``: ``fresh`` stands
        sorted already as sort_and_partition sorts it for this query, its keys at these
        bounds (rules that sort alike share that sort; only the buffered rows are merged in)."""
        single = self.single
        if fresh.num_rows:
            single.check_times(fresh)
            fresh = fresh.select(self.schema.names).cast(self.schema)
        table = pa.concat_tables([state.rows, fresh]) if fresh.num_rows else state.rows
        k = state.keys
        owner = np.concatenate([np.repeat(np.arange(state.count, dtype=np.int64), k["size"]),
                                np.full(fresh.num_rows, -1, dtype=np.int64)])
        if fresh.num_rows:
            parts = None if fresh_bounds is None else merge_sorted(state.rows, fresh, fresh_bounds, self.plan.query)
            if parts is None:
                parts = sort_and_partition(table, self.plan.query)  # PARTITION BY, ORDER BY, arrival
            table = table.take(pa.array(parts.order))
            owner = owner[parts.order]
            bounds = np.array(parts.bounds, dtype=np.int64).reshape(-1, 2)
        else:  # the rows stand in key order already
            ends = np.cumsum(k["size"])
            bounds = np.stack([ends - k["size"], ends], axis=1) if state.count else np.zeros((0, 2), np.int64)
        lo, hi = bounds[:, 0], bounds[:, 1]
        m = len(lo)
        # Each key's integers, in the new key order (a new key: zeros, covered -1).
        idx = np.maximum.reduceat(owner, lo) if m else np.zeros(0, dtype=np.int64)
        old = idx >= 0
        meta = {}
        for f in FIELDS[1:]:
            col = np.zeros(m, dtype=np.int64) if f != "covered" else np.full(m, -1, dtype=np.int64)
            col[old] = k[f][idx[old]]
            meta[f] = col
        new_rows = np.add.reduceat((owner < 0).astype(np.int64), lo) if m else np.zeros(0, dtype=np.int64)
        size = hi - lo
        if final:
            sealed = size
        elif seal is None or not m:
            sealed = np.zeros(m, dtype=np.int64)
        else:
            times = table.column(self.time_index)
            below = pc.less(times, pa.scalar(seal, type=times.type)).to_numpy(zero_copy_only=False)
            sealed = np.add.reduceat(below.astype(np.int64), lo)
        got = None
        if self.bulk and m:
            got = self._bulk(table, lo, size, sealed, meta, seal, final)
        if got is None:
            due = (new_rows > 0) | ((meta["timer"] > 0) & (meta["timer"] <= due_ms)) | final
            got = self._each(table, lo, size, sealed, meta, np.flatnonzero(due), seal, final)
        out, timeouts, drop = got
        # Keep the rows a later decision can read; a key keeps one row at least.
        drop = np.minimum(drop, np.maximum(size - 1, 0))
        meta["base"] = meta["base"] + drop
        meta["released"] = meta["released"] + drop
        keep_size = size - drop
        if len(table):
            cut = np.zeros(len(table) + 1, dtype=np.int64)
            np.add.at(cut, lo, 1)
            np.add.at(cut, lo + drop, -1)
            kept = table.filter(pa.array(np.cumsum(cut[:-1]) == 0)) if drop.any() else table
        else:
            kept = table
        meta["size"] = keep_size
        over = np.flatnonzero(keep_size > self.single.max_rows)
        if len(over):
            j = int(over[0])
            q = self.plan.query
            first = int(lo[j] + drop[j] + max(min(meta["pos"][j] - meta["base"][j], keep_size[j] - 1), 0))
            raise DataError(f"more than {self.single.max_rows:,} rows of one key wait in state for a match to be "
                            f"decided (the undecided start is at {q.order_by[0].column} = "
                            f"{table.column(self.time_index)[first]}); add WITHIN or MAXLENGTH, or raise "
                            "max_state_rows", column=q.order_by[0].column, key=self.key_of(table, int(lo[j])))
        return Stepped(out, timeouts, KeyedState(kept, meta))

    def finish(self, state: KeyedState) -> Stepped:
        """Every key's buffered rows taken as the end of its partition."""
        return self.advance(state, self.schema.empty_table(), None, final=True)

    # ------------------------------------------------------------------ the bulk path
    def _bulk(self, table: pa.Table, lo, size, sealed, meta, seal, final: bool):
        """Every key's selection in one kernel call, then its measures: (output, timeouts,
        rows to drop per key), and the keys' selections moved on; None where the data do
        not fit the kernel, or a measure reads rows around its match and the columns could
        not answer."""
        plan, single = self.plan, self.single
        limit = sealed if final else np.maximum(sealed - plan.lookahead, 0)
        pos = meta["pos"] - meta["base"]
        active = np.flatnonzero(pos < limit)
        cols = LazyColumns([table.column(i) for i in range(table.num_columns)])
        part = PartitionData(cols, table.num_rows, self.time_index, complete=False, horizon=None if final else seal)
        kernel = single.kernel
        got = kernel.select_windows(part, lo[active], sealed[active], limit[active], meta["base"][active],
                                    pos[active], (meta["covered"] - meta["base"])[active], final,
                                    np.repeat(np.arange(len(lo), dtype=np.int64), size))
        if got is None:
            return None
        starts, ends, wins, new_pos, new_cov, label_arrays = got
        if kernel.window_error is not None:
            # As key by key: the matches before the error measure first (and may fail there):
            # every match returned but the last, the one with no row to resume at.
            err, win, row = kernel.window_error
            before = np.arange(len(wins)) < len(wins) - 1
            offs, labels, excl = label_arrays
            if self._measure(table, part, active, lo, sealed, meta, starts[before], ends[before], wins[before],
                             (offs[:before.sum() + 1], labels, excl)) is None:
                self._each(table, lo, size, sealed, {f: v.copy() for f, v in meta.items()},
                           np.unique(active[wins[before]]), seal, final)
            j = int(active[win])  # row: in the key's rows
            raise named_by_key(kernel.skip.error(err, row), plan.query, table, int(lo[j]) + row) from None
        measured = self._measure(table, part, active, lo, sealed, meta, starts, ends, wins, label_arrays)
        if measured is None:
            return None
        out = output_table(plan, table, measured[0], measured[1], single.types)
        counts = np.bincount(wins, minlength=len(active)) if len(active) else np.zeros(0, dtype=np.int64)
        base = meta["base"]
        meta["pos"][active] = new_pos + base[active]
        meta["covered"][active] = new_cov + base[active]
        meta["number"][active] += counts
        local = meta["pos"] - base
        drop = np.where(pos < limit, np.maximum(np.minimum(local, sealed) - plan.lookbehind, 0), 0)
        meta["timer"] = self._first_waiting(table, lo, sealed, size)
        if plan.query.within is not None:
            self._deadlines(table, lo, size, meta)
        return out, single.timeout_schema().empty_table(), drop

    def _measure(self, table: pa.Table, part: PartitionData, active, lo, sealed, meta, starts, ends, wins,
                 label_arrays):
        """(rows, measures) of the bulk path's matches: as columns, else match by match
        where the measures read their match's rows only; None otherwise."""
        plan, single = self.plan, self.single
        keys = active[wins]
        # Each match's number: its key's matches so far, plus its rank among this call's.
        numbers = meta["number"][keys] + numbered_within(wins, len(active))
        w_lo = lo[keys]
        measured = None
        if single.columnar:
            measured = columnar_measures.measure_columns(plan, part, Spans.of_kernel(starts, ends, numbers,
                                                                                     *label_arrays[:3]),
                                                         single.types, bounds=(w_lo, w_lo + sealed[keys]))
        if measured is None and _measures_inside_match(plan):
            return self._per_match(table, part, starts, ends, label_arrays, numbers)
        return measured

    def _per_match(self, table: pa.Table, part: PartitionData, starts, ends, label_arrays, numbers):
        """(rows, measure values) of the matches, measured one by one over the whole table:
        their measures read rows inside the match only, which are one key's rows."""
        items = [("match", m, int(k)) for m, k in zip(matches_from_arrays(starts, ends, *label_arrays),
                                                        numbers.tolist(), strict=True)]
        positions: list[int] = []
        values: list[list] = [[] for _ in self.plan.measures]
        try:
            for pos, vals in measure_rows(self.plan, part, items):
                positions.append(pos)
                for j, v in enumerate(vals):
                    values[j].append(v)
        except DataError as e:  # a stream's row has no input position: name it by its key values
            raise named_by_key(e, self.plan.query, table, e.row) from None
        return np.array(positions, dtype=np.int64), values

    def _first_waiting(self, table: pa.Table, lo, sealed, size) -> np.ndarray:
        """Per key, the timer of its first row not sealed (0: every row sealed): the key must
        step again when the watermark passes it, new rows or not."""
        timer = np.zeros(len(lo), dtype=np.int64)
        waiting = np.flatnonzero(sealed < size)
        if len(waiting):
            times = table.column(self.time_index).take(pa.array(lo[waiting] + sealed[waiting]))
            timer[waiting] = self.clock.timers(times.combine_chunks() if isinstance(times, pa.ChunkedArray)
                                               else times)
        return timer

    def _deadlines(self, table: pa.Table, lo, size, meta) -> None:
        """Each key's timer moved up to its first undecided start's WITHIN deadline, as
        _timer does key by key: a quiet key's search ends when the watermark passes it."""
        first = meta["pos"] - meta["base"]
        waiting = np.flatnonzero((first >= 0) & (first < size))
        if not len(waiting):
            return
        starts = table.column(self.time_index).take(pa.array(lo[waiting] + first[waiting]))
        starts = starts.combine_chunks() if isinstance(starts, pa.ChunkedArray) else starts
        within, t = self.plan.query.within, starts.type
        deadline = None
        if pa.types.is_timestamp(t) and t.unit in ("us", "ns") and isinstance(within, dt.timedelta):
            try:  # (exact in the column's own unit; past the largest time: key by key, as _timer says it)
                deadline = self.clock.timers(pc.add_checked(starts, pa.scalar(within, pa.duration(t.unit))))
            except pa.ArrowInvalid:
                pass
        if deadline is None:
            deadline = np.array([self._deadline(v) for v in starts.to_pylist()], dtype=np.int64)
        timer = meta["timer"]
        timer[waiting] = np.where(timer[waiting] > 0, np.minimum(timer[waiting], deadline), deadline)

    # ------------------------------------------------------------------ one key at a time
    def _each(self, table: pa.Table, lo, size, sealed, meta, due, seal, final: bool):
        """The keys in ``due`` through the incremental matcher of one key each."""
        single = self.single
        outs, timeouts = [], []
        drop = np.zeros(len(lo), dtype=np.int64)
        for j in due.tolist():
            base = int(meta["base"][j])
            st = KeyState(table.slice(int(lo[j]), int(size[j])), base,
                          Selection(int(meta["pos"][j]), int(meta["covered"][j]), int(meta["number"][j])))
            try:
                out, late = single.step(st, seal, final)
            except DataError as e:  # a stream's row has no input position: name it by its key values
                raise self._named(e, table, int(lo[j]), int(size[j])) from None
            outs.append(out)
            timeouts.append(late)
            drop[j] = st.base - base
            meta["pos"][j], meta["covered"][j], meta["number"][j] = st.selection.pos, st.selection.covered, \
                st.selection.number
            meta["timer"][j] = self._timer(st, seal)
        out = pa.concat_tables(outs) if outs else single.empty_output(table)
        late = pa.concat_tables(timeouts) if timeouts else single.timeout_schema().empty_table()
        return out, late, drop

    def _named(self, e: DataError, table: pa.Table, lo: int, size: int) -> DataError:
        """An error of one key's matcher (its rows ``lo`` .. ``lo + size`` of ``table``),
        naming the row by its key values; the key alone where no row is to blame."""
        at = e.row if e.row is not None else getattr(e, "position", None)
        if at is not None and 0 <= at < size:
            return named_by_key(e, self.plan.query, table, lo + at)
        return DataError(e.message, column=e.column, key=self.key_of(table, lo))

    def _timer(self, st: KeyState, seal) -> int:
        """One key's timer: when the watermark passes its first row still waiting, or a
        partial match's WITHIN deadline (a quiet key must still end and time out)."""
        times = st.rows.column(self.time_index)
        waiting = times if seal is None else pc.filter(times, pc.greater_equal(times, pa.scalar(
            seal, type=times.type)))
        timer = self.clock.timer(pc.min(waiting).as_py()) if len(waiting) else 0
        first = st.selection.pos - st.base
        if self.plan.query.within is not None and 0 <= first < st.rows.num_rows:
            deadline = self._deadline(times[first].as_py())
            timer = min(timer, deadline) if timer else deadline
        return timer

    def _deadline(self, start) -> int:
        """The timer of a search from a start at event time ``start``: its WITHIN deadline."""
        try:
            end = start + self.plan.query.within
        except OverflowError:  # past the last datetime: no deadline the clock can hold
            raise DataError(f"the event time {start!r} plus WITHIN is past the largest time",
                            column=self.clock.column) from None
        return self.clock.timer(end)


def _measures_inside_match(plan: Plan) -> bool:
    """Whether every measure reads rows of its match only (no PREV or NEXT out of it): then
    one table of many keys' rows can be measured match by match."""
    if any(p.physical for p in plan.measure_pointers):
        return False
    exprs = [m.expr for m in plan.query.measures]
    for spec in plan.query.measure_aggregates:
        exprs += [x for x in (spec.arg, spec.key) if x is not None]
    return not any(isinstance(x, BNav) and x.pointer.physical for e in exprs for x in nodes(e))
