"""Questions about a pattern's syntax tree and about expressions in it (where a variable
stands, what can start a match, what a condition reads), shared by the analyzer's rules."""

from __future__ import annotations

from sparkcep import functions
from sparkcep.language import ast


def reluctant(node: ast.PatternNode) -> ast.PatternNode | None:
    if isinstance(node, ast.PQuant) and not node.greedy:
        return node
    for c in children(node):
        got = reluctant(c)
        if got is not None:
            return got
    return None


def places_of(node: ast.PatternNode, key: str, guarded: bool = False) -> list[bool]:
    """For each occurrence of variable ``key``: whether it sits under a quantifier, ~ or |."""
    if isinstance(node, ast.PVar):
        return [guarded] if node.name.key == key else []
    inner = guarded or isinstance(node, (ast.PQuant, ast.PTilde, ast.PAlt))
    return [g for c in children(node) for g in places_of(c, key, inner)]


def calls_named(e: ast.Expr, key: str):
    if isinstance(e, ast.Call) and e.name.key == key and not e.name.quoted:
        yield e
    for c in expr_children(e):
        yield from calls_named(c, key)


def has_exclusion(node: ast.PatternNode) -> bool:
    return find_in_pattern(node, (ast.PExclude,)) is not None


def children(node: ast.PatternNode) -> tuple[ast.PatternNode, ...]:
    return getattr(node, "items", None) or ((node.child,) if hasattr(node, "child") else ())


def negations(node: ast.PatternNode):
    if isinstance(node, ast.PNot):
        yield node
    for c in children(node):
        yield from negations(c)


def find_in_pattern(node: ast.PatternNode, kinds: tuple) -> ast.PatternNode | None:
    """The first node of the pattern tree that is one of ``kinds`` (None if none)."""
    if isinstance(node, kinds):
        return node
    for c in children(node):
        found = find_in_pattern(c, kinds)
        if found is not None:
            return found
    return None


def count_var(node: ast.PatternNode, key: str) -> int:
    if isinstance(node, ast.PVar):
        return int(node.name.key == key)
    return sum(count_var(c, key) for c in children(node))


def longest_match(node: ast.PatternNode) -> int | None:
    """The most rows a match of ``node`` can bind, over contiguous rows (None: no bound, or
    one this does not know, as for T-REX's & and ~)."""
    if isinstance(node, ast.PVar):
        return 1
    if isinstance(node, (ast.PEmpty, ast.PStart, ast.PEnd, ast.PNot)):
        return 0
    if isinstance(node, ast.PExclude):
        return longest_match(node.child)
    if isinstance(node, (ast.PConcat, ast.PPermute, ast.PAlt)):
        parts = [longest_match(c) for c in node.items]
        if None in parts:
            return None
        return max(parts, default=0) if isinstance(node, ast.PAlt) else sum(parts)
    if isinstance(node, ast.PQuant):
        one = longest_match(node.child)
        if one == 0:
            return 0
        return None if one is None or node.max is None else one * node.max
    return None


def first_variables(node: ast.PatternNode) -> set[str]:
    """Variables that can match the first row of a match."""
    firsts, _ = starts_of(node)
    return firsts


def starts_of(node: ast.PatternNode) -> tuple[set[str], bool]:
    """(variables that can come first, whether the node can match nothing)."""
    if isinstance(node, ast.PVar):
        return {node.name.key}, False
    if isinstance(node, (ast.PEmpty, ast.PStart, ast.PEnd)):
        return set(), True
    if isinstance(node, ast.PConcat):
        out: set[str] = set()
        for item in node.items:
            f, nullable = starts_of(item)
            out |= f
            if not nullable:
                return out, False
        return out, True
    if isinstance(node, ast.PAlt):
        out, nullable = set(), False
        for item in node.items:
            f, n = starts_of(item)
            out |= f
            nullable = nullable or n
        return out, nullable
    if isinstance(node, ast.PQuant):
        f, n = starts_of(node.child)
        return f, n or node.min == 0
    if isinstance(node, ast.PExclude):
        return starts_of(node.child)
    if isinstance(node, ast.PNot):
        return set(), True
    if isinstance(node, ast.PPermute):
        # Every item comes first in some order; the whole is empty only if all items are.
        parts = [starts_of(i) for i in node.items]
        return set().union(*(f for f, _ in parts)), all(n for _, n in parts)
    return set(), True  # pragma: no cover


def reads_partial_match(e: ast.Expr, own: str) -> ast.Node | None:
    """The first sub-expression of ``e`` that reads rows other than the current one."""
    if isinstance(e, ast.Call):
        key = e.name.key
        if key in functions.AGGREGATES or key in ("FIRST", "LAST"):
            return e
        if key in ("PREV", "NEXT"):
            return None  # physical navigation reads the stream, not the partial match
    if isinstance(e, ast.ColumnRef) and e.qualifier is not None and e.qualifier.key != own:
        return e
    for child in expr_children(e):
        found = reads_partial_match(child, own)
        if found is not None:
            return found
    return None


def expr_children(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Call):
        return list(e.args)
    if isinstance(e, ast.Unary):
        return [e.operand]
    if isinstance(e, ast.Binary):
        return [e.left, e.right]
    if isinstance(e, ast.Between):
        return [e.operand, e.low, e.high]
    if isinstance(e, ast.InList):
        return [e.operand, *e.items]
    if isinstance(e, ast.IsNull):
        return [e.operand]
    if isinstance(e, ast.Case):
        out = [e.operand] if e.operand is not None else []
        for c, r in e.whens:
            out += [c, r]
        if e.default is not None:
            out.append(e.default)
        return out
    return []
