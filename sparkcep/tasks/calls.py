"""Any MATCH_RECOGNIZE query on the task engine's workers: calls of expensive functions as
tasks.

Queries the state model cannot run (contiguous rows, quantifiers, aggregates, SQL's
preference and skip rules) still spend their time in the calls of expensive functions. The
sequential engine runs them here unchanged, one matcher per partition, several partitions
side by side in coordinator threads; a thread that reaches an expensive call hands
⟨function, arguments⟩ to the call router and waits. The router's dispatcher thread sends
the waiting calls in chunks to the worker processes (tasks/workers.py: forked, replaced
when one dies) and wakes each caller with its answer. Matching itself is the sequential
engine's, so the rows and their order are too. Parallelism comes from the partitions in
flight (PARTITION BY); a query with one partition gains nothing (the state model's queries
spread one key's partial matches instead).
"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Pipe

import pyarrow as pa

from sparkcep import functions
from sparkcep.compile.plan import Plan
from sparkcep.errors import ExecutionError, SparkCepError
from sparkcep.functions import FunctionError
from sparkcep.tasks.workers import WorkerPool

# Partitions in flight per worker: enough waiting calls to fill every worker's next chunk.
THREADS_PER_WORKER = 8


class _Raised(Exception):
    """A user function raised in a worker: re-raised in the caller as the same kind of error
    (a FunctionError, or any other exception with the same text), so messages match the
    sequential engine's."""


class CallEvaluator:
    """What a worker runs: each call of a chunk, answered with ("ok", value) or the error."""

    def tasks(self, chunk: list[tuple]) -> list[tuple]:
        out = []
        for name, args in chunk:
            try:
                out.append(("ok", functions.plain_function(name)(*args)))
            except FunctionError as e:
                out.append(("function", str(e)))
            except Exception as e:  # the user's function failed: the caller reports it, with its row
                out.append(("raised", str(e)))
        return out


class CallRouter:
    """Sends the calls of coordinator threads to ``workers`` processes, ``chunk`` calls (at
    most) per message; ``calls`` counts them."""

    def __init__(self, workers: int, chunk: int | None = None):
        self.pool = WorkerPool(CallEvaluator(), workers)
        self.chunk = chunk
        self.calls = 0
        self._waiting: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = Pipe(duplex=False)
        self._failed: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._dispatch, name="sparkcep-call-router", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ coordinator threads
    def call(self, name: str, fn, args: tuple):  # fn: the workers have it already (forked)
        future: Future = Future()
        with self._lock:
            if self._failed is not None:
                raise self._failed
            self._waiting.append((name, args, future))
            self.calls += 1
        self._wake_w.send_bytes(b"")
        status, value = future.result()
        if status == "ok":
            return value
        if status == "function":
            raise FunctionError(value)
        raise _Raised(value)

    # ------------------------------------------------------------ the dispatcher
    def _dispatch(self) -> None:
        pool = self.pool
        try:
            while not self._stop:
                idle = pool.idle()
                if idle:
                    with self._lock:
                        waiting = len(self._waiting)
                        # Spread what waits over the idle workers; cap a message at ``chunk``.
                        size = -(-waiting // len(idle)) if waiting else 0
                        if self.chunk:
                            size = min(size, self.chunk)
                        batches = []
                        for _ in idle:
                            if not self._waiting:
                                break
                            batches.append([self._waiting.popleft() for _ in range(min(size, len(self._waiting)))])
                    for w, batch in zip(idle, batches, strict=False):
                        pool.submit(w, batch, [(name, args) for name, args, _ in batch])
                for batch, answers in pool.results(self._wake_r):
                    for (_, _, future), answer in zip(batch, answers, strict=True):
                        future.set_result(answer)
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
        except BaseException as e:  # workers keep dying, or a bug: every caller hears of it
            failure = e if isinstance(e, SparkCepError) else ExecutionError(f"the call router failed: {e}")
            with self._lock:
                self._failed = failure
                pending = list(self._waiting)
                self._waiting.clear()
            for w in pool.workers:
                if w.chunk is not None:
                    pending += w.chunk
                    w.chunk = None
            for _, _, future in pending:
                if not future.done():
                    future.set_exception(failure)

    def close(self) -> None:
        self._stop = True
        try:
            self._wake_w.send_bytes(b"")
        except OSError:
            pass
        self._thread.join(timeout=5)
        self.pool.close()
        self._wake_r.close()
        self._wake_w.close()


def run_plan_on_calls(plan: Plan, table: pa.Table, workers: int, chunk: int | None = None,
                      stats: dict | None = None) -> pa.Table:
    """The plan's output by the sequential engine, partitions side by side, expensive calls
    evaluated by ``workers`` processes (0: in this process, one partition at a time)."""
    from sparkcep.runtime.local import run_plan

    if workers == 0:
        return run_plan(plan, table, use_kernel=False)
    router = CallRouter(workers, chunk)
    executor = ThreadPoolExecutor(max_workers=THREADS_PER_WORKER * workers, thread_name_prefix="sparkcep-partition",
                                  initializer=functions.route_calls, initargs=(router,))
    try:
        return run_plan(plan, table, executor=executor)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if stats is not None:
            stats["calls"], stats["restarts"] = router.calls, router.pool.restarts
        router.close()
