"""The options match_recognize, explain, sase and sql take, checked once for all of them."""

from __future__ import annotations

from typing import Any

from sparkcep.errors import SparkCepError

OPTIONS = {"mode", "strategy", "batch", "shared", "plan", "sharing"}
# The task engine's options (strategy "tasks" on pandas and Arrow data).
TASK_OPTIONS = {"workers", "start", "pm", "queue", "block", "chunk", "stats"}


# sparkcep.snoop's options (beyond order_by, partition_by, type_column, strategy).
SNOOP_OPTIONS = TASK_OPTIONS | {"window", "stats", "progress"}


def check_options(options: dict[str, Any], known: set[str] | frozenset[str] = OPTIONS) -> None:
    unknown = set(options) - set(known)
    if unknown:
        raise SparkCepError(f"unknown option(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
