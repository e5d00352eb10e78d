"""Extended SNOOP → MATCH_RECOGNIZE, for the queries whose meaning both languages share.

Without PICK first/last, CONSUMING, a counter window or NOT, a SNOOP query emits every
candidate — exactly MATCH_RECOGNIZE's ``ALL MATCHES`` with ``EVENT SELECTION SKIP TILL ANY
MATCH`` when the pattern is a SEQ of variables or of ORs of variables (alternation). Each
constraint goes to the DEFINE of the variable it names that comes last in the pattern;
one with no variable to every variable that can start a match; one reading a variable of
an OR is guarded by ``COUNT(X.*) = 0 OR`` (SNOOP skips a constraint on an unbound
variable, SQL would read NULL). The order of the matches
differs (MATCH_RECOGNIZE reports them by first row); the set is the same.
"""

from __future__ import annotations

from sparkcep.tasks.task_query import OpNode, TaskQuery, VarNode


def _text(text: str, span) -> str:
    """The query text under ``span`` (constraints and outputs are reused verbatim)."""
    lines = text.splitlines()
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1:span.end_column - 1]
    out = [lines[span.line - 1][span.column - 1:]]
    out += lines[span.line:span.end_line - 1]
    out.append(lines[span.end_line - 1][:span.end_column - 1])
    return "\n".join(out)


def to_match_recognize(tq: TaskQuery, order_by: str | None = None,
                       partition_by: tuple[str, ...] = ()) -> str | None:
    """The MATCH_RECOGNIZE clause equal to ``tq``, or None when SNOOP's meaning differs."""
    if tq.consuming or tq.negated or tq.picks:
        return None
    if tq.within is not None and tq.within.events:
        return None
    node = tq.pattern
    items = node.items if isinstance(node, OpNode) and node.kind == "SEQ" else (node,)
    steps: list[list[int]] = []
    for item in items:
        if isinstance(item, VarNode):
            steps.append([item.var])
        elif isinstance(item, OpNode) and item.kind == "OR" and all(isinstance(i, VarNode) for i in item.items):
            steps.append([i.var for i in item.items])
        else:
            return None
    step_of = {v: k for k, vs in enumerate(steps) for v in vs}
    names = tq.variables
    defines: dict[int, list[str]] = {}
    typed = len(tq.variables) if tq.type_column is not None else 0  # the type tests come last
    for p in tq.predicates[:len(tq.predicates) - typed]:
        if not p.variables:
            targets = steps[0]
        elif len({step_of[v] for v in p.variables}) < len(p.variables):
            return None  # two variables of one OR: never both bound in SNOOP, NULL in SQL
        else:
            targets = [max(p.variables, key=lambda v: step_of[v])]
        text = f"({_text(tq.text, p.span)})"
        # A variable of an OR branch not taken is unbound: SNOOP skips the constraint, SQL
        # would read NULL; the guard says so in SQL.
        unbound = [names[v] for v in sorted(p.variables) if v not in targets and len(steps[step_of[v]]) > 1]
        if unbound:
            text = "(" + " OR ".join(f"COUNT({n}.*) = 0" for n in unbound) + f" OR {text})"
        for v in targets:
            defines.setdefault(v, []).append(text)
    if tq.type_column is not None:
        for v, name in enumerate(names):
            defines.setdefault(v, []).append(f"{name}.{_quote(tq.type_column)} = '{name}'")
    pattern = " ".join(names[vs[0]] if len(vs) == 1 else "(" + " | ".join(names[v] for v in vs) + ")"
                       for vs in steps)
    out = []
    if partition_by:
        out.append("PARTITION BY " + ", ".join(_quote(c) for c in partition_by))
    if order_by:
        out.append("ORDER BY " + _quote(order_by))
    if tq.snoop.outputs:
        measures = ["MATCH_NUMBER() AS match_number"] + [
            f"{_text(tq.text, m.expr.span)} AS {_quote(d.name)}"
            for m, d in zip(tq.snoop.outputs, tq.plan.query.measures[1:], strict=True)]
        out.append("MEASURES " + ", ".join(measures))
        out.append("ONE ROW PER MATCH")
    else:
        out.append("MEASURES MATCH_NUMBER() AS match_number, CLASSIFIER() AS variable")
        out.append("ALL ROWS PER MATCH")
    out.append("ALL MATCHES")
    out.append("EVENT SELECTION SKIP TILL ANY MATCH")
    within = f" WITHIN {_text(tq.text, tq.snoop.within.span)}" if tq.within is not None else ""
    out.append(f"PATTERN ({pattern}){within}")
    if defines:
        out.append("DEFINE " + ",\n       ".join(f"{names[v]} AS " + " AND ".join(cs)
                                                for v, cs in sorted(defines.items())))
    return "\n".join(out)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
