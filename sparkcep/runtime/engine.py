"""The sequential engine for one partition: where matching starts, what a match is, where
it resumes (AFTER MATCH SKIP), and which rows come out (ONE ROW / ALL ROWS PER MATCH).

Output rows are (partition row, measure values) pairs; the caller turns partition rows into
input columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.plan import Plan
from sparkcep.errors import DataError
from sparkcep.runtime.measures import MeasureContext
from sparkcep.runtime.vm import Match, Matcher, PartitionData

# (start row) -> matches found there, most preferred first
Finder = Callable[[PartitionData, int], list[Match]]


def find_matches(plan: Plan, matcher: Matcher, part: PartitionData, row_ids: list[int] | None = None
                 ) -> Iterator[tuple[str, Any]]:
    """The matches of one partition in output order, as ("match", Match) items, with
    ("unmatched", row) items where ALL ROWS PER MATCH WITH UNMATCHED ROWS wants them."""
    q = plan.query
    n = part.n
    want_unmatched = q.rows_per_match == "ALL" and q.empty_matches == "UNMATCHED"
    covered = -1  # rows up to here are inside an earlier match

    def input_row(pos: int) -> int:
        return row_ids[pos] if row_ids is not None else pos

    if q.mode == "matchregex":
        pos = 0
        while pos < n:
            best = None
            s = pos
            while s < n and (best is None or s <= best.last):
                m = matcher.earliest(part, s)
                if m is not None and (best is None or m.last < best.last):
                    best = m
                s += 1
            if best is None:
                if want_unmatched:
                    for r in range(pos, n):
                        yield ("unmatched", r)
                return
            if want_unmatched:
                for r in range(pos, best.start):
                    yield ("unmatched", r)
            yield ("match", best)
            pos = best.end if not best.empty else best.start + 1
        return

    pos = 0
    while pos < n:
        if q.skip_mode == "ALL_MATCHES":
            found = matcher.all(part, pos)
            for m in found:
                yield ("match", m)
                covered = max(covered, m.last)
            if not found and want_unmatched and pos > covered:
                yield ("unmatched", pos)
            pos += 1
            continue
        m = matcher.preferred(part, pos)
        if m is None:
            if want_unmatched and pos > covered:
                yield ("unmatched", pos)
            pos += 1
            continue
        yield ("match", m)
        if m.empty:
            pos += 1
            continue
        covered = max(covered, m.last)
        pos = _resume(q.skip_mode, q.skip_target, q.skip_target_name, m, input_row)


def _resume(mode: str, target: frozenset[int] | None, target_name: str | None, m: Match,
            input_row: Callable[[int], int]) -> int:
    if mode == "PAST_LAST":
        return m.end
    if mode == "NEXT_ROW":
        return m.start + 1
    rows = [i for i, lab in enumerate(m.labels) if lab in target]
    if not rows:
        raise DataError(
            f"AFTER MATCH SKIP TO {mode} {target_name}: the match has no row labelled "
            f"{target_name}, so there is no row to resume at",
            row=input_row(m.start),
        )
    at = m.start + (rows[0] if mode == "FIRST" else rows[-1])
    if at == m.start:
        raise DataError(
            f"AFTER MATCH SKIP TO {mode} {target_name} would resume at the first row of the "
            "same match and loop forever",
            row=input_row(m.start),
        )
    return at


def output_rows(plan: Plan, matcher: Matcher, part: PartitionData, row_ids: list[int] | None = None
                ) -> Iterator[tuple[int, list[Any]]]:
    """(partition row, measure values) for every output row of the partition."""
    try:
        yield from _output_rows(plan, matcher, part, row_ids)
    except EvaluationError as e:
        pos = e.position
        raise DataError(e.message, row=row_ids[pos] if (row_ids is not None and pos is not None) else pos) from None


def _output_rows(plan: Plan, matcher: Matcher, part: PartitionData, row_ids: list[int] | None):
    q = plan.query
    nulls = [None] * len(plan.measures)
    all_rows = q.rows_per_match == "ALL"
    number = 0
    for kind, item in find_matches(plan, matcher, part, row_ids):
        if kind == "unmatched":
            yield item, nulls
            continue
        m: Match = item
        number += 1
        try:
            ctx = MeasureContext(plan, part, m, number)
            if not all_rows:
                yield m.start, ctx.evaluate()
                continue
            if m.empty:
                if q.empty_matches != "OMIT":
                    yield m.start, ctx.evaluate(-1)
                continue
            for i in range(m.end - m.start):
                if not m.excluded[i]:
                    yield m.start + i, ctx.evaluate(i)
        except EvaluationError as e:
            if e.position is not None:
                raise
            raise e.at(m.start, "in MEASURES of the match starting at this row") from None
