"""The sequential engine for one partition: where matching starts, what a match is, where
it resumes (AFTER MATCH SKIP), and which rows come out (ONE ROW / ALL ROWS PER MATCH).

Output rows are (partition row, measure values) pairs; the caller turns partition rows into
input columns.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sparkcep.analysis.bound import AnalyzedQuery
from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.plan import Plan
from sparkcep.compile.skip import SkipStrategy
from sparkcep.errors import DataError
from sparkcep.runtime.matches import UNRESOLVED, Match, PartitionData
from sparkcep.runtime.measures import MeasureContext
from sparkcep.runtime.vm import Matcher


def candidate_finder(q: AnalyzedQuery, matcher: Matcher, part: PartitionData) -> Callable[[int], Any]:
    """start row -> what the selection needs there: the preferred match (SQL), the
    earliest-ending match (matchregex), or every match (ALL MATCHES)."""
    if q.mode == "matchregex":
        return lambda s: matcher.earliest(part, s)
    if q.skip_mode == "ALL_MATCHES":
        return lambda s: matcher.all(part, s)
    return lambda s: matcher.preferred(part, s)


@dataclass
class Selection:
    """Where the selection of one partition stands: the next start row to decide, the last
    row inside an emitted match and the matches emitted so far. A stream keeps it between
    micro-batches; a batch run starts from zero and goes to the end."""

    pos: int = 0
    covered: int = -1
    number: int = 0


def select_matches(q: AnalyzedQuery, n: int, candidate: Callable[[int], Any],
                   input_row: Callable[[int], int] = lambda r: r,
                   numbering: Callable[[int], None] | None = None,
                   state: Selection | None = None, stop: int | None = None,
                   start_rows: list[int] | None = None) -> Iterator[tuple]:
    """The matches of a partition of ``n`` rows in output order, as ("match", Match,
    match number) items, with ("unmatched", row) items where ALL ROWS PER MATCH WITH
    UNMATCHED ROWS wants them. ``candidate(start)`` answers what was found at a row
    (see candidate_finder); this chain of choices is the same for every strategy.
    ``numbering(k)`` is told, before each search, the number the next match gets.
    ``state`` resumes an earlier selection; when ``candidate`` answers UNRESOLVED (the
    answer needs rows not seen yet) the selection stops there and ``state`` says where.
    ``stop``: decide start rows below it only (a batch of the run strategy; ``candidate``
    may still be asked about later rows, as matchregex compares overlapping matches).
    ``start_rows``: the only rows, in order, where a match may start (the others are not
    asked about unless unmatched rows are wanted)."""
    st = state if state is not None else Selection()
    stop = n if stop is None else min(stop, n)
    tell = numbering if numbering is not None else (lambda k: None)
    want_unmatched = q.with_unmatched
    skip = SkipStrategy.of(q)

    if q.mode == "matchregex":
        yield from _earliest_matches(n, candidate, input_row, tell, st, stop, want_unmatched, skip)
        return

    jump = start_rows is not None and not want_unmatched
    while st.pos < stop:
        if jump:
            k = bisect_left(start_rows, st.pos)
            if k == len(start_rows) or start_rows[k] >= stop:
                st.pos = stop
                break
            st.pos = start_rows[k]
        pos = st.pos
        if q.skip_mode == "ALL_MATCHES":
            found = candidate(pos)
            if found is UNRESOLVED:
                return
            for m in found:
                st.number += 1
                st.covered = max(st.covered, m.last)
                yield ("match", m, st.number)
            if not found and want_unmatched and pos > st.covered:
                yield ("unmatched", pos)
            st.pos = pos + 1
            continue
        tell(st.number + 1)
        m = candidate(pos)
        if m is UNRESOLVED:
            return
        if m is None:
            st.pos = pos + 1
            if want_unmatched and pos > st.covered:
                yield ("unmatched", pos)
            continue
        st.number += 1
        if not m.empty:
            st.covered = max(st.covered, m.last)
        st.pos = skip.resume(m, input_row)
        yield ("match", m, st.number)


def _earliest_matches(n: int, candidate, input_row, tell, st: Selection, stop: int, want_unmatched: bool,
                      skip: SkipStrategy) -> Iterator[tuple]:
    """select_matches for MatchRegex: of the matches starting before the best end so far, the
    one that ends first, then on past it."""
    while st.pos < stop:
        best = None
        s = st.pos
        while s < n and (best is None or s <= best.last):
            tell(st.number + 1)
            m = candidate(s)
            if m is UNRESOLVED:
                return
            if m is not None and (best is None or m.last < best.last):
                best = m
            s += 1
        if best is None:
            if want_unmatched:
                for r in range(st.pos, n):
                    yield ("unmatched", r)
            st.pos = n
            return
        if want_unmatched:
            for r in range(st.pos, best.start):
                yield ("unmatched", r)
        st.number += 1
        st.pos = skip.resume(best, input_row)
        yield ("match", best, st.number)


def _start_rows(matcher, part: PartitionData) -> list[int] | None:
    # Reference matchers in the tests know nothing of masks: they are asked about every row.
    find = getattr(matcher, "start_rows", None)
    return find(part) if find is not None else None


def resume_row(q: AnalyzedQuery, m: Match, input_row: Callable[[int], int] = lambda r: r) -> int:
    """The row the selection goes on from after match ``m`` (AFTER MATCH SKIP)."""
    return SkipStrategy.of(q).resume(m, input_row)


def output_rows(plan: Plan, matcher: Matcher, part: PartitionData, row_ids: list[int] | None = None,
                kernel=None) -> Iterator[tuple[int, list[Any]]]:
    """(partition row, measure values) for every output row of a whole partition; the
    compiled ``kernel`` (runtime.fast.KernelMatcher) selects the matches when it can."""
    def input_row(pos: int) -> int:
        return row_ids[pos] if row_ids is not None else pos

    items = kernel.select(part, input_row) if kernel is not None else None
    if items is None:
        items = select_matches(plan.query, part.n, candidate_finder(plan.query, matcher, part), input_row,
                               lambda k: setattr(part, "match_number", k), start_rows=_start_rows(matcher, part))
    yield from measure_rows(plan, part, items, input_row)


def measure_rows(plan: Plan, part: PartitionData, items, input_row: Callable[[int], int] = lambda r: r
                 ) -> Iterator[tuple[int, list[Any]]]:
    """(row, measure values) for the output rows of selected matches and unmatched rows;
    positions are rows of ``part``."""
    try:
        yield from _measure_rows(plan, part, items)
    except EvaluationError as e:
        raise DataError(e.message, row=input_row(e.position) if e.position is not None else None) from None


def _measure_rows(plan: Plan, part: PartitionData, items):
    q = plan.query
    nulls = [None] * len(plan.measures)
    all_rows = q.rows_per_match == "ALL"
    for item in items:
        if item[0] == "unmatched":
            yield item[1], nulls
            continue
        _, m, number = item
        try:
            ctx = MeasureContext(plan, part, m, number)
            if not all_rows:
                yield m.start, ctx.evaluate()
                continue
            if m.empty:
                if q.empty_matches != "OMIT":
                    yield m.start, ctx.evaluate(-1)
                continue
            for i in range(len(m.labels)):
                if not m.excluded[i]:
                    yield m.row(i), ctx.evaluate(i)
        except EvaluationError as e:
            if e.position is not None:
                raise
            raise e.at(m.start, "in MEASURES of the match starting at this row") from None
