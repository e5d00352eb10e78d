"""NFA^b's search (runtime.nfab) compiled with numba, for plans kernel_spec accepts with an
event selection strategy and no negation.

A run is a row of int64: the kernel thread's columns (pc of its continuation, exclusion
depth, registers, loop slots) and then the label and row of its last selected row and
whether it selected the row before the one being read (FRESH). At each row a run follows
the program's precomputed closure (kernel._closure_into) to the MATCH instructions it can
take next and, as runtime.nfab decides, may also ignore the row (skip till next / any
match). Preference is list order, as in the kernel: a run's successors in the order of the
MATCH instructions they take, the run that ignores the row right after the last of them.

``search`` answers for one start row: the preferred match (SQL's output modes), or every
match, most preferred first (ALL MATCHES: a finished match keeps its place in the list as
a MARK, as kernel._search does). History nodes record (label, excluded, row, parent), so a
match reads back its rows, which event selection leaves gapped. Runs whose futures cannot
differ are merged (the first kept): for the preferred match the history does not count, for
ALL MATCHES it does (identical histories give identical matches).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sparkcep.compile.program import ACCEPT
from sparkcep.runtime.kernel import (
    MARK,
    NO_MATCH,
    _closure_into,
    _extend,
    _grow,
    _takes,
    history_node,
)

# Event selection strategies.
PARTITION, STRICT, NEXT, ANY = 0, 1, 2, 3
STRATEGY = {"PARTITION": PARTITION, "STRICT": STRICT, "NEXT": NEXT, "ANY": ANY}


@njit(cache=True)
def _append(run, h, dest, dest_h, count, n_key, by_history):
    """Append run ``run`` (history ``h``) to dest[count:] unless an equal one is there: equal
    in the first ``n_key`` columns and the last one (FRESH), and in history ``by_history``."""
    W = run.shape[0]
    for j in range(count):
        if dest[j, 0] == MARK or (by_history and dest_h[j] != h):
            continue
        same = dest[j, W - 1] == run[W - 1]
        if same:
            for x in range(n_key):
                if dest[j, x] != run[x]:
                    same = False
                    break
        if same:
            return count
    for x in range(W):
        dest[count, x] = run[x]
    dest_h[count] = h
    return count + 1


@njit(cache=True)
def search(start, how, selection, adjacent, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float,
           cols, valid, n, maxlength, use_within, order0, within, n_regs, n_slots, max_runs, arena, stats):
    """From ``start``: how 0, the preferred match; 2, every match, most preferred first.
    Returns (count, ends, history nodes, arena): how 0 gives count 1 with its end and node,
    or 0; count -1 when more than ``max_runs`` runs were alive at once (the Python matcher
    then reports the row); the arena (label, excluded, row, parent per history node) may
    have grown."""
    hist_label, hist_excl, hist_row, hist_parent = arena
    every = how == 2
    W = 2 + n_regs + n_slots + 3
    LAB, LAST, FRESH = W - 3, W - 2, W - 1
    # The columns that say whether two runs have the same future: all but LAST, which only
    # strict contiguity reads (and the end of a match, which its history holds).
    n_key = W - 1 if selection == STRICT else W - 2
    widest = 1
    for k in range(cl[0].shape[0]):
        widest = max(widest, cl[1][k] - cl[0][k])
    cap = 16
    cur = np.empty((cap, W), dtype=np.int64)
    cur_h = np.empty(cap, dtype=np.int64)
    nxt = np.empty((cap, W), dtype=np.int64)
    nxt_h = np.empty(cap, dtype=np.int64)
    items = np.empty((widest, W), dtype=np.int64)
    items_h = np.empty(widest, dtype=np.int64)
    u = np.empty(W, dtype=np.int64)
    t = np.empty(W, dtype=np.int64)
    regs = np.empty(max(n_regs, 1), dtype=np.int64)
    cur[0, :] = -1
    cur[0, 0] = 0
    cur[0, 1] = 0
    cur[0, FRESH] = 1
    cur_h[0] = -1
    ncur = 1
    n_hist = 0
    best_end = NO_MATCH
    best_h = -1
    pos = start
    stats[2] += 1
    while True:
        stats[1] += ncur
        if ncur > stats[0]:
            stats[0] = ncur
        if ncur > max_runs:
            return -1, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), (hist_label, hist_excl, hist_row, hist_parent)
        extend = _extend(start, pos, maxlength, n, True, use_within, order0, within)
        need = ncur * (widest + 1)
        if need > nxt.shape[0]:
            nxt = np.empty((need, W), dtype=np.int64)
            nxt_h = np.empty(need, dtype=np.int64)
        if n_hist + ncur * widest > hist_label.shape[0]:
            hist_label = _grow(hist_label, n_hist + ncur * widest)
            hist_excl = _grow(hist_excl, n_hist + ncur * widest)
            hist_row = _grow(hist_row, n_hist + ncur * widest)
            hist_parent = _grow(hist_parent, n_hist + ncur * widest)
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
            ni = _closure_into(cur[i], cur_h[i], pos, items, items_h, 0, cl, n, True, 0, n_regs, u, False)
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
                    continue
                if extend == 1:
                    label = a_[pc]
                    if not (selection == STRICT and cur[i, LAST] >= 0 and not adjacent[pos]) and _takes(
                            items, k, label, pos, start, masks, reg_member, reg_kind, dyn_int, dyn_float,
                            cols, valid, n, n_regs, regs):
                        if not any_same or label == lab:
                            took_home = True
                        h, grown = history_node(label, 1 if items[k, 1] > 0 else 0, cur_h[i], every, step_first,
                                                n_hist, hist_label, hist_excl, hist_parent)
                        if grown > n_hist:  # a new node: its row too (event selection leaves gaps)
                            hist_row[h] = pos
                            n_hist = grown
                        for x in range(W):
                            t[x] = items[k, x]
                        t[0] = pc + 1
                        for r in range(n_regs):
                            t[2 + r] = regs[r]
                        t[LAB] = label
                        t[LAST] = pos
                        t[FRESH] = 1
                        before = nn
                        nn = _append(t, h, nxt, nxt_h, nn, n_key, every)
                        live = live or nn > before
                if k == last_test and extend == 1 and cur[i, LAST] >= 0 and (
                        selection == ANY or (selection == NEXT and not took_home)):
                    for x in range(W):
                        t[x] = cur[i, x]
                    t[FRESH] = 0
                    before = nn
                    nn = _append(t, cur_h[i], nxt, nxt_h, nn, n_key, every)
                    live = live or nn > before
            if cut:
                break
        if not live:
            arena = (hist_label, hist_excl, hist_row, hist_parent)
            if not every:
                if best_end == NO_MATCH:
                    return 0, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), arena
                return 1, np.full(1, best_end, dtype=np.int64), np.full(1, best_h, dtype=np.int64), arena
            count = 0
            for j in range(nn):
                if nxt[j, 0] == MARK:
                    count += 1
            ends = np.empty(count, dtype=np.int64)
            hs = np.empty(count, dtype=np.int64)
            c = 0
            for j in range(nn):
                if nxt[j, 0] == MARK:
                    ends[c] = nxt[j, 1]
                    hs[c] = nxt_h[j]
                    c += 1
            return count, ends, hs, arena
        tmp = cur
        cur = nxt
        nxt = tmp
        tmph = cur_h
        cur_h = nxt_h
        nxt_h = tmph
        ncur = nn
        pos += 1


@njit(cache=True)
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


@njit(cache=True)
def all_matches(starts, selection, adjacent, op_, a_, cl, masks, reg_member, reg_kind, dyn_int, dyn_float,
                cols, valid, n, maxlength, use_within, order0, within, n_regs, n_slots, max_runs, stats):
    """ALL MATCHES from each of ``starts``: (start of each match, ends, label offsets, labels,
    excluded, rows, ok), by start, most preferred first; ok is False when some search had more
    than ``max_runs`` runs alive (then nothing else is meaningful)."""
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
        count, ends, hs, arena = search(s, 2, selection, adjacent, op_, a_, cl, masks, reg_member, reg_kind,
                                        dyn_int, dyn_float, cols, valid, n, maxlength, use_within, order0,
                                        within, n_regs, n_slots, max_runs, arena, stats)
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
