"""Segment query → physical operator tree.

Logical rewrites (T-REX §3): windows of window-only variables joined by ``&`` are embedded in
their siblings; a parent's window bounds the lengths of its parts (push-down: at most as
many rows); optional items of a sequence are expanded (each choice of empty items is an
alternative whose remaining neighbours meet by the junction rule). Conditions that read other
variables go to a Filter above the lowest join that holds all the variables they read.

Physical choices: the rule-based plans T-REX compares — ``sort_merge`` (left-deep, both
children evaluated whole), ``right_probe`` (left-deep, the left child probes the right),
``left_probe`` (right-deep, the right child probes the left) — and ``optimized``, which for
now is a heuristic: probe from the cheaper side (windows and plain comparisons before
aggregates over whole segments), ProbeNot where a window bounds the Not.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from sparkcep.analysis.bound import (
    AnalyzedQuery,
    BAgg,
    BClassifier,
    BExpr,
    BLiteral,
    BNav,
    BWindow,
    nodes,
)
from sparkcep.compile.vectorize import conjuncts
from sparkcep.segments import tree as P
from sparkcep.segments.executor import (
    And,
    Concat,
    Filter,
    Kleene,
    Not,
    Operator,
    Or,
    SegGen,
    WConcat,
)
from sparkcep.segments.space import ANY, Window

PLANS = ("optimized", "left_probe", "right_probe", "sort_merge")

# Aggregates that read a whole segment (priced higher by the heuristic than first/last).
_HEAVY = {"LINEAR_REG_R2", "LINEAR_REG_R2_SIGNED", "MANN_KENDALL_TEST", "STDDEV_SAMP", "STDDEV_POP",
          "VAR_SAMP", "VAR_POP", "COLLECT", "DELTA"}


@dataclass(frozen=True)
class VarInfo:
    window: Window
    own: tuple[BExpr, ...]  # conditions over the variable's own segment
    cross: tuple[BExpr, ...]  # conditions that read other variables' segments
    reads: frozenset[int]  # the variables ``cross`` reads

    @property
    def window_only(self) -> bool:
        return not self.own and not self.cross


def variable_info(q: AnalyzedQuery, var: int) -> VarInfo:
    cond = q.defines.get(var)
    window, own, cross, reads = ANY, [], [], set()
    aggregates = q.define_aggregates
    for c in conjuncts(cond) if cond is not None else []:
        if isinstance(c, BWindow):
            window = window & window_of(c)
            continue
        if isinstance(c, BLiteral) and c.value is True:
            continue  # TRUE: no condition (SEGMENT W AS true is a window-only variable)
        others = _others(c, var, aggregates, q)
        if others:
            cross.append(c)
            reads |= others
        else:
            own.append(c)
    return VarInfo(window, tuple(own), tuple(cross), frozenset(reads))


def window_of(w: BWindow) -> Window:
    if w.column is None:
        low = max(int(w.low), 1) if w.low is not None else 1
        return Window(low, int(w.high) if w.high is not None else None)
    return Window(1, None, ((w.column, w.low, w.high, w.unit),))


def _others(e: BExpr, var: int, aggregates, q: AnalyzedQuery) -> set[int]:
    """Variables other than ``var`` whose segments ``e`` reads."""
    out: set[int] = set()
    for x in nodes(e):
        labels = None
        if isinstance(x, (BNav, BClassifier)):
            labels = x.pointer.labels
        elif isinstance(x, BAgg):
            labels = aggregates[x.index].labels
        if labels is not None and labels != frozenset({var}):
            out |= set(labels)
    return out


def cost_rank(info: VarInfo, aggregates) -> int:
    """The heuristic's price of a leaf: windows < plain comparisons < whole-segment aggregates."""
    heavy = sum(1 for c in info.own for x in nodes(c) if isinstance(x, BAgg) and aggregates[x.index].func in _HEAVY)
    return 2 * heavy + (1 if info.own else 0)


class Planner:
    def __init__(self, q: AnalyzedQuery, how: str, model=None):
        self.q = q
        self.how = how
        self.model = model  # optimizer.CostModel: "optimized" picks by cost when it is given
        self.info = {v: variable_info(q, v) for v in range(len(q.variables))}
        self.payload = set()
        for v, info in self.info.items():
            if info.cross:
                self.payload |= {v} | set(info.reads)

    # ------------------------------------------------------------ entry
    def build(self) -> Operator | None:
        root = P.from_ast(self.q.pattern, self.q.variables, self.q.segment_variables)
        op = self.node(root, ANY)
        return op

    # ------------------------------------------------------------ nodes
    def node(self, n: P.SNode, window: Window) -> Operator | None:
        """The non-empty matches of ``n`` within ``window``; None when there are none."""
        if isinstance(n, P.SVar):
            info = self.info[n.id]
            return SegGen(n.id, n.segment, info.window & window, info.own, n.id in self.payload)
        if isinstance(n, P.SEmpty):
            return None
        if isinstance(n, P.SAlt):
            items = [x for x in (self.node(i, window) for i in n.items) if x is not None]
            return None if not items else items[0] if len(items) == 1 else Or(tuple(items), window)
        if isinstance(n, P.SAnd):
            return self.conjunction(n, window)
        if isinstance(n, P.SNot):
            child = self.node(n.child, window)
            how = "probe" if (self.how == "optimized" and not window.unbounded) else "materialize"
            if child is None:  # ~(nothing) is every segment of the window
                return SegGen(-1, True, window)
            if self.how == "optimized" and self.model is not None:
                return self.cheapest([Not(child, window, h) for h in ("materialize", "probe")])
            return Not(child, window, how)
        if isinstance(n, P.SRepeat):
            hi = n.max
            if hi == 0:
                return None
            child = self.node(n.child, window.upper())
            if child is None:
                return None
            # Repetitions that take no rows vanish: over a child that may be empty, any count
            # from one up to the maximum of non-empty repetitions meets the minimum.
            lo = 1 if n.child.nullable else max(n.min, 1)
            if hi == 1:
                return child if window.unbounded else _embed(child, window)
            return Kleene(child, lo, hi, n.child.segmental, window)
        if isinstance(n, P.SConcat):
            return self.sequence(n, window)
        raise TypeError(n)  # pragma: no cover

    def conjunction(self, n: P.SAnd, window: Window) -> Operator | None:
        # Window-only variables joined by & only bound the others' lengths (embedding).
        rest = []
        for item in n.items:
            if isinstance(item, P.SVar) and self.info[item.id].window_only and item.id not in self.payload:
                # A point variable without conditions is the window of one row.
                window = window & self.info[item.id].window & (ANY if item.segment else Window(1, 1))
            else:
                rest.append(item)
        if not rest:
            return SegGen(n.items[0].id, True, window)
        ops = [self.node(i, window) for i in rest]
        if any(o is None for o in ops):
            return None
        if self.how == "optimized" and self.model is not None and len(ops) > 1:
            return self.cheapest(list(_and_trees(ops, window, 3)))
        if self.how == "optimized":
            ops.sort(key=self.price)
        return self.fold(ops, lambda a, b, how: And(a, b, how, window))

    def sequence(self, n: P.SConcat, window: Window) -> Operator | None:
        inner = window.upper()
        choices = [([False, True] if item.nullable else [False]) for item in n.items]
        alternatives = []
        for empty in itertools.product(*choices):
            kept = [item for item, e in zip(n.items, empty, strict=True) if not e]
            if not kept:
                continue  # the empty sequence alone matches nothing
            ops = [self.node(i, inner) for i in kept]
            if any(o is None for o in ops):
                continue
            shares = [P.shares(a, b) for a, b in itertools.pairwise(kept)]
            ops, shares = self.fuse_wild(kept, ops, shares, inner)
            op = self.chain(ops, shares, window) if len(ops) > 1 else _embed(ops[0], window)
            alternatives.append(self.filtered(op))
        if not alternatives:
            return None
        return alternatives[0] if len(alternatives) == 1 else Or(tuple(alternatives), window)

    def wild(self, item: P.SNode) -> Window | None:
        """The rows window of a window-only segment variable that WConcat can stand for."""
        if not (isinstance(item, P.SVar) and item.segment and item.id not in self.payload):
            return None
        info = self.info[item.id]
        return info.window if info.window_only and not info.window.spans else None

    def fuse_wild(self, kept: list[P.SNode], ops: list[Operator], shares: list[bool], inner: Window):
        """``X W Y`` with W a window-only segment variable between two items becomes one
        WConcat(X, Y) (T-REX's wild-window concatenation): W's segments are never built."""
        out_ops, out_shares = [ops[0]], []
        j = 1
        while j < len(ops):
            w = self.wild(kept[j]) if j + 1 < len(ops) else None
            if w is not None:
                left, right = out_ops[-1], ops[j + 1]
                options = [WConcat(left, right, w.min_rows, w.max_rows, h, ANY, inner) for h in _HOWS]
                if self.how == "optimized" and self.model is not None:
                    fused = self.cheapest(options)
                else:
                    fused = WConcat(left, right, w.min_rows, w.max_rows, self.binary_how(left, right), ANY, inner)
                out_ops[-1] = fused
                j += 2
                continue
            out_shares.append(shares[j - 1])
            out_ops.append(ops[j])
            j += 1
        return out_ops, out_shares

    # ------------------------------------------------------------ physical choices
    def price(self, op: Operator) -> int:
        if isinstance(op, SegGen):
            return cost_rank(self.info[op.var], self.q.define_aggregates) if op.var >= 0 else 0
        return 3 + sum(self.price(c) for c in op.children)

    def binary_how(self, left: Operator, right: Operator) -> str:
        if self.how != "optimized":
            return self.how
        return "right_probe" if self.price(left) <= self.price(right) else "left_probe"

    def fold(self, ops: list[Operator], make) -> Operator:
        if self.how == "left_probe":  # right-deep
            out = ops[-1]
            for op in reversed(ops[:-1]):
                out = make(op, out, self.binary_how(op, out))
            return out
        out = ops[0]
        for op in ops[1:]:
            out = make(out, op, self.binary_how(out, op))
        return out

    def cheapest(self, candidates: list[Operator]) -> Operator:
        n = self.model.stats.n
        return min(candidates, key=lambda op: self.model.estimate(op, n, n)[1])

    def greedy_chain(self, ops: list[Operator], shares: list[bool], window: Window, left_deep: bool) -> Operator:
        order = range(1, len(ops)) if left_deep else range(len(ops) - 2, -1, -1)
        out = ops[0] if left_deep else ops[-1]
        for i in order:
            w = window if (i == len(ops) - 1 if left_deep else i == 0) else ANY
            if left_deep:
                options = [Concat(out, ops[i], shares[i - 1], how, w) for how in _HOWS]
            else:
                options = [Concat(ops[i], out, shares[i], how, w) for how in _HOWS]
            out = self.cheapest(options)
        return out

    def chain(self, ops: list[Operator], shares: list[bool], window: Window) -> Operator:
        if self.how == "optimized" and self.model is not None:
            if len(ops) <= 4:  # every shape and every join
                return self.cheapest(list(_concat_trees(ops, shares, window)))
            # Longer sequences: the left- and right-deep shapes, each join chosen greedily.
            return self.cheapest([self.greedy_chain(ops, shares, window, left_deep) for left_deep in (True, False)])
        last = len(ops) - 2
        if self.how == "left_probe":
            out = ops[-1]
            for i in range(len(ops) - 2, -1, -1):
                w = window if i == 0 else ANY
                out = Concat(ops[i], out, shares[i], self.binary_how(ops[i], out), w)
            return out
        out = ops[0]
        for i, op in enumerate(ops[1:]):
            w = window if i == last else ANY
            out = Concat(out, op, shares[i], self.binary_how(out, op), w)
        return out

    def filtered(self, op: Operator) -> Operator:
        """``op`` with a Filter above the lowest operator that holds each referencing
        variable and the variables it reads."""
        for v, info in self.info.items():
            if info.cross:
                op = _place(op, v, info, self.q)
        return op


_HOWS = ("sort_merge", "left_probe", "right_probe")


def _concat_trees(ops: list[Operator], shares: list[bool], window: Window, top: bool = True):
    """Every binary tree over the sequence ``ops`` (order kept) with every physical join."""
    if len(ops) == 1:
        yield ops[0]
        return
    for k in range(1, len(ops)):
        for left in _concat_trees(ops[:k], shares[:k - 1], ANY, False):
            for right in _concat_trees(ops[k:], shares[k:], ANY, False):
                for how in _HOWS:
                    yield Concat(left, right, shares[k - 1], how, window if top else ANY)


def _and_trees(ops: list[Operator], window: Window, limit: int):
    """Binary trees over the items of an & in any order (left-deep orders beyond ``limit``
    items), with every physical join."""
    if len(ops) > limit:
        orders = [ops]
    else:
        orders = list(itertools.permutations(ops))
    seen = set()
    for order in orders:
        for tree in _bushy(list(order), window):
            key = _shape(tree)
            if key not in seen:
                seen.add(key)
                yield tree


def _bushy(ops: list[Operator], window: Window):
    if len(ops) == 1:
        yield ops[0]
        return
    for k in range(1, len(ops)):
        for left in _bushy(ops[:k], window):
            for right in _bushy(ops[k:], window):
                for how in _HOWS:
                    yield And(left, right, how, window)


def _shape(op: Operator):
    if isinstance(op, And):
        return ("and", op.how, _shape(op.left), _shape(op.right))
    return id(op)


def _embed(op: Operator, window: Window) -> Operator:
    return op if window.unbounded else replace(op, window=op.window & window)


def _place(op: Operator, var: int, info: VarInfo, q: AnalyzedQuery) -> Operator:
    need = {var} | set(info.reads)
    if not need <= op.variables():
        return op
    for name in ("left", "right", "child"):
        child = getattr(op, name, None)
        if isinstance(child, Operator) and need <= child.variables():
            return replace(op, **{name: _place(child, var, info, q)})
    if isinstance(op, Or):
        return replace(op, items=tuple(_place(i, var, info, q) for i in op.items))
    labels_of = {frozenset({v}): v for v in info.reads}
    return Filter(op, var, info.cross, labels_of)


def build_plan(q: AnalyzedQuery, how: str = "optimized", model=None) -> Operator | None:
    if how not in PLANS:
        raise ValueError(how)
    return Planner(q, how, model).build()


def explain_tree(op: Operator | None, names: tuple[str, ...], indent: str = "") -> str:
    if op is None:
        return indent + "(matches nothing)"
    lines = [indent + op.label(names) + _window_suffix(op)]
    for c in op.children:
        lines.append(explain_tree(c, names, indent + "  "))
    return "\n".join(lines)


def _window_suffix(op: Operator) -> str:
    if isinstance(op, SegGen) or op.window.unbounded:
        return ""
    from sparkcep.segments.executor import window_text

    return " " + window_text(op.window)
