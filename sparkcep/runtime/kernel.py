"""The thread-list matcher compiled with numba, for plans kernel_spec accepts.

Same algorithm as runtime.vm (threads in preference order, merged when their futures cannot
differ, ACCEPT cutting everything less preferred), over a ``Program`` (runtime.kernel_program):
masks of the row-local conditions, dynamic comparisons read from per-thread registers, and a
history arena from which a match's labels are read back.

One question is asked of the search (``_search``): from this start row, the preferred match,
the earliest-ending one (MatchRegex) or every match (ALL MATCHES) — its end and history, no
match, or undecided (the answer needs rows not seen yet). The selections after it
(``select`` over a whole partition, ``select_window`` resumed over a stream's sealed rows,
``select_windows`` over many) go on from each match as compile.skip.skip_to says;
``candidates`` and ``labels_at`` answer per start row for the run strategy's windows and the
automaton's chosen starts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sparkcep.compile.program import ACCEPT
from sparkcep.compile.skip import AFTER_FIRST, ALL_MATCHES, PAST_LAST, skip_to
from sparkcep.jit import njit
from sparkcep.runtime.kernel_program import (
    MARK,
    NO_BOUND,
    Chain,
    History,
    Program,
    closure_into,
    extend,
    finished,
    grow,
    history_node,
    read_labels,
    shared_node,
    takes,
    widest,
)

UNRESOLVED = -2
NO_MATCH = -1
GROW = -3  # _search: a buffer is too small (need[] says how large); grow them and search again
TOO_MANY = -4  # _search, ALL MATCHES: more threads and matches held than the bound
TOO_LONG = -5  # _search, ALL MATCHES: more history nodes made than the bound
TOO_MANY_RUNS = 3  # select's error code for TOO_MANY (codes 1 and 2: compile.skip)
TOO_MANY_NODES = 4  # select's error code for TOO_LONG
REOPEN = 4096  # _search: how many searches a shut glide gate stays shut
PREFERRED, EARLIEST, EVERY = 0, 1, 2  # what _search looks for


class Buffers(NamedTuple):
    """A search's buffers, allocated once per call and reused by every search: the thread
    lists (rows: pc, exclusion depth, registers, loop slots) and their history nodes;
    ``stats`` (the most threads alive at once; thread steps; searches; rows glided; glides
    begun; ALL MATCHES, the most history nodes one search made); scratch rows (0: the
    closure's current thread, 1: an advancing thread, 2: the first thread); registers; the
    history arena; ALL MATCHES' finished ends and nodes and its chain."""

    cur: np.ndarray
    cur_h: np.ndarray
    nxt: np.ndarray
    nxt_h: np.ndarray
    stats: np.ndarray
    scratch: np.ndarray
    regs: np.ndarray
    hist: History
    acc_end: np.ndarray
    acc_h: np.ndarray
    chain: Chain


class Recorded(NamedTuple):
    """Matches recorded so far, growable: starts, ends, label offsets (match i's labels are
    labels[offs[i]:offs[i + 1]]), labels, excluded."""

    starts: np.ndarray
    ends: np.ndarray
    offs: np.ndarray
    labels: np.ndarray
    excl: np.ndarray


@njit
def _work(prog, stats):
    """Buffers for searches over ``prog``."""
    return _sized(2 + prog.n_regs + prog.n_slots, max(prog.n_regs, 1), 64, 256, 16, stats)


@njit
def _sized(W, n_regs, threads, hist, acc, stats):
    return Buffers(np.empty((threads, W), dtype=np.int64), np.empty(threads, dtype=np.int64),
                   np.empty((threads, W), dtype=np.int64), np.empty(threads, dtype=np.int64), stats,
                   np.empty((3, W), dtype=np.int64), np.empty(n_regs, dtype=np.int64),
                   History(np.empty(hist, dtype=np.int64), np.empty(hist, dtype=np.int64),
                           np.empty(hist, dtype=np.int64), np.empty(0, dtype=np.int64)),
                   np.empty(acc, dtype=np.int64), np.empty(acc, dtype=np.int64),
                   Chain(np.full(hist + 1, -1, dtype=np.int64), np.full(hist, -1, dtype=np.int64),
                         np.full(hist + 1, -1, dtype=np.int64), np.full(threads, -1, dtype=np.int64)))


@njit
def _grown(bufs, need):
    """Fresh buffers at least as large as ``need`` asks (threads, history nodes, accepted
    matches), doubling what is short: a search that said GROW starts again, so nothing is
    copied."""
    threads, nodes, ends = bufs.cur.shape[0], bufs.hist.label.shape[0], bufs.acc_end.shape[0]
    threads = max(need[0], 2 * threads) if need[0] > threads else threads
    nodes = max(need[1], 2 * nodes) if need[1] > nodes else nodes
    ends = max(need[2], 2 * ends) if need[2] > ends else ends
    return _sized(bufs.cur.shape[1], bufs.regs.shape[0], threads, nodes, ends, bufs.stats)


# The search and the loops over starts that call it never allocate, so no reference is
# counted per start: that cost more than the search itself where most starts fail at once.
@njit(_nrt=False)
def _search(start, how, limit, prog, bufs, need):
    """From ``start``: how PREFERRED, the preferred match; EARLIEST, the most preferred of
    those that end first (matchregex); EVERY, every match (ALL MATCHES), each label
    assignment once, most preferred first. Rows from ``limit`` on are not taken. Returns
    (end or count, history node): for PREFERRED/EARLIEST the end is NO_MATCH or UNRESOLVED
    when there is none; for EVERY the matches are bufs' accepted (end, node) pairs below the
    count. GROW: a buffer is too small, need[] says how large (threads, nodes, matches).
    TOO_MANY (ALL MATCHES): after reading the row returned in place of the node, more than
    the program's max_runs threads and finished matches were held (runtime.vm.Matcher counts
    the same list); TOO_LONG: more than its max_nodes history nodes were made.

    ALL MATCHES follows runtime.vm: threads differ by history (identical label paths share
    one node), and a finished match keeps its place in the thread list (as MARK), so the
    order of the matches is preference order."""
    stats = bufs.stats
    every = how == EVERY
    gliding = _glide_gate(prog, stats)
    saved = (stats[1], stats[3], stats[4])
    stats[2] += 1
    most = widest(prog.cl)  # the most threads one thread's closure can add
    if most > bufs.cur.shape[0]:
        return _regrow(stats, saved, need, 0, most)
    cur, cur_h, nxt, nxt_h = bufs.cur, bufs.cur_h, bufs.nxt, bufs.nxt_h
    init = bufs.scratch[2]
    init[:] = -1
    init[0] = 0
    init[1] = 0
    ncur = closure_into(init, -1, start, cur, cur_h, 0, prog, bufs.scratch[0], every, bufs.chain)
    stats[0] = max(stats[0], ncur)
    n_hist = np.int64(0)  # not a literal (see _select_all)
    pos = start
    best_end = NO_MATCH
    best_h = -1
    while True:
        stats[1] += ncur
        if how == EARLIEST:
            for i in range(ncur):
                if prog.op[cur[i, 0]] == ACCEPT:
                    return pos, cur_h[i]
        if gliding:
            pos, n_hist, dead = _glide(cur, cur_h, ncur, pos, start, limit, prog, bufs, n_hist)
            if every and _node_count(stats, n_hist) > prog.max_nodes:  # a node a row: the row that passed it
                return TOO_LONG, pos - (n_hist - prog.max_nodes)
            if dead:  # what _step would find: no thread takes the row
                if every:  # and no finished match in the list (a glide's list has none)
                    return 0, -1
                return best_end, best_h
        ext = extend(start, pos, limit, prog)
        # Room for this row's step, so that the step itself never allocates: a history node
        # per thread, and each thread's closure.
        if n_hist + ncur > bufs.hist.label.shape[0]:
            return _regrow(stats, saved, need, 1, n_hist + ncur)
        if ncur * most > nxt.shape[0]:
            return _regrow(stats, saved, need, 0, ncur * most)
        nn, n_hist, live, accepted, h_acc = _step(cur, cur_h, ncur, nxt, nxt_h, every, pos, start, ext, prog, bufs,
                                                 n_hist)
        if nn < 0:
            return UNRESOLVED, -1
        stats[0] = max(stats[0], nn)  # ALL MATCHES' finished matches too: they are held as long
        if every and nn > prog.max_runs:  # a bound on what one search holds: assignments may multiply row by row
            return TOO_MANY, pos
        if every and _node_count(stats, n_hist) > prog.max_nodes:  # held threads may each add a node a row
            return TOO_LONG, pos
        if accepted:
            best_end = pos
            best_h = h_acc
        if not live:
            if not every:
                return best_end, best_h
            if nn > bufs.acc_end.shape[0]:
                return _regrow(stats, saved, need, 2, nn)
            return finished(nxt, nxt_h, nn, bufs.acc_end, bufs.acc_h), -1
        cur, nxt = nxt, cur
        cur_h, nxt_h = nxt_h, cur_h
        ncur = nn
        pos += 1
    return best_end, best_h  # pragma: no cover


@njit(_nrt=False, inline='always')
def _glide_gate(prog, stats):
    """Whether this search glides (_glide). Gliding pays where loops run long; where they run
    a row or so (RIP Q3: 0.4 rows a glide) its checks cost more than they save, so after 64
    glides searches stop trying unless the glides average a row each. A stream's rows may
    change: every REOPEN searches, a shut gate opens and measures afresh."""
    shut = stats[4] >= 64 and stats[3] < stats[4]
    if prog.cl.glides and shut and stats[2] % REOPEN == REOPEN - 1:
        stats[3] = 0
        stats[4] = 0
        shut = False
    return prog.cl.glides and not shut


@njit(_nrt=False, inline='always')
def _node_count(stats, n_hist):
    """ALL MATCHES: note the most history nodes one search made; returns ``n_hist``."""
    if n_hist > stats[5]:
        stats[5] = n_hist
    return n_hist


@njit(_nrt=False, inline='always')
def _glide(cur, cur_h, ncur, pos, start, limit, prog, bufs, n_hist):
    """Rows that one loop's thread alone takes, read in one tight loop: (next row, node
    count, whether no thread takes that row: the search ends there).

    Where the threads are one thread's places after a loop's MATCH (Closures.glide: a greedy
    ``GAP*`` is [GAP, LO]), a row that only a thread whose own closure is that list takes
    (GAP, or C of ``(B | C)*``) leaves them the same places, with its registers and a
    history node more. So rows are read here, with no thread list built, until two threads
    take a row, the one that does is not such a loop, no thread does, the window ends or the
    history arena is full; _step goes on from that row. MatchRegex finance4's ``GAP*`` runs
    are long: this is most of its search."""
    j = _glider(cur, cur_h, ncur, prog.cl)
    if j < 0:
        return pos, n_hist, False
    stats, regs, hist = bufs.stats, bufs.regs, bufs.hist
    stats[4] += 1
    flag = 1 if cur[j, 1] > 0 else 0
    kept = bufs.scratch[1]  # the registers of the thread that took the row, while the others are tried
    while n_hist < hist.label.shape[0]:
        if extend(start, pos, limit, prog) != 1:
            break
        taker = -1
        for k in range(ncur):
            if takes(cur, k, prog.a[cur[k, 0]], pos, start, prog, regs):
                if taker >= 0:
                    return pos, n_hist, False  # a branch: _step takes this row
                taker = k
                for r in range(prog.n_regs):
                    kept[r] = regs[r]
        if taker < 0:
            return pos, n_hist, True  # no thread takes the row: the search ends here
        g = cur[taker, 0]
        # another loop of this list (C of (B | C)*): its closure must be the list too
        if taker != j and (prog.cl.glide[g] != taker or not _same_places(prog.cl, g, cur, ncur)):
            return pos, n_hist, False
        _, n_hist = history_node(prog.a[g], flag, cur_h[taker], n_hist, hist)
        for k in range(ncur):
            for r in range(prog.n_regs):
                cur[k, 2 + r] = kept[r]
            cur_h[k] = n_hist - 1
        stats[1] += ncur
        stats[3] += 1
        pos += 1
    return pos, n_hist, False


@njit(_nrt=False, inline='always')
def _glider(cur, cur_h, ncur, cl):
    """The thread whose loop may glide: at its place in its own closure, which is the list,
    the others its places (one history, the same columns but the pc); -1 if none."""
    j = -1
    for k in range(ncur):
        pc = cur[k, 0]
        if pc >= 0 and cl.glide[pc] == k:  # not a finished match (MARK), at its place in its own closure
            j = k
            break
    if j < 0 or not _same_places(cl, cur[j, 0], cur, ncur):
        return -1
    for k in range(ncur):
        if cur_h[k] != cur_h[j]:
            return -1
        for x in range(1, cur.shape[1]):
            if cur[k, x] != cur[j, x]:
                return -1
    return j


@njit(_nrt=False, inline='always')
def _same_places(cl, g, cur, ncur):
    """Whether the closure after MATCH ``g`` is the places of ``cur``: the same targets, in
    order, no more."""
    lo = cl.lo[g + 1]
    if cl.hi[g + 1] - lo != ncur:
        return False
    for k in range(ncur):
        if cl.target[lo + k] != cur[k, 0]:
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


@njit(_nrt=False, inline='always')
def _step(cur, cur_h, ncur, nxt, nxt_h, every, pos, start, ext, prog, bufs, n_hist):
    """Every thread of ``cur`` reads row ``pos`` (in preference order) into ``nxt``, in the
    room _search made (``ext``: extend's answer for the row): (threads, or -1 when a thread
    needs a row not seen yet; history nodes; any thread live; an ACCEPT reached first; its
    history node)."""
    W = cur.shape[1]
    nn = 0
    live = False
    step_first = n_hist
    hist, chain, regs = bufs.hist, bufs.chain, bufs.regs
    for i in range(ncur):
        pc = cur[i, 0]
        if every and (pc == MARK or prog.op[pc] == ACCEPT):  # a finished match keeps its place
            for x in range(W):
                nxt[nn, x] = cur[i, x]
            nxt_h[nn] = cur_h[i]
            nn += 1
            if pc != MARK:
                nxt[nn - 1, 0] = MARK
                nxt[nn - 1, 1] = pos
            continue
        if prog.op[pc] == ACCEPT:
            return nn, n_hist, live, True, cur_h[i]
        if ext == 0:
            continue
        if ext == -1:
            return -1, n_hist, live, False, -1
        label = prog.a[pc]
        if not takes(cur, i, label, pos, start, prog, regs):
            continue
        flag = 1 if cur[i, 1] > 0 else 0
        if every:
            h, n_hist = shared_node(label, flag, cur_h[i], step_first, n_hist, hist, chain)
        else:
            h, n_hist = history_node(label, flag, cur_h[i], n_hist, hist)
        t = bufs.scratch[1]
        for x in range(W):
            t[x] = cur[i, x]
        t[0] = pc + 1
        for r in range(prog.n_regs):
            t[2 + r] = regs[r]
        live = True
        nn = closure_into(t, h, pos + 1, nxt, nxt_h, nn, prog, bufs.scratch[0], every, chain)
    return nn, n_hist, live, False, -1


# ---- recording matches and going on ----------------------------------------------------------


@njit
def _matches():
    return Recorded(np.empty(16, dtype=np.int64), np.empty(16, dtype=np.int64), np.zeros(17, dtype=np.int64),
                    np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64))


@njit
def _record(rec, nm, s, e, h, hist):
    """Append the match (s, e) with the labels of history node ``h`` as match ``nm``: the
    arrays, grown as needed."""
    starts, ends, offs, labels, excl = rec
    if nm >= starts.shape[0]:
        starts = grow(starts, nm + 1)
        ends = grow(ends, nm + 1)
    if nm + 1 >= offs.shape[0]:
        offs = grow(offs, nm + 2)
    length = e - s
    if offs[nm] + length >= labels.shape[0]:
        labels = grow(labels, offs[nm] + length + 1)
        excl = grow(excl, offs[nm] + length + 1)
    read_labels(h, hist, labels, excl, offs[nm])
    starts[nm] = s
    ends[nm] = e
    offs[nm + 1] = offs[nm] + length
    return Recorded(starts, ends, offs, labels, excl)


@njit
def _cut(rec, nm):
    """The first ``nm`` recorded matches."""
    return Recorded(rec.starts[:nm], rec.ends[:nm], rec.offs[:nm + 1], rec.labels, rec.excl)


@njit
def _after_match(skip_code, skip_member, rec, nm, s, e, covered):
    """(next start, last covered row, error code) after match nm - 1, [s, e), was recorded:
    compile.skip.skip_to's rule over its contiguous rows."""
    if e > s and e - 1 > covered:
        covered = e - 1
    place, err = skip_to(skip_code, skip_member, rec.labels, rec.offs[nm - 1], e - s)
    return (s + 1 if place == AFTER_FIRST else s + place), covered, err


@njit(_nrt=False)
def _next_match(pos, stop, limit, first_ok, prog, bufs, need):
    """The first start in [pos, stop) with a (preferred) match: (start, end, history node);
    (stop, NO_MATCH, -1) when there is none. An UNRESOLVED or GROW search stops the walk at
    its start."""
    while pos < stop:
        if first_ok[pos]:
            e, h = _search(pos, PREFERRED, limit, prog, bufs, need)
            if e >= 0 or e == UNRESOLVED or e == GROW:
                return pos, e, h
        pos += 1
    return stop, NO_MATCH, -1


@njit
def _searched(start, how, limit, prog, bufs, need):
    """_search, growing the buffers until it fits: (end, node, buffers)."""
    while True:
        e, h = _search(start, how, limit, prog, bufs, need)
        if e != GROW:
            return e, h, bufs
        bufs = _grown(bufs, need)


# ---- the selections ----------------------------------------------------------------------


def select(skip_code, skip_member, matchregex, want_unmatched, prog, first_ok, stats):
    """The whole partition's selected matches, in order: (Recorded, unmatched rows, error
    code, error row). Error codes: compile.skip's (1 skip target absent from the match, 2
    skip to the match's own first row), TOO_MANY_RUNS more than ``max_runs`` threads and
    finished matches of one ALL MATCHES search held at once, TOO_MANY_NODES more than
    ``max_nodes`` history nodes made by one. ``first_ok[row]`` is False where no match can
    start (no variable that can come first matches the row). ``prog``'s bounds are kept for
    ALL MATCHES only.

    Each kind of selection is its own compiled function, whose search is specialised on
    its constant kind (60-65 % of the time of a search that tests it per row: finance4, RIP
    Q3), and compiled only when a query first needs it."""
    if skip_code == ALL_MATCHES:  # every match from every row
        return _select_all(prog, want_unmatched, first_ok, stats)
    prog = prog._replace(max_runs=NO_BOUND, max_nodes=NO_BOUND)
    if matchregex:
        return _select_earliest(prog, want_unmatched, first_ok, stats)
    return _select_preferred(skip_code, skip_member, prog, want_unmatched, first_ok, stats)


@njit
def _select_all(prog, want_unmatched, first_ok, stats):
    """select() for ALL MATCHES: every match from every row (compile.skip: after each start's
    matches, the next start)."""
    n = prog.n
    bufs, need, rec, unmatched = _work(prog, stats), np.zeros(3, dtype=np.int64), _matches(), np.zeros(n, np.bool_)
    nm = 0
    covered = -1
    pos = np.int64(0)  # not the literal 0: a literal start would compile the search once more
    while pos < n:
        k = 0
        if first_ok[pos]:
            k, at = _search(pos, EVERY, n, prog, bufs, need)
            if k == GROW:
                bufs = _grown(bufs, need)
                continue
            if k == TOO_MANY or k == TOO_LONG:
                return _cut(rec, nm), unmatched, TOO_MANY_RUNS if k == TOO_MANY else TOO_MANY_NODES, at
        for j in range(k):
            end = bufs.acc_end[j]
            rec = _record(rec, nm, pos, end, bufs.acc_h[j], bufs.hist)
            nm += 1
            covered = max(covered, end - 1)
        if k == 0 and want_unmatched and pos > covered:
            unmatched[pos] = True
        pos += 1
    return _cut(rec, nm), unmatched, 0, -1


@njit
def _preferred(pos, covered, stop, limit, skip_code, skip_member, prog, first_ok, bufs, unmatched):
    """SQL's preferred match from each leftmost start in [pos, stop), going on after each as
    compile.skip.skip_to says, until a start's answer needs rows not seen yet (UNRESOLVED).
    ``unmatched`` (empty where not wanted): the starts passed over are marked unless inside a
    match. Returns (Recorded, next start, covered, error code)."""
    rec = _matches()
    need = np.zeros(3, dtype=np.int64)
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
        rec = _record(rec, nm, s, e, h, bufs.hist)
        nm += 1
        pos, covered, err = _after_match(skip_code, skip_member, rec, nm, s, e, covered)
        if err:
            return _cut(rec, nm), s, covered, err
    return _cut(rec, nm), pos, covered, 0


@njit
def _select_preferred(skip_code, skip_member, prog, want_unmatched, first_ok, stats):
    """select() for SQL's preferred match over a whole partition."""
    n = prog.n
    unmatched = np.zeros(n if want_unmatched else 0, dtype=np.bool_)
    # int64 counters, not literals: a literal start would compile the search once more
    rec, pos, _, err = _preferred(np.int64(0), np.int64(-1), n, n, skip_code, skip_member, prog, first_ok,
                                  _work(prog, stats), unmatched)
    return rec, unmatched, err, pos if err else -1


@njit
def _earliest(prog, pos, first_ok, bufs, need):
    """matchregex: among matches from pos on that start before the best end so far, the
    earliest-ending one (the longest of those): (start, end, history node, buffers), or
    start -1. A later start wins only with an earlier end, so its search stops at the best
    end so far (no thread needs to look past it); the chosen start is searched again at the
    end, as later searches reused the history arena."""
    n = prog.n
    best_s = -1
    best_e = -1
    s = pos
    while s < n and (best_s < 0 or s <= best_e - 1):
        if first_ok[s]:
            limit = n if best_s < 0 else best_e - 1
            e, h = _search(s, EARLIEST, limit, prog, bufs, need)
            if e == GROW:
                bufs = _grown(bufs, need)
                continue
            if e >= 0 and (best_s < 0 or e - 1 < best_e - 1):
                best_s, best_e = s, e
        s += 1
    h = -1
    if best_s >= 0:
        best_e, h, bufs = _searched(best_s, EARLIEST, n, prog, bufs, need)
    return best_s, best_e, h, bufs


@njit
def _select_earliest(prog, want_unmatched, first_ok, stats):
    """select() for matchregex: the earliest-ending match (_earliest), then on past its last
    row (compile.skip)."""
    n = prog.n
    bufs, need, rec, unmatched = _work(prog, stats), np.zeros(3, dtype=np.int64), _matches(), np.zeros(n, np.bool_)
    nm = 0
    pos = np.int64(0)  # not the literal 0: a literal start would compile the search once more
    none = np.zeros(0, dtype=np.bool_)
    while pos < n:
        s, e, h, bufs = _earliest(prog, pos, first_ok, bufs, need)
        if s < 0:
            if want_unmatched:
                unmatched[pos:] = True
            break
        if want_unmatched:
            unmatched[pos:s] = True
        rec = _record(rec, nm, s, e, h, bufs.hist)
        nm += 1
        pos, _, _ = _after_match(PAST_LAST, none, rec, nm, s, e, -1)
    return _cut(rec, nm), unmatched, 0, -1


@njit
def select_window(pos, covered, stop, limit, skip_code, skip_member, prog, first_ok, stats):
    """select() resumed at start ``pos`` (``covered``: the last row inside a match so far)
    over the starts below ``stop`` (at most ``limit``) of rows of which later ones may not
    have arrived (a stream's sealed rows; rows from ``limit`` on are there for NEXT() only):
    it stops at the first start whose answer needs unseen rows. Returns (Recorded, next
    start, covered, error code, error row). For the SQL selection without unmatched rows:
    not ALL MATCHES, not matchregex."""
    rec, pos, covered, err = _preferred(pos, covered, min(stop, limit), limit, skip_code, skip_member, prog,
                                        first_ok, _work(prog, stats), np.zeros(0, np.bool_))
    return rec, pos, covered, err, pos if err else -1


class Windows(NamedTuple):
    """Many windows of one table (a stream's bucket: each key's sealed rows): window k is
    rows [lo[k], lo[k] + n[k]) with its own limit, base (its first row's place in its
    partition), next start and covered row (local to it)."""

    lo: np.ndarray
    n: np.ndarray
    limit: np.ndarray
    base: np.ndarray
    pos: np.ndarray
    covered: np.ndarray


@njit
def _window(prog, lo, n, limit, base):
    """The program over rows [lo, lo + n) of ``prog``'s, copied out, so that its arrays are
    those select_window reads for one partition."""
    return Program(prog.op, prog.a, prog.cl, prog.masks[:, lo:lo + n].copy(), prog.reg_member, prog.reg_kind,
                   prog.dyn_int, prog.dyn_float, prog.cols[:, lo:lo + n].copy(), prog.valid[:, lo:lo + n].copy(),
                   n, prog.complete, base, prog.maxlength, prog.use_within,
                   prog.order0[lo:lo + n].copy() if prog.use_within else prog.order0, prog.within, prog.n_regs,
                   prog.n_slots, prog.max_runs, prog.max_nodes, prog.horizon)


@njit
def select_windows(wins, skip_code, skip_member, prog, first_ok, stats):
    """select_window over many windows of ``prog``'s rows in one call: (Recorded with match
    starts and ends as rows of the table, each match's window, next start and covered per
    window, error code, its window and row)."""
    rec = _matches()
    where = np.empty(16, dtype=np.int64)
    pos_out = wins.pos.copy()
    cov_out = wins.covered.copy()
    nm = 0
    for k in range(wins.lo.shape[0]):
        lo = wins.lo[k]
        n = wins.n[k]
        got, p, c, err, err_row = select_window(
            wins.pos[k], wins.covered[k], wins.limit[k], wins.limit[k], skip_code, skip_member,
            _window(prog, lo, n, wins.limit[k], wins.base[k]), first_ok[lo:lo + n].copy(), stats)
        pos_out[k] = p
        cov_out[k] = c
        rec, where = _append_window(rec, nm, where, got, lo, k)
        nm += got.starts.shape[0]
        if err:
            return _cut(rec, nm), where[:nm], pos_out, cov_out, err, k, err_row
    return _cut(rec, nm), where[:nm], pos_out, cov_out, 0, -1, -1


@njit
def _append_window(rec, nm, where, got, lo, k):
    """``rec`` (nm matches) with window k's matches ``got`` (rows from ``lo``) after them."""
    count = got.starts.shape[0]
    starts, ends, offs = grow(rec.starts, nm + count), grow(rec.ends, nm + count), grow(rec.offs, nm + count + 1)
    where = grow(where, nm + count)
    nl = offs[nm]
    used = got.offs[count]
    labels, excl = grow(rec.labels, nl + used), grow(rec.excl, nl + used)
    labels[nl:nl + used] = got.labels[:used]
    excl[nl:nl + used] = got.excl[:used]
    for i in range(count):
        starts[nm + i] = got.starts[i] + lo
        ends[nm + i] = got.ends[i] + lo
        where[nm + i] = k
        offs[nm + i + 1] = nl + got.offs[i + 1]
    return Recorded(starts, ends, offs, labels, excl), where


@njit
def candidates(first, last, limit, want_earliest, prog, first_ok, stats):
    """Per start row in [first, last): end (NO_MATCH / UNRESOLVED) and label offsets, labels,
    excluded (rows from ``limit`` on are not taken)."""
    starts = np.arange(first, last)
    if want_earliest:  # each kind a constant: the search is specialised on it
        return _found_at(starts, EARLIEST, limit, prog, first_ok, stats)
    return _found_at(starts, PREFERRED, limit, prog, first_ok, stats)


@njit
def labels_at(starts, limit, prog, stats):
    """The preferred match from each of ``starts`` (rows a selection already chose, as the
    automaton of runtime.automaton does) with its labels."""
    return _found_at(starts, PREFERRED, limit, prog, np.ones(prog.n, dtype=np.bool_), stats)


@njit
def _found_at(starts, how, limit, prog, first_ok, stats):
    """What _search finds from each of ``starts`` (PREFERRED or EARLIEST): ends (NO_MATCH /
    UNRESOLVED) and label offsets into labels, and exclusions."""
    m = starts.shape[0]
    ends = np.empty(m, dtype=np.int64)
    offs = np.zeros(m + 1, dtype=np.int64)
    labels = np.empty(64, dtype=np.int64)
    excl = np.empty(64, dtype=np.int64)
    bufs = _work(prog, stats)
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
            labels = grow(labels, offs[i] + length + 1)
            excl = grow(excl, offs[i] + length + 1)
        if e >= 0:
            read_labels(h, bufs.hist, labels, excl, offs[i])
        offs[i + 1] = offs[i] + length
    return ends, offs, labels, excl


@njit
def nonoverlapping(hits, step):
    """The starts a fixed-length pattern's selection keeps: walking the candidate starts in
    order, each one at or after where the last kept one goes on (kept + ``step``: every
    match has the same labels, so compile.skip.skip_to's answer is the same for each)."""
    out = np.empty(hits.shape[0], dtype=np.int64)
    m = 0
    resume = -1
    for st in hits:
        if st >= resume:
            out[m] = st
            m += 1
            resume = st + step
    return out[:m]
