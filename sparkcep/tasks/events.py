"""The raw event list (thesis §5.3.1): the events of one partition in stream order, which
of them are consumed, and the synchronization point that no task may pass."""

from __future__ import annotations


class RawEventList:
    def __init__(self, start: int, end: int):
        self.start = start  # stream positions [start, end) of the partition
        self.end = end
        self.sync = start  # events before this are released for tasks
        self.consumed: set[int] = set()

    def set_synchronization_point(self, position: int) -> None:
        self.sync = min(position, self.end)

    def is_valid(self, row: int) -> bool:
        return row not in self.consumed

    def consume(self, row: int) -> None:
        self.consumed.add(row)

    def after(self, row: int):
        """The valid events after ``row`` up to the synchronization point."""
        for r in range(max(row + 1, self.start), self.sync):
            if r not in self.consumed:
                yield r
