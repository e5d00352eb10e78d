"""A clean task worker: ``python -m sparkcep.tasks.worker FD``, or the template clean workers
fork from: ``python -m sparkcep.tasks.worker --template FD``.

A worker serves one query at a time over the socket ``FD``: a ("load", payload, import
path) message brings the cloudpickled (registered functions, evaluator); chunks of tasks
follow until a None hands the worker back to the pool, which may load the next query. The
end of the socket ends the process.

The template imports what a query needs (sparkcep, numpy, pyarrow, cloudpickle; nothing of
the user's), then forks a worker for each socket it is sent over ``FD`` and answers its pid.
It ends at the end of ``FD``; its workers end at the end of their own sockets.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection


def main(fd: int) -> None:
    import signal

    import cloudpickle

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when a worker ends

    from sparkcep import functions
    from sparkcep.tasks.workers import serve

    conn = Connection(fd)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:  # handed back without a query (its load had failed)
            continue
        try:
            # The coordinator's import path first, in its order (a path it put in front
            # since this interpreter started wins over site-packages, as there).
            sys.path[:] = msg[2] + [p for p in sys.path if p not in msg[2]]
            registered, evaluator, folder = cloudpickle.loads(msg[1])
            functions.install_user_functions(registered)
            if folder is not None:
                os.chdir(folder)  # the query's working folder, as the coordinator's
        except Exception as e:  # e.g. a function whose module this interpreter cannot import
            conn.send(("failed", f"{type(e).__name__}: {e}"))
            continue
        try:
            conn.send(("loaded",))
        except OSError:  # the coordinator has gone (it exited while this one was loading)
            return
        if serve(conn, evaluator):
            return


def template(fd: int) -> None:
    import signal
    import socket
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Forking with library threads up (OpenBLAS's, jemalloc's) is safe here: both handle a
    # fork, and nothing of the user's runs before it; Python 3.12+ would warn.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    # What loading a query imports, so that a worker forked from here has it already.
    import cloudpickle  # noqa: F401
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401

    import sparkcep.tasks.evaluate  # noqa: F401
    import sparkcep.tasks.speculate  # noqa: F401
    from sparkcep import functions  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # ended workers are reaped at once
    ctl = socket.socket(fileno=fd)
    try:
        ctl.sendall(b"R")
        while True:
            msg, fds, _, _ = socket.recv_fds(ctl, 1, 1)
            if not msg or not fds:
                return
            pid = os.fork()
            if pid == 0:
                ctl.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = 0
                try:
                    main(fds[0])
                except BaseException:  # noqa: BLE001 - a worker's end is its own
                    code = 1
                finally:
                    for stream in (sys.stdout, sys.stderr):  # what a function printed
                        try:
                            stream.flush()
                        except Exception:  # noqa: BLE001, S110 - a closed stream has nothing to give
                            pass
                    os._exit(code)
            os.close(fds[0])
            try:
                # Opened here, before the worker could end and be reaped (SIGCHLD ignored).
                pidfd = [os.pidfd_open(pid)]
            except OSError:  # it ended at once
                pidfd = []
            socket.send_fds(ctl, [b"p"], pidfd)
            for fd_ in pidfd:
                os.close(fd_)
    except OSError:  # the coordinator has gone
        return


if __name__ == "__main__":
    if sys.argv[1] == "--template":
        template(int(sys.argv[2]))
    else:
        main(int(sys.argv[1]))
