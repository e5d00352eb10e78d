"""A clean task worker: ``python -m sparkcep.tasks.worker FD``.

It serves one query at a time over the socket ``FD``: a ("load", payload) message brings
the cloudpickled (registered functions, evaluator); chunks of tasks follow until a None
hands the worker back to the pool, which may load the next query. The end of the socket
ends the process.
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
    from sparkcep.tasks.workers import _serve

    conn = Connection(fd)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:  # handed back without a query (its load had failed)
            continue
        try:
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
        if _serve(conn, evaluator):
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
