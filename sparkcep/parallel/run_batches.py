"""RIP's run-based parallelism (RB+) for one ordered partition, exact for every skip mode.

The partition's rows (global positions 0..N-1) are cut into batches of ``batch`` rows. Each
batch task reads its own rows plus ``shared`` following rows (and the few rows PREV/NEXT
need) and finds, for every start row it owns, what the sequential engine would find there:
the preferred match, every match (ALL MATCHES) or the earliest-ending one (matchregex).

- With MAXLENGTH m the overlap ``shared = m - 1`` settles every start in one pass.
- Otherwise a start whose search runs off the end of its window is UNRESOLVED; follow-up
  passes give those starts windows twice as long, until the partition end (RIP needs
  MAXLENGTH; we do not).
- Matches that depend on the previous one (AFTER MATCH SKIP PAST LAST ROW / TO FIRST / TO
  LAST, matchregex) are chosen by one cheap sequential pass over the candidates, the same
  selection the sequential engine makes; MATCH_NUMBER is assigned there.
- A last parallel pass evaluates MEASURES for the chosen matches, batch by batch.

A ``Backend`` runs the batch tasks: in-process here (LocalBackend, for tests), or as Spark
jobs (sparkcep.spark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.plan import Plan
from sparkcep.errors import DataError, ExecutionError, SparkCepError
from sparkcep.runtime import columnar as columnar_measures
from sparkcep.runtime.fast import KernelMatcher
from sparkcep.runtime.matches import UNRESOLVED, Match, PartitionData, Spans
from sparkcep.runtime.selection import (
    Selection,
    candidate_finder,
    measure_rows,
    resume_row,
    select_matches,
)
from sparkcep.runtime.vm import Matcher


@dataclass(frozen=True)
class Window:
    """Rows [start, end) of the partition for one task; matches may use rows below
    ``match_end``; the task answers for start rows ``starts`` (or the range own_start..own_end)."""

    batch: int
    start: int
    end: int
    match_end: int
    own_start: int
    own_end: int
    starts: tuple[int, ...] | None = None


def make_window(plan: Plan, n: int, batch: int, own_start: int, own_end: int, match_end: int,
                starts: tuple[int, ...] | None = None) -> Window:
    match_end = min(n, max(match_end, own_end))
    return Window(batch, max(0, own_start - plan.lookbehind), min(n, match_end + plan.lookahead),
                  match_end, own_start, own_end, starts)


def window_data(cols, order0_index: int | None, w: Window, n: int) -> PartitionData:
    """The PartitionData of window ``w``; ``cols`` holds the window's rows (lists or
    data.LazyColumns)."""
    return PartitionData(cols, w.end - w.start, order0_index,
                         base=w.start, complete=w.match_end >= n, limit=w.match_end - w.start)


def shift(m: Match, by: int) -> Match:
    return replace(m, start=m.start + by, end=m.end + by)


def find_candidates(plan: Plan, part: PartitionData, w: Window) -> list[tuple[int, Any]]:
    """(global start, answer) for the window's start rows, answers in global positions;
    starts with nothing found are left out, a start whose search failed answers its
    DataError. The batch task of the first pass."""
    starts = w.starts if w.starts is not None else range(w.own_start, w.own_end)
    q = plan.query
    kernel = KernelMatcher.for_plan(plan) if q.skip_mode != "ALL_MATCHES" else None
    if kernel is not None and w.starts is None:
        found = kernel.candidates(part, w.own_start - w.start, w.own_end - w.start, q.mode == "matchregex")
        if found is not None:
            return [(s + w.start, r if r is UNRESOLVED or r is None else shift(r, w.start))
                    for s, r in found if r is not None]
    find = candidate_finder(plan.query, Matcher(plan), part)
    out = []
    for s in starts:
        try:
            r = find(s - w.start)
        except DataError as e:
            # The error of this start is the query's only if the selection asks for it (it
            # may skip the start, as the sequential engine then never searches it).
            out.append((s, e))
            continue
        if r is UNRESOLVED:
            out.append((s, UNRESOLVED))
        elif isinstance(r, list):
            if r:
                out.append((s, [shift(m, w.start) for m in r]))
        elif r is not None:
            out.append((s, shift(r, w.start)))
    return out


@dataclass(frozen=True)
class Emitted:
    """A batch's output rows: their global rows and each measure's values, an Arrow array
    where the measures were columns (runtime.columnar), else a list."""

    rows: np.ndarray
    measures: list

    @staticmethod
    def of_pairs(pairs: list[tuple[int, list[Any]]], k: int) -> Emitted:
        """From (global row, measure values) pairs, ``k`` measures."""
        return Emitted(np.array([g for g, _ in pairs], dtype=np.int64),
                       [list(col) for col in zip(*[v for _, v in pairs], strict=True)] if pairs else [[] for _ in range(k)])

    def pairs(self) -> list[tuple[int, list[Any]]]:
        """(global row, measure values) per output row."""
        values = [m.to_pylist() if isinstance(m, pa.Array) else m for m in self.measures]
        if not values:
            return [(r, []) for r in self.rows.tolist()]
        return list(zip(self.rows.tolist(), (list(v) for v in zip(*values, strict=True)), strict=True))


def measure_window(plan: Plan, part: PartitionData, w: Window, items: list[tuple],
                   input_row: Callable[[int], int] = lambda r: r) -> list[tuple[int, list[Any]]]:
    """(global row, measure values) for the selected items the window owns."""
    local = []
    for item in items:
        if item[0] == "unmatched":
            local.append(("unmatched", item[1] - w.start))
        else:
            local.append(("match", shift(item[1], -w.start), item[2]))
    rows = measure_rows(plan, part, local, lambda p: input_row(p + w.start))
    return [(pos + w.start, values) for pos, values in rows]


# ---------------------------------------------------------------- the tasks
@dataclass(frozen=True)
class Task:
    """One batch task: the batch's own rows [lo, hi) of a partition of ``n`` rows, its
    selection starting at ``entry`` (a row >= lo), matches allowed to run ``reach`` rows past
    ``hi``; a summary lists the chain's matches that start below ``zone_end``."""

    batch: int
    lo: int
    hi: int
    entry: int
    reach: int
    zone_end: int
    n: int
    part: int = 0  # which partition (a backend may run batches of many at once)

    def window(self, plan: Plan) -> Window:
        # The selection decides starts below hi; matchregex also compares the matches of
        # later starts that overlap (so they are candidates too).
        match_end = min(self.n, self.hi + self.reach)
        own_end = match_end if plan.query.mode == "matchregex" else self.hi
        return make_window(plan, self.n, self.batch, self.entry, own_end, match_end)


@dataclass(frozen=True)
class Summary:
    """What a batch's selection did from ``task.entry`` — all the driver needs to stitch
    batches: the chain's matches near the start (start, resume row, last row), how many
    matches come after the zone and the last row they cover, where the selection left the
    batch, or the start where it stalled (a search ran past the window: more reach)."""

    task: Task
    chain: tuple[tuple[int, int, int], ...]
    count_after: int
    last_after: int
    exit: int
    stall: int | None
    # A DataError the selection raised at this start (AFTER MATCH SKIP with no row to go
    # to): it is the query's error only if the true selection gets there.
    error: tuple[int, DataError] | None = None

    def follow(self, entry: Selection) -> Selection | DataError | None:
        """The selection after this batch for the true ``entry`` state; the error it stops
        with in this batch; or None when this summary cannot tell (the entry is inside one
        of its matches' skipped rows, past its zone, or the selection stalled)."""
        t, e = self.task, entry.pos
        if e >= t.hi:
            return entry  # an earlier match covers the whole batch
        if e < t.entry or (e > t.zone_end and e != t.entry):
            return None
        # The chain from t.entry reaches e unless one of its matches skips over e; from
        # there on both chains are the same (the selection is a function of the position).
        if any(s < e < r for s, r, _ in self.chain):
            return None
        if self.error is not None:
            return self.error[1] if e <= self.error[0] else None
        if self.stall is not None:
            return None
        count = sum(1 for s, _, _ in self.chain if s >= e) + self.count_after
        covered = max([entry.covered, self.last_after] + [last for s, _, last in self.chain if s >= e])
        return Selection(self.exit, covered, entry.number + count)


def candidate_table(plan: Plan, part: PartitionData, w: Window) -> Callable[[int], Any]:
    """What the window found at each start row (for select_matches); a task that both
    summarizes and emits over one window finds them once."""
    q = plan.query
    found: dict[int, Any] | None = None  # found on the first question (the kernel's selection may need none)
    empty = [] if q.skip_mode == "ALL_MATCHES" and q.mode != "matchregex" else None

    def candidate(s: int):
        nonlocal found
        if found is None:
            found = dict(find_candidates(plan, part, w))
        got = found.get(s, empty)
        if isinstance(got, DataError):
            raise got
        return got
    return candidate


def summarize(plan: Plan, part: PartitionData, w: Window, task: Task,
              input_row: Callable[[int], int] = lambda r: r, candidate: Callable[[int], Any] | None = None
              ) -> Summary:
    """The first pass of a batch task: its selection from ``task.entry``, summarized."""
    q = plan.query
    state = Selection(task.entry, task.entry - 1, 0)
    chosen = kernel_selection(plan, part, w, task, state)
    if chosen is not None:
        return chosen.summary(plan, w, task)
    chain: list[tuple[int, int, int]] = []
    count_after, last_after = 0, -1
    candidate = candidate if candidate is not None else candidate_table(plan, part, w)
    try:
        for item in select_matches(q, w.match_end, candidate, input_row, state=state, stop=task.hi):
            if item[0] != "match":
                continue
            m = item[1]
            last = m.last if not m.empty else -1
            if m.start < task.zone_end:
                chain.append((m.start, resume_row(q, m, input_row), last))
            else:
                count_after += 1
                last_after = max(last_after, last)
    except DataError as e:
        return Summary(task, tuple(chain), count_after, last_after, state.pos, None,
                       (state.pos, _at_input_row(e, w, input_row)))
    stalled = state.pos < task.hi and state.pos < w.match_end
    return Summary(task, tuple(chain), count_after, last_after, state.pos, state.pos if stalled else None)


def _at_input_row(e: DataError, w: Window, input_row: Callable[[int], int]) -> DataError:
    """A matcher's error at a row of the window, naming the input row (as measure_rows does
    for MEASURES)."""
    if isinstance(e, EvaluationError) and e.position is not None:
        return DataError(e.message, row=input_row(e.position + w.start))
    return e


def emit(plan: Plan, part: PartitionData, w: Window, task: Task, entry: Selection,
         input_row: Callable[[int], int] = lambda r: r, candidate: Callable[[int], Any] | None = None
         ) -> Emitted:
    """The last pass of a batch task: its output rows (global row, measure values) from
    the true ``entry`` state — matches numbered on from it, unmatched rows included."""
    q = plan.query
    state = Selection(entry.pos, entry.covered, entry.number)
    chosen = kernel_selection(plan, part, w, task, state)
    if chosen is not None:
        if chosen.stall is not None:  # pragma: no cover - the driver's summaries said otherwise
            raise SparkCepError(f"internal: batch {task.batch} stalled at row {chosen.stall} in its last pass")
        return chosen.output(plan, part, w, entry.number, input_row)
    candidate = candidate if candidate is not None else candidate_table(plan, part, w)
    items: list[tuple] = []
    try:
        for item in select_matches(q, w.match_end, candidate, input_row, state=state, stop=task.hi):
            items.append(item)
    except DataError as e:
        # The matches selected before the error are measured first: one of their MEASURES
        # may fail, and the sequential engine, measuring each match as it selects it,
        # reports that error.
        measure_window(plan, part, w, items, input_row)
        raise _at_input_row(e, w, input_row) from None
    if state.pos < task.hi and state.pos < w.match_end:  # pragma: no cover - the driver's summaries said otherwise
        raise SparkCepError(f"internal: batch {task.batch} stalled at row {state.pos} in its last pass")
    return Emitted.of_pairs(measure_window(plan, part, w, items, input_row), len(q.measures))


@dataclass(frozen=True)
class KernelSelection:
    """A batch's selection from one entry as the compiled kernel made it in one call (the
    batch engine's own loop): the matches that start below the batch's end, in window rows,
    where the selection left the batch, or the start where it stalled (global rows)."""

    starts: np.ndarray
    ends: np.ndarray
    offs: np.ndarray
    labels: np.ndarray
    excl: np.ndarray
    exit: int
    stall: int | None

    def matches(self, first: int, last: int, base: int = 0) -> list[Match]:
        """Matches ``first`` .. ``last - 1``, in partition rows (window rows + ``base``)."""
        return [shift(item[1], base) for item in KernelMatcher.match_items(
            self.starts[first:last], self.ends[first:last], self.offs[first:last + 1], self.labels, self.excl, 0)]

    def summary(self, plan: Plan, w: Window, task: Task) -> Summary:
        q = plan.query
        zone = int(np.searchsorted(self.starts, task.zone_end - w.start))
        chain = tuple((m.start, resume_row(q, m), m.last if not m.empty else -1)
                      for m in self.matches(0, zone, w.start))
        lasts = np.where(self.ends[zone:] > self.starts[zone:], self.ends[zone:] - 1 + w.start, -1)
        return Summary(task, chain, len(self.starts) - zone, int(lasts.max(initial=-1)), self.exit, self.stall)

    def output(self, plan: Plan, part: PartitionData, w: Window, number: int,
               input_row: Callable[[int], int]) -> Emitted:
        """The output rows, matches numbered on from ``number``; measures as whole columns
        where they allow it (runtime.columnar)."""
        k = len(self.starts)
        got = None
        if columnar_measures.supported(plan) and hasattr(part.cols, "arrow"):
            numbers = np.arange(number + 1, number + 1 + k, dtype=np.int64)
            got = columnar_measures.measure_columns(plan, part, Spans.of_kernel(self.starts, self.ends, numbers,
                                                                                self.offs, self.labels, self.excl),
                                                    [None] * len(plan.query.measures))
        if got is not None:
            return Emitted(got[0] + w.start, got[1])
        items = KernelMatcher.match_items(self.starts, self.ends, self.offs, self.labels, self.excl, number)
        rows = measure_rows(plan, part, items, lambda p: input_row(p + w.start))
        return Emitted.of_pairs([(pos + w.start, values) for pos, values in rows], len(plan.query.measures))


def kernel_selection(plan: Plan, part: PartitionData, w: Window, task: Task, entry: Selection
                     ) -> KernelSelection | None:
    """The batch's selection from ``entry`` in one kernel call, or None where the Python
    selection runs (matchregex, ALL MATCHES, unmatched rows, data or conditions the kernel
    cannot take, and a skip error, whose row the Python selection places). A summary and
    an emit from the same entry share the call."""
    q = plan.query
    if q.mode == "matchregex" or q.skip_mode == "ALL_MATCHES" or q.with_unmatched or entry.pos >= task.hi:
        return None
    key = ("selection", task.hi, entry.pos, entry.covered)
    if key in part.cache:
        return part.cache[key]
    kernel = KernelMatcher.for_plan(plan)
    got = None
    if kernel is not None:
        try:
            got = kernel.select_window(part, entry.pos - w.start, entry.covered - w.start,
                                       stop=task.hi - w.start)  # starts past the batch are cut anyway
        except DataError:
            got = None
    chosen = None
    if got is not None:
        starts, ends, offs, labels, excl, pos, _ = got
        hi = task.hi - w.start
        k = int(np.searchsorted(starts, hi))  # starts rise: each resume lies past its start
        stall = None
        if pos < hi and pos < w.match_end - w.start:
            stall = exit_ = pos + w.start  # an answer there needs rows past the window
        elif k:
            last = KernelMatcher.match_items(starts[k - 1:k], ends[k - 1:k], offs[k - 1:k + 1], labels, excl, 0)[0][1]
            exit_ = max(resume_row(q, last) + w.start, task.hi)
        else:
            exit_ = task.hi
        chosen = KernelSelection(starts[:k], ends[:k], offs[:k + 1], labels[:offs[k]], excl[:offs[k]], exit_, stall)
    part.cache[key] = chosen
    return chosen


def speculation_from(plan: Plan, first: Summary, task: Task, entry: Selection) -> tuple[int, int] | None:
    """Where a batch's first-pass output — emitted as if it began free, from the selection
    ``first`` summarizes — is its true output: (first row, match-number offset), or None.

    The task must be the first pass's (not re-run). The true selection enters at
    ``entry``; the first pass's chain reaches that row (none of its matches skips over it,
    and it lies within the summarized zone), so from there on both select the same matches.
    Rows of the first pass's earlier matches must all lie before it (nothing they cover
    reaches it), and nothing the true selection covered reaches it either. The output rows
    from that row on are then the true ones, with MATCH_NUMBER() moved on by the offset —
    possible when match numbers are unread, or read only as whole measures
    (``number_measures``)."""
    t, e = first.task, entry.pos
    if replace(task, entry=t.entry) != t or first.error is not None or first.stall is not None:
        return None
    if e < t.entry or e >= t.hi or (e > t.zone_end and e != t.entry):
        return None
    before = [(s, r, last) for s, r, last in first.chain if s < e]
    if any(r > e for _, r, _ in before) or any(last >= e for _, _, last in before) or entry.covered >= e:
        return None
    offset = entry.number - len(before)
    if offset and plan.measure_match_number:
        return None
    return e, offset


def number_measures(plan: Plan, rows: list[tuple[int, list[Any]]], offset: int) -> list[tuple[int, list[Any]]]:
    """First-pass output rows with the MATCH_NUMBER() measures moved on by ``offset``."""
    if not offset or not plan.match_number_measures:
        return rows
    out = []
    for pos, values in rows:
        values = list(values)
        for j in plan.match_number_measures:
            if values[j] is not None:
                values[j] += offset
        out.append((pos, values))
    return out


class Backend(Protocol):
    """Runs batch tasks of one partition: first summaries, then output rows."""

    def summaries(self, tasks: list[Task]) -> list[Summary]: ...

    def outputs(self, tasks: list[tuple[Task, Selection]]) -> list[tuple[int, list[Any]]]: ...


@dataclass
class RunStats:
    batches: int = 0
    passes: int = 0
    follow_up_starts: int = 0  # batch tasks run again (more reach, or from another entry)
    candidates: int = 0
    matches: int = 0


def plan_batches(n: int, batch: int) -> list[tuple[int, int]]:
    return [(b * batch, min(n, (b + 1) * batch)) for b in range((n + batch - 1) // batch)]


def default_shared(plan: Plan, batch: int) -> int:
    """RB+'s shared part: MAXLENGTH - 1 rows settles every start at once; without a bound,
    a guess that follow-up passes correct."""
    m = plan.query.maxlength
    return m - 1 if m is not None else min(batch, 1024)


def stitch(summaries: dict[int, Summary], batches: list[tuple[int, int]]
           ) -> tuple[dict[int, Selection], Selection, list[Task], DataError | None]:
    """Walk the batches in order from the partition's start: the true entry state of each
    batch whose predecessors' summaries tell it, the state after the last one, the tasks
    still needed — the first batch a summary cannot follow (run from its true entry, with
    twice the reach if it stalled there), and every later stalled batch (twice the reach:
    it will be needed) — and the error the selection stops with (in the last batch with an
    entry)."""
    entries: dict[int, Selection] = {}
    entry = Selection(0, -1, 0)
    todo: list[Task] = []
    blocked = False
    zone = 2 * max(s.task.reach for s in summaries.values()) + 1
    for b in range(len(batches)):
        s = summaries[b]
        t = s.task
        if not blocked:
            entries[b] = entry
            nxt = s.follow(entry)
            if isinstance(nxt, DataError):
                return entries, entry, [], nxt
            if nxt is not None:
                entry = nxt
                continue
            blocked = True
            more = s.stall is not None and entry.pos <= s.stall
            todo.append(replace(t, entry=entry.pos, reach=t.reach * 2 if more else t.reach, zone_end=t.lo + zone))
        elif s.stall is not None:
            todo.append(replace(t, reach=t.reach * 2, zone_end=t.lo + zone))
    return entries, entry, todo, None


def run_partition(plan: Plan, n: int, backend: Backend, batch: int, shared: int | None = None,
                  input_row: Callable[[int], int] = lambda r: r, stats: RunStats | None = None):
    """Output rows of one partition of ``n`` rows (see run_partitions)."""
    del input_row  # the backend maps rows for its errors
    return run_partitions(plan, [n], backend, batch, shared, stats)


def run_partitions(plan: Plan, sizes: Sequence[int], backend: Backend, batch: int, shared: int | None = None,
                   stats: RunStats | None = None, bounds: dict[int, list[tuple[int, int]]] | None = None):
    """Output rows of partitions of ``sizes`` rows, exactly as the sequential engine
    produces them, computed in batch tasks: each batch selects matches as if it began free
    and reports a summary; the driver stitches the seams (the chains of two entry points
    meet after a few matches), re-runs only batches whose true entry its summary cannot
    follow, then each batch emits its rows from its true entry state (``backend.outputs``:
    a list of rows in-process, a DataFrame on Spark). The driver handles one small summary
    per batch and round, never the matches. ``bounds``: the batches of each partition as
    (lo, hi) rows, when the backend cut them (default: ``batch`` rows each).

    Where a partition's selection stops with an error, the rows before it are still made,
    so that an earlier error wins as it does in the sequential engine: a MEASURES error of
    an earlier match, or of an earlier partition. (A lazy result, as on Spark, is not run:
    its tasks run side by side, so any of their errors could come first.)"""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if plan.define_match_number:
        # Batches find candidates before matches are numbered.
        raise SparkCepError("the run strategies do not support MATCH_NUMBER() in DEFINE; use the partition "
                            "or sequential strategy")
    stats = stats if stats is not None else RunStats()
    shared = max(default_shared(plan, batch) if shared is None else shared, 1)
    layout = bounds if bounds is not None else {pi: plan_batches(n, batch) for pi, n in enumerate(sizes) if n}
    stats.batches = sum(len(b) for b in layout.values())
    tasks = [Task(b, lo, hi, lo, shared, lo + shared + 1, sizes[pi], pi)
             for pi, batches in layout.items() for b, (lo, hi) in enumerate(batches)]
    summaries: dict[int, dict[int, Summary]] = {pi: {} for pi in layout}
    entries: dict[int, dict[int, Selection]] = {}
    errors: dict[int, DataError] = {}
    while tasks:
        stats.passes += 1
        for s in backend.summaries(tasks):
            summaries[s.task.part][s.task.batch] = s
        tasks = []
        stats.matches = 0
        for pi, batches in layout.items():
            entries[pi], last, todo, error = stitch(summaries[pi], batches)
            stats.matches += last.number
            if error is not None:
                errors[pi] = error
            if not errors or pi < min(errors):  # partitions after a failing one are never output
                tasks += todo
        stats.follow_up_starts += len(tasks)
    failed = min(errors, default=None)
    # Each batch emits from its true entry, with the reach its summary needed; a batch an
    # earlier match covers entirely emits nothing.
    result = backend.outputs([(replace(summaries[pi][b].task, entry=e.pos), e)
                              for pi, es in entries.items() if failed is None or pi <= failed
                              for b, e in es.items() if e.pos < summaries[pi][b].task.hi])
    if failed is not None:
        raise errors[failed]
    return result


class LocalBackend:
    """Runs the batch tasks in this process over full partition columns (tests, and the
    reference for other backends). Like the Spark backend, a batch's first pass also emits
    its output as if the batch began free, kept from where the true selection joins it
    (``speculation_from``); ``speculate=False`` always emits again."""

    def __init__(self, plan: Plan, cols: Sequence[Sequence[Any] | None], order0_index: int | None, n: int,
                 input_row: Callable[[int], int] = lambda r: r, speculate: bool = True):
        self.plan = plan
        self.cols = cols
        self.order0_index = order0_index
        self.n = n
        self.input_row = input_row
        self.speculate = speculate
        self.first: dict[tuple[int, int], tuple[Summary, list | None]] = {}  # (part, batch) -> first pass, its rows
        self.kept = 0  # batches whose first-pass output was their output

    def _data(self, w: Window) -> PartitionData:
        if hasattr(self.cols, "slice"):
            sliced = self.cols.slice(w.start, w.end - w.start)
        else:
            sliced = [None if c is None else c[w.start:w.end] for c in self.cols]
        return window_data(sliced, self.order0_index, w, self.n)

    def summaries(self, tasks: Iterable[Task]) -> list[Summary]:
        out = []
        for t in tasks:
            w = t.window(self.plan)
            part = self._data(w)
            candidate = candidate_table(self.plan, part, w)
            s = summarize(self.plan, part, w, t, self.input_row, candidate)
            out.append(s)
            if (t.part, t.batch) not in self.first:
                rows = None
                if self.speculate and s.error is None and s.stall is None:
                    try:
                        rows = emit(self.plan, part, w, t, Selection(t.lo, t.lo - 1, 0), self.input_row,
                                    candidate).pairs()
                    except DataError:
                        rows = None  # the true entry may never reach the row that failed
                self.first[(t.part, t.batch)] = (s, rows)
        return out

    def outputs(self, tasks: Iterable[tuple[Task, Selection]]) -> list[tuple[int, list[Any]]]:
        out = []
        for t, entry in tasks:
            first, rows = self.first[(t.part, t.batch)]
            keep = speculation_from(self.plan, first, t, entry) if rows is not None else None
            if keep is not None:
                self.kept += 1
                out += number_measures(self.plan, [(g, v) for g, v in rows if g >= keep[0]], keep[1])
                continue
            w = t.window(self.plan)
            out += emit(self.plan, self._data(w), w, t, entry, self.input_row).pairs()
        return out


_FORKED: LocalBackend | None = None  # the backend a forked pool worker serves


def _summarize_forked(t: Task) -> tuple[Summary, list | None]:
    b = _FORKED
    s = LocalBackend.summaries(b, [t])[0]
    return s, b.first[(t.part, t.batch)][1]


def _emit_forked(item: tuple[Task, Selection]) -> list[tuple[int, list[Any]]]:
    b, (t, entry) = _FORKED, item
    w = t.window(b.plan)
    return emit(b.plan, b._data(w), w, t, entry, b.input_row).pairs()


class ProcessBackend(LocalBackend):
    """LocalBackend with the batch tasks spread over ``workers`` forked processes: RIP's
    RB+ on one machine (the state-based baselines' comparison)."""

    # A pool whose workers keep dying is a bug, not bad luck.
    MAX_RESTARTS = 8

    def __init__(self, *args, workers: int = 2, **kwargs):
        super().__init__(*args, **kwargs)
        self.workers = workers
        self.restarts = 0
        self._pool = None

    def _map(self, fn, items: list) -> list:
        """``fn`` over ``items`` in the workers. A worker that dies breaks the pool (where
        multiprocessing.Pool would wait forever): a fresh pool runs the whole map again —
        the tasks are pure."""
        global _FORKED
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        while True:
            if self._pool is None:
                _FORKED = self  # inherited by the forked workers
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
            try:
                return list(self._pool.map(fn, items))
            except BrokenProcessPool:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                self.restarts += 1
                if self.restarts > self.MAX_RESTARTS:
                    raise ExecutionError(f"RB+ worker processes died {self.restarts} times; giving up") from None

    def summaries(self, tasks: Iterable[Task]) -> list[Summary]:
        tasks = list(tasks)
        out = []
        for t, (s, rows) in zip(tasks, self._map(_summarize_forked, tasks), strict=True):
            self.first.setdefault((t.part, t.batch), (s, rows))
            out.append(s)
        return out

    def outputs(self, tasks: Iterable[tuple[Task, Selection]]) -> list[tuple[int, list[Any]]]:
        # First passes live here: keep what can be kept, emit the rest in the workers.
        tasks = list(tasks)
        results: list[list] = [[] for _ in tasks]
        rest = []
        for i, (t, entry) in enumerate(tasks):
            first, rows = self.first[(t.part, t.batch)]
            keep = speculation_from(self.plan, first, t, entry) if rows is not None else None
            if keep is not None:
                self.kept += 1
                results[i] = number_measures(self.plan, [(g, v) for g, v in rows if g >= keep[0]], keep[1])
            else:
                rest.append(i)
        for i, rows in zip(rest, self._map(_emit_forked, [tasks[i] for i in rest]), strict=True):
            results[i] = rows
        return [row for rows in results for row in rows]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
