"""The public entry points: match_recognize() and explain()."""

from __future__ import annotations

import functools
import os
from typing import Any

from sparkcep.data.ingest import placeholders, to_arrow
from sparkcep.errors import OptionError, QueryError, guarded
from sparkcep.language import ast
from sparkcep.language.parser import parse
from sparkcep.options import OPTIONS, SNOOP_OPTIONS, TASK_OPTIONS, check_options
from sparkcep.query import (
    compile_query,
    describe_execution,
    execute,
    is_segment_plan,
    plan_query,
    run_plan,
)
from sparkcep.values import to_pandas

__all__ = ["compile_query", "explain", "explain_rules", "match_recognize", "match_rules", "plan_query", "run_local", "run_plan", "sase", "snoop"]



@guarded
def sase(data: Any, query: str, *, order_by: str = "time", type_column: str | None = "event_type",
         **options: Any) -> Any:
    """Run a SASE+ pattern query (``PATTERN SEQ(...) WHERE ... WITHIN ... RETURN ...``) over
    ``data``: events of several types in one table, ordered by ``order_by``, typed by
    ``type_column`` (None: no type tests). Same options and result kinds as match_recognize;
    the output is every match (SASE's default)."""
    from sparkcep.language.sase import parse_sase

    if not isinstance(order_by, str) or not order_by:
        raise OptionError(f"order_by must name the column that orders the events, not {order_by!r}")
    if type_column is not None and not isinstance(type_column, str):
        raise OptionError(f"type_column must name a column or be None, not {type_column!r}")
    return match_recognize(data, parse_sase(query, order_by, type_column), **options)


@guarded
def snoop(data: Any, query: str, *, order_by: str | None = None, partition_by: Any = (),
          type_column: str | None = None, strategy: str = "auto", **options: Any) -> Any:
    """Run an Extended SNOOP query (``SELECT * FROM SEQ(E1; E2) WHERE ... PICK ... WITHIN ...
    RETURN ... CONSUMING ...``) over ``data`` in stream order (``order_by``, default the input
    order), per ``partition_by`` key. ``type_column``: a variable then matches only events
    whose type is its name (``SEQ(A; B; C)``). Strategies: "tasks" (the task engine's worker
    processes), "sequential" (the same engine in this process), "reference" (brute force, for
    small inputs), "auto" (tasks when a predicate calls a function registered with
    cost="expensive"). Task-engine options: ``workers`` (default: the cores), ``pm``
    ("tree", "tree+hash", "graph"), ``queue`` ("priority", "fifo"), ``block`` (raw events
    per synchronization block), ``window`` (counter window: at most this many events from one
    event of a match to the next), ``chunk`` (tasks per message), ``start`` ("spawn": workers
    are clean interpreters sent the query, kept for the next one; "fork": forks of this
    process, quicker to start but unsafe when a library here already runs threads that do
    not survive a fork, as OpenCV's and PyTorch's), ``stats`` (a TaskStats).
    A Spark DataFrame (``order_by`` required) runs with strategy "tasks" (the coordinator on
    the driver, each round of tasks evaluated by Spark tasks) or "partition" (one coordinator
    per ``partition_by`` key group, in parallel; the default when there is a key)."""
    from sparkcep.tasks.strategies import snoop_table

    check_options(options, SNOOP_OPTIONS)
    keys = (partition_by,) if isinstance(partition_by, str) else partition_by
    if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
        raise OptionError(f"partition_by must name a column or a list of columns, not {partition_by!r}")
    if is_spark_dataframe(data):
        from sparkcep.spark.snoop_jobs import snoop_spark

        keys = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
        return snoop_spark(data, query, order_by=order_by, partition_by=keys, type_column=type_column,
                           strategy=strategy, **options)
    table, kind = to_arrow(data)
    result = snoop_table(table, query, order_by=order_by, partition_by=partition_by, type_column=type_column,
                         strategy=strategy, **options)
    return to_pandas(result, data) if kind == "pandas" else result


def is_spark_dataframe(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark.") and hasattr(data, "sparkSession")


class Explanation(str):
    """``explain``'s text; a notebook shows it as preformatted text, as a terminal would."""

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


@guarded
def explain(data: Any, clause: str, picture: str | None = None, **options: Any) -> str:
    """The plan sparkcep would run: clauses as understood, the compiled program and, for a
    Spark DataFrame, the strategy ``auto`` picks (which counts the rows). A str that a
    notebook shows as preformatted text."""
    return Explanation(_explain(data, clause, picture, **options))


def _explain(data: Any, clause: str, picture: str | None = None, **options: Any) -> str:
    check_options(options)
    if picture is not None and not isinstance(picture, (str, os.PathLike)):
        raise OptionError(f"picture must be a file's path (PNG, SVG or PDF), not {picture!r}")
    mode = options.get("mode", "sql")
    if is_spark_dataframe(data):
        from sparkcep.spark.frames import check_typed_measures, plan_for

        plan, arrow_schema = plan_for(data, clause, mode, options.get("plan"), options.get("sharing", True))
        if picture is not None and not is_segment_plan(plan):
            raise OptionError("picture draws a segment query's plan; this query runs on the automaton engine")
        shown = plan.explain(None, picture) if is_segment_plan(plan) else plan.explain()
        try:
            check_typed_measures(plan.query, arrow_schema, clause)
        except QueryError as e:
            # The plan is still worth seeing; the run would stop here, so say why instead of
            # a strategy (no rows are counted for a query that cannot run).
            return shown + "\nnot runnable on Spark: " + str(e)
        from sparkcep.spark.batch import choose_strategy

        return shown + "\n" + choose_strategy(data, clause, **options).describe()
    table, _ = to_arrow(data)
    plan = compile_query(clause, table, mode, options.get("plan"), options.get("sharing", True))
    if is_segment_plan(plan):
        return plan.explain(table, picture)
    if picture is not None:
        raise OptionError("picture draws a segment query's plan; this query runs on the automaton engine")
    return plan.explain() + "\n" + describe_execution(plan, table, options.get("strategy", "auto"))


@guarded
def match_recognize(data: Any, clause: str, **options: Any) -> Any:
    """Run ``MATCH_RECOGNIZE ( clause )`` over ``data``.

    ``data`` is a pandas DataFrame, a pyarrow Table or a Spark DataFrame; the result is of
    the same kind. Options: ``mode="sql"`` (SQL:2016, the default) or ``mode="matchregex"``
    (a match is reported as soon as one completes; the longest of those ending there wins).
    Spark only: ``strategy`` ("auto", "sequential", "partition", "runs", "rr"), ``batch``
    (rows per batch for runs/rr) and ``shared`` (rows a batch reads past its end). pandas and
    Arrow data: ``strategy="sb"`` / ``"sb+"`` run RIP's state-based baselines (one process
    per pattern variable; exact, not fast); ``strategy="tasks"`` (or "auto" when a DEFINE
    calls a function registered with cost="expensive") runs on the task engine's worker
    processes: ALL MATCHES + SKIP TILL ANY MATCH over a sequence of variables as
    ⟨transition, partial match, event⟩ tasks (options ``workers``, ``pm``, ``queue``,
    ``block``, ``chunk`` as for sparkcep.snoop), any other query with PARTITION BY with key
    groups — runs of whole partitions — as the tasks (options ``workers``, ``start``), and
    one without on the sequential engine with its expensive calls made ahead by the workers
    (options ``workers``, ``start``, ``chunk``, ``stats``: a tasks.engine.TaskStats).
    """
    task_options = _task_options(options, is_spark_dataframe(data))
    strategy = options.get("strategy", "auto")
    if is_spark_dataframe(data):
        from sparkcep.spark.batch import match_recognize_spark

        return match_recognize_spark(data, clause, **options)
    table, kind = _ingest(data, clause)
    plan = compile_query(clause, table, options.get("mode", "sql"), options.get("plan"), options.get("sharing", True))
    result = execute(plan, table, strategy, task_options)
    return to_pandas(result, data, placeholders(table)) if kind == "pandas" else result


@guarded(query=False)
def match_rules(data: Any, rules: Any, **options: Any) -> Any:
    """Run many MATCH_RECOGNIZE clauses over ``data`` at once: ``rules`` maps each rule's name
    to its clause, or is a folder of ``.sql`` files (one clause each, named by the file).
    One table of ``data``'s kind: a ``rule`` column first, then the rules' output columns by
    name (NULL where a rule has no such column); each rule's rows are what match_recognize
    gives it alone. Rules with the same PARTITION BY and ORDER BY share one read and sort of
    the input (on Spark: one shuffle per PARTITION BY) and the conditions they define alike.
    Options as match_recognize."""
    from sparkcep.rules.rule_set import load_rules

    task_options = _task_options(options, is_spark_dataframe(data))
    chosen = load_rules(rules)
    if is_spark_dataframe(data):
        from sparkcep.spark.rule_jobs import match_rules_spark

        return match_rules_spark(data, chosen, **options)
    from sparkcep.rules.one_pass import match_rules_local

    return match_rules_local(data, chosen, **options, task_options=task_options)


@guarded(query=False)
def explain_rules(data: Any, rules: Any, **options: Any) -> str:
    """What the rules of a match_rules call over ``data`` share: the sorts (on Spark, the
    shuffles) of their PARTITION BY and ORDER BY, the row-local conditions evaluated once,
    the copies matched once. Options as match_rules (``mode`` is read)."""
    from sparkcep.rules.one_pass import describe_rules
    from sparkcep.rules.rule_set import load_rules

    check_options(options, OPTIONS | TASK_OPTIONS)
    chosen = load_rules(rules)
    mode = options.get("mode", "sql")
    if is_spark_dataframe(data):
        from sparkcep.spark.frames import arrow_of

        return Explanation(describe_rules(chosen, arrow_of(data.schema), mode, spark=True))
    table, _ = to_arrow(data)
    return Explanation(describe_rules(chosen, table.schema, mode))


def _task_options(options: dict, spark: bool) -> dict:
    """Checks ``options`` and takes the task engine's out of them (checked whether or not
    the task engine runs the query); they are refused on Spark (``spark``: the data is a
    Spark DataFrame)."""
    check_options(options, OPTIONS | TASK_OPTIONS)
    task_options = {k: options.pop(k) for k in TASK_OPTIONS & set(options)}
    if task_options:
        from sparkcep.tasks.engine import TaskOptions, TaskStats

        TaskOptions(**{k: v for k, v in task_options.items() if k != "stats"}).check()
        stats = task_options.get("stats")
        if stats is not None and not isinstance(stats, TaskStats):
            raise OptionError(f"stats must be a sparkcep.TaskStats (its counts are filled in), not {stats!r}")
    if spark and (task_options or options.get("strategy", "auto") == "tasks"):
        raise OptionError("strategy 'tasks' runs MATCH_RECOGNIZE on pandas and Arrow data (on Spark, "
                          "sparkcep.snoop runs the task engine)")
    return task_options


def _ingest(data: Any, clause: Any):
    """The input as Arrow, and its kind; only the text columns the query names are converted
    (the costliest part of the hand-off from pandas), the others pass through ALL ROWS PER
    MATCH untouched (see data.ingest.to_arrow)."""
    query = parse(clause)
    names = _names_of_text(clause) if isinstance(clause, str) else ast.identifiers(query)
    return to_arrow(data, names, positions=query.rows_per_match.mode == "ALL")


def run_local(data: Any, clause: Any, mode: str = "sql", stats: dict | None = None, how: str | None = None,
              sharing: bool = True) -> Any:
    """match_recognize over pandas or Arrow data on this machine (``stats``: see run_plan;
    ``how``, ``sharing``: a segment query's plan and whether its aggregates share indexes)."""
    table, kind = _ingest(data, clause)
    plan = compile_query(clause if isinstance(clause, str) else parse(clause), table, mode, how, sharing)  # text: cached
    from sparkcep.tasks.calls import calls_once

    with calls_once(plan):
        result = run_plan(plan, table, stats=stats)
    return to_pandas(result, data, placeholders(table)) if kind == "pandas" else result


@functools.lru_cache(maxsize=256)
def _names_of_text(text: str) -> frozenset[str]:
    return frozenset(ast.identifiers(parse(text)))
