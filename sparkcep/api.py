"""The public entry points: match_recognize() and explain()."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep import functions
from sparkcep.analysis.analyzer import analyze
from sparkcep.compile.plan import Plan, build_plan
from sparkcep.data import (
    LazyColumns,
    measure_array,
    measure_types,
    output_table,
    referenced_columns,
    schema_of,
    sort_and_partition,
    to_arrow,
)
from sparkcep.errors import DataError, SparkCepError, guarded
from sparkcep.language import ast
from sparkcep.language.parser import parse
from sparkcep.runtime import columnar as columnar_measures
from sparkcep.runtime.engine import output_rows
from sparkcep.runtime.fast import KernelMatcher
from sparkcep.runtime.nfab import NFAbMatcher
from sparkcep.runtime.vm import Matcher, PartitionData

_OPTIONS = {"mode", "strategy", "batch", "shared", "plan", "sharing"}


@guarded
def sase(data: Any, query: str, *, order_by: str = "time", type_column: str | None = "event_type",
         **options: Any) -> Any:
    """Run a SASE+ pattern query (``PATTERN SEQ(...) WHERE ... WITHIN ... RETURN ...``) over
    ``data``: events of several types in one table, ordered by ``order_by``, typed by
    ``type_column`` (None: no type tests). Same options and result kinds as match_recognize;
    the output is every match (SASE's default)."""
    from sparkcep.language.sase import parse_sase

    return match_recognize(data, parse_sase(query, order_by, type_column), **options)


def is_spark_dataframe(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark.") and hasattr(data, "sparkSession")


def plan_query(q, how: str | None = None, sharing: bool = True):
    """The executable plan of an analysed query: the automaton Plan, or for a segment query
    (T-REX) its operator tree, built as ``how`` says (default: optimized); ``sharing=False``
    computes a segment query's aggregates per segment instead of from shared indexes."""
    if not isinstance(sharing, bool):
        raise SparkCepError(f"sharing must be True or False, not {sharing!r}")
    if q.segment_query:
        from sparkcep.segments.plan import PLANS
        from sparkcep.segments.run import segment_plan

        how = how or "optimized"
        if how not in PLANS:
            raise SparkCepError(f"plan must be one of {', '.join(PLANS)}, not {how!r}")
        return segment_plan(q, how, sharing)
    if not sharing:
        raise SparkCepError("the sharing option applies to segment queries (a query with SEGMENT variables, "
                            "& or ~); this query runs on the automaton engine")
    if how is not None:
        raise SparkCepError("the plan option chooses among segment-query plans (a query with SEGMENT variables, "
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


@guarded
def explain(data: Any, clause: str, picture: str | None = None, **options: Any) -> str:
    """The plan sparkcep would run: clauses as understood, the compiled program and, for a
    Spark DataFrame, the strategy ``auto`` picks (which counts the rows)."""
    _check_options(options)
    mode = options.get("mode", "sql")
    if is_spark_dataframe(data):
        from sparkcep.spark.batch import choose_strategy, compile_for

        plan = compile_for(data, clause, mode, options.get("plan"), options.get("sharing", True))[0]
        run = choose_strategy(data, clause, **options)
        if hasattr(plan, "root"):
            return plan.explain(None, picture) + "\n" + run.describe()
        if picture is not None:
            raise SparkCepError("picture draws a segment query's plan; this query runs on the automaton engine")
        return plan.explain() + "\n" + run.describe()
    table, _ = to_arrow(data)
    plan = compile_query(clause, table, mode, options.get("plan"), options.get("sharing", True))
    if hasattr(plan, "root"):
        return plan.explain(table, picture)
    if picture is not None:
        raise SparkCepError("picture draws a segment query's plan; this query runs on the automaton engine")
    return plan.explain()


def _check_options(options: dict[str, Any]) -> None:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise SparkCepError(f"unknown option(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(_OPTIONS))})")


@guarded
def match_recognize(data: Any, clause: str, **options: Any) -> Any:
    """Run ``MATCH_RECOGNIZE ( clause )`` over ``data``.

    ``data`` is a pandas DataFrame, a pyarrow Table or a Spark DataFrame; the result is of
    the same kind. Options: ``mode="sql"`` (SQL:2016, the default) or ``mode="matchregex"``
    (a match is reported as soon as one completes; the longest of those ending there wins).
    Spark only: ``strategy`` ("auto", "sequential", "partition", "runs", "rr"), ``batch``
    (rows per batch for runs/rr) and ``shared`` (rows a batch reads past its end).
    """
    _check_options(options)
    if is_spark_dataframe(data):
        from sparkcep.spark.batch import match_recognize_spark

        return match_recognize_spark(data, clause, **options)
    strategy = options.get("strategy", "auto")
    if strategy not in ("auto", "sequential"):
        raise SparkCepError(f"strategy {strategy!r} needs a Spark DataFrame; pandas and Arrow data run sequentially")
    return run_local(data, clause, options.get("mode", "sql"), how=options.get("plan"),
                     sharing=options.get("sharing", True))


def run_local(data: Any, clause: Any, mode: str = "sql", stats: dict | None = None, how: str | None = None,
              sharing: bool = True) -> Any:
    """match_recognize over pandas or Arrow data on this machine (``stats``: see run_plan;
    ``how``, ``sharing``: a segment query's plan and whether its aggregates share indexes)."""
    query = parse(clause)
    names = _names_of_text(clause) if isinstance(clause, str) else _names_in(query)
    table, kind = to_arrow(data, None if query.rows_per_match.mode == "ALL" else names)
    plan = compile_query(clause if isinstance(clause, str) else query, table, mode, how, sharing)  # text: cached
    result = run_plan(plan, table, stats=stats)
    return result.to_pandas() if kind == "pandas" else result


@functools.lru_cache(maxsize=256)
def _names_of_text(text: str) -> frozenset[str]:
    return frozenset(_names_in(parse(text)))


def _names_in(query: ast.Query) -> set[str]:
    """Every identifier in a syntax tree, upper-cased: a superset of the columns it reads."""
    out: set[str] = set()
    stack: list[Any] = [query]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.add(node.text.upper())
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
        elif is_dataclass(node):
            stack.extend(getattr(node, f.name) for f in fields(node))
    return out


def run_plan(plan: Plan, table: pa.Table, matcher_factory=Matcher, partition_runner=None,
             use_kernel: bool | None = None, stats: dict | None = None) -> pa.Table:
    """Run a plan over a table; ``matcher_factory`` builds the matcher (tests pass the
    reference matcher here); ``partition_runner(plan, part, row_ids)`` replaces the
    sequential engine for each partition (tests pass the run strategy here); ``stats``, if
    given, receives which matcher ran and the most partial matches alive at once."""
    if getattr(plan, "root", False) is not False:  # a segment query (segments.run.SegmentPlan)
        from sparkcep.segments.run import run_segments

        if stats is not None:
            stats["matcher"], stats["peak_threads"] = "segments", None
        return run_segments(plan, table, stats)
    q = plan.query
    parts = sort_and_partition(table, q)
    order_np = parts.order
    sorted_idx = pa.array(order_np)
    used = referenced_columns(q)
    arrays = [(table.column(i) if parts.identity else table.column(i).take(sorted_idx)) if i in used else None
              for i in range(table.num_columns)]
    if q.within is not None:
        nulls = pc.is_null(arrays[q.order_by[0].index]).to_numpy(zero_copy_only=False).nonzero()[0]
        if len(nulls):
            raise DataError("WITHIN needs a value in the first ORDER BY column; this row has NULL",
                            column=q.order_by[0].column, row=int(order_np[nulls[0]]))
    columns = LazyColumns(arrays)
    order_index = q.order_by[0].index if q.order_by else None

    if matcher_factory is Matcher and (q.gapped or (q.event_selection == "STRICT" and q.partition_by)):
        # The Pike VM knows contiguous rows of one partition only (strict contiguity without
        # PARTITION BY is exactly that).
        matcher_factory = NFAbMatcher
    matcher = matcher_factory(plan)
    if use_kernel is None:
        use_kernel = matcher_factory is Matcher
    adjacent = _strict_adjacency(table, q, order_np) if q.event_selection == "STRICT" else None
    kernel = KernelMatcher.for_plan(plan) if use_kernel else None
    types = measure_types(q, table.schema)
    columnar = kernel is not None and partition_runner is None and columnar_measures.supported(plan)
    row_chunks: list[np.ndarray] = []
    measure_chunks: list[list[pa.Array]] = [[] for _ in plan.measures]
    for start, end in parts.bounds:
        part = PartitionData(columns.slice(start, end - start), end - start, order_index)
        if adjacent is not None:
            part.cache["adjacent"] = adjacent[start:end]
        # Input row of each partition row: only error messages and the Python path read it.
        row_ids = order_np[start:end]
        if columnar:
            spans = kernel.select_spans(part, lambda r, ids=row_ids: ids[r])
            if spans is not None:
                rows, arrays_out = columnar_measures.measure_columns(plan, part, spans, types)
                row_chunks.append(order_np[start + rows])
                for j, a in enumerate(arrays_out):
                    measure_chunks[j].append(a)
                continue
        rows = (partition_runner(plan, part, row_ids) if partition_runner is not None
                else output_rows(plan, matcher, part, row_ids, kernel))
        positions: list[int] = []
        values: list[list[Any]] = [[] for _ in plan.measures]
        for pos, vals in rows:
            positions.append(row_ids[pos])
            for j, v in enumerate(vals):
                values[j].append(v)
        row_chunks.append(np.array(positions, dtype=np.int64))
        for j, m in enumerate(plan.measures):
            measure_chunks[j].append(measure_array(m.name, values[j], types[j]))

    if stats is not None:
        if isinstance(matcher, NFAbMatcher):
            stats["matcher"], stats["peak_threads"] = type(matcher).__name__, matcher.peak_runs
        elif kernel is None:
            stats["matcher"], stats["peak_threads"] = "python", None
        elif kernel.scanned:
            stats["matcher"], stats["peak_threads"] = "column scan", 0
        else:
            stats["matcher"], stats["peak_threads"] = "kernel", kernel.peak_threads
    out_rows = np.concatenate(row_chunks) if row_chunks else np.zeros(0, dtype=np.int64)
    measures = [_join(chunks, t) for chunks, t in zip(measure_chunks, types, strict=True)]
    return output_table(plan, table, out_rows, measures, types)


def _strict_adjacency(table: pa.Table, q, order_np: np.ndarray) -> np.ndarray:
    """STRICT CONTIGUITY: per row in partition order, whether the row before it in its
    partition is also the row before it in the whole input order (ORDER BY, then input
    position); a match may only continue across such rows."""
    from dataclasses import replace

    n = table.num_rows
    if not q.partition_by:
        return np.ones(n, dtype=bool)
    rank = np.empty(n, dtype=np.int64)
    rank[sort_and_partition(table, replace(q, partition_by=())).order] = np.arange(n, dtype=np.int64)
    ranks = rank[order_np]
    out = np.zeros(n, dtype=bool)
    out[1:] = ranks[1:] == ranks[:-1] + 1
    return out


def _join(chunks: list[pa.Array], arrow_type) -> pa.Array:
    if not chunks:
        return pa.array([], type=arrow_type if arrow_type is not None else pa.null())
    if arrow_type is None:  # values decided the type: unify chunks that came out differently
        kinds = {c.type for c in chunks if c.type != pa.null()}
        arrow_type = kinds.pop() if len(kinds) == 1 else None
        if arrow_type is None:
            return pa.array([v for c in chunks for v in c.to_pylist()])
        chunks = [c.cast(arrow_type) for c in chunks]
    return pa.concat_arrays([c.cast(arrow_type) if c.type != arrow_type else c for c in chunks])
