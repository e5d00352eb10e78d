"""The errors sparkcep raises: one base class, one for query text, one for data."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass


class SparkCepError(Exception):
    """Base class of every error sparkcep raises on purpose."""

    def __reduce__(self):
        # Rebuilt as it was, without calling __init__ (which takes the parts, where pickle
        # would pass the rendered text): a worker process's error reaches its parent whole.
        return _rebuilt, (type(self), self.args), self.__dict__


def _rebuilt(cls: type, args: tuple) -> SparkCepError:
    err = cls.__new__(cls)
    err.args = args
    return err


@dataclass(frozen=True)
class Span:
    """A position in query text: 1-based line and column, end exclusive."""

    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None


def caret_excerpt(text: str, span: Span) -> str:
    """The offending line of ``text`` with a caret (or tildes) under the span."""
    lines = text.splitlines() or [""]
    line_no = min(max(span.line, 1), len(lines))
    line = lines[line_no - 1]
    start = max(span.column - 1, 0)
    if span.end_line == span.line and span.end_column and span.end_column - 1 > start + 1:
        width = span.end_column - 1 - start
    else:
        width = 1
    marker = " " * start + "^" + "~" * (width - 1)
    return f"{line}\n{marker}"


class QueryError(SparkCepError):
    """An error in the query text: syntax, names, types or a rule of the language.

    Carries ``code`` (a stable identifier such as ``UNKNOWN_COLUMN``), the 1-based
    ``line`` and ``column`` where the problem is, and ``excerpt``: that line with a caret.
    """

    def __init__(self, code: str, message: str, span: Span | None = None, text: str | None = None):
        self.code = code
        self.message = message
        self.span = span
        self.line = span.line if span else None
        self.column = span.column if span else None
        self.excerpt = caret_excerpt(text, span) if (span and text is not None) else None
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" at line {self.span.line}, column {self.span.column}" if self.span is not None else ""
        out = f"[{self.code}] {self.message}{where}"
        if self.excerpt:
            out += "\n" + "\n".join("    " + ln for ln in self.excerpt.splitlines())
        return out

    def with_text(self, text: str) -> QueryError:
        """The same error with the caret excerpt taken from ``text``."""
        if self.excerpt is not None or self.span is None:
            return self
        return self.at(self.span, text)

    def at(self, span: Span, text: str) -> QueryError:
        """The same error (its class kept) pointing at ``span`` of ``text``."""
        new = copy.copy(self)  # through __reduce__: its fields, not __init__ with the rendered text
        new.span = span
        new.line = span.line
        if not isinstance(self, DataError):  # an UNKNOWN_COLUMN error's column is the data's
            new.column = span.column
        new.excerpt = caret_excerpt(text, span)
        new.args = (new._render(),)
        return new


class OptionError(QueryError):
    """An argument of the call (not the query text) has a name or a value it cannot take:
    code INVALID_OPTION, without a position."""

    def __init__(self, message: str):
        QueryError.__init__(self, "INVALID_OPTION", message)


class DataError(SparkCepError):
    """An error in the data: a missing column, an unsupported type, a bad value.

    ``column`` names the column; ``row`` is the 0-based position of the row in the input
    as given (before sorting), when one row is to blame. A distributed (Spark) DataFrame has
    no such position: there ``row`` is None and ``key`` names the row by its PARTITION BY
    and ORDER BY values (a dict column -> value).
    """

    def __init__(self, message: str, column: str | None = None, row: int | None = None,
                 key: dict | None = None):
        self.message = message
        self.column = column
        self.row = int(row) if row is not None else None  # numpy integers become plain ints
        self.key = key
        parts = [message]
        if column is not None:
            parts.append(f"column {column!r}")
        if self.row is not None:
            parts.append(f"input row {self.row}")
        if key:
            parts.append("the row with " + ", ".join(f"{k} = {v!r}" for k, v in key.items()))
        super().__init__(" — ".join(parts) if len(parts) > 1 else message)


class UnknownColumnError(QueryError, DataError):
    """The query names a column the data does not have: a QueryError (it points into the
    query text) and a DataError (it names the column), so either ``except`` catches it."""

    def __init__(self, message: str, column: str, span: Span | None = None, text: str | None = None):
        QueryError.__init__(self, "UNKNOWN_COLUMN", message, span, text)
        self.message = message  # QueryError's init reaches DataError's, which kept the rendered text
        self.column = column
        self.row = None
        self.key = None


class InternalError(SparkCepError):
    """Something failed inside sparkcep that should not have: a bug. The message names the
    clause being run; the original exception is chained (``__cause__``)."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)

    @classmethod
    def wrapping(cls, exc: BaseException, clause: object) -> InternalError:
        text = " ".join(str(clause).split()) if clause is not None else "(no query)"
        if len(text) > 160:
            text = text[:157] + "..."
        return cls(f"internal error while running {text!r}: {type(exc).__name__}: {exc} — this is a bug "
                   "in sparkcep; please report it with the query and a sample of the data")


class ExecutionError(SparkCepError):
    """Spark (or the JVM behind it) failed while running a query: lost executors, memory,
    a cluster that cannot be reached. Not a problem of the query or the data."""


def _from_spark(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("pyspark", "py4j"))


_JAVA_PREFIX = re.compile(r"^:?\s*(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error):\s*")


def spark_message(exc: BaseException) -> str:
    """The line of a Spark (Py4J) error that says what went wrong: the Java exception's
    message, not Py4J's "An error occurred while calling o40.parquet." above it."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("An error occurred while calling"):
            continue
        if _JAVA_PREFIX.match(ln) or not ln.startswith(("\tat ", "at ")):
            return _JAVA_PREFIX.sub("", ln).strip() or type(exc).__name__
    return lines[0] if lines else type(exc).__name__


# A Python worker of Spark's that cannot import sparkcep or a library it runs on.
_MISSING_ON_WORKERS = re.compile(r"No module named '((?:sparkcep|numba|numpy|pyarrow|pandas|lark)(?:\.[\w.]+)?)'")


def workers_missing(exc: BaseException) -> ExecutionError | None:
    """The error for a Spark job whose Python workers cannot import sparkcep (or numpy,
    pyarrow, pandas, numba, lark): what to install where, not the worker's traceback."""
    found = _MISSING_ON_WORKERS.search(str(exc))
    if found is None:
        return None
    module = found.group(1)
    return ExecutionError(
        f"Spark's Python workers cannot import {module}: sparkcep matches inside Spark's Python workers, so "
        "sparkcep and the libraries it runs on (numpy, pyarrow, pandas, numba) must be installed in the Python "
        "the workers run. Set PYSPARK_PYTHON (or spark.pyspark.python) to an interpreter that has sparkcep, or "
        "install sparkcep into the cluster's Python environment (`pip install sparkcep` on every node; on a "
        "hosted or serverless cluster, as a library of the cluster or its environment). Shipping the package "
        "with addPyFile or addArtifacts is not enough: numba and pyarrow are compiled for the workers' machine.")


def as_sparkcep_error(exc: Exception, clause: object = None) -> SparkCepError:
    """What the safety net makes of an exception: sparkcep's own errors as they are, Spark's
    an ExecutionError, anything else an InternalError naming ``clause`` (a bug)."""
    if isinstance(exc, SparkCepError):
        return exc
    if isinstance(exc, MemoryError):
        return ExecutionError("out of memory while running the query; give the process more memory or run it "
                              "on Spark with more partitions")
    if _from_spark(exc):
        return workers_missing(exc) or ExecutionError(f"Spark failed: {spark_message(exc)}")
    return InternalError.wrapping(exc, clause)


@contextlib.contextmanager
def internal_errors(clause: object = None):
    """Around a public entry point: no exception but a SparkCepError leaves it (see
    as_sparkcep_error); the original is chained."""
    try:
        yield
    except SparkCepError:
        raise
    except Exception as exc:  # noqa: BLE001 - the safety net: nothing else may leave
        raise as_sparkcep_error(exc, clause) from exc


def guarded(fn=None, *, query: bool = True):
    """Decorator for public entry points (``query``: whose second argument is the query
    text, which an InternalError names): arguments that do not fit the signature are an
    OptionError, and no exception but a SparkCepError leaves."""
    if fn is None:
        return functools.partial(guarded, query=query)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        clause = None
        if query:
            clause = args[1] if len(args) > 1 else kwargs.get("clause", kwargs.get("query", kwargs.get("statement")))
        with internal_errors(clause):
            checked(signature, fn.__name__, args, kwargs)
            return fn(*args, **kwargs)
    return wrapper


def checked(signature: inspect.Signature | Callable, name: str, args: tuple, kwargs: dict) -> None:
    """An OptionError where ``args`` and ``kwargs`` do not fit ``signature`` (or a function's:
    the engine a public entry point hands its options to), before anything runs."""
    if not isinstance(signature, inspect.Signature):
        signature = inspect.signature(signature)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        raise OptionError(f"{name}(): {e}") from None
