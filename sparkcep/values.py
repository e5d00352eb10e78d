"""The value boundary: how values cross between user data, user functions and the engine.

Every evaluator (the row closures, the vectorized masks, the segment evaluator, the compiled
kernel's inputs) reads columns and function results through this module, so one rule holds
everywhere:

- columns in: dictionaries decoded, nanoseconds read at microsecond precision, unsigned
  integers range-checked into BIGINT (a value above 2^63 - 1 is a DataError naming the
  column and the row, never a silent wrap), the null type read as NULLs of any type;
- zoned timestamps are instants: arithmetic and comparison act on the instant (a DST change
  is not an hour of wall time lost or gained), while fields, ``date_trunc`` and output are in
  the column's zone;
- results of user functions: numpy scalars and arrays become SQL values, checked against the
  declared ``returns`` type (a mismatch is a DataError naming the function and the row);
- BIGINT arithmetic outside 64 bits is an error on the row, scalar or vectorized alike;
- pandas out: nullable and extension dtypes of the input survive the round trip.
"""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.errors import DataError, SparkCepError
from sparkcep.types import DecimalType, Type

BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
# Integers up to this magnitude are exact in a double (float64): past it, sums, averages and
# timestamps in microseconds would round.
EXACT_FLOAT = 2**53


class FunctionError(DataError):
    """A function refused a value, or returned one it may not (a bad cast, an index out of
    bounds, a result of the wrong type): evaluators add the row where they know it."""


def mixed_types(what: str, a: Any, b: Any) -> FunctionError:
    """The error of an operation on two values of types that do not meet: only a function
    declared ``returns="any"`` can give them (typed values meet at compile time)."""
    return FunctionError(f"cannot {what} values of types {type(a).__name__} and {type(b).__name__} (the values "
                         "of a function declared returns='any' must have one type where they meet)")


# ---------------------------------------------------------------- BIGINT range
# ---- SQL's three-valued logic, for one row and for a column ------------------------------
# Every evaluator (the Python expressions, the vectorized masks, the segment evaluator)
# decides AND, OR, BETWEEN and IN here: for one row with None as NULL, for a column as
# (true, known) bool arrays.


def sql_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def sql_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def sql_between(ge: bool | None, le: bool | None, negated: bool) -> bool | None:
    """x [NOT] BETWEEN lo AND hi from x >= lo and x <= hi (None where a side is NULL)."""
    r = sql_and(ge, le)
    return r if not negated or r is None else not r


def sql_in(x_known: bool, equal: Iterable[bool | None], negated: bool) -> bool | None:
    """x [NOT] IN (items) from whether x is known and, per item, whether it equals x (None
    where the item is NULL): true if one does, else NULL if x or an item is NULL, else
    false. ``equal`` is read lazily, up to the first item equal to x."""
    if not x_known:
        return None
    saw_null = False
    for e in equal:
        if e is True:
            return not negated
        saw_null = saw_null or e is None
    return None if saw_null else negated


def between_mask(ge: np.ndarray, ge_known: np.ndarray, le: np.ndarray, le_known: np.ndarray,
                 negated: bool) -> tuple[np.ndarray, np.ndarray]:
    """sql_between over columns: (true, known)."""
    t = ge & ge_known & le & le_known
    f = (ge_known & ~ge) | (le_known & ~le)
    if negated:
        t, f = f, t
    return t, t | f


def in_mask(n: int, x_known: np.ndarray, equal: list[tuple[np.ndarray, np.ndarray]], negated: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """sql_in over ``n`` rows (a literal's arrays may be scalars), ``equal`` a (equal, known)
    pair per item: (true, known)."""
    t = np.zeros(n, dtype=bool)
    saw_null = np.zeros(n, dtype=bool)
    for eq, known in equal:
        t |= eq & known & x_known
        saw_null |= ~known
    unknown = ~x_known | (~t & saw_null)
    f = ~t & ~unknown
    if negated:
        t, f = f, t
    return t, t | f


def fits_bigint(v: int) -> bool:
    return BIGINT_MIN <= v <= BIGINT_MAX


def checked_int_op(op: str, a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``a op b`` on int64 arrays (op one of + - *), raising FunctionError where a valid
    entry leaves 64 bits, as the scalar evaluator does."""
    with np.errstate(over="ignore"):
        if op == "+":
            r = a + b
            over = ((a ^ r) & (b ^ r)) < 0
        elif op == "-":
            r = a - b
            over = ((a ^ b) & (a ^ r)) < 0
        else:
            r = a * b
            # exact check where the float product leaves the safe range
            big = np.abs(a.astype(np.float64) * b.astype(np.float64)) >= 2.0**62
            over = np.zeros(len(r), dtype=bool)
            for k in np.flatnonzero(big & valid):
                over[k] = not fits_bigint(int(a[k]) * int(b[k]))
    if np.any(over & valid):
        what = {"+": "addition", "-": "subtraction", "*": "multiplication"}[op]
        raise FunctionError(f"bigint overflow in {what}")
    return r


def checked_int_negate(a: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``-a`` on an int64 array, raising FunctionError where a valid entry is -2^63 (its
    negation is 2^63, outside 64 bits), as the scalar evaluator does."""
    if np.any((a == BIGINT_MIN) & valid):
        raise FunctionError("bigint overflow in negation")
    with np.errstate(over="ignore"):
        return -a


def checked_int_div(a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """BIGINT ``a / b`` on int64 arrays, truncated toward zero (numpy's // floors), raising
    FunctionError where a valid entry is -2^63 / -1 (2^63, outside 64 bits). A zero divisor
    is the caller's to refuse; it gives 0 here."""
    a, b = np.broadcast_arrays(a, b)
    over = (a == BIGINT_MIN) & (b == -1)
    if np.any(over & valid):
        raise FunctionError("bigint overflow in division")
    d = np.where((b == 0) | over, 1, b)
    q = a // d
    q = q + (((a - q * d) != 0) & ((a < 0) != (d < 0)))  # floor to truncation where inexact
    return np.asarray(q)


def max_magnitude(a: np.ndarray) -> int:
    """The largest |x| of an integer array as a Python int (np.abs wraps -2^63 to itself,
    a negative number that would pass for small)."""
    if len(a) == 0:
        return 0
    return max(int(a.max()), -int(a.min()))


# ---------------------------------------------------------------- DECIMAL(p, s)
# Decimal values are Python Decimals at their type's scale. Every operation on them goes
# through this context, never Python's thread-wide one (28 digits, which would round a
# DECIMAL(38) silently): wide enough that + - * of two 38-digit values is exact.
DECIMAL_CONTEXT = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_UP, Emax=999_999, Emin=-999_999,
                                  traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow])


# The context's exact operations (+ - * are exact at 100 digits; / is exact where it ends).
_EXACT = {"+": DECIMAL_CONTEXT.add, "-": DECIMAL_CONTEXT.subtract, "*": DECIMAL_CONTEXT.multiply,
          "/": DECIMAL_CONTEXT.divide, "%": DECIMAL_CONTEXT.remainder}


@functools.cache
def _decimal_bounds(precision: int, scale: int) -> tuple[decimal.Decimal, decimal.Decimal]:
    """(quantum, limit): values of DECIMAL(p, s) are multiples of 10^-s below 10^(p-s)."""
    return decimal.Decimal(1).scaleb(-scale), decimal.Decimal(10) ** (precision - scale)


def fit_decimal(v: decimal.Decimal | int, t: DecimalType, what: str = "value") -> decimal.Decimal:
    """``v`` rounded half away from zero to ``t``'s scale; a FunctionError if it then has more
    digits than ``t``'s precision (Trino's "decimal overflow")."""
    quantum, limit = _decimal_bounds(t.precision, t.scale)
    d = decimal.Decimal(v)
    r = None
    if d.is_finite() and d.adjusted() < t.precision - t.scale + 1:  # else quantize would trap
        r = DECIMAL_CONTEXT.quantize(d, quantum)
    if r is None or DECIMAL_CONTEXT.abs(r) >= limit:
        raise FunctionError(f"decimal overflow: {what} {format(d, 'f') if d.adjusted() < 60 else d} "
                            f"does not fit {t.value}")
    return r


def round_fraction(q: fractions.Fraction, t: DecimalType, what: str) -> decimal.Decimal:
    """An exact quotient as DECIMAL ``t``: rounded half away from zero at ``t``'s scale."""
    scaled = q * 10**t.scale
    units = (abs(scaled.numerator) * 2 + scaled.denominator) // (2 * scaled.denominator)
    return fit_decimal(decimal.Decimal(units if scaled >= 0 else -units).scaleb(-t.scale, DECIMAL_CONTEXT), t, what)


def decimal_op(op: str, t: DecimalType) -> Callable[[Any, Any], decimal.Decimal]:
    """``a op b`` (op one of + - * / %) on decimals and BIGINTs, with result type ``t``: exact,
    then rounded half away from zero to ``t``'s scale (only / and % can need it)."""
    what = {"+": "sum", "-": "difference", "*": "product", "/": "quotient", "%": "remainder"}[op]
    exact = _EXACT[op]
    if op in ("+", "-", "*"):
        def arith(a, b):
            return fit_decimal(exact(a, b), t, what)
        return arith

    def divide(a, b):
        if b == 0:
            raise FunctionError("division by zero")
        if op == "%":
            return fit_decimal(exact(a, b), t, what)  # the sign of the dividend, as SQL
        return round_fraction(fractions.Fraction(a) / fractions.Fraction(b), t, what)
    return divide


def decimal_negate(a: decimal.Decimal) -> decimal.Decimal:
    return DECIMAL_CONTEXT.minus(a)


def any_decimal_op(op: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn`` for operands whose type is known only at run time (a function returning "any",
    an element of an array of mixed origin): a Decimal meets a float as a float, and
    Decimals otherwise compute in DECIMAL_CONTEXT, exactly (never in Python's 28 digits)."""
    exact = _EXACT.get(op)

    def apply(a, b):
        if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
            if isinstance(a, float) or isinstance(b, float):
                return fn(float(a), float(b))
            if exact is not None and not isinstance(a, bool) and not isinstance(b, bool):
                if op in ("/", "%") and b == 0:
                    raise FunctionError("division by zero")
                return exact(a, b)
        return fn(a, b)
    return apply


def decimal_sum(t: DecimalType) -> Callable[[Any, Any], decimal.Decimal]:
    """SUM's fold over DECIMAL values (``t`` the result type, DECIMAL(38, s))."""
    def fold(s, v):
        return v if s is None else fit_decimal(DECIMAL_CONTEXT.add(s, v), t, "sum")
    return fold


def decimal_average(total: decimal.Decimal | int, count: int, t: DecimalType) -> decimal.Decimal:
    """AVG of DECIMAL values: the exact mean rounded half away from zero to the input scale."""
    return round_fraction(fractions.Fraction(total) / count, t, "average")


def decimal_from_double(x: float) -> decimal.Decimal:
    """A double as the decimal it prints as (its shortest round-trip digits, as Java's
    BigDecimal.valueOf): CAST(0.1 AS DECIMAL(3, 2)) is 0.10, not 0.1000000000000000055."""
    if not math.isfinite(x):
        raise FunctionError(f"cannot cast {x} to decimal")
    return decimal.Decimal(repr(float(x)))


# ---------------------------------------------------------------- zoned instants
class ZoneAt(dt.tzinfo):
    """A time zone at one of its UTC offsets. Values of a zoned column carry one of these per
    (zone, offset) pair, the same object for the same pair: Python compares and subtracts
    datetimes that share a tzinfo object by wall time, which is the instant only while the
    offset is the same. Different offsets mean different objects, compared as instants."""

    __slots__ = ("zone", "offset")

    def __init__(self, zone: dt.tzinfo, offset: dt.timedelta):
        self.zone = zone
        self.offset = offset

    def utcoffset(self, d):
        return self.offset

    def dst(self, d):
        return None

    def tzname(self, d):
        # The name Arrow reads the zone by (pyarrow asks for it when it converts values).
        try:
            return pa.lib.tzinfo_to_string(self.zone)
        except (pa.ArrowException, TypeError, ValueError):
            return str(getattr(self.zone, "key", self.zone))

    def fromutc(self, d):
        return (d.replace(tzinfo=None) + self.offset).replace(tzinfo=self)

    def __reduce__(self):  # the same canonical object in another process
        return (zone_at, (self.zone, self.offset))

    def __repr__(self) -> str:
        return f"ZoneAt({self.tzname(None)}, {self.offset})"


_ZONES: dict[tuple[Any, dt.timedelta], ZoneAt] = {}


def zone_at(zone: dt.tzinfo, offset: dt.timedelta) -> ZoneAt:
    key: tuple = (zone, offset)
    try:
        got = _ZONES.get(key)
    except TypeError:  # a zone that cannot be hashed (dateutil's): by identity, which the entry keeps alive
        key = (id(zone), offset)
        got = _ZONES.get(key)
    if got is None:
        got = _ZONES[key] = ZoneAt(zone, offset)
    return got


def zone_of(d: dt.datetime) -> dt.tzinfo | None:
    tz = d.tzinfo
    return tz.zone if isinstance(tz, ZoneAt) else tz


def zoned(d: dt.datetime) -> dt.datetime:
    """An aware datetime as the engine holds it: its zone at its offset (see ZoneAt)."""
    tz = d.tzinfo
    if tz is None:
        return d
    if isinstance(tz, ZoneAt):
        return d
    return d.replace(tzinfo=zone_at(tz, d.utcoffset()), fold=0)


def in_zone(instant: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """The aware ``instant`` shown in ``zone``."""
    return zoned(instant.astimezone(zone))


def zones_aligned(a: Any, b: Any) -> tuple[Any, Any]:
    """Two values to compare: a naive timestamp beside a zoned one is taken as wall time in
    the other's zone (a TIMESTAMP literal against a zoned column, as Spark hands every
    timestamp over); other values as they are. Comparisons, GREATEST and LEAST use it."""
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and (a.tzinfo is None) != (b.tzinfo is None):
        if a.tzinfo is None:
            return localize(a, b.tzinfo), b
        return a, localize(b, a.tzinfo)
    return a, b


def localize(naive: dt.datetime, tz: dt.tzinfo, prefer: dt.timedelta | None = None) -> dt.datetime:
    """A naive timestamp read as wall time in the zone of ``tz`` (a TIMESTAMP literal next
    to a zoned column; a truncated wall time). A wall time the zone shows twice (the hour a
    DST change repeats) is its first instant, or the one at offset ``prefer`` when that is
    one of the two (date_trunc keeps the offset of the value it truncates, as Trino does)."""
    zone = tz.zone if isinstance(tz, ZoneAt) else tz
    localize_fn = getattr(zone, "localize", None)  # pytz zones need localize()
    if localize_fn is not None:
        return zoned(localize_fn(naive))
    first = naive.replace(tzinfo=zone, fold=0)
    if prefer is not None and first.utcoffset() != prefer:
        second = naive.replace(tzinfo=zone, fold=1)
        if second.utcoffset() == prefer:
            return zoned(second)
    return zoned(first)


def shift(ts: dt.datetime, delta: dt.timedelta) -> dt.datetime:
    """``ts + delta`` on the instant (as Trino adds a day-to-second interval), shown in
    ``ts``'s zone."""
    r = ts + delta
    zone = zone_of(r) if r.tzinfo is not None else None
    return r if zone is None else in_zone(r, zone)


def arrow_zone(tz: str) -> dt.tzinfo:
    """The tzinfo pyarrow gives values of a timestamp column in Arrow zone ``tz``."""
    return pa.scalar(0, pa.timestamp("us", tz)).as_py().tzinfo


def timestamps_out(values: list[Any], t: pa.DataType) -> tuple[list[Any], pa.DataType]:
    """A measure's timestamps and the Arrow type they go out as, ``t`` as typed. In a zoned
    measure a naive value (a function's) is wall time in the measure's zone, as when the two
    compare. A measure typed naive whose values carry a zone (a function's, where the query
    reads no zoned column) takes the zone of the first, keeping every instant; a naive value
    beside them is read as UTC (the zone of the first in its own chunk of rows would make the
    answer depend on how the rows were cut)."""
    if t.tz is None:
        first = next((v for v in values if isinstance(v, dt.datetime) and v.tzinfo is not None), None)
        if first is None:
            return values, t
        try:
            t = pa.timestamp(t.unit, pa.array([first]).type.tz)
        except (pa.ArrowException, ValueError, KeyError):  # a zone Arrow cannot name: its instants in UTC
            t = pa.timestamp(t.unit, "UTC")
        return [v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v
                for v in values], t
    zone = arrow_zone(t.tz)
    return [localize(v, zone) if isinstance(v, dt.datetime) and v.tzinfo is None else v for v in values], t


# ---------------------------------------------------------------- columns in
def decoded(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A column with dictionaries decoded and half floats as floats (exactly: Arrow's
    kernels, its sort among them, mostly lack them); its values otherwise untouched."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_float16(col.type):
        col = col.cast(pa.float32())
    return col


def as_read(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A column as expressions read it: decoded (above), nanoseconds at microsecond precision
    (floored, as a clock reads: one nanosecond before 1970 is the last microsecond of 1969,
    where Arrow's cast cuts toward zero)."""
    col = decoded(col)
    t = col.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        col = _floor_micros(col).cast(pa.timestamp("us", t.tz))
    if pa.types.is_duration(t) and t.unit == "ns":
        col = _floor_micros(col).cast(pa.duration("us"))
    return col


def _floor_micros(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Nanosecond values (timestamps or durations) as whole microseconds, rounded down."""
    ns = col.cast(pa.int64())
    q = pc.divide(ns, 1000)  # toward zero
    return pc.if_else(pc.less(pc.subtract(ns, pc.multiply(q, 1000)), 0), pc.subtract(q, 1), q)


def python_values(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Column values as Python objects (NULL → None) for the row evaluator; zoned
    timestamps as instants in their zone (see ZoneAt)."""
    col = as_read(col)
    values = col.to_pylist()
    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        values = [None if v is None else zoned(v) for v in values]
    return values


def timestamp_micros(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray | None:
    """A timestamp column as int64 microseconds since the epoch (instants for a zoned column,
    wall time for a naive one), or None when a value is finer than a microsecond."""
    try:
        return col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
    except pa.ArrowInvalid:
        return None


def numpy_values(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """(data, valid) as numpy for numeric and boolean columns (integers as int64, floats as
    float64), else None. NULL entries hold 0 / False."""
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return None
    if col.null_count == 0:
        valid = np.ones(len(col), dtype=bool)
        data = col.to_numpy(zero_copy_only=False)  # (booleans are bits: always a copy)
    else:
        valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
        fill = False if pa.types.is_boolean(t) else 0
        data = pc.fill_null(col, fill).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(t):
        data = data.astype(np.int64, copy=False)  # unsigned columns were admitted: they fit
    elif pa.types.is_floating(t):
        data = data.astype(np.float64, copy=False)
    return data, valid


def admit(table: pa.Table, used) -> pa.Table:
    """The table with the columns a query reads (indexes ``used``) made readable: unsigned
    integers become BIGINT after a range check (a DataError names the column and the first
    row above 2^63 - 1). Row numbers are positions in ``table``."""
    out = table
    for i in sorted(used):
        col = table.column(i)
        t = col.type
        value_type = t.value_type if pa.types.is_dictionary(t) else t
        if not pa.types.is_unsigned_integer(value_type):
            continue
        if pa.types.is_dictionary(t):
            col = col.cast(value_type)
        if value_type == pa.uint64() and len(col):
            big = pc.greater(col, pa.scalar(BIGINT_MAX, pa.uint64()))
            bad = pc.index(big, True).as_py()
            if bad is not None and bad >= 0:
                raise DataError(f"the value {col[bad].as_py()} is above BIGINT's largest value (2^63 - 1)",
                                column=table.column_names[i], row=bad)
        out = out.set_column(i, table.schema.field(i).name, col.cast(pa.int64()))
    return out


# ---------------------------------------------------------------- results of user functions
def _sql(v: Any) -> Any:
    """numpy and pandas values as plain Python ones (NULL-likes as None)."""
    if isinstance(v, np.generic):
        if isinstance(v, np.datetime64):
            if np.isnat(v):
                return None
            return v.astype("datetime64[us]").item()
        if isinstance(v, np.timedelta64):
            return None if np.isnat(v) else v.astype("timedelta64[us]").item()
        return v.item()
    if isinstance(v, np.ndarray):
        return [_sql(x) for x in v.tolist()] if v.dtype == object else v.tolist()
    if isinstance(v, (list, tuple)):
        return [_sql(x) for x in v]
    mod = type(v).__module__
    if mod.startswith("pandas"):
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
        if isinstance(v, pd.Timestamp):
            return v.to_pydatetime()
        if isinstance(v, pd.Timedelta):
            return v.to_pytimedelta()
    return v


def _describe(v: Any) -> str:
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(v).__name__})"


def _any_value(v: Any, name: str) -> Any:
    """An untyped function's result. Any object may pass (one function's result may be
    another's argument, a dict say); what is sure to fail later, deep inside, fails here
    naming the function: a decimal NaN (decimal arithmetic traps on it) and pandas objects
    (their truth and comparisons are element-wise)."""
    if isinstance(v, decimal.Decimal) and not v.is_finite():
        raise FunctionError(f"function {name} returned {v!r}: a DECIMAL has no NaN or infinity (return a float)")
    if type(v).__module__.startswith("pandas") and hasattr(v, "shape"):
        raise FunctionError(f"function {name} returned {_describe(v)}, whose comparisons are element-wise: "
                            "return a value, or a list (.tolist()) for an array")
    if isinstance(v, list):
        return [_any_value(x, name) for x in v]
    return zoned(v) if isinstance(v, dt.datetime) else v


def function_result(v: Any, rtype: Type, name: str) -> Any:
    """A user function's result as a SQL value of ``rtype`` (FunctionError on a mismatch)."""
    v = _sql(v)
    if rtype is Type.ANY:
        return _any_value(v, name)
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v) and rtype is not Type.DOUBLE:
        return None  # NaN is pandas' missing value: NULL where the type has no NaN
    ok = False
    if rtype is Type.BOOLEAN:
        ok = isinstance(v, bool)
    elif rtype is Type.BIGINT:
        ok = isinstance(v, int) and not isinstance(v, bool)
        if ok and not fits_bigint(v):
            raise FunctionError(f"function {name} returned {v}, outside BIGINT's range")
    elif rtype is Type.DOUBLE:
        ok = isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)
        v = float(v) if ok else v
    elif rtype is Type.VARCHAR:
        ok = isinstance(v, str)
    elif rtype is Type.TIMESTAMP:
        ok = isinstance(v, dt.datetime)
        v = zoned(v) if ok else v
    elif rtype is Type.DATE:
        ok = isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    elif rtype is Type.INTERVAL:
        ok = isinstance(v, dt.timedelta)
    elif rtype is Type.ARRAY:
        ok = isinstance(v, list)
    elif rtype is Type.BINARY:
        ok = isinstance(v, (bytes, bytearray, memoryview))
    if not ok:
        raise FunctionError(f"function {name} is declared to return {rtype.value} but returned {_describe(v)}")
    return v


def checked_function(fn: Callable[..., Any], name: str, rtype: Type) -> Callable[..., Any]:
    """``fn`` whose results pass through function_result."""
    def call(*args):
        return function_result(fn(*args), rtype, name)
    call.__wrapped__ = fn
    return call


def aggregate_result(v: Any, name: str) -> float | None:
    """A registered aggregate's result: a float, or None for NULL (None or NaN)."""
    v = _sql(v)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FunctionError(f"aggregate {name} is to return a number but returned {_describe(v)}")
    v = float(v)
    return None if math.isnan(v) else v


def checked_aggregate(fn: Callable[..., Any], name: str) -> Callable[..., float | None]:
    """A registered aggregate's function: its result through aggregate_result, anything it
    raises a FunctionError naming it."""
    def call(*arrays):
        try:
            out = fn(*arrays)
        except SparkCepError:
            raise
        except (Exception, SystemExit) as exc:  # a user aggregate may raise anything: name it
            raise FunctionError(f"aggregate {name} failed: {type(exc).__name__}: {exc}") from exc
        return aggregate_result(out, name)
    call.__wrapped__ = fn
    return call


class CheckedIndex:
    """A registered aggregate's index() result whose lookups pass the same checks."""

    def __init__(self, index: Any, name: str):
        self._lookup = checked_aggregate(index.lookup, name)

    def lookup(self, start: int, end: int) -> float | None:
        return self._lookup(start, end)


def checked_index(build: Callable[..., Any], name: str) -> Callable[..., CheckedIndex]:
    def call(*arrays):
        try:
            idx = build(*arrays)
        except SparkCepError:
            raise
        except Exception as exc:
            raise FunctionError(f"the index of aggregate {name} failed: {type(exc).__name__}: {exc}") from exc
        if not callable(getattr(idx, "lookup", None)):
            raise FunctionError(f"the index of aggregate {name} has no lookup(start, end) method")
        return CheckedIndex(idx, name)
    return call


# ---------------------------------------------------------------- pandas out
_NULLABLE = {
    pa.int8(): "Int8", pa.int16(): "Int16", pa.int32(): "Int32", pa.int64(): "Int64",
    pa.uint8(): "UInt8", pa.uint16(): "UInt16", pa.uint32(): "UInt32", pa.uint64(): "UInt64",
    pa.bool_(): "boolean", pa.float32(): "Float32", pa.float64(): "Float64",
}


def _from_arrays(table: pa.Table) -> bool:
    """Whether _plain_pandas builds ``table`` from its arrays: numbers and booleans without
    NULLs (what most MEASURES give), one chunk a column (more would be copied twice), and
    distinct names. pyarrow's schema metadata is not read: our results carry none."""
    names = table.column_names
    return bool(names) and len(set(names)) == len(names) and all(
        c.null_count == 0 and c.num_chunks <= 1
        and (pa.types.is_integer(c.type) or pa.types.is_floating(c.type) or pa.types.is_boolean(c.type))
        for c in table.columns)


def _plain_pandas(table: pa.Table):
    """``table.to_pandas()``, built from the arrays where _from_arrays says so: on a small
    result that costs a quarter of pyarrow's conversion (whose metadata and block manager
    are a fixed ~0.15 ms a call)."""
    import pandas as pd

    if _from_arrays(table):
        # (a dict keeps the columns' order; columns= would cost pyarrow's time again)
        return pd.DataFrame({name: col.to_numpy() for name, col in zip(table.column_names, table.columns,
                                                                         strict=True)})
    names = table.column_names
    inexact = [i for i, c in enumerate(table.columns) if _inexact_in_numpy(c)]
    if not inexact or len(set(names)) != len(names):
        return table.to_pandas()
    # pandas' own conversion makes an integer column with NULLs float64 (and list cells of
    # integers with NULLs float arrays): values past 2**53 would change silently. Those
    # columns are converted apart (wide results, as many rules' union, hold many).
    exact = table.drop_columns([names[i] for i in inexact]).to_pandas()
    apart = {names[i]: _exact_series(table.column(i), pd) for i in inexact}
    return pd.DataFrame({n: apart[n] if n in apart else exact[n] for n in names}, copy=False)


def _inexact_in_numpy(col) -> bool:
    """Whether pandas' numpy conversion of ``col`` would turn integers into floats."""
    t = col.type
    if pa.types.is_integer(t):
        return col.null_count > 0
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.types.is_integer(t.value_type) and any(c.values.null_count for c in col.chunks)
    return False


def _exact_series(col, pd):
    """``col`` as an exact pandas column: nullable integers, or Python lists of integers
    with None."""
    if pa.types.is_integer(col.type):
        return col.to_pandas(types_mapper=lambda t: pd.api.types.pandas_dtype(_NULLABLE[t]))
    return pd.Series(col.to_pylist(), dtype=object)


def to_pandas(table: pa.Table, source: Any = None, held: frozenset[str] = frozenset()):
    """The result as pandas. Where ``source`` (the input DataFrame) used pandas' nullable or
    extension dtypes, they are kept: an output column copied from an input column gets that
    column's dtype back, and the other columns use the nullable dtypes (an integer with
    NULLs stays an exact Int64, not a float64). ``held``: columns the query did not read,
    left in ``source`` (their values in ``table`` are its row positions): taken from it as
    they are (any object, any dtype)."""
    frame = _to_pandas(table, source)
    for name in held & set(table.column_names):
        col = table.column(name)
        at = col.fill_null(0).to_numpy(zero_copy_only=False) if col.null_count else col.to_numpy(zero_copy_only=False)
        values = source[name].iloc[at].reset_index(drop=True)
        if col.null_count:  # rows of another rule (match_rules), which has no such column
            values = values.where(col.is_valid().to_numpy(zero_copy_only=False))
        frame[name] = values
    return frame


def _to_pandas(table: pa.Table, source: Any = None):
    import pandas as pd

    dtypes = dict(source.dtypes.items()) if isinstance(source, pd.DataFrame) else {}
    extension = {name for name, d in dtypes.items() if not isinstance(d, np.dtype)}
    if not extension - {n for n, d in dtypes.items() if isinstance(d, (pd.CategoricalDtype, pd.DatetimeTZDtype))}:
        return _plain_pandas(table)
    columns = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        want = dtypes.get(name)
        if want is not None and name in extension:
            try:
                columns[name] = col.to_pandas(types_mapper=lambda _t, w=want: w if not isinstance(
                    w, (pd.CategoricalDtype, pd.DatetimeTZDtype)) else None)
                if isinstance(want, pd.CategoricalDtype):
                    columns[name] = columns[name].astype(want)
                continue
            except (TypeError, ValueError, pa.ArrowException):
                pass
        if _inexact_in_numpy(col):
            columns[name] = _exact_series(col, pd)
            continue
        if want is not None and isinstance(want, np.dtype):
            columns[name] = col.to_pandas()
            continue
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            columns[name] = col.to_pandas(types_mapper=lambda _t: pd.StringDtype("pyarrow"))
        elif t in _NULLABLE:
            columns[name] = col.to_pandas(types_mapper=lambda _t, k=_NULLABLE[t]: pd.api.types.pandas_dtype(k))
        else:
            columns[name] = col.to_pandas()
    return pd.DataFrame({k: v.reset_index(drop=True) for k, v in columns.items()}, columns=table.column_names)
