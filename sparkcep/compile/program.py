"""Row pattern → instruction program for the thread-list matcher (after Trino's
IrRowPatternToProgramRewriter).

Preference is encoded in SPLIT: the first target is preferred. Greedy quantifiers prefer
another iteration, reluctant ones prefer to stop; alternation prefers the left branch.

An iteration beyond a quantifier's minimum that matches no rows is rejected (as in
ECMAScript's RepeatMatcher): it would only repeat the state it started from. Where the body
of such an iteration can match nothing, LOOP_ENTER/LOOP_CHECK save and test the position.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.errors import QueryError
from sparkcep.language import ast

# Opcodes (ints: the matcher dispatches on them in its inner loop).
MATCH = 0  # a: label id. Consume the current row if it can be labelled a.
SPLIT = 1  # a, b: continue at a (preferred) and at b.
JUMP = 2  # a
ACCEPT = 3
ASSERT_START = 4  # ^: only at the partition's first row
ASSERT_END = 5  # $: only after the partition's last row
EXCL_BEGIN = 6
EXCL_END = 7
LOOP_ENTER = 8  # a: slot. Remember the position.
LOOP_CHECK = 9  # a: slot. Fail unless a row was consumed since LOOP_ENTER a.

NAMES = {
    MATCH: "match", SPLIT: "split", JUMP: "jump", ACCEPT: "accept", ASSERT_START: "assert-start",
    ASSERT_END: "assert-end", EXCL_BEGIN: "exclusion-begin", EXCL_END: "exclusion-end",
    LOOP_ENTER: "loop-enter", LOOP_CHECK: "loop-check",
}

MAX_INSTRUCTIONS = 20_000


@dataclass(frozen=True)
class Instruction:
    op: int
    a: int = -1
    b: int = -1


@dataclass(frozen=True)
class Program:
    instructions: tuple[Instruction, ...]
    labels: tuple[str, ...]
    slots: int  # number of LOOP slots a thread carries

    def listing(self) -> str:
        """A readable listing, one instruction a line (used by golden tests and explain)."""
        out = []
        for i, ins in enumerate(self.instructions):
            if ins.op == MATCH:
                arg = f" {self.labels[ins.a]}"
            elif ins.op == SPLIT:
                arg = f" {ins.a}, {ins.b}"
            elif ins.op in (JUMP, LOOP_ENTER, LOOP_CHECK):
                arg = f" {ins.a}"
            else:
                arg = ""
            out.append(f"{i}: {NAMES[ins.op]}{arg}")
        return "\n".join(out)


def nullable(node: ast.PatternNode) -> bool:
    """Whether the node can match zero rows."""
    if isinstance(node, ast.PVar):
        return False
    if isinstance(node, (ast.PEmpty, ast.PStart, ast.PEnd)):
        return True
    if isinstance(node, ast.PConcat):
        return all(nullable(i) for i in node.items)
    if isinstance(node, ast.PAlt):
        return any(nullable(i) for i in node.items)
    if isinstance(node, ast.PQuant):
        return node.min == 0 or nullable(node.child)
    if isinstance(node, ast.PExclude):
        return nullable(node.child)
    raise TypeError(node)  # pragma: no cover - PERMUTE is expanded by the analyzer


class _Builder:
    def __init__(self, labels: tuple[str, ...], text: str):
        self.labels = labels
        self.text = text
        self.code: list[list[int]] = []
        self.slots = 0

    def emit(self, op: int, a: int = -1, b: int = -1) -> int:
        if len(self.code) >= MAX_INSTRUCTIONS:
            raise QueryError(
                "PATTERN_TOO_LARGE",
                f"the pattern compiles to more than {MAX_INSTRUCTIONS} instructions; use smaller quantifier bounds",
            )
        self.code.append([op, a, b])
        return len(self.code) - 1

    def here(self) -> int:
        return len(self.code)

    def node(self, n: ast.PatternNode) -> None:
        if isinstance(n, ast.PVar):
            self.emit(MATCH, self.labels.index(n.name.key))
        elif isinstance(n, ast.PEmpty):
            pass
        elif isinstance(n, ast.PStart):
            self.emit(ASSERT_START)
        elif isinstance(n, ast.PEnd):
            self.emit(ASSERT_END)
        elif isinstance(n, ast.PConcat):
            for item in n.items:
                self.node(item)
        elif isinstance(n, ast.PAlt):
            self.alternation(list(n.items))
        elif isinstance(n, ast.PExclude):
            self.emit(EXCL_BEGIN)
            self.node(n.child)
            self.emit(EXCL_END)
        elif isinstance(n, ast.PQuant):
            self.quantified(n)
        else:  # pragma: no cover
            raise TypeError(n)

    def alternation(self, items: list[ast.PatternNode]) -> None:
        jumps = []
        for i, item in enumerate(items):
            if i < len(items) - 1:
                split = self.emit(SPLIT)
                self.code[split][1] = self.here()
                self.node(item)
                jumps.append(self.emit(JUMP))
                self.code[split][2] = self.here()
            else:
                self.node(item)
        for j in jumps:
            self.code[j][1] = self.here()

    def optional_iteration(self, child: ast.PatternNode, slot: int | None) -> None:
        if slot is not None:
            self.emit(LOOP_ENTER, slot)
        self.node(child)
        if slot is not None:
            self.emit(LOOP_CHECK, slot)

    def quantified(self, n: ast.PQuant) -> None:
        for _ in range(n.min):
            self.node(n.child)
        slot = None
        if nullable(n.child) and (n.max is None or n.max > n.min):
            slot = self.slots
            self.slots += 1
        if n.max is None:
            loop = self.emit(SPLIT)
            body = self.here()
            self.optional_iteration(n.child, slot)
            self.emit(JUMP, loop)
            exit_ = self.here()
            self.code[loop][1:] = [body, exit_] if n.greedy else [exit_, body]
            return
        splits = []
        for _ in range(n.max - n.min):
            split = self.emit(SPLIT)
            splits.append(split)
            body = self.here()
            self.optional_iteration(n.child, slot)
            self.code[split][1] = body
        end = self.here()
        for split in splits:
            body = self.code[split][1]
            self.code[split][1:] = [body, end] if n.greedy else [end, body]


def compile_pattern(pattern: ast.PatternNode, labels: tuple[str, ...], text: str = "") -> Program:
    b = _Builder(labels, text)
    b.node(pattern)
    b.emit(ACCEPT)
    return Program(tuple(Instruction(*c) for c in b.code), labels, b.slots)
