"""Incremental matching of one partition key's rows as they arrive (the core of streaming).

Rows come in any order within the watermark delay. A ``KeyState`` buffers them in ORDER BY
order (ties: the other ORDER BY columns, then arrival). When the watermark advances, the
rows below it are *sealed* — no row that sorts before them can still arrive — and the
sequential engine's selection (runtime.selection.select_matches, the same loop batch runs)
continues over them from where it stopped. A search that would need a row past the sealed
ones answers UNRESOLVED (the run strategy's seam rule), and the selection waits there for
the next watermark. ``finish`` treats the buffered rows as the end of the partition.

So the emitted matches, concatenated, are exactly the batch engine's output for the key, in
its order. The state keeps only rows a later decision can read: from the first undecided
start, minus the rows PREV and navigation look back. It is plain data (Arrow rows and four
integers) and round-trips through ``to_bytes``/``from_bytes``, never pickle.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import pack, table_from_ipc, table_to_ipc, unpack
from sparkcep.data.output import measure_types, output_table
from sparkcep.data.partitions import LazyColumns, sort_and_partition
from sparkcep.errors import DataError, QueryError
from sparkcep.runtime import columnar as columnar_measures
from sparkcep.runtime.fast import KernelMatcher
from sparkcep.runtime.matches import PartitionData, Spans
from sparkcep.runtime.nfab import NFAbMatcher
from sparkcep.runtime.selection import Selection, candidate_finder, measure_rows, select_matches
from sparkcep.runtime.vm import Matcher
from sparkcep.values import python_values, shift

DEFAULT_MAX_ROWS = 1_000_000  # rows one key may hold in state (sparkcep.stream's max_state_rows)
_MAGIC = b"SPCEPK2\n"  # 2: gauges reported to stream metrics


@dataclass
class KeyState:
    """One key's buffered rows (input columns, match order) and where selection stands;
    ``base`` is the partition row number of ``rows[0]``; positions are partition rows."""

    rows: pa.Table
    base: int = 0
    selection: Selection = field(default_factory=Selection)
    released: int = 0  # rows dropped from the buffer so far (for metrics)
    late: int = 0  # rows that arrived after the watermark had passed them (dropped)
    # The gauges this key last reported to a stream's metrics, and in which run of it.
    reported: list[int] = field(default_factory=lambda: [0, 0, 0])
    run: str = ""
    timer: int = 0  # the event-time timer (ms) a stream registered for this key, 0: none

    def to_bytes(self) -> bytes:
        meta = json.dumps([self.base, self.selection.pos, self.selection.covered, self.selection.number,
                           self.released, self.late, self.reported, self.run, self.timer]).encode()
        return pack(_MAGIC, meta, table_to_ipc(self.rows))

    @staticmethod
    def from_bytes(data: bytes) -> KeyState:
        got = unpack(data, _MAGIC)
        if got is None:
            raise ValueError("not a sparkcep key state")
        base, pos, covered, number, released, late, reported, run, timer = json.loads(got[0])
        rows = table_from_ipc(got[1])
        return KeyState(rows, base, Selection(pos, covered, number), released, late, reported, run, timer)


class IncrementalMatcher:
    """Feeds one key's rows through the sequential engine as the watermark seals them."""

    def __init__(self, plan: Plan, schema: pa.Schema, use_kernel: bool | None = None,
                 max_rows: int = DEFAULT_MAX_ROWS, timeouts: bool = True):
        q = plan.query
        if not q.order_by:
            raise QueryError("NOT_SUPPORTED", "matching a stream needs ORDER BY (its first column is event time)")
        if q.order_by[0].descending:
            raise QueryError("NOT_SUPPORTED", "a stream arrives in ascending event time: the first ORDER BY "
                             "column of a streaming query cannot be DESC")
        if q.segment_query:
            raise QueryError("NOT_SUPPORTED", "segment queries match segments of whole series; they do not run "
                             "on streams")
        if q.event_selection == "STRICT" and q.partition_by:
            raise QueryError("NOT_SUPPORTED", "STRICT CONTIGUITY with PARTITION BY reads the order of rows across "
                             "keys, which one key's state on a stream does not know; use PARTITION CONTIGUITY")
        self.plan = plan
        self.schema = schema
        self.max_rows = max_rows
        # EVENT SELECTION and negation run on NFA^b, as in batch (runtime.nfab).
        self.matcher = NFAbMatcher(plan) if q.gapped else Matcher(plan)
        # The compiled kernel answers the searches of plain queries (as for the run
        # strategy's windows), WITHIN's too, ended at the watermark as the VM ends them
        # (PartitionData.horizon); where timeouts are reported (``timeouts``), WITHIN
        # stays on the Python VM, which records the partial matches a deadline ended.
        kernel_ok = (q.within is None or not timeouts) and not q.gapped and q.skip_mode != "ALL_MATCHES"
        self.kernel = KernelMatcher.for_plan(plan) if kernel_ok and use_kernel is not False else None
        self.types = measure_types(q, schema)
        self.columnar = self.kernel is not None and columnar_measures.supported(plan)
        self.time_index = q.order_by[0].index

    def empty_state(self) -> KeyState:
        return KeyState(self.schema.empty_table())

    def add(self, state: KeyState, rows: pa.Table) -> None:
        """Buffer ``rows`` (arrived in this order) in ORDER BY order."""
        if rows.num_rows == 0:
            return
        self.check_times(rows)
        both = pa.concat_tables([state.rows, rows.select(self.schema.names).cast(self.schema)])
        order = sort_and_partition(both, _unpartitioned(self.plan.query)).order
        state.rows = both.take(pa.array(order))

    def check_times(self, rows: pa.Table) -> None:
        """Refuse rows without a finite event time (they have no place in the order)."""
        times = rows.column(self.time_index)
        missing = pc.is_null(times, nan_is_null=True)
        if pa.types.is_floating(times.type):
            missing = pc.or_(missing, pc.fill_null(pc.is_inf(times), False))
        if pc.any(missing).as_py():
            at = int(pc.index(missing, True).as_py())
            key = {k.column: rows.column(k.index)[at].as_py() for k in self.plan.query.partition_by}
            raise DataError("a streamed row needs an event time; this row has NULL, NaN or an infinity in the first "
                            "ORDER BY column", column=self.plan.query.order_by[0].column, row=at, key=key or None)

    def empty_output(self, table: pa.Table) -> pa.Table:
        """No output rows, with the output's columns."""
        q = self.plan.query
        return output_table(self.plan, table, np.zeros(0, dtype=np.int64), [[] for _ in q.measures], self.types)

    def split_late(self, rows: pa.Table, watermark: Any) -> tuple[pa.Table, pa.Table]:
        """(rows on time, late rows): a row is late when its event time is below the
        watermark — rows below it may already be decided, so it can no longer be placed."""
        if watermark is None or rows.num_rows == 0:
            return rows, rows.slice(0, 0)
        times = rows.column(self.time_index)
        late = pc.fill_null(pc.less(times, pa.scalar(watermark, type=times.type)), False)
        return rows.filter(pc.invert(late)), rows.filter(late)

    def sealed(self, state: KeyState, watermark: Any) -> int:
        """How many buffered rows lie below ``watermark`` (a prefix: rows are in time order)."""
        times = state.rows.column(self.time_index)
        if watermark is None:  # no watermark yet: nothing is sealed
            return 0
        if times.num_chunks == 0 or len(times) == 0:
            return 0
        below = pc.less(times, pa.scalar(watermark, type=times.type))
        return int(pc.sum(below).as_py() or 0)

    def advance(self, state: KeyState, watermark: Any = None, final: bool = False) -> pa.Table:
        """The output rows that became final: every decision the sealed rows settle (all
        of them with ``final``: the buffered rows end the partition)."""
        return self.step(state, watermark, final)[0]

    def step(self, state: KeyState, watermark: Any = None, final: bool = False) -> tuple[pa.Table, pa.Table]:
        """(output rows that became final, partial matches that WITHIN ended): a start row
        the selection tried and found no match from, while a partial match from it was
        still alive when the window closed (see ``timeout_schema``)."""
        plan, q = self.plan, self.plan.query
        table = state.rows
        n = table.num_rows if final else self.sealed(state, watermark)
        limit = n if final else max(n - plan.lookahead, 0)
        sel = state.selection
        local = Selection(sel.pos - state.base, sel.covered - state.base, sel.number)
        if local.pos >= limit:
            return self.empty_output(table), self._timeouts(table, [])
        cols = LazyColumns([table.column(i).slice(0, n) for i in range(table.num_columns)])
        part = PartitionData(cols, n, self.time_index, base=state.base, complete=final, limit=limit,
                             horizon=None if final else watermark)
        expired: dict[int, Any] = {}
        error: DataError | None = None
        before = local.number
        window = self._kernel_window(part, local)
        items = None
        if window is not None and not self.columnar:
            items = KernelMatcher.match_items(*window[:5], before)
        elif window is None:
            finder = self._kernel_finder(part, limit) if self.kernel is not None else None
            finder = finder or candidate_finder(q, self.matcher, part)

            def candidate(start: int):
                self.matcher.expired = None
                got = finder(start)
                if self.matcher.expired is not None and (got is None or (isinstance(got, list) and not got)):
                    expired[start] = self.matcher.expired
                return got

            items = []
            try:
                for item in select_matches(q, limit, candidate if q.within is not None else finder,
                                           numbering=lambda k: setattr(part, "match_number", k), state=local):
                    items.append(item)
            except DataError as e:
                # The matches before a selection error are measured first (one of their
                # MEASURES may fail, and the batch engine reports that error), then it is raised.
                error = e
        # A start the selection will try again (it stopped before deciding it) is not out yet.
        timeouts = self._timeouts(table, [m for s, m in sorted(expired.items()) if s < local.pos])
        got = None
        if items is None:  # the kernel's matches, measures as whole columns (as in batch)
            starts, ends = window[0], window[1]
            numbers = np.arange(before + 1, before + 1 + len(starts), dtype=np.int64)
            got = columnar_measures.measure_columns(plan, part, Spans.of_kernel(starts, ends, numbers, *window[2:5]),
                                                    self.types)
            if got is None:
                items = KernelMatcher.match_items(*window[:5], before)
        if got is not None:
            out = output_table(plan, table, got[0], got[1], self.types)
        else:
            positions: list[int] = []
            values: list[list[Any]] = [[] for _ in q.measures]
            for pos, vals in measure_rows(plan, part, items):
                positions.append(pos)
                for j, v in enumerate(vals):
                    values[j].append(v)
            out = output_table(plan, table, np.array(positions, dtype=np.int64), values, self.types)
        if error is not None:
            raise error
        # Keep the rows a later decision can read: from the first undecided start, less
        # what PREV and navigation look back.
        drop = max(0, min(local.pos, n) - plan.lookbehind)
        old_base = state.base
        state.rows = table.slice(drop)
        state.base = old_base + drop
        state.released += drop
        state.selection = Selection(local.pos + old_base, local.covered + old_base, local.number)
        if state.rows.num_rows > self.max_rows:
            # The batch engine's policy: a bound and a clear error, never unbounded memory.
            raise DataError(f"more than {self.max_rows:,} rows of one key wait in state for a match to be decided "
                            f"(the undecided start is at {q.order_by[0].column} = "
                            f"{state.rows.column(self.time_index)[min(max(local.pos - drop, 0), state.rows.num_rows - 1)]}); "
                            "add WITHIN or MAXLENGTH, or raise max_state_rows", column=q.order_by[0].column)
        return out, timeouts

    def _kernel_window(self, part: PartitionData, local: Selection) -> tuple | None:
        """The selection over the sealed rows in one kernel call (the batch engine's own loop,
        resumed at ``local`` and stopped where an answer needs unseen rows), advancing
        ``local``: the kernel's match arrays. None where the kernel does not run the whole
        selection (matchregex, unmatched rows, data it cannot read)."""
        q = self.plan.query
        if self.kernel is None or q.mode == "matchregex" or q.with_unmatched:
            return None
        try:
            got = self.kernel.select_window(part, local.pos, local.covered)
        except DataError:
            return None  # a skip error: the Python selection measures the matches before it
        if got is None:
            return None
        local.pos, local.covered = got[5], got[6]
        local.number += len(got[0])
        return got

    def _kernel_finder(self, part: PartitionData, limit: int):
        """start -> candidate from the kernel, computed for runs of starts at once (64,
        doubling): the selection stops at the first UNRESOLVED start, so a long undecided
        match costs one run of starts per step, not every start up to the sealed rows."""
        if self.kernel.arrays(part) is None:
            return None
        found: dict[int, Any] = {}
        size = [64]
        earliest = self.plan.query.mode == "matchregex"

        def candidate(start: int):
            got = found.get(start)
            if got is None and start not in found:
                last = min(limit, start + size[0])
                size[0] = min(size[0] * 2, 4096)
                found.update(self.kernel.candidates(part, start, last, earliest))
                got = found[start]
            return got
        return candidate

    def timeout_schema(self) -> pa.Schema:
        """Timed-out partial matches: the PARTITION BY columns, the start row's event time,
        the variables it had matched (in row order), how many rows, and its deadline (start
        time + WITHIN), when the watermark passing it (or the end of input) ended it."""
        got = getattr(self, "_timeout_schema", None)
        if got is not None:
            return got
        q = self.plan.query
        time_type = self.schema.field(self.time_index).type
        keys = [self.schema.field(k.index).with_name(k.column) for k in q.partition_by]
        self._timeout_schema = pa.schema(keys + [
            pa.field("start_time", time_type), pa.field("variables", pa.list_(pa.string())),
            pa.field("rows", pa.int64()), pa.field("expired_at", time_type)])
        return self._timeout_schema

    def _timeouts(self, table: pa.Table, expired: list) -> pa.Table:
        if not expired:
            empty = getattr(self, "_no_timeouts", None)
            if empty is None:
                empty = self._no_timeouts = self.timeout_schema().empty_table()
            return empty
        q, schema = self.plan.query, self.timeout_schema()
        starts = pa.array([m.start for m in expired], pa.int64())
        cols = [table.column(k.index).take(starts) for k in q.partition_by]
        start_time = table.column(self.time_index).take(starts)
        deadline = [shift(t, q.within) if isinstance(t, dt.datetime) else t + q.within
                    for t in python_values(start_time)]
        labels = self.plan.labels
        cols += [start_time, pa.array([[labels[x] for x in m.labels] for m in expired], pa.list_(pa.string())),
                 pa.array([len(m.labels) for m in expired], pa.int64()),
                 pa.array(deadline, schema.field("expired_at").type)]
        return pa.Table.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols],
                                    schema=schema)

    def finish(self, state: KeyState) -> pa.Table:
        """The rest of the output, the buffered rows being the end of the partition."""
        return self.advance(state, final=True)


def _unpartitioned(q):
    from dataclasses import replace

    return replace(q, partition_by=())
