"""The runtime's vocabulary, shared by every matcher and what drives them: a Match, the
rows of one partition (PartitionData), a search's UNRESOLVED answer, the bounds on what one
search may hold, and selected matches as arrays (Spans)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.pattern import LabelLayout
from sparkcep.errors import InternalError


@dataclass(frozen=True)
class Match:
    """A match: rows ``start`` .. ``end - 1`` of the partition and the label of each; with
    SKIP TILL NEXT/ANY MATCH, ``rows`` lists the rows it selected (the others are skipped)."""

    start: int
    end: int
    labels: tuple[int, ...]
    excluded: tuple[bool, ...]
    rows: tuple[int, ...] | None = None

    @property
    def empty(self) -> bool:
        return self.end == self.start

    @property
    def last(self) -> int:
        """The last row (start - 1 for an empty match)."""
        return self.end - 1

    def row(self, i: int) -> int:
        """The partition row of the match's ``i``-th row."""
        return self.start + i if self.rows is None else self.rows[i]


def matches_from_arrays(starts, ends, offs, labels, excl, rows=None) -> list[Match]:
    """Match objects for matches given as numpy arrays (compiled matchers): labels, exclusion
    flags and (gapped) rows of match i at offs[i]:offs[i + 1]. Converted in bulk: slices of
    one tuple per array, and one shared all-False tuple per length where nothing is excluded."""
    offs = offs.tolist()
    end = offs[-1] if offs else 0
    labels = tuple(labels[:end].tolist())
    flags = excl[:end]
    falses: dict[int, tuple] | None = None
    if flags.any():
        flags = tuple(flags.astype(bool).tolist())
    else:
        falses = {}
    rows = tuple(rows[:end].tolist()) if rows is not None else None
    out = []
    for i, (st, en) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        a, b = offs[i], offs[i + 1]
        if falses is None:
            ex = flags[a:b]
        else:
            ex = falses.get(b - a)
            if ex is None:
                ex = falses[b - a] = (False,) * (b - a)
        out.append(Match(st, en, labels[a:b], ex, rows[a:b] if rows is not None else None))
    return out


@dataclass
class PartitionData:
    """Rows of one partition in match order, column by column (Python values).

    It may be a window of a longer partition (the run strategy cuts partitions into
    batches): ``base`` is the partition row of row 0, ``complete`` says whether the last row
    here is the partition's last row, and matches may only use rows below ``limit``; the
    rows from ``limit`` to ``n`` are there for NEXT() alone.
    """

    cols: Any  # per column a list of values (or data.LazyColumns, which converts on demand)
    n: int
    order_index: int | None = None  # the first ORDER BY column, for WITHIN
    base: int = 0
    complete: bool = True
    limit: int = -1
    # In a window of a stream: every row still to come has a first ORDER BY value at least
    # this (the watermark), so WITHIN can end a search before those rows arrive.
    horizon: Any = None
    # The number the next match of this partition gets (MATCH_NUMBER() in DEFINE); the
    # selection loop sets it before each search.
    match_number: int = 1
    # Per-partition results a matcher derives once (vectorized condition masks).
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.limit < 0:
            self.limit = self.n

    def py(self) -> list:
        """The columns as Python lists (what the row evaluator indexes)."""
        got = self.cache.get("py")
        if got is None:
            cols = self.cols
            got = cols.materialized() if hasattr(cols, "materialized") else list(cols)
            self.cache["py"] = got
        return got

    @property
    def order0(self) -> list[Any] | None:
        return None if self.order_index is None else self.cols[self.order_index]


class _Unresolved:
    """The answer depends on rows past the end of the window."""

    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()


# The most partial matches one search holds at once: SKIP TILL ANY MATCH's runs (runtime.nfab),
# ALL MATCHES' threads and finished matches (here and in the kernel). Both multiply row by
# row; past the bound the search stops with a DataError instead of exhausting memory.
MAX_RUNS = 250_000
# ALL MATCHES also keeps each partial match's labels, as a tree of history nodes shared by
# equal label paths. Where what is held grows by a thread a row (A B* C* D), the tree grows
# with the square of the rows read while MAX_RUNS is far off: it is bounded too (the kernel
# keeps about 50 bytes a node, this matcher a few hundred).
MAX_NODES = 2_000_000


def too_many_runs(limit: int, advice: str, pos: int) -> EvaluationError:
    """The error of a search that held more than ``limit`` partial matches after reading
    partition row ``pos``."""
    return EvaluationError(f"more than {limit} {advice}").at(pos, "(reading this row)")


NODES_ADVICE = ("label assignments from one start row are kept (ALL MATCHES keeps every partial match's labels, "
                "and a pattern whose partial matches grow with every row, such as A B* C* D, adds more each row); "
                "add WITHIN or MAXLENGTH, or make the conditions more selective")
ALL_MATCHES_ADVICE = ("matches and partial matches from one start row are held at once (ALL MATCHES keeps every "
                      "label assignment, and a quantified group holding another quantifier or an alternation "
                      "multiplies them with every row); add WITHIN or MAXLENGTH, or make the conditions more "
                      "selective")


@dataclass
class Spans:
    """Selected matches as arrays: rows [starts[i], ends[i]) of the partition data, numbered
    ``numbers``; ``labels``, where measures need them, each matched row's variable, match
    after match (row starts[i] + j is labels[offsets[i] + j]); ``excluded``, where ALL ROWS
    PER MATCH leaves rows out ({- -}), each matched row's flag, laid out as the labels;
    ``unmatched``, where WITH UNMATCHED ROWS asks for them, the rows in no match, in order."""

    starts: np.ndarray
    ends: np.ndarray
    numbers: np.ndarray
    labels: np.ndarray | None = None
    excluded: np.ndarray | None = None
    unmatched: np.ndarray | None = None
    # What measures derive from the spans once (offsets, rows, the rows of a set of variables).
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def offsets(self) -> np.ndarray:
        got = self.cache.get("offsets")
        if got is None:
            got = self.cache["offsets"] = np.concatenate(([0], np.cumsum(self.ends - self.starts)))
        return got

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(match, partition row) of every matched row, match after match."""
        got = self.cache.get("rows")
        if got is None:
            lengths = self.ends - self.starts
            match = np.repeat(np.arange(len(self.starts), dtype=np.int64), lengths)
            row = np.arange(int(lengths.sum()), dtype=np.int64) - self.offsets[:-1][match] + self.starts[match]
            got = self.cache["rows"] = (match, row)
        return got

    @staticmethod
    def of_kernel(starts: np.ndarray, ends: np.ndarray, numbers: np.ndarray, offs: np.ndarray | None,
                  labels: np.ndarray | None, excluded: np.ndarray | None = None) -> Spans:
        """Spans of contiguous matches as the kernel gives them: label offsets and labels
        (its buffers run past the last one), or None for no labels; exclusion flags laid
        out as the labels where they are wanted."""
        if offs is None:
            return Spans(starts, ends, numbers)
        if not np.array_equal(np.diff(offs[:len(starts) + 1]), ends - starts):
            raise InternalError("the kernel's labels do not cover its matches' rows")
        used = offs[len(starts)]
        return Spans(starts, ends, numbers, labels[:used], None if excluded is None else excluded[:used] != 0)

    @staticmethod
    def unmatched_rows(starts: np.ndarray, ends: np.ndarray, n: int) -> np.ndarray:
        """The rows of [0, n) in no match: none covers them and none (empty) starts there."""
        cover = np.zeros(n + 1, dtype=np.int64)
        np.add.at(cover, starts, 1)
        np.add.at(cover, ends, -1)
        unmatched = np.cumsum(cover[:n]) == 0
        unmatched[starts[starts < n]] = False
        return np.flatnonzero(unmatched)

    def shifted(self, by: int) -> Spans:
        """These spans with every row ``by`` further on (a partition's, in a larger table)."""
        return Spans(self.starts + by, self.ends + by, self.numbers, self.labels, self.excluded,
                     None if self.unmatched is None else self.unmatched + by)

    @staticmethod
    def layout_labels(starts: np.ndarray, ends: np.ndarray, layout: LabelLayout) -> tuple[np.ndarray, np.ndarray]:
        """Label offsets and labels (as the kernel gives them) of matches whose labels follow
        from their lengths (compile.pattern.label_layout): each row's from its place."""
        spans = Spans(starts, ends, np.zeros(0, dtype=np.int64))
        match, _ = spans.rows()
        lengths = (ends - starts)[match]
        place = np.arange(len(match), dtype=np.int64) - spans.offsets[:-1][match]
        labels = np.full(len(match), -1 if layout.middle is None else layout.middle, dtype=np.int64)
        h, t = len(layout.head), len(layout.tail)
        if h:
            first = place < h
            labels[first] = np.array(layout.head, dtype=np.int64)[place[first]]
        if t:
            back = place - (lengths - t)
            last = back >= 0
            labels[last] = np.array(layout.tail, dtype=np.int64)[back[last]]
        return spans.offsets, labels

    @staticmethod
    def join(pieces: list[Spans]) -> Spans:
        """Spans of several partitions' matches, one after another (rows already shifted)."""
        def joined(field: str):
            arrays = [getattr(p, field) for p in pieces]
            return None if any(a is None for a in arrays) else np.concatenate(arrays)

        return Spans(joined("starts"), joined("ends"), joined("numbers"), joined("labels"), joined("excluded"),
                     joined("unmatched"))
