"""Many rules at once (sparkcep.match_rules) over pandas and Arrow data: each rule's rows are
what match_recognize gives it alone, over random rule sets, data and strategies; the rules
share one sort per PARTITION BY and ORDER BY and evaluate a condition they define alike
once; the output is one table (``rule`` first, the union of columns by name)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.errors import DataError, OptionError, QueryError, SparkCepError
from tests.test_properties import comparable, queries, tables
from tests.tiers import examples

TABLE = pa.table({
    "k": pa.array([1, 1, 1, 2, 2, 2, 1, 2], pa.int64()),
    "ts": pa.array([1, 2, 3, 1, 2, 3, 4, 4], pa.int64()),
    "price": pa.array([5.0, 3.0, 4.0, 9.0, 7.0, 8.0, 2.0, 1.0]),
    "note": pa.array(["a", "b", "c", "d", "e", "f", "g", "h"]),
})
DIP = ("PARTITION BY k ORDER BY ts MEASURES FIRST(A.price) AS top, COUNT(*) AS n "
       "PATTERN (A B) DEFINE B AS price < PREV(price)")
RISE = ("PARTITION BY k ORDER BY ts MEASURES LAST(B.price) AS high, COUNT(*) AS n "
        "PATTERN (A B) DEFINE B AS price > PREV(price)")


@st.composite
def rule_sets(draw):
    """1 to 4 rules of one mode (a mode is an option of the call)."""
    drawn = draw(st.lists(queries(), min_size=1, max_size=4))
    mode = drawn[0][1]
    return {f"r{i}": text for i, (text, m) in enumerate(drawn) if m == mode}, mode


@settings(max_examples=examples(600), deadline=None, suppress_health_check=list(HealthCheck))
@given(rule_sets(), tables(), st.sampled_from(["auto", "sequential"]), st.booleans())
def test_each_rule_gives_what_it_gives_alone(rules, table, strategy, kernel):
    """(``kernel``: the compiled matchers forced on, or the Python matchers)"""
    from unittest.mock import patch

    from sparkcep import jit

    with patch.object(jit, "use_compiled", lambda n: kernel):
        _check_rules(*rules, table, strategy)


def _check_rules(rules: dict, mode: str, table: pa.Table, strategy: str):
    alone, failed = {}, {}
    for name, text in rules.items():
        try:
            alone[name] = sparkcep.match_recognize(table, text, mode=mode, strategy=strategy)
        except SparkCepError as e:
            failed[name] = e
    conflict = _conflict([t.schema for t in alone.values()])
    try:
        got = sparkcep.match_rules(table, rules, mode=mode, strategy=strategy)
    except SparkCepError as e:
        if getattr(e, "code", None) == "TYPE_MISMATCH":
            assert conflict, str(e)
            return
        assert e.rule in failed, (str(e), list(failed))
        assert type(e) is type(failed[e.rule]) and failed[e.rule].message in str(e)
        return
    assert not failed and not conflict, (list(failed), conflict)
    assert got.column_names[0] == "rule"
    names = got.column("rule").to_pylist()
    for name, want in alone.items():
        rows = got.filter(pa.array([n == name for n in names], pa.bool_())).select(want.column_names)
        assert comparable(rows.to_pylist()) == comparable(want.to_pylist()), rules[name]
    assert got.num_rows == sum(t.num_rows for t in alone.values())


def _conflict(schemas: list[pa.Schema]) -> bool:
    seen: dict[str, pa.DataType] = {}
    for s in schemas:
        for f in s:
            t = seen.setdefault(f.name, f.type)
            if pa.types.is_null(t):
                seen[f.name] = f.type
            elif not pa.types.is_null(f.type) and f.type != t:
                return True
    return False


def test_one_table_the_rule_first_then_columns_by_name_missing_ones_null():
    got = sparkcep.match_rules(TABLE, {"dip": DIP, "rise": RISE})
    assert got.column_names == ["rule", "k", "top", "n", "high"]
    rows = got.to_pylist()
    assert rows == [
        {"rule": "dip", "k": 1, "top": 5.0, "n": 2, "high": None},
        {"rule": "dip", "k": 1, "top": 4.0, "n": 2, "high": None},
        {"rule": "dip", "k": 2, "top": 9.0, "n": 2, "high": None},
        {"rule": "dip", "k": 2, "top": 8.0, "n": 2, "high": None},
        {"rule": "rise", "k": 1, "top": None, "n": 2, "high": 4.0},
        {"rule": "rise", "k": 2, "top": None, "n": 2, "high": 8.0},
    ]


def test_pandas_in_pandas_out_with_untouched_columns():
    pdf = TABLE.to_pandas()
    pdf["note"] = pdf["note"].astype(object)
    every = DIP.replace("PATTERN", "ALL ROWS PER MATCH PATTERN")
    got = sparkcep.match_rules(pdf, {"dip": every, "rise": RISE})
    assert isinstance(got, pd.DataFrame)
    alone = sparkcep.match_recognize(pdf, every)
    mine = got[got["rule"] == "dip"][alone.columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone, check_dtype=False)
    assert len(mine) == 8 and got[got["rule"] == "rise"]["note"].isna().all()


def test_a_column_of_two_types_names_both_rules():
    other = RISE.replace("LAST(B.price) AS high", "CAST(LAST(B.price) AS VARCHAR) AS top")
    with pytest.raises(QueryError) as e:
        sparkcep.match_rules(TABLE, {"dip": DIP, "rise_text": other})
    assert e.value.code == "TYPE_MISMATCH"
    assert "'top'" in str(e.value) and "'dip'" in str(e.value) and "'rise_text'" in str(e.value)


def test_a_measure_named_rule_is_refused():
    with pytest.raises(QueryError, match="named 'rule'"):
        sparkcep.match_rules(TABLE, {"a": DIP.replace("AS n", "AS rule")})


def test_an_error_in_a_rule_names_the_rule_and_points_into_its_text():
    bad = DIP.replace("PREV(price)", "PREV(prise)")
    with pytest.raises(QueryError) as e:
        sparkcep.match_rules(TABLE, {"fine": RISE, "typo": bad})
    assert e.value.rule == "typo" and "rule 'typo'" in str(e.value)
    assert e.value.code == "UNKNOWN_COLUMN" and e.value.line == 1 and "prise" in e.value.excerpt


def test_a_data_error_names_the_rule_and_the_row():
    with pytest.raises(DataError) as e:
        sparkcep.match_rules(TABLE, {"fine": RISE, "div": DIP.replace("COUNT(*) AS n", "1 / (COUNT(*) - 2) AS n")})
    assert e.value.rule == "div" and e.value.row is not None


def test_a_folder_of_rule_files_named_by_file(tmp_path):
    (tmp_path / "b_rise.sql").write_text(RISE)
    (tmp_path / "a_dip.sql").write_text(DIP)
    (tmp_path / "notes.txt").write_text("not a rule")
    (tmp_path / ".hidden.sql").write_text("not a rule either")
    got = sparkcep.match_rules(TABLE, tmp_path)
    assert list(dict.fromkeys(got.column("rule").to_pylist())) == ["a_dip", "b_rise"]
    (tmp_path / "c_bad.sql").write_text("PATTERN (A")
    with pytest.raises(QueryError) as e:
        sparkcep.match_rules(TABLE, str(tmp_path))
    assert e.value.rule == "c_bad" and "c_bad.sql" in str(e.value)


@pytest.mark.parametrize("rules, message", [
    ([DIP], "a mapping of names to clauses or a folder"),
    ("/no/such/folder", "is not a folder"),
    ({"": DIP}, "non-empty string"),
    ({"a": 5}, "must be a string"),
])
def test_rules_that_are_not_rules_are_refused(rules, message):
    with pytest.raises(OptionError, match=message):
        sparkcep.match_rules(TABLE, rules)


def test_options_are_checked():
    with pytest.raises(OptionError, match="unknown option"):
        sparkcep.match_rules(TABLE, {"a": DIP}, strategi="auto")


def test_no_rules_no_rows():
    got = sparkcep.match_rules(TABLE, {})
    assert got.column_names == ["rule"] and got.num_rows == 0


def test_one_sort_per_partition_by_and_order_by(monkeypatch):
    from sparkcep.runtime import local

    calls = []
    real = local.sort_and_partition
    monkeypatch.setattr(local, "sort_and_partition", lambda t, q: calls.append(q) or real(t, q))
    desc = DIP.replace("ORDER BY ts", "ORDER BY ts DESC")
    sparkcep.match_rules(TABLE, {"dip": DIP, "rise": RISE, "dip2": DIP.replace("AS n", "AS m"), "desc": desc})
    assert len(calls) == 2


def test_a_condition_defined_alike_is_evaluated_once(monkeypatch):
    import time

    from sparkcep.runtime import fast

    calls = []
    real = fast.condition_mask

    def counted(parts, *a, **k):
        calls.append(parts)
        if len(calls) == 1:  # the other rule's thread asks for the same mask meanwhile
            time.sleep(0.2)
        return real(parts, *a, **k)

    monkeypatch.setattr(fast, "condition_mask", counted)
    big = pa.table({"k": pa.array([i % 3 for i in range(5000)], pa.int64()), "ts": pa.array(range(5000), pa.int64()),
                    "price": pa.array([float(i * 7 % 13) for i in range(5000)])})
    low = "PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE A AS price < 3, B AS price > {}"
    with _kernels():
        sparkcep.match_rules(big, {"r5": low.format(5), "r9": low.format(9), "r5b": low.format(5)})
    # price < 3 once, price > 5 once, price > 9 once
    assert len(calls) == 3


def _kernels():
    from unittest.mock import patch

    from sparkcep import jit

    return patch.object(jit, "use_compiled", lambda n: True)


def test_explain_rules_shows_the_sorts_the_conditions_and_the_copies():
    desc = DIP.replace("ORDER BY ts", "ORDER BY ts DESC")
    text = sparkcep.explain_rules(TABLE, {"dip": DIP, "rise": RISE, "copy": DIP, "desc": desc})
    assert "rules: 4 (3 distinct texts" in text
    assert "PARTITION BY k, ORDER BY ts: 3 rule(s): dip, rise, copy" in text
    assert "PARTITION BY k, ORDER BY ts DESC: 1 rule(s): desc" in text
    assert "row-local conditions: 4 in all, 3 evaluated" in text


SHAPES = pd.DataFrame({
    "id": [1, 2, 3, 4],
    "k": [None, None, None, None],
    "n": pd.array([1, None, 3, 4], dtype="Int64"),
    "u": pd.array([1, 2, 3, 4], dtype="uint64"),
    "b": pd.array([True, None, False, True], dtype="boolean"),
    "t": pd.array(["a", None, "c", "d"], dtype="string[pyarrow]"),
    "z": pd.to_datetime(["2024-03-31 00:30", "2024-03-31 01:30", "2024-03-31 02:30", "2024-03-31 03:30"])
         .tz_localize("UTC").tz_convert("Europe/Berlin"),
})
DEGENERATE = {
    "always": "ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true",
    "no_column": "ORDER BY id MEASURES COUNT(*) AS n PATTERN (A*) DEFINE A AS NOT FALSE",
    "null_key": "PARTITION BY k ORDER BY z MEASURES FIRST(A.n) AS f, LAST(t) AS lt PATTERN (A B*) "
                "DEFINE B AS n > PREV(n)",
    "unsigned": "ORDER BY id MEASURES SUM(u) AS su, LAST(z) AS lz PATTERN (A B) DEFINE B AS b",
    "unmatched": "ORDER BY id DESC MEASURES A.n AS an ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A) "
                 "DEFINE A AS n > 2",
}


@pytest.mark.parametrize("rows", [0, 1, 4])
@pytest.mark.parametrize("kernel", [False, True])
def test_degenerate_rules_and_data_give_what_each_rule_gives_alone(rows, kernel):
    """Rules that read no column, NULL keys, nullable, unsigned and zoned columns, over no
    row, one row and a few, on either matcher path: each rule's rows as alone."""
    from unittest.mock import patch

    from sparkcep import jit

    data = SHAPES.head(rows)
    with patch.object(jit, "use_compiled", lambda n: kernel):
        got = sparkcep.match_rules(data, DEGENERATE)
        for name, text in DEGENERATE.items():
            alone = sparkcep.match_recognize(data, text)
            mine = got[got["rule"] == name][list(alone.columns)].reset_index(drop=True)
            assert mine.astype(object).where(mine.notna(), None).values.tolist() == \
                alone.astype(object).where(alone.notna(), None).values.tolist(), name
    assert list(got.columns)[:1] == ["rule"] and len(got) == sum(
        len(sparkcep.match_recognize(data, t)) for t in DEGENERATE.values())


def test_a_column_only_one_rule_reads_blames_that_rule():
    """An unsigned value past BIGINT, or a pandas column Arrow cannot read, fails the rule
    that reads it, not the rule that happens to sort or read first."""
    big = TABLE.append_column("u", pa.array([1, 2, 3, 4, 5, 6, 2**64 - 1, 8], pa.uint64()))
    reads_u = RISE.replace("COUNT(*) AS n", "LAST(u) AS lu")
    with pytest.raises(DataError) as e:
        sparkcep.match_rules(big, {"first": DIP, "second": reads_u})
    assert e.value.rule == "second" and e.value.column == "u"
    pdf = TABLE.to_pandas()
    pdf["mix"] = pd.Series([1, "a", 2.5, None, 1, 2, 3, 4], dtype=object)
    with pytest.raises(DataError) as e:
        sparkcep.match_rules(pdf, {"first": DIP, "second": RISE.replace("COUNT(*) AS n", "LAST(mix) AS m")})
    assert e.value.rule == "second" and e.value.column == "mix"


def test_a_text_column_a_rule_does_not_name_passes_through_as_it_would_alone():
    """ALL ROWS PER MATCH passes a text column the rule does not name through untouched,
    even when another rule of the call reads it."""
    import decimal

    pdf = TABLE.to_pandas()
    pdf["d"] = pd.Series([decimal.Decimal(x) for x in ("3", "1.5", "2", "7", "1", "2", "3", "4")], dtype=object)
    every = DIP.replace("PATTERN", "ALL ROWS PER MATCH PATTERN")
    reads_d = RISE.replace("COUNT(*) AS n", "LAST(d) AS ld")
    got = sparkcep.match_rules(pdf, {"every": every, "reads_d": reads_d})
    alone = sparkcep.match_recognize(pdf, every)
    mine = got[got["rule"] == "every"]["d"].tolist()
    assert [repr(x) for x in mine] == [repr(x) for x in alone["d"]] and "Decimal('3')" in map(repr, mine)
    assert "__sparkcep_position__" not in got.columns


def test_output_columns_are_matched_by_name_case_aside():
    upper = RISE.replace("LAST(B.price) AS high", "LAST(B.price) AS TOP")
    got = sparkcep.match_rules(TABLE, {"dip": DIP, "rise": upper})
    assert got.column_names == ["rule", "k", "top", "n"]
    assert [r["top"] for r in got.to_pylist() if r["rule"] == "rise"] == [4.0, 8.0]
    with pytest.raises(QueryError, match="RULE_COLUMN"):
        sparkcep.match_rules(TABLE, {"a": DIP.replace("AS n", "AS Rule")})
