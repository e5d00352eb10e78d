"""numba for sparkcep's kernels: every compiled function is cached on disk, and the first
compile in a process says so on stderr.

numba compiles a kernel the first time a query needs it, once per kind of query and types
of columns, and keeps the machine code in its cache (beside the module, or in the user's
cache folder when that is read-only; keyed by the machine's CPU). A fresh installation
therefore pauses for seconds to tens of seconds on its first query of each kind; without a
word, that pause looks like a hang. Each process says it once (a Spark worker too).
``sparkcep warm`` compiles the common kinds ahead.
"""

from __future__ import annotations

import sys
import threading

import numba
from numba.core import event

NOTICE = ("sparkcep: compiling matching kernels (numba keeps them in its cache for later runs; "
          "`sparkcep warm` compiles the common kinds ahead)")

_lock = threading.Lock()
_noticed = False


class _FirstCompile(event.Listener):
    """Prints NOTICE when numba first compiles one of sparkcep's functions here (a cache
    hit raises no compile event)."""

    def on_start(self, ev: event.Event) -> None:
        global _noticed
        if _noticed:
            return
        dispatcher = (ev.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not module.startswith("sparkcep."):
            return  # the user's own numba code
        with _lock:
            if _noticed:
                return
            _noticed = True
        try:
            print(NOTICE, file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass  # no stderr (closed, a broken pipe, None): the compile goes on without a word

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", _FirstCompile())


def silence() -> None:
    """No notice from here on (``sparkcep warm`` says what it compiles itself)."""
    global _noticed
    _noticed = True


def njit(*args, **options):
    """numba.njit with the disk cache on (sparkcep's kernels always use it)."""
    options.setdefault("cache", True)
    return numba.njit(*args, **options)
