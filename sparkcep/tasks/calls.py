"""Expensive calls as worker tasks, and the key that keeps their answers (tasks.speculate).

Apart from the engine, so that a worker process that only makes calls starts quickly.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import decimal
import math
from typing import Any

from sparkcep import functions
from sparkcep.compile.expressions import EvaluationError, call_function, set_call_route

MEMO_LIMIT = 100_000  # answers kept per query; the oldest go first
MEMO_BYTES = 64 << 20  # and about this much of their arguments (bytes and text counted)


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

    def __init__(self, limit: int = MEMO_LIMIT, limit_bytes: int = MEMO_BYTES):
        self.limit = limit
        self.limit_bytes = limit_bytes
        # key -> (value, size of its arguments and value), oldest first
        self.answers: collections.OrderedDict[tuple, tuple[Any, int]] = collections.OrderedDict()
        self.bytes = 0
        self.calls = 0
        self.hits = 0

    def call(self, name: str, impl, vals: list[Any]) -> Any:
        try:
            key = call_key(name, vals)
            got = self.answers.get(key)
        except TypeError:  # an argument that cannot be a key: call it
            return call_function(name, impl, vals)
        if got is not None:
            self.hits += 1
            return got[0]
        self.calls += 1
        value = call_function(name, impl, vals)
        size = sum(_size(v) for v in vals) + _size(value)
        if size > self.limit_bytes // 4:
            return value  # not worth keeping a payload this large alive
        while self.answers and (len(self.answers) >= self.limit or self.bytes + size > self.limit_bytes):
            self.bytes -= self.answers.popitem(last=False)[1][1]
        self.answers[key] = (value, size)
        self.bytes += size
        return value

    def __enter__(self) -> Memo:
        self._outer = set_call_route(self)
        return self

    def __exit__(self, *exc) -> None:
        set_call_route(self._outer)


def _size(v: Any) -> int:
    """About the memory a kept argument holds (payloads counted, the rest as a word)."""
    if isinstance(v, (bytes, str)):
        return 64 + len(v)
    if isinstance(v, (list, tuple)):  # arrays, and a map's (key, value) pairs
        return 64 + sum(_size(x) for x in v)
    if isinstance(v, dict):
        return 64 + sum(_size(k) + _size(x) for k, x in v.items())
    return 32


def calls_once(plan) -> contextlib.AbstractContextManager:
    """A Memo for the span of a run when ``plan`` (an automaton plan) has expensive calls,
    else nothing."""
    from sparkcep.compile.plan import is_segment_plan
    from sparkcep.tasks.from_sql import calls_expensive

    return Memo() if not is_segment_plan(plan) and calls_expensive(plan) else contextlib.nullcontext()


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


