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

from sparkcep.compile.pattern import (
    Alt,
    Concat,
    Empty,
    End,
    Exclude,
    Label,
    Negate,
    Pattern,
    Repeat,
    Start,
    nullable,
)
from sparkcep.errors import QueryError

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
NEGATE = 10  # a: label. No row skipped before the next consumed row may satisfy a.

NAMES = {
    MATCH: "match", SPLIT: "split", JUMP: "jump", ACCEPT: "accept", ASSERT_START: "assert-start",
    ASSERT_END: "assert-end", EXCL_BEGIN: "exclusion-begin", EXCL_END: "exclusion-end",
    LOOP_ENTER: "loop-enter", LOOP_CHECK: "loop-check", NEGATE: "negate",
}

MAX_INSTRUCTIONS = 20_000


@dataclass(frozen=True)
class Instruction:
    op: int
    a: int = -1
    b: int = -1


@dataclass(frozen=True)
class Place:
    """Where a thread can go from a place in the program before it takes the next row: a
    MATCH or ACCEPT instruction, and what the epsilon instructions on the way ask and do.
    Computed once per program (compile_pattern), in preference order; every matcher reads
    these instead of walking SPLIT and JUMP itself."""

    pc: int  # a MATCH or ACCEPT
    at_start: bool = False  # ^ on the way: only at the partition's first row
    at_end: bool = False  # $ on the way: only after the partition's last row
    excl: int = 0  # change of the exclusion depth
    enters: tuple[int, ...] = ()  # loop slots whose iteration begins here (LOOP_ENTER)
    # Loop slots whose current iteration must have taken a row before this walk began
    # (LOOP_CHECK of a slot not entered on the way; one entered on the way fails at once).
    checks: tuple[int, ...] = ()
    negates: tuple[int, ...] = ()  # labels negated on the way (SASE's !X), sorted

    def passes(self, at_first: bool, at_end: bool, slots: tuple, here) -> bool:
        """Whether a thread with loop ``slots`` may stand here now: at the partition's first
        row (``at_first``), after its last (``at_end``), with ``here`` the mark of a slot
        entered at this row (a matcher marks slots its own way: a row, or True)."""
        if (self.at_start and not at_first) or (self.at_end and not at_end):
            return False
        return not any(slots[s] == here for s in self.checks)

    def entered(self, slots: tuple, here) -> tuple:
        """``slots`` with the loops entered on the way marked ``here``."""
        if not self.enters:
            return slots
        out = list(slots)
        for s in self.enters:
            out[s] = here
        return tuple(out)


# Places a program may hold in all (a pattern whose epsilon paths multiply beyond this is refused).
MAX_PLACES = 200_000


@dataclass(frozen=True)
class Program:
    instructions: tuple[Instruction, ...]
    labels: tuple[str, ...]
    slots: int  # number of LOOP slots a thread carries
    # closures[pc]: the places reachable from pc without taking a row, for pc 0 and every
    # pc after a MATCH (where threads stand between rows); None elsewhere.
    closures: tuple[tuple[Place, ...] | None, ...] = ()

    def listing(self) -> str:
        """A readable listing, one instruction a line (used by golden tests and explain)."""
        out = []
        for i, ins in enumerate(self.instructions):
            if ins.op in (MATCH, NEGATE):
                arg = f" {self.labels[ins.a]}"
            elif ins.op == SPLIT:
                arg = f" {ins.a}, {ins.b}"
            elif ins.op in (JUMP, LOOP_ENTER, LOOP_CHECK):
                arg = f" {ins.a}"
            else:
                arg = ""
            out.append(f"{i}: {NAMES[ins.op]}{arg}")
        return "\n".join(out)


class _Builder:
    def __init__(self, labels: tuple[str, ...]):
        self.labels = labels
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

    def node(self, n: Pattern) -> None:
        if isinstance(n, Label):
            self.emit(MATCH, n.id)
        elif isinstance(n, Empty):
            pass
        elif isinstance(n, Start):
            self.emit(ASSERT_START)
        elif isinstance(n, End):
            self.emit(ASSERT_END)
        elif isinstance(n, Negate):
            self.emit(NEGATE, n.id)
        elif isinstance(n, Concat):
            for item in n.items:
                self.node(item)
        elif isinstance(n, Alt):
            self.alternation(list(n.items))
        elif isinstance(n, Exclude):
            self.emit(EXCL_BEGIN)
            self.node(n.child)
            self.emit(EXCL_END)
        elif isinstance(n, Repeat):
            self.quantified(n)
        else:  # pragma: no cover
            raise TypeError(n)

    def alternation(self, items: list[Pattern]) -> None:
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

    def optional_iteration(self, child: Pattern, slot: int | None) -> None:
        if slot is not None:
            self.emit(LOOP_ENTER, slot)
        self.node(child)
        if slot is not None:
            self.emit(LOOP_CHECK, slot)

    def quantified(self, n: Repeat) -> None:
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


def compile_pattern(pattern: Pattern, labels: tuple[str, ...]) -> Program:
    b = _Builder(labels)
    b.node(pattern)
    b.emit(ACCEPT)
    code = tuple(Instruction(*c) for c in b.code)
    return Program(code, labels, b.slots, closures(code))


def closures(code: tuple[Instruction, ...]) -> tuple[tuple[Place, ...] | None, ...]:
    """The places reachable from pc 0 and from each pc after a MATCH (see Place)."""
    starts = {0} | {pc + 1 for pc, ins in enumerate(code) if ins.op == MATCH}
    out: list[tuple[Place, ...] | None] = [None] * (len(code) + 1)
    total = 0
    for pc in sorted(starts):
        out[pc] = _walk(code, pc)
        total += len(out[pc])
        if total > MAX_PLACES:
            raise QueryError("PATTERN_TOO_LARGE", "the pattern has too many ways to skip between rows "
                             "(optional parts, anchors and loops combine); simplify its nested quantifiers")
    return tuple(out)


def _walk(code: tuple[Instruction, ...], start: int) -> tuple[Place, ...]:
    """The one epsilon-closure walk: depth first, the preferred target of a SPLIT first, each
    state once (a path that meets a state already met adds nothing new)."""
    out: list[Place] = []
    emitted: set[Place] = set()
    seen: set = set()
    stack = [(start, False, False, 0, frozenset(), frozenset(), frozenset())]
    while stack:
        item = stack.pop()
        if item in seen:
            continue
        seen.add(item)
        pc, at_start, at_end, excl, enters, checks, negates = item
        ins = code[pc]
        op, a = ins.op, ins.a
        if op == MATCH or op == ACCEPT:
            place = Place(pc, at_start, at_end, excl, tuple(sorted(enters)), tuple(sorted(checks)),
                          tuple(sorted(negates)))
            if place not in emitted:
                emitted.add(place)
                out.append(place)
        elif op == SPLIT:
            stack.append((ins.b, *item[1:]))
            stack.append((a, *item[1:]))
        elif op == JUMP:
            stack.append((a, *item[1:]))
        elif op == ASSERT_START:
            stack.append((pc + 1, True, at_end, excl, enters, checks, negates))
        elif op == ASSERT_END:
            stack.append((pc + 1, at_start, True, excl, enters, checks, negates))
        elif op == EXCL_BEGIN or op == EXCL_END:
            stack.append((pc + 1, at_start, at_end, excl + (1 if op == EXCL_BEGIN else -1), enters, checks, negates))
        elif op == LOOP_ENTER:
            stack.append((pc + 1, at_start, at_end, excl, enters | {a}, checks, negates))
        elif op == LOOP_CHECK:
            if a not in enters:  # entered on the way: the iteration took no row
                stack.append((pc + 1, at_start, at_end, excl, enters, checks | {a}, negates))
        elif op == NEGATE:
            stack.append((pc + 1, at_start, at_end, excl, enters, checks, negates | {a}))
        else:  # pragma: no cover
            raise AssertionError(op)
    return tuple(out)


def next_labels(program: Program) -> dict[int, tuple[frozenset[int], bool]]:
    """For each label that can select a match's first row: the labels that can select its
    second row, and whether the match may end after the first. A superset (anchors, loop
    checks and negations are taken as passing), for pruning start rows only."""
    code = program.instructions
    out: dict[int, tuple[frozenset[int], bool]] = {}
    for first in program.closures[0]:
        if code[first.pc].op != MATCH:
            continue
        after = program.closures[first.pc + 1]
        labels = frozenset(code[p.pc].a for p in after if code[p.pc].op == MATCH)
        accept = any(code[p.pc].op == ACCEPT for p in after)
        old = out.get(code[first.pc].a, (frozenset(), False))
        out[code[first.pc].a] = (old[0] | labels, old[1] or accept)
    return out
