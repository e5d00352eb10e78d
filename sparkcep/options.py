"""The options match_recognize, explain, sase and sql take, checked once for all of them."""

from __future__ import annotations

from typing import Any

from sparkcep.errors import OptionError

OPTIONS = {"mode", "strategy", "batch", "shared", "plan", "sharing"}
# The task engine's options (strategy "tasks" on pandas and Arrow data).
TASK_OPTIONS = {"workers", "start", "pm", "queue", "block", "chunk", "stats"}


# sparkcep.snoop's options (beyond order_by, partition_by, type_column, strategy).
SNOOP_OPTIONS = TASK_OPTIONS | {"window", "stats", "progress"}


# Strategies of match_recognize and explain: on pandas and Arrow data, and on Spark.
LOCAL_STRATEGIES = ("auto", "sequential", "sb", "sb+", "tasks")
SPARK_STRATEGIES = ("auto", "sequential", "partition", "runs", "rr")


def check_options(options: dict[str, Any], known: set[str] | frozenset[str] = OPTIONS) -> None:
    """Names first, then the values every entry point reads alike (the engines check the rest)."""
    unknown = set(options) - set(known)
    if unknown:
        raise OptionError(f"unknown option(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    if "mode" in options and not isinstance(options["mode"], str):
        raise OptionError(f"mode must be 'sql' or 'matchregex', not {options['mode']!r}")
    if "strategy" in options and "strategy" in OPTIONS & set(known):
        strategy = options["strategy"]
        every = dict.fromkeys(LOCAL_STRATEGIES + SPARK_STRATEGIES)
        if not isinstance(strategy, str) or strategy not in every:
            raise OptionError(f"unknown strategy {strategy!r} (one of {', '.join(every)})")
    check_rows(options.get("batch"), options.get("shared"))


def check_rows(batch: Any, shared: Any) -> None:
    """The run strategies' batch and shared rows (None: their defaults)."""
    for name, value, least in (("batch", batch, 1), ("shared", shared, 0)):
        if value is not None and (not _whole(value) or value < least):
            raise OptionError(f"{name} must be a whole number of rows >= {least}, not {value!r}")


def _whole(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
