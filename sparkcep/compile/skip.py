"""AFTER MATCH SKIP as one strategy object (as Flink's AfterMatchSkipStrategy): where the
selection resumes after a non-empty match, the two errors SQL:2016 gives SKIP TO (no row
labelled with the target, a resume at the match's own first row), the compiled kernel's code
and target labels, and the resume offset of a fixed-length pattern. Every matcher and the
kernel take their skip behaviour from here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sparkcep.analysis.bound import AnalyzedQuery
from sparkcep.errors import DataError

# The kernel's codes for the modes (runtime.kernel.select).
CODES = {"PAST_LAST": 0, "NEXT_ROW": 1, "FIRST": 2, "LAST": 3, "ALL_MATCHES": 4}
# The kernel's error codes: 1 no target row, 2 a resume at the match's first row.
NO_TARGET, LOOPS = 1, 2


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

    def offset(self, labels: Sequence[int]) -> int:
        """Where the selection resumes after a non-empty match of contiguous rows with these
        labels, counted from its first row, or -NO_TARGET / -LOOPS for the strategy's errors
        (the caller knows the row: see resume)."""
        if self.mode == "PAST_LAST":
            return len(labels)
        if self.mode in ("NEXT_ROW", "ALL_MATCHES"):
            return 1
        rows = [i for i, lab in enumerate(labels) if lab in self.target]
        if not rows:
            return -NO_TARGET
        at = rows[0] if self.mode == "FIRST" else rows[-1]
        return at if at > 0 else -LOOPS

    def resume(self, match, input_row: Callable[[int], int] = lambda r: r) -> int:
        """The partition row the selection goes on from after a non-empty ``match`` (a
        runtime Match: start, end, labels, row(i))."""
        if self.mode == "PAST_LAST":
            return match.end
        if self.mode in ("NEXT_ROW", "ALL_MATCHES"):
            return match.start + 1  # the row after the first, whether the match took it or not
        off = self.offset(match.labels)
        if off < 0:
            raise self.error(-off, input_row(match.start))
        return match.row(off)
