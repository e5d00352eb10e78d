"""numba for sparkcep's kernels: compiled on first use, cached on disk, and warmed in the
background so that nobody waits for a compiler to see a first answer.

numba compiles a kernel the first time a query needs it, once per kind of query and types
of columns, and keeps the machine code in its cache (beside the module, or in the user's
cache folder when that is read-only; keyed by the machine's CPU). Compiling the common kinds
takes about a minute and a half; loading them from the cache about half a second per process
(numba's own start). So, the tiers of a first answer (``use_compiled``):

- numba is not even imported until a kernel is called: ``njit`` returns a ``Kernel`` that
  builds numba's dispatchers for its whole module on the first call (a kernel calling
  another reads it from its module's globals when it compiles);
- an input of at most ``SMALL_ROWS`` rows, in a process that has loaded no kernel yet, runs
  on the Python matchers (milliseconds, where loading the kernels costs half a second);
- a larger input runs on the kernels where the common kinds are in the cache (a stamp
  written by ``sparkcep warm`` says so, keyed by the kernels' source), on the Python
  matchers up to ``COLD_ROWS`` rows where they are not, while a background process compiles
  them (``warm_in_background``); past that it compiles here, saying so once on stderr.

``SPARKCEP_KERNEL=1`` runs the kernels wherever they apply and ``0`` never (the Python
matchers give the same answers); ``SPARKCEP_BACKGROUND_COMPILE=0`` starts no background
process. ``sparkcep warm`` compiles the common kinds ahead and writes the stamp.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
import time

NOTICE = ("sparkcep: compiling matching kernels (numba keeps them in its cache for later runs; "
          "`sparkcep warm` compiles the common kinds ahead)")

# Below this many rows the Python matchers answer faster than numba loads the kernels from
# its cache (~0.5 s a process; the slowest RIP query runs 2 000 rows in ~40 ms in Python).
SMALL_ROWS = 2_000
# Up to this many rows, with nothing compiled yet, the Python matchers answer faster than
# compiling (~20 s for one kind; RIP Q1, the slowest, runs 200 000 rows in ~4 s in Python).
COLD_ROWS = 200_000
# The modules whose functions ``njit`` compiles: the stamp is keyed by their source.
KERNEL_MODULES = (
    "sparkcep.compile.skip",
    "sparkcep.runtime.kernel_program",
    "sparkcep.runtime.kernel",
    "sparkcep.runtime.kernel_runs",
    "sparkcep.runtime.automaton",
    "sparkcep.runtime.columnar",
    "sparkcep.aggregates.kernels",
    "sparkcep.data.partitions",
)

_lock = threading.RLock()  # a module's kernels build those they import
_noticed = False
_active = False  # some kernel was called in this process (numba is loaded)
_warming: subprocess.Popen | None = None  # the background compile this process started
_state: dict[str, str] = {}


# ---- lazily built dispatchers ------------------------------------------------------------


class Kernel:
    """A numba function that imports numba and compiles on its first call. Calling it, or
    reading a dispatcher attribute (``signatures``, ``py_func``…), first replaces every
    Kernel in its module's globals by numba's dispatcher, so that kernels calling each
    other see dispatchers when numba compiles them."""

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self.options = options
        self.dispatcher = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__

    def __call__(self, *args):
        d = self.dispatcher
        if d is None:
            d = _materialize(self)
        return d(*args)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # (copy, inspect and pickle probe these: no reason to load numba)
            raise AttributeError(name)
        return getattr(self.dispatcher if self.dispatcher is not None else _materialize(self), name)

    def __reduce__(self):
        # Pickled by name (task workers, Spark tasks): the receiving process builds its own.
        return (_named, (self.__module__, self.__qualname__))


def _named(module: str, qualname: str):
    return getattr(importlib.import_module(module), qualname)


def njit(*args, **options):
    """numba.njit with the disk cache on, built on first call (see ``Kernel``), releasing the
    GIL while it runs (the rules of one match_rules call match on threads side by side)."""
    options.setdefault("cache", True)
    options.setdefault("nogil", True)
    if args and callable(args[0]):
        return Kernel(args[0], options)
    return lambda fn: Kernel(fn, options)


def _materialize(kernel: Kernel):
    """numba's dispatchers for every Kernel of ``kernel``'s module, put in its globals, with
    the kernels it reads from other modules (built in theirs)."""
    global _active
    with _lock:
        if kernel.dispatcher is None:
            numba = load_numba()
            module = sys.modules[kernel.__module__]
            for name, value in list(vars(module).items()):
                if not isinstance(value, Kernel):
                    continue
                if value.__module__ != module.__name__:  # imported: its own module builds it
                    setattr(module, name, value.dispatcher or _materialize(value))
                elif value.dispatcher is None:
                    value.dispatcher = _dispatcher(numba, value)
                    setattr(module, name, value.dispatcher)
            if kernel.dispatcher is None:  # no longer in its module's globals (a test replaced it)
                kernel.dispatcher = _dispatcher(numba, kernel)
        _active = True
    return kernel.dispatcher


def _dispatcher(numba, kernel: Kernel):
    """numba's dispatcher for ``kernel``. numba's cache takes a function as fresh while its
    own file is unchanged, so a kernel calling into another module would keep that module's
    old code: the cache is keyed on the source of every kernel module instead."""
    d = numba.njit(**kernel.options)(kernel.py_func)
    index = getattr(getattr(d, "_cache", None), "_cache_file", None)
    if index is not None and hasattr(index, "_source_stamp"):
        index._source_stamp = (index._source_stamp, source_key())
    return d


_numba_module = None


def load_numba():
    """numba, imported (and the first-compile notice registered) on the first kernel call."""
    global _numba_module
    if _numba_module is None:
        import numba
        from numba.core import event

        event.register("numba:compile", _first_compile_listener())
        _numba_module = numba
    return _numba_module


def active() -> bool:
    """Whether this process has loaded a kernel (numba's start is paid: kernels are cheap)."""
    return _active


# ---- the notice ---------------------------------------------------------------------------


def _first_compile_listener():
    from numba.core import event

    class FirstCompile(event.Listener):
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

    return FirstCompile()


def silence() -> None:
    """No notice from here on (``sparkcep warm`` says what it compiles itself)."""
    global _noticed
    _noticed = True


# ---- which matchers answer ------------------------------------------------------------------


def mode() -> str:
    """"on" (kernels wherever they apply), "off" or "auto" (the tiers above)."""
    if _state.get("forced"):
        return _state["forced"]
    return {"1": "on", "0": "off"}.get(os.environ.get("SPARKCEP_KERNEL", ""), "auto")


@contextlib.contextmanager
def forcing(m: str):
    """``mode()`` is ``m`` inside (``sparkcep warm`` compiles whatever the input's size)."""
    before = _state.get("forced")
    _state["forced"] = m
    try:
        yield
    finally:
        if before is None:
            _state.pop("forced", None)
        else:
            _state["forced"] = before


def use_compiled(rows: int) -> bool:
    """Whether a query over ``rows`` rows runs on the compiled kernels (the Python matchers
    give the same answers; this only chooses the faster one to reach)."""
    m = mode()
    if m != "auto":
        return m == "on"
    if _active:
        return True
    if compiled():
        return rows > SMALL_ROWS
    warm_in_background()
    return rows > COLD_ROWS


def cache_folder() -> str:
    """Where the stamp and the background compile's lock live: SPARKCEP_CACHE_DIR, else
    beside numba's own cache folder when NUMBA_CACHE_DIR is set, else the user's cache."""
    own = os.environ.get("SPARKCEP_CACHE_DIR")
    if own:
        return own
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        return os.path.join(numba_dir, "sparkcep")
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "sparkcep")


def source_key() -> str:
    """A hash of the kernels' source and place, of this module (the options they compile
    with, such as nogil) and of the interpreter and machine they compile for."""
    key = _state.get("key")
    if key is None:
        h = hashlib.sha256(f"{sys.version}|{platform.machine()}".encode())
        for name in (*KERNEL_MODULES, __name__):
            spec = importlib.util.find_spec(name)
            h.update(spec.origin.encode())  # each installation has its own numba cache
            with open(spec.origin, "rb") as f:
                h.update(f.read())
        key = _state["key"] = h.hexdigest()[:24]
    return key


def stamp_path() -> str:
    return os.path.join(cache_folder(), f"warm-{source_key()}.json")


def compiled() -> bool:
    """Whether the common kinds are in numba's cache: the stamp of these sources exists and
    numba's index files it lists are still there (a cleared cache compiles again)."""
    try:
        with open(stamp_path()) as f:
            indexes = json.load(f)["indexes"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(indexes) and all(os.path.exists(p) for p in indexes)


def write_stamp() -> str:
    """After the common kinds compiled (``sparkcep warm``): the stamp, listing numba's index
    file of every kernel this process built."""
    indexes = []
    for name in KERNEL_MODULES:
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            cache = getattr(value, "_cache", None)
            path = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
            if getattr(value, "py_func", None) is not None and path and os.path.exists(path):
                indexes.append(path)
    path = stamp_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"indexes": sorted(set(indexes)), "written": time.time()}, f)
    os.replace(tmp, path)
    return path


# A background compile that has held the lock this long is taken as dead.
_STALE_SECONDS = 900


def warm_in_background() -> bool:
    """Start, once per process and one at a time per machine and source, a low-priority
    process that compiles the common kinds into numba's cache (``python -m
    sparkcep.cli.warm``) and writes the stamp; True if one started."""
    global _warming
    if _warming is not None or os.environ.get("SPARKCEP_BACKGROUND_COMPILE") == "0":
        return False
    lock = stamp_path() + ".lock"
    try:
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        try:
            if time.time() - os.path.getmtime(lock) < _STALE_SECONDS:
                return False  # another process compiles (or failed lately: it leaves the lock)
            os.unlink(lock)
        except FileNotFoundError:
            pass
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False  # a read-only cache folder, or another process took the lock first
    env = dict(os.environ, SPARKCEP_KERNEL="1", SPARKCEP_BACKGROUND_COMPILE="0")
    try:
        _warming = subprocess.Popen(
            [sys.executable, "-m", "sparkcep.cli.warm", "--background", lock],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env, close_fds=True)
    except OSError:
        os.close(fd)
        os.unlink(lock)
        return False
    os.write(fd, str(_warming.pid).encode())
    os.close(fd)
    return True
