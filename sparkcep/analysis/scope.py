"""What the analyzer knows of the input and of where an expression stands."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.analysis.bound import (
    AggregateSpec,
    Type,
)


@dataclass(frozen=True)
class Column:
    name: str
    type: Type | None  # None: a type sparkcep cannot compute with (passed through only)
    arrow_type: object = None


@dataclass
class Scope:
    """Where an expression stands, which decides what it may contain."""

    clause: str  # "DEFINE" or "MEASURES"
    aggregates: list[AggregateSpec] = field(default_factory=list)
