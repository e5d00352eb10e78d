"""Names, types and the rules of the language, checked in one place.

``analyze(query, schema)`` returns a frozen AnalyzedQuery or raises a QueryError with a code
and the position of the offending text (a DataError when a referenced column's type cannot
be used at all).
"""

from __future__ import annotations

from sparkcep.analysis.binding import ExpressionBinder
from sparkcep.analysis.bound import (
    AnalyzedQuery,
    BExpr,
    MeasureDef,
    SortKey,
    Type,
)
from sparkcep.analysis.patterns import find_in_pattern, has_exclusion
from sparkcep.analysis.scope import Column, Scope
from sparkcep.analysis.segment_rules import SegmentRules
from sparkcep.analysis.selection_rules import SelectionRules
from sparkcep.errors import DataError, OptionError, QueryError, Span, UnknownColumnError
from sparkcep.language import ast


class Analyzer(ExpressionBinder, SegmentRules, SelectionRules):
    def __init__(self, query: ast.Query, schema: list[Column], mode: str = "sql"):
        self.q = query
        self.schema = schema
        self.mode = mode
        self.variables: list[str] = []
        self.subsets: dict[str, frozenset[int]] = {}
        self.segment = any(d.segment for d in query.defines) or find_in_pattern(query.pattern, (ast.PAnd, ast.PTilde)) is not None
        self.defining: int | None = None  # the variable whose DEFINE is being bound

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
                "(supported: integers, floating point, decimal up to 38 digits, boolean, string, timestamp, date, duration, binary, list)",
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
        define_scope = Scope("DEFINE")
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

        measure_scope = Scope("MEASURES")
        measures = []
        for m in q.measures:
            expr = self.bind(m.expr, measure_scope, in_row=False)
            if self.segment:
                self.check_segment_measure(m, expr, measure_scope)
            measures.append(MeasureDef(m.name.text, expr, expr.type, m.expr.span))
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
        has_excl = has_exclusion(pattern)
        if has_excl and rpm.mode == "ALL" and rpm.empty == "UNMATCHED":
            raise self.error("CONFLICTING_CLAUSES", "pattern exclusions {- -} cannot be used with ALL ROWS PER MATCH WITH UNMATCHED ROWS", rpm)
        if self.mode == "matchregex" and skip_mode not in ("PAST_LAST",):
            where = q.all_matches_span if q.all_matches and q.all_matches_span is not None else q.skip
            raise self.error("CONFLICTING_CLAUSES", "the matchregex mode reports non-overlapping matches; it cannot be combined with AFTER MATCH SKIP other than PAST LAST ROW or with ALL MATCHES", where)

        within = self.check_within(order)
        event_selection = self.check_event_selection(pattern, rpm)
        if q.maxlength is not None and q.maxlength < 1:
            raise self.error("INVALID_MAXLENGTH", "MAXLENGTH must be at least 1", q.maxlength_span)

        if rpm.mode == "ONE" and not measures and not partition:
            # As Trino: a table of no columns would drop even how many matches there were.
            raise self.error("NO_OUTPUT_COLUMNS", "ONE ROW PER MATCH outputs the PARTITION BY columns and the "
                             "MEASURES; this query has neither, so its result would have no columns. Add a measure "
                             "(e.g. MEASURES MATCH_NUMBER() AS match) or use ALL ROWS PER MATCH",
                             rpm if rpm.span is not None and rpm.span.line else q.pattern)
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
        for i, n in enumerate(part):
            if n in part[:i]:  # its output would hold two columns of one name
                raise self.error("DUPLICATE_NAME", f"PARTITION BY names {n!r} twice", self.q.partition_by[i])
        order = [self.schema[self.column(s.column)[0]].name for s in self.q.order_by]
        fixed = part + ([o for o in order if o not in part] if self.q.rows_per_match.mode == "ALL" else [])
        for n in fixed:
            seen[n.upper()] = "a PARTITION BY column" if n in part else "an ORDER BY column, which ALL ROWS PER MATCH also outputs"
        for m, node in zip(measures, self.q.measures, strict=True):
            if m.name.upper() in seen:
                raise self.error("DUPLICATE_NAME", f"measure {m.name!r} has the same name as {seen[m.name.upper()]}", node.name)
            seen[m.name.upper()] = "another measure"
        if self.q.rows_per_match.mode == "ALL":
            for c in self.schema:
                if c.name.upper() in seen and c.name not in fixed:
                    node = next((mm.name for mm in self.q.measures if mm.name.text.upper() == c.name.upper()), None)
                    raise self.error("DUPLICATE_NAME", f"measure {c.name!r} has the same name as an input column, which ALL ROWS PER MATCH also outputs", node)

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


def analyze(query: ast.Query, schema: list[Column], mode: str = "sql") -> AnalyzedQuery:
    if mode not in ("sql", "matchregex"):
        raise OptionError(f"mode must be 'sql' or 'matchregex', not {mode!r}")
    return Analyzer(query, schema, mode).run()
