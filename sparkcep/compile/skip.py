"""AFTER MATCH SKIP: where the selection goes on after a match, decided once.

``skip_to`` is the rule: every mode (PAST LAST ROW, TO NEXT ROW, TO FIRST/LAST v, ALL
MATCHES, MatchRegex's selection), the empty match and the two errors SQL:2016 gives SKIP TO
(no row labelled with the target, a resume at the match's own first row). The compiled
selections call it as a kernel; the Python selections call the same function's Python body
(``skip_to.py_func``) through ``SkipStrategy`` (as Flink's AfterMatchSkipStrategy), which
maps its answer to a row and its errors to a DataError."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sparkcep.analysis.bound import AnalyzedQuery
from sparkcep.errors import DataError
from sparkcep.jit import njit

# The codes of the modes.
PAST_LAST, NEXT_ROW, FIRST, LAST, ALL_MATCHES = range(5)
CODES = {"PAST_LAST": PAST_LAST, "NEXT_ROW": NEXT_ROW, "FIRST": FIRST, "LAST": LAST, "ALL_MATCHES": ALL_MATCHES}
# The error codes: 1 no target row, 2 a resume at the match's first row.
NO_TARGET, LOOPS = 1, 2
AFTER_FIRST = -1  # skip_to's place: the row after the match's first row


# inline: a call passing the arrays costs more than the rule (per match of millions)
@njit(inline='always')
def skip_to(code, members, labels, at, length):
    """Where the selection goes on after a match of ``length`` rows labelled
    labels[at:at + length] (``members[label]``: whether it is in SKIP TO's target; labels
    past its end are not): (place, error). The place is AFTER_FIRST for the row after the
    match's first row (TO NEXT ROW, ALL MATCHES — each start's matches, then the next start —
    and any empty match), ``length`` for the row after its last (PAST LAST ROW, MatchRegex),
    else the index of the target's first or last row; error NO_TARGET or LOOPS (place 0)."""
    if length == 0 or code == NEXT_ROW or code == ALL_MATCHES:
        return AFTER_FIRST, 0
    if code == PAST_LAST:
        return length, 0
    place = -1
    for i in range(length):
        lab = labels[at + i]
        if lab < members.shape[0] and members[lab]:
            place = i
            if code == FIRST:
                break
    if place < 0:
        return 0, NO_TARGET
    if place == 0:
        return 0, LOOPS
    return place, 0


@dataclass(frozen=True)
class SkipStrategy:
    mode: str  # PAST_LAST, NEXT_ROW, FIRST, LAST (SKIP TO [FIRST|LAST] v) or ALL_MATCHES
    target: frozenset[int] | None = None  # the labels of v (a variable or a subset)
    target_name: str | None = None

    @classmethod
    def of(cls, q: AnalyzedQuery) -> SkipStrategy:
        # matchregex resumes past the last row of the match it reports
        return cls("PAST_LAST") if q.mode == "matchregex" else cls(q.skip_mode, q.skip_target, q.skip_target_name)

    @property
    def code(self) -> int:
        return CODES[self.mode]

    def members(self, n_labels: int) -> np.ndarray:
        """Per label, whether it is in the target (the kernel's view of it)."""
        out = np.zeros(n_labels, dtype=np.bool_)
        for lab in self.target or ():
            out[lab] = True
        return out

    def error(self, kind: int, row: int) -> DataError:
        """The DataError of ``kind`` (NO_TARGET or LOOPS) for a match starting at input row ``row``."""
        where = f"AFTER MATCH SKIP TO {self.mode} {self.target_name}"
        if kind == NO_TARGET:
            return DataError(f"{where}: the match has no row labelled {self.target_name}, so there is no row "
                             "to resume at", row=row)
        return DataError(f"{where} would resume at the first row of the same match and loop forever", row=row)

    @functools.cached_property
    def _members(self) -> np.ndarray:
        return self.members(max(self.target) + 1 if self.target else 0)

    def step(self, labels: Sequence[int]) -> int:
        """How many rows on from a match's first row the selection goes on after a non-empty
        match of contiguous rows with these labels, or -NO_TARGET / -LOOPS for the rule's
        errors (the caller knows the row)."""
        place, err = skip_to.py_func(self.code, self._members, labels, 0, len(labels))
        return -err if err else 1 if place == AFTER_FIRST else place

    def resume(self, match, input_row: Callable[[int], int] = lambda r: r) -> int:
        """The partition row the selection goes on from after ``match`` (a runtime Match:
        start, end, labels, row(i); its rows may have gaps)."""
        place, err = skip_to.py_func(self.code, self._members, match.labels, 0, len(match.labels))
        if err:
            raise self.error(err, input_row(match.start))
        if place == AFTER_FIRST:
            return match.start + 1  # the row after the first, whether the match took it or not
        return match.end if place == len(match.labels) else match.row(place)
