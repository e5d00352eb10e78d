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

from sparkcep.compile.plan import Plan
from sparkcep.errors import SparkCepError
from sparkcep.runtime.engine import candidate_finder, measure_rows, select_matches
from sparkcep.runtime.fast import KernelMatcher
from sparkcep.runtime.vm import UNRESOLVED, Match, Matcher, PartitionData


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
    starts with nothing found are left out. The batch task of the first pass."""
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
        r = find(s - w.start)
        if r is UNRESOLVED:
            out.append((s, UNRESOLVED))
        elif isinstance(r, list):
            if r:
                out.append((s, [shift(m, w.start) for m in r]))
        elif r is not None:
            out.append((s, shift(r, w.start)))
    return out


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


class Backend(Protocol):
    """Runs batch tasks over the windows of one partition."""

    def candidates(self, windows: list[Window]) -> list[tuple[int, Any]]: ...

    def measures(self, windows: list[Window], items: dict[int, list[tuple]]) -> list[tuple[int, list[Any]]]: ...


@dataclass
class RunStats:
    batches: int = 0
    passes: int = 0
    follow_up_starts: int = 0
    candidates: int = 0
    matches: int = 0


def plan_batches(n: int, batch: int) -> list[tuple[int, int]]:
    return [(b * batch, min(n, (b + 1) * batch)) for b in range((n + batch - 1) // batch)]


def default_shared(plan: Plan, batch: int) -> int:
    """RB+'s shared part: MAXLENGTH - 1 rows settles every start at once; without a bound,
    a guess that follow-up passes correct."""
    m = plan.query.maxlength
    return m - 1 if m is not None else batch


def run_partition(plan: Plan, n: int, backend: Backend, batch: int, shared: int | None = None,
                  input_row: Callable[[int], int] = lambda r: r, stats: RunStats | None = None
                  ) -> list[tuple[int, list[Any]]]:
    """Output rows (global row, measures) of one partition of ``n`` rows, exactly as the
    sequential engine produces them, computed in batch tasks."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if plan.define_match_number:
        # Batches find candidates before matches are numbered.
        raise SparkCepError("the run strategies do not support MATCH_NUMBER() in DEFINE; use the partition "
                            "or sequential strategy")
    stats = stats if stats is not None else RunStats()
    shared = default_shared(plan, batch) if shared is None else shared
    batches = plan_batches(n, batch)
    stats.batches = len(batches)
    windows = [make_window(plan, n, b, lo, hi, hi + shared) for b, (lo, hi) in enumerate(batches)]
    found: dict[int, Any] = {}
    reach = shared
    while windows:
        stats.passes += 1
        unresolved: dict[int, list[int]] = {}
        for s, r in backend.candidates(windows):
            if r is UNRESOLVED:
                unresolved.setdefault(s // batch, []).append(s)
            else:
                found[s] = r
        reach = max(1, reach) * 2
        windows = []
        for b, starts in sorted(unresolved.items()):
            lo, hi = batches[b]
            starts.sort()
            stats.follow_up_starts += len(starts)
            windows.append(make_window(plan, n, b, starts[0], hi, hi + reach, tuple(starts)))
    stats.candidates = len(found)

    q = plan.query
    empty = [] if q.skip_mode == "ALL_MATCHES" and q.mode != "matchregex" else None
    items = list(select_matches(q, n, lambda s: found.get(s, empty), input_row))
    per_batch: dict[int, list[tuple]] = {}
    for item in items:
        row = item[1] if item[0] == "unmatched" else item[1].start
        per_batch.setdefault(row // batch, []).append(item)
        if item[0] == "match":
            stats.matches += 1
    mwindows = []
    for b, its in sorted(per_batch.items()):
        lo, hi = batches[b]
        end = max([hi] + [it[1].end for it in its if it[0] == "match"])
        mwindows.append(make_window(plan, n, b, lo, hi, end))
    return backend.measures(mwindows, per_batch)


class LocalBackend:
    """Runs the batch tasks in this process over full partition columns (tests, and the
    reference for other backends)."""

    def __init__(self, plan: Plan, cols: Sequence[Sequence[Any] | None], order0_index: int | None, n: int,
                 input_row: Callable[[int], int] = lambda r: r):
        self.plan = plan
        self.cols = cols
        self.order0_index = order0_index
        self.n = n
        self.input_row = input_row

    def _data(self, w: Window) -> PartitionData:
        if hasattr(self.cols, "slice"):
            sliced = self.cols.slice(w.start, w.end - w.start)
        else:
            sliced = [None if c is None else c[w.start:w.end] for c in self.cols]
        return window_data(sliced, self.order0_index, w, self.n)

    def candidates(self, windows: Iterable[Window]) -> list[tuple[int, Any]]:
        out = []
        for w in windows:
            out += find_candidates(self.plan, self._data(w), w)
        return out

    def measures(self, windows: Iterable[Window], items: dict[int, list[tuple]]) -> list[tuple[int, list[Any]]]:
        out = []
        for w in windows:
            out += measure_window(self.plan, self._data(w), w, items[w.batch], self.input_row)
        return out
