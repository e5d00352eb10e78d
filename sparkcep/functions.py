"""Scalar functions: the built-in ones and those a user registers by name.

A query can only call functions listed here; a name that is not is a QueryError. Nothing in
query text is ever looked up as arbitrary Python.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.errors import SparkCepError
from sparkcep.types import NUMERIC, Type
from sparkcep.values import (
    FunctionError,
    checked_aggregate,
    checked_function,
    checked_index,
    localize,
    zone_of,
)


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
    # "expensive": a call costs long enough (milliseconds) that queries calling it run on the
    # task engine's parallel workers under strategy "auto".
    cost: str = "cheap"


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
        r = float(x) ** float(y)
    except (OverflowError, ZeroDivisionError):
        return math.inf
    except ValueError:
        return math.nan
    # A negative base to a fractional power has no real value: NaN, as Trino (Python gives a complex).
    return math.nan if isinstance(r, complex) else r


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


def _is_nan(v) -> bool:
    return isinstance(v, float) and v != v


def sql_less(a, b) -> bool:
    """a < b in SQL's order, where NaN is greater than every other number (as Trino orders)."""
    if _is_nan(a) or _is_nan(b):
        return _is_nan(b) and not _is_nan(a)
    return a < b


def _greatest(*args):
    best = args[0]
    for v in args[1:]:
        if sql_less(best, v):
            best = v
    return best


def _least(*args):
    best = args[0]
    for v in args[1:]:
        if sql_less(v, best):
            best = v
    return best


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sign(x):
    if isinstance(x, float) and math.isnan(x):
        return x
    s = (x > 0) - (x < 0)
    return float(s) if isinstance(x, float) else s


def _mod_fn(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise FunctionError("division by zero in mod")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if b == 0:
        return math.nan
    return math.fmod(a, b)


def _if(cond, a, b=None):
    return a if cond is True else b


def _nullif(a, b):
    return None if a is not None and b is not None and a == b else a


def _concat(*args):
    if any(a is None for a in args):
        return None
    if args and all(isinstance(a, list) for a in args):
        return [x for a in args for x in a]
    return "".join(args)


def _concat_ws(sep, *args):
    if sep is None:
        return None
    if len(args) == 1 and isinstance(args[0], list):  # concat_ws(sep, array): its elements
        args = tuple(args[0])
    return sep.join(a for a in args if a is not None)


def _concat_ws_type(types: list[Type]) -> Type | str:
    if len(types) == 2 and types[1] is Type.ARRAY:
        return _of(Type.VARCHAR, _STR)(types[:1])
    return _of(Type.VARCHAR, _STR)(types)


def _array_extreme(pick_max: bool):
    """array_max / array_min: NULL for an empty array or one holding a NULL (as Trino); NaN
    orders above every number."""
    def extreme(arr):
        if not arr or any(v is None for v in arr):
            return None
        best = arr[0]
        for v in arr[1:]:
            if (sql_less(best, v) if pick_max else sql_less(v, best)):
                best = v
        return best
    return extreme


def _strpos(s, sub):
    return s.find(sub) + 1


def _date_trunc(unit, ts):
    zone = zone_of(ts) if isinstance(ts, dt.datetime) else None
    if zone is not None:
        # Truncated in the value's zone, then read as wall time there (the day of a zoned
        # timestamp is its day in that zone).
        return localize(_date_trunc(unit, ts.replace(tzinfo=None)), zone)
    unit = unit.lower()
    if isinstance(ts, dt.datetime):
        if unit == "second":
            return ts.replace(microsecond=0)
        if unit == "minute":
            return ts.replace(second=0, microsecond=0)
        if unit == "hour":
            return ts.replace(minute=0, second=0, microsecond=0)
        base = ts.replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        base = ts
    if unit == "day":
        return base
    if unit == "week":
        return base - dt.timedelta(days=base.weekday())
    if unit == "month":
        return base.replace(day=1)
    if unit == "quarter":
        return base.replace(month=(base.month - 1) // 3 * 3 + 1, day=1)
    if unit == "year":
        return base.replace(month=1, day=1)
    raise FunctionError(f"date_trunc: unknown unit {unit!r} (second, minute, hour, day, week, month, quarter, year)")


_FIELDS = {
    "YEAR": lambda t: t.year,
    "QUARTER": lambda t: (t.month - 1) // 3 + 1,
    "MONTH": lambda t: t.month,
    "WEEK": lambda t: t.isocalendar()[1],
    "DAY": lambda t: t.day,
    "DAY_OF_MONTH": lambda t: t.day,
    "DAY_OF_WEEK": lambda t: t.isoweekday(),
    "DOW": lambda t: t.isoweekday(),
    "DAY_OF_YEAR": lambda t: t.timetuple().tm_yday,
    "DOY": lambda t: t.timetuple().tm_yday,
    "HOUR": lambda t: t.hour if isinstance(t, dt.datetime) else 0,
    "MINUTE": lambda t: t.minute if isinstance(t, dt.datetime) else 0,
    "SECOND": lambda t: t.second if isinstance(t, dt.datetime) else 0,
    "MILLISECOND": lambda t: t.microsecond // 1000 if isinstance(t, dt.datetime) else 0,
}
TIME_FIELDS = frozenset(_FIELDS)


def _time_field(types: list[Type]) -> Type | str:
    if types[0] not in (Type.TIMESTAMP, Type.DATE, Type.NULL, Type.ANY):
        return f"needs a timestamp or a date, got {types[0].value}"
    return Type.BIGINT


def _like_regex(pattern: str, escape: str | None) -> re.Pattern:
    if escape is not None and len(escape) != 1:
        raise FunctionError("the LIKE escape must be a single character")
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("%", "_", escape):
                raise FunctionError("in LIKE, the escape character must be followed by %, _ or itself")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


@functools.lru_cache(maxsize=1024)
def like_regex(pattern: str, escape: str | None) -> re.Pattern:
    return _like_regex(pattern, escape)


def like(value, pattern, escape=None):
    return like_regex(pattern, escape).fullmatch(value) is not None


# ---------------------------------------------------------------- arrays (1-based)
def _subscript(arr, i):
    if i < 1 or i > len(arr):
        raise FunctionError(f"array subscript {i} is out of bounds (the array has {len(arr)} elements)")
    return arr[i - 1]


def _element_at(arr, i):
    if i == 0:
        raise FunctionError("element_at: SQL array indices start at 1")
    if abs(i) > len(arr):
        return None
    return arr[i - 1] if i > 0 else arr[i]


def _contains(arr, x):
    if x in arr:
        return True
    return None if any(v is None for v in arr) else False


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _array_join(arr, sep, null_replacement=None):
    if arr is None or sep is None:
        return None
    return sep.join(_text(v) if v is not None else null_replacement for v in arr
                    if v is not None or null_replacement is not None)


def _array_ctor(*items):
    return list(items)


def array_equal(a, b):
    """SQL equality of arrays: FALSE on a difference, NULL when only NULLs leave it open."""
    if len(a) != len(b):
        return False
    unknown = False
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            unknown = True
        elif isinstance(x, list) and isinstance(y, list):
            r = array_equal(x, y)
            if r is False:
                return False
            unknown = unknown or r is None
        elif x != y:
            return False
    return None if unknown else True


# ---------------------------------------------------------------- result types
def _of(rtype: Type, *accepted: tuple[Type, ...]):
    """A result-type rule: argument i must be one of accepted[i] (the last repeats)."""
    def rule(types: list[Type]) -> Type | str:
        for i, t in enumerate(types):
            ok = accepted[min(i, len(accepted) - 1)]
            if t not in ok and t not in (Type.NULL, Type.ANY):
                return f"argument {i + 1} needs {' or '.join(x.value for x in ok)}, got {t.value}"
        return rtype
    return rule


_STR, _INT, _NUM, _ARR = (Type.VARCHAR,), (Type.BIGINT,), NUMERIC, (Type.ARRAY,)
_TIME = (Type.TIMESTAMP, Type.DATE)


def _if_type(types: list[Type]) -> Type | str:
    if types[0] not in (Type.BOOLEAN, Type.NULL, Type.ANY):
        return f"needs a boolean condition, got {types[0].value}"
    t = unify(types[1:])
    return "needs results of one type" if t is None else t


def _nullif_type(types: list[Type]) -> Type | str:
    return types[0] if unify(types) is not None else "needs arguments of one type"


def _concat_type(types: list[Type]) -> Type | str:
    known = [t for t in types if t not in (Type.NULL, Type.ANY)]
    if known and all(t is Type.ARRAY for t in known):
        return Type.ARRAY
    return _of(Type.VARCHAR, _STR)(types)


def _date_trunc_type(types: list[Type]) -> Type | str:
    if types[0] not in (Type.VARCHAR, Type.NULL):
        return f"needs a unit string first, got {types[0].value}"
    if types[1] not in (*_TIME, Type.NULL, Type.ANY):
        return f"needs a timestamp or a date, got {types[1].value}"
    return types[1] if types[1] in _TIME else Type.TIMESTAMP


def _element_type_of_array(types: list[Type]) -> Type | str:
    return _of(Type.ANY, _ARR)(types)


def _element_type(types: list[Type]) -> Type | str:
    return _of(Type.ANY, _ARR, _INT)(types)


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
        ScalarFunction("SIGN", _sign, 1, 1, _int_of),
        ScalarFunction("MOD", _mod_fn, 2, 2, _int_of),
        ScalarFunction("IF", _if, 2, 3, _if_type, null_on_null=False),
        ScalarFunction("NULLIF", _nullif, 2, 2, _nullif_type, null_on_null=False),
        ScalarFunction("CONCAT", _concat, 1, None, _concat_type),
        ScalarFunction("CONCAT_WS", _concat_ws, 1, None, _concat_ws_type, null_on_null=False),
        ScalarFunction("TRIM", str.strip, 1, 1, _of(Type.VARCHAR, _STR)),
        ScalarFunction("LTRIM", str.lstrip, 1, 1, _of(Type.VARCHAR, _STR)),
        ScalarFunction("RTRIM", str.rstrip, 1, 1, _of(Type.VARCHAR, _STR)),
        ScalarFunction("REPLACE", lambda s, a, b="": s.replace(a, b) if a else s, 2, 3, _of(Type.VARCHAR, _STR)),
        ScalarFunction("STRPOS", _strpos, 2, 2, _of(Type.BIGINT, _STR)),
        ScalarFunction("STARTS_WITH", lambda s, p: s.startswith(p), 2, 2, _of(Type.BOOLEAN, _STR)),
        ScalarFunction("DATE_TRUNC", _date_trunc, 2, 2, _date_trunc_type),
        ScalarFunction("CARDINALITY", len, 1, 1, _of(Type.BIGINT, _ARR)),
        ScalarFunction("ELEMENT_AT", _element_at, 2, 2, _element_type),
        ScalarFunction("$SUBSCRIPT", _subscript, 2, 2, _element_type),
        ScalarFunction("CONTAINS", _contains, 2, 2, _of(Type.BOOLEAN, _ARR, (Type.ANY, *NUMERIC, Type.VARCHAR, Type.BOOLEAN, *_TIME))),
        ScalarFunction("ARRAY_MAX", _array_extreme(True), 1, 1, _element_type_of_array),
        ScalarFunction("ARRAY_MIN", _array_extreme(False), 1, 1, _element_type_of_array),
        ScalarFunction("ARRAY_JOIN", _array_join, 2, 3, _of(Type.VARCHAR, _ARR, _STR), null_on_null=False),
        ScalarFunction("ARRAY", _array_ctor, 0, None, lambda _types: Type.ARRAY, null_on_null=False),
    ]
}
for _field, _get in _FIELDS.items():
    BUILTINS[_field] = ScalarFunction(_field, _get, 1, 1, _time_field)
BUILTINS["CEILING"] = BUILTINS["CEIL"]
BUILTINS["SUBSTRING"] = BUILTINS["SUBSTR"]

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


# ---------------------------------------------------------------- CAST and TRY_CAST
CAST_TARGETS = {
    "BIGINT": Type.BIGINT, "INTEGER": Type.BIGINT, "INT": Type.BIGINT, "SMALLINT": Type.BIGINT,
    "TINYINT": Type.BIGINT, "DOUBLE": Type.DOUBLE, "REAL": Type.DOUBLE, "FLOAT": Type.DOUBLE,
    "VARCHAR": Type.VARCHAR, "CHAR": Type.VARCHAR, "BOOLEAN": Type.BOOLEAN, "DATE": Type.DATE,
    "TIMESTAMP": Type.TIMESTAMP,
}
_INT_RANGE = {"BIGINT": 63, "INTEGER": 31, "INT": 31, "SMALLINT": 15, "TINYINT": 7}
# Which source types each target accepts (the others are a type error at analysis).
CASTABLE = {
    Type.BIGINT: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN},
    Type.DOUBLE: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN},
    Type.VARCHAR: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, Type.DATE, Type.TIMESTAMP},
    Type.BOOLEAN: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN},
    Type.DATE: {Type.VARCHAR, Type.DATE, Type.TIMESTAMP},
    Type.TIMESTAMP: {Type.VARCHAR, Type.DATE, Type.TIMESTAMP},
}


def format_double(x: float) -> str:
    """A double as SQL engines print it (Java's style): 1.5, 100.0, 1.0E7, 1.0E-4, NaN."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        text = repr(float(x))
        return text if ("." in text or "e" in text) else text + ".0"
    # The shortest digits that round-trip (repr's), in scientific notation.
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) + exp - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


def to_text(v: Any) -> str:
    """A value as CAST(... AS VARCHAR) writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format_double(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    return str(v)


def _to_int(v, bits: int):
    if isinstance(v, bool):
        r = int(v)
    elif isinstance(v, int):
        r = v
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise FunctionError(f"cannot cast {format_double(v)} to an integer")
        r = int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)  # half away from zero
    else:
        text = v.strip()
        try:
            r = int(text)
        except ValueError:
            raise FunctionError(f"cannot cast {v!r} to an integer") from None
    if not -(2**bits) <= r < 2**bits:
        raise FunctionError(f"{r} is out of range for the integer type")
    return r


def _to_double(v):
    if isinstance(v, (bool, int, float)):
        return float(v)
    text = v.strip()
    special = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}
    if text.lower() in special:
        return special[text.lower()]
    try:
        return float(text)
    except ValueError:
        raise FunctionError(f"cannot cast {v!r} to double") from None


def _to_boolean(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        if isinstance(v, float) and math.isnan(v):
            raise FunctionError("cannot cast NaN to boolean")
        return v != 0
    text = v.strip().lower()
    if text in ("true", "t", "1"):
        return True
    if text in ("false", "f", "0"):
        return False
    raise FunctionError(f"cannot cast {v!r} to boolean")


def _to_date(v):
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    try:
        return dt.date.fromisoformat(v.strip())
    except ValueError:
        raise FunctionError(f"cannot cast {v!r} to date (YYYY-MM-DD)") from None


def _to_timestamp(v):
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    try:
        return dt.datetime.fromisoformat(v.strip())
    except ValueError:
        raise FunctionError(f"cannot cast {v!r} to timestamp (YYYY-MM-DD HH:MM:SS)") from None


def cast_function(target: str, sizes: tuple[int, ...], try_: bool) -> Callable[[Any], Any]:
    """The implementation of CAST(x AS target[(sizes)]) (TRY_CAST: NULL where CAST fails)."""
    t = CAST_TARGETS[target]
    if t is Type.BIGINT:
        bits = _INT_RANGE[target]

        def convert(v):
            return _to_int(v, bits)
    elif t is Type.DOUBLE:
        convert = _to_double
    elif t is Type.BOOLEAN:
        convert = _to_boolean
    elif t is Type.DATE:
        convert = _to_date
    elif t is Type.TIMESTAMP:
        convert = _to_timestamp
    else:
        limit = sizes[0] if sizes else None

        def convert(v):
            text = to_text(v)
            if limit is not None and len(text) > limit:
                if isinstance(v, str):
                    return text[:limit]  # strings are cut to the declared length
                raise FunctionError(f"{text!r} does not fit varchar({limit})")
            return text
    if not try_:
        return convert

    def attempt(v):
        try:
            return convert(v)
        except FunctionError:
            return None
    return attempt
