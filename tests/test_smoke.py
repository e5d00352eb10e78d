from unittest import mock

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkcep


def test_v_shape_one_row_per_match():
    df = pd.DataFrame({"ts": range(10), "price": [5, 4, 3, 4, 5, 6, 5, 4, 5, 6]})
    out = sparkcep.match_recognize(df, """
        ORDER BY ts
        MEASURES A.price AS start_price, LAST(B.price) AS bottom, LAST(C.price) AS top
        PATTERN (A B+ C+)
        DEFINE B AS price < PREV(price), C AS price > PREV(price)""")
    assert out.to_dict("records") == [
        {"start_price": 5, "bottom": 3, "top": 6},
        {"start_price": 5, "bottom": 4, "top": 6},
    ]


def test_pandas_text_columns_the_query_does_not_read_are_not_converted():
    import pandas as pd
    import pytest

    import sparkcep
    from sparkcep import DataError
    from sparkcep.data.ingest import placeholders, to_arrow

    df = pd.DataFrame({"ts": [1, 2, 3, 4], "p": [5.0, 3.0, float("nan"), 7.0], "sym": ["a", "b", "a", "b"],
                       "cat": pd.Categorical(["x", "y", "x", "y"]), "bad": [1, "two", 3.0, None]})
    table, kind = to_arrow(df, keep={"TS", "P"})
    assert kind == "pandas" and placeholders(table) == {"sym", "cat", "bad"} and table.column("p").null_count == 1
    assert table.column("ts").to_pylist() == [1, 2, 3, 4] and table.column("sym").to_pylist() == [0, 1, 2, 3]
    # ONE ROW PER MATCH reads only what the query names; the unread mixed column is no error.
    got = sparkcep.match_recognize(df, "PARTITION BY sym ORDER BY ts MEASURES LAST(cat) AS c, COUNT(*) AS n "
                                       "PATTERN (A+) DEFINE A AS p > 1")
    assert got.sort_values("sym").values.tolist() == [["a", "x", 1], ["b", "y", 2]]
    # ALL ROWS PER MATCH outputs every column: the unread ones come from the input as they are.
    got = sparkcep.match_recognize(df, "ORDER BY ts ALL ROWS PER MATCH PATTERN (A) DEFINE A AS p > 1")
    assert got["bad"].tolist() == [1, "two", None] and got["cat"].dtype == df["cat"].dtype
    # ... but a column the query reads must convert.
    with pytest.raises(DataError) as e:
        sparkcep.match_recognize(df, "ORDER BY ts MEASURES A.bad AS b ALL ROWS PER MATCH PATTERN (A) DEFINE A AS p > 1")
    assert e.value.column == "bad"


def test_plan_cache_follows_the_function_registry():
    import pyarrow as pa
    import pytest

    import sparkcep
    from sparkcep.api import compile_query
    from sparkcep.errors import QueryError

    t = pa.table({"ts": [1, 2], "p": [1.0, 2.0]})
    text = "ORDER BY ts MEASURES MATCH_NUMBER() AS m PATTERN (A) DEFINE A AS twice_p(p) > 3"
    with pytest.raises(QueryError):
        compile_query(text, t)
    sparkcep.register_function("twice_p", lambda x: 2 * x, "double")
    try:
        plan = compile_query(text, t)
        assert compile_query(text, t) is plan  # cached
        assert compile_query(text, pa.table({"ts": [1], "p": [1]})) is not plan  # other column types
    finally:
        sparkcep.unregister_function("twice_p")
    with pytest.raises(QueryError):
        compile_query(text, t)


@pytest.mark.parametrize("compiled", [True, False])
def test_already_ordered_check(compiled, monkeypatch):
    import numpy as np
    import pyarrow as pa

    from sparkcep import jit
    from sparkcep.analysis.bound import SortKey
    from sparkcep.data.partitions import already_ordered

    # The compiled pass once a kernel is loaded, numpy's before: the same verdicts.
    monkeypatch.setattr(jit, "_active", compiled)

    def check(cols, desc=(False, False)):
        t = pa.table({f"k{i}": pa.array(c) for i, c in enumerate(cols)})
        return already_ordered(t, tuple(SortKey(f"k{i}", i, desc[i], False) for i in range(len(cols))))

    assert check([[1, 2, 3]])
    assert not check([[1, 3, 2]])
    assert check([[1, 1, 2], [5, 6, 0]])          # the tie is ordered by the second key
    assert not check([[1, 1, 2], [6, 5, 0]])
    assert check([[3, 2, 2], [1, 1, 2]], (True, False))
    assert not check([[1.0, np.nan, 2.0]])
    assert not check([[1.0, 1.0], [np.nan, 1.0]])
    assert check([np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[us]")])
    # Keys narrower than 64 bits are widened for one compiled check: same verdicts.
    for dtype in (np.int8, np.int32, np.uint16, np.uint32, np.float32):
        assert check([np.array([1, 2, 2, 9], dtype=dtype)]), dtype
        assert not check([np.array([1, 3, 2], dtype=dtype)]), dtype
        assert check([np.array([9, 3, 1], dtype=dtype)], (True, False)), dtype
    assert check([np.array([-5, 2**31 - 1], dtype=np.int32)])
    assert not check([np.array([2**32 - 1, 0], dtype=np.uint32)])
    assert not check([np.array([1.5, np.nan], dtype=np.float32)])
    assert check([pa.array([0, 1, 2], pa.date32())])


def test_shuffle_partitions_follow_local_cores_only():
    from sparkcep.spark.session import _local_cores

    assert [_local_cores(m) for m in ["local", "local[3]", "local[4, 2]"]] == [1, 3, 4]
    assert _local_cores("local[*]") >= 1
    # A cluster's executors are not the driver's cores: Spark's own default stands.
    assert [_local_cores(m) for m in ["spark://host:7077", "yarn", "local-cluster[2,1,1024]"]] == [None] * 3


def test_partition_keys_group_as_group_by():
    # NULL with NULL, NaN with NaN, nanosecond timestamps as stored (a nanosecond apart:
    # two keys, as ORDER BY tells them apart), dictionary-encoded strings by value; several
    # keys at once.
    import numpy as np
    import pyarrow as pa

    from sparkcep.analysis.analyzer import analyze
    from sparkcep.data.ingest import schema_of
    from sparkcep.data.partitions import sort_and_partition
    from sparkcep.language.parser import parse

    ts = pa.array(np.array([1_000, 1_001, 2_000, 1_002, None, None], dtype="datetime64[ns]"), pa.timestamp("ns"))
    t = pa.table({
        "f": pa.array([1.0, float("nan"), None, float("nan"), 1.0, None]),
        "s": pa.array(["a", "b", "a", "b", "a", "a"]).dictionary_encode(),
        "ts": ts,
        "o": pa.array([5, 4, 3, 2, 1, 0]),
    })
    for keys, groups in [("f", 3), ("s", 2), ("ts", 5), ("f, s", 3), ("f, ts", 6)]:
        q = analyze(parse(f"PARTITION BY {keys} ORDER BY o PATTERN (A)"), schema_of(t))
        parts = sort_and_partition(t, q)
        assert len(parts.bounds) == groups, keys
        rows = t.take(pa.array(parts.order)).select([k.strip() for k in keys.split(",")]).to_pylist()
        norm = [tuple("nan" if isinstance(v, float) and v != v else v for v in r.values()) for r in rows]
        assert all(len(set(norm[lo:hi])) == 1 for lo, hi in parts.bounds), keys


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_rows_in_order_sort_by_key_ranks_as_the_full_sort_does(data):
    # Input already in ORDER BY order sorts by each key's rank among its distinct values
    # (one stable sort): the same order and partitions as the full sort by every column.
    import pyarrow as pa

    from sparkcep.api import compile_query
    from sparkcep.data import partitions

    n = data.draw(st.integers(0, 30))
    k = data.draw(st.lists(st.sampled_from(["a", "b", "é", "B", "", None]), min_size=n, max_size=n))
    table = pa.table({"ts": pa.array(sorted(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))),
                                     pa.int64()),
                      "k": pa.array(k).dictionary_encode() if data.draw(st.booleans()) else pa.array(k, pa.string()),
                      "j": pa.array(data.draw(st.lists(st.sampled_from([1, -1, 0, None]), min_size=n, max_size=n)),
                                    pa.int64())})
    head = data.draw(st.sampled_from(["PARTITION BY k ORDER BY ts", "PARTITION BY k, j ORDER BY ts",
                                      "PARTITION BY j"]))
    q = compile_query(head + " MEASURES COUNT(*) AS c PATTERN (A) DEFINE A AS true", table).query
    got = partitions.sort_and_partition(table, q)
    with mock.patch.object(partitions, "_rankable", lambda t: False):
        want = partitions.sort_and_partition(table, q)
    assert got.order.tolist() == want.order.tolist() and got.bounds == want.bounds


def test_rows_without_columns_match_as_in_arrow():
    """A pandas frame with rows and no columns holds its rows, as the same Arrow table does."""
    import pyarrow as pa

    clause = "MEASURES COUNT(*) AS n, MATCH_NUMBER() AS m PATTERN (A B?)"
    frame = sparkcep.match_recognize(pd.DataFrame(index=range(3)), clause)
    table = sparkcep.match_recognize(pa.table({"x": [1, 2, 3]}).drop_columns(["x"]), clause)
    assert frame.to_dict("records") == table.to_pylist() == [{"n": 2, "m": 1}, {"n": 1, "m": 2}]
    assert sparkcep.match_recognize(pd.DataFrame(), clause).empty


@pytest.mark.parametrize("between, source", [
    ("trades /* note */", "trades"), ("trades AS src", "trades"), ("db.trades src -- a comment\n", "db.trades"),
    ("(SELECT * FROM x WHERE p > 1) AS s", "(SELECT * FROM x WHERE p > 1)"), ("`my trades` as t", "`my trades`"),
    ("trades", "trades"), ("(SELECT * FROM x)", "(SELECT * FROM x)"),
])
def test_the_source_of_a_statement_reads_comments_as_space_and_drops_its_correlation_name(between, source):
    from sparkcep.spark.sql import split_statement

    got = split_statement(f"SELECT * FROM {between} MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))")
    assert got[2] == source and got[3] == "ORDER BY ts PATTERN (A)"


def test_a_streams_plan_comes_from_the_plan_cache():
    import pyarrow as pa

    from sparkcep.query import compile_query
    from sparkcep.spark.stream import _plan_for

    schema = pa.schema([("ts", pa.timestamp("us", "UTC")), ("price", pa.float64())])
    clause = "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B) DEFINE B AS price > A.price"
    plan = _plan_for(clause, "sql", schema)
    assert _plan_for(clause, "sql", schema) is plan is compile_query(clause, schema.empty_table())
