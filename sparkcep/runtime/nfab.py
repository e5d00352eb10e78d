"""NFA^b (SASE, SIGMOD'08): matching with event selection strategies.

A *run* is a partial match waiting between two selected rows. It sits at a continuation of
the instruction program (the place after its last selected row); at each row it follows
the epsilon instructions to the MATCH instructions it could take next (SASE's begin, take
and proceed edges) and, depending on the strategy, may also ignore the row (SASE's ignore
edge):

- STRICT CONTIGUITY: never ignores; the next selected row must follow the last one in the
  whole input order (across partitions), not only within the partition.
- PARTITION CONTIGUITY: never ignores (SQL's MATCH_RECOGNIZE; the Pike VM in runtime.vm
  runs it faster, this module runs it for comparison).
- SKIP TILL NEXT MATCH: ignores a row exactly when none of its *home* variables can take
  it. The home variables are those the run can take next with the variable of its last
  selected row, if it can repeat that variable (SASE's take edge of a Kleene state),
  otherwise every variable it can take next. So a Kleene run that cannot extend its
  variable skips the row and, if the next variable takes it, also proceeds (SASE's
  ignore-proceed nondeterminism).
- SKIP TILL ANY MATCH: may always ignore.

A match starts with a selected row (runs are not born ignoring). Preference: a run's
successors come in the order of the MATCH instructions they take (the pattern's own
preference), and the run that ignores the row after all of them, so the earliest next row is
preferred (skip till *next* match); this orders SQL's preferred match and ALL MATCHES. ``!X`` (runtime op NEGATE) makes the run
check, when it selects its next row, that no row it skipped since its last selected row
satisfies X.

Three algorithms share the transition code:
- ``NFAbMatcher.preferred``: the runs of one start row, breadth first (SQL output modes:
  one start row after another, as runtime.selection asks).
- ``NFAbMatcher.all_matches``: ALL MATCHES for a whole partition in one pass, runs of every
  start row together, matches kept in a shared versioned buffer (SASE 4.1) and, with
  ``merge=True``, equivalent runs merged (SASE 4.2.2).
- ``Backtrack``: SASE's backtracking baseline, one run at a time, depth first.

Live partial matches are bounded (``max_runs``), and so are the label paths ALL MATCHES
keeps for one start row (``max_nodes``): past either bound the search stops with a DataError
naming the row, never with unbounded memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparkcep.compile.plan import Plan
from sparkcep.compile.program import (
    ACCEPT,
    ASSERT_END,
    ASSERT_START,
)
from sparkcep.errors import QueryError
from sparkcep.runtime import kernel_runs
from sparkcep.runtime.matches import (
    MAX_RUNS,
    NODES_ADVICE,
    UNRESOLVED,
    Match,
    PartitionData,
    matches_from_arrays,
    too_many_runs,
)
from sparkcep.runtime.vm import Matcher, first_rows

# A run is a tuple; the fields, by index:
PC, LAB, LAST, NAV, AGGS, SLOTS, EXCL, PEND, HIST, FRESH = range(10)
# PC: continuation; LAB/LAST: label and row of the last selected row (-1: none yet);
# SLOTS: per loop slot, True while the current optional iteration has selected nothing;
# EXCL: exclusion depth; PEND: negated labels to check at the next selected row;
# HIST: (row, label, excluded, previous) linked list (all_matches keeps rows in its buffer instead);
# FRESH: the run selected the previous row (only then may its ACCEPT fire).


ACCEPTED = None  # the closure item that completes a match (a singleton: it survives pickling)


class NFAbMatcher(Matcher):
    """Matches with event selection (plan.query.event_selection) and negation."""

    rowed_history = True  # event selection skips rows: a history node names its row

    steps = 0  # (run, row) evaluations of the depth-first search (Backtrack)

    def __init__(self, plan: Plan, merge: bool = True, max_runs: int = MAX_RUNS):
        super().__init__(plan)
        q = plan.query
        self.selection = q.event_selection
        self.gapped = q.gapped
        self.merge = merge
        self.max_runs = max_runs
        self.peak_runs = 0
        self.run_steps = 0  # live runs summed over the rows read (all_matches)
        self.rows_read = 0
        self.initial_slots = (False,) * plan.program.slots
        self._reads_start = any(dp.track < 0 for dp in plan.define_pointers)
        # Without anchors a closure depends on the run's place alone: computed once each.
        anchored = any(i.op in (ASSERT_START, ASSERT_END) for i in plan.program.instructions)
        self._closure_cache: dict | None = None if anchored else {}

    # ------------------------------------------------------------ transitions
    def closure(self, run: tuple, pos: int, part: PartitionData) -> list[tuple]:
        """The places ``run`` can go at row ``pos`` without selecting a row, in preference
        order: ACCEPTED or (pc of a MATCH, slots, excl, pending), from the program's
        precomputed closure."""
        start_item = (run[PC], run[SLOTS], run[EXCL], run[PEND])
        if self._closure_cache is not None:
            got = self._closure_cache.get(start_item)
            if got is not None:
                return got
        _, slots0, excl0, pend0 = start_item
        out: list[tuple] = []
        seen: set = set()
        at_first = pos + part.base == 0
        at_end = part.complete and pos == part.n
        for place in self.closures[run[PC]]:  # the program's, as the Pike VM reads them
            if not place.passes(at_first, at_end, slots0, True):
                continue
            slots = place.entered(slots0, True)  # True while the iteration has selected nothing
            pend = pend0
            if place.negates:
                pend = tuple(sorted(set(pend0) | set(place.negates)))
            item = (place.pc, slots, excl0 + place.excl, pend)
            if item in seen:
                continue
            seen.add(item)
            out.append(ACCEPTED if self.code[place.pc][0] == ACCEPT else item)
        if self._closure_cache is not None:
            self._closure_cache[start_item] = out
        return out

    def home(self, run: tuple, items: list[tuple]) -> tuple[frozenset[int], int]:
        """(indexes of the home MATCHes in ``items``, index of the last MATCH — where the
        run that ignores the row ranks — or -1)."""
        code = self.code
        lab = run[LAB]
        tests = [i for i, it in enumerate(items) if it is not ACCEPTED]
        same = [i for i in tests if code[items[i][0]][1] == lab]
        return frozenset(same or tests), (tests[-1] if tests else -1)

    def take(self, run: tuple, item: tuple, pos: int, part: PartitionData, start: int, masks: list):
        """(nav, aggs) after ``run`` selects row ``pos`` through ``item``, or None."""
        plan = self.plan
        label = self.code[item[0]][1]
        if self.selection == "STRICT" and run[LAST] >= 0 and not part.cache["adjacent"][pos]:
            return None
        mask = masks[label]
        if mask is not None:
            if not mask[pos]:
                return None
            cond = plan.residuals[label]
        else:
            cond = plan.conditions[label]
        if item[3] and not self._negations_hold(run, item[3], pos, part, start):
            return None
        return self._evaluate(run, label, cond, pos, part, start)

    def _evaluate(self, run: tuple, label: int, cond, pos: int, part: PartitionData, start: int):
        return self.select_row(label, cond, pos, part, start, run[NAV], run[AGGS], run[HIST])

    def _negations_hold(self, run: tuple, pending: tuple, pos: int, part: PartitionData, start: int) -> bool:
        """No row skipped since the run's last selected row satisfies a negated variable."""
        if run[LAST] < 0:
            return True  # nothing selected yet: no rows between
        for label in pending:
            cond = self.plan.conditions[label]
            for h in range(run[LAST] + 1, pos):
                if cond is None or self._evaluate(run, label, cond, h, part, start) is not None:
                    return False
        return True

    def ignores(self, run: tuple, took_home: bool) -> bool:
        if run[LAST] < 0:
            return False  # a match starts with a selected row
        if self.selection == "ANY":
            return True
        if self.selection == "NEXT":
            return not took_home
        return False

    def initial(self) -> tuple:
        return (0, -1, -1, self.initial_nav, self.initial_aggs, self.initial_slots, 0, (), None, True)

    @staticmethod
    def advanced(item: tuple, label: int, pos: int, state: tuple, hist) -> tuple:
        """The run after selecting row ``pos`` with ``label`` through MATCH ``item``."""
        return (item[0] + 1, label, pos, state[0], state[1], (False,) * len(item[1]), item[2], (), hist, True)

    def _check_bound(self, count: int, pos: int) -> None:
        if count > self.peak_runs:
            self.peak_runs = count
        if count > self.max_runs:
            raise too_many_runs(self.max_runs, "partial matches are alive at once; add WITHIN or MAXLENGTH, make "
                                "the conditions more selective, or use a stricter EVENT SELECTION", pos)

    # ------------------------------------------------------------ one start row, breadth first
    def preferred(self, part: PartitionData, start: int):
        return self._search(part, start, "preferred")

    def all(self, part: PartitionData, start: int):
        # The one-pass search knows the preference order of the matches it finds (their
        # versions); the breadth-first search only their completion order. One pass per
        # partition, whichever start rows are asked for.
        if self.plan.label_history:
            # DEFINE reads labels next to a variable's row, which only whole histories hold
            # (the one-pass search shares them): depth first from this row, as Backtrack.
            return Backtrack._search(self, part, start, "all")
        found = part.cache.get("nfab_all")
        if found is None:
            found = part.cache["nfab_all"] = self.all_matches(part)
        unresolved = part.cache.get("nfab_unresolved")
        if unresolved is not None and start >= unresolved:
            return UNRESOLVED
        self.expired = part.cache["nfab_expired"].get(start)
        return found.get(start, [])

    def earliest(self, part: PartitionData, start: int):  # pragma: no cover - analyzer forbids it
        raise QueryError("NOT_SUPPORTED", "the matchregex mode cannot be combined with EVENT SELECTION")

    def _key(self, run: tuple) -> tuple:
        """Runs of one start row with this key have the same future: the first is kept."""
        key = (run[PC], run[LAB], run[NAV], run[AGGS], run[SLOTS], run[EXCL], run[FRESH])
        if self.selection == "STRICT" or self.plan.query.negated:
            key += (run[LAST],)
        if self.plan.label_history:  # conditions read labels of earlier rows: histories differ
            key += (id(run[HIST]),)
        return key

    def _step(self, run: tuple, pos: int, part: PartitionData, start: int, masks: list, with_history: bool):
        """What ``run`` becomes at row ``pos``, in preference order: new runs, the run itself
        when it ignores the row, and (None, run) where it completes a match. A generator, so
        a caller that stops at a match evaluates nothing less preferred."""
        items = self.closure(run, pos, part)
        extend = self._can_extend(part, start, pos)
        if (extend is False and self.expired is None and run[LAST] >= 0 and with_history
                and any(it is not ACCEPTED for it in items) and self.past_within(part, start, pos)):
            self.expired = self._to_match(start, run)
        home, last_test = self.home(run, items)
        took_home = False
        for i, item in enumerate(items):
            if item is ACCEPTED:
                if run[FRESH]:
                    yield (None, run)
                continue
            if extend is None:  # the row is not sealed yet (a stream): the answer waits for it
                yield UNRESOLVED
                return
            if extend:
                state = self.take(run, item, pos, part, start, masks)
                if state is not None:
                    took_home = took_home or i in home
                    label = self.code[item[0]][1]
                    hist = (pos, label, item[2] > 0, run[HIST]) if with_history else None
                    yield self.advanced(item, label, pos, state, hist)
            if i == last_test and extend and self.ignores(run, took_home):
                yield run[:FRESH] + (False,)

    def _search(self, part: PartitionData, start: int, how: str):
        """The preferred match from ``start`` (``how`` is "preferred"; ALL MATCHES goes
        through all_matches, which knows the preference order of what it finds)."""
        masks, starts = self.prepare(part)
        if starts is not None and start < part.limit and not starts[start]:
            return None
        best = None
        runs = [self.initial()]
        pos = start
        while runs:
            nlist: list[tuple] = []
            seen: set = set()
            cut = False
            for run in runs:
                for nrun in self._step(run, pos, part, start, masks, with_history=True):
                    if nrun is UNRESOLVED:
                        return UNRESOLVED
                    if nrun[0] is None:
                        # Less preferred runs end here; more preferred ones go on and may
                        # replace this match (as in the Pike VM).
                        best, cut = self._to_match(start, nrun[1]), True
                        break
                    k = self._key(nrun)
                    if k not in seen:
                        seen.add(k)
                        nlist.append(nrun)
                if cut:
                    break
            self._check_bound(len(nlist), pos)
            runs = nlist
            pos += 1
        return best

    def _to_match(self, start: int, run: tuple) -> Match:
        rows, labels, excl = [], [], []
        h = run[HIST]
        while h is not None:
            rows.append(h[0])
            labels.append(h[1])
            excl.append(h[2])
            h = h[3]
        rows.reverse()
        labels.reverse()
        excl.reverse()
        end = rows[-1] + 1 if rows else start
        return Match(start, end, tuple(labels), tuple(excl), tuple(rows) if self.gapped else None)

    # ------------------------------------------------------------ a whole partition in one pass
    def all_matches(self, part: PartitionData) -> dict[int, list[Match]]:
        """Every match of the partition (ALL MATCHES), by start row, in one pass over the
        rows. Matches live in a shared versioned buffer: one entry per selected (row, label),
        with predecessor pointers labelled by Dewey version numbers; a run holds members
        (version, entry, start row, path); equivalent runs are merged when ``merge`` is set.
        A path is an object shared by the members of one start that selected the same rows
        with the same labels (a tuple holding the path before it): a merged run keeps one
        member per start and path, the most preferred, since the others would give the same
        matches again (nested quantifiers such as ((B* | C)+)* reach one labelling many ways)."""
        masks, starts = self.prepare(part)
        out: dict[int, list[Match]] = {}
        runs: list[tuple[tuple, list]] = []  # (run state, members)
        n = part.limit
        candidates = [r for r in range(n) if starts[r]] if starts is not None else None
        next_start = 0  # index into candidates
        part.cache["nfab_unresolved"] = None
        expired: dict[int, list] = {}
        nodes: dict[int, int] = {}  # start row -> buffer pointers its members added
        pos = -1
        while pos < n:
            pos += 1
            if pos == n and not part.complete:
                # A stream's sealed rows end here: the starts of runs that could still
                # take a row wait for it (and every later start with them).
                waiting = [m[2] for _, members in runs for m in members if self._can_extend(part, m[2], n) is None]
                part.cache["nfab_unresolved"] = min(waiting) if waiting else None
            if candidates is not None:
                if not runs:
                    # Nothing alive: jump to the next row where a match can start.
                    if next_start >= len(candidates):
                        break
                    pos = max(pos, candidates[next_start])
                while next_start < len(candidates) and candidates[next_start] < pos:
                    next_start += 1
                if next_start < len(candidates) and candidates[next_start] == pos:
                    runs.append((self.initial(), [((pos,), None, pos, ())]))
                    next_start += 1
            elif pos < n:
                runs.append((self.initial(), [((pos,), None, pos, ())]))
            runs = self._all_step(runs, pos, n, part, masks, out, expired, nodes)
        part.cache["nfab_expired"] = {s: min(ms, key=lambda vm: vm[0])[1] for s, ms in expired.items()}
        return {s: _by_preference(ms) for s, ms in out.items()}

    def _all_step(self, runs: list, pos: int, n: int, part: PartitionData, masks: list, out: dict,
                  expired: dict, nodes: dict) -> list:
        """Every run of the one-pass search at row ``pos``: matches it finishes go to
        ``out``, what it becomes (merged with equivalent runs) is returned. ``nodes`` counts
        the buffer pointers each start row's members add: its label paths, which the bound
        ``max_nodes`` holds per start row as the compiled search's history nodes."""
        merged: dict[tuple, tuple[tuple, list]] = {}
        order: list[tuple] = []
        entries: dict[tuple, _Entry] = {}  # (label, excluded) -> buffer entry for row pos
        paths: dict[tuple, tuple] = {}  # (id of a path, label, excluded) -> that path with row pos
        kept: dict[tuple, dict] = {}  # merge key -> (start, id of path) -> index of its member
        for run, members in runs:
            items = self.closure(run, pos, part)
            live = [m for m in members if pos < n and self._can_extend(part, m[2], pos)]
            if (self.within is not None and len(live) < len(members) and run[LAST] >= 0
                    and any(it is not ACCEPTED for it in items)):
                alive = {id(m) for m in live}
                for m in members:
                    if id(m) not in alive and self.past_within(part, m[2], pos):
                        self._emit(expired, m[0], m[1], m[2])  # WITHIN ended it (a stream's timeout)
            outcomes = self._outcomes(run, items, live, pos, part, masks, entries)
            # Dewey numbers: a digit per branching, in preference order, so versions
            # also sort the matches of one start row by preference.
            split = len(outcomes) > 1
            for j, (nrun, entry) in enumerate(outcomes):
                if nrun is None:
                    for version, last, start, _ in members:
                        self._emit(out, version + (j,) if split else version, last, start)
                    continue
                new_members = []
                for version, prev, start, path in live:
                    v = version + (j,) if split else version
                    if entry is None:
                        new_members.append((v, prev, start, path))
                    else:
                        entry.add(v, prev)
                        at = (id(path), entry.label, entry.excluded)
                        longer = paths.get(at)
                        if longer is None:
                            longer = paths[at] = (path,)
                        new_members.append((v, entry, start, longer))
                        grown = nodes[start] = nodes.get(start, 0) + 1
                        if grown > self.max_nodes:
                            raise too_many_runs(self.max_nodes, NODES_ADVICE, pos)
                key = self._merge_key(nrun, live[0][2]) if self.merge else (len(order),)
                slot = merged.get(key)
                if slot is None:
                    merged[key] = (nrun, new_members)
                    order.append(key)
                else:
                    self._merge_members(slot[1], new_members, kept, key)
        out_runs = []
        total = 0
        self.rows_read += 1
        self.run_steps += len(order)
        for key in order:
            run, members = merged[key]
            members.sort(key=lambda m: m[2])  # oldest start first; the last is the youngest
            out_runs.append((run, members))
            total += len(members)
        if pos < n:
            self._check_bound(total, pos)
        return out_runs

    @staticmethod
    def _merge_members(members: list, new: list, kept: dict, key: tuple) -> None:
        """Add ``new`` members to a merged run's; of two with one start and one path, the one
        with the smaller version stays (the same matches, found in preference order)."""
        index = kept.get(key)
        if index is None:
            index = kept[key] = {(m[2], id(m[3])): i for i, m in enumerate(members)}
        for m in new:
            k = (m[2], id(m[3]))
            i = index.get(k)
            if i is None:
                index[k] = len(members)
                members.append(m)
            elif m[0] < members[i][0]:
                members[i] = m

    def _outcomes(self, run: tuple, items: list, live: list, pos: int, part: PartitionData, masks: list,
                  entries: dict) -> list[tuple]:
        """What ``run`` does at row ``pos``, in preference order: a finished match (None,
        None), a new run with its buffer entry, or the run itself ignoring the row (run, None)."""
        home, last_test = self.home(run, items)
        took_home = False
        outcomes: list[tuple] = []
        # Conditions may read the start row (FIRST of the match), so a merged run
        # evaluates them for its youngest member; merged members agree on all else.
        start = live[-1][2] if live else -1
        for i, item in enumerate(items):
            if item is ACCEPTED:
                if run[FRESH]:
                    outcomes.append((None, None))
                continue
            if live:
                state = self.take(run, item, pos, part, start, masks)
                if state is not None:
                    took_home = took_home or i in home
                    label = self.code[item[0]][1]
                    nrun = self.advanced(item, label, pos, state, None)
                    ek = (label, item[2] > 0)
                    entry = entries.get(ek)
                    if entry is None:
                        entry = entries[ek] = _Entry(pos, label, item[2] > 0)
                    outcomes.append((nrun, entry))
            if i == last_test and live and self.ignores(run, took_home):
                outcomes.append((run[:FRESH] + (False,), None))
        return outcomes

    def _merge_key(self, run: tuple, start: int) -> tuple:
        # Runs with the same future merge (SASE's masks over the computation state): the
        # same continuation, tracked rows and aggregate states; the last row only when a
        # negation or strict contiguity still reads it; the start row only when a condition
        # reads the match's first row by position.
        key = (run[PC], run[LAB], run[NAV], run[AGGS], run[SLOTS], run[EXCL], run[FRESH])
        if self.selection == "STRICT" or self.plan.query.negated:
            key += (run[LAST],)
        if self._reads_start:
            key += (start,)
        return key

    def _emit(self, out: dict, version: tuple, entry, start: int) -> None:
        rows, labels, excl = [], [], []
        e = entry
        base: tuple = ((), (), ())
        first: tuple | None = None  # (entry, pointer) behind ``entry``: where this path is kept
        while e is not None:
            rows.append(e.row)
            labels.append(e.label)
            excl.append(e.excluded)
            k = e.pointer(version)
            if e is not entry and first is None:
                first = (e, k)
            kept = e.paths.get(k) if e.paths is not None else None
            if kept is not None:  # the path up to here, read by an earlier match
                rows.pop()
                labels.pop()
                excl.pop()
                base = kept
                break
            e = e.preds[k][1] if k >= 0 else None
        rows.reverse()
        labels.reverse()
        excl.reverse()
        rows_t, labels_t, excl_t = base[0] + tuple(rows), base[1] + tuple(labels), base[2] + tuple(excl)
        if first is not None and len(rows_t) > 1:
            # A later match through the same entry and pointer (a Kleene run's next match)
            # copies the path up to it instead of walking it again.
            node, k = first
            if node.paths is None:
                node.paths = {}
            node.paths[k] = (rows_t[:-1], labels_t[:-1], excl_t[:-1])
        end = rows_t[-1] + 1 if rows_t else start
        out.setdefault(start, []).append(
            (version, Match(start, end, labels_t, excl_t, rows_t if self.gapped else None)))


class _Entry:
    """One selected (row, label) in the shared versioned buffer, with its predecessors: a
    list of (Dewey version, previous entry). A run's match is read back by following, from
    its last entry, the pointers whose version is a prefix of the run's."""

    __slots__ = ("row", "label", "excluded", "preds", "mixed", "paths", "by_version")

    def __init__(self, row: int, label: int, excluded: bool):
        self.row = row
        self.label = label
        self.excluded = excluded
        self.preds: list[tuple[tuple, Any]] = []
        self.mixed = False  # the predecessors are not all the same entry
        # pointer index -> (rows, labels, excluded) of the match up to and including this
        # entry, for the versions that leave it through that pointer (which fixes the path
        # behind it: earlier pointers' versions are prefixes of this one's)
        self.paths: dict[int, tuple] | None = None
        # version -> index of its first pointer, made when first asked (SKIP TILL ANY MATCH
        # gives an entry thousands of pointers: a scan per lookup was quadratic)
        self.by_version: dict[tuple, int] | None = None

    def add(self, version: tuple, prev) -> None:
        if self.preds and self.preds[0][1] is not prev:
            self.mixed = True
        self.preds.append((version, prev))
        if self.by_version is not None:
            self.by_version.setdefault(version, len(self.preds) - 1)

    def pointer(self, version: tuple) -> int:
        """Index of the predecessor pointer ``version`` follows (-1: the first entry)."""
        preds = self.preds
        if not self.mixed and (len(preds) == 1 or preds[0][1] is None):
            # One pointer, or every pointer leads to the start: the path behind is fixed.
            return 0 if preds[0][1] is not None else -1
        # Several pointers: the path behind this entry depends on which one the version
        # follows, even when they all name the same entry (whose own pointers may differ):
        # the one whose version is the longest prefix of ``version`` (the first of equals).
        index = self.by_version
        if index is None:
            index = self.by_version = {}
            for k, (v, _) in enumerate(preds):
                index.setdefault(v, k)
        for length in range(len(version), -1, -1):
            k = index.get(version[:length])
            if k is not None:
                return k
        raise AssertionError("no compatible predecessor in the versioned buffer")  # pragma: no cover


class Backtrack(NFAbMatcher):
    """SASE's backtracking baseline: one run at a time, depth first; the runs it forks wait
    on a stack and are resumed (re-reading rows) when the current one fails or completes.
    Forks are stacked in preference order, so the first match popped is the preferred one.
    ``steps`` counts (run, row) evaluations, to compare with the breadth-first search."""

    def _search(self, part: PartitionData, start: int, how: str):
        masks, starts = self.prepare(part)
        if starts is not None and start < part.limit and not starts[start]:
            return [] if how == "all" else None
        found: list[Match] = []
        stack: list[tuple] = [(self.initial(), start)]
        while stack:
            top = stack.pop()
            if top[0] is None:  # a finished match, in its place among the forks
                if how != "all":
                    return top[1]
                found.append(top[1])
                continue
            run, pos = top
            self.steps += 1
            forks = self._step(run, pos, part, start, masks, with_history=True)
            stack.extend(reversed([(None, self._to_match(start, f[1])) if f[0] is None else (f, pos + 1)
                                   for f in forks]))
            self._check_bound(len(stack), pos)
        return dedupe(found) if how == "all" else None

    def all(self, part: PartitionData, start: int):
        return self._search(part, start, "all")


def _by_preference(found: list[tuple[tuple, Match]]) -> list[Match]:
    """The matches of one start row, most preferred first (by Dewey version), each label
    assignment once."""
    seen = set()
    out = []
    for _, m in sorted(found, key=lambda vm: vm[0]):
        key = (m.end, m.rows, m.labels, m.excluded)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def dedupe(matches: list[Match]) -> list[Match]:
    """Each label assignment once, the first (most preferred) kept."""
    seen = set()
    out = []
    for m in matches:
        key = (m.end, m.rows, m.labels, m.excluded)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


# The compiled search merges runs by a linear scan: past this many live runs the Python
# search (hashed, and bounded by max_runs with an error naming the row) takes the partition.
COMPILED_MAX_RUNS = 4096


class CompiledNFAb(NFAbMatcher):
    """NFAbMatcher whose searches run compiled (runtime.kernel_runs) where kernel_spec
    accepts the plan and the partition's data fit the kernel; elsewhere (other conditions, a
    stream's open partition, more than COMPILED_MAX_RUNS live runs) the Python search runs. Both give the same matches (tests enforce it)."""

    def __init__(self, plan: Plan, **kw):
        super().__init__(plan, **kw)
        from sparkcep.runtime.fast import KernelMatcher

        self.kernel = KernelMatcher.for_selection(plan)
        self.ran = False  # some partition ran compiled

    def _inputs(self, part: PartitionData):
        if self.kernel is None or not part.complete or part.limit < part.n:
            return None
        got = part.cache.get("selection_kernel")
        if got is None:
            got = self._prepare_inputs(part) or "no"
            part.cache["selection_kernel"] = got
        return got if got != "no" else None

    def _prepare_inputs(self, part: PartitionData):
        arr = self.kernel.arrays(part)
        if arr is None:
            return None
        plan, k, q = self.plan, self.kernel, self.plan.query
        starts = first_rows(plan, arr[0])
        if starts is None:
            starts = np.ones(part.n, dtype=np.bool_)
        adjacent = part.cache.get("adjacent")
        adjacent = np.asarray(adjacent, dtype=np.bool_) if adjacent is not None else np.ones(max(part.n, 1), dtype=np.bool_)
        runs = kernel_runs.Runs(kernel_runs.STRATEGY[q.event_selection], bool(q.negated), adjacent)
        prog = k.program(part, arr, (min(self.max_runs, COMPILED_MAX_RUNS), self.max_nodes))
        self.ran = True
        return starts, (runs, prog)

    def start_rows(self, part: PartitionData) -> list[int] | None:
        got = self._inputs(part)
        if got is None:
            return super().start_rows(part)
        return np.flatnonzero(got[0]).tolist()

    def _note(self) -> None:
        self.peak_runs = max(self.peak_runs, int(self.kernel.stats[0]))

    def preferred(self, part: PartitionData, start: int):
        got = self._inputs(part)
        if got is None:
            return super().preferred(part, start)
        starts, args = got
        if start >= part.n or not starts[start]:
            return None
        arena = part.cache.get("selection_arena")
        if arena is None:
            arena = kernel_runs.arena()
        count, ends, hs, arena = kernel_runs.selection_search(start, kernel_runs.PREFERRED, *args, arena,
                                                              self.kernel.stats)
        part.cache["selection_arena"] = arena
        self._note()
        if count < 0:
            return super().preferred(part, start)  # too many live runs: the Python search takes this start
        if count == 0:
            return None
        offs, labels, excl, rows = kernel_runs.read_back(hs, arena)
        return matches_from_arrays(np.full(1, start), ends, offs, labels, excl, rows if self.gapped else None)[0]

    def all(self, part: PartitionData, start: int):
        got = self._inputs(part)
        if got is None:
            return super().all(part, start)
        found = part.cache.get("selection_all")
        if found is None:
            starts, args = got
            m_start, m_end, offs, labels, excl, rows, ok = kernel_runs.selection_all(
                np.flatnonzero(starts), *args, self.kernel.stats)
            self._note()
            if not ok:
                part.cache["selection_kernel"] = "no"  # the Python search reports the bound
                return super().all(part, start)
            found = {}
            for m in matches_from_arrays(m_start, m_end, offs, labels, excl, rows if self.gapped else None):
                found.setdefault(m.start, []).append(m)
            part.cache["selection_all"] = found
        return found.get(start, [])
