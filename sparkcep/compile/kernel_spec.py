"""Which plans the compiled kernel can run, and the tables it runs them from.

The kernel (sparkcep.runtime.kernel) is the thread-list matcher of runtime.vm compiled by
numba, for plans whose DEFINE conditions are
- row-local conjuncts, already folded into per-label masks (compile.vectorize), and
- comparisons between two operands, each a number, or a numeric or timestamp column at the
  current row, at the last or first row of a variable or subset, or at the match's first row
  (each with a PREV/NEXT offset), optionally times a number; and ``t1 - t2 op INTERVAL``
  of two timestamps, compared as ``t1 op t2 + INTERVAL`` on integer microseconds (exact:
  runtime.fast checks the sums stay below 2^53).
WITHIN may be a number or a day-time interval.
A running COUNT, SUM, AVG, MIN or MAX in DEFINE (PREVIOUS too) is a register each thread
carries, as are LAST(X.col, k) and CLASSIFIER compared for (in)equality with a name or another
CLASSIFIER (the last or first label of a variable, PREV(CLASSIFIER()) over contiguous rows).
Anything else (other aggregates, other uses of CLASSIFIER, FIRST(X.col, k) with k > 0,
strings, user
functions in non-local parts) runs on the Python matcher; both give the same
answers (tests enforce it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from sparkcep.analysis.bound import BAgg, BBinary, BClassifier, BColumn, BExpr, BLiteral, BNav, Type
from sparkcep.compile.plan import Plan
from sparkcep.compile.vectorize import conjuncts, is_row_local
from sparkcep.values import EXACT_FLOAT

# Operand kinds.
LITERAL, CURRENT, REGISTER, MATCH_START, COUNT, FOLDED, AVERAGE, LABEL = 0, 1, 2, 3, 4, 5, 6, 7
_FOLD_CODES = {"SUM": 4, "AVG": 4, "MIN": 5, "MAX": 6}
OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "=": 4, "<>": 5}
MAX_SLOTS = 8
MAX_OFFSET = 8  # LAST(X.col, k) up to this k: a register per step back
LAG = 7  # register code: what register r - (kind & 63) held before the row being labelled
LABEL_LAST, LABEL_FIRST = 8, 9  # register codes: the label of the last / first such row


@dataclass(frozen=True)
class KernelSpec:
    # Registers a thread carries, over the rows it labels with the labels that have
    # reg_member[r, label] set. reg_kind[r] = code * 64 + column slot; codes: 0 the last such
    # row, 1 the first, 2 how many (less one: threads start at -1), 3 how many with the slot
    # not NULL (less one), and, as float64 bits, 4 the sum, 5 the minimum, 6 the maximum of
    # the slot's values (register r - 1 is then their code-3 count, which says NULL); 7 (LAG)
    # the value register r - slot had before the row (LAST(X.col, k), PREVIOUS aggregates);
    # 8 and 9 the label (variable number) of the last and the first such row (CLASSIFIER).
    reg_member: np.ndarray  # bool [R, labels]
    reg_kind: np.ndarray  # int64 [R]
    # Dynamic conjuncts, one row each: label, op, then per side kind, column slot, register,
    # physical offset, and (as floats) literal value and scale.
    dyn_int: np.ndarray  # int64 [D, 10]: label, op, lk, lcol, lreg, lphys, rk, rcol, rreg, rphys
    dyn_float: np.ndarray  # float64 [D, 4]: lval, lscale, rval, rscale
    columns: tuple[int, ...]  # input column index of each column slot


class _Unsupported(Exception):
    pass


def kernel_spec(plan: Plan, event_selection: bool = False) -> KernelSpec | None:
    """The kernel tables for ``plan``, or None when it needs the Python matcher.
    ``event_selection``: for the kernel's NFA^b runs (runtime.kernel_runs.selection_search), which
    also take the other event selection strategies."""
    q = plan.query
    if plan.program.slots > MAX_SLOTS:
        return None
    if (q.negated or q.event_selection != "PARTITION") and not event_selection:
        return None  # negation and event selection: runtime.nfab's runs (compiled or not)
    if q.within is not None and not isinstance(q.within, (int, float, dt.timedelta)):
        return None
    regs: list[tuple[frozenset[int] | None, int]] = []  # (labels, None: all; register kind)
    columns: list[int] = []
    dyn_int, dyn_float = [], []
    try:
        for label, cond in enumerate(q.defines.get(i) for i in range(len(plan.labels))):
            if cond is None:
                continue
            for part in conjuncts(cond):
                if is_row_local(part, label):
                    continue
                ints, floats = _conjunct(part, label, regs, columns, plan.define_aggregates, plan.labels, q.gapped)
                dyn_int.append(ints)
                dyn_float.append(floats)
    except _Unsupported:
        return None
    if len(columns) > 63 or len(plan.labels) > 63:
        return None  # a register's kind holds its column slot in 6 bits
    n_labels = len(plan.labels)
    member = np.zeros((len(regs), n_labels), dtype=np.bool_)
    for r, (labels, _) in enumerate(regs):
        for lab in labels if labels is not None else range(n_labels):
            member[r, lab] = True
    kinds = []
    for r, (_, kind) in enumerate(regs):
        if isinstance(kind, tuple):  # a lag of register kind[1]: code 7 with the distance back to it
            if not 0 < r - kind[1] < 64:
                return None
            kind = LAG * 64 + (r - kind[1])
        kinds.append(kind)
    return KernelSpec(
        member,
        np.array(kinds, dtype=np.int64),
        np.array(dyn_int, dtype=np.int64).reshape(len(dyn_int), 10),
        np.array(dyn_float, dtype=np.float64).reshape(len(dyn_float), 4),
        tuple(columns),
    )


def _conjunct(e: BExpr, label: int, regs, columns, aggregates, names: tuple[str, ...],
              gapped: bool) -> tuple[list[int], list[float]]:
    if not (isinstance(e, BBinary) and e.op in OPS):
        raise _Unsupported
    if isinstance(e.left, BClassifier) or isinstance(e.right, BClassifier):
        if e.op not in ("=", "<>"):
            raise _Unsupported  # names order as strings, not as variable numbers
        left = _label_operand(e.left, regs, names, gapped)
        right = _label_operand(e.right, regs, names, gapped)
    elif isinstance(e.left, BBinary) and e.left.op == "-" and e.left.type == Type.INTERVAL:
        # t1 - t2 op INTERVAL as t1 op t2 + INTERVAL: the same on exact integers.
        left = _operand(e.left.left, label, regs, columns, aggregates)
        right = _operand(e.left.right, label, regs, columns, aggregates)
        right = (*right[:4], right[4] + _micros(e.right), right[5])
    else:
        left = _operand(e.left, label, regs, columns, aggregates)
        right = _operand(e.right, label, regs, columns, aggregates)
    return [label, OPS[e.op], *left[:4], *right[:4]], [left[4], left[5], right[4], right[5]]


def _label_operand(e: BExpr, regs, names: tuple[str, ...], gapped: bool) -> tuple:
    """CLASSIFIER as a variable's number (a label register), or a name literal as one (-2:
    no variable has that name, so it equals none)."""
    if isinstance(e, BLiteral):
        if e.type != Type.VARCHAR or e.value is None:
            raise _Unsupported
        return (LITERAL, 0, 0, 0, float(names.index(e.value)) if e.value in names else -2.0, 1.0)
    if not isinstance(e, BClassifier) or not e.pointer.running:
        raise _Unsupported
    p = e.pointer
    if p.offset > MAX_OFFSET:
        raise _Unsupported  # a register per step back
    if p.physical == 0 and p.last:
        # LAST(CLASSIFIER(X), k): the label register of X's last row, lagged k rows of X
        reg = _register(regs, (p.labels, LABEL_LAST * 64))
        for _ in range(p.offset):
            reg = _register(regs, (p.labels, ("lag", reg)))
    elif p.physical == 0 and p.offset == 0:
        reg = _register(regs, (p.labels, LABEL_FIRST * 64))  # FIRST(CLASSIFIER(X))
    elif p.physical == -1 and p.labels is None and p.last and p.offset == 0 and not gapped:
        # PREV(CLASSIFIER()): the row before, if the match holds it; over contiguous rows,
        # the label the last-row register held before this row
        reg = _register(regs, (None, ("lag", _register(regs, (None, LABEL_LAST * 64)))))
    else:
        raise _Unsupported
    return (LABEL, 0, reg, 0, 0.0, 1.0)


def _micros(e: BExpr) -> float:
    """A day-time interval literal in microseconds (the unit runtime.fast reads timestamps in)."""
    if not (isinstance(e, BLiteral) and isinstance(e.value, dt.timedelta)):
        raise _Unsupported
    return float(e.value // dt.timedelta(microseconds=1))


def _operand(e: BExpr, label: int, regs, columns, aggregates) -> tuple[int, int, int, int, float, float]:
    """(kind, column slot, register, physical, literal, scale): a literal, or scale × the
    column's value (or a count) + literal."""
    scale = 1.0
    if isinstance(e, BBinary) and e.op == "*":
        if isinstance(e.right, BLiteral) and e.right.type in (Type.BIGINT, Type.DOUBLE) and e.right.value is not None:
            scale, e = float(e.right.value), e.left
        elif isinstance(e.left, BLiteral) and e.left.type in (Type.BIGINT, Type.DOUBLE) and e.left.value is not None:
            scale, e = float(e.left.value), e.right
        else:
            raise _Unsupported
    if isinstance(e, BLiteral):
        if e.type not in (Type.BIGINT, Type.DOUBLE) or e.value is None:
            raise _Unsupported
        if e.type == Type.BIGINT and not abs(e.value * scale) < EXACT_FLOAT:
            raise _Unsupported  # the float would not be the exact integer
        return (LITERAL, 0, 0, 0, float(e.value) * scale, 1.0)
    if isinstance(e, BAgg):
        spec = aggregates[e.index].spec
        reg = _aggregate_register(spec, regs, columns)
        kind = COUNT if spec.func == "COUNT" else AVERAGE if spec.func == "AVG" else FOLDED
        if spec.previous and (spec.labels is None or label in spec.labels):
            # PREVIOUS: the rows before this one, which is labelled with a member: the value
            # the register had before this row (for a sum or extreme, with its count at r - 1).
            if kind == COUNT:
                reg = _register(regs, (spec.labels, ("lag", reg)))
            else:
                key = (spec.labels, ("lag value", reg))
                if key not in regs:
                    regs += [(spec.labels, ("lag count", reg - 1)), key]
                reg = regs.index(key)
        return (kind, 0, reg, 0, 0.0, scale)
    if not (isinstance(e, BNav) and isinstance(e.inner, BColumn)
            and e.inner.type in (Type.BIGINT, Type.DOUBLE, Type.TIMESTAMP)):
        raise _Unsupported
    if e.inner.type == Type.TIMESTAMP and scale != 1.0:
        raise _Unsupported
    p = e.pointer
    if not p.running or (p.offset != 0 and not (p.last and p.offset <= MAX_OFFSET)):
        raise _Unsupported
    if e.inner.index not in columns:
        columns.append(e.inner.index)
    slot = columns.index(e.inner.index)
    if p.offset:
        # LAST(X.col, k): the last row labelled with X, k times the row that register held
        # before its next such row (the current row counts when it is labelled with X).
        reg = _register(regs, (p.labels, 0))
        for _ in range(p.offset):
            reg = _register(regs, (p.labels, ("lag", reg)))
        return (REGISTER, slot, reg, p.physical, 0.0, scale)
    if p.labels is None:
        kind = CURRENT if p.last else MATCH_START
        return (kind, slot, 0, p.physical, 0.0, scale)
    if p.last and label in p.labels:
        return (CURRENT, slot, 0, p.physical, 0.0, scale)
    # codes 1 (first row) and 0 (last row), no slot
    return (REGISTER, slot, _register(regs, (p.labels, 64 if not p.last else 0)), p.physical, 0.0, scale)


def _aggregate_register(spec, regs, columns) -> int:
    """The register of a running aggregate in DEFINE, over the rows the thread labelled with
    its variables (the row being labelled included): COUNT(X.*), COUNT(X.col), or SUM, AVG
    (a sum), MIN, MAX of a numeric column (runtime.fast checks BIGINT sums stay exact)."""
    if spec.distinct or spec.key is not None:
        raise _Unsupported
    if spec.arg is None:
        if spec.func != "COUNT":
            raise _Unsupported
        return _register(regs, (spec.labels, 2 * 64))
    numeric = (Type.BIGINT, Type.DOUBLE) if spec.func != "COUNT" else (Type.BIGINT, Type.DOUBLE, Type.TIMESTAMP)
    if not (isinstance(spec.arg, BColumn) and spec.arg.type in numeric):
        raise _Unsupported
    if spec.arg.index not in columns:
        columns.append(spec.arg.index)
    slot = columns.index(spec.arg.index)
    if spec.func == "COUNT":
        return _register(regs, (spec.labels, 3 * 64 + slot))
    if spec.func not in _FOLD_CODES:
        raise _Unsupported
    key = (spec.labels, _FOLD_CODES[spec.func] * 64 + slot)
    if key not in regs:
        regs += [(spec.labels, 3 * 64 + slot), key]  # its count first: a value register's r - 1
    return regs.index(key)


def _register(regs, key) -> int:
    if key not in regs:
        regs.append(key)
    return regs.index(key)
