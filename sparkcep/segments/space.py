"""Search spaces and segment sets: what segment operators take and give.

A ``Space`` bounds the segments an operator may return: start in [s_lo, s_hi], end in
[e_lo, e_hi], and optionally only the start rows in ``starts``, the end rows in ``ends`` or
exactly the segments in ``pairs``. Probe operators hand a child the set of join points (or the
exact segments) it must check, so a probe is one vectorized call, not one call per segment.
A ``Window`` is a length condition embedded in an operator: rows, or spans of columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from sparkcep.errors import DataError

# The most candidate segments one operator may enumerate at once (memory: 16 bytes each).
MAX_CANDIDATES = 40_000_000


@dataclass(frozen=True)
class Window:
    """Lengths a segment may have: ``min_rows``..``max_rows`` rows (None: no bound) and, per
    span, ``col[end] - col[start]`` in [lo, hi] (in ``unit`` seconds or column units)."""

    min_rows: int = 1
    max_rows: int | None = None
    spans: tuple[tuple[int, float | None, float | None, float], ...] = ()
    # Upper bounds on spans a parent pushed down: not conditions of this segment, but where
    # the column never decreases they bound its rows (row_bound), which prunes enumeration.
    hints: tuple[tuple[int, float, float], ...] = ()

    def __and__(self, other: Window) -> Window:
        hi = [x for x in (self.max_rows, other.max_rows) if x is not None]
        return Window(max(self.min_rows, other.min_rows), min(hi) if hi else None,
                      tuple(dict.fromkeys(self.spans + other.spans)), tuple(dict.fromkeys(self.hints + other.hints)))

    def upper(self) -> Window:
        """What a part of such a segment satisfies: at most as many rows, and (as hints) at
        most the same spans (push-down)."""
        hints = self.hints + tuple((col, hi, unit) for col, _lo, hi, unit in self.spans if hi is not None)
        return Window(1, self.max_rows, (), tuple(dict.fromkeys(hints)))

    @property
    def unbounded(self) -> bool:
        return self.min_rows <= 1 and self.max_rows is None and not self.spans


ANY = Window()


@dataclass(frozen=True)
class Space:
    s_lo: int
    s_hi: int
    e_lo: int
    e_hi: int
    starts: np.ndarray | None = field(default=None, compare=False)
    ends: np.ndarray | None = field(default=None, compare=False)
    pairs: tuple[np.ndarray, np.ndarray] | None = field(default=None, compare=False)

    @staticmethod
    def whole(n: int) -> Space:
        return Space(0, n - 1, 0, n - 1)

    @property
    def empty(self) -> bool:
        if self.s_lo > self.s_hi or self.e_lo > self.e_hi or self.s_lo > self.e_hi:
            return True
        if self.starts is not None and len(self.starts) == 0:
            return True
        if self.ends is not None and len(self.ends) == 0:
            return True
        return self.pairs is not None and len(self.pairs[0]) == 0

    def with_starts(self, starts: np.ndarray) -> Space:
        starts = np.unique(starts)
        if self.starts is not None:
            starts = np.intersect1d(starts, self.starts, assume_unique=True)
        lo, hi = (int(starts[0]), int(starts[-1])) if len(starts) else (1, 0)
        return replace(self, s_lo=max(self.s_lo, lo), s_hi=min(self.s_hi, hi), starts=starts, pairs=None)

    def with_ends(self, ends: np.ndarray) -> Space:
        ends = np.unique(ends)
        if self.ends is not None:
            ends = np.intersect1d(ends, self.ends, assume_unique=True)
        lo, hi = (int(ends[0]), int(ends[-1])) if len(ends) else (1, 0)
        return replace(self, e_lo=max(self.e_lo, lo), e_hi=min(self.e_hi, hi), ends=ends, pairs=None)

    def exactly(self, starts: np.ndarray, ends: np.ndarray) -> Space:
        keep = self.admits(starts, ends)
        starts, ends = starts[keep], ends[keep]
        if len(starts) == 0:
            return Space(1, 0, 1, 0)
        return Space(int(starts.min()), int(starts.max()), int(ends.min()), int(ends.max()),
                     pairs=(starts, ends))

    def admits(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        ok = (starts >= self.s_lo) & (starts <= self.s_hi) & (ends >= self.e_lo) & (ends <= self.e_hi) & (starts <= ends)
        if self.starts is not None:
            ok &= np.isin(starts, self.starts)
        if self.ends is not None:
            ok &= np.isin(ends, self.ends)
        if self.pairs is not None:
            ok &= np.isin(encode(starts, ends), encode(*self.pairs))
        return ok


def encode(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """One int64 per segment, ordered by (start, end)."""
    return starts.astype(np.int64) * (1 << 31) + ends.astype(np.int64)


@dataclass
class Segs:
    """Segments [starts[k], ends[k]]; ``payload`` keeps, per variable that a condition
    higher up reads, the segment that variable took in each one."""

    starts: np.ndarray
    ends: np.ndarray
    payload: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @staticmethod
    def none() -> Segs:
        z = np.zeros(0, dtype=np.int64)
        return Segs(z, z.copy())

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, idx: np.ndarray) -> Segs:
        return Segs(self.starts[idx], self.ends[idx], {v: (s[idx], e[idx]) for v, (s, e) in self.payload.items()})

    def where(self, mask: np.ndarray) -> Segs:
        return self.take(np.flatnonzero(mask))

    def distinct(self) -> Segs:
        """Each (segment, payload) once, ordered by start then end."""
        keys = [encode(self.starts, self.ends)] + [encode(s, e) for _, (s, e) in sorted(self.payload.items())]
        if len(self) == 0:
            return self
        if len(keys) == 1:  # no payload: a 1-D unique is many times faster than axis=0
            return self.take(np.unique(keys[0], return_index=True)[1])
        stacked = np.stack(keys, axis=1)
        _, idx = np.unique(stacked, axis=0, return_index=True)
        return self.take(np.sort(idx) if len(keys) > 1 else idx)

    def sorted(self) -> Segs:
        return self.take(np.lexsort((self.ends, self.starts)))


def concat_segs(parts: list[Segs]) -> Segs:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Segs.none()
    keys = set(parts[0].payload)
    return Segs(np.concatenate([p.starts for p in parts]), np.concatenate([p.ends for p in parts]),
                {v: (np.concatenate([p.payload[v][0] for p in parts]), np.concatenate([p.payload[v][1] for p in parts]))
                 for v in keys})


def enumerate_space(space: Space, window: Window, n: int, row_bound: int | None = None) -> Segs:
    """Every segment of ``space`` whose row count fits ``window`` (spans are checked by the
    caller, which has the columns); ``row_bound`` is a further upper bound on rows."""
    if space.empty or n == 0:
        return Segs.none()
    lo_rows = max(window.min_rows, 1)
    hi_rows = window.max_rows
    if row_bound is not None:
        hi_rows = row_bound if hi_rows is None else min(hi_rows, row_bound)
    if space.pairs is not None:
        s, e = space.pairs
        length = e - s + 1
        ok = (length >= lo_rows) & ((length <= hi_rows) if hi_rows is not None else True)
        return Segs(s[ok].astype(np.int64), e[ok].astype(np.int64))
    starts = (space.starts if space.starts is not None
              else np.arange(max(space.s_lo, 0), min(space.s_hi, n - 1) + 1, dtype=np.int64))
    starts = starts[(starts >= space.s_lo) & (starts <= min(space.s_hi, n - 1))]
    first_end = np.maximum(starts + lo_rows - 1, space.e_lo)
    last_end = np.full(len(starts), min(space.e_hi, n - 1), dtype=np.int64)
    if hi_rows is not None:
        last_end = np.minimum(last_end, starts + hi_rows - 1)
    if space.ends is not None:
        return _with_end_set(starts, first_end, last_end, np.asarray(space.ends, dtype=np.int64))
    counts = np.maximum(last_end - first_end + 1, 0)
    total = int(counts.sum())
    if total > MAX_CANDIDATES:
        raise DataError(f"the pattern would enumerate {total:,} candidate segments in one partition; "
                        "bound its variables with window(...) (at most "
                        f"{MAX_CANDIDATES:,} at once)")
    seg_starts = np.repeat(starts, counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    seg_ends = np.repeat(first_end, counts) + offsets
    return Segs(seg_starts, seg_ends)


def _with_end_set(starts, first_end, last_end, ends: np.ndarray) -> Segs:
    ends = np.unique(ends)
    lo = np.searchsorted(ends, first_end, side="left")
    hi = np.searchsorted(ends, last_end, side="right")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total > MAX_CANDIDATES:
        raise DataError(f"the pattern would enumerate {total:,} candidate segments in one partition; "
                        "bound its variables with window(...)")
    seg_starts = np.repeat(starts, counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    seg_ends = ends[np.repeat(lo, counts) + offsets]
    return Segs(seg_starts, seg_ends)
