"""The merger (thesis Algorithm 5.1): final matches arrive in any order from the workers
and fire in the sequential order of Definition 4.4.12 (``fm_key``), each only once it is the
earliest that can still exist (isEarliestFinalMatch): every task whose event is at or before
its last event has finished. Firing consumes the events of the CONSUMING variables; a final
match holding an event consumed meanwhile is dropped, and PICK first/last keeps a match
only if none of the matches that differ from it in the picked variable alone fired, and none
of them still valid has an earlier (first) or later (last) event: one match per set of
alternatives. Those alternatives end at the same event, so all of them are known when the
merger reaches it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from sparkcep.tasks.partial import PartialMatch
from sparkcep.tasks.task_query import TaskQuery, fm_key


def pick_keys(tq: TaskQuery, m: PartialMatch) -> list[tuple]:
    """Per PICK first/last rule that applies to ``m``, the key of its alternatives: the
    matches that differ from it in the picked variable only."""
    out = []
    for i, rule in enumerate(tq.picks):
        if rule.kind != "EACH" and rule.var in m.state and rule.source in m.state:
            out.append((i, tuple((v, r) for v, r in zip(m.variables, m.rows, strict=True) if v != rule.var)))
    return out


def picked(tq: TaskQuery, m: PartialMatch, group: list[PartialMatch], is_valid: Callable[[int], bool],
           chosen: set[tuple]) -> bool:
    """Whether PICK first/last keeps ``m`` among the final matches ``group`` ending where it
    does: none of its alternatives fired (``chosen``), and none still valid has an earlier
    (first) or later (last) event for the picked variable."""
    if any(k in chosen for k in pick_keys(tq, m)):
        return False
    binding = dict(zip(m.variables, m.rows, strict=True))
    for rule in tq.picks:
        if rule.kind == "EACH" or rule.var not in binding or rule.source not in binding:
            continue
        mine = binding[rule.var]
        for other in group:
            if other is m or other.state != m.state:
                continue
            alt = dict(zip(other.variables, other.rows, strict=True))
            x = alt[rule.var]
            if x == mine or not is_valid(x):
                continue
            if any(alt[v] != r for v, r in binding.items() if v != rule.var):
                continue
            if (rule.kind == "FIRST" and x < mine) or (rule.kind == "LAST" and x > mine):
                return False
    return True


class Merger:
    def __init__(self, tq: TaskQuery, is_valid: Callable[[int], bool], consume: Callable[[int], None]):
        self.tq = tq
        self.is_valid = is_valid
        self.consume = consume
        self._heap: list = []
        self.fired: list[PartialMatch] = []
        self._chosen: set[tuple] = set()  # PICK alternatives of which one fired

    def receive(self, m: PartialMatch) -> None:
        heapq.heappush(self._heap, (fm_key(m.rows, m.variables), id(m), m))

    def __len__(self) -> int:
        return len(self._heap)

    def fire(self, limit: int) -> None:
        """Fire every final match that ends before ``limit`` (no task at or after an earlier
        event is outstanding)."""
        heap = self._heap
        while heap and heap[0][2].last < limit:
            last = heap[0][2].last
            group = []
            while heap and heap[0][2].last == last:
                group.append(heapq.heappop(heap)[2])
            for m in group:
                if not all(self.is_valid(r) for r in m.rows):
                    continue
                if self.tq.picks:
                    if not picked(self.tq, m, group, self.is_valid, self._chosen):
                        continue
                    self._chosen.update(pick_keys(self.tq, m))
                self.fired.append(m)
                for v, r in zip(m.variables, m.rows, strict=True):
                    if v in self.tq.consuming:
                        self.consume(r)
