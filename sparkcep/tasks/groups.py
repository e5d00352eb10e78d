"""Key groups as tasks: any MATCH_RECOGNIZE query with PARTITION BY on worker processes.

Queries outside the state model (contiguous rows, quantifiers, aggregates, SQL's preference
and skip rules) keep their partial matches within one partition, so a task here is a run of
whole partitions (a key group): a worker is the coordinator of its groups and evaluates
their conditions, expensive calls included, itself — MatchRegex's partition isolation, and
what Spark's partition strategy does on a cluster. The workers are the task engine's
(tasks/workers.py), sent the sorted table with the query (or forked with it); one that dies
is replaced and its group sent again. Each group's rows come back as Arrow arrays and are put
in partition order, so the result, and the first error, are the sequential engine's.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.errors import ExecutionError
from sparkcep.tasks.workers import WorkerPool

# Groups per worker: small enough to balance uneven keys, large enough that a group's
# message costs little beside its matching.
GROUPS_PER_WORKER = 8


class _Groups:
    """What a worker runs: each partition of a group (a run of partition indices, sent as
    its ends), answered with ("ok", rows) or the first error (later partitions of the
    group are not needed then)."""

    def __init__(self, fn: Callable[[tuple[int, int]], Any], bounds: list[tuple[int, int]]):
        self.fn = fn
        self.bounds = bounds

    def tasks(self, group: tuple[int, int]) -> list[tuple]:
        from sparkcep.tasks.calls import Memo

        out = []
        with Memo():  # each distinct expensive call once, as on the sequential engine
            for i in range(*group):
                try:
                    out.append(("ok", self.fn(self.bounds[i])))
                except Exception as e:  # raised by the coordinator in partition order, as it came
                    out.append(("error", _portable(e)))
                    break
        return out


def _portable(e: Exception) -> Exception:
    """``e`` if it survives the trip to the coordinator, else an ExecutionError with its text."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return ExecutionError(f"{type(e).__name__}: {e}")


def groups_of(bounds: list[tuple[int, int]], count: int) -> list[list[int]]:
    """Runs of consecutive partitions with about the same number of rows, ``count`` of them
    at most (a partition is never split)."""
    total = sum(e - s for s, e in bounds)
    target = max(1, -(-total // max(1, count)))
    groups: list[list[int]] = []
    size = 0
    for i, (s, e) in enumerate(bounds):
        if not groups or size >= target:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += e - s
    return groups


@dataclass
class KeyGroups:
    """A map over partition bounds for ``runtime.local.run_automaton``: ``workers`` processes,
    results in partition order. ``groups`` and ``restarts`` say what the last map did."""

    workers: int
    start: str = "spawn"
    groups: int = 0
    restarts: int = 0

    def map(self, fn: Callable[[tuple[int, int]], Any], bounds, _partition_data=None) -> list[Any]:
        bounds = list(bounds)
        groups = groups_of(bounds, GROUPS_PER_WORKER * self.workers)
        self.groups = len(groups)
        if not groups:
            return []
        answers: dict[int, tuple] = {}
        pool = WorkerPool(_Groups(fn, bounds), min(self.workers, len(groups)), start=self.start)
        try:
            waiting = list(reversed(groups))
            while waiting or pool.busy:
                for w in pool.idle():
                    if waiting:
                        group = waiting.pop()
                        pool.submit(w, group, (group[0], group[-1] + 1))  # a run: its ends suffice
                for group, got in pool.results():
                    answers.update(zip(group, got, strict=False))
        finally:
            self.restarts = pool.restarts
            pool.close()
        out = []
        for i in range(len(bounds)):
            status, value = answers[i]  # a partition after an error in its group is never read
            if status == "error":
                raise value
            out.append(value)
        return out
