"""The thread-list matcher (a Pike VM, after Trino's row pattern Matcher).

Threads run the instruction program in lockstep over the rows of one partition, kept in
preference order. A thread that reaches ACCEPT ends the search for everything less preferred;
threads more preferred run on and may replace it. Two threads at the same instruction whose
futures cannot differ (same tracked rows, aggregate states and loop slots) are merged, the
more preferred one kept, so the thread list stays small.

A thread is a tuple, its fields named by the indexes PC, HIST, NAV, AGGS, SLOTS, EXCL (a
plain tuple: threads are made in the innermost loop, and a NamedTuple measured 16 % slower):
- PC: the MATCH or ACCEPT place it waits at (compile.program's precomputed closures say
  where it can go before the next row);
- HIST: a linked list (label, excluded, previous) of the labels given to its rows;
- NAV: per tracked label set, (first rows, last rows) as (position, label) pairs;
- AGGS: the states of DEFINE aggregates; SLOTS: per loop slot, the row its iteration began
  at; EXCL: exclusion depth.
"""

from __future__ import annotations

from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.plan import Plan
from sparkcep.compile.program import (
    ACCEPT,
)
from sparkcep.compile.vectorize import arrays_for, condition_mask
from sparkcep.runtime.matches import (
    ALL_MATCHES_ADVICE,
    MAX_NODES,
    MAX_RUNS,
    NODES_ADVICE,
    UNRESOLVED,
    Match,
    PartitionData,
    too_many_runs,
)


def first_rows(plan: Plan, masks):
    """Rows where a non-empty match may start, as a bool array: some variable that can come
    first takes the row (its row-local mask); None when a match may be empty or a first
    variable has no mask."""
    if plan.nullable or not plan.first or any(masks[lab] is None for lab in plan.first):
        return None
    labs = sorted(plan.first)
    out = masks[labs[0]].copy()
    for lab in labs[1:]:
        out |= masks[lab]
    return out


class DefineContext:
    """What a DEFINE condition sees: the candidate row, its label, and the thread's past."""

    __slots__ = ("cols", "pos", "label", "start", "n", "nav", "agg_values", "prev_values", "_plan", "part", "hist",
                 "rowed")

    def __init__(self, plan: Plan, part, pos, label, start, nav, agg_states, prev_states=None, hist=None,
                 rowed=False):
        self._plan = plan
        self.part = part
        self.cols = part.py()
        self.pos = pos
        self.label = label
        self.start = start
        self.n = part.n
        self.nav = nav
        self.agg_values = agg_states
        self.prev_values = prev_states  # before the current row was added (PREVIOUS)
        # The labels of rows start..pos-1, newest first: (label, excluded, older), or with
        # ``rowed`` (NFA^b's, whose matches skip rows) (row, label, excluded, older).
        self.hist = hist
        self.rowed = rowed

    def _entry(self, pid: int):
        dp = self._plan.define_pointers[pid]
        p = dp.pointer
        k = p.offset
        if dp.track < 0:
            if p.last:
                q = self.pos - k
                return (q, self.label if k == 0 else None) if q >= self.start else None
            q = self.start + k
            return (q, self.label if q == self.pos else None) if q <= self.pos else None
        firsts, lasts = self.nav[dp.track]
        in_set = self._plan.track_members[dp.track][self.label]
        if p.last:
            if in_set:
                if k == 0:
                    return (self.pos, self.label)
                return lasts[k - 1] if k - 1 < len(lasts) else None
            return lasts[k] if k < len(lasts) else None
        if k < len(firsts):
            return firsts[k]
        if in_set and k == len(firsts):
            return (self.pos, self.label)
        return None

    def at(self, pid: int):
        e = self._entry(pid)
        if e is None:
            return None
        q = e[0] + self._plan.define_pointers[pid].pointer.physical
        return q if 0 <= q < self.n else None

    def label_at(self, pid: int):
        e = self._entry(pid)
        if e is None:
            return None
        dp = self._plan.define_pointers[pid]
        q = e[0] + dp.pointer.physical
        if q == e[0] and e[1] is not None:
            return self._plan.labels[e[1]]
        if q == self.pos:
            return self._plan.labels[self.label]
        if q > self.pos or q < self.start or dp.track < 0:
            return None  # outside the match so far: no label (yet)
        firsts, lasts = self.nav[dp.track]
        for row, label in lasts + firsts:
            if row == q:
                return self._plan.labels[label]
        h = self.hist
        if h is not None and self.rowed:
            while h is not None and h[0] > q:
                h = h[3]
            return self._plan.labels[h[1]] if h is not None and h[0] == q else None
        if h is not None:  # the Pike VM's, of contiguous rows: q's label is (pos - 1 - q) steps back
            for _ in range(self.pos - 1 - q):
                h = h[2]
            return self._plan.labels[h[0]]
        return None  # a row the match skipped

    def agg(self, i: int):
        a = self._plan.define_aggregates[i]
        return a.result(self.prev_values[i] if a.spec.previous else self.agg_values[i])

    @property
    def match_number(self) -> int:
        """The number the match being tried would get (MATCH_NUMBER() in DEFINE)."""
        return self.part.match_number


PC, HIST, NAV, AGGS, SLOTS, EXCL = range(6)  # a thread's fields

_ACCEPTED = "accepted"  # in ALL MATCHES searches, (_ACCEPTED, Match) keeps a finished match's place
class Matcher:
    """Finds matches starting at a given row of a partition."""

    max_runs = MAX_RUNS  # ALL MATCHES: threads and finished matches one search holds at once
    max_nodes = MAX_NODES  # ALL MATCHES: label path nodes one search makes
    rowed_history = False  # history nodes carry their row (DefineContext.rowed)

    def __init__(self, plan: Plan):
        self.plan = plan
        self.code = [(i.op, i.a, i.b) for i in plan.program.instructions]
        self.closures = plan.program.closures
        self.maxlength = plan.query.maxlength
        self.within = plan.query.within
        self.initial_nav = tuple(((), ()) for _ in plan.tracked)
        self.initial_aggs = tuple(a.initial for a in plan.define_aggregates)
        self.initial_slots = (-1,) * plan.program.slots
        # Streams with timeouts: the most preferred partial match of the last search that
        # WITHIN ended (a Match of the rows it had taken), else None.
        self.expired: Match | None = None

    # ------------------------------------------------------------ per partition
    def prepare(self, part: PartitionData) -> tuple[list, list[bool] | None]:
        """Condition masks per label (a list of bools, or None where the row evaluator
        must run the whole condition) and the rows where a non-empty match may start."""
        cached = part.cache.get("masks")
        if cached is not None:
            return cached
        plan = self.plan
        used = plan.derive("local_columns", lambda: {
            c.index for parts in plan.local_parts for e in parts for c in columns_in(e)})
        arrays = arrays_for(part.cols, used, part.n)
        masks = [condition_mask(list(parts), arrays) if parts else None for parts in plan.local_parts]
        starts = None
        any_first = first_rows(plan, masks)
        if any_first is not None:
            starts = any_first.tolist()
            part.cache["start_rows"] = any_first.nonzero()[0].tolist()
        out = ([m.tolist() if m is not None else None for m in masks], starts)
        part.cache["masks"] = out
        return out

    def start_rows(self, part: PartitionData) -> list[int] | None:
        """The rows where a non-empty match may start, in order (None: any row may)."""
        if part.limit < part.n:
            return None  # rows from the limit on are not decided here
        self.prepare(part)
        return part.cache.get("start_rows")

    # ------------------------------------------------------------ epsilon closure
    def _closure(self, out: list, seen: set, thread: tuple, pos: int, part: PartitionData, by_history: bool) -> None:
        """Append to ``out`` the threads ``thread`` becomes at row ``pos`` at the places the
        program's precomputed closure lists (MATCH or ACCEPT), in preference order; a thread
        equal to one already in ``seen`` is dropped (finished threads differ only in what
        they matched)."""
        pc, hist, nav, aggs, slots0, excl = thread
        at_first = pos + part.base == 0
        at_end = part.complete and pos == part.n  # $ holds only after the partition's real last row
        for place in self.closures[pc]:
            if not place.passes(at_first, at_end, slots0, pos):
                continue
            slots = place.entered(slots0, pos)  # a slot holds the row its iteration began at
            target = place.pc
            if self.code[target][0] == ACCEPT:
                key = (target, id(hist)) if by_history else (target,)
            else:
                key = (target, id(hist) if by_history else nav, aggs, slots, excl + place.excl)
            if key in seen:
                continue
            seen.add(key)
            out.append((target, hist, nav, aggs, slots, excl + place.excl))

    # ------------------------------------------------------------ one step
    def _advance(self, t: tuple, part: PartitionData, start: int, pos: int, intern: dict | None, masks: list):
        """The thread after labelling row ``pos`` with the label of its MATCH, or None."""
        label = self.code[t[PC]][1]
        mask = masks[label]
        if mask is not None:
            if not mask[pos]:
                return None
            cond = self.plan.residuals[label]
        else:
            cond = self.plan.conditions[label]
        state = self.select_row(label, cond, pos, part, start, t[NAV], t[AGGS], t[HIST])
        if state is None:
            return None
        excluded = t[EXCL] > 0
        if intern is not None:
            key = (label, excluded, id(t[HIST]))
            hist = intern.get(key)
            if hist is None:
                hist = intern[key] = (label, excluded, t[HIST])
        else:
            hist = (label, excluded, t[HIST])
        return (t[PC] + 1, hist, state[0], state[1], t[SLOTS], t[EXCL])

    def select_row(self, label: int, cond, pos: int, part: PartitionData, start: int, nav: tuple, aggs: tuple,
                   hist=None):
        """(nav, aggregate states) of a partial match after row ``pos`` is labelled
        ``label``, or None when ``cond`` (the condition, or its non-vectorized rest) fails."""
        plan = self.plan
        before = aggs
        if aggs:
            cols = part.py()
            try:
                aggs = tuple(
                    a.step(s, cols, pos, label, part.match_number) if a.applies_to(label) else s
                    for a, s in zip(plan.define_aggregates, aggs, strict=True)
                )
            except EvaluationError as e:  # an aggregate of the condition (a SUM past BIGINT)
                raise e.at(pos, f"in the condition of {plan.labels[label]}") from None
        if cond is not None:
            ctx = DefineContext(plan, part, pos, label, start, nav, aggs, before, hist, self.rowed_history)
            try:
                ok = cond(ctx)
            except EvaluationError as e:
                raise e.at(pos, f"in the condition of {plan.labels[label]}") from None
            if ok is not True:
                return None
        if nav:
            entry = (pos, label)
            new_nav = []
            for j, (firsts, lasts) in enumerate(nav):
                if plan.track_members[j][label]:
                    if len(firsts) < plan.track_first[j]:
                        firsts = firsts + (entry,)
                    if plan.track_last[j]:
                        lasts = (entry,) + lasts[: plan.track_last[j] - 1]
                new_nav.append((firsts, lasts))
            nav = tuple(new_nav)
        return nav, aggs

    def _can_extend(self, part: PartitionData, start: int, pos: int) -> bool | None:
        """Whether a match from ``start`` may take row ``pos``; None when that row is past
        the window and the partition goes on."""
        if self.maxlength is not None and pos - start + 1 > self.maxlength:
            return False
        if pos >= part.limit:
            if part.complete:
                return False
            if self.within is not None and part.horizon is not None:
                # Rows come in time order: if the next row (buffered, or any still to come,
                # which are at least the watermark) is past WITHIN, so is every later one.
                nxt = part.order0[pos] if pos < part.n else part.horizon
                if nxt - part.order0[start] > self.within:
                    return False
            return None
        if self.within is not None:
            if not abs(part.order0[pos] - part.order0[start]) <= self.within:  # NaN is never within
                return False
        return True

    def past_within(self, part: PartitionData, start: int, pos: int) -> bool:
        """Whether WITHIN is what stops a match from ``start`` taking row ``pos``: the row
        (or every row still to come) is past the window, or the input has ended (its final
        watermark passes every deadline)."""
        if self.within is None:
            return False
        if pos < part.limit:
            return not abs(part.order0[pos] - part.order0[start]) <= self.within
        if part.complete:
            return True
        nxt = part.order0[pos] if pos < part.n else part.horizon
        return nxt is not None and nxt - part.order0[start] > self.within

    @staticmethod
    def _to_match(start: int, pos: int, hist) -> Match:
        labels, excl = [], []
        while hist is not None:
            labels.append(hist[0])
            excl.append(hist[1])
            hist = hist[2]
        labels.reverse()
        excl.reverse()
        return Match(start, pos, tuple(labels), tuple(excl))

    # ------------------------------------------------------------ searches
    # Each search returns UNRESOLVED when the window ends before the answer is known.
    def preferred(self, part: PartitionData, start: int):
        """The most preferred match starting at ``start`` (SQL:2016), or None."""
        return self._run(part, start, "preferred")

    def earliest(self, part: PartitionData, start: int):
        """The most preferred of the matches from ``start`` that end first (MatchRegex)."""
        return self._run(part, start, "earliest")

    def all(self, part: PartitionData, start: int):
        """Every match starting at ``start``, each label assignment once, most preferred first."""
        return self._run(part, start, "all")

    def _run(self, part: PartitionData, start: int, how: str):
        code = self.code
        masks, starts = self.prepare(part)
        if starts is not None and start < part.limit and not starts[start]:
            return [] if how == "all" else None  # no variable that can come first matches here
        by_history = how == "all" or self.plan.label_history
        intern: dict | None = {} if by_history else None
        clist: list = []
        self._closure(clist, set(), (0, None, self.initial_nav, self.initial_aggs, self.initial_slots, 0), start, part, by_history)
        best = None
        pos = start
        while True:
            if how == "earliest":
                for t in clist:
                    if code[t[PC]][0] == ACCEPT:
                        return self._to_match(start, pos, t[HIST])
            nlist: list = []
            seen: set = set()
            extend = self._can_extend(part, start, pos)
            live = False
            for t in clist:
                if t[PC] == _ACCEPTED:
                    nlist.append(t)
                    continue
                if code[t[PC]][0] == ACCEPT:
                    if how == "all":
                        nlist.append((_ACCEPTED, self._to_match(start, pos, t[HIST])))
                        continue
                    best = self._to_match(start, pos, t[HIST])
                    break
                if not extend:
                    if extend is None:
                        return UNRESOLVED
                    if self.expired is None and t[HIST] is not None and self.past_within(part, start, pos):
                        self.expired = self._to_match(start, pos, t[HIST])
                    continue
                nt = self._advance(t, part, start, pos, intern, masks)
                if nt is not None:
                    self._closure(nlist, seen, nt, pos + 1, part, by_history)
                    live = True
            if how == "all" and len(nlist) > self.max_runs:
                raise too_many_runs(self.max_runs, ALL_MATCHES_ADVICE, pos)
            if how == "all" and len(intern) > self.max_nodes:
                raise too_many_runs(self.max_nodes, NODES_ADVICE, pos)
            if not live:
                if how == "all":
                    return [m for tag, m in (x[:2] for x in nlist if x[0] == _ACCEPTED)]
                return best
            clist = nlist
            pos += 1


def columns_in(e):
    """Column references inside a bound expression."""
    from sparkcep.analysis.bound import BColumn

    if isinstance(e, BColumn):
        yield e
        return
    for name in getattr(e, "__dataclass_fields__", {}):
        if name == "impl":
            continue
        v = getattr(e, name)
        items = v if isinstance(v, tuple) else (v,)
        for x in items:
            if isinstance(x, tuple):
                for y in x:
                    yield from columns_in(y)
            elif hasattr(x, "__dataclass_fields__"):
                yield from columns_in(x)
