"""The planner and the one dispatcher: a query text or tree to its executable plan (the
automaton Plan, or a segment query's operator tree; plans of query texts are cached), and the
one step that picks the executor that runs a plan on this machine — the automaton (column
scan, compiled kernel, Pike VM, NFA^b), segments (T-REX), tasks (the thesis's task engine,
key groups on its workers, or the sequential engine with its expensive calls made ahead on
them) or state-based (RIP's SB/SB+). Spark's strategies wrap these
executors (sparkcep.spark)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcep import functions
from sparkcep.analysis.analyzer import analyze
from sparkcep.compile.plan import Plan, build_plan, is_segment_plan
from sparkcep.data.ingest import schema_of
from sparkcep.errors import OptionError
from sparkcep.language.parser import parse


def plan_query(q, how: str | None = None, sharing: bool = True):
    """The executable plan of an analysed query: the automaton Plan, or for a segment query
    (T-REX) its operator tree, built as ``how`` says (default: optimized); ``sharing=False``
    computes a segment query's aggregates per segment instead of from shared indexes."""
    if not isinstance(sharing, bool):
        raise OptionError(f"sharing must be True or False, not {sharing!r}")
    if q.segment_query:
        from sparkcep.segments.operators import PLANS
        from sparkcep.segments.run import segment_plan

        how = how or "optimized"
        if how not in PLANS:
            raise OptionError(f"plan must be one of {', '.join(PLANS)}, not {how!r}")
        return segment_plan(q, how, sharing)
    if not sharing:
        raise OptionError("the sharing option applies to segment queries (a query with SEGMENT variables, "
                          "& or ~); this query runs on the automaton engine")
    if how is not None:
        raise OptionError("the plan option chooses among segment-query plans (a query with SEGMENT variables, "
                          "& or ~); this query runs on the automaton engine")
    return build_plan(q)


def compile_query(clause: Any, table: pa.Table, mode: str = "sql", how: str | None = None,
                  sharing: bool = True) -> Plan:
    """Parse, check and plan ``clause`` for the columns of ``table``. Plans of query texts are
    cached per column names and types, mode, plan choice and registered functions (a plan is
    immutable)."""
    if not isinstance(clause, str):
        return plan_query(analyze(parse(clause), schema_of(table), mode), how, sharing)
    key = (clause, tuple((f.name, str(f.type)) for f in table.schema), mode, how, sharing,
           functions.registry_version())
    with _plans_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    plan = plan_query(analyze(parse(clause), schema_of(table), mode), how, sharing)
    with _plans_lock:
        _plans[key] = plan
        if len(_plans) > 128:
            _plans.popitem(last=False)
    return plan


_plans: OrderedDict = OrderedDict()
_plans_lock = threading.Lock()

EXECUTORS = ("automaton", "segments", "tasks", "key-groups", "speculative", "state-based")


def run_plan(plan, table: pa.Table, matcher_factory=None, partition_runner=None, use_kernel: bool | None = None,
             stats: dict | None = None, executor=None, sorts=None) -> pa.Table:
    """A plan over a table on the executor of its kind: a segment query on the segment
    executor, an automaton plan on the automaton driver (runtime.local.run_automaton, whose
    arguments the others are; ``sorts``, a runtime.local.SharedSorts, shares the sorted
    input between plans run over one table)."""
    if is_segment_plan(plan):
        from sparkcep.segments.run import run_segments

        return run_segments(plan, table, stats)
    from sparkcep.runtime.local import run_automaton
    from sparkcep.runtime.vm import Matcher

    return run_automaton(plan, table, matcher_factory or Matcher, partition_runner, use_kernel, stats, executor, sorts)


def choose_executor(plan, strategy: str = "auto", task_options: dict | None = None,
                    table: pa.Table | None = None) -> str:
    """Which executor runs ``plan`` on this machine under ``strategy`` ("auto",
    "sequential", "tasks", "sb", "sb+"): one of EXECUTORS (with ``table``, as execute
    decides: a key holding most rows has its calls made ahead)."""
    return _choose(plan, strategy, task_options or {}, table)[0]


def describe_execution(plan, table: pa.Table, strategy: str = "auto", task_options: dict | None = None) -> str:
    """explain's lines on how ``plan`` runs over ``table`` here: the executor and why, and
    when calls made ahead can gain little."""
    from sparkcep.tasks.from_sql import calls_expensive, expensive_names

    options = dict(task_options or {})
    options.pop("stats", None)
    chosen = choose_executor(plan, strategy, options, table)
    cores = os.cpu_count() or 1
    workers = options.get("workers", -1)
    if chosen == "automaton":
        line = "the sequential engine (on the compiled kernel where the query allows)"
        if calls_expensive(plan):
            line += "; each distinct expensive call made once"
    elif chosen == "segments":
        line = "T-REX's segment executor"
    elif chosen == "state-based":
        line = "RIP's state-based baseline (one process per pattern variable)"
    elif chosen == "tasks":
        n = cores if workers == -1 else workers
        line = f"the task engine: <transition, partial match, event> tasks on {n} worker(s)"
    elif chosen == "key-groups":
        n = cores if workers == -1 else workers
        line = f"whole PARTITION BY keys as tasks on {n} worker(s)"
    else:
        n = max(1, cores - 1) if workers == -1 else workers
        names = ", ".join(name.lower() for name in expensive_names(plan))
        line = f"the sequential engine here, its expensive calls ({names}) made ahead by {n} worker(s)"
        if plan.query.partition_by:
            line += " (one PARTITION BY key holds more than half the rows, so key groups could not gain 2x)"
        if strategy == "auto":
            from sparkcep.tasks.speculate import CHEAP_CALL

            line += f"; a function measured below {CHEAP_CALL * 1000:g} ms a call is called here instead"
    lines = [f"executor: {chosen}: {line}"]
    if chosen == "automaton" and plan.query.measures:
        from sparkcep.runtime.columnar import per_match

        slow = per_match(plan)
        lines.append("measures: " + (f"per match in Python: {', '.join(slow)}" if slow else
                                     "whole columns from the compiled matchers' matches"))
    if chosen == "speculative" and all(p.at_start for p in plan.program.closures[0]):
        lines.append("note: the pattern begins with ^, so a partition has one start row: each call's "
                     "arguments wait on earlier answers, and few calls can be made ahead")
    return "\n".join(lines)


def _choose(plan, strategy: str, task_options: dict, table: pa.Table | None = None):
    """(executor, the task engine's view of the plan when the executor is "tasks"); with
    ``table``, key groups give way to calls made ahead when one key holds most rows."""
    chosen, tq = _choose_for_plan(plan, strategy, task_options)
    if chosen == "key-groups" and table is not None and hot_key(plan, table):
        return "speculative", None
    return chosen, tq


def _choose_for_plan(plan, strategy: str, task_options: dict):
    if task_options and strategy not in ("tasks", "auto"):
        raise OptionError(f"options {', '.join(sorted(task_options))} belong to strategy 'tasks'")
    segment = is_segment_plan(plan)
    if strategy in ("sb", "sb+"):
        if segment:
            raise OptionError("strategies 'sb' and 'sb+' run automaton queries, not segment queries")
        return "state-based", None
    if strategy == "tasks" and segment:
        raise OptionError("strategy 'tasks' runs automaton queries, not segment queries")
    # (the task engine is imported only where it may run: a first query answers sooner)
    if strategy == "tasks" or (strategy == "auto" and not segment and functions.any_expensive()):
        from sparkcep.tasks.from_sql import calls_expensive, task_query_of

        if strategy == "tasks" or calls_expensive(plan):
            tq = task_query_of(plan)
            if tq is not None:
                return "tasks", tq
            state_only = sorted(set(task_options) & {"pm", "queue", "block"})
            if state_only:
                raise OptionError(f"options {', '.join(state_only)} apply to ALL MATCHES + SKIP TILL ANY MATCH "
                                  "over a sequence of variables; other queries run key groups or make their "
                                  "expensive calls ahead on the workers (options workers, start, chunk)")
            # With PARTITION BY, whole key groups are the tasks (cheap calls gain too); one
            # partition, or a key holding most rows (execute looks), has its calls made ahead.
            return ("key-groups" if plan.query.partition_by else "speculative"), None
    if strategy not in ("auto", "sequential"):
        raise OptionError(f"strategy {strategy!r} needs a Spark DataFrame; pandas and Arrow data run sequentially "
                          "(or with RIP's state-based baselines 'sb' and 'sb+', or the task engine 'tasks')")
    return ("segments" if segment else "automaton"), None


def hot_key(plan, table: pa.Table) -> bool:
    """Whether one PARTITION BY key holds more than half the rows of a query with expensive
    calls: key groups, which run a key in one process, would then gain less than 2x, while
    calls made ahead use every worker within that key too."""
    from sparkcep.tasks.from_sql import calls_expensive

    names = list(dict.fromkeys(k.column for k in plan.query.partition_by))
    if not names or table.num_rows < 2 or not calls_expensive(plan):
        return False
    try:
        keys = table.select(names).unify_dictionaries()  # chunks of one column may differ
        counts = keys.group_by(names).aggregate([([], "count_all")]).column(len(names))
    except pa.ArrowException:  # a key type Arrow cannot group: keep key groups
        return False
    return 2 * pc.max(counts).as_py() > table.num_rows


def execute(plan, table: pa.Table, strategy: str = "auto", task_options: dict | None = None,
            stats: dict | None = None, sorts=None) -> pa.Table:
    """Run ``plan`` over ``table`` on the executor choose_executor picks (task option
    ``stats``, a tasks.engine.TaskStats, receives the task engine's counts; ``sorts``: see
    run_plan)."""
    task_options = dict(task_options or {})
    task_stats = task_options.pop("stats", None)
    chosen, tq = _choose(plan, strategy, task_options, table)
    if chosen in ("automaton", "segments"):
        from sparkcep.tasks.calls import calls_once

        with calls_once(plan):  # one call per distinct arguments, not one per start and variable
            return run_plan(plan, table, stats=stats, sorts=sorts)
    if chosen == "state-based":
        from sparkcep.parallel.state_based import StateBasedMatcher

        matcher = StateBasedMatcher(plan, strategy == "sb+")
        return run_plan(plan, table, lambda p: matcher, use_kernel=False, stats=stats)
    from sparkcep.tasks.engine import TaskOptions

    opts = TaskOptions(**{"workers": -1, **task_options}).check()
    if chosen == "tasks":
        from sparkcep.tasks.from_sql import run_sql_on_tasks

        return run_sql_on_tasks(tq, table, opts, task_stats)
    if chosen == "key-groups":
        from sparkcep.tasks.groups import KeyGroups

        return run_plan(plan, table, stats=stats,
                        executor=KeyGroups(opts.worker_count, opts.start) if opts.worker_count else None)
    from sparkcep.tasks.speculate import Speculation

    spec = Speculation(plan, opts, task_stats, measure=strategy == "auto")
    return run_plan(plan, table, spec.matcher, stats=stats, executor=spec)
