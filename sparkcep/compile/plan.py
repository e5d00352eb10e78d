"""The executable plan: everything the runtime needs, built from an AnalyzedQuery.

The runtime sees only this module's types (and the instruction program), never the syntax
tree or the analyzer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkcep.analysis.bound import (
    AnalyzedQuery,
    BBinary,
    BClassifier,
    BExpr,
    BMatchNumber,
    BNav,
    MeasureDef,
    Pointer,
    SortKey,
    Type,
    nodes,
)
from sparkcep.compile.aggregates import Aggregate, build
from sparkcep.compile.expressions import PointerTable, compile_match, reads_row_label
from sparkcep.compile.pattern import (
    Concat,
    Label,
    Pattern,
    first_labels,
    from_ast,
    nullable,
    to_text,
)
from sparkcep.compile.program import Program, compile_pattern
from sparkcep.compile.vectorize import conjuncts, is_row_local


@dataclass(frozen=True)
class DefinePointer:
    """How a DEFINE pointer is resolved from a thread's tracked rows."""

    pointer: Pointer
    track: int  # index into Plan.tracked, or -1 for the universal variable


@dataclass(frozen=True)
class Plan:
    query: AnalyzedQuery
    pattern: Pattern
    program: Program
    labels: tuple[str, ...]
    conditions: tuple[Callable[[Any], Any] | None, ...]  # per label; None: always true
    # The same conditions split for vectorized evaluation: row-local conjuncts (evaluated
    # over whole columns) and the closure of the remaining conjuncts (None: nothing left).
    local_parts: tuple[tuple[BExpr, ...], ...]
    residuals: tuple[Callable[[Any], Any] | None, ...]
    first: frozenset[int]  # labels that can match a match's first row
    nullable: bool  # the pattern can match no rows
    fixed: tuple[int, ...] | None  # the labels of a pattern that is a plain sequence of variables
    # Label sets whose first/last rows DEFINE conditions read; per set how many of each.
    tracked: tuple[frozenset[int], ...]
    track_first: tuple[int, ...]
    track_last: tuple[int, ...]
    track_members: tuple[tuple[bool, ...], ...]  # [set][label] -> label in set
    define_pointers: tuple[DefinePointer, ...]
    define_aggregates: tuple[Aggregate, ...]
    measures: tuple[MeasureDef, ...]
    measure_fns: tuple[Callable[[Any], Any], ...]
    measure_pointers: tuple[Pointer, ...]
    measure_aggregates: tuple[Aggregate, ...]
    measure_sets: tuple[frozenset[int], ...]  # label sets measure pointers range over
    # Rows before a match's first row and after its last that PREV/NEXT may read.
    lookbehind: int
    lookahead: int
    define_match_number: bool = False  # a DEFINE condition reads MATCH_NUMBER()
    # A DEFINE reads PREV/NEXT of CLASSIFIER(v): the label of a row next to v's, which only
    # the thread's history holds, so threads with different histories never merge.
    label_history: bool = False
    # A measure reads MATCH_NUMBER() inside an expression (not as the measure itself).
    measure_match_number: bool = False
    match_number_measures: tuple[int, ...] = ()  # measures that are MATCH_NUMBER() itself
    # What a run derives from the plan alone, kept for the plan's next run (the kernel's
    # tables): a compiled plan is cached by its text, so a short call skips rebuilding it.
    derived: dict = field(default_factory=dict, compare=False, repr=False)

    def derive(self, name: str, make: Callable[[], Any]) -> Any:
        """``make()``, computed on this plan's first run and kept for its next ones."""
        if name not in self.derived:
            self.derived[name] = make()
        return self.derived[name]

    @property
    def partition_by(self) -> tuple[SortKey, ...]:
        return self.query.partition_by

    @property
    def order_by(self) -> tuple[SortKey, ...]:
        return self.query.order_by

    def explain(self) -> str:
        q = self.query
        lines = [
            f"pattern: {to_text(self.pattern, self.labels)}",
            f"pattern variables: {', '.join(self.labels)}",
            f"partition by: {', '.join(k.column for k in q.partition_by) or '(none)'}",
            f"order by: {', '.join(k.column + (' DESC' if k.descending else '') for k in q.order_by) or '(input order)'}",
            f"rows per match: {q.rows_per_match}" + (f" ({q.empty_matches})" if q.rows_per_match == "ALL" else ""),
            f"after match: {q.skip_mode}" + (f" {q.skip_target_name}" if q.skip_target_name else ""),
            f"mode: {q.mode}",
        ]
        if q.event_selection != "PARTITION":
            lines.append("event selection: " + {"STRICT": "strict contiguity", "NEXT": "skip till next match",
                                                "ANY": "skip till any match"}[q.event_selection])
        if q.within is not None:
            lines.append(f"within: {q.within}")
        if q.maxlength is not None:
            lines.append(f"maxlength: {q.maxlength}")
        lines.append("program:")
        lines += ["  " + ln for ln in self.program.listing().splitlines()]
        return "\n".join(lines)


def _pointers_in(e: BExpr, kinds: tuple[type, ...] = (BNav, BClassifier)):
    """The pointers of navigations, qualified column references and CLASSIFIER in ``e``
    (of the node ``kinds`` given)."""
    return [x.pointer for x in nodes(e) if isinstance(x, kinds)]


def _and_all(parts: list[BExpr]) -> BExpr:
    out = parts[0]
    for p in parts[1:]:
        out = BBinary("AND", out, p, Type.BOOLEAN)
    return out


def _reads_match_number(exprs: list[BExpr], aggregates) -> bool:
    """Whether the expressions, or the aggregates they use, read MATCH_NUMBER()."""
    found = [e for e in exprs] + [x for a in aggregates for x in (a.arg, a.key) if x is not None]
    return any(isinstance(x, BMatchNumber) for e in found for x in nodes(e))


def build_plan(q: AnalyzedQuery) -> Plan:
    labels = q.variables
    pattern = from_ast(q.pattern, labels)
    program = compile_pattern(pattern, labels)

    dtable = PointerTable()
    conditions = tuple(
        compile_match(q.defines[i], dtable, labels) if i in q.defines else None for i in range(len(labels))
    )
    local_parts, residuals = _split_conditions(q, dtable, labels)
    fixed = None
    if isinstance(pattern, Label):
        fixed = (pattern.id,)
    elif isinstance(pattern, Concat) and all(isinstance(x, Label) for x in pattern.items):
        fixed = tuple(x.id for x in pattern.items)
    tracked, first_need, last_need, dpointers, label_rows = _tracking(q, dtable, labels)
    members = tuple(tuple(i in s for i in range(len(labels))) for s in tracked)

    mtable = PointerTable()
    measure_fns = tuple(compile_match(m.expr, mtable, labels) for m in q.measures)
    msets = []
    for p in mtable.pointers:
        if p.labels is not None and p.labels not in msets:
            msets.append(p.labels)
    for spec in q.measure_aggregates:
        if spec.labels is not None and spec.labels not in msets:
            msets.append(spec.labels)

    physical = [p.physical for p in dtable.pointers + mtable.pointers]
    return Plan(
        query=q,
        pattern=pattern,
        program=program,
        labels=labels,
        conditions=conditions,
        local_parts=tuple(local_parts),
        residuals=tuple(residuals),
        first=first_labels(pattern),
        nullable=nullable(pattern),
        fixed=fixed,
        tracked=tuple(tracked),
        track_first=tuple(first_need),
        track_last=tuple(last_need),
        track_members=members,
        define_pointers=tuple(dpointers),
        define_aggregates=tuple(build(s, labels) for s in q.define_aggregates),
        measures=q.measures,
        measure_fns=measure_fns,
        measure_pointers=tuple(mtable.pointers),
        measure_aggregates=tuple(build(s, labels) for s in q.measure_aggregates),
        measure_sets=tuple(msets),
        lookbehind=max([0] + [-x for x in physical]),
        lookahead=max([0] + physical),
        label_history=any(p.labels is not None and p.physical for p in label_rows),
        define_match_number=_reads_match_number(list(q.defines.values()), q.define_aggregates),
        measure_match_number=_reads_match_number([m.expr for m in q.measures if not isinstance(m.expr, BMatchNumber)],
                                                 q.measure_aggregates),
        match_number_measures=tuple(i for i, m in enumerate(q.measures) if isinstance(m.expr, BMatchNumber)),
    )


def _split_conditions(q: AnalyzedQuery, dtable: PointerTable, labels) -> tuple[list, list]:
    """Per variable, the row-local conjuncts of its condition (masks) and the rest compiled."""
    local_parts, residuals = [], []
    for i in range(len(labels)):
        cond = q.defines.get(i)
        parts = conjuncts(cond) if cond is not None else []
        local_parts.append(tuple(c for c in parts if is_row_local(c, i)))
        rest = [c for c in parts if not is_row_local(c, i)]
        residuals.append(compile_match(_and_all(rest), dtable, labels) if rest else None)
    return local_parts, residuals


def _tracking(q: AnalyzedQuery, dtable: PointerTable, labels):
    """The rows a thread keeps for its conditions' pointers: the tracked label sets, how many
    first and last rows of each, each pointer's set, and the pointers that read labels."""
    tracked: list[frozenset[int]] = []
    first_need: list[int] = []
    last_need: list[int] = []
    dpointers = []
    every = frozenset(range(len(labels)))
    # Which variables' conditions read each pointer: X.col read in X's own condition is the
    # current row and needs no tracked rows (fewer thread states, more merging).
    readers: dict[Pointer, set[int]] = {}
    for i, cond in q.defines.items():
        for p in _pointers_in(cond):
            readers.setdefault(p, set()).add(i)
    # CLASSIFIER() of a row other than the current one (FIRST, LAST with an offset, PREV/NEXT)
    # needs that row's label: such pointers keep rows with their labels, as a subset's are kept.
    label_rows = {x.pointer for cond in q.defines.values() for x in nodes(cond)
                  if (isinstance(x, BClassifier) or (isinstance(x, BNav) and reads_row_label(x.inner)))
                  and (x.pointer.physical or not x.pointer.last or x.pointer.offset)}
    for p in dtable.pointers:
        if p.labels is None and not q.gapped and p not in label_rows:
            dpointers.append(DefinePointer(p, -1))
            continue
        # A match that skips rows has no row arithmetic: its rows are tracked like a subset's.
        key = p.labels if p.labels is not None else every
        if key not in tracked:
            tracked.append(key)
            first_need.append(0)
            last_need.append(0)
        j = tracked.index(key)
        current_only = p.offset == 0 and readers.get(p, set()) <= key
        if p in label_rows:
            # The logical row, then up to |physical| rows back (forward rows have no label yet).
            if p.last:
                last_need[j] = max(last_need[j], p.offset + max(-p.physical, 0) + 1)
            else:
                first_need[j] = max(first_need[j], p.offset + max(p.physical, 0) + 1)
        elif p.last:
            if not current_only:
                last_need[j] = max(last_need[j], p.offset + 1)
        else:
            first_need[j] = max(first_need[j], p.offset + 1)
        dpointers.append(DefinePointer(p, j))
    return tracked, first_need, last_need, dpointers, label_rows


def is_segment_plan(plan) -> bool:
    """Whether ``plan`` is a segment query's operator tree (segments.run.SegmentPlan) rather
    than an automaton Plan."""
    return getattr(plan, "root", False) is not False
