"""One conformance case: input rows, the text inside MATCH_RECOGNIZE ( ... ), and either the
expected output rows or the code of the QueryError the query must raise.

Expected rows are worked out from SQL:2016 as Trino's documentation describes it (or by the
brute-force reference where it can express the case), never by running the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    name: str
    data: dict[str, list[Any]]  # column -> values, in input order; None is NULL
    query: str
    # Output rows in output order, each a dict column -> value. Compared as dicts: the set of
    # columns must be exactly the output's (ONE ROW PER MATCH: PARTITION BY columns then
    # measures; ALL ROWS PER MATCH: every input column and the measures). Floats compare
    # with a relative tolerance of 1e-9; lists compare element-wise.
    expected: list[dict[str, Any]] | None = None
    error: str | None = None  # a QueryError code, when the query must be rejected
    # Arrow types for columns whose type the values alone do not pin (e.g. {"ts":
    # "timestamp[us, tz=UTC]"}, {"x": "double"} for an all-NULL column).
    types: dict[str, str] = field(default_factory=dict)
    note: str = ""  # where the expectation comes from, when it is not obvious
