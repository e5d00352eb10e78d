"""The thread-list matcher compiled with numba, for plans kernel_spec accepts.

Same algorithm as runtime.vm (threads in preference order, merged when their futures cannot
differ, ACCEPT cutting everything less preferred), over:
- masks[label, row]: the row-local parts of the conditions (compile.vectorize);
- dynamic comparisons read from per-thread registers (first/last rows of variables);
- a history arena (label, excluded, parent) from which a match's labels are read back.

``select`` runs a whole partition's match selection (AFTER MATCH SKIP, matchregex) in one
call; ``select_window`` resumes it over a stream's sealed rows; ``candidates`` answers per
start row for the run strategy's windows. ``selection_search`` and ``selection_all`` (the
last section) are NFA^b's runs for the event selection strategies, on the same conditions.
"""

from __future__ import annotations

import numpy as np

from sparkcep.compile.program import (
    ACCEPT,
    MATCH,
)
from sparkcep.jit import njit

UNRESOLVED = -2
NO_MATCH = -1


# inline='always' (numba's own inlining) for the per-row and per-operand code: _value,
# _takes, _closure_into and _step become one function with the search. A call with these
# argument lists cost more than the work it called: inlined, a thread step went from about
# 130 ns to 30 ns (MatchRegex finance4).
@njit(_nrt=False, inline='always')
def _value(kind, col, reg, phys, lit, scale, pos, start, regs, cols, valid, n):
    """(value, ok) of one operand for the row being labelled at ``pos``."""
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
    if r < 0 or r >= n or not valid[col, r]:
        return 0.0, False
    return cols[col, r] * scale + lit, True


@njit(_nrt=False)
def _less(a, b):
    """a < b in SQL's order: NaN above every number (functions.library.sql_less)."""
    if a != a or b != b:
        return b != b and not a != a
    return a < b


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


@njit
def _grow(arr, need):
    if need <= arr.shape[0]:
        return arr
    out = np.empty(max(need, arr.shape[0] * 2), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


# Functions that never allocate run without reference counting (_nrt=False): the arrays they
# are handed stay alive in their caller, and the counting was most of the kernel's time.
@njit(_nrt=False, inline='always')
def _closure_into(t, h, pos, dest, dest_h, count, cl, n, complete, base, n_regs, u, by_history, chain,
                  pend_col=-1):
    """Append to dest[count:] the threads ``t`` (history ``h``) becomes at row ``pos`` at the
    places the program's precomputed closure lists for its pc (``cl``: closure_table), in
    preference order, skipping any already there (finished threads compare by instruction
    only), into room the caller made; returns the new count. ``u`` is a scratch row.
    ``by_history`` (ALL MATCHES): threads with different histories are never duplicates, so
    only the threads with history ``h`` are compared, found through ``chain`` (_history_chain):
    an ALL MATCHES list holds thousands of threads, and comparing with each made a step
    quadratic."""
    cl_lo, cl_hi, target, flags, excl, ent_lo, ent_hi, chk_lo, chk_hi, slot_list, is_accept, negates, _, _ = cl
    W = t.shape[0]
    pc = t[0]
    for k in range(cl_lo[pc], cl_hi[pc]):
        f = flags[k]
        if (f & 1) != 0 and pos + base != 0:
            continue
        if (f & 2) != 0 and not (complete and pos == n):
            continue
        ok = True
        for j in range(chk_lo[k], chk_hi[k]):
            if t[2 + n_regs + slot_list[j]] == pos:  # the loop's iteration took no row
                ok = False
                break
        if not ok:
            continue
        for x in range(W):
            u[x] = t[x]
        u[0] = target[k]
        u[1] += excl[k]
        for j in range(ent_lo[k], ent_hi[k]):
            u[2 + n_regs + slot_list[j]] = pos
        if pend_col >= 0:  # NFA^b runs: the labels negated on the way, checked at the next row taken
            u[pend_col] |= negates[k]
        accept = is_accept[k]
        dup = False
        newest = -1
        j = count - 1
        if by_history:
            newest = _newest(chain, h, dest_h, count)
            j = newest
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
                dup = True
                break
            j = chain[3][j] if by_history else j - 1
        if not dup:
            for x in range(W):
                dest[count, x] = u[x]
            dest_h[count] = h
            if by_history:
                chain[3][count] = newest
                chain[2][h + 1] = count
            count += 1
    return count


@njit(_nrt=False, inline='always')
def _newest(chain, h, dest_h, count):
    """The last of dest[:count] with history ``h``, or -1. chain[2] holds it per node (+1, for
    the empty history -1) and is never cleared: an entry is believed only where that thread
    has that history, which an entry left from an earlier step or search cannot show without
    being right (each thread with ``h`` appended since set it)."""
    j = chain[2][h + 1]
    return j if 0 <= j < count and dest_h[j] == h else -1


@njit(_nrt=False)
def _widest(cl):
    """The most places one pc's closure lists (at least 1)."""
    widest = 1
    for k in range(cl[0].shape[0]):
        widest = max(widest, cl[1][k] - cl[0][k])
    return widest


def closure_table(program):
    """The program's precomputed closures (compile.program.Place) as flat arrays for the
    kernel: per pc the range [lo, hi) of its places; per place its target, flags (1: ^,
    2: $), exclusion change, entered and checked loop slots (ranges into one slot list) and
    whether the target is ACCEPT, and the labels negated on the way (a bit each, SASE's !X);
    then, per pc, where a thread may glide (_glide): for a MATCH whose own closure comes back
    to it and asks nothing on the way, its place in that closure, else -1; last, whether
    any loop glides."""
    size = len(program.instructions) + 1
    lo = np.zeros(size, dtype=np.int64)
    hi = np.zeros(size, dtype=np.int64)
    target, flags, excl, ent_lo, ent_hi, chk_lo, chk_hi, is_accept, slots = [], [], [], [], [], [], [], [], []
    negates = []
    for pc, places in enumerate(program.closures):
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
            is_accept.append(program.instructions[p.pc].op == ACCEPT)
            negates.append(sum(1 << lab for lab in p.negates))
        hi[pc] = len(target)
    glide = np.full(size, -1, dtype=np.int64)
    for pc, ins in enumerate(program.instructions):
        places = program.closures[pc + 1] if ins.op == MATCH and pc + 1 < len(program.closures) else None
        if places and _glides(program, pc, places):
            glide[pc] = [p.pc for p in places].index(pc)

    def arr(xs, dtype=np.int64):
        return np.array(xs, dtype=dtype) if xs else np.zeros(0, dtype=dtype)
    return (lo, hi, arr(target), arr(flags), arr(excl), arr(ent_lo), arr(ent_hi), arr(chk_lo), arr(chk_hi),
            arr(slots), arr(is_accept, np.bool_), arr(negates), glide, bool((glide >= 0).any()))


def _glides(program, pc, places) -> bool:
    """Whether the loop of MATCH ``pc`` keeps its threads' shape from row to row: its closure
    comes back to ``pc``, goes to distinct MATCH instructions of other variables only (no
    ACCEPT), and changes nothing on the way (no anchor, net exclusion change, loop slot or
    negation). A thread that takes the row there then becomes the same places again, with
    only its registers and history moved on."""
    targets = [p.pc for p in places]
    code = program.instructions
    return (pc in targets and len(set(targets)) == len(targets)
            # another place of the same variable would take every row the loop takes
            and not any(code[t].a == code[pc].a for t in targets if t != pc)
            and all(code[p.pc].op == MATCH and not (p.at_start or p.at_end or p.excl or p.enters or p.checks
                                                    or p.negates) for p in places))


GROW = -3  # _search: a buffer is too small (need[] says how large); grow them and search again
TOO_MANY = -4  # _search, ALL MATCHES: more threads and matches held than the bound
TOO_LONG = -5  # _search, ALL MATCHES: more history nodes made than the bound
TOO_MANY_RUNS = 3  # select's error code for TOO_MANY (codes 1 and 2: compile.skip)
TOO_MANY_NODES = 4  # select's error code for TOO_LONG
NO_BOUND = 1 << 62  # the bound of searches that keep one thread a place (not ALL MATCHES)
REOPEN = 4096  # _search: how many searches a shut glide gate stays shut


@njit
def _work(n_regs, n_slots, stats):
    """A search's buffers, allocated once per call and reused by every search; ``stats``
    (stats[0]: the most threads alive at once; [1]: thread steps; [2]: searches; [3]: rows
    glided; [4]: glides begun; [5]: ALL MATCHES, the most history nodes one search made).
    The last is ALL MATCHES' chain (_history_chain)."""
    return _sized(2 + n_regs + n_slots, max(n_regs, 1), 64, 256, 16, stats)  # row: pc, excl, regs, slots


@njit
def _sized(W, n_regs, threads, hist, acc, stats):
    """(cur, cur_h, nxt, nxt_h, stats, scratch rows, registers, history label, excluded,
    parent, ALL MATCHES' accepted ends and nodes, ALL MATCHES' chain). Scratch rows: 0 the
    closure's current thread, 1 an advancing thread, 2 the first thread."""
    return (np.empty((threads, W), dtype=np.int64), np.empty(threads, dtype=np.int64),
            np.empty((threads, W), dtype=np.int64), np.empty(threads, dtype=np.int64), stats,
            np.empty((3, W), dtype=np.int64), np.empty(n_regs, dtype=np.int64), np.empty(hist, dtype=np.int64),
            np.empty(hist, dtype=np.int64), np.empty(hist, dtype=np.int64), np.empty(acc, dtype=np.int64),
            np.empty(acc, dtype=np.int64), _history_chain(threads, hist))


@njit
def _history_chain(threads, hist):
    """ALL MATCHES' links, so that a step finds what it shares in time independent of the
    list's length: per node + 1, the newest child made in this step (0) and the newest
    thread with that history (2); per node, the child made before it with the same parent
    (1); per thread, the thread before it with the same history (3). Entries are never
    cleared, only believed where they check out (_shared_node, _newest)."""
    return (np.full(hist + 1, -1, dtype=np.int64), np.full(hist, -1, dtype=np.int64),
            np.full(hist + 1, -1, dtype=np.int64), np.full(threads, -1, dtype=np.int64))


@njit
def _grown(bufs, need):
    """Fresh buffers at least as large as ``need`` asks (threads, history nodes, accepted
    matches), doubling what is short: a search that said GROW starts again, so nothing is
    copied."""
    cur, hist, acc = bufs[0], bufs[7], bufs[10]
    threads = max(need[0], 2 * cur.shape[0]) if need[0] > cur.shape[0] else cur.shape[0]
    nodes = max(need[1], 2 * hist.shape[0]) if need[1] > hist.shape[0] else hist.shape[0]
    ends = max(need[2], 2 * acc.shape[0]) if need[2] > acc.shape[0] else acc.shape[0]
    return _sized(cur.shape[1], bufs[6].shape[0], threads, nodes, ends, bufs[4])


@njit(_nrt=False, inline='always')
def _takes(cur, i, label, pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n,
           n_regs, regs):
    """Whether thread ``i`` may label row ``pos`` with ``label``; fills ``regs`` with its
    registers as they are after that row (LAST: this row; FIRST: if unset)."""
    if not masks[label, pos]:
        return False
    for r in range(n_regs):
        regs[r] = cur[i, 2 + r]
    folded = regs.view(np.float64)  # sums, minimums and maximums are float64 bits
    for r in range(n_regs):
        if reg_member[r, label]:
            code = reg_kind[r] >> 6
            s = reg_kind[r] & 63
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
            elif valid[s, pos]:
                v = cols[s, pos]
                if code == 3:  # a count of non-NULL values, less one
                    regs[r] += 1
                elif cur[i, 2 + r - 1] < 0:  # the first value (its count, before this row, is 0)
                    folded[r] = v
                elif code == 4:
                    folded[r] = folded[r] + v
                elif code == 5:
                    if _less(v, folded[r]):
                        folded[r] = v
                elif _less(folded[r], v):
                    folded[r] = v
    for d in range(dyn_int.shape[0]):
        if dyn_int[d, 0] != label:
            continue
        lv, lok = _value(dyn_int[d, 2], dyn_int[d, 3], dyn_int[d, 4], dyn_int[d, 5],
                         dyn_float[d, 0], dyn_float[d, 1], pos, start, regs, cols, valid, n)
        if not lok:
            return False
        rv, rok = _value(dyn_int[d, 6], dyn_int[d, 7], dyn_int[d, 8], dyn_int[d, 9],
                         dyn_float[d, 2], dyn_float[d, 3], pos, start, regs, cols, valid, n)
        if not rok or not _compare(dyn_int[d, 1], lv, rv):
            return False
    return True


@njit(_nrt=False)
def _extend(start, pos, maxlength, limit, complete, use_within, order0, within):
    """May a match from ``start`` take row ``pos``: 1 yes, 0 no, -1 not known yet (the row is
    past the window of a partition that goes on)."""
    if maxlength >= 0 and pos - start + 1 > maxlength:
        return 0
    if pos >= limit:
        return 0 if complete else -1
    if use_within and not abs(order0[pos] - order0[start]) <= within:  # NaN is never within
        return 0
    return 1


@njit(_nrt=False)
def _finished(nxt, nxt_h, nn, acc_end, acc_h):
    """ALL MATCHES: the finished threads (MARK) of the last step, in preference order, into
    acc_end and acc_h (room for ``nn``); returns their count."""
    count = 0
    for i in range(nn):
        if nxt[i, 0] == MARK:
            acc_end[count] = nxt[i, 1]
            acc_h[count] = nxt_h[i]
            count += 1
    return count


# The search and the loops over starts that call it never allocate, so no reference is
# counted per start: that cost more than the search itself where most starts fail at once.
@njit(_nrt=False)
def _search(start, how, limit, prog, bufs, need):
    """From ``start``: how 0, the preferred match; 1, the most preferred of those that end
    first (matchregex); 2, every match (ALL MATCHES), each label assignment once, most
    preferred first. ``prog``: the partition's program and columns (_program); ``bufs``:
    _work's buffers; rows from ``limit`` on are not taken. Returns (end or count, history
    node): for 0/1 the end is NO_MATCH or UNRESOLVED when there is none; for 2 the matches
    are bufs' accepted (end, node) pairs below the count. GROW: a buffer is too small, need[]
    says how large (threads, nodes, matches). TOO_MANY (ALL MATCHES): after reading the row
    returned in place of the node, more than the program's max_runs threads and finished
    matches were held (runtime.vm.Matcher counts the same list); TOO_LONG: more than its
    max_nodes history nodes were made (the Python matcher's label paths, shared alike).

    ALL MATCHES follows runtime.vm: threads differ by history (identical label paths share
    one node), and a finished match keeps its place in the thread list (as MARK), so the
    order of the matches is preference order."""
    (op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, complete, base, maxlength,
     use_within, order0, within, n_regs, n_slots, max_runs, max_nodes) = prog
    cur, cur_h, nxt, nxt_h, stats, scratch, regs, hist_label, hist_excl, hist_parent, acc_end, acc_h, chain = bufs
    every = how == 2
    # Some loop may glide (_glide). Gliding pays where loops run long; where they run a row or
    # so (RIP Q3: 0.4 rows a glide) its checks cost more than they save, so after 64 glides
    # searches stop trying unless the glides average a row each. A stream's rows may change:
    # every REOPEN searches, a shut gate opens and measures afresh.
    shut = stats[4] >= 64 and stats[3] < stats[4]
    if cl[13] and shut and stats[2] % REOPEN == REOPEN - 1:
        stats[3] = 0
        stats[4] = 0
        shut = False
    saved = (stats[1], stats[3], stats[4])
    stats[2] += 1
    widest = _widest(cl)  # the most threads one thread's closure can add
    gliding = cl[13] and not shut
    if widest > cur.shape[0]:
        return _regrow(stats, saved, need, 0, widest)
    n_hist = np.int64(0)  # not a literal (see _select_all)
    init = scratch[2]
    init[:] = -1
    init[0] = 0
    init[1] = 0
    ncur = _closure_into(init, -1, start, cur, cur_h, 0, cl, n, complete, base, n_regs, scratch[0], every, chain)
    if ncur > stats[0]:
        stats[0] = ncur
    pos = start
    best_end = NO_MATCH
    best_h = -1
    while True:
        stats[1] += ncur
        if how == 1:
            for i in range(ncur):
                if op_[cur[i, 0]] == ACCEPT:
                    return pos, cur_h[i]
        if gliding:
            pos, n_hist, dead = _glide(cur, cur_h, ncur, pos, start, limit, op_, a_, cl, masks, reg_member,
                                       reg_kind, dyn_int, dyn_float, cols, valid, n, complete, maxlength,
                                       use_within, order0, within, n_regs, regs, scratch, hist_label, hist_excl,
                                       hist_parent, n_hist, stats)
            if every:
                if n_hist > stats[5]:
                    stats[5] = n_hist
                if n_hist > max_nodes:  # a node a row: the row that passed the bound
                    return TOO_LONG, pos - (n_hist - max_nodes)
            if dead:  # what _step would find: no thread takes the row
                if every:  # and no finished match in the list (a glide's list has none)
                    return 0, -1
                return best_end, best_h
        extend = _extend(start, pos, maxlength, limit, complete, use_within, order0, within)
        # Room for this row's step, so that the step itself never allocates: a history node
        # per thread, and each thread's closure.
        if n_hist + ncur > hist_label.shape[0]:
            return _regrow(stats, saved, need, 1, n_hist + ncur)
        if ncur * widest > nxt.shape[0]:
            return _regrow(stats, saved, need, 0, ncur * widest)
        nn, n_hist, live, accepted, h_acc, unresolved = _step(
            cur, cur_h, ncur, nxt, nxt_h, every, pos, start, extend, op_, a_, cl, masks, reg_member, reg_kind,
            dyn_int, dyn_float, cols, valid, n, complete, base, n_regs, regs, scratch, hist_label, hist_excl,
            hist_parent, n_hist, chain)
        if unresolved:
            return UNRESOLVED, -1
        if nn > stats[0]:  # ALL MATCHES' finished matches too: they are held as long
            stats[0] = nn
        if every and nn > max_runs:  # a bound on what one search holds: assignments may multiply row by row
            return TOO_MANY, pos
        if every:
            if n_hist > stats[5]:
                stats[5] = n_hist
            if n_hist > max_nodes:  # and on its history: held threads may each add a node a row
                return TOO_LONG, pos
        if accepted:
            best_end = pos
            best_h = h_acc
        if not live:
            if every:
                if nn > acc_end.shape[0]:
                    return _regrow(stats, saved, need, 2, nn)
                return _finished(nxt, nxt_h, nn, acc_end, acc_h), -1
            return best_end, best_h
        cur, nxt = nxt, cur
        cur_h, nxt_h = nxt_h, cur_h
        ncur = nn
        pos += 1
    return best_end, best_h  # pragma: no cover


@njit(_nrt=False, inline='always')
def _glide(cur, cur_h, ncur, pos, start, limit, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float,
           cols, valid, n, complete, maxlength, use_within, order0, within, n_regs, regs, scratch, hist_label,
           hist_excl, hist_parent, n_hist, stats):
    """Rows that one loop's thread alone takes, read in one tight loop: (next row, node
    count, whether no thread takes that row: the search ends there).

    Where the threads are one thread's places after a loop's MATCH (closure_table's last
    array: a greedy ``GAP*`` is [GAP, LO]), a row that only a thread whose own closure is
    that list takes (GAP, or C of ``(B | C)*``) leaves them the same places, with its
    registers and a history node more. So rows are read here, with no thread list built,
    until two threads take a row, the one that does is not such a loop, no thread does, the
    window ends (_extend) or the history arena is full; _step goes on from that row.
    MatchRegex finance4's ``GAP*`` runs are long: this is most of its search."""
    glide = cl[12]
    j = -1
    for k in range(ncur):
        pc = cur[k, 0]
        if pc >= 0 and glide[pc] == k:  # not a finished match (MARK), at its place in its own closure
            j = k
            break
    if j < 0 or not _same_places(cl, cur[j, 0], cur, ncur):
        return pos, n_hist, False
    W = cur.shape[1]
    for k in range(ncur):  # the places of one thread: one history, same columns
        if cur_h[k] != cur_h[j]:
            return pos, n_hist, False
        for x in range(1, W):
            if cur[k, x] != cur[j, x]:
                return pos, n_hist, False
    stats[4] += 1
    flag = 1 if cur[j, 1] > 0 else 0
    kept = scratch[1]  # the registers of the thread that took the row, while the others are tried
    while n_hist < hist_label.shape[0]:
        if _extend(start, pos, maxlength, limit, complete, use_within, order0, within) != 1:
            break
        taker = -1
        for k in range(ncur):
            if _takes(cur, k, a_[cur[k, 0]], pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float, cols,
                      valid, n, n_regs, regs):
                if taker >= 0:
                    return pos, n_hist, False  # a branch: _step takes this row
                taker = k
                for r in range(n_regs):
                    kept[r] = regs[r]
        if taker < 0:
            return pos, n_hist, True  # no thread takes the row: the search ends here
        g = cur[taker, 0]
        # another loop of this list (C of (B | C)*): its closure must be the list too
        if taker != j and (glide[g] != taker or not _same_places(cl, g, cur, ncur)):
            return pos, n_hist, False
        hist_label[n_hist] = a_[g]
        hist_excl[n_hist] = flag
        hist_parent[n_hist] = cur_h[taker]
        for k in range(ncur):
            for r in range(n_regs):
                cur[k, 2 + r] = kept[r]
            cur_h[k] = n_hist
        n_hist += 1
        stats[1] += ncur
        stats[3] += 1
        pos += 1
    return pos, n_hist, False


@njit(_nrt=False, inline='always')
def _same_places(cl, g, cur, ncur):
    """Whether the closure after MATCH ``g`` is the places of ``cur``: the same targets, in
    order, no more."""
    lo = cl[0][g + 1]
    if cl[1][g + 1] - lo != ncur:
        return False
    for k in range(ncur):
        if cl[2][lo + k] != cur[k, 0]:
            return False
    return True


@njit(_nrt=False, inline='always')
def _regrow(stats, saved, need, k, size):
    """GROW, asking for ``size`` of buffer ``k`` (threads, nodes, matches); the search runs
    again, so its steps, glides and its count are taken back from stats (``saved``: steps,
    rows glided and glides when it began)."""
    stats[1] = saved[0]
    stats[3] = saved[1]
    stats[4] = saved[2]
    stats[2] -= 1
    need[k] = size
    return GROW, -1


@njit(_nrt=False)
def _next_match(pos, stop, limit, first_ok, prog, bufs, need):
    """The first start in [pos, stop) with a (preferred) match: (start, end, history node);
    (stop, NO_MATCH, -1) when there is none. An UNRESOLVED or GROW search stops the walk at
    its start."""
    while pos < stop:
        if first_ok[pos]:
            e, h = _search(pos, 0, limit, prog, bufs, need)
            if e >= 0 or e == UNRESOLVED or e == GROW:
                return pos, e, h
        pos += 1
    return stop, NO_MATCH, -1


@njit
def _program(op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, complete, base,
             maxlength, use_within, order0, within, n_regs, n_slots):
    """The fixed arguments of every search over one partition, as _search reads them (no
    ALL MATCHES: no bound on threads)."""
    return (op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, complete, base, maxlength,
            use_within, order0, within, n_regs, n_slots, NO_BOUND, NO_BOUND)


@njit(_nrt=False, inline='always')
def _step(cur, cur_h, ncur, nxt, nxt_h, every, pos, start, extend, op_, a_, cl, masks, reg_member, reg_kind,
          dyn_int, dyn_float, cols, valid, n, complete, base, n_regs, regs, scratch, hist_label, hist_excl,
          hist_parent, n_hist, chain):
    """Every thread of ``cur`` reads row ``pos`` (in preference order) into ``nxt``, in the
    room _search made: (threads, history nodes, any thread live, an ACCEPT reached first
    with its history node, a thread needs a row not seen yet)."""
    W = cur.shape[1]
    nn = 0
    live = False
    step_first = n_hist
    for i in range(ncur):
        pc = cur[i, 0]
        if every and (pc == MARK or op_[pc] == ACCEPT):
            for x in range(W):
                nxt[nn, x] = cur[i, x]
            nxt_h[nn] = cur_h[i]
            nn += 1
            if pc != MARK:
                nxt[nn - 1, 0] = MARK
                nxt[nn - 1, 1] = pos
            continue
        if op_[pc] == ACCEPT:
            return nn, n_hist, live, True, cur_h[i], False
        if extend == 0:
            continue
        if extend == -1:
            return nn, n_hist, live, False, -1, True
        label = a_[pc]
        if not _takes(cur, i, label, pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float,
                      cols, valid, n, n_regs, regs):
            continue
        flag = 1 if cur[i, 1] > 0 else 0
        if every:
            h, n_hist = _shared_node(label, flag, cur_h[i], step_first, n_hist, hist_label, hist_excl, hist_parent,
                                     chain)
        else:
            h, n_hist = history_node(label, flag, cur_h[i], step_first, n_hist, hist_label, hist_excl,
                                     hist_parent)
        t = scratch[1]
        for x in range(W):
            t[x] = cur[i, x]
        t[0] = pc + 1
        for r in range(n_regs):
            t[2 + r] = regs[r]
        live = True
        nn = _closure_into(t, h, pos + 1, nxt, nxt_h, nn, cl, n, complete, base, n_regs, scratch[0], every, chain)
    return nn, n_hist, live, False, -1, False


@njit(_nrt=False)
def history_node(label, flag, parent, step_first, n_hist, hist_label, hist_excl, hist_parent):
    """(node, node count) for a thread that labelled this row ``label`` after node ``parent``,
    in the room the caller made (ALL MATCHES shares equal label paths: _shared_node)."""
    hist_label[n_hist] = label
    hist_excl[n_hist] = flag
    hist_parent[n_hist] = parent
    return n_hist, n_hist + 1


@njit(_nrt=False, inline='always')
def _shared_node(label, flag, parent, step_first, n_hist, hist_label, hist_excl, hist_parent, chain):
    """history_node for ALL MATCHES: the node this step already made for the same label path,
    found among the step's children of ``parent`` (chain[0], chain[1]: _history_chain)."""
    x = chain[0][parent + 1]
    newest = x if step_first <= x < n_hist and hist_parent[x] == parent else -1
    x = newest
    while x >= 0:  # each link was believed when it was made: this step's children of parent
        if hist_label[x] == label and hist_excl[x] == flag:
            return x, n_hist
        x = chain[1][x]
    hist_label[n_hist] = label
    hist_excl[n_hist] = flag
    hist_parent[n_hist] = parent
    chain[1][n_hist] = newest
    chain[0][parent + 1] = n_hist
    return n_hist, n_hist + 1


@njit
def _read_labels(h, hist_label, hist_excl, hist_parent, out_l, out_e, at):
    """Write the labels of history node ``h`` (oldest first) at out[at:]; returns count."""
    k = 0
    x = h
    while x >= 0:
        k += 1
        x = hist_parent[x]
    x = h
    i = k - 1
    while x >= 0:
        out_l[at + i] = hist_label[x]
        out_e[at + i] = hist_excl[x]
        i -= 1
        x = hist_parent[x]
    return k


@njit
def _record(starts, ends, offs, labels, excl, nm, s, e, h, hist_label, hist_excl, hist_parent):
    """Append the match (s, e) with the labels of history node ``h``; arrays grow as needed."""
    if nm >= starts.shape[0]:
        starts = _grow(starts, nm + 1)
        ends = _grow(ends, nm + 1)
    if nm + 1 >= offs.shape[0]:
        offs = _grow(offs, nm + 2)
    length = e - s
    if offs[nm] + length >= labels.shape[0]:
        labels = _grow(labels, offs[nm] + length + 1)
        excl = _grow(excl, offs[nm] + length + 1)
    _read_labels(h, hist_label, hist_excl, hist_parent, labels, excl, offs[nm])
    starts[nm] = s
    ends[nm] = e
    offs[nm + 1] = offs[nm] + length
    return starts, ends, offs, labels, excl, nm + 1


MARK = -2  # ALL MATCHES: a thread-list entry that is a finished match (column 1: its end)


@njit
def _resume(skip_mode, skip_member, labels, offs, nm, s, e):
    """(next start row, error code) after the non-empty match [s, e) just recorded as match
    nm - 1: compile.skip.SkipStrategy's rule (codes 0 past last row, 1 next row, 2/3 to the
    first/last row of a target label; errors 1 no target row, 2 the match's own first row)."""
    if skip_mode == 0:
        return e, 0
    if skip_mode == 1:
        return s + 1, 0
    target = -1
    for i in range(e - s):
        if skip_member[labels[offs[nm - 1] + i]]:
            target = s + i
            if skip_mode == 2:
                break
    if target < 0:
        return s, 1
    if target == s:
        return s, 2
    return target, 0


@njit
def _after_match(skip_mode, skip_member, labels, offs, nm, s, e, covered):
    """(next start, last covered row, error code) after match nm - 1, [s, e), was recorded:
    an empty match moves one row on; any other, AFTER MATCH SKIP (_resume)."""
    if e == s:
        return s + 1, covered, 0
    if e - 1 > covered:
        covered = e - 1
    pos, err = _resume(skip_mode, skip_member, labels, offs, nm, s, e)
    return pos, covered, err


@njit
def _matches():
    """Growable arrays of recorded matches: starts, ends, label offsets, labels, excluded."""
    return (np.empty(16, dtype=np.int64), np.empty(16, dtype=np.int64), np.zeros(17, dtype=np.int64),
            np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64))


@njit
def _begin(prog, n, stats):
    """A whole partition's selection before its first search: (search buffers, need, the
    recorded matches' arrays (_matches), unmatched rows)."""
    return _work(prog[17], prog[18], stats), np.zeros(3, dtype=np.int64), _matches(), np.zeros(n, dtype=np.bool_)


@njit
def _select_all(prog, n, want_unmatched, first_ok, stats):
    """select() for ALL MATCHES: every match from every row."""
    bufs, need, (starts, ends, offs, labels, excl), unmatched = _begin(prog, n, stats)
    nm = 0
    covered = -1
    pos = np.int64(0)  # not the literal 0: a literal start would compile the search once more
    while pos < n:
        k = 0
        if first_ok[pos]:
            k, at = _search(pos, 2, n, prog, bufs, need)
            if k == GROW:
                bufs = _grown(bufs, need)
                continue
            if k == TOO_MANY or k == TOO_LONG:
                code = TOO_MANY_RUNS if k == TOO_MANY else TOO_MANY_NODES
                return starts[:nm], ends[:nm], offs[: nm + 1], labels, excl, unmatched, code, at
        for j in range(k):
            end = bufs[10][j]
            starts, ends, offs, labels, excl, nm = _record(starts, ends, offs, labels, excl, nm, pos, end,
                                                           bufs[11][j], bufs[7], bufs[8], bufs[9])
            if end - 1 > covered:
                covered = end - 1
        if k == 0 and want_unmatched and pos > covered:
            unmatched[pos] = True
        pos += 1
    return starts[:nm], ends[:nm], offs[: nm + 1], labels, excl, unmatched, 0, -1


@njit
def _searched(start, how, limit, prog, bufs, need):
    """_search, growing the buffers until it fits: (end, node, buffers)."""
    while True:
        e, h = _search(start, how, limit, prog, bufs, need)
        if e != GROW:
            return e, h, bufs
        bufs = _grown(bufs, need)


@njit
def _earliest(prog, pos, n, first_ok, bufs, need):
    """matchregex: among matches from pos on that start before the best end so far, the
    earliest-ending one (the longest of those): (start, end, history node, buffers), or
    start -1. A later start wins only with an earlier end, so its search stops at the best
    end so far (no thread needs to look past it); the chosen start is searched again at the
    end, as later searches reused the history arena."""
    best_s = -1
    best_e = -1
    s = pos
    while s < n and (best_s < 0 or s <= best_e - 1):
        if first_ok[s]:
            limit = n if best_s < 0 else best_e - 1
            e, h = _search(s, 1, limit, prog, bufs, need)
            if e == GROW:
                bufs = _grown(bufs, need)
                continue
            if e >= 0 and (best_s < 0 or e - 1 < best_e - 1):
                best_s, best_e = s, e
        s += 1
    h = -1
    if best_s >= 0:
        best_e, h, bufs = _searched(best_s, 1, n, prog, bufs, need)
    return best_s, best_e, h, bufs


def select(skip_mode, matchregex, skip_member, want_unmatched, op_, a_, cl, masks, reg_member,
           reg_kind, dyn_int, dyn_float, cols, valid, n, maxlength, use_within, order0, within,
           n_regs, n_slots, first_ok, stats, max_runs, max_nodes):
    """The whole partition's selected matches, in order: (starts, ends, label offsets,
    labels, excluded, unmatched rows, error code, error row). Error codes: 1 skip target
    absent from the match, 2 skip to the match's own first row, TOO_MANY_RUNS more than
    ``max_runs`` threads and finished matches of one ALL MATCHES search held at once,
    TOO_MANY_NODES more than ``max_nodes`` history nodes made by one. ``first_ok[row]`` is False
    where no match can start (no variable that can come first matches the row).

    Each kind of selection is its own compiled function, whose search is specialised on
    its constant kind (60-65 % of the time of a search that tests it per row: finance4, RIP
    Q3), and compiled only when a query first needs it."""
    # _program's layout, built here in Python: a compiled call returning it costs ~10 us
    prog = (op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, True, 0, maxlength,
            use_within, order0, within, n_regs, n_slots, max_runs if skip_mode == 4 else NO_BOUND,
            max_nodes if skip_mode == 4 else NO_BOUND)
    if skip_mode == 4:  # ALL MATCHES: every match from every row
        return _select_all(prog, n, want_unmatched, first_ok, stats)
    if matchregex:
        return _select_earliest(prog, n, want_unmatched, first_ok, stats)
    return _select_preferred(skip_mode, skip_member, prog, n, want_unmatched, first_ok, stats)


@njit
def _preferred(pos, covered, stop, limit, skip_mode, skip_member, prog, first_ok, bufs, need, unmatched):
    """SQL's preferred match from each leftmost start in [pos, stop), AFTER MATCH SKIP after
    each, until a start's answer needs rows not seen yet (UNRESOLVED). ``unmatched`` (empty
    where not wanted): the starts passed over are marked unless inside a match. Returns
    (starts, ends, label offsets, labels, excluded, next start, covered, error code)."""
    starts, ends, offs, labels, excl = _matches()
    nm = 0
    while pos < stop:
        s, e, h = _next_match(pos, stop, limit, first_ok, prog, bufs, need)
        if unmatched.shape[0]:
            unmatched[max(pos, covered + 1):s] = True
        pos = s
        if e == GROW:
            bufs = _grown(bufs, need)
            continue
        if e < 0:  # UNRESOLVED: that start waits for more rows; NO_MATCH: pos is stop
            break
        starts, ends, offs, labels, excl, nm = _record(starts, ends, offs, labels, excl, nm, s, e, h,
                                                       bufs[7], bufs[8], bufs[9])
        pos, covered, err = _after_match(skip_mode, skip_member, labels, offs, nm, s, e, covered)
        if err:
            return starts[:nm], ends[:nm], offs[: nm + 1], labels, excl, s, covered, err
    return starts[:nm], ends[:nm], offs[: nm + 1], labels, excl, pos, covered, 0


@njit
def _select_preferred(skip_mode, skip_member, prog, n, want_unmatched, first_ok, stats):
    """select() for SQL's preferred match over a whole partition."""
    bufs, need, _, unmatched = _begin(prog, n, stats)
    # int64 counters, not literals: a literal start would compile the search once more
    starts, ends, offs, labels, excl, pos, _, err = _preferred(
        np.int64(0), np.int64(-1), n, n, skip_mode, skip_member, prog, first_ok, bufs, need,
        unmatched if want_unmatched else np.zeros(0, dtype=np.bool_))
    return starts, ends, offs, labels, excl, unmatched, err, pos if err else -1


@njit
def _select_earliest(prog, n, want_unmatched, first_ok, stats):
    """select() for matchregex: the earliest-ending match (_earliest), then on from its end."""
    bufs, need, (starts, ends, offs, labels, excl), unmatched = _begin(prog, n, stats)
    nm = 0
    pos = np.int64(0)  # not the literal 0: a literal start would compile the search once more
    while pos < n:
        s, e, h, bufs = _earliest(prog, pos, n, first_ok, bufs, need)
        if s < 0:
            if want_unmatched:
                unmatched[pos:] = True
            break
        if want_unmatched:
            unmatched[pos:s] = True
        starts, ends, offs, labels, excl, nm = _record(starts, ends, offs, labels, excl, nm, s, e, h,
                                                       bufs[7], bufs[8], bufs[9])
        pos = e if e > s else s + 1
    return starts[:nm], ends[:nm], offs[: nm + 1], labels, excl, unmatched, 0, -1


@njit
def select_window(pos, covered, stop, skip_mode, skip_member, op_, a_, cl, masks, reg_member, reg_kind, dyn_int,
                  dyn_float, cols, valid, n, limit, complete, base, maxlength, use_within, order0, within, n_regs,
                  n_slots, first_ok, stats):
    """select() resumed at start ``pos`` (``covered``: the last row inside a match so far) over
    the starts below ``stop`` (at most ``limit``) of rows of which later ones may not have
    arrived (a stream's sealed rows): it stops at the first start whose answer needs unseen
    rows. Returns
    (starts, ends, label offsets, labels, excluded, next start, covered, error code, error
    row). For the SQL selection without unmatched rows: not ALL MATCHES, not matchregex."""
    prog = _program(op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, complete, base,
                    maxlength, use_within, order0, within, n_regs, n_slots)
    starts, ends, offs, labels, excl, pos, covered, err = _preferred(
        pos, covered, min(stop, limit), limit, skip_mode, skip_member, prog, first_ok, _work(n_regs, n_slots, stats),
        np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.bool_))
    return starts, ends, offs, labels, excl, pos, covered, err, pos if err else -1


@njit
def select_windows(los, ns, limits, bases, poss, covereds, complete, skip_mode, skip_member, op_, a_, cl, masks,
                   reg_member, reg_kind, dyn_int, dyn_float, cols, valid, maxlength, use_within, order0, within,
                   n_regs, n_slots, first_ok, stats):
    """select_window over many windows of one table in one call (a stream's bucket: each key's
    sealed rows): window k is rows [los[k], los[k] + ns[k]) with its own limit, base, next
    start and covered row (local to it). Returns (match starts and ends as rows of the table,
    each match's window, label offsets, labels, excluded, next start and covered per window,
    error code, its window and row). Each window is copied out, so its arrays are those
    select_window reads for one partition."""
    m = los.shape[0]
    starts = np.empty(16, dtype=np.int64)
    ends = np.empty(16, dtype=np.int64)
    wins = np.empty(16, dtype=np.int64)
    offs = np.zeros(17, dtype=np.int64)
    labels = np.empty(64, dtype=np.int64)
    excl = np.empty(64, dtype=np.int64)
    pos_out = poss.copy()
    cov_out = covereds.copy()
    nm = 0
    nl = 0
    err = 0
    err_win = -1
    err_row = -1
    for k in range(m):
        lo = los[k]
        n = ns[k]
        o0 = order0[lo:lo + n].copy() if use_within else order0
        s, e, o, lab, x, p, c, err, err_row = select_window(
            poss[k], covereds[k], limits[k], skip_mode, skip_member, op_, a_, cl, masks[:, lo:lo + n].copy(),
            reg_member, reg_kind, dyn_int, dyn_float, cols[:, lo:lo + n].copy(), valid[:, lo:lo + n].copy(), n,
            limits[k], complete, bases[k], maxlength, use_within, o0, within, n_regs, n_slots,
            first_ok[lo:lo + n].copy(), stats)
        pos_out[k] = p
        cov_out[k] = c
        got = s.shape[0]
        starts = _grow(starts, nm + got)
        ends = _grow(ends, nm + got)
        wins = _grow(wins, nm + got)
        offs = _grow(offs, nm + got + 1)
        used = o[got]
        labels = _grow(labels, nl + used)
        excl = _grow(excl, nl + used)
        for i in range(used):
            labels[nl + i] = lab[i]
            excl[nl + i] = x[i]
        for i in range(got):
            starts[nm + i] = s[i] + lo
            ends[nm + i] = e[i] + lo
            wins[nm + i] = k
            offs[nm + i + 1] = nl + o[i + 1]
        nm += got
        nl += used
        if err:
            err_win = k
            break
    return starts[:nm], ends[:nm], wins[:nm], offs[:nm + 1], labels, excl, pos_out, cov_out, err, err_win, err_row


@njit
def candidates(first, last, want_earliest, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float,
               cols, valid, n, limit, complete, base, maxlength, use_within, order0, within, n_regs, n_slots,
               first_ok, stats):
    """Per start row in [first, last): end (NO_MATCH / UNRESOLVED) and label offsets."""
    starts = np.arange(first, last)
    if want_earliest:  # each kind a constant: the search is specialised on it
        return _found_at(starts, 1, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n,
                         limit, complete, base, maxlength, use_within, order0, within, n_regs, n_slots, first_ok,
                         stats)
    return _found_at(starts, 0, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, limit,
                     complete, base, maxlength, use_within, order0, within, n_regs, n_slots, first_ok, stats)


@njit
def labels_at(starts, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, limit,
              complete, base, maxlength, use_within, order0, within, n_regs, n_slots, stats):
    """The preferred match from each of ``starts`` (rows a selection already chose, as the
    automaton of runtime.automaton does) with its labels."""
    return _found_at(starts, 0, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, limit,
                     complete, base, maxlength, use_within, order0, within, n_regs, n_slots,
                     np.ones(n, dtype=np.bool_), stats)


@njit
def _found_at(starts, how, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, limit,
              complete, base, maxlength, use_within, order0, within, n_regs, n_slots, first_ok, stats):
    """What _search finds from each of ``starts`` (how 0: the preferred match, 1: the
    earliest-ending one): ends (NO_MATCH / UNRESOLVED) and label offsets into labels."""
    m = starts.shape[0]
    ends = np.empty(m, dtype=np.int64)
    offs = np.zeros(m + 1, dtype=np.int64)
    labels = np.empty(64, dtype=np.int64)
    excl = np.empty(64, dtype=np.int64)
    prog = _program(op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n, complete, base,
                    maxlength, use_within, order0, within, n_regs, n_slots)
    bufs = _work(n_regs, n_slots, stats)
    need = np.zeros(3, dtype=np.int64)
    for i in range(m):
        s = starts[i]
        if s < limit and not first_ok[s]:
            ends[i] = NO_MATCH
            offs[i + 1] = offs[i]
            continue
        e, h, bufs = _searched(s, how, limit, prog, bufs, need)
        ends[i] = e
        length = e - s if e >= 0 else 0
        if offs[i] + length >= labels.shape[0]:
            labels = _grow(labels, offs[i] + length + 1)
            excl = _grow(excl, offs[i] + length + 1)
        if e >= 0:
            _read_labels(h, bufs[7], bufs[8], bufs[9], labels, excl, offs[i])
        offs[i + 1] = offs[i] + length
    return ends, offs, labels, excl


@njit
def nonoverlapping(hits, delta):
    """The starts a fixed-length pattern's selection keeps: walking the candidate starts in
    order, each one at or after the resume row of the last kept one (kept + ``delta``)."""
    out = np.empty(hits.shape[0], dtype=np.int64)
    m = 0
    resume = -1
    for st in hits:
        if st >= resume:
            out[m] = st
            m += 1
            resume = st + delta
    return out[:m]

# ---------------------------------------------------------------- NFA^b runs
# NFA^b's search (runtime.nfab) compiled, for plans kernel_spec accepts with an event
# selection strategy (negation included). It lives in this file because numba keys a cached
# function by its own source file only: a function calling into another file would keep
# running that file's old code after an edit.
#
# A run is a row of int64: the kernel thread's columns (pc of its continuation, exclusion
# depth, registers, loop slots), the label of its last selected row, the labels negated
# since (PEND, a bit each, only on closure items), that row, and whether it selected the
# row before the one being read (FRESH). At each row a run follows
# the program's precomputed closure (_closure_into) to the MATCH instructions it can
# take next and, as runtime.nfab decides, may also ignore the row (skip till next / any
# match). Preference is list order, as in the kernel: a run's successors in the order of the
# MATCH instructions they take, the run that ignores the row right after the last of them.
#
# ``selection_search`` answers for one start row: the preferred match (SQL's output modes), or every
# match, most preferred first (ALL MATCHES: a finished match keeps its place in the list as
# a MARK, as _search does). History nodes record (label, excluded, row, parent), so a
# match reads back its rows, which event selection leaves gapped. Runs whose futures cannot
# differ are merged (the first kept): for the preferred match the history does not count, for
# ALL MATCHES it does (identical histories give identical matches).

# Event selection strategies.
PARTITION, STRICT, NEXT, ANY = 0, 1, 2, 3
STRATEGY = {"PARTITION": PARTITION, "STRICT": STRICT, "NEXT": NEXT, "ANY": ANY}


@njit(_nrt=False, inline='always')
def _same_run(dest, j, run, n_key):
    """Whether run ``dest[j]`` equals ``run`` in the first ``n_key`` columns and the last
    one (FRESH)."""
    W = run.shape[0]
    if dest[j, W - 1] != run[W - 1]:
        return False
    for x in range(n_key):
        if dest[j, x] != run[x]:
            return False
    return True


@njit(_nrt=False, inline='always')
def _put(run, h, dest, dest_h, count):
    for x in range(run.shape[0]):
        dest[count, x] = run[x]
    dest_h[count] = h


@njit(_nrt=False)
def _append(run, h, dest, dest_h, count, n_key):
    """Append run ``run`` (history ``h``) to dest[count:] unless an equal one (_same_run)
    is there."""
    for j in range(count):
        if dest[j, 0] != MARK and _same_run(dest, j, run, n_key):
            return count
    _put(run, h, dest, dest_h, count)
    return count + 1


@njit(_nrt=False)
def _append_by_history(run, h, dest, dest_h, count, n_key, last_with, stamp, link, step):
    """_append for ALL MATCHES, where equal runs also have equal histories: only the runs of
    history ``h`` appended in this ``step`` are compared, chained from last_with[h + 1]
    (valid where stamp[h + 1] is this step) through ``link``. A scan of every run made each
    row cost the square of the runs, which ALL MATCHES of A B* C* D grows by one a row."""
    first = last_with[h + 1] if stamp[h + 1] == step else -1
    j = first
    while j >= 0:
        if _same_run(dest, j, run, n_key):
            return count
        j = link[j]
    _put(run, h, dest, dest_h, count)
    link[count] = first
    last_with[h + 1] = count
    stamp[h + 1] = step
    return count + 1


@njit
def _grow_filled(arr, need, fill):
    """_grow with the new entries set to ``fill``."""
    if need <= arr.shape[0]:
        return arr
    out = np.full(max(need, arr.shape[0] * 2), fill, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@njit
def selection_search(start, how, selection, negated, adjacent, op_, a_, cl, masks, reg_member, reg_kind, dyn_int,
                     dyn_float, cols, valid, n, maxlength, use_within, order0, within, n_regs, n_slots, max_runs,
                     max_nodes, arena, stats):
    """From ``start``: how 0, the preferred match; 2, every match, most preferred first.
    Returns (count, ends, history nodes, arena): how 0 gives count 1 with its end and node,
    or 0; count -1 when more than ``max_runs`` runs were alive at once, or (every match)
    more than ``max_nodes`` history nodes were made (the Python matcher then reports the
    row); the arena (label, excluded, row, parent per history node) may
    have grown."""
    hist_label, hist_excl, hist_row, hist_parent = arena
    every = how == 2
    W = 2 + n_regs + n_slots + 4
    LAB, PEND, LAST, FRESH = W - 4, W - 3, W - 2, W - 1
    # The columns that say whether two runs have the same future: all but LAST, which only
    # strict contiguity and negation read (and the end of a match, which its history holds).
    n_key = W - 1 if selection == STRICT or negated else W - 2
    widest = _widest(cl)
    cap = 16
    cur = np.empty((cap, W), dtype=np.int64)
    cur_h = np.empty(cap, dtype=np.int64)
    nxt = np.empty((cap, W), dtype=np.int64)
    nxt_h = np.empty(cap, dtype=np.int64)
    items = np.empty((widest, W), dtype=np.int64)
    items_h = np.empty(widest, dtype=np.int64)
    unchained = (items_h, items_h, items_h, items_h)  # _closure_into's chain, unused: no history compared
    u = np.empty(W, dtype=np.int64)
    t = np.empty(W, dtype=np.int64)
    regs = np.empty(max(n_regs, 1), dtype=np.int64)
    # ALL MATCHES: per history node (+ 1, for the start's -1), the last run of the step with
    # it, and the step that was (_append_by_history); per run, the one before it.
    last_with = np.full(1 if not every else 256, -1, dtype=np.int64)
    stamp = np.full(last_with.shape[0], -1, dtype=np.int64)
    link = np.empty(cap, dtype=np.int64)
    # ALL MATCHES' shared history nodes: _shared_node's links (_history_chain's first two).
    children = np.full(last_with.shape[0], -1, dtype=np.int64)
    chain = (children, np.full(last_with.shape[0], -1, dtype=np.int64), children, children)
    cur[0, :] = -1
    cur[0, 0] = 0
    cur[0, 1] = 0
    cur[0, PEND] = 0
    cur[0, FRESH] = 1
    cur_h[0] = -1
    ncur = 1
    n_hist = 0
    n_marks = 0  # finished matches in the list (ALL MATCHES): not live runs
    best_end = NO_MATCH
    best_h = -1
    pos = start
    stats[2] += 1
    while True:
        stats[1] += ncur
        if ncur > stats[0]:
            stats[0] = ncur
        if ncur - n_marks > max_runs or (every and n_hist > max_nodes):
            return -1, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), (hist_label, hist_excl, hist_row, hist_parent)
        extend = _extend(start, pos, maxlength, n, True, use_within, order0, within)
        need = ncur * (widest + 1)
        if need > nxt.shape[0]:
            nxt = np.empty((need, W), dtype=np.int64)
            nxt_h = np.empty(need, dtype=np.int64)
        if every and link.shape[0] < nxt.shape[0]:  # after a swap nxt may be the larger list
            link = np.empty(nxt.shape[0], dtype=np.int64)
        if n_hist + ncur * widest > hist_label.shape[0]:
            hist_label = _grow(hist_label, n_hist + ncur * widest)
            hist_excl = _grow(hist_excl, n_hist + ncur * widest)
            hist_row = _grow(hist_row, n_hist + ncur * widest)
            hist_parent = _grow(hist_parent, n_hist + ncur * widest)
        if every and n_hist + ncur * widest + 1 > last_with.shape[0]:
            last_with = _grow_filled(last_with, n_hist + ncur * widest + 1, -1)
            stamp = _grow_filled(stamp, last_with.shape[0], -1)
            chain = (_grow_filled(chain[0], last_with.shape[0], -1), _grow_filled(chain[1], last_with.shape[0], -1),
                     children, children)
        nn = 0
        live = False
        cut = False
        step_first = n_hist
        for i in range(ncur):
            if cur[i, 0] == MARK:
                for x in range(W):
                    nxt[nn, x] = cur[i, x]
                nxt_h[nn] = cur_h[i]
                nn += 1
                continue
            ni = _closure_into(cur[i], cur_h[i], pos, items, items_h, 0, cl, n, True, 0, n_regs, u, False,
                                unchained, PEND)
            lab = cur[i, LAB]
            last_test = -1
            any_same = False
            for k in range(ni):
                if op_[items[k, 0]] != ACCEPT:
                    last_test = k
                    if a_[items[k, 0]] == lab:
                        any_same = True
            took_home = False
            for k in range(ni):
                pc = items[k, 0]
                if op_[pc] == ACCEPT:
                    if cur[i, FRESH] != 1:
                        continue
                    end = cur[i, LAST] + 1 if cur[i, LAST] >= 0 else start  # an empty match ends at its start
                    if not every:
                        best_end = end
                        best_h = cur_h[i]
                        cut = True
                        break
                    dup = False
                    for j in range(nn):
                        if nxt[j, 0] == MARK and nxt_h[j] == cur_h[i]:
                            dup = True
                            break
                    if not dup:
                        nxt[nn, 0] = MARK
                        nxt[nn, 1] = end
                        nxt_h[nn] = cur_h[i]
                        nn += 1
                        n_marks += 1
                    continue
                if extend == 1:
                    label = a_[pc]
                    if not (selection == STRICT and cur[i, LAST] >= 0 and not adjacent[pos]) and _negations_hold(
                            items, k, cur[i, LAST], pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float,
                            cols, valid, n, n_regs, regs, PEND) and _takes(
                            items, k, label, pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float,
                            cols, valid, n, n_regs, regs):
                        if not any_same or label == lab:
                            took_home = True
                        flag = 1 if items[k, 1] > 0 else 0
                        if every:
                            h, grown = _shared_node(label, flag, cur_h[i], step_first, n_hist, hist_label, hist_excl,
                                                    hist_parent, chain)
                        else:
                            h, grown = history_node(label, flag, cur_h[i], step_first, n_hist, hist_label, hist_excl,
                                                    hist_parent)
                        if grown > n_hist:  # a new node: its row too (event selection leaves gaps)
                            hist_row[h] = pos
                            n_hist = grown
                        for x in range(W):
                            t[x] = items[k, x]
                        t[0] = pc + 1
                        for r in range(n_regs):
                            t[2 + r] = regs[r]
                        t[LAB] = label
                        t[PEND] = 0
                        t[LAST] = pos
                        t[FRESH] = 1
                        before = nn
                        if every:
                            nn = _append_by_history(t, h, nxt, nxt_h, nn, n_key, last_with, stamp, link, pos)
                        else:
                            nn = _append(t, h, nxt, nxt_h, nn, n_key)
                        live = live or nn > before
                if k == last_test and extend == 1 and cur[i, LAST] >= 0 and (
                        selection == ANY or (selection == NEXT and not took_home)):
                    for x in range(W):
                        t[x] = cur[i, x]
                    t[FRESH] = 0
                    before = nn
                    if every:
                        nn = _append_by_history(t, cur_h[i], nxt, nxt_h, nn, n_key, last_with, stamp, link, pos)
                    else:
                        nn = _append(t, cur_h[i], nxt, nxt_h, nn, n_key)
                    live = live or nn > before
            if cut:
                break
        if not live:
            arena = (hist_label, hist_excl, hist_row, hist_parent)
            if not every:
                if best_end == NO_MATCH:
                    return 0, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), arena
                return 1, np.full(1, best_end, dtype=np.int64), np.full(1, best_h, dtype=np.int64), arena
            ends = np.empty(nn, dtype=np.int64)
            hs = np.empty(nn, dtype=np.int64)
            count = _finished(nxt, nxt_h, nn, ends, hs)
            return count, ends[:count], hs[:count], arena
        cur, nxt, cur_h, nxt_h = nxt, cur, nxt_h, cur_h
        ncur = nn
        pos += 1


@njit(_nrt=False)
def _negations_hold(items, k, last, pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid, n,
                    n_regs, regs, pend_col):
    """No row the run skipped since its last selected row ``last`` satisfies a variable
    negated on its way to item ``k`` (as if the run labelled it so; runtime.nfab)."""
    pend = items[k, pend_col]
    if pend == 0 or last < 0:
        return True
    for label in range(64):
        if (pend >> label) & 1:
            for h in range(last + 1, pos):
                if _takes(items, k, label, h, start, masks, reg_member, reg_kind, dyn_int, dyn_float, cols, valid,
                          n, n_regs, regs):
                    return False
    return True


@njit
def read_back(hs, hist_label, hist_excl, hist_row, hist_parent):
    """Labels, exclusion flags and rows of the matches ending at history nodes ``hs``, oldest
    row first, match i at offs[i]:offs[i + 1]."""
    offs = np.zeros(hs.shape[0] + 1, dtype=np.int64)
    for i in range(hs.shape[0]):
        k = 0
        x = hs[i]
        while x >= 0:
            k += 1
            x = hist_parent[x]
        offs[i + 1] = offs[i] + k
    labels = np.empty(offs[-1], dtype=np.int64)
    excl = np.empty(offs[-1], dtype=np.bool_)
    rows = np.empty(offs[-1], dtype=np.int64)
    for i in range(hs.shape[0]):
        at = offs[i + 1] - 1
        x = hs[i]
        while x >= 0:
            labels[at] = hist_label[x]
            excl[at] = hist_excl[x] != 0
            rows[at] = hist_row[x]
            at -= 1
            x = hist_parent[x]
    return offs, labels, excl, rows


@njit
def selection_all(starts, selection, negated, adjacent, op_, a_, cl, masks, reg_member, reg_kind, dyn_int,
                  dyn_float, cols, valid, n, maxlength, use_within, order0, within, n_regs, n_slots, max_runs, max_nodes,
                  stats):
    """ALL MATCHES from each of ``starts``: (start of each match, ends, label offsets, labels,
    excluded, rows, ok), by start, most preferred first; ok is False when some search had more
    than ``max_runs`` runs alive or made more than ``max_nodes`` history nodes (then nothing
    else is meaningful)."""
    arena = (np.empty(256, dtype=np.int64), np.empty(256, dtype=np.int64), np.empty(256, dtype=np.int64),
             np.empty(256, dtype=np.int64))
    m_start = np.empty(16, dtype=np.int64)
    m_end = np.empty(16, dtype=np.int64)
    offs = np.zeros(17, dtype=np.int64)
    labels = np.empty(64, dtype=np.int64)
    excl = np.empty(64, dtype=np.bool_)
    rows = np.empty(64, dtype=np.int64)
    nm = 0
    for s in starts:
        count, ends, hs, arena = selection_search(s, 2, selection, negated, adjacent, op_, a_, cl, masks, reg_member,
                                                  reg_kind, dyn_int, dyn_float, cols, valid, n, maxlength, use_within,
                                                  order0, within, n_regs, n_slots, max_runs, max_nodes, arena,
                                                  stats)
        if count < 0:
            return m_start[:0], m_end[:0], offs[:1], labels, excl, rows, False
        if count == 0:
            continue
        o, lab, ex, rw = read_back(hs, arena[0], arena[1], arena[2], arena[3])
        if nm + count >= m_start.shape[0]:
            m_start = _grow(m_start, nm + count + 1)
            m_end = _grow(m_end, nm + count + 1)
        if nm + count + 1 >= offs.shape[0]:
            offs = _grow(offs, nm + count + 2)
        total = offs[nm] + o[-1]
        if total > labels.shape[0]:
            labels = _grow(labels, total)
            excl = _grow(excl, total)
            rows = _grow(rows, total)
        base = offs[nm]
        for j in range(o[-1]):
            labels[base + j] = lab[j]
            excl[base + j] = ex[j]
            rows[base + j] = rw[j]
        for i in range(count):
            m_start[nm + i] = s
            m_end[nm + i] = ends[i]
            offs[nm + i + 1] = base + o[i + 1]
        nm += count
    return m_start[:nm], m_end[:nm], offs[: nm + 1], labels, excl, rows, True
