"""A task's evaluation: does binding ``row`` to a transition's variable, after a partial
match, satisfy the predicates that binding completes (and the NOT items it closes)?

This is all a worker runs; it reads the rows through the MATCH_RECOGNIZE compiled
conditions (``TaskQuery.conditions``) in a context that labels each bound row with its
variable.
"""

from __future__ import annotations

from sparkcep.compile.expressions import EvaluationError
from sparkcep.runtime.context import ConditionContext
from sparkcep.runtime.matches import PartitionData
from sparkcep.tasks.task_query import TaskQuery


def holds(tq: TaskQuery, part: PartitionData, i: int, labels: tuple[int, ...], rows: tuple[int, ...] | list[int]
          ) -> bool:
    ctx = ConditionContext(tq.plan, part, 0, tuple((lab, False) for lab in labels), list(rows))
    try:
        return tq.conditions[i](ctx) is True
    except EvaluationError as e:
        if e.position is None:
            e.position = rows[-1]
        raise


class Evaluator:
    def __init__(self, tq: TaskQuery, part: PartitionData):
        self.tq = tq
        self.part = part
        self.plan = tq.plan
        self.transitions = {(state, t.var): t for state, ts in tq.transitions.items() for t in ts}
        self.evaluations = 0

    def condition(self, i: int, labels: tuple[int, ...], rows: tuple[int, ...]) -> bool:
        """Predicate ``i`` with ``labels[j]`` bound to ``rows[j]``; an error names the row
        bound last (the event the task was about)."""
        self.evaluations += 1
        return holds(self.tq, self.part, i, labels, rows)

    def task(self, variables: tuple[int, ...], rows: tuple[int, ...], var: int, row: int) -> bool:
        t = self.transitions[(frozenset(variables), var)]
        labels = variables + (var,)
        bound = rows + (row,)
        for i in t.predicates:
            if not self.condition(i, labels, bound):
                return False
        for a in t.absences:
            lo = max(r for v, r in zip(variables, rows, strict=True) if v in a.before)
            # A constraint naming a variable this match leaves unbound (an OR branch) does not apply.
            bound_vars = set(labels)
            preds = [i for i in a.predicates if self.tq.predicates[i].variables <= bound_vars]
            for between in range(lo + 1, row):
                if all(self.condition(i, labels + (a.var,), bound + (between,)) for i in preds):
                    return False
        return True

    def tasks(self, chunk: list[tuple]) -> list[bool]:
        return [self.task(*t) for t in chunk]
