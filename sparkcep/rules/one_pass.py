"""Many rules over one pandas or Arrow table in one pass: the input read once, sorted once
per PARTITION BY and ORDER BY (runtime.local.SharedSorts), conditions the rules define
alike evaluated once per row; each rule's rows exactly what match_recognize gives it."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from sparkcep.data.ingest import placeholders, referenced_columns, textual, to_arrow
from sparkcep.data.output import output_schema
from sparkcep.errors import DataError
from sparkcep.language import ast
from sparkcep.language.parser import parse
from sparkcep.query import choose_executor, compile_query, execute, is_segment_plan
from sparkcep.rules.rule_set import (
    RULE_NAMES,
    Rule,
    in_rule,
    named_step,
    union_schema,
    union_tables,
)
from sparkcep.runtime.local import SharedSorts
from sparkcep.tasks.from_sql import calls_expensive
from sparkcep.values import to_pandas


def match_rules_local(data: Any, rules: list[Rule], *, strategy: str = "auto", mode: str = "sql",
                      plan: str | None = None, sharing: bool = True, task_options: dict | None = None,
                      batch: int | None = None, shared: int | None = None) -> Any:
    """Every rule of ``rules`` over ``data`` (pandas or Arrow), as one table of the same kind
    (``batch`` and ``shared`` size the run strategies on Spark: as match_recognize, this
    machine's engine takes and checks them but has no batches)."""
    queries = [_named(rule, lambda r=rule: parse(r.text)) for rule in rules]
    named = [ast.identifiers(q) for q in queries]
    names = set().union(*named)
    try:
        table, kind = to_arrow(data, names, positions=any(q.rows_per_match.mode == "ALL" for q in queries))
    except DataError as e:  # a column no rule but some reads: the first of those is to blame
        blamed = next((r for r, n in zip(rules, named, strict=True) if str(e.column).upper() in n), None)
        raise (in_rule(e, blamed) if blamed is not None else e) from None
    kept = _kept_apart(data, rules, queries, named, names) if kind == "pandas" else {}
    if kept:
        table = table.append_column(POSITION, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    plans = [_named(rule, lambda r=rule: compile_query(r.text, table, mode, plan, sharing)) for rule in rules]
    union_schema([(rule, static_schema(p, table.schema)) for rule, p in zip(rules, plans, strict=True)])
    used = set().union(*(referenced_columns(p.query) for p in plans if not is_segment_plan(p)))
    sorts = SharedSorts(table, used)
    # A rule whose text another has (a copy in the folder) has its rows: matched once
    # (registered functions are deterministic, a documented rule).
    first = {}
    for i, rule in enumerate(rules):
        first.setdefault(rule.text, i)
    once = sorted(set(first.values()))
    ran = dict(zip(once, _run_all([rules[i] for i in once], [plans[i] for i in once], table, strategy,
                                  task_options, sorts), strict=True))
    results = [(rule, ran[first[rule.text]][1]) for rule in rules]
    out = union_tables(results, union_schema([(r, t.schema) for r, t in results], RULE_NAMES))
    if kind != "pandas":
        return out
    frame = to_pandas(out, data, placeholders(table))
    return _put_back(frame, data, kept) if kept else frame


POSITION = "__sparkcep_position__"  # each input row's place, where some rows' columns are put back


def _kept_apart(data, rules: list[Rule], queries: list, named: list[set], names: set) -> dict[str, list[str]]:
    """Per ALL ROWS rule, the text columns of ``data`` it does not name but another rule
    does: alone, match_recognize would pass them through untouched (as the frame holds
    them); here they were read as Arrow for the other rule, so they are put back."""
    text = [c for c in data.columns if textual(data[c])]
    out = {}
    for rule, q, own in zip(rules, queries, named, strict=True):
        if q.rows_per_match.mode == "ALL":
            cols = [c for c in text if c.upper() in names and c.upper() not in own]
            if cols:
                out[rule.name] = cols
    return out


def _put_back(frame, data, kept: dict[str, list[str]]):
    """``frame`` with each kept column of each rule's rows taken from ``data`` as it is."""
    at = frame.pop(POSITION)
    for name, cols in kept.items():
        rows = (frame["rule"] == name).to_numpy()
        if not rows.any():
            continue
        where = at[rows].to_numpy(dtype=np.int64)
        for c in cols:
            if frame[c].dtype != object:
                frame[c] = frame[c].astype(object)
            frame.loc[rows, c] = data[c].iloc[where].to_numpy(dtype=object)
    return frame


def _run_all(rules: list[Rule], plans: list, table: pa.Table, strategy: str, task_options: dict | None,
             sorts: SharedSorts) -> list[tuple[Rule, pa.Table]]:
    """Each rule's output, in order. Rules on the automaton run on threads side by side (its
    compiled matchers release the GIL); the task engine's executors, and calls of
    expensive functions, one rule after the other. The first rule in order that fails
    raises its error."""
    threads = min(len(plans), os.cpu_count() or 1)
    if threads < 2 or any(choose_executor(p, strategy, task_options, table) != "automaton" or calls_expensive(p)
                          for p in plans):
        return [(rule, _named(rule, lambda p=p: execute(p, table, strategy, task_options, sorts=sorts)))
                for rule, p in zip(rules, plans, strict=True)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="sparkcep-rule") as pool:
        futures = [pool.submit(execute, p, table, strategy, task_options, sorts=sorts) for p in plans]
        try:
            return [(rule, _named(rule, f.result)) for rule, f in zip(rules, futures, strict=True)]
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def static_schema(plan, schema: pa.Schema) -> pa.Schema:
    """A rule's output columns as far as known before it runs (a measure whose values decide
    its type, as a function registered with returns='any', is of NULL type here)."""
    return output_schema(plan.query, schema, unknown=pa.null())


def _named(rule: Rule, step):
    return named_step(rule, step)



def describe_rules(rules: list[Rule], schema: pa.Schema, mode: str = "sql", spark: bool = False) -> str:
    """What the rules of one call share over data of ``schema``: the sorts (on Spark, the
    shuffles), the row-local conditions evaluated once, the copies matched once."""
    plans = [_named(rule, lambda r=rule: compile_query(r.text, schema.empty_table(), mode)) for rule in rules]
    distinct = len({r.text for r in rules})
    lines = [f"rules: {len(rules)} ({distinct} distinct texts; a copy is matched once)"]
    groups: dict[tuple, list[str]] = {}
    sorts: dict[tuple, list] = {}  # the plans of each sort: their masks are shared
    for rule, p in zip(rules, plans, strict=True):
        q = p.query
        keys = ", ".join(k.column for k in q.partition_by)
        order = ", ".join(k.column + (" DESC" if k.descending else "") for k in q.order_by)
        key = (keys,) if spark else (keys, order)
        groups.setdefault(key, []).append(rule.name)
        sorts.setdefault((keys, order), []).append(p)
    lines.append("one shuffle per PARTITION BY (each task runs every rule of its key groups):" if spark
                 else "one sort per PARTITION BY and ORDER BY:")
    for key, names in groups.items():
        head = f"PARTITION BY {key[0]}" if key[0] else "no PARTITION BY (one task)" if spark else "no PARTITION BY"
        if not spark:
            head += f", ORDER BY {key[1]}" if key[1] else ", no ORDER BY"
        shown = ", ".join(names[:6]) + (f", … ({len(names) - 6} more)" if len(names) > 6 else "")
        lines.append(f"  {head}: {len(names)} rule(s): {shown}")
    total = once = 0
    for members in sorts.values():
        conditions = [parts for p in members if not is_segment_plan(p) for parts in p.local_parts if parts]
        total += len(conditions)
        try:
            once += len(set(conditions))
        except TypeError:  # (a literal that does not hash: evaluated apart)
            once += len(conditions)
    if total:
        lines.append(f"row-local conditions: {total} in all, {once} evaluated (once per row and sort, on the "
                     "compiled matchers)")
    lines.append("rules with the same sort match side by side on threads (the compiled matchers release the GIL)"
                 if not spark else "in a task, the rules of a key group run one after the other")
    return "\n".join(lines)
