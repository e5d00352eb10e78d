"""The rules docs/how-it-works.md says are decided once. AFTER MATCH SKIP: compile.skip.skip_to,
which the compiled selections call as a kernel and the Python ones run as its Python body.
SQL's three-valued AND, OR, BETWEEN and IN: sparkcep.values, for one row and for a column.
The tables below are the rules; the property tests (test_properties, test_automaton,
test_kernel, test_segment_properties) compare every path with the reference matchers."""

from __future__ import annotations

import numpy as np
import pytest

from sparkcep.compile.skip import (
    AFTER_FIRST,
    ALL_MATCHES,
    FIRST,
    LAST,
    LOOPS,
    NEXT_ROW,
    NO_TARGET,
    PAST_LAST,
    skip_to,
)

B = 1  # the target label in the table: rows labelled A=0, B=1, C=2
CASES = [
    # mode, labels, (place, error)
    (PAST_LAST, [0, 1, 1, 2], (4, 0)),
    (NEXT_ROW, [0, 1, 1, 2], (AFTER_FIRST, 0)),
    (ALL_MATCHES, [0, 1, 1, 2], (AFTER_FIRST, 0)),
    (FIRST, [0, 1, 1, 2], (1, 0)),
    (LAST, [0, 1, 1, 2], (2, 0)),
    (FIRST, [0, 2], (0, NO_TARGET)),  # no row labelled B
    (LAST, [1, 0], (0, LOOPS)),  # B's last row is the match's first: it would loop
    (FIRST, [1, 1], (0, LOOPS)),
    (LAST, [1, 1], (1, 0)),
    (PAST_LAST, [], (AFTER_FIRST, 0)),  # an empty match moves one row on, in every mode
    (FIRST, [], (AFTER_FIRST, 0)),
    (LAST, [2, 3], (0, NO_TARGET)),  # labels past the members' end are not in the target
]


@pytest.mark.parametrize("mode, labels, want", CASES)
def test_the_rule_and_its_compiled_twin(mode, labels, want):
    members = np.zeros(2, dtype=np.bool_)
    members[B] = True
    arr = np.array([9] + labels, dtype=np.int64)  # read from an offset, as the kernel reads
    assert skip_to.py_func(mode, members, labels, 0, len(labels)) == want
    got = skip_to(mode, members, arr, 1, len(labels))
    assert (int(got[0]), int(got[1])) == want


def test_every_selection_goes_on_through_the_rule():
    from sparkcep.compile.skip import SkipStrategy
    from sparkcep.runtime import automaton, kernel

    for fn in (kernel._after_match.py_func, automaton._scan.py_func, SkipStrategy.resume, SkipStrategy.step):
        assert "skip_to" in fn.__code__.co_names, fn.__qualname__
    # the selections that go on after a match do so through _after_match
    for fn in (kernel._preferred, kernel._select_earliest):
        assert "_after_match" in fn.py_func.__code__.co_names, fn.__name__


def test_sql_logic_for_one_row_and_for_a_column():
    from sparkcep.values import between_mask, in_mask, sql_between, sql_in

    truth = (True, False, None)
    for ge in truth:
        for le in truth:
            for negated in (False, True):
                one = sql_between(ge, le, negated)
                t, known = between_mask(np.array([ge is True]), np.array([ge is not None]),
                                        np.array([le is True]), np.array([le is not None]), negated)
                assert (None if not known[0] else bool(t[0])) == one, (ge, le, negated)
    for x_known in (True, False):
        for equal in ([], [True], [False], [None], [False, None], [None, True]):
            for negated in (False, True):
                one = sql_in(x_known, iter(equal), negated)
                t, known = in_mask(1, np.array(x_known), [(np.array([e is True]), np.array([e is not None]))
                                                          for e in equal], negated)
                assert (None if not known[0] else bool(t[0])) == one, (x_known, equal, negated)
    assert sql_in(True, [None, False], False) is None and sql_in(True, [None, True], True) is False


def test_every_evaluator_takes_its_logic_from_values():
    from sparkcep.compile import expressions, vectorize
    from sparkcep.segments import candidates

    def names(fn):  # the names a function and the closures it builds read
        out, stack = set(), [fn.__code__]
        while stack:
            c = stack.pop()
            out |= set(c.co_names) | set(c.co_freevars)
            stack += [k for k in c.co_consts if hasattr(k, "co_names")]
        return out

    assert {"sql_between"} <= names(expressions._between) and {"sql_in"} <= names(expressions._in)
    assert {"sql_and", "sql_or"} <= names(expressions._binary)
    assert {"between_mask", "in_mask"} <= names(vectorize.evaluate)
    assert {"between_mask"} <= names(candidates._between) and {"in_mask"} <= names(candidates._in)
