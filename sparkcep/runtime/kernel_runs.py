"""NFA^b's runs compiled (runtime.nfab's search), for plans kernel_spec accepts with an event
selection strategy (negation included), on the thread-list kernel's Program.

A run is a row of int64: the kernel thread's columns (pc of its continuation, exclusion
depth, registers, loop slots), the label of its last selected row (LAB), the labels negated
since (PEND, a bit each, only on closure items), that row (LAST), and whether it selected the
row before the one being read (FRESH). At each row a run follows the program's precomputed
closure (kernel_program.closure_into) to the MATCH instructions it can take next and, as
runtime.nfab decides, may also ignore the row (skip till next / any match). Preference is
list order, as in the kernel: a run's successors in the order of the MATCH instructions they
take, the run that ignores the row right after the last of them.

``selection_search`` answers for one start row: the preferred match (SQL's output modes), or
every match, most preferred first (ALL MATCHES: a finished match keeps its place in the list
as a MARK, as the thread-list search does). History nodes record (label, excluded, parent,
row), so a match reads back its rows, which event selection leaves gapped. Runs whose
futures cannot differ are merged (the first kept): for the preferred match the history does
not count, for ALL MATCHES it does (identical histories give identical matches). Where the
selection goes on after a match is runtime.selection's (compile.skip.skip_to), in Python.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sparkcep.compile.program import ACCEPT
from sparkcep.jit import njit
from sparkcep.runtime.kernel_program import (
    MARK,
    Chain,
    History,
    closure_into,
    extend,
    finished,
    grow,
    history_node,
    shared_node,
    takes,
    widest,
)

# Event selection strategies.
PARTITION, STRICT, NEXT, ANY = 0, 1, 2, 3
STRATEGY = {"PARTITION": PARTITION, "STRICT": STRICT, "NEXT": NEXT, "ANY": ANY}
PREFERRED, EVERY = 0, 2  # what selection_search looks for
NO_MATCH = -1
# A search's state (one int64 array): runs in the next list, history nodes, finished
# matches held (ALL MATCHES), whether some run lives on, the preferred match's end and
# history node, the first node made in this step; runs in this row's list, the row, whether
# the lists are swapped (RunLists), the columns that tell runs apart (n_key), ALL MATCHES.
NN, N_HIST, MARKS, LIVE, BEST_END, BEST_H, STEP_FIRST, NCUR, POS, FLIP, N_KEY, EVERY = range(12)
DONE, ROOM, BOUND = 0, 1, 2  # how _rows stopped


class Runs(NamedTuple):
    """The event selection: its strategy (STRATEGY), whether the pattern negates a
    variable, and per row whether it directly follows the row before in its partition
    (strict contiguity)."""

    selection: int
    negated: bool
    adjacent: np.ndarray


class RunLists(NamedTuple):
    """One search's lists: the runs of this row and the next with their history nodes (the
    other way round where state[FLIP] says so: _rows swaps them without building a record),
    one
    run's closure, scratch runs, registers; ALL MATCHES' merging links (per history node + 1
    the last run of the step with it, the step that was; per run the one before it) and its
    shared history nodes (Chain: children and siblings)."""

    cur: np.ndarray
    cur_h: np.ndarray
    nxt: np.ndarray
    nxt_h: np.ndarray
    items: np.ndarray
    items_h: np.ndarray
    u: np.ndarray
    t: np.ndarray
    regs: np.ndarray
    last_with: np.ndarray
    stamp: np.ndarray
    link: np.ndarray
    chain: Chain


@njit
def _run_lists(prog, every):
    """Lists for a search from one start: the first run, at pc 0, fresh, with no history."""
    W = 2 + prog.n_regs + prog.n_slots + 4
    cap = 16
    most = widest(prog.cl)
    nodes = 1 if not every else 256
    children = np.full(nodes, -1, dtype=np.int64)
    lists = RunLists(np.empty((cap, W), dtype=np.int64), np.empty(cap, dtype=np.int64),
                     np.empty((cap, W), dtype=np.int64), np.empty(cap, dtype=np.int64),
                     np.empty((most, W), dtype=np.int64), np.empty(most, dtype=np.int64),
                     np.empty(W, dtype=np.int64), np.empty(W, dtype=np.int64),
                     np.empty(max(prog.n_regs, 1), dtype=np.int64), np.full(nodes, -1, dtype=np.int64),
                     np.full(nodes, -1, dtype=np.int64), np.empty(cap, dtype=np.int64),
                     Chain(children, np.full(nodes, -1, dtype=np.int64), children, children))
    first = lists.cur[0]
    first[:] = -1
    first[0] = 0
    first[1] = 0
    first[W - 3] = 0  # PEND
    first[W - 1] = 1  # FRESH
    lists.cur_h[0] = -1
    return lists


@njit(_nrt=False, inline='always')
def _has_room(lists, arena, ncur, n_hist, most, every):
    """Whether a step of ``ncur`` runs fits the lists and arena (each closure at most ``most``
    items, and the run that ignores the row)."""
    nodes = n_hist + ncur * most
    return ncur * (most + 1) <= lists.nxt.shape[0] and nodes <= arena.label.shape[0] and not (every and (
        lists.link.shape[0] < lists.nxt.shape[0] or nodes + 1 > lists.last_with.shape[0]))


@njit
def _room(lists, arena, ncur, n_hist, most, every):
    """The lists and arena with room for a step of ``ncur`` runs (_has_room)."""
    nxt, nxt_h, link = lists.nxt, lists.nxt_h, lists.link
    need = ncur * (most + 1)
    nodes = n_hist + ncur * most
    if need > nxt.shape[0]:
        nxt = np.empty((need, nxt.shape[1]), dtype=np.int64)
        nxt_h = np.empty(need, dtype=np.int64)
    if every and link.shape[0] < nxt.shape[0]:  # after a swap nxt may be the larger list
        link = np.empty(nxt.shape[0], dtype=np.int64)
    if nodes > arena.label.shape[0]:
        arena = History(grow(arena.label, nodes), grow(arena.excl, nodes), grow(arena.parent, nodes),
                        grow(arena.row, nodes))
    last_with, stamp, chain = lists.last_with, lists.stamp, lists.chain
    if every and nodes + 1 > last_with.shape[0]:
        last_with = _grow_filled(last_with, nodes + 1)
        stamp = _grow_filled(stamp, last_with.shape[0])
        children = _grow_filled(chain.children, last_with.shape[0])
        chain = Chain(children, _grow_filled(chain.siblings, last_with.shape[0]), children, children)
    return RunLists(lists.cur, lists.cur_h, nxt, nxt_h, lists.items, lists.items_h, lists.u, lists.t, lists.regs,
                    last_with, stamp, link, chain), arena


@njit(_nrt=False, inline='always')
def _swapped(lists):
    """The lists with this row's and the next row's runs swapped."""
    return RunLists(lists.nxt, lists.nxt_h, lists.cur, lists.cur_h, lists.items, lists.items_h, lists.u, lists.t,
                    lists.regs, lists.last_with, lists.stamp, lists.link, lists.chain)


@njit
def _grow_filled(arr, need):
    """grow with the new entries set to -1."""
    if need <= arr.shape[0]:
        return arr
    out = np.full(max(need, arr.shape[0] * 2), -1, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@njit
def selection_search(start, how, runs, prog, arena, stats):
    """From ``start``: how PREFERRED, the preferred match; EVERY, every match, most preferred
    first. Returns (count, ends, history nodes, arena): PREFERRED gives count 1 with its end
    and node, or 0; count -1 when more than the program's ``max_runs`` runs were alive at
    once, or (every match) more than ``max_nodes`` history nodes were made (the Python
    matcher then reports the row); the arena (a History with rows) may have grown."""
    every = how == EVERY
    lists = _run_lists(prog, every)
    W = lists.t.shape[0]
    state = np.zeros(12, dtype=np.int64)
    state[BEST_END] = NO_MATCH
    state[BEST_H] = -1
    state[NCUR] = 1
    state[POS] = start
    # The columns that say whether two runs have the same future: all but LAST, which only
    # strict contiguity and negation read (and the end of a match, which its history holds).
    state[N_KEY] = W - 1 if runs.selection == STRICT or runs.negated else W - 2
    state[EVERY] = every
    stats[2] += 1
    while True:
        # The rows run without reference counting (_rows); out of room, it returns here to
        # grow the lists, which allocates.
        how_stopped = _rows(start, runs, prog, lists, arena, stats, state)
        if state[FLIP]:
            lists = _swapped(lists)
            state[FLIP] = 0
        if how_stopped == BOUND:
            return -1, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), arena
        if how_stopped == DONE:
            return _found(lists, state, every, arena)
        lists, arena = _room(lists, arena, state[NCUR], state[N_HIST], widest(prog.cl), every)


@njit(_nrt=False)
def _rows(start, runs, prog, lists, arena, stats, state):
    """The search's rows from state[POS] on, until no run lives on (DONE), a bound is passed
    (BOUND) or a step needs more room than the lists or arena have (ROOM)."""
    every = state[EVERY] == 1
    n_key = state[N_KEY]
    most = widest(prog.cl)
    while True:
        here = _swapped(lists) if state[FLIP] else lists
        ncur = state[NCUR]
        pos = state[POS]
        stats[1] += ncur
        stats[0] = max(stats[0], ncur)
        if ncur - state[MARKS] > prog.max_runs or (every and state[N_HIST] > prog.max_nodes):
            return BOUND
        if not _has_room(here, arena, ncur, state[N_HIST], most, every):
            stats[1] -= ncur  # counted again when the step runs
            return ROOM
        ext = extend(start, pos, prog.n, prog)
        state[NN] = 0
        state[LIVE] = 0
        state[STEP_FIRST] = state[N_HIST]
        for i in range(ncur):
            if _advance(i, here, runs, prog, arena, pos, start, ext, every, n_key, state):
                break  # the preferred match: the less preferred runs are cut
        if state[LIVE] == 0:
            return DONE
        state[FLIP] ^= 1
        state[NCUR] = state[NN]
        state[POS] = pos + 1


@njit
def _found(lists, state, every, arena):
    """selection_search's answer once no run lives on."""
    if not every:
        if state[BEST_END] == NO_MATCH:
            return 0, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), arena
        return 1, np.full(1, state[BEST_END], dtype=np.int64), np.full(1, state[BEST_H], dtype=np.int64), arena
    nn = state[NN]
    ends = np.empty(nn, dtype=np.int64)
    hs = np.empty(nn, dtype=np.int64)
    count = finished(lists.nxt, lists.nxt_h, nn, ends, hs)
    return count, ends[:count], hs[:count], arena


@njit(inline='always')
def _advance(i, lists, runs, prog, arena, pos, start, ext, every, n_key, state):
    """Run ``i`` reads row ``pos``: its successors (and, as the strategy allows, itself
    ignoring the row) into the next list. True when it reached the preferred match."""
    cur, cur_h = lists.cur, lists.cur_h
    W = cur.shape[1]
    LAB, PEND, LAST, FRESH = W - 4, W - 3, W - 2, W - 1
    if cur[i, 0] == MARK:  # a finished match keeps its place (ALL MATCHES)
        _put(cur[i], cur_h[i], lists.nxt, lists.nxt_h, state[NN])
        state[NN] += 1
        return False
    ni = closure_into(cur[i], cur_h[i], pos, lists.items, lists.items_h, 0, prog, lists.u, False, lists.chain, PEND)
    lab = cur[i, LAB]
    last_test = -1
    any_same = False
    for k in range(ni):
        if prog.op[lists.items[k, 0]] != ACCEPT:
            last_test = k
            if prog.a[lists.items[k, 0]] == lab:
                any_same = True
    took_home = False
    for k in range(ni):
        pc = lists.items[k, 0]
        if prog.op[pc] == ACCEPT:
            if cur[i, FRESH] == 1 and _accept(i, lists, start, every, state):
                return True
            continue
        if ext == 1 and _take(i, k, lists, runs, prog, arena, pos, start, every, n_key, state):
            if not any_same or prog.a[pc] == lab:
                took_home = True
        if k == last_test and ext == 1 and cur[i, LAST] >= 0 and (
                runs.selection == ANY or (runs.selection == NEXT and not took_home)):
            t = lists.t
            for x in range(W):
                t[x] = cur[i, x]
            t[FRESH] = 0
            _append_run(t, cur_h[i], lists, every, n_key, pos, state)
    return False


@njit(inline='always')
def _accept(i, lists, start, every, state):
    """Run ``i`` may end here: the preferred match (True), or (ALL MATCHES) a finished
    match put in the next list once."""
    cur, cur_h, nxt, nxt_h = lists.cur, lists.cur_h, lists.nxt, lists.nxt_h
    last = cur[i, cur.shape[1] - 2]
    end = last + 1 if last >= 0 else start  # an empty match ends at its start
    if not every:
        state[BEST_END] = end
        state[BEST_H] = cur_h[i]
        return True
    for j in range(state[NN]):
        if nxt[j, 0] == MARK and nxt_h[j] == cur_h[i]:
            return False
    nn = state[NN]
    nxt[nn, 0] = MARK
    nxt[nn, 1] = end
    nxt_h[nn] = cur_h[i]
    state[NN] += 1
    state[MARKS] += 1
    return False


@njit(inline='always')
def _take(i, k, lists, runs, prog, arena, pos, start, every, n_key, state):
    """Whether run ``i`` takes row ``pos`` at its closure's item ``k``; if so its successor
    goes into the next list."""
    cur, cur_h, items = lists.cur, lists.cur_h, lists.items
    W = cur.shape[1]
    LAB, PEND, LAST, FRESH = W - 4, W - 3, W - 2, W - 1
    label = prog.a[items[k, 0]]
    if runs.selection == STRICT and cur[i, LAST] >= 0 and not runs.adjacent[pos]:
        return False
    if not _negations_hold(items, k, cur[i, LAST], pos, start, prog, lists.regs, PEND):
        return False
    if not takes(items, k, label, pos, start, prog, lists.regs):
        return False
    flag = 1 if items[k, 1] > 0 else 0
    n_hist = state[N_HIST]
    if every:
        h, grown = shared_node(label, flag, cur_h[i], state[STEP_FIRST], n_hist, arena, lists.chain)
    else:
        h, grown = history_node(label, flag, cur_h[i], n_hist, arena)
    if grown > n_hist:  # a new node: its row too (event selection leaves gaps)
        arena.row[h] = pos
        state[N_HIST] = grown
    t = lists.t
    for x in range(W):
        t[x] = items[k, x]
    t[0] = items[k, 0] + 1
    for r in range(prog.n_regs):
        t[2 + r] = lists.regs[r]
    t[LAB] = label
    t[PEND] = 0
    t[LAST] = pos
    t[FRESH] = 1
    _append_run(t, h, lists, every, n_key, pos, state)
    return True


@njit(_nrt=False, inline='always')
def _negations_hold(items, k, last, pos, start, prog, regs, pend_col):
    """No row the run skipped since its last selected row ``last`` satisfies a variable
    negated on its way to item ``k`` (as if the run labelled it so; runtime.nfab)."""
    pend = items[k, pend_col]
    if pend == 0 or last < 0:
        return True
    for label in range(64):
        if (pend >> label) & 1:
            for h in range(last + 1, pos):
                if takes(items, k, label, h, start, prog, regs):
                    return False
    return True


@njit(inline='always')
def _append_run(t, h, lists, every, n_key, step, state):
    """Run ``t`` (history ``h``) into the next list unless an equal one is there."""
    before = state[NN]
    if every:
        nn = _append_by_history(t, h, lists, before, n_key, step)
    else:
        nn = _append(t, h, lists.nxt, lists.nxt_h, before, n_key)
    state[NN] = nn
    if nn > before:
        state[LIVE] = 1


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


@njit(_nrt=False, inline='always')
def _append(run, h, dest, dest_h, count, n_key):
    """Append run ``run`` (history ``h``) to dest[count:] unless an equal one (_same_run)
    is there."""
    for j in range(count):
        if dest[j, 0] != MARK and _same_run(dest, j, run, n_key):
            return count
    _put(run, h, dest, dest_h, count)
    return count + 1


@njit(_nrt=False, inline='always')
def _append_by_history(run, h, lists, count, n_key, step):
    """_append for ALL MATCHES, where equal runs also have equal histories: only the runs of
    history ``h`` appended in this ``step`` are compared, chained from last_with[h + 1]
    (valid where stamp[h + 1] is this step) through ``link``. A scan of every run made each
    row cost the square of the runs, which ALL MATCHES of A B* C* D grows by one a row."""
    last_with, stamp, link = lists.last_with, lists.stamp, lists.link
    first = last_with[h + 1] if stamp[h + 1] == step else -1
    j = first
    while j >= 0:
        if _same_run(lists.nxt, j, run, n_key):
            return count
        j = link[j]
    _put(run, h, lists.nxt, lists.nxt_h, count)
    link[count] = first
    last_with[h + 1] = count
    stamp[h + 1] = step
    return count + 1


def arena() -> History:
    """An empty history arena for selection_search (it grows as needed)."""
    return History(*(np.empty(256, dtype=np.int64) for _ in range(4)))


@njit
def read_back(hs, hist):
    """Labels, exclusion flags and rows of the matches ending at history nodes ``hs``, oldest
    row first, match i at offs[i]:offs[i + 1]."""
    offs = np.zeros(hs.shape[0] + 1, dtype=np.int64)
    for i in range(hs.shape[0]):
        k = 0
        x = hs[i]
        while x >= 0:
            k += 1
            x = hist.parent[x]
        offs[i + 1] = offs[i] + k
    labels = np.empty(offs[-1], dtype=np.int64)
    excl = np.empty(offs[-1], dtype=np.bool_)
    rows = np.empty(offs[-1], dtype=np.int64)
    for i in range(hs.shape[0]):
        at = offs[i + 1] - 1
        x = hs[i]
        while x >= 0:
            labels[at] = hist.label[x]
            excl[at] = hist.excl[x] != 0
            rows[at] = hist.row[x]
            at -= 1
            x = hist.parent[x]
    return offs, labels, excl, rows


@njit
def selection_all(starts, runs, prog, stats):
    """ALL MATCHES from each of ``starts``: (start of each match, ends, label offsets, labels,
    excluded, rows, ok), by start, most preferred first; ok is False when some search had more
    than ``max_runs`` runs alive or made more than ``max_nodes`` history nodes (then nothing
    else is meaningful)."""
    hist = History(np.empty(256, dtype=np.int64), np.empty(256, dtype=np.int64), np.empty(256, dtype=np.int64),
                   np.empty(256, dtype=np.int64))
    m_start = np.empty(16, dtype=np.int64)
    m_end = np.empty(16, dtype=np.int64)
    offs = np.zeros(17, dtype=np.int64)
    labels = np.empty(64, dtype=np.int64)
    excl = np.empty(64, dtype=np.bool_)
    rows = np.empty(64, dtype=np.int64)
    nm = 0
    for s in starts:
        count, ends, hs, hist = selection_search(s, EVERY, runs, prog, hist, stats)
        if count < 0:
            return m_start[:0], m_end[:0], offs[:1], labels, excl, rows, False
        if count == 0:
            continue
        o, lab, ex, rw = read_back(hs, hist)
        m_start, m_end = grow(m_start, nm + count + 1), grow(m_end, nm + count + 1)
        offs = grow(offs, nm + count + 2)
        base = offs[nm]
        total = base + o[-1]
        labels, excl, rows = grow(labels, total), grow(excl, total), grow(rows, total)
        labels[base:total] = lab
        excl[base:total] = ex
        rows[base:total] = rw
        for i in range(count):
            m_start[nm + i] = s
            m_end[nm + i] = ends[i]
            offs[nm + i + 1] = base + o[i + 1]
        nm += count
    return m_start[:nm], m_end[:nm], offs[: nm + 1], labels, excl, rows, True
