"""An Extended SNOOP query, checked and compiled for the task engine and its reference.

The query's expressions are compiled by the MATCH_RECOGNIZE analyzer and compiler: the SNOOP
query becomes a MATCH_RECOGNIZE tree whose PATTERN lists the variables (never run) and whose
DEFINE gives every predicate its own hidden variable. A predicate is then evaluated by that
variable's compiled condition in a context that labels a partial match's rows with their
variables (``E1.photo`` reads the row bound to E1). RETURN becomes MEASURES, PARTITION BY and
ORDER BY come from the options, so the output is built exactly as match_recognize builds it.

The pattern's meaning is a state model whose state is the set of variables bound so far
(variables appear once in a pattern, so the set says how far every operator got):
``allowed(state)`` are the variables the next event may bind and ``complete(state)`` says
whether a match is complete. Events join a partial match in stream order.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkcep import functions
from sparkcep.analysis.analyzer import analyze
from sparkcep.compile.plan import Plan, build_plan
from sparkcep.data.ingest import schema_of
from sparkcep.errors import QueryError, Span
from sparkcep.language import ast
from sparkcep.language.snoop import UNIT_SECONDS, Duration, Not, SnoopQuery, Var, parse_snoop
from sparkcep.types import Type

# ALL/ANY over many operands has exponentially many states; beyond this the query is refused.
MAX_STATES = 65536
# Calls a predicate may not make: it sees one event per variable, no sequence to navigate.
_SEQUENCE_CALLS = functions.RESERVED_CALLS


@dataclass(frozen=True)
class Predicate:
    label: int  # the plan label whose DEFINE condition this predicate is
    variables: frozenset[int]  # positive variables it reads
    negated: int | None  # the negated variable it reads (absence test), if any
    span: Span
    # Reads one variable and calls no expensive function: decided once per event by the
    # coordinator (an event type test), so no task is made for an event that fails it.
    local: bool = False


@dataclass(frozen=True)
class Absence:
    """NOT(N) in a SEQ: when the first event of the item after it joins, no event strictly
    between the last event of the items before it and that event satisfies N's predicates."""

    var: int
    before: frozenset[int]  # positive variables of the SEQ's items before NOT(N)
    after: frozenset[int]  # positive variables of the item after it
    predicates: tuple[int, ...]  # indexes into TaskQuery.predicates


@dataclass(frozen=True)
class PickRule:
    kind: str  # FIRST, LAST, EACH
    var: int
    source: int
    bound: Any  # events (int) or a difference of order values
    events: bool


@dataclass(frozen=True)
class Window:
    """WITHIN: all of a match's events lie within ``bound`` (positions or order values)."""

    bound: Any
    events: bool


@dataclass(frozen=True)
class Transition:
    var: int
    predicates: tuple[int, ...]  # predicates completed by binding var in this state (not local)
    absences: tuple[Absence, ...]
    picks: tuple[PickRule, ...]  # PICK windows completed here


class TaskQuery:
    """Everything the task engine, its reference and the workers need (built from text in
    every process that runs it; compiled conditions are closures and do not pickle)."""

    def __init__(self, snoop: SnoopQuery | None, plan: Plan, pattern: Any, variables: tuple[str, ...],
                 negated: tuple[str, ...], predicates: tuple[Predicate, ...], absences: tuple[Absence, ...], picks: tuple[PickRule, ...],
                 within: Window | None, consuming: frozenset[int], type_column: str | None):
        self.snoop = snoop
        self.plan = plan
        self.pattern = pattern
        self.variables = variables
        self.negated = negated
        self.predicates = predicates
        self.absences = absences
        self.picks = picks
        self.within = within
        self.consuming = consuming
        self.type_column = type_column
        self.conditions = tuple(plan.conditions[p.label] for p in predicates)
        # Per variable, its local predicates (see Predicate.local).
        self.local: tuple[tuple[int, ...], ...] = tuple(
            tuple(i for i, p in enumerate(predicates) if p.local and p.variables == {v})
            for v in range(len(variables)))
        self.transitions: dict[frozenset[int], tuple[Transition, ...]] = {}
        self.finals: set[frozenset[int]] = set()
        self._build_states()

    @property
    def text(self) -> str:
        return self.snoop.text if self.snoop is not None else self.plan.query.text

    # ------------------------------------------------------------ the state model
    def _build_states(self) -> None:
        start: frozenset[int] = frozenset()
        todo = [start]
        seen = {start}
        while todo:
            state = todo.pop()
            if _complete(self.pattern, state):
                self.finals.add(state)
            out = []
            for v in sorted(_allowed(self.pattern, state)):
                out.append(self._transition(state, v))
                nxt = state | {v}
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
                    if len(seen) > MAX_STATES:
                        raise QueryError("TOO_COMPLEX", f"the pattern has more than {MAX_STATES} states "
                                         "(ALL or ANY over too many operands)",
                                         self.snoop.pattern.span if self.snoop else None, self.text)
            self.transitions[state] = tuple(out)

    def _transition(self, state: frozenset[int], v: int) -> Transition:
        after = state | {v}
        preds = tuple(i for i, p in enumerate(self.predicates)
                      if p.negated is None and not p.local
                      and (v in p.variables or not p.variables and not state) and p.variables <= after)
        absences = tuple(a for a in self.absences if v in a.after and not (state & a.after))
        picks = tuple(r for r in self.picks if v in (r.var, r.source) and {r.var, r.source} <= after)
        return Transition(v, preds, absences, picks)

    def dump_states(self) -> str:
        lines = []
        for state, ts in sorted(self.transitions.items(), key=lambda kv: (len(kv[0]), sorted(kv[0]))):
            name = "{" + ", ".join(self.variables[i] for i in sorted(state)) + "}"
            final = " (final)" if state in self.finals else ""
            lines.append(f"{name}{final} -> " + (", ".join(self.variables[t.var] for t in ts) or "-"))
        return "\n".join(lines)


# ---------------------------------------------------------------- pattern over variable ids
@dataclass(frozen=True)
class VarNode:
    var: int


@dataclass(frozen=True)
class OpNode:
    kind: str
    items: tuple
    k: int
    nots: tuple  # SEQ only: (index of the item after, negated var id)


def _vars(node) -> frozenset[int]:
    if isinstance(node, VarNode):
        return frozenset({node.var})
    return frozenset().union(*(_vars(i) for i in node.items))


def _complete(node, bound: frozenset[int]) -> bool:
    if isinstance(node, VarNode):
        return node.var in bound
    if node.kind == "SEQ":
        return _complete(node.items[-1], bound)
    started = [i for i in node.items if _vars(i) & bound]
    if node.kind == "OR":
        return len(started) == 1 and _complete(started[0], bound)
    return len(started) == node.k and all(_complete(i, bound) for i in started)  # ALL, ANY


def _allowed(node, bound: frozenset[int]) -> set[int]:
    if isinstance(node, VarNode):
        return set() if node.var in bound else {node.var}
    if node.kind == "SEQ":
        for item in node.items:
            if not _complete(item, bound):
                return _allowed(item, bound)
        return set()
    started = [i for i in node.items if _vars(i) & bound]
    if node.kind == "OR":
        if started:
            return _allowed(started[0], bound)
        return set().union(*(_allowed(i, bound) for i in node.items))
    out: set[int] = set()  # ALL, ANY: go on with a started operand, or start another
    for i in started:
        out |= _allowed(i, bound)
    if len(started) < node.k:
        for i in node.items:
            if not _vars(i) & bound:
                out |= _allowed(i, bound)
    return out


# ---------------------------------------------------------------- building
def compile_snoop(text: str, table: pa.Table, *, order_by: str | None = None,
                  partition_by: tuple[str, ...] = (), type_column: str | None = None,
                  return_rows: bool | None = None) -> TaskQuery:
    """Parse and check a SNOOP query for the columns of ``table``."""
    snoop = parse_snoop(text)
    return _Builder(snoop, table, order_by, tuple(partition_by), type_column).build()


class _Builder:
    def __init__(self, snoop: SnoopQuery, table: pa.Table, order_by: str | None,
                 partition_by: tuple[str, ...], type_column: str | None):
        self.q = snoop
        self.table = table
        self.order_by = order_by
        self.partition_by = partition_by
        self.type_column = type_column
        self.text = snoop.text
        self.positive: list[str] = []
        self.positive_spans: list[Span] = []
        self.negated: list[str] = []
        self.negated_spans: list[Span] = []

    def error(self, code: str, message: str, span: Span | None) -> QueryError:
        return QueryError(code, message, span, self.text)

    # ------------------------------------------------------------ names
    def _collect(self, node, in_seq: bool = False) -> None:
        if isinstance(node, Var):
            self._add(node.name, node.span, self.positive, self.positive_spans)
        elif isinstance(node, Not):
            if not in_seq:
                raise self.error("NOT_SUPPORTED", "NOT(X) is supported only as an item of SEQ, between two "
                                 "other items (no such event between them)", node.span)
            self._add(node.name, node.span, self.negated, self.negated_spans)
        else:
            for i, item in enumerate(node.items):
                if isinstance(item, Not):
                    positive = [j for j, x in enumerate(node.items) if not isinstance(x, Not)]
                    if node.kind != "SEQ" or not positive or i < positive[0] or i > positive[-1]:
                        raise self.error("NOT_SUPPORTED", "NOT(X) is supported only as an item of SEQ, between "
                                         "two other items (no such event between them)", item.span)
                self._collect(item, node.kind == "SEQ")

    def _add(self, name: str, span: Span, into: list[str], spans: list[Span]) -> None:
        key = name.upper()
        if key in (n.upper() for n in self.positive + self.negated):
            raise self.error("DUPLICATE_VARIABLE", f"variable {name} appears twice in the pattern; each "
                             "event variable appears once", span)
        into.append(name)
        spans.append(span)

    def var_id(self, name: str, span: Span, what: str, negated_ok: bool = False) -> int:
        names = [n.upper() for n in self.positive]
        if name.upper() in names:
            return names.index(name.upper())
        neg = [n.upper() for n in self.negated]
        if name.upper() in neg:
            if negated_ok:
                return len(self.positive) + neg.index(name.upper())
            raise self.error("INVALID_REFERENCE", f"{what} names {name}, which is negated (NOT); it binds no "
                             "event", span)
        raise self.error("UNDEFINED_VARIABLE", f"{what} names {name}, which is not a variable of the pattern "
                         f"(variables: {', '.join(self.positive + self.negated)})", span)

    def _ids(self, node):
        if isinstance(node, Var):
            return VarNode(self.var_id(node.name, node.span, "the pattern"))
        items, nots = [], []
        for item in node.items:
            if isinstance(item, Not):
                nots.append((len(items), self.var_id(item.name, item.span, "NOT", negated_ok=True)))
            else:
                items.append(self._ids(item))
        return OpNode(node.kind, tuple(items), node.k, tuple(nots))

    # ------------------------------------------------------------ predicates
    def _check_predicate(self, e: ast.Expr) -> set[int]:
        """The variables ``e`` reads (ids; negated ones after the positive); refuses what a
        predicate over single events cannot mean."""
        read: set[int] = set()
        for x in ast.walk(e):
            if isinstance(x, ast.ColumnRef):
                if x.qualifier is None:
                    raise self.error("UNQUALIFIED_COLUMN", f"write the variable whose event {x.column.text!r} "
                                     f"belongs to, e.g. {(self.positive or ['E1'])[0]}.{x.column.text}", x.span)
                read.add(self.var_id(x.qualifier.text, x.qualifier.span, "a predicate", negated_ok=True))
            elif isinstance(x, ast.Call):
                if x.name.key in _SEQUENCE_CALLS or x.name.key in functions.user_aggregates():
                    raise self.error("NOT_SUPPORTED", f"{x.name.text}() reads a sequence of rows; in SNOOP a "
                                     "variable binds one event (use it in RETURN)", x.span)
                if x.semantics is not None:
                    raise self.error("NOT_SUPPORTED", f"{x.semantics} applies to MATCH_RECOGNIZE measures", x.span)
        return read

    def build(self) -> TaskQuery:
        q = self.q
        self._collect(q.pattern)
        pattern = self._ids(q.pattern)
        n_pos = len(self.positive)
        # Each conjunct is one constraint (an AND inside a NOT's constraint would otherwise
        # make a positive condition part of the absence test).
        predicates_ast = [c for e in q.predicates for c in _conjuncts(e)]
        if self.type_column is not None:
            for name, span in zip(self.positive + self.negated, self.positive_spans + self.negated_spans,
                                  strict=True):
                ref = ast.ColumnRef(ast.Name(name, span=span), ast.Name(self.type_column, True, span=span),
                                    span=span)
                predicates_ast.append(ast.Binary("=", ref, ast.Literal(name, "string", span=span), span=span))
        reads = [self._check_predicate(e) for e in predicates_ast]
        absences = self._absences(pattern, reads, predicates_ast)

        hidden = [ast.Name(f"#p{i}", True, span=e.span) for i, e in enumerate(predicates_ast)]
        names = [ast.Name(n, span=s) for n, s in zip(self.positive + self.negated,
                                                        self.positive_spans + self.negated_spans, strict=True)]
        mr_pattern = ast.PConcat(tuple(ast.PVar(n) for n in names + hidden))
        defines = tuple(ast.Define(h, e, span=e.span) for h, e in zip(hidden, predicates_ast, strict=True))
        measures = self._measures()
        within = q.within
        mr_within = None
        if within is not None and not within.events:
            mr_within = ast.Within(self._delta(within), within.unit is not None, span=within.span)
        query = ast.Query(
            pattern=mr_pattern,
            partition_by=tuple(ast.Name(c, True) for c in self.partition_by),
            order_by=(ast.SortItem(ast.Name(self.order_by, True)),) if self.order_by else (),
            measures=measures,
            rows_per_match=ast.RowsPerMatch("ONE" if q.outputs else "ALL", "OMIT"),
            all_matches=True,
            event_selection="ANY",
            within=mr_within,
            defines=defines,
            text=self.text,
        )
        if within is not None and not self.order_by and not within.events:
            raise self.error("WITHIN_NEEDS_ORDER", "WITHIN a duration measures the order column; pass order_by= "
                             "(or write WITHIN n EVENTS)", within.span)
        try:
            analyzed = analyze(query, schema_of(self.table))
        except QueryError as e:
            raise e.with_text(self.text) from None
        plan = build_plan(analyzed)
        labels = [lab.upper() for lab in plan.labels]
        label_of = {n.text.upper(): i for i, n in enumerate(names + hidden)}
        if [label_of[x] for x in labels] != list(range(len(labels))):  # pragma: no cover - plan order
            raise AssertionError("pattern variables were renumbered")
        predicates = tuple(Predicate(n_pos + len(self.negated) + i,
                                     frozenset(v for v in r if v < n_pos),
                                     next((v for v in r if v >= n_pos), None), e.span,
                                     len(r) == 1 and min(r) < n_pos and not expr_calls_expensive(e))
                           for i, (r, e) in enumerate(zip(reads, predicates_ast, strict=True)))
        picks = tuple(self._pick(p) for p in q.picks)
        consuming = frozenset(self.var_id(n, s, "CONSUMING") for n, s in q.consuming)
        window = None
        if within is not None:
            window = Window(int(within.amount), True) if within.events else Window(analyzed.within, False)
        return TaskQuery(q, plan, pattern, tuple(self.positive), tuple(self.negated), predicates, absences,
                         picks, window, consuming, self.type_column)

    def _absences(self, pattern, reads: list[set[int]], exprs: list[ast.Expr]) -> tuple[Absence, ...]:
        n_pos = len(self.positive)
        out = []
        placed: set[int] = set()

        def walk(node):
            if isinstance(node, VarNode):
                return
            for at, neg in node.nots:
                before = frozenset().union(*(_vars(i) for i in node.items[:at]))
                after_item = node.items[at]
                after = _vars(after_item)
                allowed = before | ({after_item.var} if isinstance(after_item, VarNode) else set()) | {neg}
                mine = []
                for i, r in enumerate(reads):
                    if neg in r:
                        extra = sorted(r - allowed)
                        if extra:
                            name = (self.positive + self.negated)[extra[0]]
                            raise self.error("INVALID_REFERENCE", f"a predicate on negated {self.negated[neg - n_pos]} "
                                             f"may read the variables before it in its SEQ (and a single variable "
                                             f"right after it), not {name}", exprs[i].span)
                        mine.append(i)
                        placed.add(i)
                out.append(Absence(neg, before, after, tuple(mine)))
            for item in node.items:
                walk(item)

        walk(pattern)
        for i, r in enumerate(reads):
            negs = [v for v in r if v >= n_pos]
            if len(negs) > 1:
                raise self.error("INVALID_REFERENCE", "a predicate may read at most one negated variable",
                                 exprs[i].span)
        return tuple(out)

    def _measures(self) -> tuple[ast.Measure, ...]:
        q = self.q
        number = ast.Measure(ast.Call(ast.Name("MATCH_NUMBER"), ()), ast.Name("match_number", True))
        if not q.outputs:
            return (number, ast.Measure(ast.Call(ast.Name("CLASSIFIER"), ()), ast.Name("variable", True)))
        out = [number]
        for i, m in enumerate(q.outputs):
            name = m.name
            if name is None:
                e = m.expr
                if isinstance(e, ast.ColumnRef):
                    text = f"{e.qualifier.text}_{e.column.text}" if e.qualifier else e.column.text
                elif isinstance(e, ast.Literal) and e.kind == "string":
                    text = "event"
                else:
                    text = f"output{i + 1}"
                name = ast.Name(text, True, span=m.span)
            out.append(ast.Measure(m.expr, name, span=m.span))
        return tuple(out)

    def _order_type(self, span: Span) -> Type:
        if not self.order_by:
            raise self.error("WITHIN_NEEDS_ORDER", "a duration measures the order column; pass order_by= (or count "
                             "EVENTS)", span)
        for c in schema_of(self.table):
            if c.name == self.order_by:
                return c.type
        raise self.error("UNKNOWN_COLUMN", f"the data has no order column {self.order_by!r}", span)

    def _delta(self, d: Duration) -> Any:
        t = self._order_type(d.span)
        if d.unit is None:
            if not t.numeric:
                raise self.error("TYPE_MISMATCH", f"a duration without a unit needs a numeric order column; "
                                 f"{self.order_by!r} is {t.value} (write seconds, minutes, ...)", d.span)
            return int(d.amount) if d.amount.is_integer() else d.amount
        if t not in (Type.TIMESTAMP, Type.DATE):
            raise self.error("TYPE_MISMATCH", f"a duration in {d.unit.lower()}s needs a timestamp order column; "
                             f"{self.order_by!r} is {t.value} (write the number alone)", d.span)
        return dt.timedelta(seconds=d.amount * UNIT_SECONDS[d.unit])

    def _pick(self, p) -> PickRule:
        x = self.var_id(p.var, p.var_span, "PICK")
        y = self.var_id(p.source, p.source_span, "PICK ... from")
        if x == y:
            raise self.error("INVALID_REFERENCE", "PICK chooses among events of one variable by their distance "
                             "to another; name two different variables", p.source_span)
        if p.within.events:
            return PickRule(p.kind, x, y, int(p.within.amount), True)
        return PickRule(p.kind, x, y, self._delta(p.within), False)


def expr_calls_expensive(e: ast.Node) -> bool:
    """Whether ``e`` calls a function registered with cost="expensive"."""
    return any(isinstance(x, ast.Call) and functions.is_expensive(x.name.text) for x in ast.walk(e))


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Binary) and x.op == "AND":
            stack += [x.right, x.left]
        else:
            out.append(x)
    return out


def fm_key(rows: tuple[int, ...], variables: tuple[int, ...]) -> tuple:
    """The order in which final matches fire (thesis Definition 4.4.12): earlier last event
    first; then earlier first event; then the same comparison without the last event
    (a shorter sequence first when one is a prefix); ties (the same events bound to
    different variables) by the variables in stream order. ``rows`` ascend."""
    key: list[int] = []
    n = len(rows)
    while n:
        key.append(rows[n - 1])
        key.append(rows[0])
        n -= 1
    return (tuple(key), variables)
