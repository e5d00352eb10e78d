"""Scalar functions: the built-in ones and those a user registers by name.

A query can only call functions listed here; a name that is not is a QueryError. Nothing in
query text is ever looked up as arbitrary Python.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.analysis.bound import Type
from sparkcep.errors import SparkCepError


@dataclass(frozen=True)
class ScalarFunction:
    name: str
    impl: Callable[..., Any]
    min_args: int
    max_args: int | None  # None: variadic
    # Given the argument types, the result type, or a message saying what is wrong.
    result: Callable[[list[Type]], Type | str]
    null_on_null: bool = True  # NULL in any argument gives NULL without calling impl
    user_defined: bool = False


def _double(types: list[Type]) -> Type | str:
    for t in types:
        if not (t.numeric or t is Type.NULL):
            return f"needs numbers, got {t.value}"
    return Type.DOUBLE


def _int_of(types: list[Type]) -> Type | str:
    for t in types:
        if not (t.numeric or t is Type.NULL):
            return f"needs numbers, got {t.value}"
    return types[0] if types[0] is not Type.NULL else Type.BIGINT


def _string(types: list[Type]) -> Type | str:
    if types[0] not in (Type.VARCHAR, Type.NULL):
        return f"needs a string, got {types[0].value}"
    return Type.VARCHAR


def _length(types: list[Type]) -> Type | str:
    if types[0] not in (Type.VARCHAR, Type.NULL, Type.ARRAY):
        return f"needs a string or an array, got {types[0].value}"
    return Type.BIGINT


def _substr(types: list[Type]) -> Type | str:
    if types[0] not in (Type.VARCHAR, Type.NULL):
        return f"needs a string, got {types[0].value}"
    for t in types[1:]:
        if t not in (Type.BIGINT, Type.NULL):
            return f"needs whole-number positions, got {t.value}"
    return Type.VARCHAR


def unify(types: list[Type]) -> Type | None:
    """The common type of values that may stand in one place, or None if there is none."""
    known = [t for t in types if t not in (Type.NULL,)]
    if not known:
        return Type.NULL
    if Type.ANY in known:
        return Type.ANY
    if all(t.numeric for t in known):
        return Type.DOUBLE if Type.DOUBLE in known else Type.BIGINT
    first = known[0]
    if all(t is first for t in known):
        return first
    return None


def _same(types: list[Type]) -> Type | str:
    t = unify(types)
    return "needs arguments of one type" if t is None else t


def _round(x, digits=0):
    # SQL rounds half away from zero; Python's round() rounds half to even.
    if isinstance(x, float) and not math.isfinite(x):
        return x  # NaN and infinities round to themselves
    try:
        q = 10.0**digits
        v = math.floor(abs(x) * q + 0.5) / q
    except (OverflowError, ZeroDivisionError):
        return x  # more digits than a double holds: nothing to round
    v = math.copysign(v, x)
    return int(v) if isinstance(x, int) and digits >= 0 else v


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _ln(x):
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else math.nan


def _power(x, y):
    try:
        return float(x) ** float(y)
    except (OverflowError, ZeroDivisionError):
        return math.inf
    except ValueError:
        return math.nan


def _substr_impl(s, start, length=None):
    # SQL positions are 1-based; a negative start counts from the end (as Trino).
    n = len(s)
    if start == 0:
        return ""
    begin = start - 1 if start > 0 else n + start
    if begin < 0 or begin >= n:
        return ""
    if length is None:
        return s[begin:]
    if length < 0:
        return ""
    return s[begin : begin + length]


def _coalesce(*args):
    for a in args:
        if a is not None:
            return a
    return None


def _greatest(*args):
    return max(args)


def _least(*args):
    return min(args)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


BUILTINS: dict[str, ScalarFunction] = {
    f.name: f
    for f in [
        ScalarFunction("ABS", abs, 1, 1, _int_of),
        ScalarFunction("SQRT", _sqrt, 1, 1, _double),
        ScalarFunction("LN", _ln, 1, 1, _double),
        ScalarFunction("EXP", _exp, 1, 1, _double),
        ScalarFunction("POWER", _power, 2, 2, _double),
        ScalarFunction("ROUND", _round, 1, 2, _int_of),
        ScalarFunction("FLOOR", lambda x: math.floor(x) if isinstance(x, int) or math.isfinite(x) else x, 1, 1, _int_of),
        ScalarFunction("CEIL", lambda x: math.ceil(x) if isinstance(x, int) or math.isfinite(x) else x, 1, 1, _int_of),
        ScalarFunction("GREATEST", _greatest, 1, None, _same),
        ScalarFunction("LEAST", _least, 1, None, _same),
        ScalarFunction("COALESCE", _coalesce, 1, None, _same, null_on_null=False),
        ScalarFunction("LOWER", str.lower, 1, 1, _string),
        ScalarFunction("UPPER", str.upper, 1, 1, _string),
        ScalarFunction("LENGTH", len, 1, 1, _length),
        ScalarFunction("SUBSTR", _substr_impl, 2, 3, _substr),
    ]
}
BUILTINS["CEILING"] = BUILTINS["CEIL"]
BUILTINS["SUBSTRING"] = BUILTINS["SUBSTR"]

_TYPE_NAMES = {
    "boolean": Type.BOOLEAN, "bool": Type.BOOLEAN, bool: Type.BOOLEAN,
    "bigint": Type.BIGINT, "int": Type.BIGINT, "integer": Type.BIGINT, int: Type.BIGINT,
    "double": Type.DOUBLE, "float": Type.DOUBLE, float: Type.DOUBLE,
    "varchar": Type.VARCHAR, "string": Type.VARCHAR, "str": Type.VARCHAR, str: Type.VARCHAR,
    "timestamp": Type.TIMESTAMP, "array": Type.ARRAY, list: Type.ARRAY, "any": Type.ANY,
}

_lock = threading.Lock()
_USER: dict[str, ScalarFunction] = {}
_version = 0  # bumped whenever the user registry changes (compiled plans depend on it)


def registry_version() -> int:
    return _version


def register_function(name: str, fn: Callable[..., Any], returns: Any, *, deterministic: bool = True,
                      null_on_null: bool = True) -> None:
    """Make ``fn`` callable from DEFINE and MEASURES as ``name(...)``.

    ``returns`` is the result type: "boolean", "bigint", "double", "varchar", "timestamp",
    "array", "any" or the Python types bool/int/float/str/list. Functions must be
    deterministic and free of side effects: the engine may call them in any order, more than
    once, and on different workers. With ``null_on_null`` (the default) a NULL argument gives
    NULL without calling ``fn``.
    """
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
        _USER[key] = ScalarFunction(key, fn, 0, None, lambda _types, t=rtype: t, null_on_null, True)
        _version += 1


def unregister_function(name: str) -> None:
    global _version
    with _lock:
        _USER.pop(name.upper(), None)
        _version += 1


def lookup(name: str) -> ScalarFunction | None:
    key = name.upper()
    return BUILTINS.get(key) or _USER.get(key)


# Names the analyzer treats specially (navigation, aggregates, pattern functions).
NAVIGATION = frozenset({"PREV", "NEXT", "FIRST", "LAST"})
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", "DELTA", "COLLECT", "ARRAY_AGG"})
RESERVED_CALLS = NAVIGATION | AGGREGATES | {"CLASSIFIER", "MATCH_NUMBER"}
