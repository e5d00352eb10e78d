"""MATCH_RECOGNIZE queries the task engine can run: ``ALL MATCHES`` with ``EVENT SELECTION
SKIP TILL ANY MATCH`` over a sequence of distinct variables, each DEFINE reading its own row
and the rows of variables before it (no navigation offsets, aggregates, CLASSIFIER or
MATCH_NUMBER), no MAXLENGTH. Every combination of rows is then a match — what the task
engine finds with no PICK and no consumption — so such a query with an expensive function
runs its DEFINE conditions as parallel tasks. The rows come out in MATCH_RECOGNIZE's order:
by first row, then (SKIP TILL ANY MATCH prefers the earliest next row) by the rows in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from sparkcep.analysis.bound import (
    BAgg,
    BCall,
    BClassifier,
    BMatchNumber,
    BNav,
    BRowLabel,
    BWindow,
    nodes,
)
from sparkcep.compile.pattern import Concat, Label
from sparkcep.compile.plan import Plan
from sparkcep.tasks.engine import TaskOptions, TaskStats, matches_table, run_fired
from sparkcep.tasks.task_query import OpNode, Predicate, TaskQuery, VarNode, Window


def _reads(plan: Plan, var: int, order: list[int]) -> frozenset[int] | None:
    """The variables var's DEFINE reads (itself included), or None if it reads anything the
    task engine cannot give it."""
    e = plan.query.defines.get(var)
    if e is None:
        return frozenset({var})
    read = {var}
    before = set(order[:order.index(var) + 1])
    for x in nodes(e):
        if isinstance(x, (BAgg, BClassifier, BMatchNumber, BRowLabel, BWindow)):
            return None
        if isinstance(x, BNav):
            p = x.pointer
            if p.physical or p.offset or not p.last or not p.running:
                return None
            if p.labels is None:
                continue  # the current row: var's own
            if len(p.labels) != 1 or not p.labels <= before:
                return None
            read |= p.labels
    return frozenset(read)


def calls_expensive(plan: Plan) -> bool:
    return bool(expensive_names(plan))


def expensive_functions(plan: Plan) -> dict[str, Callable[..., Any]]:
    """The expensive functions DEFINE calls (in its aggregates' arguments too), by name:
    what a call-only worker runs (it needs no registry, so neither does a Spark task that
    starts such workers). The plan knows: a cached plan is compiled again when the registry
    changes."""
    def find() -> dict[str, Callable[..., Any]]:
        q = plan.query
        roots = [*q.defines.values(), *(x for a in q.define_aggregates for x in (a.arg, a.key) if x is not None)]
        return {x.name: x.impl for e in roots for x in nodes(e) if isinstance(x, BCall) and x.expensive}
    return plan.derive("expensive_impls", find)


def expensive_names(plan: Plan) -> list[str]:
    """The expensive functions DEFINE calls, sorted."""
    return sorted(expensive_functions(plan))


def task_query_of(plan: Plan) -> TaskQuery | None:
    """The task engine's view of an automaton plan, or None when it cannot run it."""
    q = plan.query
    if (getattr(plan, "root", False) is not False or q.mode != "sql" or q.event_selection != "ANY"
            or q.skip_mode != "ALL_MATCHES" or q.maxlength is not None or q.has_exclusions or q.negated
            or plan.define_aggregates):
        return None
    node = plan.pattern
    items = node.items if isinstance(node, Concat) else (node,)
    if not all(isinstance(i, Label) for i in items):
        return None
    order = [i.id for i in items]
    if len(set(order)) != len(order) or len(order) != len(plan.labels):
        return None
    predicates = []
    for v in order:
        read = _reads(plan, v, order)
        if read is None:
            return None
        if v in q.defines:
            cheap = read == {v} and not any(isinstance(x, BCall) and x.expensive
                                            for x in nodes(q.defines[v]))
            predicates.append(Predicate(v, read, None, None, cheap))
    pattern = OpNode("SEQ", tuple(VarNode(v) for v in order), 0, ()) if len(order) > 1 else VarNode(order[0])
    within = Window(q.within, False) if q.within is not None else None
    return TaskQuery(None, plan, pattern, tuple(plan.labels), (), tuple(predicates), (), (), within,
                     frozenset(), None)


def run_sql_on_tasks(tq: TaskQuery, table: pa.Table, opts: TaskOptions, stats: TaskStats | None = None) -> pa.Table:
    """The plan's output, its matches found by the task engine, in MATCH_RECOGNIZE's order."""
    part, order_np, fired = run_fired(tq, table, opts, stats, sequential_errors=True)
    return matches_table(tq, table, part, order_np, [sorted(f, key=lambda m: m[1]) for f in fired])
