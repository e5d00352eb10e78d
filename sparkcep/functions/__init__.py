"""Functions a query may call: the built-in library (functions.library, functions.casts) and
the registry of user functions and aggregates, with the names the analyzer treats specially.

A query can only call functions listed here; a name that is not is a QueryError. Nothing in
query text is ever looked up as arbitrary Python.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sparkcep.errors import SparkCepError
from sparkcep.functions.library import BUILTINS, ScalarFunction
from sparkcep.types import Type
from sparkcep.values import checked_aggregate, checked_function, checked_index

_TYPE_NAMES = {
    "boolean": Type.BOOLEAN, "bool": Type.BOOLEAN, bool: Type.BOOLEAN,
    "bigint": Type.BIGINT, "int": Type.BIGINT, "integer": Type.BIGINT, int: Type.BIGINT,
    "double": Type.DOUBLE, "float": Type.DOUBLE, float: Type.DOUBLE,
    "varchar": Type.VARCHAR, "string": Type.VARCHAR, "str": Type.VARCHAR, str: Type.VARCHAR,
    "timestamp": Type.TIMESTAMP, "date": Type.DATE, "array": Type.ARRAY, list: Type.ARRAY, "any": Type.ANY,
    "varbinary": Type.BINARY, "binary": Type.BINARY, bytes: Type.BINARY,
}

_lock = threading.Lock()
_USER: dict[str, ScalarFunction] = {}
_version = 0  # bumped whenever the user registry changes (compiled plans depend on it)


def user_functions() -> dict[str, ScalarFunction]:
    """The registered scalar functions (to ship to another process with cloudpickle)."""
    return dict(_USER)


def install_user_functions(registered: dict[str, ScalarFunction]) -> None:
    """Register functions shipped from the driver (a Spark worker compiling a query)."""
    global _version
    with _lock:
        changed = {k: f for k, f in registered.items() if _USER.get(k) is not f}
        if changed:
            _USER.update(changed)
            _version += 1


def is_expensive(name: str) -> bool:
    f = _USER.get(name.upper())
    return f is not None and f.cost == "expensive"


def any_expensive() -> bool:
    """Whether some registered function is expensive (no query can call one otherwise)."""
    return any(f.cost == "expensive" for f in list(_USER.values()))


def registry_version() -> int:
    return _version


def register_function(name: str, fn: Callable[..., Any], returns: Any = "any", *, deterministic: bool = True,
                      null_on_null: bool = True, cost: str = "cheap") -> None:
    """Make ``fn`` callable from DEFINE and MEASURES as ``name(...)``.

    ``returns`` is the result type: "boolean", "bigint", "double", "varchar", "timestamp",
    "date", "array", "varbinary", "any" (the default: the values decide) or the Python types
    bool/int/float/str/list/bytes. Results pass the value boundary: numpy scalars and arrays
    become SQL values (``np.bool_`` a boolean, ``np.float32`` a double, arrays lists), None,
    pandas' NA and NaT are NULL (NaN too, except for "double"), and a result that is not of
    the declared type is a DataError naming the function and the row. Functions must be
    deterministic and free of side effects: the engine may call them in any order, more than
    once, and on different workers. With ``null_on_null`` (the default) a NULL argument gives
    NULL without calling ``fn``. ``cost="expensive"`` marks a function whose calls take
    milliseconds (image or text comparison, a model): a SNOOP query calling it, or a
    MATCH_RECOGNIZE query calling it in DEFINE (see match_recognize), runs on the task
    engine's worker processes under strategy "auto". Arguments may be any column
    values, binary payloads (bytes) and lists included.
    """
    if not isinstance(name, str):
        raise SparkCepError(f"register_function: the name must be a string, not {type(name).__name__}")
    if cost not in ("cheap", "expensive"):
        raise SparkCepError(f"register_function: cost must be 'cheap' or 'expensive', not {cost!r}")
    if not callable(fn):
        raise SparkCepError(f"register_function: {fn!r} is not callable")
    if not deterministic:
        raise SparkCepError(
            f"register_function: {name!r} is declared non-deterministic; only deterministic "
            "functions can be used, since matches must not depend on evaluation order"
        )
    if not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
        raise SparkCepError(f"register_function: {name!r} is not a valid function name")
    key = name.upper()
    if key in BUILTINS or key in RESERVED_CALLS:
        raise SparkCepError(f"register_function: {name!r} is a built-in function name")
    try:
        rtype = _TYPE_NAMES[returns.lower() if isinstance(returns, str) else returns]
    except (KeyError, TypeError):
        raise SparkCepError(f"register_function: unknown return type {returns!r}") from None
    global _version
    with _lock:
        _USER[key] = ScalarFunction(key, checked_function(fn, key, rtype), 0, None, lambda _types, t=rtype: t,
                                    null_on_null, True, cost)
        _version += 1


def unregister_function(name: str) -> None:
    """Forget a registered function or aggregate."""
    if not isinstance(name, str):
        raise SparkCepError(f"unregister_function: the name must be a string, not {type(name).__name__}")
    global _version
    with _lock:
        _USER.pop(name.upper(), None)
        _AGGREGATES_USER.pop(name.upper(), None)
        _version += 1


def lookup(name: str) -> ScalarFunction | None:
    key = name.upper()
    return BUILTINS.get(key) or _USER.get(key)


# Names the analyzer treats specially (navigation, aggregates, pattern functions).
NAVIGATION = frozenset({"PREV", "NEXT", "FIRST", "LAST"})
AGGREGATE_ALIASES = {
    "ARRAY_AGG": "COLLECT", "EVERY": "BOOL_AND", "ANY_VALUE": "ARBITRARY", "STDDEV": "STDDEV_SAMP",
    "VARIANCE": "VAR_SAMP",
}
AGGREGATES = frozenset({
    "COUNT", "SUM", "AVG", "MIN", "MAX", "DELTA", "COLLECT", "COUNT_IF", "BOOL_AND", "BOOL_OR", "MAX_BY",
    "MIN_BY", "ARBITRARY", "STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP",
    # T-REX's time-series aggregates.
    "LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST", "ZSCORE",
}) | frozenset(AGGREGATE_ALIASES)
RESERVED_CALLS = NAVIGATION | AGGREGATES | {"CLASSIFIER", "MATCH_NUMBER", "WINDOW"}

_AGGREGATES_USER: dict[str, Any] = {}


def register_aggregate(name: str, fn: Callable[..., float], index: Callable[..., Any] | None = None) -> None:
    """Make ``fn`` an aggregate of segment queries (and of MEASURES and DEFINE elsewhere):
    ``name(x [, y])`` calls ``fn`` with one float numpy array per argument — the rows of the
    segment, NULL as NaN — and takes a float (None or NaN: NULL). ``index``, optional, is
    T-REX's index(): called once per partition with the whole columns, it returns an object
    whose ``lookup(start, end)`` answers for the rows start..end (inclusive), so overlapping
    segments share its work. Both must be deterministic."""
    from sparkcep.aggregates.kernels import UserAggregate

    if not isinstance(name, str):
        raise SparkCepError(f"register_aggregate: the name must be a string, not {type(name).__name__}")
    if not callable(fn) or (index is not None and not callable(index)):
        raise SparkCepError(f"register_aggregate: {name!r} needs a callable fn (and index, if given)")
    if not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
        raise SparkCepError(f"register_aggregate: {name!r} is not a valid name")
    key = name.upper()
    if key in BUILTINS or key in RESERVED_CALLS or key in _USER:
        raise SparkCepError(f"register_aggregate: {name!r} is already a function name")
    global _version
    with _lock:
        _AGGREGATES_USER[key] = UserAggregate(key, checked_aggregate(fn, key),
                                              checked_index(index, key) if index is not None else None)
        _version += 1


def user_aggregate(name: str):
    return _AGGREGATES_USER.get(name.upper())


def user_aggregates() -> dict[str, Any]:
    return dict(_AGGREGATES_USER)
