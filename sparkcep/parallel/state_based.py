"""RIP's state-based parallelism (Balkesen et al., DEBS'13, §4.1): SB and SB+.

One processing unit per pattern variable (automaton state), each a process: the first
evaluates every event against the first variable and emits one-event partial matches; unit
k takes partial matches from unit k-1 and tries the event that follows each (contiguous
matching, SQL's default); a repeatable variable (``+``, ``*``) keeps extending what it
produced (RIP's buffer of the self-loop), an optional one (``*``, ``?``) also forwards what it
received unchanged (the skip edge). All units read the whole stream (forked with it).
Partial matches move between units in batches (RIP found event-by-event transfer
prohibitive and batches of 5 000–10 000 best). SB+ duplicates the first unit: two units split
the events (even and odd positions) and both feed unit 2.

The last unit's complete runs are every candidate match of every start row; among the
candidates of a start the preferred one under SQL's rules is the lexicographically
smallest sequence of steps (a greedy loop prefers another iteration to moving on, and
moving on to ending), and the ordinary selection loop then picks the matches — so SB and
SB+ return exactly the sequential engine's rows. They exist to reproduce RIP's comparison
(SB vs SB+ vs RB+): patterns are a sequence of variables, each once, none, ``?``, ``*`` or
``+`` (greedy), the first one required.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection, wait

from sparkcep.compile.expressions import EvaluationError
from sparkcep.compile.pattern import Concat, Label, Repeat
from sparkcep.compile.plan import Plan
from sparkcep.errors import DataError, ExecutionError, OptionError
from sparkcep.runtime.context import ConditionContext
from sparkcep.runtime.matches import Match, PartitionData

BATCH = 5000
_END = None


def steps_of(plan: Plan) -> list[tuple[int, int, int | None]]:
    """(label, min, max) per unit, or an OptionError saying why SB cannot run the query."""
    q = plan.query
    why = None
    if q.mode != "sql":
        why = "mode='matchregex'"
    elif q.event_selection != "PARTITION":
        why = "EVENT SELECTION"
    elif q.has_exclusions or q.segment_query:
        why = "exclusions or segment variables"
    elif plan.define_match_number:
        why = "MATCH_NUMBER() in DEFINE (the units find candidates before matches are numbered)"
    node = plan.pattern
    items = node.items if isinstance(node, Concat) else (node,)
    steps = []
    for item in items:
        if isinstance(item, Label):
            steps.append((item.id, 1, 1))
        elif isinstance(item, Repeat) and isinstance(item.child, Label) and item.greedy:
            steps.append((item.child.id, item.min, item.max))
        else:
            why = why or "a pattern that is not a sequence of (greedily quantified) variables"
    if not why and (not steps or steps[0][1] == 0):
        why = "a pattern whose first variable is optional"
    if why:
        raise OptionError(f"strategies 'sb' and 'sb+' (RIP's state-based baselines) run patterns that are a "
                          f"sequence of variables with ?, * or + (the first one required); not {why}: use "
                          "strategy 'sequential' or 'runs' for this query")
    return steps


class _Unit:
    """One processing unit's work on partial matches (tuples of step indices from a start)."""

    def __init__(self, plan: Plan, part: PartitionData, steps, k: int):
        self.plan = plan
        self.part = part
        self.steps = steps
        self.k = k
        self.label, self.min, self.max = steps[k]
        q = plan.query
        self.maxlength = q.maxlength
        self.within = q.within
        self.order = part.order0

    def _room(self, start: int, length: int) -> bool:
        row = start + length
        if row >= self.part.n:
            return False
        if self.maxlength is not None and length + 1 > self.maxlength:
            return False
        return self.within is None or abs(self.order[row] - self.order[start]) <= self.within

    def _holds(self, start: int, path: tuple[int, ...]) -> bool:
        cond = self.plan.conditions[self.label]
        if cond is None:
            return True
        labels = tuple((self.steps[s][0], False) for s in path)
        try:
            return cond(ConditionContext(self.plan, self.part, start, labels)) is True
        except EvaluationError as e:
            if e.position is None:
                e.position = start + len(path) - 1
            raise

    def work(self, pm: tuple[int, tuple[int, ...]], out: list) -> None:
        start, path = pm
        if self.min == 0:
            out.append(pm)  # the skip edge
        count = 0
        while self._room(start, len(path)) and (self.max is None or count < self.max):
            nxt = path + (self.k,)
            if not self._holds(start, nxt):
                break
            path, count = nxt, count + 1
            if count >= self.min:
                out.append((start, path))


def _send(conn: Connection, batch: list) -> None:
    conn.send(batch)


class _Upstream(Exception):
    """An error report from the unit before: passed on as it is."""


def _received(inputs: list[Connection]):
    """The partial matches arriving from the units before, until each has ended."""
    open_inputs = list(inputs)
    while open_inputs:
        for conn in wait(open_inputs):
            try:
                got = conn.recv()
            except EOFError:  # it died (killed, out of memory) without a word
                raise _Upstream(("error", ("ExecutionError", "a state-based processing unit died", None, None))) from None
            if got is _END:
                open_inputs.remove(conn)
            elif isinstance(got, tuple):
                raise _Upstream(got)
            else:
                yield from got


def _serve(out: Connection, unit: _Unit, pms) -> None:
    """Run ``unit`` over the partial matches ``pms``, sending what it makes in batches."""
    try:
        batch: list = []
        for pm in pms:
            unit.work(pm, batch)
            if len(batch) >= BATCH:
                _send(out, batch)
                batch = []
        _send(out, batch)
        _send(out, _END)
    except _Upstream as e:
        out.send(e.args[0])
    except Exception as e:  # noqa: BLE001 - reported by the driver
        out.send(("error", _describe(e)))


def _unit_main(target, args: tuple, others: list[Connection]) -> None:
    for c in others:
        c.close()
    target(*args)


def _serve_first(out: Connection, unit: _Unit, rows) -> None:
    _serve(out, unit, ((r, ()) for r in rows))


def _serve_next(inputs: list[Connection], out: Connection, unit: _Unit) -> None:
    _serve(out, unit, _received(inputs))


def _describe(e: Exception) -> tuple:
    if isinstance(e, DataError):
        return (type(e).__name__, e.message, e.column, getattr(e, "position", None))
    return (type(e).__name__, str(e), None, None)


class StateBasedMatcher:
    """The Matcher interface (preferred / all / earliest per start row) over the candidates
    that the SB or SB+ pipeline computed for a whole partition."""

    def __init__(self, plan: Plan, replicate_first: bool = False):
        self.plan = plan
        self.steps = steps_of(plan)
        self.replicate_first = replicate_first
        self._part: PartitionData | None = None  # held, not its id: a freed id is reused
        self._cands: dict[int, list[tuple[int, ...]]] = {}
        self.units = len(self.steps) + (1 if replicate_first else 0)

    def _candidates(self, part: PartitionData) -> dict[int, list[tuple[int, ...]]]:
        if self._part is not part:
            self._cands = self._pipeline(part)
            self._part = part
        return self._cands

    def _pipeline(self, part: PartitionData) -> dict[int, list[tuple[int, ...]]]:
        part.py()  # convert the columns once, before the units fork with them
        ctx = multiprocessing.get_context("fork")
        units = [_Unit(self.plan, part, self.steps, k) for k in range(len(self.steps))]
        firsts = 2 if self.replicate_first else 1
        # Unit 0 (and its replica) feed unit 1, each unit the next; the last feeds the driver.
        feeds = [ctx.Pipe(duplex=False) for _ in range(firsts)]
        links = [ctx.Pipe(duplex=False) for _ in range(1, len(units))]
        every = [c for pair in feeds + links for c in pair]
        specs = [(_serve_first, (send, units[0], range(i, part.n, firsts)), [send]) for i, (_, send) in enumerate(feeds)]
        inputs = [recv for recv, _ in feeds]
        for k, (recv, send) in enumerate(links, start=1):
            specs.append((_serve_next, (inputs, send, units[k]), [*inputs, send]))
            inputs = [recv]
        # Each process keeps only its own pipe ends, so a unit that dies closes its output
        # for good and the one after it (or the driver) reads EOF instead of waiting forever.
        procs = [ctx.Process(target=_unit_main, args=(target, args, [c for c in every if all(c is not o for o in own)]),
                             daemon=True) for target, args, own in specs]
        for p in procs:
            p.start()
        for c in every:
            if all(c is not i for i in inputs):
                c.close()
        found: dict[int, list[tuple[int, ...]]] = {}
        open_inputs = list(inputs)
        try:
            while open_inputs:
                for conn in wait(open_inputs):
                    try:
                        got = conn.recv()
                    except EOFError:
                        raise ExecutionError("a state-based processing unit died") from None
                    if got is _END:
                        open_inputs.remove(conn)
                    elif isinstance(got, tuple):
                        name, message, column, position = got[1]
                        if name in ("DataError", "EvaluationError"):
                            err = EvaluationError(message, column)
                            err.position = position
                            raise err
                        if name == "ExecutionError":
                            raise ExecutionError(message)
                        raise ExecutionError(f"a state-based processing unit failed: {name}: {message}")
                    else:
                        for start, path in got:
                            found.setdefault(start, []).append(path)
        except BaseException:
            for p in procs:  # the others would wait on pipes nobody reads any more
                p.kill()
            raise
        finally:
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join()
            for c in inputs:
                c.close()
        for paths in found.values():
            paths.sort(key=lambda path: path + (len(self.steps),))  # SQL's preference
        return found

    def _match(self, start: int, path: tuple[int, ...]) -> Match:
        return Match(start, start + len(path), tuple(self.steps[s][0] for s in path), (False,) * len(path))

    def preferred(self, part: PartitionData, start: int) -> Match | None:
        paths = self._candidates(part).get(start)
        return self._match(start, paths[0]) if paths else None

    def all(self, part: PartitionData, start: int) -> list[Match]:
        return [self._match(start, p) for p in self._candidates(part).get(start, ())]

