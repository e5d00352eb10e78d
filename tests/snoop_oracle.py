"""Brute-force oracle for Extended SNOOP queries, written from the README spec
("Extended SNOOP queries and expensive predicates", in particular "Which
matches fire, and in what order") only -- not from the engine.

    oracle(events, pattern, constraints, *, picks=(), within=None,
           window=None, consuming=()) -> list of {variable: position}

Pattern syntax: "E1" (a variable), ("SEQ", p1, p2, ...), ("OR", p1, ...),
("ALL", p1, ...), ("ANY", k, p1, ...), ("NOT", "X") as a SEQ item between two
other items.

Ambiguities in the spec and the (most literal) reading taken here:

1. SEQ with composite items: "in stream order" is read as "every event of
   item i strictly before every event of item i+1" (max(p_i) < min(p_i+1)),
   not the point-based SNOOP reading (terminator of p_i before terminator of
   p_i+1).
2. NOT(X) between composite neighbours: the interval is strictly after the
   last event of the previous item and strictly before the first event of the
   next item.  Several NOTs next to each other all use the nearest non-NOT
   items as their neighbours; a NOT at either end of a SEQ is an error.
3. The witness for NOT(X) may be ANY stream event in that interval, including
   an event bound to another variable of the match (possible when the SEQ sits
   inside an ALL/ANY) and including events consumed by earlier firings
   (candidates are defined "before selection and consumption").
4. A constraint naming the negated variable X and some other variable that is
   unbound in the match (OR branch not taken) does not apply to the witness
   test.  If no constraint on X applies, every event in the interval is a
   witness (X then matches any event).
5. Definition 4.4.12: compare sorted positions: last event, then first
   event, then drop the last event of both and repeat; a (shorter) sequence
   that runs out first goes first.  Ties (same set of events) are broken by
   comparing the tuples of variable names listed in stream order of their
   events, using ordinary Python string comparison (so "E10" < "E2").
6. PICK first/last: the set of alternatives of candidate c is every other
   candidate (after all filtering by pattern, constraints, windows and PICK
   distances) that binds the same variables with the same events for every
   variable other than X.  The spec says the decision is made "among the
   candidates that end at the same event"; this equals "all alternatives"
   whenever Y is bound, but differs if X is bound while Y is not (OR), where
   X can be the last event. [Settled since: the README says PICK applies to
   the matches that bind both X and Y, so that case does not arise.]
   c is refused if an alternative has already fired, or if an alternative
   whose X event is not (yet) consumed has an earlier (first) / later (last)
   X event.  PICK on a candidate that does not bind X is a no-op.
7. PICK distance: applied only when both X and Y are bound:
   0 < pos(Y) - pos(X) <= d (d=None: no distance bound).
8. A binding with no events (e.g. ANY(0, ...)) is never a candidate.
9. Constraints with no variables apply to every candidate (fn({})).
"""

from __future__ import annotations

import functools
import itertools

# ---------------------------------------------------------------- patterns

def _negated_vars(p, out):
    if isinstance(p, str):
        return out
    op = p[0]
    if op == "NOT":
        out.add(p[1])
    elif op == "ANY":
        for q in p[2:]:
            _negated_vars(q, out)
    else:
        for q in p[1:]:
            _negated_vars(q, out)
    return out


def _combine_all(parts_lists):
    """Cartesian product of operand alternatives with disjoint events."""
    results = []
    for combo in itertools.product(*parts_lists):
        binding = {}
        negs = []
        used = set()
        ok = True
        for b, n in combo:
            if used & set(b.values()):
                ok = False
                break
            used |= set(b.values())
            binding.update(b)
            negs.extend(n)
        if ok:
            results.append((binding, negs))
    return results


def _gen(p, n_events):
    """All structural bindings of pattern p: list of (binding, negations),
    negations = list of (X, lo, hi): no witness at positions lo < q < hi."""
    if isinstance(p, str):
        return [({p: i}, []) for i in range(n_events)]
    op = p[0]
    if op == "OR":
        out = []
        for q in p[1:]:
            out.extend(_gen(q, n_events))
        return out
    if op == "ALL":
        return _combine_all([_gen(q, n_events) for q in p[1:]])
    if op == "ANY":
        k = p[1]
        operands = p[2:]
        out = []
        for chosen in itertools.combinations(operands, k):
            out.extend(_combine_all([_gen(q, n_events) for q in chosen]))
        return out
    if op == "SEQ":
        items = list(p[1:])
        pos_items = [q for q in items if not (isinstance(q, tuple) and q[0] == "NOT")]
        # for each NOT, indices (into pos_items) of its neighbours
        not_specs = []
        k = 0  # number of positive items seen so far
        for q in items:
            if isinstance(q, tuple) and q[0] == "NOT":
                if k == 0:
                    raise ValueError("NOT at the start of a SEQ")
                not_specs.append((q[1], k - 1, k))
            else:
                k += 1
        for *_, b in not_specs:
            if b >= len(pos_items):
                raise ValueError("NOT at the end of a SEQ")
        out = []
        for combo in itertools.product(*[_gen(q, n_events) for q in pos_items]):
            ok = True
            for (b1, _), (b2, _) in zip(combo, combo[1:], strict=False):
                if max(b1.values()) >= min(b2.values()):
                    ok = False
                    break
            if not ok:
                continue
            binding = {}
            negs = []
            for b, n in combo:
                binding.update(b)
                negs.extend(n)
            for x, a, b in not_specs:
                negs.append((x, max(combo[a][0].values()), min(combo[b][0].values())))
            out.append((binding, negs))
        return out
    if op == "NOT":
        raise ValueError("NOT outside a SEQ")
    raise ValueError(f"unknown pattern operator {op!r}")


# ---------------------------------------------------------------- checks

def _holds(fn, variables, assignment, events):
    return fn({v: events[assignment[v]] for v in variables}) is True


def _admissible(binding, negs, events, constraints, negated, picks, within, window):
    if not binding:
        return False
    positions = sorted(binding.values())
    # windows
    if within is not None and positions[-1] - positions[0] > within:
        return False
    if window is not None:
        for a, b in zip(positions, positions[1:], strict=False):
            if b - a > window:
                return False
    # PICK distance filter
    for _kind, x, y, d in picks:
        if x in binding and y in binding:
            dist = binding[y] - binding[x]
            if dist <= 0:
                return False
            if d is not None and dist > d:
                return False
    # positive constraints (no negated variable named)
    for variables, fn in constraints:
        if set(variables) & negated:
            continue
        if all(v in binding for v in variables):
            if not _holds(fn, variables, binding, events):
                return False
    # negations
    for x, lo, hi in negs:
        x_constraints = [(vs, fn) for vs, fn in constraints if x in vs]
        for q in range(lo + 1, hi):
            assignment = dict(binding)
            assignment[x] = q
            witness = True
            for variables, fn in x_constraints:
                if not all(v in assignment for v in variables):
                    continue  # does not apply
                if not _holds(fn, variables, assignment, events):
                    witness = False
                    break
            if witness:
                return False
    return True


# ---------------------------------------------------------------- order

def _cmp(b1, b2):
    a = sorted(b1.values())
    b = sorted(b2.values())
    while True:
        if not a and not b:
            break
        if not a:
            return -1
        if not b:
            return 1
        if a[-1] != b[-1]:
            return -1 if a[-1] < b[-1] else 1
        if a[0] != b[0]:
            return -1 if a[0] < b[0] else 1
        a = a[:-1]
        b = b[:-1]
    n1 = tuple(v for v, _ in sorted(b1.items(), key=lambda kv: kv[1]))
    n2 = tuple(v for v, _ in sorted(b2.items(), key=lambda kv: kv[1]))
    if n1 != n2:
        return -1 if n1 < n2 else 1
    return 0


# ---------------------------------------------------------------- oracle

def oracle(events, pattern, constraints, *, picks=(), within=None, window=None,
           consuming=()):
    events = list(events)
    constraints = [(tuple(vs), fn) for vs, fn in constraints]
    picks = list(picks)
    negated = _negated_vars(pattern, set())

    # candidates (deduplicated by binding)
    seen = set()
    candidates = []
    for binding, negs in _gen(pattern, len(events)):
        key = frozenset(binding.items())
        if key in seen:
            continue
        if _admissible(binding, negs, events, constraints, negated, picks,
                       within, window):
            seen.add(key)
            candidates.append(binding)

    candidates.sort(key=functools.cmp_to_key(_cmp))

    consumed = set()
    fired = []
    fired_keys = set()
    for c in candidates:
        if any(p in consumed for p in c.values()):
            continue  # dropped: consumption overtook it
        ok = True
        for kind, x, y, _d in picks:
            if kind == "each" or x not in c or y not in c:
                continue  # the README: PICK applies to matches binding both X and Y
            for alt in candidates:
                if alt is c or set(alt) != set(c):
                    continue
                if any(alt[v] != c[v] for v in c if v != x):
                    continue
                if frozenset(alt.items()) in fired_keys:
                    ok = False
                    break
                if alt[x] in consumed:
                    continue
                if kind == "first" and alt[x] < c[x]:
                    ok = False
                    break
                if kind == "last" and alt[x] > c[x]:
                    ok = False
                    break
            if not ok:
                break
        if not ok:
            continue
        fired.append(dict(c))
        fired_keys.add(frozenset(c.items()))
        for v in consuming:
            if v in c:
                consumed.add(c[v])
    return fired


# ---------------------------------------------------------------- self-checks

if __name__ == "__main__":
    def typ(v):
        return ((v,), lambda b, v=v: b[v]["type"] == v)

    def fmt(matches, events):
        return [" ".join(f"{events[p]['type']}{p + 1}"
                         for v, p in sorted(m.items(), key=lambda kv: kv[1]))
                for m in matches]

    # A1 A2 B3 B4 C5 C6 (names use 1-based positions, as in the spec)
    ev = [{"type": t} for t in "AABBCC"]
    seq = ("SEQ", "A", "B", "C")
    cs = [typ("A"), typ("B"), typ("C")]

    got = fmt(oracle(ev, seq, cs), ev)
    assert got == ["A1 B3 C5", "A1 B4 C5", "A2 B3 C5", "A2 B4 C5",
                   "A1 B3 C6", "A1 B4 C6", "A2 B3 C6", "A2 B4 C6"], got

    got = fmt(oracle(ev, seq, cs, consuming=("A", "B", "C")), ev)
    assert got == ["A1 B3 C5", "A2 B4 C6"], got

    got = fmt(oracle(ev, seq, cs, consuming=("A",)), ev)
    assert got == ["A1 B3 C5", "A2 B3 C5"], got

    # "first occurrence, consume all" with an explicit PICK first A from B
    got = fmt(oracle(ev, seq, cs, picks=[("first", "A", "B", 10)],
                     consuming=("A", "B", "C")), ev)
    assert got == ["A1 B3 C5", "A2 B4 C6"], got

    # PICK first / last without consumption: one match per set of alternatives
    got = fmt(oracle(ev, seq, cs, picks=[("first", "A", "B", 10)]), ev)
    assert got == ["A1 B3 C5", "A1 B4 C5", "A1 B3 C6", "A1 B4 C6"], got
    got = fmt(oracle(ev, seq, cs, picks=[("last", "A", "B", 10)]), ev)
    assert got == ["A2 B3 C5", "A2 B4 C5", "A2 B3 C6", "A2 B4 C6"], got
    # PICK distance: A at most 1 event before B
    got = fmt(oracle(ev, seq, cs, picks=[("each", "A", "B", 1)]), ev)
    assert got == ["A2 B3 C5", "A2 B3 C6"], got

    # WITHIN and counter window
    got = fmt(oracle(ev, seq, cs, within=3), ev)
    assert got == ["A2 B3 C5", "A2 B4 C5"], got
    got = fmt(oracle(ev, seq, cs, window=2), ev)
    assert got == ["A1 B3 C5", "A2 B3 C5", "A2 B4 C5", "A2 B4 C6"], got

    # NOT: SEQ(A; NOT(X); C) with X an event of type B
    got = fmt(oracle(ev, ("SEQ", "A", ("NOT", "X"), "C"),
                     [typ("A"), ((("X",)), lambda b: b["X"]["type"] == "B"),
                      typ("C")]), ev)
    assert got == [], got
    ev2 = [{"type": t} for t in "ABAC"]
    got = fmt(oracle(ev2, ("SEQ", "A", ("NOT", "X"), "C"),
                     [typ("A"), (("X",), lambda b: b["X"]["type"] == "B"),
                      typ("C")]), ev2)
    assert got == ["A3 C4"], got
    # negation constraint reading a positive variable
    ev3 = [{"type": "A", "k": 1}, {"type": "B", "k": 2}, {"type": "C", "k": 0}]
    neg = ("SEQ", "A", ("NOT", "X"), "C")
    got = oracle(ev3, neg, [typ("A"), typ("C"),
                            (("A", "X"), lambda b: b["X"]["k"] == b["A"]["k"])])
    assert got == [{"A": 0, "C": 2}], got
    got = oracle(ev3, neg, [typ("A"), typ("C"),
                            (("A", "X"), lambda b: b["X"]["k"] == b["A"]["k"] + 1)])
    assert got == [], got

    # OR: one candidate per operand an event satisfies; ties by variable name
    ev4 = [{"v": 1}]
    got = oracle(ev4, ("OR", "P", "Q"), [])
    assert got == [{"P": 0}, {"Q": 0}], got
    got = oracle(ev4, ("OR", "P", "Q"), [], consuming=("P", "Q"))
    assert got == [{"P": 0}], got

    # ALL: any order, ties (same events) by the variable names in stream order
    ev5 = [{"v": 1}, {"v": 2}]
    got = oracle(ev5, ("ALL", "X", "Y"), [])
    assert got == [{"X": 0, "Y": 1}, {"Y": 0, "X": 1}], got
    # ANY(1, X, Y) behaves like OR; order: ends at 0 before ends at 1
    got = oracle(ev5, ("ANY", 1, "X", "Y"), [])
    assert got == [{"X": 0}, {"Y": 0}, {"X": 1}, {"Y": 1}], got

    # earlier last event first: SEQ(A; OR(B, C))
    ev6 = [{"type": "A"}, {"type": "B"}, {"type": "C"}]
    got = oracle(ev6, ("SEQ", "A", ("OR", "B", "C")), [typ("A"), typ("B"), typ("C")])
    assert got == [{"A": 0, "B": 1}, {"A": 0, "C": 2}], got

    # constraint on an OR branch not taken does not apply
    got = oracle(ev6, ("SEQ", "A", ("OR", "B", "C")),
                 [typ("A"), typ("B"), typ("C"), (("B",), lambda b: False)])
    assert got == [{"A": 0, "C": 2}], got

    print("snoop_oracle self-checks passed")
