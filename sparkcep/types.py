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
