"""The built-in scalar functions: implementations, their result-type rules, and the table
BUILTINS the analyzer looks names up in. Values arrive as SQL values (sparkcep.values);
NULL handling is the caller's unless a function says otherwise (null_on_null=False)."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.types import NUMERIC, Type, as_decimal, decimal_union, is_decimal
from sparkcep.values import (
    DECIMAL_CONTEXT,
    FunctionError,
    fits_bigint,
    localize,
    mixed_types,
    zone_of,
    zones_aligned,
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
    if any(is_decimal(t) for t in known) and all(t.numeric or is_decimal(t) for t in known):
        if Type.DOUBLE in known:
            return Type.DOUBLE
        return functools.reduce(decimal_union, [as_decimal(t) for t in known])
    first = known[0]
    if all(t == first for t in known):
        return first
    return None


def _same(types: list[Type]) -> Type | str:
    t = unify(types)
    return "needs arguments of one type" if t is None else t


def _array_of(types: list[Type]) -> Type | str:
    """ARRAY[...]: elements of one type (numbers of any kind meet), as Trino types them."""
    return "needs elements of one type" if unify(types) is None else Type.ARRAY


def _abs(x):
    r = abs(x)
    if type(r) is int and not fits_bigint(r):
        raise FunctionError("bigint overflow in abs")  # abs(-2^63), as Trino
    return r


def _round_bigint(x: int, digits: int) -> int:
    """A BIGINT rounded half away from zero to ``digits`` (negative: tens, hundreds, ...),
    exactly as Trino's round(bigint, n): integer arithmetic, never through a double."""
    if digits >= 0:
        return x
    if digits <= -19:
        raise FunctionError("bigint overflow in round")  # 10^19 is past BIGINT, as Trino's factor
    factor = 10**-digits
    q, r = divmod(abs(x), factor)
    v = (q + (2 * r >= factor)) * factor
    v = v if x >= 0 else -v
    if not fits_bigint(v):
        raise FunctionError("bigint overflow in round")
    return v


def _round(x, digits=0):
    # SQL rounds half away from zero; Python's round() rounds half to even.
    if type(x) is int and type(digits) is int:
        return _round_bigint(x, digits)
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
    a, b = zones_aligned(a, b)
    try:
        return a < b
    except TypeError:
        raise mixed_types("compare", a, b) from None


def decimal_abs(x):
    return DECIMAL_CONTEXT.abs(x)  # exact: Python's abs() would round to 28 digits


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
    if b == 0 or math.isinf(a):
        return math.nan  # IEEE's remainder (math.fmod raises for an infinite dividend)
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
        return localize(_date_trunc(unit, ts.replace(tzinfo=None)), zone, prefer=ts.utcoffset())
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
        ScalarFunction("ABS", _abs, 1, 1, _int_of),
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
        ScalarFunction("REPLACE", lambda s, a, b="": s.replace(a, b), 2, 3, _of(Type.VARCHAR, _STR)),  # '' matches between characters (Trino)
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
        ScalarFunction("ARRAY", _array_ctor, 0, None, _array_of, null_on_null=False),
    ]
}
for _field, _get in _FIELDS.items():
    BUILTINS[_field] = ScalarFunction(_field, _get, 1, 1, _time_field)
BUILTINS["CEILING"] = BUILTINS["CEIL"]
BUILTINS["SUBSTRING"] = BUILTINS["SUBSTR"]
