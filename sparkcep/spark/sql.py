"""``sparkcep.sql(spark, "SELECT ... FROM t MATCH_RECOGNIZE (...) [AS m] [WHERE ...]")``.

The MATCH_RECOGNIZE clause runs on sparkcep; the parts around it are handed to Spark SQL
over a temporary view of its result.
"""

from __future__ import annotations

import itertools
import re

from sparkcep.errors import QueryError, Span
from sparkcep.options import check_options
from sparkcep.spark.session import is_connect

_counter = itertools.count(1)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _skipped(text: str, i: int) -> tuple[int, str | None]:
    """Where the quoted name or literal, or the comment, that starts at ``i`` ends, and
    which it is ("quote", "comment"); (i, None) where none starts there."""
    n = len(text)
    c = text[i]
    if c in "'\"`":
        j = text.find(c, i + 1)
        while j != -1 and j + 1 < n and text[j + 1] == c:
            j = text.find(c, j + 2)
        return (n if j == -1 else j + 1), "quote"
    if text.startswith("--", i):
        j = text.find("\n", i)
        return (n if j == -1 else j + 1), "comment"
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return (n if j == -1 else j + 2), "comment"
    return i, None


def _blank_comments(text: str) -> str:
    """``text`` with its comments as spaces (SQL reads a comment as whitespace); positions kept."""
    out = list(text)
    i = 0
    while i < len(text):
        end, kind = _skipped(text, i)
        if kind == "comment":
            out[i:end] = " " * (end - i)
        i = end if kind else i + 1
    return "".join(out)


def _scan(text: str):
    """(position, character, depth) for characters outside quotes and comments."""
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        end, kind = _skipped(text, i)
        if kind:
            i = end
            continue
        c = text[i]
        if c == "(":
            depth += 1
        yield i, c, depth
        if c == ")":
            depth -= 1
        i += 1


def _keyword_at(text: str, word: str, depth: int = 0) -> list[int]:
    hits = []
    prev = ""
    for i, c, d in _scan(text):
        if d == depth and text[i:i + len(word)].upper() == word and not (prev.isalnum() or prev == "_"):
            after = text[i + len(word):i + len(word) + 1]
            if not (after.isalnum() or after == "_"):
                hits.append(i)
        prev = c
    return hits


def _position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n") + 1
    col = offset - (before.rfind("\n") + 1) + 1
    return line, col


def split_statement(text: str) -> tuple[str, str, str, str, int, str | None, str]:
    """(WITH clause or "", select list, source, clause, clause offset, alias, rest) of a
    statement."""
    hits = _keyword_at(text, "MATCH_RECOGNIZE")
    if not hits:
        nested = [i for i, c, d in _scan(text) if d > 0 and text[i:i + 15].upper() == "MATCH_RECOGNIZE"]
        if nested:
            raise QueryError("NOT_SUPPORTED", "MATCH_RECOGNIZE inside a subquery or a WITH clause is not supported: "
                             "put it in the outermost FROM (its source may be a subquery)",
                             Span(*_position(text, nested[0])), text)
        raise QueryError("SYNTAX", "the statement has no MATCH_RECOGNIZE clause", Span(1, 1), text)
    if len(hits) > 1:
        raise QueryError("NOT_SUPPORTED", "more than one MATCH_RECOGNIZE in one statement is not supported",
                         Span(*_position(text, hits[1])), text)
    mr = hits[0]
    froms = [f for f in _keyword_at(text, "FROM") if f < mr]
    selects = _keyword_at(text, "SELECT")
    if not froms or not selects or selects[0] > froms[-1]:
        raise QueryError("SYNTAX", "expected SELECT ... FROM <table> MATCH_RECOGNIZE (...)", Span(*_position(text, mr)), text)
    with_clause = text[:selects[0]].strip()
    if with_clause and not re.match(r"(?is)WITH\b", with_clause):
        raise QueryError("SYNTAX", "expected SELECT (or WITH) at the start of the statement", Span(1, 1), text)
    select_list = text[selects[0] + len("SELECT"):froms[-1]].strip()
    source = _source(_blank_comments(text[froms[-1] + len("FROM"):mr]))
    open_at = text.find("(", mr)
    if open_at < 0 or text[mr + len("MATCH_RECOGNIZE"):open_at].strip():
        raise QueryError("SYNTAX", "expected '(' after MATCH_RECOGNIZE", Span(*_position(text, mr)), text)
    close_at = None
    for i, c, d in _scan(text):
        if i > open_at and c == ")" and d == 1:
            close_at = i
            break
    if close_at is None:
        raise QueryError("SYNTAX", "MATCH_RECOGNIZE ( is never closed", Span(*_position(text, open_at)), text)
    clause = text[open_at + 1:close_at]
    rest = text[close_at + 1:].strip()
    alias = None
    m = re.match(r"(?i)(AS\s+)?([A-Za-z_][A-Za-z0-9_]*)", rest)
    if m and m.group(2).upper() not in ("WHERE", "ORDER", "GROUP", "LIMIT", "HAVING", "UNION", "JOIN", "LEFT", "INNER"):
        alias = m.group(2)
        rest = rest[m.end():].strip()
    return with_clause, select_list, source, clause, open_at + 1, alias, rest.rstrip(";").strip()


# A correlation name after the source: FROM t AS src MATCH_RECOGNIZE (Trino's grammar allows it).
_CORRELATION = re.compile(r"(?s)(.*?[\w`)])\s+(?:(?i:AS)\s+)?[A-Za-z_][A-Za-z0-9_]*")


def _source(between: str) -> str:
    """The table, view or (subquery) between FROM and MATCH_RECOGNIZE, without the
    correlation name that may follow it: the clause names the source's columns unqualified,
    so the name is not needed."""
    source = between.strip()
    m = _CORRELATION.fullmatch(source)
    return m.group(1) if m else source


def shift_error(e: QueryError, text: str, offset: int) -> QueryError:
    """A QueryError about the clause, re-pointed into the whole statement."""
    if e.span is None:
        return e
    line0, col0 = _position(text, offset)

    def moved(line: int, col: int) -> tuple[int, int]:
        return line0 + line - 1, col0 + col - 1 if line == 1 else col

    end = moved(e.span.end_line, e.span.end_column) if e.span.end_line is not None and e.span.end_column else (None, None)
    return e.at(Span(*moved(e.span.line, e.span.column), *end), text)


_CONNECT_VIEW = "sparkcep_match"


def sql(spark, statement: str, **options):
    """Run a SELECT statement whose FROM clause holds one MATCH_RECOGNIZE."""
    from sparkcep.spark.batch import match_recognize_spark

    check_options(options)
    with_clause, select_list, source, clause, offset, alias, rest = split_statement(statement)
    # A WITH clause's names may be the source and may appear around it: it heads both statements.
    head = _Built(statement)
    if with_clause:
        head.add(with_clause)
        head.add(" ", None)
    if source.startswith("(") and source.endswith(")"):
        sub = head.copy()
        sub.add(source[1:-1], statement.find(source) + 1)
        src = _on_spark(lambda: spark.sql(sub.text), sub, source)
    elif with_clause and _WORD.fullmatch(source.replace(".", "_").replace("`", "")):
        sub = head.copy()
        sub.add("SELECT * FROM ", None)
        sub.add(source)
        src = _on_spark(lambda: spark.sql(sub.text), sub, source)
    elif _WORD.fullmatch(source.replace(".", "_").replace("`", "")):
        name = _Built(statement)  # what Spark is given: the name alone
        name.add(source, statement.find(source))
        src = _on_spark(lambda: spark.table(source), name, source)
    else:
        raise QueryError("NOT_SUPPORTED", f"the source of MATCH_RECOGNIZE must be a table, a view or a (subquery), not {source!r}",
                         Span(*_position(statement, statement.find(source))), statement)
    try:
        result = match_recognize_spark(src, clause, **options)
    except QueryError as e:
        raise shift_error(e, statement, offset) from None
    connect = is_connect(spark)
    view = _CONNECT_VIEW if connect else f"sparkcep_match_{next(_counter)}"
    outer = head.copy()
    outer.add("SELECT ", None)
    outer.add(select_list)
    # (on a line of its own: a Connect view's longer name moves no position Spark reports after it)
    at_from = len(outer.text)
    from_piece = f"\nFROM {view}" + (f" AS {alias}" if alias else "") + "\n"
    outer.add(from_piece, None)
    if rest:
        outer.add(rest, statement.rfind(rest))
    if connect:
        # A Connect DataFrame is analysed again at each action: the result travels with the
        # statement as a named relation (pyspark's {name} arguments), not as a view to drop.
        # Only our FROM names it; the user's text (which may hold the same word) is escaped.
        def escaped(s: str) -> str:
            return s.replace("{", "{{").replace("}", "}}")
        text = (escaped(outer.text[:at_from]) + from_piece.replace(view, "{" + view + "}", 1)
                + escaped(outer.text[at_from + len(from_piece):]))
        return _on_spark(lambda: spark.sql(text, **{_CONNECT_VIEW: result}), outer, select_list)
    result.createOrReplaceTempView(view)
    try:
        # Spark analyses the statement here, inlining the view's plan: the view can go.
        return _on_spark(lambda: spark.sql(outer.text), outer, select_list)
    finally:
        spark.catalog.dropTempView(view)


class _Built:
    """A statement made for Spark from pieces of the user's ``statement`` (and text of our
    own), which knows where each piece came from: Spark's errors point into it."""

    def __init__(self, statement: str):
        self.statement = statement
        self.text = ""
        self.pieces: list[tuple[int, int | None, int]] = []  # (offset here, offset in the statement, length)
        self._searched_from = 0

    def copy(self) -> _Built:
        other = _Built(self.statement)
        other.text, other.pieces, other._searched_from = self.text, list(self.pieces), self._searched_from
        return other

    def add(self, piece: str, at: int | None | bool = True) -> None:
        """Append ``piece``: from the statement at offset ``at`` (True: found there, after the
        pieces before it), or None for text of our own."""
        if at is True:
            found = self.statement.find(piece, self._searched_from)
            at = found if found >= 0 else None
        if at is not None:
            self._searched_from = at + len(piece)
        self.pieces.append((len(self.text), at, len(piece)))
        self.text += piece

    def origin(self, line: int, pos: int) -> int | None:
        """The statement's offset of Spark's (line, 0-based pos) here; the end of the statement
        for the end of the text; None inside text of our own."""
        lines = self.text.split("\n")
        if not 1 <= line <= len(lines):
            return None
        offset = sum(len(x) + 1 for x in lines[:line - 1]) + pos
        if offset >= len(self.text.rstrip()):
            return len(self.statement.rstrip().rstrip(";").rstrip())
        for here, there, length in self.pieces:
            if here <= offset < here + length:
                return None if there is None else there + offset - here
        return None


_SPARK_POSITION = re.compile(r"\(?line (\d+),? pos (\d+)\)?")


def _on_spark(run, built: _Built, part: str):
    """``run()``, a Spark SQL call over the statement ``built`` (made from ``part`` of the
    user's statement and others); Spark's analysis and parse errors become QueryErrors
    pointing where Spark says, in the user's statement (at ``part`` where Spark's place is
    text of our own). pyspark's own log line for such an error, a JSON record with a Java
    stack trace on stderr, is kept quiet: the QueryError says it."""
    from pyspark.logger import PySparkLogger

    quiet = PySparkLogger.getLogger("SQLQueryContextLogger")  # pyspark's own class (it logs with extra fields)
    was = quiet.disabled
    quiet.disabled = True
    try:
        return run()
    except Exception as e:  # noqa: BLE001 - pyspark's error classes vary across versions
        name = type(e).__name__
        if not (type(e).__module__ or "").startswith("pyspark") or name not in ("AnalysisException", "ParseException"):
            raise
        statement = built.statement
        lines = str(e).strip().splitlines()
        first = lines[0] if lines else name
        where = _SPARK_POSITION.search(str(e))
        at = built.origin(int(where.group(1)), int(where.group(2))) if where else None
        if at is None:
            at = statement.find(part) if part else -1
        else:
            first = _SPARK_POSITION.sub("", first).rstrip(" ;")
        span = Span(*_position(statement, at)) if at >= 0 else None
        raise QueryError("SPARK_SQL", f"Spark SQL rejects the statement around MATCH_RECOGNIZE: {first}",
                         span, statement) from None
    finally:
        quiet.disabled = was
