"""Task queues (thesis §5.4.1): FIFO, or by priority — a task carrying a longer partial
match first, then the one whose partial match and event are earlier (Def. 4.4.11/4.4.21),
so final matches, which the merger waits for in stream order, come sooner."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from itertools import count

from sparkcep.tasks.partial import PartialMatch
from sparkcep.tasks.task_query import Transition


@dataclass(slots=True)
class Task:
    """⟨transition, partial match, event⟩."""

    transition: Transition
    pm: PartialMatch
    row: int

    def wire(self) -> tuple:
        """What a worker needs: plain numbers only."""
        return (self.pm.variables, self.pm.rows, self.transition.var, self.row)


class FifoQueue:
    name = "fifo"

    def __init__(self):
        self._q: deque[Task] = deque()

    def put(self, task: Task) -> None:
        self._q.append(task)

    def take(self) -> Task:
        return self._q.popleft()

    def __len__(self) -> int:
        return len(self._q)


class PriorityQueue:
    name = "priority"

    def __init__(self):
        self._h: list = []
        self._n = count()

    def put(self, task: Task) -> None:
        pm = task.pm
        key = (-len(pm.rows), pm.last, pm.rows[0] if pm.rows else -1, task.row, next(self._n))
        heapq.heappush(self._h, (key, task))

    def take(self) -> Task:
        return heapq.heappop(self._h)[1]

    def __len__(self) -> int:
        return len(self._h)


QUEUES = {"fifo": FifoQueue, "priority": PriorityQueue}
