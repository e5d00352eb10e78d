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

import multiprocessing
import os
from multiprocessing.connection import Connection, wait

from sparkcep.compile.expressions import EvaluationError
from sparkcep.errors import DataError, ExecutionError, SparkCepError
from sparkcep.tasks.evaluate import Evaluator

# A worker that keeps dying is a bug, not bad luck.
MAX_RESTARTS = 16


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
        self.chunk: list | None = None  # what it is evaluating

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class WorkerPool:
    """``n`` worker processes. ``submit`` a chunk to an idle worker, ``results`` waits for
    any answer: a list of (chunk, booleans)."""

    def __init__(self, evaluator: Evaluator, n: int):
        if not hasattr(os, "fork"):
            raise SparkCepError("strategy='tasks' with workers needs a platform that can fork; use workers=0")
        self._ctx = multiprocessing.get_context("fork")
        self._evaluator = evaluator
        self.workers: list[_Worker] = []
        self.restarts = 0
        try:
            for _ in range(n):
                self.workers.append(_Worker(self._ctx, evaluator))
        except BaseException:
            self.close()
            raise

    def idle(self) -> list[_Worker]:
        return [w for w in self.workers if w.chunk is None]

    @property
    def busy(self) -> int:
        return sum(w.chunk is not None for w in self.workers)

    def submit(self, worker: _Worker, chunk: list, wire: list[tuple]) -> None:
        worker.chunk = chunk
        worker.wire = wire
        try:
            worker.conn.send(wire)
        except OSError:  # it died while idle: a fresh fork takes the chunk
            self._replace(worker)

    def results(self, wake: Connection | None = None) -> list[tuple[list, list[bool]]]:
        """Answers that have come; waits for one, or for ``wake`` to be readable."""
        busy = [w for w in self.workers if w.chunk is not None]
        by_handle = {}
        for w in busy:
            by_handle[w.conn] = w
            by_handle[w.process.sentinel] = w
        ready = wait(list(by_handle) + ([wake] if wake is not None else []))
        out = []
        for handle in ready:
            w = by_handle.get(handle)
            if w is None:  # the wake-up
                continue
            if w.chunk is None:
                continue
            if handle is w.conn:
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    msg = None
            else:
                msg = None
            if msg is None:
                self._replace(w)
                continue
            chunk, w.chunk = w.chunk, None
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
        """A worker died mid-chunk: fork another and give it the same chunk."""
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise ExecutionError(f"task workers died {self.restarts} times; giving up")
        chunk, wire = dead.chunk, dead.wire
        dead.chunk = None
        try:
            dead.conn.close()
        except OSError:
            pass
        dead.process.join(timeout=1)
        fresh = _Worker(self._ctx, self._evaluator)
        self.workers[self.workers.index(dead)] = fresh
        self.submit(fresh, chunk, wire)

    def close(self) -> None:
        for w in self.workers:
            w.stop()
