"""Extended SNOOP queries over a table: the strategies that run them."""

from __future__ import annotations

import pyarrow as pa

from sparkcep.errors import DataError, OptionError, SparkCepError
from sparkcep.tasks.engine import (
    TaskOptions,
    TaskStats,
    at_input_row,
    matches_table,
    run_tasks,
    sorted_data,
)
from sparkcep.tasks.reference import SnoopReference
from sparkcep.tasks.task_query import TaskQuery, compile_snoop, expr_calls_expensive

STRATEGIES = ("auto", "tasks", "sequential", "reference")


def calls_expensive(tq: TaskQuery) -> bool:
    """Whether a predicate calls a function registered with cost="expensive"."""
    return any(expr_calls_expensive(e) for e in tq.snoop.predicates)


def snoop_table(table: pa.Table, query: str, *, order_by: str | None = None,
                partition_by: str | tuple[str, ...] | list[str] = (), type_column: str | None = None,
                strategy: str = "auto", workers: int | None = None, pm: str = "tree+hash",
                queue: str = "priority", block: int = 1024, window: int | None = None,
                chunk: int | None = None, start: str = "spawn", stats: TaskStats | None = None, progress=None) -> pa.Table:
    """``progress(events_done)``, if given, is called as blocks of events finish."""
    if strategy not in STRATEGIES:
        raise OptionError(f"strategy must be one of {', '.join(STRATEGIES)} for a SNOOP query, not {strategy!r}")
    if isinstance(partition_by, str):
        partition_by = (partition_by,)
    for name, value in (("order_by", order_by), ("type_column", type_column)):
        if value is not None and not isinstance(value, str):
            raise SparkCepError(f"{name} must be a column name, not {value!r}")
    tq = compile_snoop(query, table, order_by=order_by, partition_by=tuple(partition_by), type_column=type_column)
    if workers is None:
        workers = -1 if strategy == "tasks" or (strategy == "auto" and calls_expensive(tq)) else 0
    if strategy == "sequential":
        workers = 0
    opts = TaskOptions(workers, pm, queue, block, window, chunk, start).check()
    if strategy == "reference":
        part, bounds, order_np = sorted_data(tq, table)
        ref = SnoopReference(tq, part, window)
        try:
            fired = [ref.run(s, e) for s, e in bounds]
        except DataError as e:
            raise at_input_row(e, order_np) from None
        return matches_table(tq, table, part, order_np, fired)
    return run_tasks(tq, table, opts, stats, progress)
