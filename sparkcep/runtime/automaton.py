"""Static patterns as a deterministic automaton over row classes.

When every DEFINE condition reads only the current row (the kernel's masks hold all of
them), a row matters to the pattern only through the set of variables it may take: its
class, one small integer per row. The program's thread list, run on classes, is then a
finite machine: a state is the ordered list of the program places live threads stand at
(preference order, each place once, everything after an ACCEPT cut off, as the thread-list
kernel does), so it can be determinised. States are built lazily, only for the classes the
data hold (as RE2 and Rust's regex do), and capped: a pattern whose determinisation grows
past ``MAX_STATES`` states or ``MAX_CELLS`` transitions leaves the work to the thread-list
kernel.

A search from one start row steps the automaton until no thread is left; the last accepting
state gives the preferred match's end (leftmost start, then the preferred match from it:
greedy, reluctant and alternation order are in the state's order). Only match spans come
out: with AFTER MATCH SKIP PAST LAST ROW or TO NEXT ROW they are the selection, over whole
partitions and over the windows of streams and run-strategy batches (stopping where an
answer needs rows not seen yet). Labels, where measures or the caller need them, are
followed back from each chosen match's ACCEPT: every transition remembers which thread of
the state before it each thread of the state after it came from (``back``), as the thread
list keeps the first in preference order, so the preferred match's thread is found row by
row from its end (``labels``). Exclusion flags are the thread-list kernel's (runtime.fast).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sparkcep.compile.plan import Plan
from sparkcep.compile.program import ACCEPT
from sparkcep.compile.skip import AFTER_FIRST, CODES, skip_to
from sparkcep.jit import njit
from sparkcep.runtime.kernel_program import past_horizon

MAX_STATES = 4096  # beyond this the thread-list kernel runs the pattern
MAX_CELLS = 1 << 16  # transitions (states x classes the data hold) built in Python, at most
MAX_LABELS = 20  # classes are bit sets of the variables; a lookup table of 2**labels maps them
DEAD = 0  # no thread left
# SPARKCEP_AUTOMATON=0 leaves static patterns to the thread-list kernel (tests force both).
ENABLED = os.environ.get("SPARKCEP_AUTOMATON", "1") != "0"


@dataclass
class Automaton:
    """The lazily determinised program of one plan: states (tuples of MATCH pcs in
    preference order, and whether an ACCEPT was reached), and transitions per class code."""

    plan: Plan
    states: dict[tuple[tuple[int, ...], bool], int] = field(default_factory=dict)
    order: list[tuple[tuple[int, ...], bool]] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)  # class code -> column
    table: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), dtype=np.int32))
    lookup: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # class code -> column
    accepting: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))  # a thread can take a row
    start: int = 0
    exploded: bool = False
    # Per transition (state, column): for each pc of the state it leads to, the index of
    # the pc before it whose thread took the row (the first in preference order: the one
    # the thread list keeps), and that of the thread whose walk reached ACCEPT (-1: none).
    # What labels() backtracks through.
    back: dict[tuple[int, int], tuple[tuple[int, ...], int]] = field(default_factory=dict)
    _paths: tuple | None = None  # back as arrays (see _path_tables), for the table's size

    @classmethod
    def for_plan(cls, plan: Plan, skip_mode: str) -> Automaton | None:
        """The automaton of ``plan``, or None when the pattern needs what a state cannot hold
        (anchors, loop counters, negation) or the query needs labels or windows."""
        q = plan.query
        if not ENABLED or q.mode == "matchregex" or skip_mode not in ("PAST_LAST", "NEXT_ROW") or plan.program.slots:
            return None
        if len(plan.labels) > MAX_LABELS:
            return None
        for places in plan.program.closures:
            for p in places or ():
                if p.at_start or p.at_end or p.enters or p.checks or p.negates:
                    return None
        a = cls(plan)
        a._state(((), False))  # the dead state is state 0
        a.start = a._state(a._close(plan.program.closures[0])[0])
        a.lookup = np.zeros(1 << len(plan.labels), dtype=np.int32)
        return a

    def _close(self, places, origins=None) -> tuple[tuple[tuple[int, ...], bool], tuple[int, ...], int]:
        """A state from places in preference order: each MATCH once; an ACCEPT ends the list
        (threads after it lose to the match it finishes). With the origin of each kept pc
        and of the ACCEPT (-1: none), from ``origins`` (one per place)."""
        code = self.plan.program.instructions
        pcs: list[int] = []
        kept: list[int] = []
        for k, p in enumerate(places):
            if code[p.pc].op == ACCEPT:
                return (tuple(pcs), True), tuple(kept), (origins[k] if origins else -1)
            if p.pc not in pcs:
                pcs.append(p.pc)
                kept.append(origins[k] if origins else -1)
        return (tuple(pcs), False), tuple(kept), -1

    def _state(self, key: tuple[tuple[int, ...], bool]) -> int:
        got = self.states.get(key)
        if got is None:
            got = self.states[key] = len(self.order)
            self.order.append(key)
        return got

    def _step(self, state: int, code: int, column: int) -> int:
        """The state after a row of class ``code`` (a bit set of the variables it may take),
        its transition's origins kept in ``back``."""
        prog = self.plan.program
        places, origins = [], []
        for i, pc in enumerate(self.order[state][0]):
            if code >> prog.instructions[pc].a & 1:
                places.extend(prog.closures[pc + 1])
                origins.extend([i] * len(prog.closures[pc + 1]))
        key, kept, accept = self._close(places, origins)
        self.back[state, column] = (kept, accept)
        return self._state(key)

    def prepare(self, codes_present: np.ndarray) -> bool:
        """Columns for the class codes not seen before, and every state's transition on every
        column (new states get theirs too); False when the states grew past MAX_STATES."""
        new = [int(c) for c in codes_present if int(c) not in self.codes]
        if not new and self.table.shape[0] == len(self.order):
            return not self.exploded
        for c in new:
            self.lookup[c] = self.codes[c] = len(self.codes)
        cols = list(self.codes)
        rows: list[list[int]] = [list(r) for r in self.table.tolist()]
        for r in rows:
            r.extend([-1] * (len(cols) - len(r)))
        s = 0
        while s < len(self.order):
            if s == len(rows):
                rows.append([-1] * len(cols))
            row = rows[s]
            for j, c in enumerate(cols):
                if row[j] < 0:
                    row[j] = DEAD if s == DEAD else self._step(s, c, j)
            if len(self.order) > MAX_STATES or len(self.order) * len(cols) > MAX_CELLS:
                self.exploded = True
                return False
            s += 1
        self.table = np.array(rows, dtype=np.int32).reshape(len(rows), len(cols))
        self.accepting = np.array([acc for _, acc in self.order], dtype=np.bool_)
        self.live = np.array([bool(pcs) for pcs, _ in self.order], dtype=np.bool_)
        return True

    def partitions(self, classes: np.ndarray, los: np.ndarray, his: np.ndarray, maxlength: int,
                   use_within: bool, order0: np.ndarray, within: float) -> tuple:
        """The selection of every whole partition [los[k], his[k]) of rows of ``classes`` in
        one pass: (starts, ends, partition of each match) as rows of the whole."""
        return _scan_partitions(self._machine(), classes, los, his, (maxlength, use_within, order0, within, np.nan))

    def classes(self, masks: np.ndarray, n: int) -> np.ndarray | None:
        """Each row's class (its column of the transition table), or None when the automaton
        would grow past its cap (the caller runs the thread-list kernel)."""
        if self.exploded:
            return None
        small = len(self.plan.labels) <= 16  # (else a flag per possible class would outweigh a sort)
        codes, seen = _row_codes(masks, n, 1 << len(self.plan.labels) if small else 0)
        if not self.prepare(np.flatnonzero(seen) if small else np.unique(codes)):
            return None
        return self.lookup[codes]

    def window(self, classes: np.ndarray, limit: int, complete: bool, pos: int, covered: int, maxlength: int,
               use_within: bool, order0: np.ndarray, within: float, horizon: float = np.nan) -> tuple:
        """The selection resumed at start ``pos`` over the starts below ``limit`` of a window
        (rows of ``classes``) whose later rows may not have arrived (see _scan; a whole
        partition: limit n, complete; ``horizon``: a stream's watermark, see
        kernel_program.past_horizon): (starts, ends, next start, covered)."""
        starts, ends, pos, covered = _scan(self._machine(), classes, pos, covered, limit, complete,
                                           (maxlength, use_within, order0, within, horizon))
        return starts, ends, int(pos), int(covered)

    def labels(self, classes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Label offsets and labels of matches the scan found over rows of ``classes``: each
        match's states are stepped again and its preferred thread followed back from the
        ACCEPT (the thread-list kernel's labels, at a few steps a row). Patterns with
        exclusions are not asked (their flags are the thread-list kernel's)."""
        parent, accept_from, label = self._path_tables()
        return _backtrack(self.table, parent, accept_from, label, self.start, classes, starts, ends)

    def _path_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``back`` as arrays (parent[state, column, pc index], accept_from[state, column])
        and each state's pcs' labels, built again when the table has grown."""
        shape = self.table.shape
        if self._paths is not None and self._paths[0] == shape:
            return self._paths[1]
        width = max(1, max(len(pcs) for pcs, _ in self.order[:shape[0]]))
        parent = np.full((shape[0], shape[1], width), -1, dtype=np.int32)
        accept_from = np.full(shape, -1, dtype=np.int32)
        for (st, col), (kept, accept) in self.back.items():
            if st < shape[0] and col < shape[1]:  # (a prepare that gave up leaves some past the table)
                parent[st, col, :len(kept)] = kept
                accept_from[st, col] = accept
        code = self.plan.program.instructions
        label = np.full((shape[0], width), -1, dtype=np.int64)
        for st, (pcs, _) in enumerate(self.order[:shape[0]]):
            label[st, :len(pcs)] = [code[pc].a for pc in pcs]
        self._paths = (shape, (parent, accept_from, label))
        return self._paths[1]

    def _machine(self) -> Machine:
        return Machine(self.table, self.accepting, self.live, self.start, CODES[self.plan.query.skip_mode])


@njit
def _row_codes(masks, n, classes):
    """Each row's class code (the bit set of the variables it may take), and which of the
    ``classes`` possible codes occur (none flagged where ``classes`` is 0)."""
    codes = np.zeros(n, dtype=np.int32)
    for lab in range(masks.shape[0]):
        row = masks[lab]
        for i in range(n):
            codes[i] |= np.int32(row[i]) << lab  # (no branch: masks are unpredictable)
    seen = np.zeros(classes, dtype=np.bool_)
    if classes:
        for i in range(n):
            seen[codes[i]] = True
    return codes, seen


class Machine(NamedTuple):
    """The automaton as _scan reads it: transitions per state and row class, which states
    accept and which have a live thread, the start state, and the skip mode (PAST LAST ROW
    or TO NEXT ROW: compile.skip.skip_to reads no labels for them)."""

    table: np.ndarray
    accepting: np.ndarray
    live: np.ndarray
    start: int
    skip_code: int


@njit
def _scan(machine, cls, pos, covered, limit, complete, bounds):
    """The selection's matches from start ``pos`` on (``covered``: the last row inside a match
    so far), over the starts below ``limit`` (bounds: maxlength, use_within, order0,
    within, horizon). Where a live thread would need a row past ``limit`` of a partition that goes on
    (``complete`` false), the answer is not known yet and the selection stops there, as the
    thread-list kernel's does. Returns (starts, ends, next start, covered)."""
    starts = np.empty(16, dtype=np.int64)
    ends = np.empty(16, dtype=np.int64)
    # PAST LAST ROW or TO NEXT ROW: the rule's answer reads no labels, so it is asked once
    # (asked per match, it cost a third of the scan)
    place, _ = skip_to(machine.skip_code, np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int64), 0, 1)
    past_last = place != AFTER_FIRST
    maxlength, use_within, order0, within, horizon = bounds
    table, accepting, live = machine.table, machine.accepting, machine.live
    # Where the start state accepts nothing, only rows whose class a thread can take from
    # it may start a match: the others are passed over without a search (a branch per
    # row, mispredicted on real data, cost more than the searches).
    every = accepting[machine.start]
    cand = np.empty(max(limit - pos, 0) if not every else 0, dtype=np.int64)
    m = 0
    if not every:
        after = table[machine.start]
        first = live[after] | accepting[after]
        for i in range(pos, limit):
            cand[m] = i
            m += first[cls[i]]
    j = 0
    k = 0
    s = pos
    while s < limit:
        if not every:
            while j < m and cand[j] < s:
                j += 1
            if j == m:
                s = limit
                break
            s = cand[j]
        # The preferred match's end from s: the automaton runs until no thread is left (or
        # MAXLENGTH or WITHIN stops it), its last accepting state is the end.
        st = machine.start
        end = s if accepting[st] else -1
        p = s
        unresolved = False
        stop = min(limit, s + maxlength) if maxlength >= 0 else limit
        while live[st]:
            if p >= stop:
                # (a row past ``limit`` is unknown unless MAXLENGTH ends the search first)
                unresolved = p >= limit and not complete and (maxlength < 0 or p < s + maxlength)
                if unresolved and use_within and past_horizon(s, p, order0, cls.shape[0], horizon, within):
                    unresolved = False
                break
            if use_within and not abs(order0[p] - order0[s]) <= within:
                break
            st = table[st, cls[p]]
            p += 1
            end = p if accepting[st] else end
        if unresolved:
            break
        if end < 0:
            s += 1
            continue
        if k == starts.shape[0]:
            starts = np.concatenate((starts, np.empty(k, dtype=np.int64)))
            ends = np.concatenate((ends, np.empty(k, dtype=np.int64)))
        starts[k] = s
        ends[k] = end
        k += 1
        if end > s:
            covered = max(covered, end - 1)
        s = end if past_last and end > s else s + 1
    return starts[:k], ends[:k], s, covered


@njit
def _scan_partitions(machine, cls, los, his, bounds):
    """_scan over each whole partition [los[k], his[k]) of one table: (starts, ends,
    partition of each match), rows of the table."""
    starts = np.empty(16, dtype=np.int64)
    ends = np.empty(16, dtype=np.int64)
    parts = np.empty(16, dtype=np.int64)
    k = 0
    for j in range(los.shape[0]):
        lo = los[j]
        hi = his[j]
        maxlength, use_within, order0, within, horizon = bounds
        own = (maxlength, use_within, order0[lo:hi] if use_within else order0, within, horizon)
        s, e, _, _ = _scan(machine, cls[lo:hi], 0, -1, hi - lo, True, own)
        got = s.shape[0]
        if k + got > starts.shape[0]:
            size = max(k + got, 2 * starts.shape[0])
            starts = np.concatenate((starts[:k], np.empty(size - k, dtype=np.int64)))
            ends = np.concatenate((ends[:k], np.empty(size - k, dtype=np.int64)))
            parts = np.concatenate((parts[:k], np.empty(size - k, dtype=np.int64)))
        for i in range(got):
            starts[k + i] = s[i] + lo
            ends[k + i] = e[i] + lo
            parts[k + i] = j
        k += got
    return starts[:k], ends[:k], parts[:k]


@njit
def _backtrack(table, parent, accept_from, label, start, cls, starts, ends):
    """Label offsets and labels of matches [starts[i], ends[i]): forward, the state before
    each row; backward from the thread that reached ACCEPT, each row's thread and its label."""
    m = starts.shape[0]
    offs = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        offs[i + 1] = offs[i] + ends[i] - starts[i]
    labels = np.empty(offs[m], dtype=np.int64)
    path = np.empty(16, dtype=np.int64)
    for i in range(m):
        s = starts[i]
        n = ends[i] - s
        if n == 0:
            continue
        if n > path.shape[0]:
            path = np.empty(2 * n, dtype=np.int64)
        st = start
        for r in range(n):
            path[r] = st
            st = table[st, cls[s + r]]
        j = accept_from[path[n - 1], cls[s + n - 1]]
        for r in range(n - 1, -1, -1):
            labels[offs[i] + r] = label[path[r], j]
            if r > 0:
                j = parent[path[r - 1], cls[s + r - 1], j]
    return offs, labels
