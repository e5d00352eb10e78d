"""Expensive calls as worker tasks, and the key that keeps their answers (tasks.speculate).

Apart from the engine, so that a worker process that only makes calls starts quickly.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

from sparkcep import functions
from sparkcep.compile.expressions import EvaluationError, call_function, set_call_route

MEMO_LIMIT = 100_000  # answers kept per query; the oldest go first


def _frozen(v: Any) -> Any:
    # Hashable, and telling apart what equality would merge: 1, 1.0 and True; 0.0 and -0.0;
    # Decimal 1.0 and 1.00; one instant in two zones. NaN is one key.
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (float, v, math.copysign(1.0, v))
    if isinstance(v, list):
        return (list, tuple(_frozen(x) for x in v))
    if isinstance(v, decimal.Decimal):
        return (decimal.Decimal, v.as_tuple())
    if isinstance(v, (dt.datetime, dt.time)):
        return (type(v), v, v.utcoffset(), str(v.tzinfo))
    return (type(v), v)


def call_key(name: str, vals: list[Any]) -> tuple:
    return (name, tuple(_frozen(v) for v in vals))


class Memo:
    """A call route (compile.expressions.set_call_route) making each distinct call of an
    expensive function once per query. Registered functions are deterministic (a documented
    rule), and the sequential engine evaluates a row's condition once per start and per
    variable that reaches it, so the same call repeats. Errors are not kept: a repeated call
    raises its error again. ``calls`` and ``hits`` count what it did."""

    def __init__(self, limit: int = MEMO_LIMIT):
        self.limit = limit
        self.answers: dict[tuple, Any] = {}
        self.calls = 0
        self.hits = 0

    def call(self, name: str, impl, vals: list[Any]) -> Any:
        try:
            key = call_key(name, vals)
            if key in self.answers:
                self.hits += 1
                return self.answers[key]
        except TypeError:  # an argument that cannot be a key: call it
            return call_function(name, impl, vals)
        self.calls += 1
        value = call_function(name, impl, vals)
        if len(self.answers) >= self.limit:
            del self.answers[next(iter(self.answers))]
        self.answers[key] = value
        return value

    def __enter__(self) -> Memo:
        self._outer = set_call_route(self)
        return self

    def __exit__(self, *exc) -> None:
        set_call_route(self._outer)


class Calls:
    """What a worker runs: a chunk of (function name, arguments) calls, each answered with
    (True, value) or (False, the error message the sequential engine would give).
    ``impls``: the functions by name, sent along (else looked up in the registry)."""

    def __init__(self, impls: dict[str, Any] | None = None):
        self.impls = impls or {}

    def tasks(self, chunk: list[tuple[str, list[Any]]]) -> list[tuple[bool, Any]]:
        out = []
        for name, vals in chunk:
            impl = self.impls.get(name) or functions.lookup(name).impl
            try:
                out.append((True, call_function(name, impl, vals)))
            except EvaluationError as e:
                out.append((False, e.message))
        return out


