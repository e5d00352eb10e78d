"""Segment patterns: the PATTERN of a segment query as a tree the executor evaluates.

Built from the analysed syntax tree. Each node knows whether it contains a segment variable
or ``~`` *as written* (``segmental``): that decides whether two neighbours in a sequence share
their boundary row (T-REX's Definition 2.1) or take consecutive rows, whatever branch a
match takes. ``nullable`` nodes may match the empty sequence, which vanishes inside a
sequence and alone matches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.language import ast


class SNode:
    segmental: bool
    nullable: bool


@dataclass(frozen=True)
class SVar(SNode):
    id: int
    segment: bool

    @property
    def segmental(self) -> bool:
        return self.segment

    @property
    def nullable(self) -> bool:
        return False


@dataclass(frozen=True)
class SEmpty(SNode):
    segmental: bool = False
    nullable: bool = True


@dataclass(frozen=True)
class _Items(SNode):
    items: tuple[SNode, ...]

    @property
    def segmental(self) -> bool:
        return any(i.segmental for i in self.items)


class SConcat(_Items):
    @property
    def nullable(self) -> bool:
        return all(i.nullable for i in self.items)


class SAlt(_Items):
    @property
    def nullable(self) -> bool:
        return any(i.nullable for i in self.items)


class SAnd(_Items):
    @property
    def nullable(self) -> bool:
        return False  # & acts on non-empty segments


@dataclass(frozen=True)
class SNot(SNode):
    child: SNode
    segmental: bool = True  # ~ counts as a segment for the junction rule

    @property
    def nullable(self) -> bool:
        return False


@dataclass(frozen=True)
class SRepeat(SNode):
    child: SNode
    min: int
    max: int | None

    @property
    def segmental(self) -> bool:
        return self.child.segmental

    @property
    def nullable(self) -> bool:
        return self.min == 0 or self.child.nullable


def shares(left: SNode, right: SNode) -> bool:
    """Whether neighbours ``left`` and ``right`` share their boundary row."""
    return left.segmental or right.segmental


def from_ast(node: ast.PatternNode, variables: tuple[str, ...], segment_vars: frozenset[int]) -> SNode:
    def var(name: ast.Name) -> SVar:
        i = variables.index(name.key)
        return SVar(i, i in segment_vars)

    def walk(n: ast.PatternNode) -> SNode:
        if isinstance(n, ast.PVar):
            return var(n.name)
        if isinstance(n, ast.PEmpty):
            return SEmpty()
        if isinstance(n, ast.PConcat):
            return SConcat(tuple(walk(i) for i in n.items))
        if isinstance(n, ast.PAlt):
            return SAlt(tuple(walk(i) for i in n.items))
        if isinstance(n, ast.PAnd):
            return SAnd(tuple(walk(i) for i in n.items))
        if isinstance(n, ast.PTilde):
            return SNot(walk(n.child))
        if isinstance(n, ast.PQuant):
            return SRepeat(walk(n.child), n.min, n.max)
        raise TypeError(n)  # the analyzer refuses the rest in segment queries

    return walk(node)


def variables_in(node: SNode) -> list[int]:
    """Variable ids in the order written (with repeats)."""
    if isinstance(node, SVar):
        return [node.id]
    if isinstance(node, (SConcat, SAlt, SAnd)):
        return [v for i in node.items for v in variables_in(i)]
    if isinstance(node, (SNot, SRepeat)):
        return variables_in(node.child)
    return []
