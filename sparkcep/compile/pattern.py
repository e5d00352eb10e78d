"""The row pattern IR the compiler and the matchers work on, and the small pure passes that
build it from the syntax tree. Labels are integer ids; no names, no spans.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sparkcep.language import ast


class Pattern:
    pass


@dataclass(frozen=True)
class Label(Pattern):
    id: int


@dataclass(frozen=True)
class Empty(Pattern):
    pass


@dataclass(frozen=True)
class Start(Pattern):
    """^: the partition's first row is next."""


@dataclass(frozen=True)
class End(Pattern):
    """$: the partition has no more rows."""


@dataclass(frozen=True)
class Negate(Pattern):
    """!X: matches no row; no row strictly between the rows selected before and after this
    place may satisfy X (SASE's negation). Only between two items of the top-level sequence."""

    id: int


@dataclass(frozen=True)
class Concat(Pattern):
    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class Alt(Pattern):
    """Alternatives, most preferred first."""

    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class Repeat(Pattern):
    child: Pattern
    min: int
    max: int | None
    greedy: bool = True


@dataclass(frozen=True)
class Exclude(Pattern):
    child: Pattern


def from_ast(node: ast.PatternNode, labels: tuple[str, ...]) -> Pattern:
    """The IR of a checked pattern: names become label ids, PERMUTE becomes alternation,
    nested sequences and alternations are flattened."""
    return flatten(_convert(node, labels))


def _convert(node: ast.PatternNode, labels: tuple[str, ...]) -> Pattern:
    if isinstance(node, ast.PVar):
        return Label(labels.index(node.name.key))
    if isinstance(node, ast.PEmpty):
        return Empty()
    if isinstance(node, ast.PStart):
        return Start()
    if isinstance(node, ast.PEnd):
        return End()
    if isinstance(node, ast.PConcat):
        return Concat(tuple(_convert(i, labels) for i in node.items))
    if isinstance(node, ast.PAlt):
        return Alt(tuple(_convert(i, labels) for i in node.items))
    if isinstance(node, ast.PQuant):
        return Repeat(_convert(node.child, labels), node.min, node.max, node.greedy)
    if isinstance(node, ast.PExclude):
        return Exclude(_convert(node.child, labels))
    if isinstance(node, ast.PNot):
        return Negate(labels.index(node.child.name.key))
    if isinstance(node, ast.PPermute):
        return expand_permute(tuple(_convert(i, labels) for i in node.items))
    raise TypeError(node)  # pragma: no cover


def expand_permute(items: tuple[Pattern, ...]) -> Alt:
    """PERMUTE(A, B, C) → A B C | A C B | B A C | B C A | C A B | C B A: every order,
    preferred in lexicographic order of the listed positions (SQL:2016)."""
    return Alt(tuple(Concat(order) for order in itertools.permutations(items)))


def flatten(p: Pattern) -> Pattern:
    """Splice nested sequences into their parent, likewise alternations; drop () from
    sequences. ``A (B C)`` → ``A B C``; ``A | (B | C)`` → ``A | B | C``; ``A () B`` → ``A B``.
    Preference is unchanged: it depends only on the order of alternatives."""
    if isinstance(p, Concat):
        out: list[Pattern] = []
        for item in map(flatten, p.items):
            if isinstance(item, Concat):
                out.extend(item.items)
            elif not isinstance(item, Empty):
                out.append(item)
        if not out:
            return Empty()
        return out[0] if len(out) == 1 else Concat(tuple(out))
    if isinstance(p, Alt):
        alts: list[Pattern] = []
        for item in map(flatten, p.items):
            alts.extend(item.items if isinstance(item, Alt) else [item])
        return alts[0] if len(alts) == 1 else Alt(tuple(alts))
    if isinstance(p, Repeat):
        return Repeat(flatten(p.child), p.min, p.max, p.greedy)
    if isinstance(p, Exclude):
        return Exclude(flatten(p.child))
    return p


def nullable(p: Pattern) -> bool:
    """Whether the pattern can match zero rows."""
    if isinstance(p, Label):
        return False
    if isinstance(p, (Empty, Start, End, Negate)):
        return True
    if isinstance(p, Concat):
        return all(nullable(i) for i in p.items)
    if isinstance(p, Alt):
        return any(nullable(i) for i in p.items)
    if isinstance(p, Repeat):
        return p.min == 0 or nullable(p.child)
    if isinstance(p, Exclude):
        return nullable(p.child)
    raise TypeError(p)  # pragma: no cover


def to_text(p: Pattern, labels: tuple[str, ...]) -> str:
    """The IR as pattern text (for explain and tests)."""
    if isinstance(p, Label):
        return labels[p.id]
    if isinstance(p, Empty):
        return "()"
    if isinstance(p, Start):
        return "^"
    if isinstance(p, End):
        return "$"
    if isinstance(p, Negate):
        return "!" + labels[p.id]
    if isinstance(p, Concat):
        return " ".join(_wrap(i, labels, Alt) for i in p.items)
    if isinstance(p, Alt):
        return " | ".join(to_text(i, labels) for i in p.items)
    if isinstance(p, Exclude):
        return "{- " + to_text(p.child, labels) + " -}"
    if isinstance(p, Repeat):
        if (p.min, p.max) == (0, None):
            q = "*"
        elif (p.min, p.max) == (1, None):
            q = "+"
        elif (p.min, p.max) == (0, 1):
            q = "?"
        elif p.max is None:
            q = f"{{{p.min},}}"
        elif p.min == p.max:
            q = f"{{{p.min}}}"
        else:
            q = f"{{{p.min},{p.max}}}"
        child = to_text(p.child, labels)
        if not isinstance(p.child, (Label, Empty, Start, End)):
            child = f"({child})"
        return child + q + ("" if p.greedy else "?")
    raise TypeError(p)  # pragma: no cover


def _wrap(p: Pattern, labels, weaker) -> str:
    text = to_text(p, labels)
    return f"({text})" if isinstance(p, weaker) else text


def first_labels(p: Pattern) -> frozenset[int]:
    """Labels that can match the first row of a match."""
    return frozenset(_firsts(p)[0])


def _firsts(p: Pattern) -> tuple[set[int], bool]:
    if isinstance(p, Label):
        return {p.id}, False
    if isinstance(p, (Empty, Start, End, Negate)):
        return set(), True
    if isinstance(p, Concat):
        out: set[int] = set()
        for item in p.items:
            f, n = _firsts(item)
            out |= f
            if not n:
                return out, False
        return out, True
    if isinstance(p, Alt):
        out, any_null = set(), False
        for item in p.items:
            f, n = _firsts(item)
            out |= f
            any_null = any_null or n
        return out, any_null
    if isinstance(p, Repeat):
        f, n = _firsts(p.child)
        return f, n or p.min == 0
    if isinstance(p, Exclude):
        return _firsts(p.child)
    raise TypeError(p)  # pragma: no cover


@dataclass(frozen=True)
class LabelLayout:
    """Where every row's label follows from the match's length alone: ``head`` labels its
    first rows, ``tail`` its last ones and ``middle`` (None: no rows between) every row
    between. ``A B* C``: head (A,), middle B, tail (C,); ``A{2} B+ C``: (A, A, B), B, (C,)."""

    head: tuple[int, ...]
    middle: int | None
    tail: tuple[int, ...]


def label_layout(p: Pattern) -> LabelLayout | None:
    """The layout of a sequence of variables, each once or repeated, at most one of them a
    variable number of times (exclusions change no label); None for anything else
    (alternation, nested groups, anchors, two variable-length items).

        label_layout(A B* C)  ->  LabelLayout((A,), B, (C,))
        label_layout(A{2} B)  ->  LabelLayout((A, A, B), None, ())
        label_layout(A B+ C+) ->  None
    """
    items = p.items if isinstance(p, Concat) else (p,)
    head: list[int] = []
    tail: list[int] = []
    middle: int | None = None
    seen_middle = False
    for item in items:
        while isinstance(item, Exclude):
            item = item.child
        if isinstance(item, Empty):
            continue
        if isinstance(item, Label):
            lab, lo, hi = item.id, 1, 1
        elif isinstance(item, Repeat) and isinstance(item.child, Label):
            lab, lo, hi = item.child.id, item.min, item.max
        else:
            return None
        fixed = [lab] * lo
        if hi == lo:
            (tail if seen_middle else head).extend(fixed)
            continue
        if seen_middle:
            return None
        seen_middle, middle = True, lab
        # A{2,} is A A A*: its first rows are fixed ones
        head.extend(fixed)
    return LabelLayout(tuple(head), middle, tuple(tail))
