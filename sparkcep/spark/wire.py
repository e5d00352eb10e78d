"""What crosses between Spark's Python workers and the driver: a sparkcep error raised in a
task travels as tagged JSON (Spark wraps worker exceptions in its own types and keeps only
their text) and is raised again on the driver as the DataError it was (a row of a Spark
DataFrame has no input position: errors name it by its key values, data.partitions'
``named_by_key``)."""

from __future__ import annotations

import contextlib
import json

import pyarrow as pa

from sparkcep.errors import DataError, InternalError, SparkCepError, internal_errors

_ERROR_TAG = "SPARKCEP_ERROR:"


@contextlib.contextmanager
def errors_to_driver():
    """Inside a task: sparkcep errors travel to the driver as tagged JSON."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - every failure in a task travels typed
        if not isinstance(e, SparkCepError):
            e = InternalError.wrapping(e, "a Spark task")
        info = {
            "type": "InternalError" if isinstance(e, InternalError) else "DataError",
            "message": getattr(e, "message", str(e)),
            "column": getattr(e, "column", None),
            "row": getattr(e, "row", None),
            "key": getattr(e, "key", None),
            "rule": getattr(e, "rule", None),  # (match_rules: the rule it arose in)
        }
        raise RuntimeError(_ERROR_TAG + json.dumps(info, default=str)) from None


def reraise(exc: Exception) -> None:
    """Raise the sparkcep error a Spark exception carries, or ``exc`` itself."""
    text = str(exc)
    at = text.find(_ERROR_TAG)
    if at < 0:
        raise exc
    blob = text[at + len(_ERROR_TAG) :].split("\n", 1)[0]
    try:
        info = json.loads(blob)
    except ValueError:
        raise exc from None
    if info.get("type") == "InternalError":
        err = InternalError(info["message"])
    else:
        err = DataError(info["message"], column=info.get("column"), row=info.get("row"), key=info.get("key"))
    if info.get("rule") is not None:
        err.rule = info["rule"]
    raise err from None


@contextlib.contextmanager
def collect_errors():
    """Around Spark actions on a sparkcep result: errors raised in workers come back as the
    DataError they were."""
    with internal_errors("a Spark job"):
        try:
            yield
        except SparkCepError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark wraps worker errors in its own types
            reraise(e)
            raise


def collect_arrow(df) -> pa.Table:
    """``df.toArrow()`` with worker errors raised as sparkcep errors."""
    try:
        return df.toArrow()
    except Exception as e:  # noqa: BLE001 - Spark wraps worker errors in its own types
        reraise(e)
        raise
