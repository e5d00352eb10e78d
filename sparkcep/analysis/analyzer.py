"""Names, types and the rules of the language, checked in one place.

``analyze(query, schema)`` returns a frozen AnalyzedQuery or raises a QueryError with a code
and the position of the offending text (a DataError when a referenced column's type cannot
be used at all).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sparkcep import functions
from sparkcep.analysis.bound import (
    AggregateSpec,
    AnalyzedQuery,
    BAgg,
    BBetween,
    BBinary,
    BCall,
    BCase,
    BClassifier,
    BColumn,
    BExpr,
    BIn,
    BIsNull,
    BLiteral,
    BMatchNumber,
    BNav,
    BRowLabel,
    BUnary,
    BWindow,
    LabelSet,
    MeasureDef,
    Pointer,
    SortKey,
    Type,
)
from sparkcep.errors import DataError, QueryError, Span, UnknownColumnError
from sparkcep.language import ast


@dataclass(frozen=True)
class Column:
    name: str
    type: Type | None  # None: a type sparkcep cannot compute with (passed through only)
    arrow_type: object = None


@dataclass
class _Scope:
    """Where an expression stands, which decides what it may contain."""

    clause: str  # "DEFINE" or "MEASURES"
    aggregates: list[AggregateSpec] = field(default_factory=list)


_LITERAL_TYPES = {
    "string": Type.VARCHAR,
    "boolean": Type.BOOLEAN,
    "null": Type.NULL,
    "interval": Type.INTERVAL,
    "date": Type.DATE,
    "timestamp": Type.TIMESTAMP,
}

_TIME_TYPES = (Type.TIMESTAMP, Type.DATE)


class Analyzer:
    def __init__(self, query: ast.Query, schema: list[Column], mode: str = "sql"):
        self.q = query
        self.schema = schema
        self.mode = mode
        self.variables: list[str] = []
        self.subsets: dict[str, frozenset[int]] = {}
        self.segment = any(d.segment for d in query.defines) or find_in_pattern(query.pattern, (ast.PAnd, ast.PTilde)) is not None
        self.defining: int | None = None  # the variable whose DEFINE is being bound

    # ------------------------------------------------------------ helpers
    def error(self, code: str, message: str, node: ast.Node | Span | None) -> QueryError:
        span = node if isinstance(node, Span) else (node.span if node is not None else None)
        if span is not None and span.line == 0:
            span = None
        return QueryError(code, message, span, self.q.text)

    def column(self, name: ast.Name) -> tuple[int, Column]:
        exact = [i for i, c in enumerate(self.schema) if c.name == name.text]
        if exact:
            idx = exact[0]
        elif name.quoted:
            raise self.unknown_column(name)
        else:
            folded = [i for i, c in enumerate(self.schema) if c.name.upper() == name.text.upper()]
            if not folded:
                raise self.unknown_column(name)
            if len(folded) > 1:
                names = ", ".join(repr(self.schema[i].name) for i in folded)
                raise self.error("AMBIGUOUS_COLUMN", f"column {name.text!r} could be any of {names}; quote the name", name)
            idx = folded[0]
        col = self.schema[idx]
        if col.type is None:
            raise DataError(
                f"column type {col.arrow_type} is not supported in expressions, PARTITION BY or ORDER BY "
                "(supported: integers, floating point, boolean, string, timestamp, date, duration, binary, list)",
                column=col.name,
            )
        return idx, col

    def unknown_column(self, name: ast.Name) -> UnknownColumnError:
        span = name.span if name.span.line else None
        return UnknownColumnError(f"the data has no column {name.text!r}{self._suggest(name.text)}", name.text, span, self.q.text)

    def _suggest(self, text: str) -> str:
        import difflib

        close = difflib.get_close_matches(text, [c.name for c in self.schema], n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""

    def labels_of(self, name: ast.Name) -> frozenset[int] | None:
        """The variable ids a pattern variable or subset name stands for, or None."""
        key = name.key
        if key in self.variables:
            return frozenset({self.variables.index(key)})
        if key in self.subsets:
            return self.subsets[key]
        return None

    # ------------------------------------------------------------ the query
    def run(self) -> AnalyzedQuery:
        q = self.q
        pattern = self.resolve_pattern(q.pattern)
        negated = self.check_negations(pattern)
        self.collect_subsets()

        defined: dict[str, ast.Define] = {}
        for d in q.defines:
            key = d.name.key
            if key in self.subsets:
                raise self.error("INVALID_DEFINE", f"{d.name.text} is a SUBSET; only pattern variables are defined", d.name)
            if key not in self.variables:
                raise self.error("UNKNOWN_VARIABLE", f"DEFINE names {d.name.text}, which is not in PATTERN", d.name)
            if key in defined:
                raise self.error("DUPLICATE_NAME", f"variable {d.name.text} is defined twice", d.name)
            defined[key] = d

        if self.segment:
            self.check_segment_query(pattern, defined)
        define_scope = _Scope("DEFINE")
        defines: dict[int, BExpr] = {}
        for key, d in defined.items():
            self.defining = self.variables.index(key)
            if self.segment:
                self.check_segment_condition(d)
            cond = self.bind(d.condition, define_scope, in_row=False)
            if cond.type not in (Type.BOOLEAN, Type.NULL, Type.ANY):
                raise self.error("TYPE_MISMATCH", f"the condition of {d.name.text} must be boolean, not {cond.type.value}", d.condition)
            defines[self.variables.index(key)] = cond
        self.defining = None
        if self.segment:
            self.check_references(pattern, defines, define_scope)
        if self.mode == "matchregex":
            self.check_matchregex_first(pattern, defined)

        partition = tuple(self.sort_key(n, False, False) for n in q.partition_by)
        order = tuple(
            self.sort_key(s.column, s.descending, bool(s.nulls_first)) for s in q.order_by
        )

        measure_scope = _Scope("MEASURES")
        measures = []
        for m in q.measures:
            expr = self.bind(m.expr, measure_scope, in_row=False)
            if self.segment:
                self.check_segment_measure(m, expr, measure_scope)
            measures.append(MeasureDef(m.name.text, expr, expr.type))
        self.check_output_names(measures)

        rpm = q.rows_per_match
        skip_mode, skip_target, skip_name = "PAST_LAST", None, None
        if q.all_matches:
            skip_mode = "ALL_MATCHES"
        elif q.skip is not None:
            skip_mode = q.skip.mode
            if q.skip.target is not None:
                skip_target = self.labels_of(q.skip.target)
                if skip_target is None:
                    raise self.error("UNKNOWN_VARIABLE", f"AFTER MATCH SKIP names {q.skip.target.text}, which is not a pattern variable or subset", q.skip.target)
                skip_name = q.skip.target.key
        has_excl = _has_exclusion(pattern)
        if has_excl and rpm.mode == "ALL" and rpm.empty == "UNMATCHED":
            raise self.error("CONFLICTING_CLAUSES", "pattern exclusions {- -} cannot be used with ALL ROWS PER MATCH WITH UNMATCHED ROWS", rpm)
        if self.mode == "matchregex" and skip_mode not in ("PAST_LAST",):
            raise self.error("CONFLICTING_CLAUSES", "the matchregex mode reports non-overlapping matches; it cannot be combined with AFTER MATCH SKIP other than PAST LAST ROW or with ALL MATCHES", q.skip)

        within = self.check_within(order)
        event_selection = self.check_event_selection(pattern, rpm)
        if q.maxlength is not None and q.maxlength < 1:
            raise self.error("INVALID_MAXLENGTH", "MAXLENGTH must be at least 1", q.maxlength_span)

        return AnalyzedQuery(
            text=q.text,
            variables=tuple(self.variables),
            subsets=dict(self.subsets),
            pattern=pattern,
            defines=defines,
            define_aggregates=tuple(define_scope.aggregates),
            measures=tuple(measures),
            measure_aggregates=tuple(measure_scope.aggregates),
            partition_by=partition,
            order_by=order,
            rows_per_match=rpm.mode,
            empty_matches=rpm.empty,
            skip_mode=skip_mode,
            skip_target=skip_target,
            skip_target_name=skip_name,
            within=within,
            maxlength=q.maxlength,
            mode=self.mode,
            columns=tuple(c.name for c in self.schema),
            has_exclusions=has_excl,
            event_selection=event_selection,
            negated=negated,
            segment_query=self.segment,
            segment_variables=frozenset(self.variables.index(d.name.key) for d in q.defines if d.segment),
        )

    def sort_key(self, name: ast.Name, descending: bool, nulls_first: bool) -> SortKey:
        idx, col = self.column(name)
        if col.type in (Type.ARRAY, Type.BINARY):
            what = "arrays" if col.type is Type.ARRAY else "binary values"
            raise self.error("TYPE_MISMATCH", f"column {col.name!r} holds {what}, which cannot be sorted or partitioned", name)
        return SortKey(col.name, idx, descending, nulls_first)

    def check_output_names(self, measures: list[MeasureDef]) -> None:
        seen: dict[str, str] = {}
        part = [self.schema[self.column(n)[0]].name for n in self.q.partition_by]
        order = [self.schema[self.column(s.column)[0]].name for s in self.q.order_by]
        fixed = part + ([o for o in order if o not in part] if self.q.rows_per_match.mode == "ALL" else [])
        for n in fixed:
            seen[n.upper()] = "a PARTITION BY or ORDER BY column"
        for m, node in zip(measures, self.q.measures, strict=True):
            if m.name.upper() in seen:
                raise self.error("DUPLICATE_NAME", f"measure {m.name!r} has the same name as {seen[m.name.upper()]}", node.name)
            seen[m.name.upper()] = "another measure"
        if self.q.rows_per_match.mode == "ALL":
            for c in self.schema:
                if c.name.upper() in seen and c.name not in fixed:
                    node = next((mm.name for mm in self.q.measures if mm.name.text.upper() == c.name.upper()), None)
                    raise self.error("DUPLICATE_NAME", f"measure {c.name!r} has the same name as an input column, which ALL ROWS PER MATCH also outputs", node)

    def check_within(self, order: tuple[SortKey, ...]):
        w = self.q.within
        if w is None:
            return None
        if not order:
            raise self.error("WITHIN_NEEDS_ORDER", "WITHIN measures time on the first ORDER BY column; add ORDER BY", w)
        col = self.schema[order[0].index]
        if w.is_interval:
            if col.type not in _TIME_TYPES:
                raise self.error("TYPE_MISMATCH", f"WITHIN with an interval needs a timestamp as the first ORDER BY column; {col.name!r} is {col.type.value}", w)
            if w.value < dt.timedelta(0):
                raise self.error("INVALID_WITHIN", "WITHIN must not be negative", w)
        else:
            if not col.type.numeric:
                raise self.error("TYPE_MISMATCH", f"WITHIN with a number needs a numeric first ORDER BY column; {col.name!r} is {col.type.value} (use an INTERVAL)", w)
            if w.value < 0:
                raise self.error("INVALID_WITHIN", "WITHIN must not be negative", w)
        return w.value

    # ------------------------------------------------------------ pattern
    def resolve_pattern(self, node: ast.PatternNode) -> ast.PatternNode:
        """Collect variables in order of first appearance."""
        if isinstance(node, ast.PVar):
            if node.name.key not in self.variables:
                self.variables.append(node.name.key)
            return node
        if isinstance(node, ast.PPermute):
            return ast.PPermute(tuple(self.resolve_pattern(i) for i in node.items), span=node.span)
        if isinstance(node, ast.PConcat):
            return ast.PConcat(tuple(self.resolve_pattern(i) for i in node.items), span=node.span)
        if isinstance(node, ast.PAlt):
            return ast.PAlt(tuple(self.resolve_pattern(i) for i in node.items), span=node.span)
        if isinstance(node, ast.PQuant):
            return ast.PQuant(self.resolve_pattern(node.child), node.min, node.max, node.greedy, span=node.span)
        if isinstance(node, ast.PExclude):
            return ast.PExclude(self.resolve_pattern(node.child), span=node.span)
        if isinstance(node, ast.PNot):
            return ast.PNot(self.resolve_pattern(node.child), span=node.span)
        if isinstance(node, ast.PAnd):
            return ast.PAnd(tuple(self.resolve_pattern(i) for i in node.items), span=node.span)
        if isinstance(node, ast.PTilde):
            return ast.PTilde(self.resolve_pattern(node.child), span=node.span)
        return node

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
        for place in _negations(pattern):
            if not any(place is item for item in items):
                raise self.error("NOT_SUPPORTED", "negation is only supported in the top-level sequence of the pattern (not inside quantifiers, alternations or groups)", place)
        for key, node in negated.items():
            if _count_var(pattern, key) > 1:
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

    def collect_subsets(self) -> None:
        for s in self.q.subsets:
            key = s.name.key
            if key in self.variables:
                raise self.error("DUPLICATE_NAME", f"SUBSET {s.name.text} has the name of a pattern variable", s.name)
            if key in self.subsets:
                raise self.error("DUPLICATE_NAME", f"SUBSET {s.name.text} is defined twice", s.name)
            members = set()
            for m in s.members:
                if m.key not in self.variables:
                    raise self.error("UNKNOWN_VARIABLE", f"SUBSET {s.name.text} names {m.text}, which is not in PATTERN", m)
                members.add(self.variables.index(m.key))
            self.subsets[key] = frozenset(members)

    # ------------------------------------------------------------ segment queries (T-REX)
    def check_segment_query(self, pattern: ast.PatternNode, defined: dict[str, ast.Define]) -> None:
        """What a segment query may contain (the rest is refused with the reason)."""
        q = self.q
        unsupported = [
            (q.rows_per_match.mode == "ALL", q.rows_per_match, "ALL ROWS PER MATCH"),
            (q.skip is not None, q.skip, "AFTER MATCH SKIP (segment queries return every matched segment; ALL MATCHES may be written)"),
            (q.event_selection != "PARTITION", q.event_selection_span, "EVENT SELECTION"),
            (q.within is not None, q.within, "WITHIN (use window(col, lo, hi, unit) on a variable)"),
            (q.maxlength is not None, q.maxlength_span, "MAXLENGTH (use window(lo, hi) on a variable)"),
            (bool(q.subsets), q.subsets[0] if q.subsets else None, "SUBSET"),
            (self.mode == "matchregex", None, "the matchregex mode"),
        ]
        for bad, node, what in unsupported:
            if bad:
                raise self.error("NOT_SUPPORTED", f"{what} is not supported in a segment query (one with SEGMENT "
                                 "variables, & or ~)", node)
        other = find_in_pattern(pattern, (ast.PExclude, ast.PPermute, ast.PNot, ast.PStart, ast.PEnd))
        if other is not None:
            what = {ast.PExclude: "exclusions {- -}", ast.PPermute: "PERMUTE", ast.PNot: "SASE negation !X",
                    ast.PStart: "the anchor ^", ast.PEnd: "the anchor $"}[type(other)]
            raise self.error("NOT_SUPPORTED", f"{what} is not supported in a segment query", other)
        quant = find_in_pattern(pattern, (ast.PQuant,))
        if quant is not None and _reluctant(pattern):
            raise self.error("NOT_SUPPORTED", "reluctant quantifiers have no meaning in a segment query (every "
                             "matched segment is returned)", _reluctant(pattern))

    def check_segment_condition(self, d: ast.Define) -> None:
        """window() only as the condition or a conjunct of it; in a segment variable's
        condition every column inside an aggregate, a navigation or window()."""
        for call in _calls_named(d.condition, "WINDOW"):
            if not any(call is c for c in _conjuncts_ast(d.condition)):
                raise self.error("INVALID_WINDOW", "window(...) must be the whole condition or one of its AND-ed "
                                 "conditions", call)
        if d.segment:
            bare = _bare_column(d.condition)
            if bare is not None:
                raise self.error("BARE_COLUMN", f"in a segment variable's condition every column sits inside an "
                                 f"aggregate or window() (write first({bare.column.text}), last(...), avg(...), ...)",
                                 bare)

    def check_references(self, pattern: ast.PatternNode, defines: dict[int, BExpr], scope: _Scope) -> None:
        """A variable another condition reads occurs once, outside quantifiers, ~ and |; so
        does (for now) the variable whose condition reads it."""
        from sparkcep.analysis.bound import nodes

        for var, cond in defines.items():
            reads = set()
            for x in nodes(cond):
                labels = None
                if isinstance(x, (BNav, BClassifier)):
                    labels = x.pointer.labels
                elif isinstance(x, BAgg):
                    labels = scope.aggregates[x.index].labels
                if labels is not None and labels != frozenset({var}):
                    reads |= set(labels)
            if not reads:
                continue
            for v, role in [(r, "is read by another variable's condition") for r in sorted(reads)] + [
                    (var, "reads another variable (not supported yet when it repeats)")]:
                name = self.variables[v]
                places = _places(pattern, name)
                if len(places) != 1 or places[0]:
                    node = next(d for d in self.q.defines if d.name.key == self.variables[var])
                    raise self.error("INVALID_REFERENCE", f"{name} {role}, so it must occur exactly once in PATTERN, "
                                     "outside quantifiers, ~ and |", node)

    def check_segment_measure(self, m: ast.Measure, expr: BExpr, scope: _Scope) -> None:
        from sparkcep.analysis.bound import nodes

        for x in nodes(expr):
            labels = x.pointer.labels if isinstance(x, (BNav, BClassifier)) else (
                scope.aggregates[x.index].labels if isinstance(x, BAgg) else None)
            if isinstance(x, BClassifier) or labels is not None:
                raise self.error("NOT_SUPPORTED", "MEASURES of a segment query read the matched segment's rows: "
                                 "variable-qualified references and CLASSIFIER are not supported there yet", m.expr)

    def bind_window(self, e: ast.Call) -> BWindow:
        args = list(e.args)
        if self.defining is None:
            raise self.error("INVALID_WINDOW", "window(...) is a condition of a variable in DEFINE", e)
        column = None
        unit = 1.0
        if args and isinstance(args[0], ast.ColumnRef):
            ref = args.pop(0)
            if ref.qualifier is not None and (self.labels_of(ref.qualifier) != frozenset({self.defining})):
                raise self.error("INVALID_WINDOW", "window(col, ...) measures the variable's own segment", ref)
            idx, col = self.column(ref.column)
            if not (col.type.numeric or col.type in _TIME_TYPES):
                raise self.error("TYPE_MISMATCH", f"window() spans need a numeric or timestamp column, not {col.type.value}", ref)
            column = idx
            last = args[-1] if args else None
            if isinstance(last, ast.ColumnRef) and last.qualifier is None:
                args.pop()
                name = last.column.text.upper()
                name = name[:-1] if name.endswith("S") else name
                if name not in _WINDOW_UNITS:
                    raise self.error("INVALID_WINDOW", "the unit of a window is DAY, HOUR, MINUTE or SECOND", last)
                if col.type not in _TIME_TYPES:
                    raise self.error("INVALID_WINDOW", f"a unit is for timestamp columns; {col.name!r} is {col.type.value} "
                                     "(its span is in its own units)", last)
                unit = _WINDOW_UNITS[name]
            if len(args) not in (1, 2):
                raise self.error("WRONG_ARGUMENTS", "window(col, lo, hi [, unit]) or window(col, size [, unit]) takes a "
                                 "column, its bounds and, for timestamps, a unit (seconds by default)", e)
        elif len(args) > 2:
            raise self.error("WRONG_ARGUMENTS", "window() takes (), (n), (lo, hi), or (col, lo, hi [, unit])", e)
        bounds = []
        for a in args:
            if isinstance(a, ast.Literal) and a.kind == "null":
                bounds.append(None)
            elif isinstance(a, ast.Literal) and a.kind == "number" and a.value >= 0:
                if column is None and not isinstance(a.value, int):
                    raise self.error("INVALID_WINDOW", "a window in rows takes whole numbers", a)
                bounds.append(a.value)
            else:
                raise self.error("INVALID_WINDOW", "window bounds are numbers ≥ 0 (or NULL for no upper bound)", a)
        if len(bounds) == 1:
            bounds = [bounds[0], bounds[0]]
        low, high = (bounds + [None, None])[:2]
        if low is None and high is not None:
            raise self.error("INVALID_WINDOW", "a window needs a lower bound (0 for none)", e)
        if low is not None and high is not None and low > high:
            raise self.error("INVALID_WINDOW", f"the window's lower bound {low} exceeds its upper bound {high}", e)
        return BWindow(column, low, high, unit)

    def check_matchregex_first(self, pattern: ast.PatternNode, defined: dict[str, ast.Define]) -> None:
        """MatchRegex: a transition from the start state has no partial match to aggregate
        over, so conditions of variables that can start a match must not read other rows
        of the match (aggregates, FIRST/LAST, X.col of another variable)."""
        for key in sorted(_first_variables(pattern)):
            d = defined.get(key)
            if d is None:
                continue
            bad = _reads_partial_match(d.condition, key)
            if bad is not None:
                raise self.error(
                    "MATCHREGEX_FIRST_AGGREGATE",
                    f"in matchregex mode, {d.name.text} can start a match, so its condition cannot read the partial match (no rows precede it)",
                    bad,
                )

    # ------------------------------------------------------------ expressions
    def bind(self, e: ast.Expr, scope: _Scope, in_row: bool, row_labels: list | None = None) -> BExpr:
        """Bind ``e``. Outside a row context column references become pointers; inside one
        (the argument of a navigation or aggregate) they are plain columns of that row, and
        their qualifiers are collected in ``row_labels``."""
        if isinstance(e, ast.Literal):
            return self.bind_literal(e)
        if isinstance(e, ast.ColumnRef):
            return self.bind_column(e, scope, in_row, row_labels)
        if isinstance(e, ast.Star):
            raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", e)
        if isinstance(e, ast.Call):
            return self.bind_call(e, scope, in_row, row_labels)
        if isinstance(e, ast.Unary):
            x = self.bind(e.operand, scope, in_row, row_labels)
            if e.op == "NOT":
                self.expect_bool(x, e.operand, "NOT")
                return BUnary("NOT", x, Type.BOOLEAN)
            if not (x.type.numeric or x.type in (Type.NULL, Type.INTERVAL, Type.ANY)):
                raise self.error("TYPE_MISMATCH", f"cannot negate a {x.type.value}", e)
            return BUnary("-", x, x.type if x.type is not Type.NULL else Type.BIGINT)
        if isinstance(e, ast.Binary):
            return self.bind_binary(e, scope, in_row, row_labels)
        if isinstance(e, ast.Between):
            x, lo, hi = (self.bind(v, scope, in_row, row_labels) for v in (e.operand, e.low, e.high))
            self.expect_comparable([x, lo, hi], e)
            return BBetween(x, lo, hi, e.negated)
        if isinstance(e, ast.InList):
            x = self.bind(e.operand, scope, in_row, row_labels)
            items = tuple(self.bind(i, scope, in_row, row_labels) for i in e.items)
            self.expect_comparable([x, *items], e)
            return BIn(x, items, e.negated)
        if isinstance(e, ast.IsNull):
            return BIsNull(self.bind(e.operand, scope, in_row, row_labels), e.negated)
        if isinstance(e, ast.Cast):
            return self.bind_cast(e, scope, in_row, row_labels)
        if isinstance(e, ast.Like):
            args = [self.bind(x, scope, in_row, row_labels) for x in (e.operand, e.pattern, e.escape) if x is not None]
            for a, node in zip(args, (e.operand, e.pattern, e.escape), strict=False):
                if a.type not in (Type.VARCHAR, Type.NULL, Type.ANY):
                    raise self.error("TYPE_MISMATCH", f"LIKE needs strings, not {a.type.value}", node)
            like = BCall("LIKE", tuple(args), functions.like, True, Type.BOOLEAN)
            return BUnary("NOT", like, Type.BOOLEAN) if e.negated else like
        if isinstance(e, ast.Case):
            operand = self.bind(e.operand, scope, in_row, row_labels) if e.operand is not None else None
            whens = []
            for cond, result in e.whens:
                c = self.bind(cond, scope, in_row, row_labels)
                if operand is None:
                    self.expect_bool(c, cond, "WHEN")
                else:
                    self.expect_comparable([operand, c], cond)
                whens.append((c, self.bind(result, scope, in_row, row_labels)))
            default = self.bind(e.default, scope, in_row, row_labels) if e.default is not None else None
            rtype = functions.unify([r.type for _, r in whens] + ([default.type] if default else []))
            if rtype is None:
                raise self.error("TYPE_MISMATCH", "the results of CASE have different types", e)
            return BCase(operand, tuple(whens), default, rtype)
        raise self.error("NOT_SUPPORTED", f"{type(e).__name__} is not supported here", e)  # pragma: no cover

    def bind_cast(self, e: ast.Cast, scope: _Scope, in_row: bool, row_labels) -> BExpr:
        x = self.bind(e.operand, scope, in_row, row_labels)
        span = e.type_span if e.type_span is not None else e.span
        target = functions.CAST_TARGETS.get(e.type_name)
        if target is None:
            raise self.error("NOT_SUPPORTED", f"CAST to {e.type_name} is not supported (supported: "
                             f"{', '.join(sorted(functions.CAST_TARGETS))})", span)
        if e.sizes and (target is not Type.VARCHAR or len(e.sizes) > 1):
            raise self.error("NOT_SUPPORTED", f"{e.type_name} takes no size here (only VARCHAR(n))", span)
        if e.sizes and e.sizes[0] < 1:
            raise self.error("NOT_SUPPORTED", "VARCHAR(n) needs n of at least 1", span)
        if x.type not in (Type.NULL, Type.ANY) and x.type not in functions.CASTABLE[target]:
            raise self.error("TYPE_MISMATCH", f"cannot cast {x.type.value} to {e.type_name.lower()}", e)
        what = ("TRY_CAST" if e.try_ else "CAST") + f" AS {e.type_name}"
        return BCall(what, (x,), functions.cast_function(e.type_name, e.sizes, e.try_), True, target)

    def bind_literal(self, e: ast.Literal) -> BLiteral:
        if e.kind == "number":
            return BLiteral(e.value, Type.BIGINT if isinstance(e.value, int) else Type.DOUBLE)
        return BLiteral(e.value, _LITERAL_TYPES[e.kind])

    def bind_column(self, e: ast.ColumnRef, scope: _Scope, in_row: bool, row_labels: list | None) -> BExpr:
        labels: LabelSet = None
        if e.qualifier is not None:
            labels = self.labels_of(e.qualifier)
            if labels is None:
                raise self.error("UNKNOWN_VARIABLE", f"{e.qualifier.text} is not a pattern variable or subset", e.qualifier)
        idx, col = self.column(e.column)
        inner = BColumn(idx, col.name, col.type)
        if in_row:
            row_labels.append((labels, e))
            return inner
        return BNav(Pointer(labels), inner, col.type)

    def expect_bool(self, x: BExpr, node: ast.Node, what: str) -> None:
        if x.type not in (Type.BOOLEAN, Type.NULL, Type.ANY):
            raise self.error("TYPE_MISMATCH", f"{what} needs a boolean, not {x.type.value}", node)

    def expect_comparable(self, xs: list[BExpr], node: ast.Node, equality: bool = False) -> None:
        types = [x.type for x in xs]
        if Type.ANY in types:
            return
        if functions.unify(types) is None or (Type.ARRAY in types and not equality):
            names = " and ".join(sorted({t.value for t in types if t is not Type.NULL}))
            raise self.error("TYPE_MISMATCH", f"cannot compare {names}", node)

    def bind_binary(self, e: ast.Binary, scope: _Scope, in_row: bool, row_labels) -> BExpr:
        left = self.bind(e.left, scope, in_row, row_labels)
        right = self.bind(e.right, scope, in_row, row_labels)
        op = e.op
        lt, rt = left.type, right.type
        if op in ("AND", "OR"):
            self.expect_bool(left, e.left, op)
            self.expect_bool(right, e.right, op)
            return BBinary(op, left, right, Type.BOOLEAN)
        if op in ("=", "<>", "<", "<=", ">", ">="):
            self.expect_comparable([left, right], e, equality=op in ("=", "<>"))
            return BBinary(op, left, right, Type.BOOLEAN)
        if op == "||":
            if Type.ARRAY in (lt, rt) and all(t in (Type.ARRAY, Type.NULL, Type.ANY) for t in (lt, rt)):
                return BCall("CONCAT", (left, right), functions.lookup("CONCAT").impl, True, Type.ARRAY)
            for t, n in ((lt, e.left), (rt, e.right)):
                if t not in (Type.VARCHAR, Type.NULL, Type.ANY):
                    raise self.error("TYPE_MISMATCH", f"'||' joins strings, not {t.value}", n)
            return BBinary(op, left, right, Type.VARCHAR)
        # Arithmetic.
        if Type.ANY in (lt, rt):
            return BBinary(op, left, right, Type.ANY)
        if lt is Type.NULL or rt is Type.NULL:
            other = rt if lt is Type.NULL else lt
            return BBinary(op, left, right, other if other is not Type.NULL else Type.BIGINT)
        if lt.numeric and rt.numeric:
            rtype = Type.DOUBLE if Type.DOUBLE in (lt, rt) else Type.BIGINT
            return BBinary(op, left, right, rtype)
        if op == "-" and lt in _TIME_TYPES and rt in _TIME_TYPES:
            return BBinary(op, left, right, Type.INTERVAL)
        if op in ("+", "-") and lt in _TIME_TYPES and rt is Type.INTERVAL:
            return BBinary(op, left, right, Type.TIMESTAMP)
        if op == "+" and lt is Type.INTERVAL and rt in _TIME_TYPES:
            return BBinary(op, left, right, Type.TIMESTAMP)
        if op in ("+", "-") and lt is Type.INTERVAL and rt is Type.INTERVAL:
            return BBinary(op, left, right, Type.INTERVAL)
        if op in ("*", "/") and lt is Type.INTERVAL and rt.numeric:
            return BBinary(op, left, right, Type.INTERVAL)
        if op == "*" and lt.numeric and rt is Type.INTERVAL:
            return BBinary(op, left, right, Type.INTERVAL)
        raise self.error("TYPE_MISMATCH", f"cannot apply '{op}' to {lt.value} and {rt.value}", e)

    # ------------------------------------------------------------ calls
    def bind_call(self, e: ast.Call, scope: _Scope, in_row: bool, row_labels) -> BExpr:
        name = e.name.key if not e.name.quoted else e.name.text.upper()
        if e.semantics is not None:
            if scope.clause == "DEFINE" and e.semantics == "FINAL":
                raise self.error("INVALID_SEMANTICS", "FINAL is not allowed in DEFINE (conditions see only the rows matched so far)", e)
            if e.semantics == "PREVIOUS":
                if scope.clause != "DEFINE":
                    raise self.error("INVALID_SEMANTICS", "PREVIOUS is only allowed in DEFINE (the rows matched before the current row)", e)
                if name not in functions.AGGREGATES:
                    raise self.error("INVALID_SEMANTICS", f"PREVIOUS applies to aggregates, not {e.name.text} (use LAST(X.col, 1) for the previous row of X)", e)
            if name not in ("FIRST", "LAST", "CLASSIFIER") and name not in functions.AGGREGATES:
                raise self.error("INVALID_SEMANTICS", f"RUNNING and FINAL apply to FIRST, LAST, CLASSIFIER and aggregates, not {e.name.text}", e)
        if name == "WINDOW" and not e.name.quoted and functions.lookup(name) is None:
            if not self.segment or scope.clause != "DEFINE":
                raise self.error("INVALID_WINDOW", "window(...) is a condition of a variable in a segment query's "
                                 "DEFINE (DEFINE SEGMENT v AS window(...))", e)
            if in_row:
                raise self.error("INVALID_WINDOW", "window(...) cannot be nested", e)
            return self.bind_window(e)
        if name == "CLASSIFIER" and self.segment:
            raise self.error("NOT_SUPPORTED", "CLASSIFIER is not supported in a segment query", e)
        if name in functions.NAVIGATION:
            if in_row:
                raise self.error("INVALID_NAVIGATION", f"{e.name.text} cannot be nested here (only FIRST/LAST inside PREV/NEXT)", e)
            return self.bind_navigation(e, name, scope)
        if name in functions.AGGREGATES or functions.user_aggregate(name) is not None:
            if in_row:
                raise self.error("INVALID_AGGREGATE", f"aggregate {e.name.text} cannot be used inside a navigation or another aggregate", e)
            return self.bind_aggregate(e, name, scope)
        if name == "CLASSIFIER":
            labels = self.classifier_labels(e)
            if in_row:
                # Inside an aggregate: the label of the row being aggregated; CLASSIFIER(U)
                # limits the rows to U's, as U.col would.
                row_labels.append((labels, e))
                return BRowLabel()
            running = e.semantics != "FINAL"
            return BClassifier(Pointer(labels, running=running))
        if name == "MATCH_NUMBER":
            if e.args:
                raise self.error("WRONG_ARGUMENTS", "MATCH_NUMBER takes no arguments", e)
            if in_row:
                raise self.error("NOT_SUPPORTED", "MATCH_NUMBER inside a navigation or aggregate is not supported", e)
            if scope.clause == "DEFINE" and self.q.all_matches:
                raise self.error("NOT_SUPPORTED", "MATCH_NUMBER in DEFINE is not supported with ALL MATCHES (the "
                                 "matches from one row are numbered only once all are found)", e)
            return BMatchNumber()
        if e.extract and name not in functions.TIME_FIELDS:
            raise self.error("NOT_SUPPORTED", f"EXTRACT({e.name.text} FROM ...) is not supported (fields: "
                             f"{', '.join(sorted(functions.TIME_FIELDS))})", e.name)
        fn = functions.lookup(name)
        if fn is None:
            raise self.error("UNKNOWN_FUNCTION", f"unknown function {e.name.text} (register your own with sparkcep.register_function)", e.name)
        for a in e.args:
            if isinstance(a, ast.Star):
                raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", a)
        args = tuple(self.bind(a, scope, in_row, row_labels) for a in e.args)
        if len(args) < fn.min_args or (fn.max_args is not None and len(args) > fn.max_args):
            want = str(fn.min_args) if fn.max_args == fn.min_args else f"{fn.min_args} to {fn.max_args if fn.max_args is not None else 'any number of'}"
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes {want} arguments, got {len(args)}", e)
        rtype = fn.result([a.type for a in args]) if not fn.user_defined else fn.result([])
        if isinstance(rtype, str):
            label = "the subscript" if name == "$SUBSCRIPT" else e.name.text
            raise self.error("TYPE_MISMATCH", f"{label} {rtype}", e)
        if name in ("$SUBSCRIPT", "ELEMENT_AT", "ARRAY_MAX", "ARRAY_MIN") and args[0].type is Type.ARRAY:
            rtype = element_type(args[0], self.aggregates_of(scope))
        if e.distinct:
            raise self.error("NOT_SUPPORTED", f"DISTINCT applies to aggregates, not {e.name.text}", e)
        return BCall(name, args, fn.impl, fn.null_on_null, rtype)

    def aggregates_of(self, scope: _Scope) -> list[AggregateSpec]:
        return scope.aggregates

    def classifier_labels(self, e: ast.Call) -> LabelSet:
        if len(e.args) > 1:
            raise self.error("WRONG_ARGUMENTS", "CLASSIFIER takes at most one pattern variable", e)
        if not e.args:
            return None
        arg = e.args[0]
        if not (isinstance(arg, ast.ColumnRef) and arg.qualifier is None):
            raise self.error("WRONG_ARGUMENTS", "the argument of CLASSIFIER is a pattern variable or subset name", arg)
        labels = self.labels_of(arg.column)
        if labels is None:
            raise self.error("UNKNOWN_VARIABLE", f"{arg.column.text} is not a pattern variable or subset", arg)
        return labels

    def offset_arg(self, e: ast.Call, idx: int) -> int:
        if len(e.args) <= idx:
            return 1 if e.name.key in ("PREV", "NEXT") else 0
        a = e.args[idx]
        if not (isinstance(a, ast.Literal) and a.kind == "number" and isinstance(a.value, int)):
            raise self.error("INVALID_NAVIGATION", f"the offset of {e.name.text} must be a whole-number literal", a)
        if a.value < 0:
            raise self.error("INVALID_NAVIGATION", f"the offset of {e.name.text} must not be negative", a)
        if a.value > 2**31 - 1:
            raise self.error("NUMBER_OUT_OF_RANGE", f"the offset of {e.name.text} is out of range (at most {2**31 - 1})", a)
        return a.value

    def row_expression(self, arg: ast.Expr, scope: _Scope, what: str, node: ast.Node) -> tuple[BExpr, LabelSet, bool]:
        """Bind a navigation or aggregate argument; its column references must all refer to
        one label set. Returns (expression, label set, whether any column was referenced)."""
        refs: list = []
        inner = self.bind(arg, scope, in_row=True, row_labels=refs)
        sets = {labels for labels, _ in refs}
        if len(sets) > 1:
            raise self.error("INCONSISTENT_LABELS", f"all column references in {what} must use the same pattern variable", node)
        labels = next(iter(sets)) if sets else None
        return inner, labels, bool(refs)

    def bind_navigation(self, e: ast.Call, name: str, scope: _Scope) -> BExpr:
        if not e.args or len(e.args) > 2:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes an expression and an optional offset", e)
        offset = self.offset_arg(e, 1)
        arg = e.args[0]
        if isinstance(arg, ast.Star):
            raise self.error("SYNTAX", "'*' is only allowed as the argument of COUNT", arg)
        running = e.semantics != "FINAL"
        if isinstance(arg, ast.Call) and arg.name.key == "CLASSIFIER" and not arg.name.quoted:
            # CLASSIFIER navigated: the label of the row the navigation reaches (NULL outside
            # the match).
            labels = self.classifier_labels(arg)
            if name in ("PREV", "NEXT"):
                physical = -offset if name == "PREV" else offset
                self.check_classifier_define(scope, labels, physical, e)
                return BClassifier(Pointer(labels, True, 0, physical, running))
            return BClassifier(Pointer(labels, name == "LAST", offset, 0, running))
        if name in ("PREV", "NEXT"):
            physical = -offset if name == "PREV" else offset
            if isinstance(arg, ast.Call) and arg.name.key in ("FIRST", "LAST"):
                nested = self.bind_navigation(arg, arg.name.key, scope)
                p = nested.pointer
                if isinstance(nested, BClassifier):
                    self.check_classifier_define(scope, p.labels, physical, e)
                    return BClassifier(Pointer(p.labels, p.last, p.offset, physical, p.running))
                return BNav(Pointer(p.labels, p.last, p.offset, physical, p.running), nested.inner, nested.type)
            if isinstance(arg, ast.Call) and arg.name.key in ("PREV", "NEXT"):
                raise self.error("INVALID_NAVIGATION", f"{arg.name.text} cannot be nested in {e.name.text}", arg)
            inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
            if not has_col:
                raise self.error("INVALID_NAVIGATION", f"the argument of {e.name.text} must reference a column", arg)
            return BNav(Pointer(labels, True, 0, physical, True), inner, inner.type)
        if isinstance(arg, ast.Call) and arg.name.key in functions.NAVIGATION:
            raise self.error("INVALID_NAVIGATION", f"{arg.name.text} cannot be nested in {e.name.text} (only FIRST/LAST inside PREV/NEXT)", arg)
        inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
        if not has_col:
            raise self.error("INVALID_NAVIGATION", f"the argument of {e.name.text} must reference a column", arg)
        return BNav(Pointer(labels, name == "LAST", offset, 0, running), inner, inner.type)

    def check_classifier_define(self, scope: _Scope, labels: LabelSet, physical: int, node: ast.Node) -> None:
        """In DEFINE a condition sees the labels of the match so far; PREV/NEXT from the
        label of a variable's row would need the label of any earlier row."""
        if scope.clause == "DEFINE" and physical and labels is not None:
            raise self.error("NOT_SUPPORTED", "in DEFINE, PREV/NEXT of CLASSIFIER is supported for CLASSIFIER() "
                             "(all rows), not for one variable's rows", node)

    def bind_aggregate(self, e: ast.Call, name: str, scope: _Scope) -> BExpr:
        name = functions.AGGREGATE_ALIASES.get(name, name)
        running = e.semantics != "FINAL"
        previous = e.semantics == "PREVIOUS"
        user = functions.user_aggregate(name) if name not in functions.AGGREGATES else None
        if user is not None:
            name = "USER:" + name
        if name == "ZSCORE":
            return self.bind_zscore(e, scope)
        want = 2 if name in ("MAX_BY", "MIN_BY", "LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED") else 1
        if user is not None and len(e.args) == 2:
            want = 2
        args = e.args
        count = None
        if (name in ("MAX", "MIN") and len(args) == 2) or (name in ("MAX_BY", "MIN_BY") and len(args) == 3):
            # max(x, n) / max_by(x, y, n): the n largest as an array (Trino)
            count = self.count_argument(e, args[-1])
            args, name = args[:-1], name + "_N"
        if name == "COUNT" and not args and not e.distinct:
            args = (ast.Star(None, span=e.span),)  # count() is count(*)
        if len(args) != want:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text} takes {want} argument{'s' if want > 1 else ''}", e)
        arg = args[0]
        if isinstance(arg, ast.Star):
            if name != "COUNT" or e.distinct:
                raise self.error("WRONG_ARGUMENTS", f"'*' is only allowed as the argument of COUNT, not {e.name.text}", arg)
            labels: LabelSet = None
            if arg.qualifier is not None:
                labels = self.labels_of(arg.qualifier)
                if labels is None:
                    raise self.error("UNKNOWN_VARIABLE", f"{arg.qualifier.text} is not a pattern variable or subset", arg.qualifier)
            spec = AggregateSpec("COUNT", labels, None, running, Type.BIGINT, previous)
        else:
            inner, labels, has_col = self.row_expression(arg, scope, e.name.text, e)
            key = None
            if want == 2:
                key, key_labels, key_col = self.row_expression(args[1], scope, e.name.text, e)
                if has_col and key_col and key_labels != labels:
                    raise self.error("INCONSISTENT_LABELS", f"all column references in {e.name.text} must use the same pattern variable", e)
                labels = labels if has_col else key_labels
                if key.type is Type.ARRAY:
                    raise self.error("TYPE_MISMATCH", f"{e.name.text} needs a key that can be ordered, not array", args[1])
            rtype = self.aggregate_type(name, inner.type, arg)
            if count is not None and e.distinct:
                raise self.error("NOT_SUPPORTED", f"DISTINCT with {e.name.text}(..., n) is not supported", e)
            spec = AggregateSpec(name, labels, inner, running, rtype, previous, key, e.distinct, count)
        if spec in scope.aggregates:
            index = scope.aggregates.index(spec)
        else:
            scope.aggregates.append(spec)
            index = len(scope.aggregates) - 1
        return BAgg(index, spec.type)

    def count_argument(self, e: ast.Call, arg: ast.Node) -> int:
        if not (isinstance(arg, ast.Literal) and arg.kind == "number" and isinstance(arg.value, int) and arg.value >= 1):
            raise self.error("WRONG_ARGUMENTS", f"the last argument of {e.name.text}(..., n) is a whole number ≥ 1", arg)
        if arg.value > 10_000:
            raise self.error("WRONG_ARGUMENTS", f"{e.name.text}(..., n) keeps at most 10000 values", arg)
        return arg.value

    def bind_zscore(self, e: ast.Call, scope: _Scope) -> BExpr:
        if not self.segment or self.defining is None or self.defining in {
                self.variables.index(d.name.key) for d in self.q.defines if d.segment}:
            raise self.error("NOT_SUPPORTED", "zscore(x, k) is a condition of a point variable in a segment query", e)
        if len(e.args) != 2:
            raise self.error("WRONG_ARGUMENTS", "zscore takes a column and a number of rows", e)
        k = e.args[1]
        if not (isinstance(k, ast.Literal) and k.kind == "number" and isinstance(k.value, int) and k.value >= 1):
            raise self.error("WRONG_ARGUMENTS", "the second argument of zscore is a whole number of rows ≥ 1", k)
        inner, labels, _ = self.row_expression(e.args[0], scope, e.name.text, e)
        self.aggregate_type("ZSCORE", inner.type, e.args[0])
        spec = AggregateSpec("ZSCORE", labels, inner, True, Type.DOUBLE, False, BLiteral(k.value, Type.BIGINT))
        if spec not in scope.aggregates:
            scope.aggregates.append(spec)
        return BAgg(scope.aggregates.index(spec), Type.DOUBLE)

    def aggregate_type(self, name: str, t: Type, arg: ast.Node) -> Type:
        numeric_ok = t.numeric or t in (Type.NULL, Type.ANY)
        if name in _SERIES_AGGREGATES or name.startswith("USER:"):
            if not (numeric_ok or t in _TIME_TYPES):
                raise self.error("TYPE_MISMATCH", f"{name.removeprefix('USER:')} needs numbers or timestamps, not {t.value}", arg)
            return Type.DOUBLE
        if name == "COUNT" or name == "COUNT_IF":
            if name == "COUNT_IF" and t not in (Type.BOOLEAN, Type.NULL, Type.ANY):
                raise self.error("TYPE_MISMATCH", f"COUNT_IF needs a boolean condition, not {t.value}", arg)
            return Type.BIGINT
        if name in ("SUM", "AVG") and self.segment and t in _TIME_TYPES:
            return Type.DOUBLE  # a segment query counts timestamps as seconds since the epoch
        if name == "SUM":
            if not (numeric_ok or t is Type.INTERVAL):
                raise self.error("TYPE_MISMATCH", f"SUM needs numbers, not {t.value}", arg)
            return t if t is not Type.NULL else Type.BIGINT
        if name in ("AVG", "STDDEV_SAMP", "STDDEV_POP", "VAR_SAMP", "VAR_POP"):
            if not numeric_ok:
                raise self.error("TYPE_MISMATCH", f"{name} needs numbers, not {t.value}", arg)
            return Type.DOUBLE
        if name in ("MIN", "MAX"):
            if t is Type.ARRAY:
                raise self.error("TYPE_MISMATCH", f"{name} needs values that can be ordered, not {t.value}", arg)
            return t
        if name in ("BOOL_AND", "BOOL_OR"):
            if t not in (Type.BOOLEAN, Type.NULL, Type.ANY):
                raise self.error("TYPE_MISMATCH", f"{name} needs booleans, not {t.value}", arg)
            return Type.BOOLEAN
        if name in ("MAX_BY", "MIN_BY", "ARBITRARY"):
            return t
        if name in ("MAX_N", "MIN_N"):
            if t is Type.ARRAY:
                raise self.error("TYPE_MISMATCH", f"{name[:3]} needs values that can be ordered, not {t.value}", arg)
            return Type.ARRAY
        if name in ("MAX_BY_N", "MIN_BY_N"):
            return Type.ARRAY
        if name == "DELTA":
            if t in _TIME_TYPES:
                return Type.INTERVAL
            if numeric_ok or t is Type.INTERVAL:
                return t if t is not Type.NULL else Type.BIGINT
            raise self.error("TYPE_MISMATCH", f"DELTA needs numbers or timestamps, not {t.value}", arg)
        return Type.ARRAY  # COLLECT


def element_type(e: BExpr, aggregates: list[AggregateSpec]) -> Type:
    """The type of an array's elements where the tree shows it (ANY where it does not)."""
    if isinstance(e, BAgg) and e.index < len(aggregates) and aggregates[e.index].func in _ARRAY_AGGREGATES:
        return aggregates[e.index].arg.type
    if isinstance(e, BCall) and e.name == "ARRAY":
        t = functions.unify([a.type for a in e.args])
        return t if t not in (None, Type.NULL) else Type.ANY
    return Type.ANY


_ARRAY_AGGREGATES = {"COLLECT", "MAX_N", "MIN_N", "MAX_BY_N", "MIN_BY_N"}  # arrays of their argument
_SERIES_AGGREGATES = {"LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST", "ZSCORE"}
_WINDOW_UNITS = {"DAY": 86400.0, "HOUR": 3600.0, "MINUTE": 60.0, "SECOND": 1.0}


def _reluctant(node: ast.PatternNode) -> ast.PatternNode | None:
    if isinstance(node, ast.PQuant) and not node.greedy:
        return node
    for c in _children(node):
        got = _reluctant(c)
        if got is not None:
            return got
    return None


def _places(node: ast.PatternNode, key: str, guarded: bool = False) -> list[bool]:
    """For each occurrence of variable ``key``: whether it sits under a quantifier, ~ or |."""
    if isinstance(node, ast.PVar):
        return [guarded] if node.name.key == key else []
    inner = guarded or isinstance(node, (ast.PQuant, ast.PTilde, ast.PAlt))
    return [g for c in _children(node) for g in _places(c, key, inner)]


def _calls_named(e: ast.Expr, key: str):
    if isinstance(e, ast.Call) and e.name.key == key and not e.name.quoted:
        yield e
    for c in _expr_children(e):
        yield from _calls_named(c, key)


def _conjuncts_ast(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary) and e.op == "AND":
        return _conjuncts_ast(e.left) + _conjuncts_ast(e.right)
    return [e]


def _bare_column(e: ast.Expr) -> ast.ColumnRef | None:
    """A column reference outside every function call (aggregate, navigation, window)."""
    if isinstance(e, ast.ColumnRef):
        return e
    if isinstance(e, ast.Call):
        return None
    for c in _expr_children(e):
        got = _bare_column(c)
        if got is not None:
            return got
    return None


def _has_exclusion(node: ast.PatternNode) -> bool:
    return find_in_pattern(node, (ast.PExclude,)) is not None


def _children(node: ast.PatternNode) -> tuple[ast.PatternNode, ...]:
    return getattr(node, "items", None) or ((node.child,) if hasattr(node, "child") else ())


def _negations(node: ast.PatternNode):
    if isinstance(node, ast.PNot):
        yield node
    for c in _children(node):
        yield from _negations(c)


def find_in_pattern(node: ast.PatternNode, kinds: tuple) -> ast.PatternNode | None:
    """The first node of the pattern tree that is one of ``kinds`` (None if none)."""
    if isinstance(node, kinds):
        return node
    for c in _children(node):
        found = find_in_pattern(c, kinds)
        if found is not None:
            return found
    return None


def _count_var(node: ast.PatternNode, key: str) -> int:
    if isinstance(node, ast.PVar):
        return int(node.name.key == key)
    return sum(_count_var(c, key) for c in _children(node))


def _first_variables(node: ast.PatternNode) -> set[str]:
    """Variables that can match the first row of a match."""
    firsts, _ = _firsts(node)
    return firsts


def _firsts(node: ast.PatternNode) -> tuple[set[str], bool]:
    """(variables that can come first, whether the node can match nothing)."""
    if isinstance(node, ast.PVar):
        return {node.name.key}, False
    if isinstance(node, (ast.PEmpty, ast.PStart, ast.PEnd)):
        return set(), True
    if isinstance(node, ast.PConcat):
        out: set[str] = set()
        for item in node.items:
            f, nullable = _firsts(item)
            out |= f
            if not nullable:
                return out, False
        return out, True
    if isinstance(node, ast.PAlt):
        out, nullable = set(), False
        for item in node.items:
            f, n = _firsts(item)
            out |= f
            nullable = nullable or n
        return out, nullable
    if isinstance(node, ast.PQuant):
        f, n = _firsts(node.child)
        return f, n or node.min == 0
    if isinstance(node, ast.PExclude):
        return _firsts(node.child)
    if isinstance(node, ast.PNot):
        return set(), True
    if isinstance(node, ast.PPermute):
        # Every item comes first in some order; the whole is empty only if all items are.
        parts = [_firsts(i) for i in node.items]
        return set().union(*(f for f, _ in parts)), all(n for _, n in parts)
    return set(), True  # pragma: no cover


def _reads_partial_match(e: ast.Expr, own: str) -> ast.Node | None:
    """The first sub-expression of ``e`` that reads rows other than the current one."""
    if isinstance(e, ast.Call):
        key = e.name.key
        if key in functions.AGGREGATES or key in ("FIRST", "LAST"):
            return e
        if key in ("PREV", "NEXT"):
            return None  # physical navigation reads the stream, not the partial match
    if isinstance(e, ast.ColumnRef) and e.qualifier is not None and e.qualifier.key != own:
        return e
    for child in _expr_children(e):
        found = _reads_partial_match(child, own)
        if found is not None:
            return found
    return None


def _expr_children(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Call):
        return list(e.args)
    if isinstance(e, ast.Unary):
        return [e.operand]
    if isinstance(e, ast.Binary):
        return [e.left, e.right]
    if isinstance(e, ast.Between):
        return [e.operand, e.low, e.high]
    if isinstance(e, ast.InList):
        return [e.operand, *e.items]
    if isinstance(e, ast.IsNull):
        return [e.operand]
    if isinstance(e, ast.Case):
        out = [e.operand] if e.operand is not None else []
        for c, r in e.whens:
            out += [c, r]
        if e.default is not None:
            out.append(e.default)
        return out
    return []


def analyze(query: ast.Query, schema: list[Column], mode: str = "sql") -> AnalyzedQuery:
    if mode not in ("sql", "matchregex"):
        raise QueryError("INVALID_OPTION", f"mode must be 'sql' or 'matchregex', not {mode!r}")
    return Analyzer(query, schema, mode).run()
