"""Incremental aggregates: an immutable state per aggregate, advanced one row at a time.

States are small immutable values so that threads (partial matches) can share them when the
matcher forks; no aggregate is ever recomputed from the rows of a match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.analysis.bound import AggregateSpec
from sparkcep.compile.expressions import compile_row


@dataclass(frozen=True)
class Aggregate:
    spec: AggregateSpec
    initial: Any
    step: Callable[[Any, list, int], Any]  # (state, cols, pos) -> state
    result: Callable[[Any], Any]

    def applies_to(self, label: int) -> bool:
        labels = self.spec.labels
        return labels is None or label in labels


def _count_star(state, cols, pos):
    return state + 1


def _min(a, b):
    return b if b < a else a


def _max(a, b):
    return b if b > a else a


def build(spec: AggregateSpec) -> Aggregate:
    if spec.arg is None:
        return Aggregate(spec, 0, _count_star, lambda s: s)
    value = compile_row(spec.arg)
    func = spec.func
    if func == "COUNT":
        def step(s, cols, pos):
            return s + (value(cols, pos) is not None)
        return Aggregate(spec, 0, step, lambda s: s)
    if func == "SUM":
        def step(s, cols, pos):
            v = value(cols, pos)
            if v is None:
                return s
            return v if s is None else s + v
        return Aggregate(spec, None, step, lambda s: s)
    if func == "AVG":
        def step(s, cols, pos):
            v = value(cols, pos)
            return s if v is None else (s[0] + v, s[1] + 1)
        return Aggregate(spec, (0, 0), step, lambda s: None if s[1] == 0 else s[0] / s[1])
    if func in ("MIN", "MAX"):
        pick = _min if func == "MIN" else _max

        def step(s, cols, pos):
            v = value(cols, pos)
            if v is None:
                return s
            return v if s is None else pick(s, v)
        return Aggregate(spec, None, step, lambda s: s)
    if func == "DELTA":
        # (first value, last value, seen any row): last minus first of the rows aggregated.
        def step(s, cols, pos):
            v = value(cols, pos)
            return (v, v, True) if not s[2] else (s[0], v, True)

        def result(s):
            if not s[2] or s[0] is None or s[1] is None:
                return None
            return s[1] - s[0]
        return Aggregate(spec, (None, None, False), step, result)
    if func == "COLLECT":
        # A shared linked list (value, previous): forks share their common prefix.
        def step(s, cols, pos):
            return (value(cols, pos), s)

        def result(s):
            if s is None:
                return None
            out = []
            while s is not None:
                out.append(s[0])
                s = s[1]
            out.reverse()
            return out
        return Aggregate(spec, None, step, result)
    raise AssertionError(func)  # pragma: no cover
