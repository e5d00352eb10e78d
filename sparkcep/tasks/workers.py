"""Operator instances: identical workers that evaluate tasks.

Python threads share one interpreter lock, so the workers are processes. They are forked
from the coordinator after the query is compiled and the data sorted, and inherit both
(compiled conditions are closures, which do not pickle; registered functions come along).
Tasks travel in chunks of plain tuples over one pipe per worker. A worker that dies (killed,
out of memory) is replaced by a new fork and its chunk is sent again, so the result does not
change; errors in the data come back as (message, column, position) and are raised by the
coordinator as DataError.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler

from sparkcep.compile.expressions import EvaluationError
from sparkcep.errors import DataError, ExecutionError, SparkCepError
from sparkcep.tasks.evaluate import Evaluator

# A worker that keeps dying is a bug, not bad luck.
MAX_RESTARTS = 16
# A chunk message up to this size may wait in a busy worker's pipe (pipes hold more).
PREFETCH_BYTES = 32 * 1024


def _serve(conn: Connection, evaluator: Evaluator) -> None:
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        try:
            conn.send(("ok", evaluator.tasks(chunk)))
        except EvaluationError as e:
            conn.send(("data", e.message, e.column, e.position))
        except DataError as e:
            conn.send(("data", e.message, e.column, None))
        except SparkCepError as e:
            conn.send(("error", str(e)))
        except Exception as e:  # a bug, or the user's function failed: the coordinator reports it
            conn.send(("bug", f"{type(e).__name__}: {e}"))


class _Worker:
    def __init__(self, ctx, evaluator: Evaluator):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, evaluator), daemon=True)
        self.process.start()
        child.close()
        # Chunks given and not yet answered, oldest first: [chunk, message bytes, sent].
        # Answers come back in the order the chunks went out.
        self.outstanding: collections.deque = collections.deque()
        self.replaced_by: _Worker | None = None

    def send_next(self) -> None:
        """Send what it may take now: every small chunk, and a large one only when nothing
        else is unanswered — a large message could fill the pipe while the worker, busy,
        is itself blocked sending an answer nobody reads."""
        for i, entry in enumerate(self.outstanding):
            if entry[2]:
                continue
            if i > 0 and len(entry[1]) > PREFETCH_BYTES:
                return
            self.conn.send_bytes(entry[1])
            entry[2] = True

    def stop(self) -> None:
        try:
            if self.outstanding:  # it may be blocked sending an answer: do not wait on it
                self.process.kill()
            else:
                self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class WorkerPool:
    """``n`` worker processes. ``submit`` a chunk to a worker with a free slot (``idle``
    lists one entry per free slot), ``results`` waits for any answer: a list of (chunk,
    answers). ``depth`` chunks may be outstanding per worker, so a worker finds its next
    chunk waiting in its pipe instead of idling while its answer travels to the coordinator
    and the next chunk back."""

    def __init__(self, evaluator: Evaluator, n: int, depth: int = 2):
        if not hasattr(os, "fork"):
            raise SparkCepError("strategy='tasks' with workers needs a platform that can fork; use workers=0")
        self._ctx = multiprocessing.get_context("fork")
        self._evaluator = evaluator
        self.depth = depth
        self.workers: list[_Worker] = []
        self.restarts = 0
        try:
            for _ in range(n):
                self.workers.append(_Worker(self._ctx, evaluator))
        except BaseException:
            self.close()
            raise

    def idle(self) -> list[_Worker]:
        # Emptier workers first: every worker gets a chunk before any gets a second.
        order = sorted(self.workers, key=lambda w: len(w.outstanding))
        return [w for slot in range(self.depth) for w in order if len(w.outstanding) <= slot]

    @property
    def busy(self) -> int:
        return sum(bool(w.outstanding) for w in self.workers)

    def submit(self, worker: _Worker, chunk: list, wire: list) -> None:
        while worker.replaced_by is not None:  # idle() may list a worker replaced since
            worker = worker.replaced_by
        worker.outstanding.append([chunk, ForkingPickler.dumps(wire), False])
        try:
            worker.send_next()
        except OSError:  # it died while idle: a fresh fork takes its chunks
            self._replace(worker)

    def results(self) -> list[tuple[list, list]]:
        busy = [w for w in self.workers if w.outstanding]
        by_handle = {}
        for w in busy:
            by_handle[w.conn] = w
            by_handle[w.process.sentinel] = w
        ready = wait(list(by_handle))
        out = []
        for handle in ready:
            w = by_handle[handle]
            if not w.outstanding or w not in self.workers:
                continue
            if handle is w.conn:
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    msg = None
            elif w.conn.poll():  # it answered, then ended: read the answer first
                continue
            else:
                msg = None
            if msg is None:
                self._replace(w)
                continue
            chunk = w.outstanding.popleft()[0]
            try:
                w.send_next()  # a large chunk held back goes now
            except OSError:
                self._replace(w)
            if msg[0] == "ok":
                out.append((chunk, msg[1]))
            elif msg[0] == "data":
                err = DataError(msg[1], msg[2])
                err.position = msg[3]
                raise err
            elif msg[0] == "error":
                raise SparkCepError(msg[1])
            else:
                raise ExecutionError(f"a task worker failed: {msg[1]}")
        return out

    def _replace(self, dead: _Worker) -> None:
        """A worker died with chunks outstanding: fork another and send it the same chunks."""
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise ExecutionError(f"task workers died {self.restarts} times; giving up")
        pending = list(dead.outstanding)
        dead.outstanding.clear()
        try:
            dead.conn.close()
        except OSError:
            pass
        dead.process.kill()
        dead.process.join(timeout=1)
        fresh = _Worker(self._ctx, self._evaluator)
        self.workers[self.workers.index(dead)] = fresh
        dead.replaced_by = fresh
        fresh.outstanding.extend([chunk, data, False] for chunk, data, _ in pending)
        try:
            fresh.send_next()
        except OSError:
            self._replace(fresh)

    def close(self) -> None:
        for w in self.workers:
            w.stop()
