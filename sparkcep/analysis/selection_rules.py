"""The rules of SASE's event selection and negation, WITHIN, and MatchRegex's compile-time
check on variables that can start a match. A mixin of the Analyzer."""

from __future__ import annotations

import datetime as dt

from sparkcep.analysis.binding import TIME_TYPES
from sparkcep.analysis.bound import (
    SortKey,
)
from sparkcep.analysis.patterns import (
    count_var,
    find_in_pattern,
    first_variables,
    negations,
    reads_partial_match,
)
from sparkcep.language import ast


class SelectionRules:
    def check_negations(self, pattern: ast.PatternNode) -> frozenset[int]:
        """``!X`` stands alone between two items of the top-level sequence, and X is a
        variable that occurs nowhere else in the pattern (SASE's nested-query negation)."""
        items = pattern.items if isinstance(pattern, ast.PConcat) else (pattern,)
        negated: dict[str, ast.PNot] = {}
        for i, item in enumerate(items):
            if not isinstance(item, ast.PNot):
                continue
            if not isinstance(item.child, ast.PVar):
                raise self.error("NOT_SUPPORTED", "negation applies to one pattern variable: write !X", item)
            if i == 0 or i == len(items) - 1:
                raise self.error("NOT_SUPPORTED", "a negated variable must stand between two other pattern items (not first or last)", item)
            if isinstance(items[i - 1], ast.PNot) or isinstance(items[i + 1], ast.PNot):
                raise self.error("NOT_SUPPORTED", "two negations next to each other are not supported; combine them in one condition", item)
            key = item.child.name.key
            if key in negated:
                raise self.error("DUPLICATE_NAME", f"{item.child.name.text} is negated twice", item)
            negated[key] = item
        for place in negations(pattern):
            if not any(place is item for item in items):
                raise self.error("NOT_SUPPORTED", "negation is only supported in the top-level sequence of the pattern (not inside quantifiers, alternations or groups)", place)
        for key, node in negated.items():
            if count_var(pattern, key) > 1:
                raise self.error("INVALID_PATTERN", f"{node.child.name.text} is negated, so it cannot also match rows elsewhere in the pattern", node)
        return frozenset(self.variables.index(k) for k in negated)

    def check_event_selection(self, pattern: ast.PatternNode, rpm: ast.RowsPerMatch) -> str:
        sel = self.q.event_selection
        span = self.q.event_selection_span
        if sel == "PARTITION":
            return sel
        if self.mode == "matchregex":
            raise self.error("CONFLICTING_CLAUSES", "EVENT SELECTION cannot be combined with the matchregex mode", span)
        if sel in ("NEXT", "ANY"):
            anchor = find_in_pattern(pattern, (ast.PStart, ast.PEnd))
            if anchor is not None:
                raise self.error("NOT_SUPPORTED", "the anchors ^ and $ are not supported with SKIP TILL NEXT/ANY MATCH (a match may skip rows, so row positions do not pin it)", anchor)
            if rpm.mode == "ALL" and rpm.empty == "UNMATCHED":
                raise self.error("NOT_SUPPORTED", "ALL ROWS PER MATCH WITH UNMATCHED ROWS is not supported with SKIP TILL NEXT/ANY MATCH (rows skipped inside a match have no place in the output)", rpm)
        return sel

    def check_matchregex_first(self, pattern: ast.PatternNode, defined: dict[str, ast.Define]) -> None:
        """MatchRegex: a transition from the start state has no partial match to aggregate
        over, so conditions of variables that can start a match must not read other rows
        of the match (aggregates, FIRST/LAST, X.col of another variable)."""
        for key in sorted(first_variables(pattern)):
            d = defined.get(key)
            if d is None:
                continue
            bad = reads_partial_match(d.condition, key)
            if bad is not None:
                raise self.error(
                    "MATCHREGEX_FIRST_AGGREGATE",
                    f"in matchregex mode, {d.name.text} can start a match, so its condition cannot read the partial match (no rows precede it)",
                    bad,
                )

    def check_within(self, order: tuple[SortKey, ...]):
        w = self.q.within
        if w is None:
            return None
        if not order:
            raise self.error("WITHIN_NEEDS_ORDER", "WITHIN measures time on the first ORDER BY column; add ORDER BY", w)
        col = self.schema[order[0].index]
        if w.is_interval:
            if col.type not in TIME_TYPES:
                raise self.error("TYPE_MISMATCH", f"WITHIN with an interval needs a timestamp as the first ORDER BY column; {col.name!r} is {col.type.value}", w)
            if w.value < dt.timedelta(0):
                raise self.error("INVALID_WITHIN", "WITHIN must not be negative", w)
        else:
            if not col.type.numeric:
                raise self.error("TYPE_MISMATCH", f"WITHIN with a number needs a numeric first ORDER BY column; {col.name!r} is {col.type.value} (use an INTERVAL)", w)
            if w.value < 0:
                raise self.error("INVALID_WITHIN", "WITHIN must not be negative", w)
        return w.value
