"""Operator instances: identical workers that evaluate tasks.

Python threads share one interpreter lock, so the workers are processes. By default each is
a clean interpreter that is sent the compiled query and its data with cloudpickle
(registered functions come along) — forking the coordinator would copy the state of
libraries whose threads do not survive a fork, and an OpenCV or PyTorch predicate would then
hang in the worker. Clean workers fork from a *template*: one clean interpreter
(``python -m sparkcep.tasks.worker --template``) that has imported sparkcep and nothing of
the user's, started when an expensive function is registered (``prestart``) or by the first
pool; a worker forked from it is ready in about 20 ms, where starting an interpreter took
0.25 s (0.5 s for two on two busy cores, the first query's loss). Where the template cannot
run (no pidfd), each worker is its own interpreter (``python -m sparkcep.tasks.worker``).
Clean workers are also kept for the next query. ``start="fork"`` forks the coordinator
instead: nothing to send or start, for functions known to be fork-safe.

Tasks travel in chunks of plain tuples over one pipe per worker. A worker that dies (killed,
out of memory) is replaced and its chunks are sent again, so the result does not change;
errors in the data come back as (message, column, position) and are raised by the
coordinator as DataError.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from sparkcep.compile.expressions import EvaluationError
from sparkcep.errors import DataError, ExecutionError, SparkCepError

if TYPE_CHECKING:
    from sparkcep.tasks.evaluate import Evaluator

# A worker that keeps dying is a bug, not bad luck.
MAX_RESTARTS = 16
# Chunk messages up to this size wait in a busy worker's pipe, depth - 1 of them: together
# they must fit in a socket buffer (Linux's holds about 200 KiB).
PREFETCH_BYTES = 32 * 1024
STARTS = ("spawn", "fork")
# Clean workers kept between queries, at most this many.
KEEP_IDLE = max(2, os.cpu_count() or 1)
# A worker still computing chunks nobody wants when its query ends (speculative calls) is
# kept if they should take at most this long; the next query reads their answers away.
# Killed instead, the next query of a warm pool started a worker again and made its first
# calls alone meanwhile (measured: of six queries in a row, most began with a worker short).
DRAIN_SECONDS = 0.05
_idle: list[_Worker] = []
_idle_lock = threading.Lock()  # queries in several threads share the kept workers
_kept_generation = 0  # end_kept_workers counts up: a worker started before is not kept after


def _forget_kept_workers() -> None:
    """In a forked child: the kept workers and the template belong to the parent (their
    sockets would carry two processes' messages), and the locks may have been held by
    another thread."""
    global _idle, _idle_lock, _template, _template_lock
    _template, _template_lock = None, threading.Lock()
    for w in _idle:
        try:
            w.conn.close()
            w.process.close()
        except OSError:
            pass
    _idle, _idle_lock = [], threading.Lock()


os.register_at_fork(after_in_child=_forget_kept_workers)


def kept_workers() -> int:
    """Clean workers waiting for a query (a pool of that many starts in a millisecond or two)."""
    with _idle_lock:
        return len(_idle)


def end_kept_workers() -> None:
    """End the clean workers kept for the next query (it then starts its own), and any a
    pool is still starting for a query that has ended."""
    global _kept_generation
    with _idle_lock:
        kept = list(_idle)
        _idle.clear()
        _kept_generation += 1
    for w in kept:
        w.conn.close()  # a clean worker ends at the end of its pipe
        w.process.join(timeout=2)
        w.process.kill()
        w.process.close()


def serve(conn: Connection, evaluator: Evaluator) -> bool:
    """Answer chunks until a None (returns False) or the end of the pipe (True)."""
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return True
        if chunk is None:
            return False
        try:
            t0 = time.perf_counter()
            answers = evaluator.tasks(chunk)
            # pickle itself: Connection.send's ForkingPickler copies the copyreg table per message
            conn.send_bytes(pickle.dumps(("ok", answers, time.perf_counter() - t0), pickle.HIGHEST_PROTOCOL))
        except EvaluationError as e:
            conn.send(("data", e.message, e.column, e.position))
        except DataError as e:
            conn.send(("data", e.message, e.column, None))
        except SparkCepError as e:
            conn.send(("error", str(e)))
        except Exception as e:  # a bug, or the user's function failed: the coordinator reports it
            conn.send(("bug", f"{type(e).__name__}: {e}"))


class _Spawned:
    """A clean interpreter serving tasks (sparkcep/tasks/worker.py), with the part of
    multiprocessing.Process's interface the pool uses."""

    def __init__(self, fd: int):
        env = _environment()
        # Its own session: a Ctrl-C meant for the caller does not end the kept workers.
        self.popen = subprocess.Popen([sys.executable, "-m", "sparkcep.tasks.worker", str(fd)], pass_fds=(fd,),
                                      stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.popen.pid
        # Readable once the process has ended, so ``results`` notices a death (without it, the
        # end of the socket still tells).
        try:
            self.sentinel = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd (old kernel, seccomp)
            self.sentinel = None

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


class _Template:
    """The clean interpreter clean workers fork from (sparkcep/tasks/worker.py, --template):
    sent a worker's socket, it forks a worker serving it and answers with a pidfd of it
    (opened there, before the worker could end and its pid be reused). It ends at the end
    of its socket (this process's)."""

    def __init__(self):
        parent, child = socket.socketpair()
        try:
            self.popen = subprocess.Popen([sys.executable, "-m", "sparkcep.tasks.worker", "--template",
                                           str(child.fileno())], pass_fds=(child.fileno(),),
                                          stdin=subprocess.DEVNULL, env=_environment(), start_new_session=True)
        finally:
            child.close()
        self.ctl = parent
        self.up = False
        self.broken = False
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return not self.broken and self.popen.poll() is None

    def fork(self, fd: int) -> int | None:
        """A pidfd of a new worker serving socket ``fd`` (waits for the template to be up),
        or None: the template has gone, or the worker ended at once. Whatever happens, a
        caller never gives ``fd`` to another process: a worker may be reading it."""
        with self.lock:
            if self.broken:
                return None
            try:
                if not self.up:
                    if self.ctl.recv(1) != b"R":
                        raise OSError("the template ended")
                    self.up = True
                socket.send_fds(self.ctl, [b"f"], [fd])
                msg, fds, _, _ = socket.recv_fds(self.ctl, 1, 1)
                if not msg:
                    raise OSError("the template ended")
                return fds[0] if fds else None
            except OSError:
                self._break()
                return None
            except BaseException:  # Ctrl-C
                self._break()
                raise

    def _break(self) -> None:
        # An answer half read would be the next request's: this template serves no more.
        self.broken = True
        self.ctl.close()

    def end(self) -> None:
        self._break()
        try:
            self.popen.wait(2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


_template: _Template | None = None
_template_lock = threading.Lock()
_FORKS: bool | None = None  # whether pidfds work here (probed once)


def _forks() -> bool:
    """Whether workers can fork from a template: one is not this process's child, so a
    pidfd watches it; the kernel (5.3+) and its sandbox must allow them."""
    global _FORKS
    if _FORKS is None:
        _FORKS = False
        if hasattr(os, "fork") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds"):
            try:
                os.close(os.pidfd_open(os.getpid()))
                _FORKS = True
            except OSError:
                pass
    return _FORKS


def _the_template() -> _Template | None:
    """The template, started if it is not running (None where workers cannot fork from one)."""
    global _template
    if not _forks():
        return None
    with _template_lock:
        if _template is None or not _template.alive():
            _template = _Template()
        return _template


def prestart() -> None:
    """Start the template now, without waiting for it (an expensive function was just
    registered): the first query's workers then fork from it instead of each starting an
    interpreter. Not on one core (no workers would run), nor inside a worker or a Spark
    task (a module registering functions is imported there too). Best effort: where it
    cannot start, the first pool starts its workers itself, and says why if it cannot."""
    if (os.cpu_count() or 1) < 2 or os.environ.get(IN_WORKER) or _in_spark_task():
        return
    try:
        _the_template()
    except Exception:  # noqa: BLE001, S110 - see above: the pool tries again and reports
        pass


def _in_spark_task() -> bool:
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and pyspark.TaskContext.get() is not None


def end_template() -> None:
    """End the template (the next clean worker starts another)."""
    global _template
    with _template_lock:
        t, _template = _template, None
    if t is not None:
        t.end()


# Set in task workers and the template: functions registered there start no template.
IN_WORKER = "SPARKCEP_TASK_WORKER"


def _import_path() -> list[str]:
    """This process's import path as strings (sys.path may hold Path objects, even others)."""
    return [os.fspath(p) for p in sys.path if isinstance(p, (str, os.PathLike)) and os.fspath(p)]


def _environment() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(_import_path()), **{IN_WORKER: "1"})


def _readable(fd: int, timeout: float | None) -> bool:
    # poll, not select: a process with more than 1 024 files open has pidfds above it.
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(None if timeout is None else int(timeout * 1000)))


class _Forked:
    """A worker forked by the template, watched through its pidfd (the interface of _Spawned)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid = pid
        self.sentinel: int | None = pidfd

    def is_alive(self) -> bool:
        return self.sentinel is not None and not _readable(self.sentinel, 0)

    def kill(self) -> None:
        if self.is_alive():
            try:
                signal.pidfd_send_signal(self.sentinel, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def join(self, timeout: float | None = None) -> None:
        if self.sentinel is not None:
            _readable(self.sentinel, timeout)

    def close(self) -> None:
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


def _pid_of(pidfd: int) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        pass
    return None


def _clean_process():
    """(a clean worker process, the socket to it): forked by the template, else its own
    interpreter. A socket a forked worker may hold is never given to another process."""
    try:
        template = _the_template()
    except Exception:  # noqa: BLE001 - no template: the worker starts its own interpreter
        template = None
    if template is not None:
        parent, child = socket.socketpair()
        try:
            pidfd = template.fork(child.fileno())
        finally:
            child.close()
        pid = _pid_of(pidfd) if pidfd is not None else None
        if pid is not None:
            return _Forked(pid, pidfd), parent
        if pidfd is not None:
            os.close(pidfd)
        parent.close()  # a worker that may hold the other end reads its end and exits
    parent, child = socket.socketpair()
    try:
        return _Spawned(child.fileno()), parent
    finally:
        child.close()


class _Worker:
    def __init__(self, ctx, evaluator: Evaluator):
        """A forked worker with ``evaluator`` (``ctx``: a fork context), or with ``ctx`` None
        a clean one waiting for a query (``load``; ``evaluator`` unused)."""
        if ctx is None:
            self.process, parent = _clean_process()
            self.conn = Connection(parent.detach())
        else:
            self.conn, child = ctx.Pipe()
            self.process = ctx.Process(target=serve, args=(child, evaluator), daemon=True)
            self.process.start()
            child.close()
        self.clean = ctx is None
        # Chunks given and not yet answered, oldest first: [chunk, message bytes, sent].
        # Answers come back in the order the chunks went out.
        self.outstanding: collections.deque = collections.deque()
        self.replaced_by: _Worker | None = None
        self.unanswered_load = False  # its answer would be read as a chunk's
        self.stale = 0  # answers of an earlier query's chunks, read before the next load's

    def load(self, payload: bytes) -> None:
        """Give a clean worker the query (cloudpickled evaluator and registered functions)."""
        self.unanswered_load = True
        # With this process's import path: a worker forked from a template started earlier
        # finds modules added to it since.
        self.conn.send(("load", payload, _import_path()))

    def loaded(self) -> None:
        """Wait for ``load``'s answer: raises OSError/EOFError if the worker died, SparkCepError
        if the query could not be rebuilt there."""
        while self.stale:
            self.conn.recv()
            self.stale -= 1
        msg = self.conn.recv()
        self.unanswered_load = False
        if msg[0] != "loaded":
            raise SparkCepError(f"a task worker could not take the query: {msg[1]}")

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

    def end(self, wait: float = 2.0) -> None:
        """End it at once, never kept (dead, or a worker no pool wants)."""
        try:
            self.conn.close()
        except OSError:
            pass
        self.process.kill()
        self.process.join(timeout=wait)
        if self.clean:
            self.process.close()

    def stop(self, chunk_seconds: float | None = None) -> None:
        """Keep it for the next query (clean, alive, and its chunks sent should be done within
        DRAIN_SECONDS at ``chunk_seconds`` each), else end it."""
        sent = sum(1 for entry in self.outstanding if entry[2])
        drains = not self.outstanding or (chunk_seconds is not None and sent * chunk_seconds <= DRAIN_SECONDS)
        if self.clean and drains and not self.unanswered_load and self.process.is_alive():
            with _idle_lock:
                keep = len(_idle) < KEEP_IDLE
                if keep:
                    try:
                        self.conn.send(None)  # it drops the query and waits for the next one
                        self.stale += sent
                        self.outstanding.clear()  # those never sent are dropped
                        _idle.append(self)
                        return
                    except OSError:
                        pass
        try:
            if self.outstanding:  # it may be blocked sending an answer: do not wait on it
                self.process.kill()
            elif self.clean:
                self.conn.close()  # a clean worker ends at the end of its pipe
            else:
                self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()
        if self.clean:
            self.process.close()


class WorkerPool:
    """``n`` worker processes. ``submit`` a chunk to a worker with a free slot (``idle``
    lists one entry per free slot), ``results`` waits for any answer: a list of (chunk,
    answers). ``depth`` chunks may be outstanding per worker, so a worker finds its next
    chunk waiting in its pipe instead of idling while its answer travels to the coordinator
    and the next chunk back."""

    def __init__(self, evaluator: Evaluator, n: int, depth: int = 2, start: str = "spawn"):
        if start not in STARTS:
            raise SparkCepError(f"start must be one of {', '.join(STARTS)}, not {start!r}")
        if start == "fork" and not hasattr(os, "fork"):
            raise SparkCepError("start='fork' needs a platform that can fork; use start='spawn'")
        self._ctx = multiprocessing.get_context("fork") if start == "fork" else None
        self._evaluator = evaluator
        self._payload: bytes | None = None
        self.depth = depth
        self.workers: list[_Worker] = []
        self.restarts = 0
        self.busy_seconds = 0.0  # the workers' time evaluating answered chunks
        self.answered = 0  # chunks answered
        self._growing: tuple[threading.Thread, list] | None = None  # one more worker on its way
        self._grow_lock = threading.Lock()
        self._closed = False
        try:
            if self._ctx is not None:
                for _ in range(n):
                    self.workers.append(_Worker(self._ctx, evaluator))
            else:
                self._payload = _payload(evaluator)
                ended = []  # ended while kept (killed from outside): not this query's restarts
                with _idle_lock:
                    while _idle and len(self.workers) < n:
                        kept = _idle.pop()
                        (self.workers if kept.process.is_alive() else ended).append(kept)
                for w in ended:
                    w.stop()
                while len(self.workers) < n:
                    self.workers.append(_Worker(None, evaluator))
                for w in self.workers:
                    self._load(w)
                for w in list(self.workers):
                    self._loaded(w)
        except BaseException:
            self.close()
            raise

    def _load(self, w: _Worker) -> None:
        try:
            w.load(self._payload)
        except OSError:
            pass  # it died while idle: _loaded notices

    def _loaded(self, w: _Worker) -> _Worker:
        """Wait until ``w`` has the query; one that died meanwhile is replaced (returned)."""
        while True:
            try:
                w.loaded()
                return w
            except (EOFError, OSError):
                w = self._fresh(w)

    def _fresh(self, dead: _Worker) -> _Worker:
        """Count a death, end ``dead`` and put a new worker in its place (sent the query if
        clean, not yet waited for)."""
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise ExecutionError(f"task workers died {self.restarts} times; giving up") from None
        dead.end(wait=1)
        fresh = self.workers[self.workers.index(dead)] = dead.replaced_by = _Worker(self._ctx, self._evaluator)
        if fresh.clean:
            self._load(fresh)
        return fresh

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
        # Plain tuples: pickle itself (ForkingPickler copies the copyreg table per message).
        worker.outstanding.append([chunk, pickle.dumps(wire, pickle.HIGHEST_PROTOCOL), False])
        try:
            worker.send_next()
        except OSError:  # it died while idle: a fresh fork takes its chunks
            self._replace(worker)

    def results(self, timeout: float | None = None) -> list[tuple[list, list]]:
        """The answers that came (waiting up to ``timeout`` seconds for one; None: until one
        does)."""
        # One poll over the busy workers' pipes and process handles (multiprocessing's wait
        # builds a selector per call: measured, a third of this method's time).
        by_fd: dict[int, tuple[_Worker, bool]] = {}
        poller = select.poll()
        for w in self.workers:
            if w.outstanding:
                fd = w.conn.fileno()
                by_fd[fd] = (w, True)
                poller.register(fd, select.POLLIN)
                if w.process.sentinel is not None:
                    by_fd[w.process.sentinel] = (w, False)
                    poller.register(w.process.sentinel, select.POLLIN)
        ready = poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999)))
        out = []
        for fd, _ in ready:
            w, is_conn = by_fd[fd]
            if not w.outstanding or w not in self.workers:
                continue
            if is_conn:
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
                self.busy_seconds += msg[2]
                self.answered += 1
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
        """A worker died with chunks outstanding: start another and send it the same chunks."""
        pending = list(dead.outstanding)
        dead.outstanding.clear()
        fresh = self._fresh(dead)
        if fresh.clean:
            fresh = self._loaded(fresh)
        fresh.outstanding.extend([chunk, data, False] for chunk, data, _ in pending)
        try:
            fresh.send_next()
        except OSError:
            self._replace(fresh)

    def grow(self) -> None:
        """Start one more clean worker in a thread, without waiting: ``adopt`` takes it in
        once it has the query (a spawned pool only)."""
        if self._payload is None or self._growing is not None:
            return
        box: list[_Worker] = []

        def start() -> None:
            with _idle_lock:
                w = _idle.pop() if _idle else None
                generation = _kept_generation
            try:
                if w is not None and not w.process.is_alive():
                    w.stop()  # ended while kept
                    w = None
                if w is None:
                    w = _Worker(None, self._evaluator)
                w.load(self._payload)
                w.loaded()
            except (OSError, EOFError, SparkCepError):  # no worker more: the pool goes on as it is
                if w is not None:
                    w.end()
                return
            with self._grow_lock:
                if not self._closed:
                    box.append(w)
                    return
            # The query ended meanwhile: kept for the next, unless the kept ones were ended since.
            if generation == _kept_generation:
                w.stop()
            else:
                w.end()

        thread = threading.Thread(target=start, name="sparkcep-grow-pool", daemon=True)
        thread.start()
        self._growing = (thread, box)

    @property
    def growing(self) -> bool:
        return self._growing is not None

    def adopt(self) -> bool:
        """Take in the worker ``grow`` started, if it is ready (from the pool's own thread)."""
        if self._growing is None or self._growing[0].is_alive():
            return False
        box = self._growing[1]
        self._growing = None
        if box:
            self.workers.append(box[0])
        return bool(box)

    def close(self) -> None:
        with self._grow_lock:
            self._closed = True
            if self._growing is not None:  # a worker grown and not taken in yet stops with the rest
                self.workers.extend(self._growing[1])
                self._growing = None
        per_chunk = self.busy_seconds / self.answered if self.answered else None
        for w in self.workers:
            w.stop(per_chunk)


def _folder() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the working folder was removed: workers keep theirs
        return None


def _payload(evaluator) -> bytes:
    import cloudpickle

    from sparkcep import functions

    try:
        # The working folder too: a worker kept from an earlier query would resolve a relative
        # path (a file a function opens) against the folder it started in.
        return cloudpickle.dumps((functions.user_functions(), evaluator, _folder()))
    except Exception as e:
        raise SparkCepError(f"the query cannot be sent to task workers ({type(e).__name__}: {e}): a registered "
                            "function defined in a script or notebook travels with the globals it reads; define "
                            "it in a module the workers can import, or make such objects on its first call, or "
                            "pass start='fork' to fork the workers instead") from None
