"""Many rules over one Spark DataFrame: the rules with one PARTITION BY share one shuffle
and one Spark task per key group (each task sorts its rows once per ORDER BY and runs every
rule of the group over them); the run strategies run rule by rule. The result: a ``rule``
column, then the union of the rules' columns by name."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle

from sparkcep.compile.plan import Plan
from sparkcep.data.ingest import referenced_columns
from sparkcep.data.partitions import named_by_key
from sparkcep.errors import DataError, SparkCepError
from sparkcep.query import is_segment_plan
from sparkcep.rules.rule_set import RULE, Rule, in_rule, named_step, union_schema, union_tables
from sparkcep.runtime.local import SharedSorts
from sparkcep.spark.choice import SparkRun, check_strategy, choose, whole_partitions
from sparkcep.spark.frames import ROW, arrow_of, compile_for, max_task_rows
from sparkcep.spark.partition import run_in_task, spread, within_bound
from sparkcep.spark.routes import KeySizes
from sparkcep.spark.wire import errors_to_driver

log = logging.getLogger("sparkcep")


@dataclass
class Compiled:
    rule: Rule
    plan: Plan
    schema: pa.Schema  # its output, as Spark types it (Arrow)


def match_rules_spark(df, rules: list[Rule], *, strategy: str = "auto", batch: int | None = None,
                      shared: int | None = None, mode: str = "sql", plan: str | None = None, sharing: bool = True):
    """Every rule of ``rules`` over the Spark DataFrame ``df``: one DataFrame."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkcep.spark.batch import check_call

    check_call(df, strategy, batch, shared)
    # Rules by PARTITION BY (columns as the analyzer resolves them): one shuffle each.
    groups: dict[tuple, list[tuple[Rule, object]]] = {}
    for rule in rules:
        p = _named(rule, lambda r=rule: compile_for(df, r.text, mode, plan, sharing)[0])
        keys = () if strategy == "sequential" else tuple(k.column for k in p.query.partition_by)
        groups.setdefault(keys, []).append((rule, p))
    # Each group reads the columns its rules read (all of them where one outputs ALL ROWS).
    jobs = []
    for keys, members in groups.items():
        frame = df.select(*[df.columns[i] for i in _read(members, len(df.columns))])
        compiled = [Compiled(rule, *_named(rule, lambda r=rule, f=frame: _typed(f, r.text, mode, plan, sharing)))
                    for rule, _ in members]
        jobs.append((keys, frame, compiled))
    every = [c for _, _, cs in jobs for c in cs]
    order = {r.name: i for i, r in enumerate(rules)}
    every.sort(key=lambda c: order[c.rule.name])
    schema = union_schema([(c.rule, c.schema) for c in every])
    spark_schema = from_arrow_schema(schema)
    schema = arrow_of(spark_schema)
    if not every:
        return df.sparkSession.createDataFrame([], spark_schema)
    out = None
    for keys, frame, compiled in jobs:
        for got in _group_frames(frame, keys, compiled, (strategy, batch, shared, mode, plan, sharing), schema,
                                 spark_schema):
            out = got if out is None else out.unionByName(got)
    return out


def _group_frames(frame, keys: tuple, compiled: list[Compiled], options: tuple, schema: pa.Schema, spark_schema):
    """The DataFrames of one PARTITION BY group: one for the rules its tasks run together,
    one per rule the run strategies run (``options``: strategy, batch, shared, mode, plan,
    sharing)."""
    from pyspark.sql import functions as F

    from sparkcep.spark.batch import match_recognize_spark

    strategy, batch, shared, mode, how, sharing = options
    base = frame.withColumn(ROW, F.monotonically_increasing_id())
    together, alone = [], []
    chosen: dict = {}  # auto's choice per kind of rule (its counts are the group's: one PARTITION BY)
    for c in compiled:
        run = SparkRun(strategy, "requested")
        if strategy == "auto":
            why = whole_partitions(c.plan)
            kind = None if why is None else ("whole input" in why, why)
            if kind not in chosen:
                chosen[kind] = run
                _named(c.rule, lambda c=c, run=run: choose(c.plan, base, run, batch))
            run = replace(chosen[kind], stats=dict(chosen[kind].stats))
        else:
            _named(c.rule, lambda c=c: check_strategy(c.plan, strategy))
            run.strategy = strategy
        log.info("sparkcep: rule %s: %s", c.rule.name, run.describe())
        (together if run.strategy in ("sequential", "partition") else alone).append((c, run))
    # Rules that need every row in one task (or chose it) in one job; those whose key groups
    # may spread over tasks in another (one shuffle by the group's PARTITION BY).
    sizes = next((run.sizes for run in chosen.values() if run.sizes is not None), None)  # (auto's count)
    for single in (True, False):
        members = [c for c, run in together if (run.strategy == "sequential" or not keys) == single]
        if members:
            yield _by_groups(members, base, single, schema, spark_schema, sizes)
    for c, run in alone:
        own = {name.lower(): "`" + name.replace("`", "``") + "`" for name in c.schema.names}
        got = _named(c.rule, lambda c=c, run=run: match_recognize_spark(
            frame, c.rule.text, strategy=run.strategy, batch=batch, shared=shared, mode=mode, run=run, plan=how,
            sharing=sharing))
        cols = [F.lit(c.rule.name).alias(RULE)] + [
            (F.col(own[f.name.lower()]) if f.name.lower() in own else F.lit(None)).cast(t.dataType).alias(f.name)
            for f, t in zip(schema, spark_schema, strict=True) if f.name != RULE]
        yield got.select(*cols)


def _by_groups(compiled: list[Compiled], base, single: bool, schema: pa.Schema, spark_schema,
               sizes: KeySizes | None):
    """One shuffle by the rules' PARTITION BY (or all rows to one task; ``sizes``: the keys
    counted, see partition.spread); each task runs every rule."""
    payload = cloudpickle.dumps(([(c.rule, c.plan, c.schema) for c in compiled], schema,
                                 max_task_rows(base.sparkSession)))

    def task(batches):
        with errors_to_driver():
            yield from _rules_task(*cloudpickle.loads(payload), batches)

    return spread(compiled[0].plan, base, single, sizes).mapInArrow(task, spark_schema)


def _rules_task(members: list, schema: pa.Schema, limit: int, batches):
    batches = list(batches)
    if not batches or not sum(b.num_rows for b in batches):
        return
    table = pa.Table.from_batches(batches)
    row = table.column(ROW).to_numpy()  # (input position first: it breaks ORDER BY ties)
    if len(row) > 1 and not (row[1:] > row[:-1]).all():
        table = table.take(pa.array(np.argsort(row, kind="stable")))
    t = table.drop_columns([ROW])
    keys = {tuple(k.index for k in p.query.partition_by) for _, p, _ in members}
    if t.num_rows > limit and (len(keys) > 1 or keys == {()}):
        # Past a task's bound, each rule's rows are cut at its own keys' bounds (or refused).
        for member in members:
            yield from _rules_over(t, [member], schema, limit)
        return
    yield from _rules_over(t, members, schema, limit)


def _rules_over(t: pa.Table, members: list, schema: pa.Schema, limit: int):
    """Every rule of ``members`` (one PARTITION BY) over ``t``, cut at key bounds past ``limit``
    rows, each part sorted once for all of them."""
    rule, first, _ = members[0]
    try:
        parts = list(within_bound(first, t, limit))
    except SparkCepError as e:
        raise in_rule(e, rule) from None
    for part in parts:
        used = set().union(*(referenced_columns(p.query) for _, p, _ in members if not is_segment_plan(p)))
        sorts = SharedSorts(part, used)
        for rule, p, own in members:
            try:
                out = run_in_task(p, part, sorts)
            except DataError as e:
                raise in_rule(named_by_key(e, p.query, part, e.row), rule) from None
            except SparkCepError as e:
                raise in_rule(e, rule) from None
            yield from union_tables([(rule, out.cast(own))], schema).to_batches()


def _typed(frame, text: str, mode: str, how, sharing: bool):
    p, _, spark_schema = compile_for(frame, text, mode, how, sharing)
    return p, arrow_of(spark_schema)


def _read(members: list, width: int) -> list[int]:
    """The input columns a group's rules read (every column when one outputs them all)."""
    if any(p.query.rows_per_match != "ONE" for _, p in members):
        return list(range(width))
    read = set().union(*(referenced_columns(p.query) for _, p in members))
    return sorted(read) or [0]


def _named(rule: Rule, step):
    return named_step(rule, step)
