"""CAST and TRY_CAST: the targets, which source types each accepts, and the conversions
(after Trino: doubles round half away from zero into integers, values print as Java prints
them)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

from sparkcep.types import MAX_DECIMAL_PRECISION, DecimalType, Type
from sparkcep.values import (
    DECIMAL_CONTEXT,
    FunctionError,
    decimal_from_double,
    fit_decimal,
)

CAST_TARGETS = {
    "BIGINT": Type.BIGINT, "INTEGER": Type.BIGINT, "INT": Type.BIGINT, "SMALLINT": Type.BIGINT,
    "TINYINT": Type.BIGINT, "DOUBLE": Type.DOUBLE, "REAL": Type.DOUBLE, "FLOAT": Type.DOUBLE,
    "VARCHAR": Type.VARCHAR, "CHAR": Type.VARCHAR, "BOOLEAN": Type.BOOLEAN, "DATE": Type.DATE,
    "TIMESTAMP": Type.TIMESTAMP,
}
# DECIMAL(p, s) and its synonyms: the type depends on the sizes (decimal_target).
DECIMAL_NAMES = ("DECIMAL", "NUMERIC", "DEC")
_INT_RANGE = {"BIGINT": 63, "INTEGER": 31, "INT": 31, "SMALLINT": 15, "TINYINT": 7}
# Which source types each target accepts (the others are a type error at analysis).
CASTABLE = {
    Type.BIGINT: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, "DECIMAL"},
    Type.DOUBLE: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, "DECIMAL"},
    "DECIMAL": {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, "DECIMAL"},
    Type.VARCHAR: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, Type.DATE, Type.TIMESTAMP, "DECIMAL"},
    Type.BOOLEAN: {Type.BIGINT, Type.DOUBLE, Type.VARCHAR, Type.BOOLEAN, "DECIMAL"},
    Type.DATE: {Type.VARCHAR, Type.DATE, Type.TIMESTAMP},
    Type.TIMESTAMP: {Type.VARCHAR, Type.DATE, Type.TIMESTAMP},
}


def castable(source, target) -> bool:
    """Whether CAST accepts ``source`` for ``target`` (decimal types by kind, not by size)."""
    def kind(t):
        return "DECIMAL" if isinstance(t, DecimalType) else t
    return kind(source) in CASTABLE[kind(target)]


def decimal_target(sizes: tuple[int, ...]) -> DecimalType | str:
    """DECIMAL, DECIMAL(p) or DECIMAL(p, s) as a type (Trino: DECIMAL alone is DECIMAL(38, 0)),
    or what is wrong with the sizes."""
    if len(sizes) > 2:
        return "DECIMAL takes a precision and a scale: DECIMAL(p, s)"
    precision = sizes[0] if sizes else MAX_DECIMAL_PRECISION
    scale = sizes[1] if len(sizes) > 1 else 0
    if not 1 <= precision <= MAX_DECIMAL_PRECISION:
        return f"DECIMAL precision must be between 1 and {MAX_DECIMAL_PRECISION}, got {precision}"
    if not 0 <= scale <= precision:
        return f"DECIMAL scale must be between 0 and the precision ({precision}), got {scale}"
    return DecimalType(precision, scale)


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
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # 0.00, never 0E-2
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
    elif isinstance(v, decimal.Decimal):
        r = int(DECIMAL_CONTEXT.quantize(v, decimal.Decimal(1)))  # half away from zero
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
    if isinstance(v, (bool, int, float, decimal.Decimal)):
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
    if isinstance(v, (int, float, decimal.Decimal)):
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


def _decimal_converter(t: DecimalType) -> Callable[[Any], Any]:
    def convert(v):
        if isinstance(v, bool):
            d = decimal.Decimal(int(v))
        elif isinstance(v, (int, decimal.Decimal)):
            d = v
        elif isinstance(v, float):
            d = decimal_from_double(v)
        else:
            try:
                d = decimal.Decimal(v.strip())
            except decimal.InvalidOperation:
                raise FunctionError(f"cannot cast {v!r} to {t.value}") from None
            if not d.is_finite():
                raise FunctionError(f"cannot cast {v!r} to {t.value}")
        try:
            return fit_decimal(d, t, "value")
        except FunctionError:
            raise FunctionError(f"cannot cast {to_text(v)} to {t.value}: too many digits") from None
    return convert


def cast_function(target: str, sizes: tuple[int, ...], try_: bool) -> Callable[[Any], Any]:
    """The implementation of CAST(x AS target[(sizes)]) (TRY_CAST: NULL where CAST fails)."""
    t = decimal_target(sizes) if target in DECIMAL_NAMES else CAST_TARGETS[target]
    if isinstance(t, DecimalType):
        convert = _decimal_converter(t)
    elif t is Type.BIGINT:
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
