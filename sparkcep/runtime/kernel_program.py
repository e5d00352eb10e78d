"""The compiled matchers' program as typed records, and the pieces both compiled searches
(the thread-list search of runtime.kernel, NFA^b's runs of runtime.kernel_runs) share: a
thread's closure, whether it may label a row, its history nodes.

A ``Program`` holds what every search over one partition reads: the automaton
(compile.program: instructions and their precomputed closures as ``Closures``), the
conditions split as compile.kernel_spec does (masks[label, row] of the row-local parts;
dynamic comparisons read from per-thread registers) and the partition's columns. A thread
is a row of int64: pc, exclusion depth, registers, loop slots (``Program.width``). Matches
read their labels back from a ``History`` arena of nodes (label, excluded, parent; NFA^b's
runs also the row, as event selection leaves gaps).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sparkcep.aggregates.kernels import sql_less_number
from sparkcep.compile.program import ACCEPT, MATCH
from sparkcep.jit import njit


class Closures(NamedTuple):
    """The program's precomputed closures (compile.program.Place) as flat arrays: per pc the
    range [lo, hi) of its places; per place its target, flags (1: ^, 2: $), exclusion change,
    entered and checked loop slots (ranges into ``slots``), whether the target is ACCEPT and
    the labels negated on the way (a bit each, SASE's !X); per pc where a thread may glide
    (runtime.kernel's _glide): for a MATCH whose own closure comes back to it and asks
    nothing on the way, its place in that closure, else -1; whether any loop glides."""

    lo: np.ndarray
    hi: np.ndarray
    target: np.ndarray
    flags: np.ndarray
    excl: np.ndarray
    ent_lo: np.ndarray
    ent_hi: np.ndarray
    chk_lo: np.ndarray
    chk_hi: np.ndarray
    slots: np.ndarray
    is_accept: np.ndarray
    negates: np.ndarray
    glide: np.ndarray
    glides: bool


class Program(NamedTuple):
    """Everything a search over one partition (or window) reads. ``op``/``a``: each
    instruction's operation and label; ``masks``, ``reg_member``, ``reg_kind``, ``dyn_int``,
    ``dyn_float``: the conditions (compile.kernel_spec); ``cols``/``valid``: the columns the
    dynamic comparisons read, as float64 with a validity mask; ``n`` rows, of which
    ``complete`` says whether later ones may still arrive; ``base``: the window's first row
    in its partition (for ^); ``maxlength`` (-1: none); WITHIN over ``order0``, with
    ``horizon`` (a stream's watermark in ``order0``'s units, NaN: none) below which no row is
    still to come; ``max_runs`` and ``max_nodes``: ALL MATCHES' bounds (NO_BOUND elsewhere)."""

    op: np.ndarray
    a: np.ndarray
    cl: Closures
    masks: np.ndarray
    reg_member: np.ndarray
    reg_kind: np.ndarray
    dyn_int: np.ndarray
    dyn_float: np.ndarray
    cols: np.ndarray
    valid: np.ndarray
    n: int
    complete: bool
    base: int
    maxlength: int
    use_within: bool
    order0: np.ndarray
    within: float
    n_regs: int
    n_slots: int
    max_runs: int
    max_nodes: int
    horizon: float


class History(NamedTuple):
    """The history arena: per node its label, whether the row is excluded ({- -}), the node
    before it (-1: none) and, for NFA^b's runs only, its row (empty for the thread-list
    search, whose matches take contiguous rows)."""

    label: np.ndarray
    excl: np.ndarray
    parent: np.ndarray
    row: np.ndarray


class Chain(NamedTuple):
    """ALL MATCHES' links, so that a step finds what it shares in time independent of the
    list's length: per node + 1 (the empty history is -1), the newest child made in this step
    (``children``) and the newest thread with that history (``newest``); per node, the child
    made before it with the same parent (``siblings``); per thread, the thread before it
    with the same history (``previous``). Entries are never cleared, only believed where
    they check out (shared_node, _newest)."""

    children: np.ndarray
    siblings: np.ndarray
    newest: np.ndarray
    previous: np.ndarray


NO_BOUND = 1 << 62  # the bound of searches that keep one thread a place (not ALL MATCHES)


def program(code, conditions, arrays, n: int, complete: bool = True, base: int = 0, maxlength: int = -1,
            bounds: tuple[int, int] = (NO_BOUND, NO_BOUND), horizon: float = np.nan) -> Program:
    """A Program from the automaton ``code`` (op, a, Closures, loop slots), the kernel spec's
    ``conditions`` (reg_member, reg_kind, dyn_int, dyn_float) and the partition's ``arrays``
    (masks, cols, valid, order0, within or None), with every scalar of one type, so that
    numba compiles each search once."""
    op, a, cl, n_slots = code
    reg_member, reg_kind, dyn_int, dyn_float = conditions
    masks, cols, valid, order0, within = arrays
    return Program(op, a, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, int(n), bool(complete),
                   int(base), int(maxlength), within is not None, order0,
                   float(within) if within is not None else 0.0, int(reg_member.shape[0]), int(n_slots),
                   int(bounds[0]), int(bounds[1]), float(horizon))


def closure_table(prog) -> Closures:
    """The program's (compile.program.Program) closures as ``Closures``."""
    size = len(prog.instructions) + 1
    lo = np.zeros(size, dtype=np.int64)
    hi = np.zeros(size, dtype=np.int64)
    target, flags, excl, ent_lo, ent_hi, chk_lo, chk_hi, is_accept, slots = [], [], [], [], [], [], [], [], []
    negates = []
    for pc, places in enumerate(prog.closures):
        lo[pc] = len(target)
        for p in places or ():
            target.append(p.pc)
            flags.append((1 if p.at_start else 0) | (2 if p.at_end else 0))
            excl.append(p.excl)
            ent_lo.append(len(slots))
            slots.extend(p.enters)
            ent_hi.append(len(slots))
            chk_lo.append(len(slots))
            slots.extend(p.checks)
            chk_hi.append(len(slots))
            is_accept.append(prog.instructions[p.pc].op == ACCEPT)
            negates.append(sum(1 << lab for lab in p.negates))
        hi[pc] = len(target)
    glide = np.full(size, -1, dtype=np.int64)
    for pc, ins in enumerate(prog.instructions):
        places = prog.closures[pc + 1] if ins.op == MATCH and pc + 1 < len(prog.closures) else None
        if places and _glides(prog, pc, places):
            glide[pc] = [p.pc for p in places].index(pc)

    def arr(xs, dtype=np.int64):
        return np.array(xs, dtype=dtype) if xs else np.zeros(0, dtype=dtype)
    return Closures(lo, hi, arr(target), arr(flags), arr(excl), arr(ent_lo), arr(ent_hi), arr(chk_lo), arr(chk_hi),
                    arr(slots), arr(is_accept, np.bool_), arr(negates), glide, bool((glide >= 0).any()))


def _glides(prog, pc, places) -> bool:
    """Whether the loop of MATCH ``pc`` keeps its threads' shape from row to row: its closure
    comes back to ``pc``, goes to distinct MATCH instructions of other variables only (no
    ACCEPT), and changes nothing on the way (no anchor, net exclusion change, loop slot or
    negation). A thread that takes the row there then becomes the same places again, with
    only its registers and history moved on."""
    targets = [p.pc for p in places]
    code = prog.instructions
    return (pc in targets and len(set(targets)) == len(targets)
            # another place of the same variable would take every row the loop takes
            and not any(code[t].a == code[pc].a for t in targets if t != pc)
            and all(code[p.pc].op == MATCH and not (p.at_start or p.at_end or p.excl or p.enters or p.checks
                                                    or p.negates) for p in places))


# ---- a thread and a row ------------------------------------------------------------------
# inline='always' (numba's own inlining) for the per-row and per-operand code: value, takes,
# closure_into and the step become one function with the search. A call with these argument
# lists cost more than the work it called: inlined, a thread step went from about 130 ns to
# 30 ns (MatchRegex finance4). Functions that never allocate run without reference counting
# (_nrt=False): the arrays they are handed stay alive in their caller, and the counting was
# most of the kernel's time.


@njit(_nrt=False, inline='always')
def _value(prog, d, side, pos, start, regs):
    """(value, ok) of operand ``side`` (0 left, 1 right) of dynamic comparison ``d`` for the
    row being labelled at ``pos``."""
    kind = prog.dyn_int[d, 2 + 4 * side]
    col = prog.dyn_int[d, 3 + 4 * side]
    reg = prog.dyn_int[d, 4 + 4 * side]
    phys = prog.dyn_int[d, 5 + 4 * side]
    lit = prog.dyn_float[d, 2 * side]
    scale = prog.dyn_float[d, 2 * side + 1]
    if kind == 0:
        return lit, True
    if kind == 4:  # a count register (it holds the count less one: threads start at -1)
        return (regs[reg] + 1) * scale + lit, True
    if kind >= 5:  # a register read as a value: a fold, an average or a label
        if kind == 7:  # a label register: the variable's number, or -1 for none (NULL)
            if regs[reg] < 0:
                return 0.0, False
            return float(regs[reg]), True
        # a sum, minimum or maximum (float64 bits); AVG: the sum over its count
        if regs[reg - 1] < 0:
            return 0.0, False  # no value yet: NULL
        v = regs.view(np.float64)[reg]
        if kind == 6:
            v = v / (regs[reg - 1] + 1)
        return v * scale + lit, True
    if kind == 1:
        r = pos + phys
    elif kind == 3:
        r = start + phys
    else:
        base = regs[reg]
        if base < 0:
            return 0.0, False
        r = base + phys
    if r < 0 or r >= prog.n or not prog.valid[col, r]:
        return 0.0, False
    return prog.cols[col, r] * scale + lit, True


@njit(_nrt=False)
def _compare(op, a, b):
    if op == 0:
        return a < b
    if op == 1:
        return a <= b
    if op == 2:
        return a > b
    if op == 3:
        return a >= b
    if op == 4:
        return a == b
    return a != b


@njit(_nrt=False, inline='always')
def takes(cur, i, label, pos, start, prog, regs):
    """Whether thread ``i`` of ``cur`` may label row ``pos`` with ``label``; fills ``regs``
    with its registers as they are after that row (LAST: this row; FIRST: if unset)."""
    if not prog.masks[label, pos]:
        return False
    n_regs = prog.n_regs
    for r in range(n_regs):
        regs[r] = cur[i, 2 + r]
    _fold(cur, i, label, pos, prog, regs)
    for d in range(prog.dyn_int.shape[0]):
        if prog.dyn_int[d, 0] != label:
            continue
        lv, lok = _value(prog, d, 0, pos, start, regs)
        if not lok:
            return False
        rv, rok = _value(prog, d, 1, pos, start, regs)
        if not rok or not _compare(prog.dyn_int[d, 1], lv, rv):
            return False
    return True


@njit(_nrt=False, inline='always')
def _fold(cur, i, label, pos, prog, regs):
    """The registers of thread ``i`` after it labels row ``pos`` with ``label``, into regs."""
    folded = regs.view(np.float64)  # sums, minimums and maximums are float64 bits
    for r in range(prog.n_regs):
        if prog.reg_member[r, label]:
            code = prog.reg_kind[r] >> 6
            s = prog.reg_kind[r] & 63
            if code == 0:  # the last row
                regs[r] = pos
            elif code == 1:  # the first row
                if regs[r] < 0:
                    regs[r] = pos
            elif code == 2:  # a count of rows, less one
                regs[r] += 1
            elif code == 7:  # what register r - s held before this row
                regs[r] = cur[i, 2 + r - s]
            elif code == 8:  # the label of the last row
                regs[r] = label
            elif code == 9:  # the label of the first row
                if regs[r] < 0:
                    regs[r] = label
            elif prog.valid[s, pos]:
                v = prog.cols[s, pos]
                if code == 3:  # a count of non-NULL values, less one
                    regs[r] += 1
                elif cur[i, 2 + r - 1] < 0:  # the first value (its count, before this row, is 0)
                    folded[r] = v
                elif code == 4:
                    folded[r] = folded[r] + v
                elif code == 5:
                    if sql_less_number(v, folded[r]):
                        folded[r] = v
                elif sql_less_number(folded[r], v):
                    folded[r] = v


@njit(_nrt=False, inline='always')
def past_horizon(start, pos, order0, n, horizon, within):
    """Whether WITHIN ends a match from ``start`` at row ``pos`` of a stream's window whose
    later rows have not arrived (or are not sealed): rows come in time order, so if the
    next row (``pos`` if here, else any still to come, at least the watermark ``horizon``)
    is past WITHIN, so is every later one. NaN (no horizon) is never past."""
    nxt = order0[pos] if pos < n else horizon
    return nxt - order0[start] > within


@njit(_nrt=False, inline='always')
def extend(start, pos, limit, prog):
    """May a match from ``start`` take row ``pos``: 1 yes, 0 no, -1 not known yet (the row is
    past the window of a partition that goes on)."""
    if prog.maxlength >= 0 and pos - start + 1 > prog.maxlength:
        return 0
    if pos >= limit:
        if prog.complete:
            return 0
        if prog.use_within and past_horizon(start, pos, prog.order0, prog.n, prog.horizon, prog.within):
            return 0
        return -1
    if prog.use_within and not abs(prog.order0[pos] - prog.order0[start]) <= prog.within:  # NaN is never within
        return 0
    return 1


@njit(_nrt=False, inline='always')
def closure_into(t, h, pos, dest, dest_h, count, prog, u, by_history, chain, pend_col=-1):
    """Append to dest[count:] the threads ``t`` (history ``h``) becomes at row ``pos`` at the
    places the program's precomputed closure lists for its pc, in preference order, skipping
    any already there (finished threads compare by instruction only), into room the caller
    made; returns the new count. ``u`` is a scratch row. ``by_history`` (ALL MATCHES):
    threads with different histories are never duplicates, so only the threads with history
    ``h`` are compared, found through ``chain``: an ALL MATCHES list holds thousands of
    threads, and comparing with each made a step quadratic. ``pend_col`` (NFA^b's runs): the
    column collecting the labels negated on the way, checked at the next row taken."""
    cl = prog.cl
    W = t.shape[0]
    pc = t[0]
    for k in range(cl.lo[pc], cl.hi[pc]):
        f = cl.flags[k]
        if (f & 1) != 0 and pos + prog.base != 0:
            continue
        if (f & 2) != 0 and not (prog.complete and pos == prog.n):
            continue
        if _loop_took_no_row(t, k, pos, prog):
            continue
        for x in range(W):
            u[x] = t[x]
        u[0] = cl.target[k]
        u[1] += cl.excl[k]
        for j in range(cl.ent_lo[k], cl.ent_hi[k]):
            u[2 + prog.n_regs + cl.slots[j]] = pos
        if pend_col >= 0:
            u[pend_col] |= cl.negates[k]
        if not _listed(u, h, dest, dest_h, count, cl.is_accept[k], by_history, chain):
            for x in range(W):
                dest[count, x] = u[x]
            dest_h[count] = h
            if by_history:
                chain.previous[count] = _newest(chain, h, dest_h, count)
                chain.newest[h + 1] = count
            count += 1
    return count


@njit(_nrt=False, inline='always')
def _loop_took_no_row(t, k, pos, prog):
    """Whether place ``k`` closes a loop whose iteration took no row (SQL: an empty
    iteration ends the loop)."""
    cl = prog.cl
    for j in range(cl.chk_lo[k], cl.chk_hi[k]):
        if t[2 + prog.n_regs + cl.slots[j]] == pos:
            return True
    return False


@njit(_nrt=False, inline='always')
def _listed(u, h, dest, dest_h, count, accept, by_history, chain):
    """Whether thread ``u`` is already in dest[:count] (an ACCEPT by instruction only)."""
    W = u.shape[0]
    j = _newest(chain, h, dest_h, count) if by_history else count - 1
    while j >= 0:
        if accept:
            same = dest[j, 0] == u[0]
        else:
            same = True
            for x in range(W):
                if dest[j, x] != u[x]:
                    same = False
                    break
        if same:
            return True
        j = chain.previous[j] if by_history else j - 1
    return False


@njit(_nrt=False, inline='always')
def _newest(chain, h, dest_h, count):
    """The last of dest[:count] with history ``h``, or -1 (Chain.newest is never cleared: an
    entry is believed only where that thread has that history, which an entry left from an
    earlier step or search cannot show without being right)."""
    j = chain.newest[h + 1]
    return j if 0 <= j < count and dest_h[j] == h else -1


@njit(_nrt=False, inline='always')
def widest(cl):
    """The most places one pc's closure lists (at least 1)."""
    most = 1
    for k in range(cl.lo.shape[0]):
        most = max(most, cl.hi[k] - cl.lo[k])
    return most


@njit
def grow(arr, need):
    """``arr``, or a copy with room for ``need`` (at least twice as long)."""
    if need <= arr.shape[0]:
        return arr
    out = np.empty(max(need, arr.shape[0] * 2), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


# ---- history ------------------------------------------------------------------------------


@njit(_nrt=False, inline='always')
def history_node(label, flag, parent, n_hist, hist):
    """(node, node count) for a thread that labelled this row ``label`` after node
    ``parent``, in the room the caller made (ALL MATCHES shares equal label paths:
    shared_node)."""
    hist.label[n_hist] = label
    hist.excl[n_hist] = flag
    hist.parent[n_hist] = parent
    return n_hist, n_hist + 1


@njit(_nrt=False, inline='always')
def shared_node(label, flag, parent, step_first, n_hist, hist, chain):
    """history_node for ALL MATCHES: the node this step (its nodes from ``step_first``)
    already made for the same label path, found among the step's children of ``parent``."""
    x = chain.children[parent + 1]
    newest = x if step_first <= x < n_hist and hist.parent[x] == parent else -1
    x = newest
    while x >= 0:  # each link was believed when it was made: this step's children of parent
        if hist.label[x] == label and hist.excl[x] == flag:
            return x, n_hist
        x = chain.siblings[x]
    hist.label[n_hist] = label
    hist.excl[n_hist] = flag
    hist.parent[n_hist] = parent
    chain.siblings[n_hist] = newest
    chain.children[parent + 1] = n_hist
    return n_hist, n_hist + 1


@njit
def read_labels(h, hist, out_l, out_e, at):
    """Write the labels of history node ``h`` (oldest first) at out[at:]; returns count."""
    k = 0
    x = h
    while x >= 0:
        k += 1
        x = hist.parent[x]
    x = h
    i = k - 1
    while x >= 0:
        out_l[at + i] = hist.label[x]
        out_e[at + i] = hist.excl[x]
        i -= 1
        x = hist.parent[x]
    return k


MARK = -2  # ALL MATCHES: a thread-list entry that is a finished match (column 1: its end)


@njit(_nrt=False)
def finished(nxt, nxt_h, nn, acc_end, acc_h):
    """ALL MATCHES: the finished threads (MARK) of the last step, in preference order, into
    acc_end and acc_h (room for ``nn``); returns their count."""
    count = 0
    for i in range(nn):
        if nxt[i, 0] == MARK:
            acc_end[count] = nxt[i, 1]
            acc_h[count] = nxt_h[i]
            count += 1
    return count
