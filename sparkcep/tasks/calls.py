"""Expensive calls as worker tasks, and the key that keeps their answers (tasks.speculate).

Apart from the engine, so that a worker process that only makes calls starts quickly.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

from sparkcep import functions
from sparkcep.compile.expressions import EvaluationError, call_function


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



class Calls:
    """What a worker runs: a chunk of (function name, arguments) calls, each answered with
    (True, value) or (False, the error message the sequential engine would give)."""

    def tasks(self, chunk: list[tuple[str, list[Any]]]) -> list[tuple[bool, Any]]:
        out = []
        for name, vals in chunk:
            try:
                out.append((True, call_function(name, functions.lookup(name).impl, vals)))
            except EvaluationError as e:
                out.append((False, e.message))
        return out


