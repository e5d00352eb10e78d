"""The automaton executor's local driver: a plan over an Arrow table on this machine,
partition by partition, on the fastest matcher that can run it (column scan, compiled
kernel, Pike VM or NFA^b). Every other backend of automaton queries (Spark tasks, the run
strategy's batches, key groups) ends up here or in the same matchers."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep import jit
from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import referenced_columns
from sparkcep.data.output import measure_array, measure_types, output_table
from sparkcep.data.partitions import LazyColumns, Partitions, sort_and_partition
from sparkcep.errors import DataError
from sparkcep.runtime import columnar as columnar_measures
from sparkcep.runtime.fast import KernelMatcher, numbered_within
from sparkcep.runtime.matches import PartitionData, Spans
from sparkcep.runtime.nfab import CompiledNFAb, NFAbMatcher
from sparkcep.runtime.selection import output_rows
from sparkcep.runtime.vm import Matcher
from sparkcep.values import admit


def run_automaton(plan: Plan, table: pa.Table, matcher_factory=Matcher, partition_runner=None,
                  use_kernel: bool | None = None, stats: dict | None = None, executor=None,
                  sorts: SharedSorts | None = None) -> pa.Table:
    """Run an automaton plan over a table; ``matcher_factory`` builds the matcher (tests pass the
    reference matcher here); ``partition_runner(plan, part, row_ids)`` replaces the
    sequential engine for each partition (tests pass the run strategy here); ``stats``, if
    given, receives which matcher ran and the most partial matches alive at once;
    ``executor`` (tasks.groups.KeyGroups, tasks.speculate.Speculation) runs the partitions,
    ``executor.map(partition, bounds, partition_data)``, on the Python matchers: elsewhere,
    or here with their calls evaluated ahead (the result keeps partition order;
    ``partition_data(bounds)`` builds the (PartitionData, input rows) ``partition`` takes
    as its second argument); ``sorts`` holds the table sorted for other plans run over it
    (many rules: one sort per PARTITION BY and ORDER BY)."""
    q = plan.query
    source = table  # the output copies columns as given (an unsigned column read as BIGINT too)
    used = plan.derive("reads", lambda: referenced_columns(q))
    ready = (sorts or SharedSorts(table, used)).of(q)
    table, parts = ready.table, ready.parts
    columns = ready.columns if sorts is None else ready.columns.only(used)
    order_np = parts.order
    if q.within is not None:
        _refuse_null_times(q, columns, order_np)
    order_index = q.order_by[0].index if q.order_by else None

    if use_kernel is None:
        # (worker processes of an executor run the Python matchers; so do small inputs before
        # a kernel is loaded, and larger ones before the kernels are compiled: see jit)
        use_kernel = matcher_factory is Matcher and executor is None and jit.use_compiled(table.num_rows)
    if matcher_factory is Matcher and (q.gapped or (q.event_selection == "STRICT" and q.partition_by)):
        # The Pike VM knows contiguous rows of one partition only (strict contiguity without
        # PARTITION BY is exactly that).
        matcher_factory = CompiledNFAb if use_kernel and executor is None else NFAbMatcher
    matcher = matcher_factory(plan)
    adjacent = _strict_adjacency(table, q, order_np) if q.event_selection == "STRICT" else None
    kernel = KernelMatcher.for_plan(plan) if use_kernel else None
    types = measure_types(q, table.schema)
    columnar = kernel is not None and partition_runner is None and columnar_measures.supported(plan)
    row_chunks: list[np.ndarray] = []
    measure_chunks: list[list[pa.Array]] = [[] for _ in plan.measures]

    def partition_data(bounds: tuple[int, int]) -> tuple[PartitionData, np.ndarray]:
        start, end = bounds
        part = PartitionData(columns.slice(start, end - start), end - start, order_index)
        if adjacent is not None:
            part.cache["adjacent"] = adjacent[start:end]
        # Input row of each partition row: only error messages and the Python path read it.
        return part, order_np[start:end]

    def partition(bounds: tuple[int, int], data: tuple[PartitionData, np.ndarray] | None = None
                  ) -> tuple[np.ndarray, list[pa.Array]]:
        part, row_ids = data if data is not None else partition_data(bounds)
        rows = (partition_runner(plan, part, row_ids) if partition_runner is not None
                else output_rows(plan, matcher, part, row_ids, kernel))
        positions: list[int] = []
        values: list[list[Any]] = [[] for _ in plan.measures]
        for pos, vals in rows:
            positions.append(row_ids[pos])
            for j, v in enumerate(vals):
                values[j].append(v)
        return (np.array(positions, dtype=np.int64),
                [measure_array(m.name, values[j], types[j]) for j, m in enumerate(plan.measures)])

    if columnar:
        done = _columnar(plan, kernel, parts.bounds, partition_data, partition,
                         PartitionData(columns, table.num_rows, order_index), order_np, types)
    else:
        # KeyGroups' workers are other processes: each has its own copy of the matcher.
        done = (map(partition, parts.bounds) if executor is None
                else executor.map(partition, parts.bounds, partition_data))
    for rows_out, arrays_out in done:
        row_chunks.append(rows_out)
        for j, a in enumerate(arrays_out):
            measure_chunks[j].append(a)

    if stats is not None:
        _report(stats, matcher, kernel, bool(parts.bounds))
    out_rows = np.concatenate(row_chunks) if row_chunks else np.zeros(0, dtype=np.int64)
    measures = [_join(chunks, t) for chunks, t in zip(measure_chunks, types, strict=True)]
    return output_table(plan, source, out_rows, measures, types)


class SortedInput(NamedTuple):
    table: pa.Table  # the input with the columns read made readable (values.admit)
    parts: Partitions
    columns: LazyColumns  # the columns read, in sorted order (others None)


class SharedSorts:
    """The input ``table`` sorted once per PARTITION BY and ORDER BY for every plan run over
    it (many rules at once), with the columns ``used`` (any of the plans reads) in sorted
    order; condition masks the plans share are kept with those columns (LazyColumns.masks)."""

    def __init__(self, table: pa.Table, used):
        self.source = table
        self.used = frozenset(used)
        self._admitted: pa.Table | None = None
        self._unreadable: set[int] = set()
        self._sorted: dict = {}
        self._lock = threading.Lock()  # (plans may run on threads side by side)

    def of(self, q) -> SortedInput:
        reads = set(referenced_columns(q))
        if not reads <= self.used:
            raise ValueError("SharedSorts holds fewer columns than this query reads")
        key = (tuple(k.index for k in q.partition_by),
               tuple((k.index, k.descending, k.nulls_first) for k in q.order_by))
        with self._lock:
            if self._admitted is None:
                # Column by column: one that cannot be read fails the queries that read it
                # (below), not the one that happens to come first.
                table, self._unreadable = self.source, set()
                for i in sorted(self.used):
                    try:
                        table = admit(table, {i})
                    except DataError:
                        self._unreadable.add(i)
                self._admitted = table
            if reads & self._unreadable:
                admit(self.source, reads)  # (raises this query's error)
            return self._sorted.get(key) or self._sort(q, key)

    def _sort(self, q, key: tuple) -> SortedInput:
        table = self._admitted
        parts = sort_and_partition(table, q)
        idx = None if parts.identity else pa.array(parts.order)
        arrays = [(table.column(i) if idx is None else table.column(i).take(idx)) if i in self.used else None
                  for i in range(table.num_columns)]
        got = self._sorted[key] = SortedInput(table, parts, LazyColumns(arrays))
        return got


def _refuse_null_times(q, columns: LazyColumns, order_np: np.ndarray) -> None:
    nulls = pc.is_null(columns.arrow(q.order_by[0].index)).to_numpy(zero_copy_only=False).nonzero()[0]
    if len(nulls):
        raise DataError("WITHIN needs a value in the first ORDER BY column; this row has NULL",
                        column=q.order_by[0].column, row=int(order_np[nulls[0]]))


def _report(stats: dict, matcher, kernel: KernelMatcher | None, any_rows: bool) -> None:
    """Which matcher ran, and the most partial matches it held at once, into ``stats``."""
    if isinstance(matcher, CompiledNFAb) and matcher.ran:
        stats["matcher"], stats["peak_threads"] = "NFAb kernel", matcher.peak_runs
    elif isinstance(matcher, NFAbMatcher):
        name = "NFAbMatcher" if type(matcher) is CompiledNFAb else type(matcher).__name__
        stats["matcher"], stats["peak_threads"] = name, matcher.peak_runs
    elif kernel is None or (any_rows and not (kernel.ran or kernel.scanned)):
        stats["matcher"], stats["peak_threads"] = "python", None
    elif kernel.scanned:
        stats["matcher"], stats["peak_threads"] = "column scan", 0
    elif kernel.determinised:
        stats["matcher"], stats["peak_threads"] = "automaton", kernel.peak_threads
    else:
        stats["matcher"], stats["peak_threads"] = "kernel", kernel.peak_threads
        stats["glided_rows"] = kernel.glided_rows
        stats["peak_nodes"] = kernel.peak_nodes
        stats["glides"] = kernel.glides


def _columnar(plan: Plan, kernel: KernelMatcher, bounds: list[tuple[int, int]], partition_data, partition,
              whole: PartitionData, order_np: np.ndarray, types: list):
    """(input rows, measure columns) chunks in partition order: the kernel's matches of
    every partition first, then each measure as one column over all of them (no fixed cost
    per partition); a partition whose data the kernel cannot read runs ``partition``."""
    labels = columnar_measures.needs_labels(plan)
    chunk = _all_at_once(plan, kernel, bounds, whole, order_np, types, partition, labels)
    if chunk is not None:
        return [chunk]
    pieces: list = []  # per partition: (bounds, spans) or a finished (rows, columns) chunk

    def measures():
        found = [x[0] for x in pieces if x[0] is not None]
        if not found:
            return None, found
        spans = Spans.join([sp.shifted(b[0]) for b, sp in found])
        counts = [len(sp.starts) for _, sp in found]
        lo = np.repeat(np.array([b[0] for b, _ in found], dtype=np.int64), counts)
        hi = np.repeat(np.array([b[1] for b, _ in found], dtype=np.int64), counts)
        return columnar_measures.measure_columns(plan, whole, spans, types, bounds=(lo, hi)), found

    for b in bounds:
        try:
            part, row_ids = partition_data(b)
            got = kernel.select_spans(part, lambda r, ids=row_ids: ids[r], labels)
            pieces.append(((b, got), None) if got is not None else (None, partition(b)))
        except DataError:
            # An earlier partition's per-match measures may fail first (in partition order),
            # and so may this partition's matches before the error (the per-match path
            # measures each before it selects the next).
            got, found = measures()
            if found and got is None:
                for bb, _ in found:
                    partition(bb)
            partition(b)
            raise
    got, found = measures()
    if not found:
        return [chunk for _, chunk in pieces]
    if got is None:  # an aggregate needs the per-match path (see runtime.columnar)
        return [partition(x[0]) if x is not None else chunk for x, chunk in pieces]
    rows, arrays = got
    # Output rows come partition after partition (ALL ROWS PER MATCH: many a match).
    firsts = np.array([x[0][0] for x, _ in pieces if x is not None], dtype=np.int64)
    counts = np.bincount(np.searchsorted(firsts, rows, side="right") - 1, minlength=len(firsts))
    out, at, i = [], 0, 0
    for x, chunk in pieces:
        if x is not None:
            k = int(counts[i])
            chunk = (order_np[rows[at:at + k]], [a.slice(at, k) for a in arrays])
            at, i = at + k, i + 1
        out.append(chunk)
    return out


def _all_at_once(plan: Plan, kernel: KernelMatcher, bounds: list[tuple[int, int]], whole: PartitionData,
                 order_np: np.ndarray, types: list, partition, labels: bool):
    """(input rows, measure columns) of every partition from one kernel call and one measure
    pass (no fixed cost per partition: many small keys cost what one long one does), or None
    where the kernel does not take them all so (see KernelMatcher.select_partitions) or an
    aggregate needs the per-match path. A skip error comes after the errors of the
    partitions before it, as partition by partition."""
    got = kernel.select_partitions(whole, bounds, lambda r: int(order_np[r]), labels)
    if got is None:
        return None
    starts, ends, parts, found = got
    lo = np.array([b[0] for b in bounds], dtype=np.int64)
    hi = np.array([b[1] for b in bounds], dtype=np.int64)
    spans = Spans.of_kernel(starts, ends, numbered_within(parts, len(bounds)), *(found or (None, None)))
    if plan.query.with_unmatched:
        rows = Spans.unmatched_rows(starts, ends, whole.n)
        k = np.searchsorted(lo, rows, side="right") - 1
        spans.unmatched = rows[(k >= 0) & (rows < hi[np.maximum(k, 0)])]  # (rows of the partitions only)
    measured = columnar_measures.measure_columns(plan, whole, spans, types, bounds=(lo[parts], hi[parts]))
    if kernel.window_error is not None:
        err, k, row = kernel.window_error
        if measured is None:
            # their per-match measures fail first, if they fail (window k's: those before the error)
            for b in bounds[:k + 1]:
                partition(b)
        raise kernel.skip.error(err, int(order_np[lo[k] + row]))
    if measured is None:
        return None
    rows, arrays = measured
    return order_np[rows], arrays


def _strict_adjacency(table: pa.Table, q, order_np: np.ndarray) -> np.ndarray:
    """STRICT CONTIGUITY: per row in partition order, whether the row before it in its
    partition is also the row before it in the whole input order (ORDER BY, then input
    position); a match may only continue across such rows."""
    from dataclasses import replace

    n = table.num_rows
    if not q.partition_by:
        return np.ones(n, dtype=bool)
    rank = np.empty(n, dtype=np.int64)
    rank[sort_and_partition(table, replace(q, partition_by=())).order] = np.arange(n, dtype=np.int64)
    ranks = rank[order_np]
    out = np.zeros(n, dtype=bool)
    out[1:] = ranks[1:] == ranks[:-1] + 1
    return out


def _join(chunks: list[pa.Array], arrow_type) -> pa.Array:
    if not chunks:
        return pa.array([], type=arrow_type if arrow_type is not None else pa.null())
    if arrow_type is None:  # values decided the type: unify chunks that came out differently
        kinds = {c.type for c in chunks if c.type != pa.null()}
        arrow_type = kinds.pop() if len(kinds) == 1 else None
        if arrow_type is None:
            return measure_array("", [v for c in chunks for v in c.to_pylist()], None)
        chunks = [c.cast(arrow_type) for c in chunks]
    elif pa.types.is_timestamp(arrow_type) and arrow_type.tz is None and any(c.type.tz for c in chunks):
        # Some chunks' values carried a zone (data.output.measure_array): they decide for all.
        return measure_array("", [v for c in chunks for v in c.to_pylist()], arrow_type)
    return pa.concat_arrays([c.cast(arrow_type) if c.type != arrow_type else c for c in chunks])
