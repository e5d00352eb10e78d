"""The coordinator of the task engine (thesis §4.3–§5.4).

Per partition, the input is cut into blocks of ``block`` raw events; the end of a block is a
synchronization point. At each one the receiver gives every live partial match (the root,
the empty match, included) a task per outgoing transition and per new event (Algorithm
4.3). Workers evaluate tasks; each true result makes a new partial match, which at once gets
tasks for the later events of the block (Algorithm 4.4) and, when complete, goes to the
merger. The merger fires final matches in sequential order as soon as no outstanding task
could still produce an earlier one. The block ends when no task is left; expired partial
matches are then cleaned up.

Which matches fire does not depend on timing: consumption merely drops work (tasks, partial
matches, events) whose results the merger would discard. So the fired matches are the same
for every number of workers, block size, queue and structure — those choose only how fast.
(Which tasks are evaluated does depend on timing: a constraint that fails with an error on a
combination that consumption makes moot may or may not be reached.)
"""

from __future__ import annotations

import heapq
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.data.ingest import referenced_columns
from sparkcep.data.output import measure_array, measure_types, output_table
from sparkcep.data.partitions import LazyColumns, sort_and_partition
from sparkcep.errors import DataError, OptionError
from sparkcep.runtime.matches import Match, PartitionData
from sparkcep.runtime.selection import measure_rows
from sparkcep.tasks.evaluate import Evaluator
from sparkcep.tasks.events import RawEventList
from sparkcep.tasks.merger import Merger
from sparkcep.tasks.partial import STRUCTURES, PartialMatch
from sparkcep.tasks.queue import QUEUES, Task
from sparkcep.tasks.task_query import TaskQuery
from sparkcep.tasks.workers import STARTS, WorkerPool
from sparkcep.values import admit

DEFAULT_BLOCK = 1024


@dataclass
class TaskOptions:
    workers: int = -1  # -1: the number of cores; 0: evaluate in the coordinator
    pm: str = "tree+hash"
    queue: str = "priority"
    block: int = DEFAULT_BLOCK
    window: int | None = None  # counter window: events between neighbours of a match
    chunk: int | None = None  # tasks per message to a worker (None: adaptive)
    start: str = "spawn"  # workers: clean interpreters sent the query, or forks of this process

    def check(self) -> TaskOptions:
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < -1:
            raise OptionError(f"workers must be a whole number >= 0, not {self.workers!r}")
        if self.pm not in STRUCTURES:
            raise OptionError(f"pm must be one of {', '.join(STRUCTURES)}, not {self.pm!r}")
        if self.queue not in QUEUES:
            raise OptionError(f"queue must be one of {', '.join(QUEUES)}, not {self.queue!r}")
        if not isinstance(self.block, int) or isinstance(self.block, bool) or self.block < 1:
            raise OptionError(f"block must be a whole number of events >= 1, not {self.block!r}")
        if self.window is not None and (not isinstance(self.window, int) or isinstance(self.window, bool)
                                        or self.window < 1):
            raise OptionError(f"window must be a whole number of events >= 1, not {self.window!r}")
        if self.chunk is not None and (not isinstance(self.chunk, int) or self.chunk < 1):
            raise OptionError(f"chunk must be a whole number >= 1, not {self.chunk!r}")
        if self.start not in STARTS:
            raise OptionError(f"start must be one of {', '.join(STARTS)}, not {self.start!r}")
        return self

    @property
    def worker_count(self) -> int:
        return (os.cpu_count() or 1) if self.workers == -1 else self.workers


@dataclass
class TaskStats:
    tasks: int = 0  # made for workers
    decided: int = 0  # transitions with nothing to evaluate, taken by the coordinator
    true_tasks: int = 0
    dropped: int = 0  # invalid when taken (a consumed event)
    blocks: int = 0
    peak_partial_matches: int = 0
    restarts: int = 0
    worker_seconds: float = 0.0  # time the workers spent evaluating (their utilization)
    final_matches: int = 0
    fired: int = 0
    # Per fired match, seconds from the release of its last event (its block's start) to
    # its firing: the latency the thesis measures.
    latencies: list = field(default_factory=list)
    # Speculative evaluation (tasks.speculate): expensive calls made (ahead of need or not),
    # the distinct ones the sequential engine used, and how often it waited for one.
    calls_made: int = 0
    calls_used: int = 0
    calls_waited: int = 0


class Coordinator:
    """Runs one partition (stream positions [start, end)) to its fired matches."""

    def __init__(self, tq: TaskQuery, part: PartitionData, opts: TaskOptions, evaluator: Evaluator,
                 pool: WorkerPool | None, stats: TaskStats, progress=None):
        self.tq = tq
        self.order = part.order0
        self.opts = opts
        self.evaluator = evaluator
        self.pool = pool
        self.stats = stats
        self.progress = progress  # called with the events done so far, per block
        self.done = 0
        self.queue = QUEUES[opts.queue]()
        self.pending: Counter[int] = Counter()  # outstanding tasks per event
        self._local: dict[tuple[int, int], bool] = {}  # (variable, event) -> its local predicates hold
        self._pending_heap: list[int] = []

    # ------------------------------------------------------------ windows
    def _reachable(self, pm: PartialMatch, row: int) -> bool:
        """Whether the windows let ``pm`` take ``row`` (rows ascend: once not, never again)."""
        if not pm.rows:
            return True
        w = self.opts.window
        if w is not None and row - pm.last > w:
            return False
        within = self.tq.within
        if within is not None:
            first = pm.rows[0]
            if within.events:
                return row - first <= within.bound
            return abs(self.order[row] - self.order[first]) <= within.bound
        return True

    def _pick_window(self, pm: PartialMatch, var: int, row: int, t) -> bool:
        binding = dict(zip(pm.variables, pm.rows, strict=True))
        binding[var] = row
        for rule in t.picks:
            x, y = binding[rule.var], binding[rule.source]
            if x >= y:
                return False
            distance = y - x if rule.events else abs(self.order[y] - self.order[x])
            if not distance <= rule.bound:  # NaN is never within
                return False
        return True

    # ------------------------------------------------------------ task creation
    def combine(self, pm: PartialMatch, until: int) -> None:
        """Algorithms 4.3 and 4.4: tasks of ``pm`` with every valid event up to ``until``."""
        transitions = self.tq.transitions[pm.state]
        for row in self.events.after(max(pm.last_combined, pm.last)):
            if row >= until:
                break
            if not self._reachable(pm, row):
                pm.expired = True
                break
            for t in transitions:
                if self.tq.local[t.var] and not self._local_ok(t.var, row):
                    continue
                if t.picks and not self._pick_window(pm, t.var, row, t):
                    continue
                if not t.predicates and not t.absences:
                    # Nothing left to evaluate (the event's type test passed above): the
                    # coordinator takes the transition itself, no worker round trip.
                    self.stats.decided += 1
                    self._advance(Task(t, pm, row), until)
                    continue
                self.queue.put(Task(t, pm, row))
                self.pending[row] += 1
                heapq.heappush(self._pending_heap, row)
                self.stats.tasks += 1
        pm.last_combined = max(pm.last_combined, until - 1)

    def _local_ok(self, var: int, row: int) -> bool:
        key = (var, row)
        ok = self._local.get(key)
        if ok is None:
            ev = self.evaluator
            ok = self._local[key] = all(ev.condition(i, (var,), (row,)) for i in self.tq.local[var])
        return ok

    def _finish(self, row: int) -> None:
        self.pending[row] -= 1
        if not self.pending[row]:
            del self.pending[row]

    def _earliest_pending(self, default: int) -> int:
        h = self._pending_heap
        while h and h[0] not in self.pending:
            heapq.heappop(h)
        return h[0] if h else default

    # ------------------------------------------------------------ results
    def _result(self, task: Task, ok: bool, until: int) -> None:
        self._finish(task.row)
        if ok:
            self._advance(task, until)

    def _advance(self, task: Task, until: int) -> None:
        """A true task: the partial match it makes, its tasks (Algorithm 4.4), the merger."""
        pm = task.pm
        if not self.structure.is_alive(pm) or not self.events.is_valid(task.row):
            return  # consumed meanwhile: whatever it leads to would be discarded
        self.stats.true_tasks += 1
        child = pm.extend(task.transition.var, task.row)
        if child.state in self.tq.finals:
            self.stats.final_matches += 1
            self.merger.receive(child)
        if self.tq.transitions.get(child.state):
            self.structure.add(child)
            self.stats.peak_partial_matches = max(self.stats.peak_partial_matches, self.structure.size)
            self.combine(child, until)

    def _take(self, limit: int) -> list[Task]:
        chunk = []
        q = self.queue
        while q and len(chunk) < limit:
            task = q.take()
            if not self.structure.is_alive(task.pm) or not self.events.is_valid(task.row):
                self.stats.dropped += 1
                self._finish(task.row)
                continue
            chunk.append(task)
        return chunk

    def _chunk_size(self) -> int:
        if self.opts.chunk is not None:
            return self.opts.chunk
        workers = max(1, self.opts.worker_count)
        return max(1, min(256, len(self.queue) // (4 * workers)))

    def drain(self, until: int) -> None:
        """Evaluate tasks until none is left, firing matches as they become earliest."""
        ev = self.evaluator
        while True:
            if self.pool is None:
                chunk = self._take(self._chunk_size())
                if not chunk:
                    break
                answers = [(chunk, ev.tasks([t.wire() for t in chunk]))]
            else:
                for w in self.pool.idle():
                    chunk = self._take(self._chunk_size())
                    if not chunk:
                        break
                    self.pool.submit(w, chunk, [t.wire() for t in chunk])
                if not self.pool.busy:
                    if not self.queue:
                        break
                    continue
                answers = self.pool.results()
            for chunk, oks in answers:
                for task, ok in zip(chunk, oks, strict=True):
                    self._result(task, ok, until)
            self._fire(self._earliest_pending(until))

    # ------------------------------------------------------------ one partition
    def run(self, start: int, end: int) -> list[PartialMatch]:
        self.events = RawEventList(start, end)
        self._local.clear()
        self.structure = STRUCTURES[self.opts.pm]()
        self.merger = Merger(self.tq, self.events.is_valid, self._consume)
        for sync in range(start, end, self.opts.block):
            until = min(end, sync + self.opts.block)
            self.events.set_synchronization_point(until)
            self.stats.blocks += 1
            self._released = time.perf_counter()
            self._local.clear()  # tasks are made only with this block's events now
            for pm in self.structure.live():
                self.combine(pm, until)
            self.drain(until)
            self._fire(until)
            self.structure.clean()
            if self.progress is not None:
                self.progress(self.done + until - start)
        self.done += end - start
        self.stats.fired += len(self.merger.fired)
        return self.merger.fired

    def _fire(self, limit: int) -> None:
        before = len(self.merger.fired)
        self.merger.fire(limit)
        if len(self.merger.fired) > before:
            waited = time.perf_counter() - self._released
            self.stats.latencies.extend([waited] * (len(self.merger.fired) - before))

    def _consume(self, row: int) -> None:
        self.events.consume(row)
        self.structure.consume(row)


def sorted_data(tq: TaskQuery, table: pa.Table):
    """The table's rows in match order, as one PartitionData, with the partitions' bounds
    and each position's input row."""
    q = tq.plan.query
    used = referenced_columns(q)
    table = admit(table, used)
    parts = sort_and_partition(table, q)
    order_np = parts.order
    idx = pa.array(order_np)
    arrays = [(table.column(i) if parts.identity else table.column(i).take(idx)) if i in used else None
              for i in range(table.num_columns)]
    if q.order_by:
        nulls = pc.is_null(table.column(q.order_by[0].index)).to_numpy(zero_copy_only=False).nonzero()[0]
        if len(nulls) and (tq.within is not None and not tq.within.events or any(not r.events for r in tq.picks)):
            raise DataError("a duration needs a value in the order column; this row has NULL",
                            column=q.order_by[0].column, row=int(nulls[0]))
    part = PartitionData(LazyColumns(arrays), table.num_rows, q.order_by[0].index if q.order_by else None)
    return part, parts.bounds, order_np


def run_fired(tq: TaskQuery, table: pa.Table, opts: TaskOptions, stats: TaskStats | None = None,
              progress=None, pool_factory=None, sequential_errors: bool = False):
    """Every partition through the coordinator: the sorted data, each position's input row,
    and per partition the fired matches as (variables, rows). ``pool_factory(evaluator)``
    makes the workers (default: worker processes as ``opts.start`` says; Spark passes its own).
    ``sequential_errors``: a data error is the one the sequential engine meets first (see
    sequential_error), not the first a worker happened to answer."""
    stats = stats if stats is not None else TaskStats()
    part, bounds, order_np = sorted_data(tq, table)
    evaluator = Evaluator(tq, part)
    n_workers = opts.worker_count
    pool = None
    fired = []
    try:
        if n_workers > 0 and table.num_rows:
            if pool_factory is not None:
                pool = pool_factory(evaluator)
            else:
                if opts.start == "fork":
                    part.py()  # convert the columns once, before the workers fork with them
                pool = WorkerPool(evaluator, n_workers, start=opts.start)
        coordinator = Coordinator(tq, part, opts, evaluator, pool, stats, progress)
        for start, end in bounds:
            fired.append([(m.variables, m.rows) for m in coordinator.run(start, end)])
    except DataError as e:
        if sequential_errors and getattr(e, "position", None) is not None:
            raise sequential_error(tq, table, order_np, e) from None
        raise at_input_row(e, order_np) from None
    finally:
        if pool is not None:
            stats.restarts += pool.restarts
            stats.worker_seconds += getattr(pool, "busy_seconds", 0.0)
            pool.close()
    return part, order_np, fired


def run_tasks(tq: TaskQuery, table: pa.Table, opts: TaskOptions, stats: TaskStats | None = None,
              progress=None, pool_factory=None) -> pa.Table:
    """The output table of a query on the task engine, as match_recognize builds it."""
    part, order_np, fired = run_fired(tq, table, opts, stats, progress, pool_factory)
    return matches_table(tq, table, part, order_np, fired)


def sequential_error(tq: TaskQuery, table: pa.Table, order_np: np.ndarray, e: DataError) -> DataError:
    """The error the sequential engine raises first, given ``e`` from a task at stream
    position ``e.position``. Workers answer in no set order, so that task need not be the
    first to fail; but every task of the query (a MATCH_RECOGNIZE, no consumption) is one
    the sequential engine evaluates too, reading no row after its own, so it fails at that
    position at the latest: the sequential engine runs the rows up to it (in the task
    engine's order, so positions stay) and its error is the one."""
    from sparkcep.runtime.local import run_automaton
    from sparkcep.runtime.vm import Matcher
    from sparkcep.tasks.calls import calls_once

    rows = order_np[: e.position + 1]
    try:
        with calls_once(tq.plan):
            run_automaton(tq.plan, table.take(pa.array(rows)), Matcher)
    except DataError as first:
        return DataError(first.message, first.column, row=int(rows[first.row])) if first.row is not None else first
    return at_input_row(e, order_np)


def at_input_row(e: DataError, order_np: np.ndarray) -> DataError:
    """A worker's error names a stream position; the user knows the input row."""
    pos = getattr(e, "position", None)
    if pos is not None and e.row is None:
        return DataError(e.message, e.column, row=int(order_np[pos]))
    return e


def matches_table(tq: TaskQuery, table: pa.Table, part: PartitionData, order_np: np.ndarray,
                  fired: list[list[tuple[tuple[int, ...], tuple[int, ...]]]]) -> pa.Table:
    """The output of the fired matches (per partition, (variables, rows) in firing order):
    one row per match with RETURN's outputs, or without RETURN every event of every match."""
    items = []
    for matches in fired:
        for k, (variables, rows) in enumerate(matches, 1):
            items.append(("match", Match(rows[0], rows[-1] + 1, variables, (False,) * len(rows), rows), k))
    plan = tq.plan
    types = measure_types(plan.query, table.schema)
    positions: list[int] = []
    values: list[list[Any]] = [[] for _ in plan.measures]
    for pos, vals in measure_rows(plan, part, items, lambda r: int(order_np[r])):
        positions.append(int(order_np[pos]))
        for j, v in enumerate(vals):
            values[j].append(v)
    measures = [measure_array(m.name, values[j], types[j]) for j, m in enumerate(plan.measures)]
    return output_table(plan, table, np.array(positions, dtype=np.int64), measures, types)
