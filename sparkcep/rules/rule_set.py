"""A rule set: named MATCH_RECOGNIZE clauses from a mapping or a folder of ``.sql`` files,
grouped by what they can share, and their outputs as one table (a ``rule`` column first,
then the union of the rules' columns by name)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sparkcep.errors import DataError, OptionError, QueryError, SparkCepError

RULE = "rule"  # the output column naming each row's rule


@dataclass(frozen=True)
class Rule:
    """One named clause (the text inside ``MATCH_RECOGNIZE ( … )``)."""

    name: str
    text: str
    path: str | None = None  # the file it was read from


def load_rules(rules) -> list[Rule]:
    """``rules`` as a list: a mapping name -> clause in its order, or a folder's ``*.sql``
    files in name order, each named by its file (without ``.sql``)."""
    if isinstance(rules, (str, os.PathLike)):
        folder = pathlib.Path(rules)
        if not folder.is_dir():
            raise OptionError(f"rules must be a mapping of names to clauses or a folder of .sql files; "
                              f"{str(folder)!r} is not a folder")
        return [read_rule(p) for p in rule_files(folder)]
    if not isinstance(rules, Mapping):
        raise OptionError(f"rules must be a mapping of names to clauses or a folder of .sql files, "
                          f"not {type(rules).__name__}")
    out = []
    for name, text in rules.items():
        if not isinstance(name, str) or not name:
            raise OptionError(f"a rule's name must be a non-empty string, not {name!r}")
        if not isinstance(text, str):
            raise OptionError(f"rule {name!r}: its clause must be a string, not {type(text).__name__}")
        out.append(Rule(name, text))
    return out


def rule_files(folder: pathlib.Path) -> list[pathlib.Path]:
    """The folder's rule files (``*.sql``, not hidden), in name order."""
    return sorted(p for p in folder.iterdir() if p.suffix == ".sql" and p.is_file() and not p.name.startswith("."))


def read_rule(path: pathlib.Path) -> Rule:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise OptionError(f"rule file {str(path)!r} cannot be read: {e}") from None
    return Rule(path.stem, text, str(path))


def in_rule(err: SparkCepError, rule: Rule) -> SparkCepError:
    """``err`` naming the rule it arose in (its ``rule`` attribute, and its message)."""
    where = f"rule {rule.name!r}" + (f" ({rule.path})" if rule.path else "")
    if getattr(err, "rule", None) is not None:
        return err
    if isinstance(err, QueryError):
        new = err.at(err.span, rule.text) if err.span is not None and err.excerpt is None else _copy(err)
        new.message = f"{where}: {err.message}"
        new.args = (new._render(),)
    elif isinstance(err, DataError):
        new = DataError(f"{where}: {err.message}", column=err.column, row=err.row, key=err.key)
    else:
        new = type(err)(f"{where}: {err}")
    new.rule = rule.name
    return new


def named_step(rule: Rule, step):
    """``step()``, its errors naming ``rule`` (anything but a SparkCepError is a bug: an
    InternalError naming the rule's clause, the original chained)."""
    from sparkcep.errors import InternalError

    try:
        return step()
    except SparkCepError as e:
        raise in_rule(e, rule) from None
    except Exception as e:  # noqa: BLE001 - the safety net, with the rule's name on it
        err = InternalError.wrapping(e, rule.text)
        err.rule = rule.name
        raise err from e


def _copy(err: QueryError) -> QueryError:
    import copy

    return copy.copy(err)


# The local result's rule column: each name stored once (pandas gets a categorical).
RULE_NAMES = pa.dictionary(pa.int32(), pa.string())
RULE_TEXT = pa.string()  # (Spark's)


def union_schema(schemas: list[tuple[Rule, pa.Schema]], rule_type: pa.DataType = RULE_TEXT) -> pa.Schema:
    """``rule`` then every column by name in order of first appearance (as Spark's
    ``unionByName(allowMissingColumns=True)``); a column of NULL type takes the others'
    type; two other types under one name are a QueryError naming both rules."""
    # By name as SQL compares names, case aside (as Spark's union): the first spelling is kept.
    fields: dict[str, tuple[pa.DataType, Rule, str]] = {}
    for rule, schema in schemas:
        for f in schema:
            if f.name.lower() == RULE:
                raise QueryError("RULE_COLUMN", f"rule {rule.name!r} outputs a column named {f.name!r}, the column "
                                 "match_rules names each row's rule in: rename the measure (or the input column)")
            seen = fields.get(f.name.lower())
            if seen is None or (pa.types.is_null(seen[0]) and not pa.types.is_null(f.type)):
                fields[f.name.lower()] = (f.type, rule, seen[2] if seen is not None else f.name)
            elif not pa.types.is_null(f.type) and f.type != seen[0]:
                a, b = _type_names(seen[0], f.type)
                raise QueryError("TYPE_MISMATCH", f"column {seen[2]!r} is {a} in rule {seen[1].name!r} and {b} in "
                                 f"rule {rule.name!r}: one output column takes one type (CAST one of them, or "
                                 "name them apart)")
    return pa.schema([pa.field(RULE, rule_type, nullable=False)]
                     + [pa.field(name, t) for t, _, name in fields.values()])


def _type_names(a: pa.DataType, b: pa.DataType) -> tuple[str, str]:
    """SQL's names of two types, or Arrow's where SQL names them alike (timestamp zones)."""
    from sparkcep.data.ingest import sql_type

    names = []
    for t in (a, b):
        s = sql_type(t)
        names.append(str(s.value).upper() if s is not None else str(t))
    return tuple(names) if names[0] != names[1] else (str(a), str(b))


def union_tables(results: list[tuple[Rule, pa.Table]], schema: pa.Schema) -> pa.Table:
    """The rules' outputs as one table of ``schema`` (a union_schema), each rule's rows in
    its order, rules in the given order."""
    names = pa.array([rule.name for rule, _ in results], pa.string())
    rule_type = schema.field(RULE).type
    longest = max((t.num_rows for _, t in results), default=0)
    blank: dict = {}  # per type, NULLs for the longest output: the others take slices of it
    pieces = []
    for k, (_, t) in enumerate(results):
        n = t.num_rows
        col = pa.DictionaryArray.from_arrays(pa.array(np.full(n, k, dtype=np.int32)), names)
        cols = [col if rule_type == col.type else col.cast(rule_type)]
        own = {name.lower(): i for i, name in enumerate(t.column_names)}
        for f in schema:
            if f.name == RULE:
                continue
            if f.name.lower() in own:
                c = t.column(own[f.name.lower()])
                cols.append(c if c.type == f.type else c.cast(f.type))
            else:
                if f.type not in blank:
                    blank[f.type] = pa.nulls(longest, f.type)
                cols.append(blank[f.type].slice(0, n))
        pieces.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
