"""A query text or tree to its executable plan: the automaton Plan, or a segment query's
operator tree; plans of query texts are cached."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa

from sparkcep import functions
from sparkcep.analysis.analyzer import analyze
from sparkcep.compile.plan import Plan, build_plan
from sparkcep.data import schema_of
from sparkcep.errors import SparkCepError
from sparkcep.language.parser import parse


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
