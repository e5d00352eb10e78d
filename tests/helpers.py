"""Test helpers: run a pattern over a string of row letters and read the matches back."""

from __future__ import annotations

import re

import pyarrow as pa

import sparkcep


def letters_table(s: str) -> pa.Table:
    return pa.table({"i": list(range(len(s))), "c": list(s)})


def matches(pattern: str, s: str, *, skip: str = "", extra: str = "", defines: dict[str, str] | None = None,
            mode: str = "sql", variables: str = "ABCDE") -> list[tuple[int, str]]:
    """(first row, labels) of every match of ``pattern`` over the letters of ``s``, where
    variable X matches a row whose letter is x (unless ``defines`` says otherwise). Empty
    matches come out as (row, "")."""
    in_pattern = set(re.findall(r"\b[A-Z]\b", pattern))
    defs = defines if defines is not None else {v: f"c = '{v.lower()}'" for v in variables}
    defs = {k: v for k, v in defs.items() if k in in_pattern}
    define = ("DEFINE " + ", ".join(f"{k} AS {v}" for k, v in defs.items())) if defs else ""
    text = f"""ORDER BY i
        MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls
        ALL ROWS PER MATCH
        {skip}
        PATTERN ({pattern}) {extra}
        {define}"""
    rows = sparkcep.match_recognize(letters_table(s), text, mode=mode).to_pylist()
    out: dict[int, list] = {}
    for r in rows:
        entry = out.setdefault(r["mn"], [r["i"], ""])
        if r["cls"] is not None:
            entry[1] += r["cls"]
    return [tuple(v) for _, v in sorted(out.items())]
