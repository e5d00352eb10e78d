"""The compiled kernel behind the Matcher interface: partitions as numpy arrays, results as
Match objects. Used wherever kernel_spec accepts the plan and the data fit (numeric columns
exactly representable as float64); otherwise runtime.vm runs."""

from __future__ import annotations

import contextlib
import datetime as dt
import os

import numpy as np
import pyarrow as pa

from sparkcep.compile.kernel_spec import (
    AVERAGE,
    COUNT,
    FOLDED,
    LAG,
    LITERAL,
    KernelSpec,
    kernel_spec,
)
from sparkcep.compile.pattern import label_layout
from sparkcep.compile.plan import Plan
from sparkcep.compile.program import next_labels
from sparkcep.compile.skip import SkipStrategy
from sparkcep.compile.vectorize import arrays_for, condition_mask
from sparkcep.errors import DataError
from sparkcep.runtime import kernel
from sparkcep.runtime.automaton import Automaton
from sparkcep.runtime.kernel_program import NO_BOUND, Program, closure_table, program
from sparkcep.runtime.matches import (
    ALL_MATCHES_ADVICE,
    MAX_NODES,
    MAX_RUNS,
    NODES_ADVICE,
    UNRESOLVED,
    Match,
    PartitionData,
    Spans,
    matches_from_arrays,
    too_many_runs,
)
from sparkcep.runtime.vm import columns_in
from sparkcep.values import EXACT_FLOAT, max_magnitude, numpy_values, timestamp_micros

_EXACT = float(EXACT_FLOAT)
# SPARKCEP_KERNEL=0 turns the compiled kernel off (the Python matcher then runs everything).
ENABLED = os.environ.get("SPARKCEP_KERNEL", "1") != "0"


class KernelMatcher:
    max_runs = MAX_RUNS  # ALL MATCHES: threads and finished matches one search holds at once
    max_nodes = MAX_NODES  # ALL MATCHES: label path nodes one search makes

    def __init__(self, plan: Plan, spec: KernelSpec):
        self.plan = plan
        self.spec = spec
        ins = plan.program.instructions
        # The automaton as the kernel reads it: operations, labels, closures, loop slots.
        self.code = plan.derive("kernel", lambda: (
            np.array([i.op for i in ins], dtype=np.int64), np.array([i.a for i in ins], dtype=np.int64),
            closure_table(plan.program), plan.program.slots))
        self.maxlength = plan.query.maxlength if plan.query.maxlength is not None else -1
        q = plan.query
        # stats[0]: the most partial matches (threads) alive at once, over every search so far
        # [1]: thread steps (a live partial match reading a row), [2]: searches (start rows),
        # [3]: rows loops took gliding (kernel._glide), [4]: glides begun, [5]: the most
        # history nodes one ALL MATCHES search made
        self.stats = np.zeros(6, dtype=np.int64)
        self.scanned = False  # a fixed-length pattern ran as a column scan, no threads at all
        self.ran = False  # some partition's data fit the kernel (else the Python matcher ran them all)
        # Static patterns (no cross-row condition) run as a deterministic automaton over row
        # classes where only match spans are needed (select_spans); built on first use.
        self._automaton: Automaton | None | bool = False
        self.determinised = False  # the automaton found some partition's matches
        self.second = plan.derive("next_labels", lambda: next_labels(plan.program))
        # Where each matched row's label follows from the match's length (A B+ C), the
        # automaton's matches need no labels read by the thread-list kernel.
        self.layout = plan.derive("label_layout", lambda: label_layout(plan.pattern))
        self.skip = SkipStrategy.of(q)
        self.skip_member = self.skip.members(len(plan.labels))
        self.conditions = (spec.reg_member, spec.reg_kind, spec.dyn_int, spec.dyn_float)
        # The columns the row-local conditions read (their masks are built per partition).
        self.used = plan.derive("local_columns", lambda: {
            c.index for parts in plan.local_parts for e in parts for c in columns_in(e)})

    @classmethod
    def for_plan(cls, plan: Plan) -> KernelMatcher | None:
        if not ENABLED:
            return None
        spec = plan.derive("kernel_spec", lambda: kernel_spec(plan))
        return cls(plan, spec) if spec is not None else None

    @classmethod
    def for_selection(cls, plan: Plan) -> KernelMatcher | None:
        """The kernel's inputs for its NFA^b runs (event selection strategies)."""
        if not ENABLED:
            return None
        spec = plan.derive("selection_spec", lambda: kernel_spec(plan, event_selection=True))
        return cls(plan, spec) if spec is not None else None

    def arrays(self, part: PartitionData):
        """The kernel's inputs for a partition, or None when the data do not fit it."""
        cached = part.cache.get("kernel")
        if cached is not None:
            return cached if cached != "no" else None
        got = self._arrays(part)
        part.cache["kernel"] = got if got is not None else "no"
        self.ran |= got is not None
        return got

    def program(self, part: PartitionData, arr, bounds: tuple[int, int] = (NO_BOUND, NO_BOUND)) -> Program:
        """The kernel's Program for ``part`` from its ``arrays``."""
        masks, cols, valid, order0, within = arr
        return program(self.code, self.conditions,
                       (masks, cols, valid, order0, within if self.plan.query.within is not None else None),
                       part.n, part.complete, part.base, self.maxlength, bounds, self._horizon(part))

    def _horizon(self, part: PartitionData) -> float:
        """A stream window's watermark (``part.horizon``) in the units of the kernel's
        ``order0`` (microseconds for a timestamp), NaN where there is none or no WITHIN."""
        if part.horizon is None or self.plan.query.within is None or part.complete:
            return np.nan
        column = _arrow_column(part, part.order_index)
        if column is not None and pa.types.is_timestamp(column.type):
            micros = timestamp_micros(pa.array([part.horizon], type=column.type))
            return float(micros[0].as_py()) if micros is not None else np.nan
        try:
            return float(part.horizon)
        except (TypeError, ValueError):
            return np.nan

    def _arrays(self, part: PartitionData):
        plan, n = self.plan, part.n
        arrays = arrays_for(part.cols, self.used, n, part.cache.get("segments"))
        masks = np.ones((len(plan.labels), n), dtype=np.bool_)
        shared = getattr(part.cols, "masks", None)
        with getattr(part.cols, "masks_lock", None) or contextlib.nullcontext():
            for label, parts in enumerate(plan.local_parts):
                if parts:
                    got = _shared_mask(shared, parts)
                    if got is not None:
                        masks[label] = got
                    elif condition_mask(list(parts), arrays, out=masks[label]) is None:
                        return None
                    elif shared is not None:
                        _keep_mask(shared, parts, masks[label])
        k = len(self.spec.columns)
        cols = np.zeros((max(k, 1), n), dtype=np.float64)
        valid = np.zeros((max(k, 1), n), dtype=np.bool_)
        times: dict = {}  # timestamp columns read: index -> (zoned, largest magnitude in microseconds)
        for slot, idx in enumerate(self.spec.columns):
            got = _exact_numbers(part, idx, n, times)
            if got is None:
                return None
            cols[slot], valid[slot] = got
        if not self._exact_products(part, cols, valid, n):
            return None
        # Offsets added to timestamps (t1 - t2 < INTERVAL) must keep the sums exact.
        offsets = self.spec.dyn_float[:, [0, 2]][self.spec.dyn_int[:, [2, 6]] != 0]
        offsets = offsets[offsets != 0]
        top = max((m for _, m in times.values()), default=0.0)
        if len(offsets) and n and not top + float(np.abs(offsets).max()) < _EXACT:
            return None
        within = self.plan.query.within
        if within is not None:
            got = _exact_numbers(part, part.order_index, n, times)
            if got is None:
                return None
            order0 = got[0]
            within = within // dt.timedelta(microseconds=1) if isinstance(within, dt.timedelta) else within
        else:
            order0 = np.zeros(1, dtype=np.float64)
        if len({zoned for zoned, _ in times.values()}) > 1:
            return None  # naive and zoned timestamps: never both (their order differs)
        return masks, cols, valid, order0, float(within) if within is not None else 0.0

    def _exact_products(self, part: PartitionData, cols, valid, n: int) -> bool:
        """Whether the float64 arithmetic on integer columns is exact here, as Python's ints
        are: a running SUM in DEFINE (every sum below 2^53), and a BIGINT value (or its sum)
        times a factor."""
        s = self.spec
        top = {}  # slot -> largest magnitude, for the integer slots

        def biggest(slot: int) -> float | None:
            if slot not in top:
                top[slot] = (float(np.abs(cols[slot][valid[slot]]).max(initial=0.0))
                             if _integral(part, s.columns[slot], n) else None)
            return top[slot]

        for kind in s.reg_kind:
            if kind >> 6 == 4 and (m := biggest(kind & 63)) is not None and not m * n < _EXACT:
                return False
        for d in range(s.dyn_int.shape[0]):
            for side in (0, 1):
                kind, scale = s.dyn_int[d, 2 + 4 * side], abs(s.dyn_float[d, 1 + 2 * side])
                if scale == 1.0 or kind in (LITERAL, COUNT, AVERAGE):
                    continue  # a literal was folded exactly; counts are small; AVG is a float
                if kind == FOLDED:
                    reg_kind = s.reg_kind[_source(s, s.dyn_int[d, 4 + 4 * side])]
                    m = biggest(reg_kind & 63)
                    m = None if m is None else m * (n if reg_kind >> 6 == 4 else 1)
                else:
                    m = biggest(s.dyn_int[d, 3 + 4 * side])
                if m is not None and not m * scale < _EXACT:
                    return False
        return True

    def _first_ok(self, part: PartitionData, masks, unknown: np.ndarray | None = None) -> np.ndarray:
        """Rows where a match may start (the fixed-length column scan does not need it).
        ``unknown``: rows whose next row is not known here (the tails of many windows in one
        table, see select_windows); by default the rows from the limit on of a window."""
        got = part.cache.get("first_ok")
        if got is not None:
            return got
        plan, n = self.plan, part.n
        first_ok = np.ones(n, dtype=np.bool_)
        if not plan.nullable and plan.first:
            # A match can start at row s only if a first variable takes s and then either the
            # match may end or a variable that can come second takes row s + 1 (row-local
            # parts only: a superset of the real starts).
            first_ok = np.zeros(n, dtype=np.bool_)
            for lab, (seconds, can_end) in self.second.items():
                ok = masks[lab].copy()
                if not can_end and n:
                    follow = np.zeros(n, dtype=np.bool_)
                    for g in seconds:
                        follow[:-1] |= masks[g][1:]
                    if unknown is not None:
                        follow |= unknown
                    elif not part.complete:
                        # In a window of a longer partition, rows from the limit on are
                        # there for NEXT() only: what follows them is not known here.
                        follow[max(part.limit - 1, 0):] = True
                    ok &= follow
                first_ok |= ok
        part.cache["first_ok"] = first_ok
        return first_ok

    def select(self, part: PartitionData, input_row=lambda r: r):
        """select_matches' items for a whole partition, or None if the data do not fit."""
        arr = self.arrays(part)
        if arr is None:
            return None
        masks, cols, valid, order0, within = arr
        q, s = self.plan.query, self.spec
        if self.plan.fixed is not None and s.dyn_int.shape[0] == 0:
            return self._select_fixed(part, masks, order0, within, input_row)
        want_unmatched = q.with_unmatched
        got = self._automaton_select(part, masks, cols, valid, order0, within)
        error = None
        if got is not None:
            starts, ends, offs, labels, excl, unmatched = got
        else:
            starts, ends, offs, labels, excl, unmatched, error = self._thread_select(part, arr, input_row)
        matches = matches_from_arrays(starts, ends, offs, labels, excl)
        items = []
        rows = np.nonzero(unmatched)[0].tolist() if want_unmatched else []
        j = 0
        for number, m in enumerate(matches, start=1):
            while j < len(rows) and rows[j] < m.start:
                items.append(("unmatched", rows[j]))
                j += 1
            items.append(("match", m, number))
        items += [("unmatched", r) for r in rows[j:]]
        return items if error is None else _then_raise(items, error)

    def _thread_select(self, part: PartitionData, arr, input_row):
        """The thread-list kernel's selection of a whole partition, as arrays, and the error
        that ended it (or None) with the matches before it."""
        q = self.plan.query
        first_ok = self._first_ok(part, arr[0])
        (starts, ends, offs, labels, excl), unmatched, err, err_row = kernel.select(
            self.skip.code, self.skip_member, q.mode == "matchregex", q.with_unmatched,
            self.program(part, arr, (self.max_runs, self.max_nodes)), first_ok, self.stats)
        error = None
        if err in (kernel.TOO_MANY_RUNS, kernel.TOO_MANY_NODES):
            e = (too_many_runs(self.max_runs, ALL_MATCHES_ADVICE, int(err_row)) if err == kernel.TOO_MANY_RUNS
                 else too_many_runs(self.max_nodes, NODES_ADVICE, int(err_row)))
            error = DataError(e.message, row=input_row(e.position))
        elif err:
            error = self.skip.error(int(err), input_row(int(err_row)))
            # The match that has nowhere to resume is not reported (select_matches raises
            # before it).
            k = len(starts) - 1
            starts, ends, offs = starts[:k], ends[:k], offs[:k + 1]
        return starts, ends, offs, labels, excl, unmatched, error

    def _automaton_select(self, part: PartitionData, masks, cols, valid, order0, within):
        """select's arrays from the automaton: it picks the matches and their labels (see
        _labels); None where the automaton does not run."""
        got = self._automaton_window(part, masks, order0, within, whole=True)
        if got is None:
            return None
        q = self.plan.query
        starts, ends = got[0], got[1]
        offs, labels, excl = self._labels(part, starts, ends, (masks, cols, valid, order0, within))
        unmatched = np.zeros(0, dtype=np.bool_)
        if q.with_unmatched:
            unmatched = np.zeros(part.n, dtype=np.bool_)
            unmatched[Spans.unmatched_rows(starts, ends, part.n)] = True
        return starts, ends, offs, labels, excl, unmatched

    def _automaton_window(self, part: PartitionData, masks, order0, within, pos: int = 0, covered: int = -1,
                          whole: bool = False):
        """The automaton's selection from start ``pos`` (Automaton.window: starts, ends, next
        start, covered), or None where it does not run; ``whole``: only over a whole
        partition (the callers that select it to the end)."""
        automaton = self.automaton()
        if automaton is None or (whole and not (part.complete and part.limit >= part.n)):
            return None
        classes = self._classes(automaton, part, masks)
        if classes is None:
            return None
        self.determinised = True
        return automaton.window(classes, part.limit, part.complete, pos, covered, self.maxlength,
                                self.plan.query.within is not None, order0, within, self._horizon(part))

    @staticmethod
    def _classes(automaton: Automaton, part: PartitionData, masks) -> np.ndarray | None:
        """The rows' classes (Automaton.classes), once per partition data."""
        if "classes" not in part.cache:
            part.cache["classes"] = automaton.classes(masks, part.n)
        return part.cache["classes"]

    def _labels(self, part: PartitionData, starts, ends, arr):
        """Label offsets, labels and exclusions of the automaton's matches: followed back
        through its states, or (exclusions) read by the thread-list kernel from their starts."""
        classes = part.cache.get("classes")
        if classes is not None and not self.plan.query.has_exclusions:
            offs, labels = self.automaton().labels(classes, starts, ends)
            return offs, labels, np.zeros(len(labels), dtype=np.int64)
        _, offs, labels, excl = kernel.labels_at(starts, part.limit, self.program(part, arr), self.stats)
        return offs, labels, excl

    def automaton(self) -> Automaton | None:
        """The pattern as a deterministic automaton, when every condition is row-local."""
        if self._automaton is False:
            static = self.spec.dyn_int.shape[0] == 0
            self._automaton = Automaton.for_plan(self.plan, self.skip.mode) if static else None
        return self._automaton

    @property
    def peak_threads(self) -> int:
        return int(self.stats[0])

    @property
    def peak_nodes(self) -> int:
        return int(self.stats[5])

    @property
    def glided_rows(self) -> int:
        return int(self.stats[3])

    @property
    def glides(self) -> int:
        return int(self.stats[4])

    def select_spans(self, part: PartitionData, input_row=lambda r: r, labels: bool = False) -> Spans | None:
        """The selected matches as arrays for measure columns, with each matched row's label
        where ``labels`` (and its exclusion flag where the pattern excludes rows), and the
        unmatched rows where the query asks for them; None if the data do not fit the kernel."""
        arr = self.arrays(part)
        if arr is None:
            return None
        masks, cols, valid, order0, within = arr
        q = self.plan.query
        offs = lab = excl = None
        if self.plan.fixed is not None and self.spec.dyn_int.shape[0] == 0:  # (never excludes)
            starts = self._fixed_starts(part, masks, order0, within, input_row)
            ends = starts + len(self.plan.fixed)
            if labels:
                offs, lab = self._fixed_labels(starts)
        elif (got := self._automaton_window(part, masks, order0, within, whole=True)) is not None:
            starts, ends = got[0], got[1]
            if labels and self.layout is not None and not q.has_exclusions:
                offs, lab = Spans.layout_labels(starts, ends, self.layout)
            elif labels:
                offs, lab, excl = self._labels(part, starts, ends, arr)
        else:
            got = self._thread_select(part, arr, input_row)
            if got[-1] is not None:
                raise got[-1]  # runtime.local then measures the matches before it per match, in order
            starts, ends = got[:2]
            if labels:
                offs, lab, excl = got[2], got[3], got[4]
        spans = Spans.of_kernel(starts, ends, np.arange(1, len(starts) + 1, dtype=np.int64), offs, lab,
                                excl if q.has_exclusions else None)
        if q.with_unmatched:
            spans.unmatched = Spans.unmatched_rows(starts, ends, part.n)
        return spans

    def _fixed_labels(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Label offsets and labels of a fixed-length pattern's matches (its variables in turn)."""
        k = len(self.plan.fixed)
        return (np.arange(len(starts) + 1, dtype=np.int64) * k,
                np.tile(np.array(self.plan.fixed, dtype=np.int64), len(starts)))

    def _fixed_starts(self, part: PartitionData, masks, order0, within, input_row,
                      segments: np.ndarray | None = None) -> np.ndarray:
        """A plain sequence of variables whose conditions are all row-local needs no
        automaton: its matches start where the shifted masks all hold (a column scan), and
        every match has the same length, so the selection is one pass over those starts."""
        plan, q, n = self.plan, self.plan.query, part.n
        self.scanned = True
        labels = plan.fixed
        k = len(labels)
        if n < k or (q.maxlength is not None and k > q.maxlength):
            return np.zeros(0, dtype=np.int64)
        ok = masks[labels[0]][: n - k + 1].copy()
        for i, lab in enumerate(labels[1:], start=1):
            ok &= masks[lab][i:n - k + 1 + i]
        if q.within is not None:
            ok &= np.abs(order0[k - 1:] - order0[: n - k + 1]) <= within
        if segments is not None:  # many partitions: a match lies inside one
            ok &= segments[k - 1:] == segments[: n - k + 1]
        hits = np.flatnonzero(ok).astype(np.int64)
        delta = self.skip.step(labels)
        if delta < 0 and len(hits):
            raise self.skip.error(-delta, input_row(int(hits[0])))
        return kernel.nonoverlapping(hits, delta)

    def _select_fixed(self, part: PartitionData, masks, order0, within, input_row):
        """select_matches' items for a fixed-length pattern (see _fixed_starts)."""
        q, n = self.plan.query, part.n
        labels = self.plan.fixed
        k = len(labels)
        matches = self._fixed_starts(part, masks, order0, within, input_row).tolist()
        lab_t, excl_t = tuple(labels), (False,) * k
        items = []
        want_unmatched = q.with_unmatched
        if want_unmatched:
            covered = np.zeros(n + 1, dtype=np.int64)
            for st in matches:
                covered[st] += 1
                covered[st + k] -= 1
            free = np.flatnonzero(np.cumsum(covered[:n]) == 0).tolist()
        else:
            free = []
        j = 0
        for number, st in enumerate(matches, start=1):
            while j < len(free) and free[j] < st:
                items.append(("unmatched", free[j]))
                j += 1
            items.append(("match", Match(st, st + k, lab_t, excl_t), number))
        items += [("unmatched", r) for r in free[j:]]
        return items

    def _window_inputs(self, part: PartitionData):
        """The kernel's arrays for a window and the rows where a match may start, or None."""
        arr = self.arrays(part)
        return None if arr is None else (*arr, self._first_ok(part, arr[0]))

    def select_window(self, part: PartitionData, pos: int, covered: int, input_row=lambda r: r,
                      stop: int | None = None):
        """The matches from start ``pos`` on, over a window whose rows past ``part.limit`` may
        not have arrived, stopping where an answer needs unseen rows: (starts, ends, label
        offsets, labels, excluded, next start, covered). ``stop``: no start from there on is
        wanted (the thread-list kernel does not search them; the automaton's scan is cheap
        enough not to care). None when the data do not fit the kernel."""
        if self.automaton() is not None:
            arr = self.arrays(part)
            if arr is None:
                return None
            masks, cols, valid, order0, within = arr
            got = self._automaton_window(part, masks, order0, within, pos, covered)
            if got is not None:
                starts, ends, pos, covered = got
                return (starts, ends, *self._labels(part, starts, ends, arr), pos, covered)
        got = self._window_inputs(part)
        if got is None:
            return None
        *arr, first_ok = got
        (starts, ends, offs, labels, excl), pos, covered, err, err_row = kernel.select_window(
            pos, covered, part.limit if stop is None else stop, part.limit, self.skip.code, self.skip_member,
            self.program(part, arr), first_ok, self.stats)
        if err:
            raise self.skip.error(int(err), input_row(int(err_row)))
        return starts, ends, offs, labels, excl, int(pos), int(covered)

    def select_partitions(self, part: PartitionData, bounds: list[tuple[int, int]], input_row=lambda r: r,
                          labels: bool = False):
        """Every partition's matches in one pass, on the engine select_spans would pick for
        each (a column scan, the automaton, or the thread-list kernel but for ALL MATCHES and
        matchregex there): (starts, ends, partition of each match, with ``labels`` the label
        offsets and labels of the matches' rows, else None) as rows of ``part``, which holds
        the partitions one after another; None where that does not apply or the data do not
        fit the kernel. A skip error of the thread-list kernel stops it: see
        ``window_error``; one of the column scan is raised (at its first match, as there)."""
        q, s = self.plan.query, self.spec
        self.window_error = None
        if len(bounds) < 2:
            return None
        b = np.array(bounds, dtype=np.int64)
        lo, hi = b[:, 0], b[:, 1]
        n = hi - lo
        segments = np.repeat(np.arange(len(lo), dtype=np.int64), n)
        static = s.dyn_int.shape[0] == 0
        if (self.plan.fixed is not None and static) or self.automaton() is not None:
            part.cache["segments"] = segments
            arr = self.arrays(part)
            if arr is None:
                return None
            masks, cols, valid, order0, within = arr
            if self.plan.fixed is not None and static:
                starts = self._fixed_starts(part, masks, order0, within, input_row, segments)
                return starts, starts + len(self.plan.fixed), segments[starts], \
                    self._fixed_labels(starts) if labels else None
            classes = self._classes(self.automaton(), part, masks)
            if classes is None:
                return None
            self.determinised = True
            starts, ends, parts = self.automaton().partitions(classes, lo, hi, self.maxlength, q.within is not None,
                                                              order0, within)
            if not labels:
                return starts, ends, parts, None
            if self.layout is not None:
                return starts, ends, parts, Spans.layout_labels(starts, ends, self.layout)
            return starts, ends, parts, self.automaton().labels(classes, starts, ends)
        if self.skip.mode == "ALL_MATCHES" or q.mode == "matchregex":
            return None
        none = np.zeros(len(lo), dtype=np.int64)
        got = self.select_windows(part, lo, n, n, none, none, none - 1, True, segments)
        if got is None:
            return None
        return got[0], got[1], got[2], got[5][:2] if labels else None

    def select_windows(self, part: PartitionData, los: np.ndarray, ns: np.ndarray, limits: np.ndarray,
                       bases: np.ndarray, poss: np.ndarray, covereds: np.ndarray, complete: bool,
                       segments: np.ndarray):
        """select_window over many windows of ``part`` at once (a stream's bucket, each key's
        sealed rows: see kernel.select_windows): (match starts, ends, window of each match,
        next start and covered per window, (label offsets, labels, excluded)), or None when
        the data do not fit the kernel. A skip error names its window: (error, window, row)
        in ``self.window_error``; the matches before it are returned. ``segments``: each
        row's partition (PREV and NEXT in the conditions stay inside it)."""
        part.cache["segments"] = segments
        arr = self.arrays(part)
        if arr is None:
            return None
        masks, cols, valid, order0, within = arr
        # A window's last rows are followed by another key's rows here: not known.
        edge = np.zeros(part.n + 1, dtype=np.int64)
        if complete:
            np.add.at(edge, los + ns - 1, 1)
        else:
            np.add.at(edge, los + np.maximum(limits - 1, 0), 1)
        np.add.at(edge, los + ns, -1)
        unknown = np.cumsum(edge[:part.n]) > 0
        first_ok = self._first_ok(part, masks, unknown)
        prog = self.program(part, arr)._replace(complete=bool(complete))
        windows = kernel.Windows(*(np.asarray(x, dtype=np.int64) for x in (los, ns, limits, bases, poss, covereds)))
        (starts, ends, offs, labels, excl), wins, pos, covered, err, err_win, err_row = kernel.select_windows(
            windows, self.skip.code, self.skip_member, prog, first_ok, self.stats)
        self.window_error = (int(err), int(err_win), int(err_row)) if err else None
        return starts, ends, wins, pos, covered, (offs, labels, excl)

    @staticmethod
    def match_items(starts, ends, offs, labels, excl, number: int) -> list:
        """select_matches' items for matches as the kernel returns them, numbered from
        ``number`` + 1."""
        return [("match", m, number + i + 1) for i, m in enumerate(matches_from_arrays(starts, ends, offs, labels, excl))]

    def candidates(self, part: PartitionData, first: int, last: int, earliest: bool):
        """[(start, Match | None | UNRESOLVED)] for starts in [first, last) of a window."""
        got = self._window_inputs(part)
        if got is None:
            return None
        *arr, first_ok = got
        ends, offs, labels, excl = kernel.candidates(first, last, part.limit, earliest, self.program(part, arr),
                                                     first_ok, self.stats)
        # A start without a match has no labels: its Match is built and not used.
        found = matches_from_arrays(np.arange(first, first + len(ends)), ends, offs, labels, excl)
        return [(m.start, UNRESOLVED if m.end == kernel.UNRESOLVED else None if m.end == kernel.NO_MATCH else m)
                for m in found]


def _shared_mask(shared: dict | None, parts: tuple) -> np.ndarray | None:
    """A row-local condition's mask another plan computed over the same rows, if any."""
    if shared is None:
        return None
    try:
        return shared.get(parts)
    except TypeError:  # a literal that does not hash (an array): not shared
        return None


def _keep_mask(shared: dict, parts: tuple, mask: np.ndarray) -> None:
    kept = mask.copy()  # (the plan's own matrix may change; the kept one may not)
    kept.flags.writeable = False
    try:
        shared[parts] = kept
    except TypeError:
        pass


def numbered_within(windows: np.ndarray, count: int) -> np.ndarray:
    """1, 2, ... for the matches of each of ``count`` windows (or partitions), given each
    match's window in ascending order, as select_windows and select_partitions return them."""
    first = np.searchsorted(windows, np.arange(count))
    return np.arange(len(windows), dtype=np.int64) - first[windows] + 1


def _source(spec: KernelSpec, r: int) -> int:
    """The register a LAG register (code 7) copies, followed back to one that folds a column."""
    while spec.reg_kind[r] >> 6 == LAG:
        r -= int(spec.reg_kind[r] & 63)
    return r


def _exact_numbers(part: PartitionData, idx: int, n: int, times: dict):
    """(float64 data, valid) of a numeric column, or of a timestamp column in microseconds
    (recorded in ``times``: zoned or not, and its largest magnitude), or None when the values
    would not stay exact as float64 (or are not at a whole microsecond)."""
    column = _arrow_column(part, idx)
    if column is not None and pa.types.is_timestamp(column.type):
        micros = timestamp_micros(column)
        got = numpy_values(micros) if micros is not None else None
        if got is None:
            return None
        d, v = got
        top = max_magnitude(d[v])
        if top >= _EXACT:
            return None
        times[idx] = (column.type.tz is not None, float(top))
        return d.astype(np.float64), v
    return _exact_floats(arrays_for(part.cols, {idx}, n), idx)  # Python datetimes: object, declined


def _integral(part: PartitionData, idx: int, n: int) -> bool:
    column = _arrow_column(part, idx)
    if column is not None:
        t = column.type
        return pa.types.is_integer(t.value_type if pa.types.is_dictionary(t) else t)
    return arrays_for(part.cols, {idx}, n).data[idx].dtype.kind in "iu"


def _arrow_column(part: PartitionData, idx: int):
    """The partition's Arrow column ``idx``, or None when its columns are Python lists."""
    arrow = getattr(part.cols, "arrow", None)
    return arrow(idx) if arrow is not None else None


def _exact_floats(arrays, idx: int):
    """(float64 data, valid) of a numeric column, or None when int64 values would not stay
    exact as float64."""
    d, v = arrays.data[idx], arrays.valid[idx]
    if d.dtype == object:
        return None
    if d.dtype == np.int64 and max_magnitude(d[v]) >= _EXACT:  # not np.abs: it wraps -2^63
        return None
    return d.astype(np.float64), v


def _then_raise(items: list, error: DataError):
    """select's items before a selection error, then the error: the matches before it are
    measured first, as select_matches' are, so a MEASURES error of theirs is the one raised."""
    yield from items
    raise error
