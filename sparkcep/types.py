"""SQL types of values (ground floor: every layer may import this)."""

from __future__ import annotations

import enum


class Type(enum.Enum):
    BOOLEAN = "boolean"
    BIGINT = "bigint"
    DOUBLE = "double"
    VARCHAR = "varchar"
    TIMESTAMP = "timestamp"
    DATE = "date"
    INTERVAL = "interval"
    ARRAY = "array"
    BINARY = "varbinary"  # bytes: payloads such as images, passed to functions, compared
    NULL = "null"  # the type of the NULL literal: fits anywhere
    ANY = "any"  # a registered function's untyped result

    @property
    def numeric(self) -> bool:
        return self in (Type.BIGINT, Type.DOUBLE)


NUMERIC = (Type.BIGINT, Type.DOUBLE)


MAX_DECIMAL_PRECISION = 38  # as Trino and Spark: DECIMAL(p, s) has 1 <= p <= 38, 0 <= s <= p


class DecimalType:
    """DECIMAL(precision, scale): an exact number with ``scale`` digits after the point and at
    most ``precision`` digits in all. The one parameterized type, so it is not a member of
    Type: compare with ``is_decimal(t)``, never ``is``. ``numeric`` is False on purpose: the
    numpy paths (vectorized masks, the compiled kernel, segment series) read BIGINT and DOUBLE
    only, and a decimal must never pass through them as a float."""

    __slots__ = ("precision", "scale")
    numeric = False
    name = "DECIMAL"

    def __init__(self, precision: int = MAX_DECIMAL_PRECISION, scale: int = 0):
        self.precision = precision
        self.scale = scale

    @property
    def value(self) -> str:
        return f"decimal({self.precision},{self.scale})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DecimalType) and (self.precision, self.scale) == (other.precision, other.scale)

    def __hash__(self) -> int:
        return hash((DecimalType, self.precision, self.scale))

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"

    def __reduce__(self):
        return (DecimalType, (self.precision, self.scale))


# BIGINT where it meets a decimal (Trino: every bigint fits DECIMAL(19, 0)).
BIGINT_AS_DECIMAL = DecimalType(19, 0)


def is_decimal(t: object) -> bool:
    return isinstance(t, DecimalType)


def as_decimal(t: object) -> DecimalType | None:
    """``t`` as a decimal type where it meets one exactly (DECIMAL itself, BIGINT), else None."""
    if isinstance(t, DecimalType):
        return t
    return BIGINT_AS_DECIMAL if t is Type.BIGINT else None


def decimal_union(a: DecimalType, b: DecimalType) -> DecimalType:
    """The decimal type that holds both exactly (capped at 38 digits, keeping the scale)."""
    scale = max(a.scale, b.scale)
    whole = max(a.precision - a.scale, b.precision - b.scale)
    return DecimalType(min(MAX_DECIMAL_PRECISION, whole + scale), scale)


def decimal_result(op: str, a: DecimalType, b: DecimalType) -> DecimalType:
    """The result type of ``a op b`` (Trino's rules, precision capped at 38)."""
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        precision = 1 + scale + max(p1 - s1, p2 - s2)
    elif op == "*":
        scale, precision = s1 + s2, p1 + p2
    elif op == "/":
        scale, precision = max(s1, s2), p1 + s2 + max(0, s2 - s1)
    else:  # %
        scale, precision = max(s1, s2), min(p1 - s1, p2 - s2) + max(s1, s2)
    return DecimalType(min(MAX_DECIMAL_PRECISION, max(precision, scale, 1)), min(scale, MAX_DECIMAL_PRECISION))


def decimal_arithmetic_type(op: str, a: object, b: object) -> DecimalType | None:
    """The result type of ``a op b`` when one side is DECIMAL and the other DECIMAL or BIGINT."""
    if not (is_decimal(a) or is_decimal(b)):
        return None
    da, db = as_decimal(a), as_decimal(b)
    return decimal_result(op, da, db) if da is not None and db is not None else None
