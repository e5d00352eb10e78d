"""Speculative evaluation of expensive calls: any MATCH_RECOGNIZE query on identical workers,
one stream, no splitter.

Registered functions are deterministic (a documented rule), so a call's answer depends on
its function and arguments alone: a call the sequential engine may need can be made ahead
of time, on worker processes, and kept by its arguments (the memo). The sequential engine
runs unchanged, here, with its expensive calls routed to this module
(compile.expressions.set_call_route): a call it makes is answered from the memo, or waited
for. Ahead of it runs a relaxed matcher — the same search, from every row where a match may
start within the lookahead, not only where AFTER MATCH SKIP will resume — which answers a
call it does not know yet with NULL, notes it and sends it to the workers; that start is
searched again once its calls are back, until a search needs nothing new. The final search
from a start is then exactly the sequential engine's, so every call that one makes is
waiting in the memo. Only the order of evaluation changes: the matches are the sequential
engine's in every case, and an error is kept with its call and raised only if the
sequential engine makes that call.

A finished search also tells where the selection goes on after it (AFTER MATCH SKIP PAST
LAST ROW or TO a variable), so following finished searches from the sequential engine's
position leads to the frontier: the first start it will search for certain whose search
lacks answers (or met an error). The calls of starts the frontier passed over are dropped
(the selection skips them); the frontier's own calls go to a worker with nothing to do, or
the sequential engine makes them itself when it gets there, as it would wait for them
behind a busy worker's calls. Other skip modes search every start: the frontier is the
sequential engine's position. The lookahead counts from the frontier.

Each queued call has a tier, the risk that the selection skips its start (``_tier``): 0
where no earlier search can cover it, 1 one row past an unfinished search's reach, 2 inside
one (or inside a finished search's match). Workers take tier 0 only; the riskier calls are
made here while this process waits for an answer, or when the sequential engine gets to
them. A search that finishes or reaches further re-tiers the starts it came near, so the
sure calls spread from start to start as answers come back.

The memo is bounded: entries behind the sequential engine's position are dropped when it is
full, and the relaxed matcher stops until there is room. Its lookahead (in rows) adapts to
the calls made against the calls used. Until the workers are up, the calls are made here,
which also measures them: a function cheaper than ``CHEAP_CALL`` seconds is then called here
for the rest of the query (the workers cannot win).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sparkcep.analysis.patterns import longest_match
from sparkcep.compile.expressions import EvaluationError, call_function, set_call_route
from sparkcep.compile.plan import Plan
from sparkcep.compile.skip import SkipStrategy
from sparkcep.errors import SparkCepError
from sparkcep.runtime.matches import UNRESOLVED, PartitionData
from sparkcep.runtime.nfab import NFAbMatcher
from sparkcep.runtime.selection import candidate_finder, resume_row
from sparkcep.runtime.vm import Matcher
from sparkcep.tasks.calls import Calls, Memo, call_key
from sparkcep.tasks.engine import TaskOptions, TaskStats
from sparkcep.tasks.from_sql import expensive_functions
from sparkcep.tasks.workers import WorkerPool, kept_workers

# Below this many seconds a call, the workers' messages cost more than they save.
CHEAP_CALL = 0.0002
# Under auto with the default workers, calls measured this long get a worker on every core.
LONG_CALL = 0.0025
# Calls timed here before that decision (while the workers start).
TIMED_CALLS = 8
# Answers kept at most (entries behind the sequential engine go first).
MEMO_LIMIT = 100_000
# The lookahead in rows: where it starts and its bounds.
LOOKAHEAD = 256
MIN_LOOKAHEAD = 8
MAX_LOOKAHEAD = 1 << 16
# While its calls are answered from the memo, the sequential engine looks for answers and
# feeds idle workers at most this often.
POLL_SECONDS = 0.0005
# Seconds of work per message to a worker (the chunk adapts to the calls' cost).
CHUNK_SECONDS = 0.004
# Chunks a worker holds: the one it computes and the next. With the tiers, a third (to last
# while this process makes a call itself) commits sure calls earlier than needed: measured on
# 2 cores, A B C and the hot key ran 0.02-0.07x faster with 2, the others within noise (before
# the tiers, 2 ran the workers dry; docs/performance.md).
PIPE_DEPTH = 2
# A start up to this many rows past an unfinished search's reach is risky (tier 1): that search
# may grow over it. Measured on A B+ C (each B one more call): 22 % of the calls two rows past
# were wasted, 14 % three rows past, 2 % four; with 2 rather than 1, 1.73x -> 1.78-1.81x and
# 1 060 -> 1 030 calls made. A B C cannot grow two rows past (its longest match is 3 rows).
NEAR = 2
# Once every start has been searched no sure call is coming: a worker with nothing to do then
# takes calls up to this tier (measured: the workers idled through the last quarter of A B C
# while this process made the 150 risky calls left; up to tier 1, A B C 1.77x -> 1.81-1.82x
# and the hot key 1.75x -> 1.78-1.83x; up to tier 2 as fast but 10 more calls wasted).
TAIL_TIER = 1


class _Tracked:
    """The sequential engine's matcher, telling the speculation where it searches."""

    def __init__(self, inner: Matcher, spec: Speculation):
        self._inner = inner
        self._spec = spec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def preferred(self, part: PartitionData, start: int):
        self._spec.at(start)
        return self._inner.preferred(part, start)

    def earliest(self, part: PartitionData, start: int):
        self._spec.at(start)
        return self._inner.earliest(part, start)

    def all(self, part: PartitionData, start: int):
        self._spec.at(start)
        return self._inner.all(part, start)


def _probe_class(base: type[Matcher]) -> type[Matcher]:
    class Probe(base):
        """The relaxed matcher: notes the row of the condition it evaluates."""

        row = -1

        def select_row(self, label, cond, pos, part, start, nav, aggs, hist=None):
            self.row = pos
            return super().select_row(label, cond, pos, part, start, nav, aggs, hist)
    return Probe


def matcher_class(plan: Plan) -> type[Matcher]:
    """The Python matcher run_automaton gives ``plan`` (the NFA^b for event selection)."""
    q = plan.query
    return NFAbMatcher if q.gapped or (q.event_selection == "STRICT" and q.partition_by) else Matcher


class Speculation:
    """An executor for runtime.local.run_automaton (see its ``executor``): the partitions
    run here in order on the sequential engine, their expensive calls made ahead on
    ``opts.workers`` processes. ``stats`` (a TaskStats) receives the calls made and used."""

    def __init__(self, plan: Plan, opts: TaskOptions, stats: TaskStats | None = None, *,
                 memo_limit: int = MEMO_LIMIT, measure: bool = True, background: bool = True):
        self.plan = plan
        self.opts = opts
        self.stats = stats if stats is not None else TaskStats()
        self.memo_limit = memo_limit
        self.measure = measure  # decide from timed calls whether the workers can win
        self.background = background  # start the workers while the first calls are made here
        self.memo: dict[tuple, list] = {}  # key -> [ok, value or message, last position wanting it, used]
        self.asked: dict[tuple, list[tuple[int, int, int]]] = {}  # key -> starts waiting, sent or queued
        # Calls not sent yet, by the risk that the selection skips their start (a tier, see
        # _tier), then nearest start first: (tier, position, order, key, name, vals). The
        # frontier's (below) are not here. A start whose tier changes has its calls queued
        # again; the entries left behind are dropped when popped.
        self.queue: list[tuple] = []
        self.tiers: dict[int, int] = {}  # start -> the tier its calls were last queued at
        self._order = itertools.count()
        self._polled = 0.0
        self.waits: dict[int, int] = {}  # start position -> its calls not back yet
        self.ready: list[tuple[int, int, int]] = []  # (position, partition, row) to search again
        self.lookahead = LOOKAHEAD
        self.chunk = opts.chunk or 1
        self.local = True  # calls are made here (no workers yet, or they cannot win)
        # This process makes calls too while it waits (by default with one worker fewer than
        # the cores): the workers then take only calls of tier 0, and the risky ones are left
        # to it, made when nothing surer waits or when the sequential engine gets to them.
        # Measured on 2 cores, with 2 workers too: the wave of tier-0 calls that finished
        # searches free keeps the workers busy, and A B+ C made 7 % more calls than it used
        # where it made 14 % (docs/performance.md).
        cores = os.cpu_count() or 1
        self.workers = max(1, cores - 1) if opts.workers == -1 else opts.workers
        self.helps = True
        self.searched_all = False  # every start has been searched (see TAIL_TIER)
        # The most rows a match binds (None: no bound): a search from u covers no start past
        # u + longest - 1, however far it grows.
        self.longest = None if plan.query.gapped else longest_match(plan.query.pattern)
        self.probing = False
        self.failed = False  # the relaxed matcher's search met an error
        self._growing = False  # one more worker on its way (long calls)
        self.misses: dict[tuple, tuple[str, list, int]] = {}  # a search's unknown calls, with their rows
        # Unfinished searches of the relaxed matcher: start -> the last row they reached.
        self.reach: dict[int, int] = {}
        # Finished searches whose match makes the selection skip starts: start -> where it goes on.
        self.skipping: dict[int, int] = {}
        self._prune_at = 64  # reach and skipping are pruned behind the frontier above this size
        self.span = 0  # the longest (reach - start) or (after - start) among them so far
        self._certain = 0  # queued calls of tier 0
        # Finished searches of the relaxed matcher: start -> where the selection goes on
        # after it (a position), when a match makes the selection skip starts.
        self.done: dict[int, int] = {}
        self.pending: dict[int, list[tuple]] = {}  # start -> its calls not back: (key, name, vals)
        # The frontier: the first start the sequential engine will search for certain whose
        # search here is not finished. The selection skips or has passed every start between
        # the sequential engine's position and it.
        self.frontier = 0
        # The frontier's calls not sent: the sequential engine's next ones. A worker with
        # nothing to do takes them; otherwise the sequential engine makes them itself when it
        # gets there (behind a busy worker's calls they would only come later).
        self.mine: list[tuple] = []
        # Whether a match makes the selection skip starts (so speculation there may be waste).
        self.skips = plan.query.mode == "sql" and SkipStrategy.of(plan.query).mode in ("PAST_LAST", "FIRST", "LAST")
        # Following finished searches needs their matches to be the sequential engine's: not
        # so where DEFINE reads MATCH_NUMBER(), which the relaxed matcher does not number.
        self.follows = self.skips and not plan.define_match_number
        self.probe_position = 0
        self.position = 0  # the sequential engine's: bounds[partition][0] + row
        self.matcher_type = matcher_class(plan)
        self.impls = expensive_functions(plan)
        self._probe = _probe_class(self.matcher_type)(plan)
        self._pool: WorkerPool | None = None
        self._sent: set[tuple] = set()  # asked and sent to a worker
        self._starting: threading.Thread | None = None
        self._deferred = False  # kept workers to take once the timed calls say they win (auto)
        self._started: WorkerPool | None = None  # what that thread made
        self._lock = threading.Lock()
        self._abandoned = False
        self._start_error: BaseException | None = None
        self._timed = 0
        self._timed_seconds = 0.0
        self._answered = 0

    # ------------------------------------------------------------ the executor
    def matcher(self, plan: Plan) -> _Tracked:
        """run_automaton's matcher_factory."""
        return _Tracked(self.matcher_type(plan), self)

    def map(self, fn: Callable, bounds, partition_data: Callable) -> list[Any]:
        self.bounds = list(bounds)
        self._firsts = [b[0] for b in self.bounds]
        self._data: dict[int, tuple[PartitionData, np.ndarray]] = {}
        self._starts: dict[int, list[int] | range] = {}
        self._finders: dict[int, Callable] = {}
        self._partition_data = partition_data
        self.cursor = (0, 0)  # the relaxed matcher's next new start: (partition, index into its starts)
        self.current = 0
        # Kept workers take a query in about a millisecond: asked for (not measured first), they
        # start here at once. From the second thread they came up 1-20 ms into the query, that thread
        # waiting for the interpreter lock while this one made calls.
        warm = kept_workers() >= self.workers
        # Measured first (auto), kept workers are taken once the timed calls say they can win:
        # started alongside, the thread taking them cost cheap calls 5 % (the interpreter lock).
        self._deferred = bool(self.workers and self.measure and warm)
        if self._deferred:
            pass  # the first calls are made here, timed
        elif self.workers and self.background and self.opts.start != "fork" and not warm:
            # The first calls are made here while the workers start (forking from a second
            # thread could copy a lock a call here holds, so fork starts them first).
            self._start_workers()
        elif self.workers:  # asked for workers: they are used from the first call
            self._pool = self._new_pool()
            self.local = False
        self._outer = set_call_route(self)
        try:
            out = []
            for i, b in enumerate(self.bounds):
                self.current = i
                self.position = b[0]
                out.append(fn(b, self.data(i)))
                self._data.pop(i, None)
                self._starts.pop(i, None)
                self._finders.pop(i, None)
            return out
        finally:
            set_call_route(self._outer)
            self._close()

    def data(self, i: int) -> tuple[PartitionData, np.ndarray]:
        got = self._data.get(i)
        if got is None:
            got = self._data[i] = self._partition_data(self.bounds[i])
        return got

    def at(self, start: int) -> None:
        """The sequential engine searches from ``start`` of the current partition."""
        self.position = self.bounds[self.current][0] + start

    # ------------------------------------------------------------ workers
    def _new_pool(self) -> WorkerPool:
        return WorkerPool(Calls(self.impls), self.workers, depth=PIPE_DEPTH, start=self.opts.start)

    def _start_workers(self) -> None:
        """Start the pool in a thread: until it is up, calls are made here (and timed)."""
        def start():
            try:
                pool = self._new_pool()
            except BaseException as e:  # raised by the query's thread, if it still wants workers
                self._start_error = e
                return
            with self._lock:
                if self._abandoned:  # the query ended or chose to call here: kept for the next
                    pool.close()
                else:
                    self._started = pool

        self._starting = threading.Thread(target=start, name="sparkcep-speculation-workers", daemon=True)
        self._starting.start()

    def _workers_up(self) -> bool:
        """Whether calls go to the workers from now on."""
        if not self.local:
            return True
        if self._starting is None and not self._deferred:
            return False
        if self.measure and self._timed < TIMED_CALLS:
            return False
        if self.measure and self._timed_seconds / self._timed < CHEAP_CALL:
            # Cheap calls: the rest of the query makes them here, each distinct call once.
            self._deferred = False
            self._close()
            set_call_route(Memo())
            return False
        if self._deferred:  # kept workers, taken now that the calls proved worth it
            self._deferred = False
            try:
                self._started = self._new_pool()
            except Exception as e:
                self._start_error = e
        elif self._starting.is_alive():
            return False
        self._starting = None
        if self._start_error is not None:
            if self.measure:  # auto: the workers were a choice; the calls are made here instead
                set_call_route(Memo())
                return False
            raise self._start_error
        self._pool = self._started
        self.local = False
        cores = os.cpu_count() or 1
        if (self.measure and self.opts.workers == -1 and self._timed and len(self._pool.workers) < cores
                and self._timed_seconds / self._timed >= LONG_CALL):
            # Long calls: a worker on every core gains more than this process making calls
            # while it waits (it waits on a pipe, mostly); one more starts meanwhile.
            self._pool.grow()
            self._growing = True
        return True

    def _close(self) -> None:
        """End the use of the workers (a pool still starting closes itself when up)."""
        with self._lock:
            self._abandoned = True
            if self._pool is None:
                self._pool = self._started
            self._started = None
        self._starting = None
        if self._pool is not None:
            self.stats.restarts += self._pool.restarts
            self.stats.worker_seconds += self._pool.busy_seconds
            self._pool.close()
            self._pool = None

    # ------------------------------------------------------------ the route (compile.expressions)
    def call(self, name: str, impl: Callable, vals: list[Any]) -> Any:
        try:
            key = call_key(name, vals)
            entry = self.memo.get(key)
        except TypeError:  # an argument that cannot be a key: made when the sequential engine makes it
            if self.probing:
                self.failed = True  # so this search cannot tell where the selection goes on
                return None
            return call_function(name, impl, vals)
        if self.probing:
            if entry is None:
                self.misses[key] = (name, vals, self._probe.row)
                return None
            if entry[2] < self.probe_position:
                entry[2] = self.probe_position
            if entry[0]:
                return entry[1]
            self.failed = True
            return None
        if entry is None:
            entry = self._needed(key, name, impl, vals)
        elif not self.local and time.perf_counter() - self._polled > POLL_SECONDS:
            self._pump(False)
        if entry[2] < self.position:
            entry[2] = self.position
        if not entry[3]:
            entry[3] = True
            self.stats.calls_used += 1
        if entry[0]:
            return entry[1]
        raise EvaluationError(entry[1])

    def _needed(self, key: tuple, name: str, impl: Callable, vals: list[Any]) -> list:
        """The answer the sequential engine waits for: made here, or by the workers first."""
        if not self._workers_up():
            t0 = time.perf_counter()
            entry = self._here(name, impl, vals)
            self._timed += 1
            self._timed_seconds += time.perf_counter() - t0
            self._keep(key, entry)
            return entry
        if key not in self._sent and any(k == key for k, _, _ in self.mine):
            # The frontier's: made here at once (the pump could hand it to a worker).
            return self._made_here(key, name, impl, vals)
        self._pump(False)  # the workers get their next calls first
        entry = self.memo.get(key)
        if entry is not None:
            return entry
        if key not in self._sent:
            # No worker has it: made here at once, rather than waiting here idle for it.
            return self._made_here(key, name, impl, vals)
        self.stats.calls_waited += 1
        while True:
            if self.helps and self.queue:
                self._help()
                self._pump(False)
            else:
                self._pump(True)
            entry = self.memo.get(key)
            if entry is not None:
                return entry
            if key not in self.asked:  # answered, then dropped by a full memo: made here
                return self._made_here(key, name, impl, vals)

    def _help(self) -> None:
        """While waiting: make the surest queued call here."""
        while self.queue:
            _, _, _, key, name, vals = self._pop()
            if self._wanted(key):
                self._made_here(key, name, self.impls[name], vals)
                return

    def _here(self, name: str, impl: Callable, vals: list[Any]) -> list:
        self.stats.calls_made += 1
        try:
            return [True, call_function(name, impl, vals), self.position, False]
        except EvaluationError as e:
            return [False, e.message, self.position, False]

    def _made_here(self, key: tuple, name: str, impl: Callable, vals: list[Any]) -> list:
        """A call made here for the starts waiting on it, as if a worker had answered."""
        entry = self._here(name, impl, vals)
        self._store(key, entry[0], entry[1])
        return self.memo.get(key, entry)

    def _keep(self, key: tuple, entry: list) -> None:
        memo = self.memo
        memo[key] = entry
        if len(memo) > self.memo_limit:
            for k in [k for k, e in memo.items() if e[2] < self.position]:
                del memo[k]
            # Down to nine tenths, so that the next scan is a tenth of the limit away: the
            # farthest ahead go (made again if needed).
            keep = max(1, self.memo_limit * 9 // 10)
            if len(memo) > keep:
                ahead = sorted(memo, key=lambda k: memo[k][2])
                for k in ahead[keep:]:
                    if k != key:
                        del memo[k]

    # ------------------------------------------------------------ the relaxed matcher
    def _pump(self, block: bool) -> None:
        if self._growing:
            if self._pool.adopt():
                self.helps = False  # a worker on every core: they take every tier
            self._growing = self._pool.growing
        self._predict()
        self._send()
        self._polled = time.perf_counter()
        if self._pool.busy:
            for keys, answers in self._pool.results(None if block else 0):
                self._answered += len(keys)
                for key, (ok, value) in zip(keys, answers, strict=True):
                    self._store(key, ok, value)
            self._adapt()

    def _store(self, key: tuple, ok: bool, value: Any) -> None:
        self._sent.discard(key)
        waiting = self.asked.pop(key, [])
        last = max((w[0] for w in waiting), default=self.position)
        self._keep(key, [ok, value, last, False])
        for w in waiting:
            left = self.waits.get(w[0])
            if left is None:
                continue
            if left == 1:
                del self.waits[w[0]]
                if w[0] >= self.position:
                    heapq.heappush(self.ready, w)
            else:
                self.waits[w[0]] = left - 1

    def _adapt(self) -> None:
        """Chunks of about CHUNK_SECONDS of work; a lookahead that shrinks while far more
        calls are made than used, and grows back when they are not."""
        pool = self._pool
        if self.opts.chunk is None and self._answered:
            per_call = pool.busy_seconds / self._answered
            self.chunk = max(1, min(64, int(CHUNK_SECONDS / per_call) if per_call > 0 else 64))
        made, used = self.stats.calls_made, self.stats.calls_used
        if made > 64:
            if made > 2 * max(used, 1):
                self.lookahead = max(MIN_LOOKAHEAD, self.lookahead // 2)
            elif made < 1.5 * used:
                self.lookahead = min(MAX_LOOKAHEAD, self.lookahead * 2)

    def _pop(self) -> tuple:
        item = heapq.heappop(self.queue)
        if not item[0]:
            self._certain -= 1
        return item

    def _queue(self, tier: int, pos: int, key: tuple, name: str, vals: list[Any]) -> None:
        heapq.heappush(self.queue, (tier, pos, next(self._order), key, name, vals))
        if not tier:
            self._certain += 1

    def _advance(self) -> None:
        """Move the frontier along the finished searches, as the selection will go from the
        sequential engine's position (AFTER MATCH SKIP PAST LAST ROW or TO a variable)."""
        f = max(self.frontier, self.position)
        while self.follows:
            s = self._start_at(f)
            if s is None:
                break
            f = s
            after = self.done.get(f)
            if after is None:
                break
            f = after
        if f == self.frontier:
            return
        self.frontier = f
        # The old frontier's calls nobody made stay asked for the later starts that want them
        # (measured: queueing them for those made more calls and gained nothing).
        self.mine = self.pending.get(f, [])[::-1]
        if len(self.reach) + len(self.skipping) > self._prune_at:
            self.reach = {u: r for u, r in self.reach.items() if u >= f}
            self.skipping = {u: a for u, a in self.skipping.items() if u >= f}
            self.tiers = {u: t for u, t in self.tiers.items() if u >= f}
            # Those ahead of the frontier stay: pruned again once they have doubled (measured,
            # pruning at a fixed size rebuilt these at nearly every step of the frontier).
            self._prune_at = max(64, 2 * (len(self.reach) + len(self.skipping)))
        if len(self.done) + len(self.pending) + len(self.waits) > 4 * self.lookahead:
            self.done = {u: a for u, a in self.done.items() if u >= f}
            self.pending = {u: c for u, c in self.pending.items() if u >= f}
            self.waits = {u: n for u, n in self.waits.items() if u >= f}
            # calls no start the selection may still search wants (not sent: those are kept
            # until answered); the queue skips what is no longer asked
            self.asked = {k: w for k, w in self.asked.items() if k in self._sent or any(s[0] >= f for s in w)}

    def _horizon(self) -> int:
        """The relaxed matcher searches starts before this position: the lookahead, from
        where the sequential engine will be for certain."""
        return max(self.position, self.frontier) + self.lookahead

    def _start_at(self, g: int) -> int | None:
        """The first position at or after ``g`` where a match may start, or None (none
        within the lookahead: a partition's rows are read only once they are that near)."""
        i = bisect.bisect_right(self._firsts, g) - 1
        while 0 <= i < len(self.bounds):
            first = self.bounds[i][0]
            if first >= self._horizon():
                return None
            starts = self._start_rows(i)
            k = bisect.bisect_left(starts, g - first) if g > first else 0
            if k < len(starts):
                return first + starts[k]
            i += 1
        return None

    def _send(self) -> None:
        queue = self.queue
        if not queue and not self.mine:
            return
        sent = self._sent
        mine = self.mine
        for w in self._pool.idle():
            items = []
            while mine and not w.outstanding and len(items) < self.chunk:
                key, name, vals = mine.pop()
                if key in self.asked and key not in sent:
                    sent.add(key)
                    items.append((key, name, vals))
                    self.stats.calls_made += 1
            while queue and len(items) < self.chunk:
                if self.helps and queue[0][0] and not (self.searched_all and queue[0][0] <= TAIL_TIER):
                    break  # risky: left to this process
                tier, pos, _, key, name, vals = self._pop()
                if not self._wanted(key) or self.tiers.get(pos, 0) > tier:
                    continue  # not wanted, or queued again at its start's tier
                if self.helps and self.skips and pos != self.frontier:
                    now = self._tier(pos)
                    if now > tier:  # a search finished or grew since: queued again at its tier
                        self._requeue(pos, now)
                        continue
                sent.add(key)
                items.append((key, name, vals))
                self.stats.calls_made += 1
            if not items:
                return
            self._pool.submit(w, [k for k, _, _ in items], [(name, vals) for _, name, vals in items])

    def _wanted(self, key: tuple) -> bool:
        """Whether a queued call is still to be made: not answered, not sent (it may be queued
        twice) and wanted by a start the selection may still search."""
        waiting = self.asked.get(key)
        if waiting is None or key in self._sent:
            return False
        if all(s[0] < self.frontier for s in waiting):
            del self.asked[key]  # only for starts the selection has passed or skips
            return False
        return True

    def _tier(self, pos: int) -> int:
        """The risk that the selection skips the start at ``pos``: 2 if a match of a finished
        search from an earlier start covers it, or an unfinished one's reach does; 1 if it
        lies up to NEAR rows past an unfinished search's reach, within the longest match
        from that search's start; else 0."""
        reach, skipping = self.reach, self.skipping
        low = max(self.frontier, pos - 1 - NEAR - self.span)  # only starts this near can reach ``pos``
        # The rows between, or where spans are long the searches themselves (fewer).
        near = (range(low, pos) if pos - low <= len(reach) + len(skipping)
                else [u for u in itertools.chain(reach, skipping) if low <= u < pos])
        tier = 0
        for u in near:
            r = reach.get(u)
            if r is not None:
                if pos <= r:
                    return 2
                if pos <= r + NEAR and (self.longest is None or pos < u + self.longest):
                    tier = 1
            a = skipping.get(u)
            if a is not None and pos < a:
                return 2
        return tier

    def _requeue(self, pos: int, tier: int) -> None:
        """Queue the unsent calls of the start at ``pos`` again at ``tier``."""
        self.tiers[pos] = tier
        sent = self._sent
        for key, name, vals in self.pending.get(pos, ()):
            if key in self.asked and key not in sent:
                self._queue(tier, pos, key, name, vals)

    def _retier(self, pos: int, old_reach: int) -> None:
        """The search from ``pos`` finished or reached further: the starts it covered or
        came near may be surer now (the wave that keeps the workers busy)."""
        tiers = self.tiers
        end = old_reach + NEAR
        near = range(pos + 1, end + 1) if end - pos <= len(tiers) else [p for p in tiers if pos < p <= end]
        for p in near:
            t = tiers.get(p)
            if t and p in self.pending and p != self.frontier:
                now = self._tier(p)
                if now < t:
                    self._requeue(p, now)

    def _in_flight_limit(self) -> int:
        return self._pool.depth * len(self._pool.workers) * self.chunk + self.chunk

    def _predict(self) -> None:
        """Search ahead until enough calls are out (or the lookahead and memo allow no more)."""
        limit = self._in_flight_limit()
        self._advance()
        while self._certain < limit and len(self.memo) < self.memo_limit:
            if self.ready:
                pos, i, row = heapq.heappop(self.ready)
                if pos >= self.frontier:
                    self._search(pos, i, row)
                continue
            nxt = self._next_start()
            if nxt is None:
                return
            self._search(*nxt)

    def _next_start(self) -> tuple[int, int, int] | None:
        """The relaxed matcher's next new start within the lookahead, or None."""
        i, k = self.cursor
        while i < len(self.bounds):
            starts = self._start_rows(i)
            if k < len(starts):
                pos = self.bounds[i][0] + starts[k]
                if pos >= self._horizon():
                    return None
                self.cursor = (i, k + 1)
                if pos < self.frontier:  # the selection is past it, or skips it
                    k += 1
                    continue
                return pos, i, starts[k]
            i, k = i + 1, 0
            self.cursor = (i, k)
        self.searched_all = True
        return None

    def _start_rows(self, i: int):
        got = self._starts.get(i)
        if got is None:
            part = self.data(i)[0]
            rows = self._probe.start_rows(part)
            got = self._starts[i] = rows if rows is not None else range(part.n)
        return got

    def _search(self, pos: int, i: int, row: int) -> None:
        """The relaxed matcher's search from ``row`` of partition ``i``: the calls it lacks
        go out, and it is searched again when they are back."""
        find = self._finders.get(i)
        if find is None:
            # The relaxed matcher's partition: the same rows with a cache of its own (the
            # NFA^b caches matches, which it finds with NULL for unknown calls).
            part = self.data(i)[0]
            adjacent = part.cache.get("adjacent")
            mine = dataclasses.replace(part, cache={} if adjacent is None else {"adjacent": adjacent})
            find = self._finders[i] = candidate_finder(self.plan.query, self._probe, mine)
        self.probing = True
        self.probe_position = pos
        self.misses = {}
        self.failed = False
        found = None
        try:
            found = find(row)
        except SparkCepError:
            self.failed = True  # a cheap part failed: the sequential engine will say so if it gets there
        finally:
            self.probing = False
        old_reach = self.reach.get(pos)
        if not self.misses:
            self.reach.pop(pos, None)
            self.pending.pop(pos, None)
            self.tiers.pop(pos, None)
            # A search that met an error is where the sequential engine raises it, if it
            # gets there: the frontier stops at it.
            if self.follows and not self.failed and found is not UNRESOLVED:
                try:
                    after = self.done[pos] = self.bounds[i][0] + (
                        row + 1 if found is None else resume_row(self.plan.query, found))
                    if after > pos + 1:
                        self.skipping[pos] = after
                        self.span = max(self.span, after - pos)
                except SparkCepError:
                    pass  # the sequential engine raises it there; the frontier stops
            if old_reach is not None and self.skips:
                self._retier(pos, old_reach)
            if pos == self.frontier:
                self._advance()  # the frontier's search finished: it moves on
            return
        mine = pos == self.frontier
        tier = 0 if mine or not self.skips else self._tier(pos)
        r = self.reach[pos] = self.bounds[i][0] + max(m[2] for m in self.misses.values())
        self.span = max(self.span, r - pos)
        if old_reach is not None and self.skips:
            self._retier(pos, old_reach)
        calls = self.pending[pos] = []
        self.tiers[pos] = tier
        for key, (name, vals, _) in self.misses.items():
            calls.append((key, name, vals))
            w = self.asked.get(key)
            if w is None:
                self.asked[key] = w = []
                if not mine:
                    self._queue(tier, pos, key, name, vals)
            w.append((pos, i, row))
        if mine:
            self.mine = calls[::-1]  # popped from the end: in the order the search made them
        self.waits[pos] = len(self.misses)
