"""Pattern semantics, table-driven: pattern + row letters → expected matches, worked by hand
from SQL:2016 as Trino and Oracle document it."""

import re

import pytest

from sparkcep import DataError
from sparkcep.analysis.patterns import longest_match
from sparkcep.api import compile_query
from tests.helpers import letters_table, matches

# D and E also match 'b' rows so that preference between equal candidates shows.
BOTH_B = {"A": "c = 'a'", "B": "c = 'b'", "D": "c = 'b'", "C": "c = 'c'"}

CASES = [
    # pattern, rows, expected [(first row, labels)], defines
    ("A B+ C", "abbbc", [(0, "ABBBC")], None),
    ("A B+ C", "xabcab", [(1, "ABC")], None),
    ("A B* C", "acabc", [(0, "AC"), (2, "ABC")], None),
    # Greedy takes as many as it can; reluctant as few.
    ("A B* D*", "abbb", [(0, "ABBB")], BOTH_B),
    ("A B*? D*", "abbb", [(0, "ADDD")], BOTH_B),
    ("A B*? D", "abbb", [(0, "AD")], BOTH_B),
    ("A B+? D*", "abbb", [(0, "ABDD")], BOTH_B),
    ("A B?? D", "abb", [(0, "AD")], BOTH_B),
    ("A B{2,3}? D*", "abbbb", [(0, "ABBDD")], BOTH_B),
    # Alternation prefers the left branch, PERMUTE the lexicographic order.
    ("(B | D)+", "bb", [(0, "BB")], BOTH_B),
    ("(D | B)+", "bb", [(0, "DD")], BOTH_B),
    ("PERMUTE(B, D)", "bb", [(0, "BD")], BOTH_B),
    ("PERMUTE(A, B, C)", "cabbac", [(0, "CAB"), (3, "BAC")], None),
    # Bounded quantifiers.
    ("A{2}", "aaaaa", [(0, "AA"), (2, "AA")], None),
    ("A{2,}", "aaaaa", [(0, "AAAAA")], None),
    ("A{,2}", "aaa", [(0, "AA"), (2, "A")], None),
    ("A{1,2} B", "aaab", [(1, "AAB")], None),
    # Anchors: partition start and end.
    ("^ A", "aaa", [(0, "A")], None),
    ("A $", "aaa", [(2, "A")], None),
    ("^ A+ $", "aaa", [(0, "AAA")], None),
    ("^ A+ $", "aab", [], None),
    # Empty matches are matches too (one per row where nothing else matches).
    ("B*", "ab", [(0, ""), (1, "B")], None),
    ("()", "ab", [(0, ""), (1, "")], None),
    # An iteration beyond the minimum must consume a row.
    ("(A?)*  B", "b", [(0, "B")], None),
    ("(A | ())+ B", "ab", [(0, "AB")], None),
]


@pytest.mark.parametrize("pattern, rows, expected, defines", CASES)
def test_pattern(pattern, rows, expected, defines):
    assert matches(pattern, rows, defines=defines) == expected


def _pattern_tree(pattern: str):
    names = sorted(set(re.findall(r"\b[A-Z]\b", pattern)))
    define = ("DEFINE " + ", ".join(f"{v} AS c = '{v.lower()}'" for v in names)) if names else ""
    text = f"ORDER BY i MEASURES FIRST(i) AS f PATTERN ({pattern}) {define}"
    return compile_query(text, letters_table("a"), "sql").query.pattern


@pytest.mark.parametrize("pattern, longest", [
    ("A B C", 3), ("A (B | C D) E", 4), ("A B{1,3} C", 5), ("A{2} (B C){0,3}", 8), ("PERMUTE(A, B) C?", 3),
    ("A {- B -} C", 3), ("A B+ C", None), ("A (B C)* D", None), ("()", 0), ("(){2,}", 0), ("^A B? $", 2),
])
def test_the_longest_match_a_pattern_allows(pattern, longest):
    assert longest_match(_pattern_tree(pattern)) == longest


@pytest.mark.parametrize("pattern, rows, expected, defines", CASES)
def test_no_match_binds_more_rows_than_the_longest_the_pattern_allows(pattern, rows, expected, defines):
    longest = longest_match(_pattern_tree(pattern))
    assert longest is None or all(len(labels) <= longest for _, labels in expected)


def test_exclusion_hides_rows_but_keeps_them_in_the_match():
    # ALL ROWS PER MATCH does not output excluded rows; the match still spans them.
    assert matches("A {- B+ -} C", "abbc") == [(0, "AC")]


def test_skip_to_next_row_finds_overlapping_matches():
    assert matches("B+", "bbb", skip="AFTER MATCH SKIP TO NEXT ROW") == [(0, "BBB"), (1, "BB"), (2, "B")]


def test_skip_past_last_row_is_the_default():
    assert matches("B+", "bbb") == [(0, "BBB")]


def test_skip_to_last_variable():
    # Matching resumes at the match's last B row, so matches overlap.
    out = matches("A B | B A B", "abab", skip="AFTER MATCH SKIP TO LAST B")
    assert out == [(0, "AB"), (1, "BAB")]
    assert matches("A B | B A B", "abab") == [(0, "AB"), (2, "AB")]


def test_skip_to_first_variable():
    out = matches("A B+ C", "abbcabc", skip="AFTER MATCH SKIP TO FIRST C")
    assert out == [(0, "ABBC"), (4, "ABC")]


def test_skip_to_first_row_of_match_is_an_error():
    with pytest.raises(DataError, match="first row of the\\s+same match"):
        matches("A B", "ab", skip="AFTER MATCH SKIP TO FIRST A")


def test_skip_to_absent_variable_is_an_error():
    with pytest.raises(DataError, match="no row labelled D"):
        matches("A B? D? C", "ac", skip="AFTER MATCH SKIP TO LAST D", defines={"A": "c='a'", "B": "c='b'", "C": "c='c'", "D": "c='d'"})


def test_all_matches_reports_every_assignment_in_preference_order():
    assert matches("A B*", "abb", skip="ALL MATCHES") == [(0, "ABB"), (0, "AB"), (0, "A")]


def test_all_matches_distinct_assignments_of_same_rows():
    out = matches("(B | D)", "b", skip="ALL MATCHES", defines=BOTH_B)
    assert out == [(0, "B"), (0, "D")]


def test_maxlength_bounds_matches():
    assert matches("A B*", "abbb", extra="MAXLENGTH 2") == [(0, "AB")]
    assert matches("A B*", "abbb", extra="MAXLENGTH 1") == [(0, "A")]


def test_within_bounds_the_order_column_distance():
    # i is the ORDER BY column: first and last row at most 2 apart.
    assert matches("A B*", "abbbb", extra="WITHIN 2") == [(0, "ABB")]


def test_matchregex_mode_reports_the_earliest_ending_match():
    # SQL starts at row 0 and finds ABC; MatchRegex reports the match that completes
    # first (B at row 1), then restarts after it.
    assert matches("A B C | B", "abc") == [(0, "ABC")]
    assert matches("A B C | B", "abc", mode="matchregex") == [(1, "B")]


def test_matchregex_mode_prefers_the_longest_of_those_ending_first():
    # a+ b over x a a b: both <a2 b> and <a1 a2 b> end at b; the longer wins.
    assert matches("A+ B", "xaab", mode="matchregex") == [(1, "AAB")]
