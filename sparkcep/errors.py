"""The errors sparkcep raises: one base class, one for query text, one for data."""

from __future__ import annotations

from dataclasses import dataclass


class SparkCepError(Exception):
    """Base class of every error sparkcep raises on purpose."""


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
        where = f" at line {self.line}, column {self.column}" if self.line is not None else ""
        out = f"[{self.code}] {self.message}{where}"
        if self.excerpt:
            out += "\n" + "\n".join("    " + ln for ln in self.excerpt.splitlines())
        return out

    def with_text(self, text: str) -> QueryError:
        """The same error with the caret excerpt taken from ``text``."""
        if self.excerpt is not None or self.span is None:
            return self
        return QueryError(self.code, self.message, self.span, text)


class DataError(SparkCepError):
    """An error in the data: a missing column, an unsupported type, a bad value.

    ``column`` names the column; ``row`` is the 0-based position of the row in the input
    as given (before sorting), when one row is to blame.
    """

    def __init__(self, message: str, column: str | None = None, row: int | None = None):
        self.message = message
        self.column = column
        self.row = int(row) if row is not None else None  # numpy integers become plain ints
        parts = [message]
        if column is not None:
            parts.append(f"column {column!r}")
        if self.row is not None:
            parts.append(f"input row {self.row}")
        super().__init__(" — ".join(parts) if len(parts) > 1 else message)


class UnknownColumnError(QueryError, DataError):
    """The query names a column the data does not have: a QueryError (it points into the
    query text) and a DataError (it names the column), so either ``except`` catches it."""

    def __init__(self, message: str, column: str, span: Span | None = None, text: str | None = None):
        QueryError.__init__(self, "UNKNOWN_COLUMN", message, span, text)
        self.column = column
        self.row = None
