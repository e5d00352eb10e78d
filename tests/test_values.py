"""The value boundary (sparkcep.values): each case a user hit as a wrong answer or a crash,
kept as a regression test."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import zoneinfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sparkcep
from sparkcep import DataError, SparkCepError, match_recognize
from sparkcep.errors import InternalError

ROWS = pd.DataFrame({"id": [1, 2, 3], "x": [0.5, 2.0, 3.0]})


@pytest.fixture
def registered():
    names: list[str] = []

    def register(name, fn, returns="any", **kw):
        sparkcep.register_function(name, fn, returns=returns, **kw)
        names.append(name)
    yield register
    for n in names:
        sparkcep.unregister_function(n)


# ---------------------------------------------------------------- numpy results of functions
@pytest.mark.parametrize("strategy", ["auto", "tasks"])
def test_numpy_bool_result_satisfies_define(registered, strategy):
    registered("np_gt1", lambda x: np.bool_(x > 1), returns="boolean")
    out = match_recognize(ROWS, "ORDER BY id MEASURES A.x AS x PATTERN (A) DEFINE A AS np_gt1(x)",
                          strategy=strategy, **({"workers": 1} if strategy == "tasks" else {}))
    assert out.x.tolist() == [2.0, 3.0]


@pytest.mark.parametrize("make, returns", [(np.float32, "double"), (np.int64, "bigint"), (np.float64, "any")])
def test_numpy_numbers_compare_in_define_and_measures(registered, make, returns):
    registered("np_num", lambda x: make(x), returns=returns)
    out = match_recognize(ROWS, "ORDER BY id MEASURES np_num(A.x) AS y PATTERN (A) DEFINE A AS np_num(x) >= 2")
    assert out.y.tolist() == [2, 3]
    assert all(type(v) in (int, float) for v in pa.Table.from_pandas(out).column("y").to_pylist())


@pytest.mark.parametrize("strategy", ["sequential", "tasks"])
def test_numpy_results_in_snoop(registered, strategy):
    registered("np_gt1", lambda x: np.bool_(x > 1), returns="boolean")
    got = sparkcep.snoop(ROWS, "SELECT * FROM SEQ(A; B) WHERE np_gt1(B.x)", strategy=strategy,
                         **({"workers": 1} if strategy == "tasks" else {}))
    assert sorted(set(got.match_number)) == [1, 2, 3]


def test_numpy_array_result_is_an_array(registered):
    registered("np_pair", lambda x: np.array([x, x * 2]), returns="array")
    out = match_recognize(ROWS, "ORDER BY id MEASURES np_pair(A.x)[2] AS y PATTERN (A) DEFINE A AS x > 1")
    assert out.y.tolist() == [4.0, 6.0]


def test_result_of_the_wrong_type_names_function_and_row(registered):
    registered("says_no", lambda x: "no", returns="double")
    with pytest.raises(DataError) as e:
        match_recognize(ROWS, "ORDER BY id MEASURES A.x AS p PATTERN (A) DEFINE A AS says_no(x) > 0")
    assert not isinstance(e.value, InternalError)
    assert "SAYS_NO" in str(e.value) and "double" in str(e.value) and e.value.row == 0


def test_missing_values_from_functions_are_null(registered):
    registered("nothing", lambda x: pd.NA, returns="bigint")
    registered("nan_int", lambda x: float("nan"), returns="bigint")
    out = match_recognize(ROWS, "ORDER BY id MEASURES nothing(A.x) AS a, nan_int(A.x) AS b PATTERN (A)")
    assert out.a.isna().all() and out.b.isna().all()


def test_bigint_result_out_of_range_is_an_error(registered):
    registered("huge", lambda x: 2**70, returns="bigint")
    with pytest.raises(DataError, match="outside BIGINT"):
        match_recognize(ROWS, "ORDER BY id MEASURES huge(A.x) AS h PATTERN (A)")


def test_registered_aggregate_that_raises_is_a_data_error():
    def boom(*_a):
        raise ValueError("boom")
    sparkcep.register_aggregate("boomagg", boom)
    try:
        for q in ["ORDER BY id MEASURES boomagg(x) AS p PATTERN (S) DEFINE SEGMENT S AS window(2)",
                  "ORDER BY id MEASURES boomagg(A.x) AS p PATTERN (A+) DEFINE A AS true"]:
            with pytest.raises(DataError, match="BOOMAGG") as e:
                match_recognize(ROWS, q)
            assert not isinstance(e.value, InternalError)
    finally:
        sparkcep.unregister_function("boomagg")


def test_registered_aggregate_returning_numpy_and_text():
    sparkcep.register_aggregate("np_mean", lambda a: np.float32(np.nanmean(a)))
    sparkcep.register_aggregate("texty", lambda a: "x")
    try:
        out = match_recognize(ROWS, "ORDER BY id MEASURES np_mean(x) AS m PATTERN (S) DEFINE SEGMENT S AS window(3)")
        assert out.m.tolist() == [pytest.approx(11 / 6)]
        with pytest.raises(DataError, match="TEXTY"):
            match_recognize(ROWS, "ORDER BY id MEASURES texty(x) AS m PATTERN (S) DEFINE SEGMENT S AS window(3)")
    finally:
        sparkcep.unregister_function("np_mean")
        sparkcep.unregister_function("texty")


# ---------------------------------------------------------------- unsigned integers
def test_uint64_beyond_bigint_is_a_data_error_naming_column_and_row():
    u = pd.DataFrame({"id": [1, 2], "x": np.array([3, 2**64 - 1], dtype=np.uint64)})
    for q in ["ORDER BY id MEASURES A.x AS x PATTERN (A) DEFINE A AS x > 6",
              "ORDER BY id MEASURES A.x AS x PATTERN (A)"]:
        with pytest.raises(DataError) as e:
            match_recognize(u, q)
        assert e.value.column == "x" and e.value.row == 1


def test_uint64_in_range_reads_as_bigint_everywhere():
    u = pd.DataFrame({"id": [1, 2, 3], "x": np.array([3, 2**62, 7], dtype=np.uint64)})
    out = match_recognize(u, "ORDER BY id MEASURES A.x AS x PATTERN (A) DEFINE A AS x > 6")
    assert out.x.tolist() == [2**62, 7]


def test_unread_uint64_column_passes_through():
    u = pd.DataFrame({"id": [1, 2], "x": np.array([3, 2**64 - 1], dtype=np.uint64)})
    out = match_recognize(u, "ORDER BY id MEASURES A.id AS a ALL ROWS PER MATCH PATTERN (A)")
    assert out.x.tolist() == [3, 2**64 - 1]


# ---------------------------------------------------------------- zoned time across DST
def _berlin(*utc: str) -> pd.Series:
    return pd.to_datetime(list(utc)).tz_localize("UTC").tz_convert("Europe/Berlin")


def test_zoned_difference_is_between_instants():
    z = pd.DataFrame({"id": [1, 2], "ts": _berlin("2024-03-31 00:30", "2024-03-31 01:30")})
    out = match_recognize(z, "ORDER BY ts MEASURES B.ts - A.ts AS gap PATTERN (A B) WITHIN INTERVAL '1' HOUR "
                             "DEFINE B AS true")
    assert out.gap.tolist() == [pd.Timedelta(hours=1)]


def test_zoned_comparison_in_the_repeated_hour():
    # 2024-10-27 02:30 happens twice in Berlin: first CEST, then CET an hour later.
    z = pd.DataFrame({"id": [1, 2], "ts": _berlin("2024-10-27 00:30", "2024-10-27 01:30")})
    out = match_recognize(z, "ORDER BY id MEASURES B.ts > A.ts AS later, B.ts = A.ts AS same "
                             "PATTERN (A B) DEFINE B AS ts > PREV(ts)")
    assert out.later.tolist() == [True] and out.same.tolist() == [False]


def test_date_trunc_and_fields_in_the_zone():
    z = pd.DataFrame({"id": [1], "ts": _berlin("2024-03-30 23:30")})  # 00:30 on the 31st in Berlin
    out = match_recognize(z, "ORDER BY ts MEASURES date_trunc('day', A.ts) AS d, hour(A.ts) AS h, "
                             "day(A.ts) AS dd PATTERN (A)")
    assert out.d.tolist() == [pd.Timestamp("2024-03-31 00:00", tz="Europe/Berlin")]
    assert out.h.tolist() == [0] and out.dd.tolist() == [31]


def test_interval_added_across_dst_is_on_the_instant():
    z = pd.DataFrame({"id": [1], "ts": _berlin("2024-03-31 00:30")})  # 01:30 CET
    out = match_recognize(z, "ORDER BY ts MEASURES A.ts + INTERVAL '1' HOUR AS t, hour(A.ts + INTERVAL '1' HOUR) AS h "
                             "PATTERN (A)")
    assert out.t.tolist() == [pd.Timestamp("2024-03-31 01:30", tz="UTC")]
    assert out.h.tolist() == [3]  # 03:30 CEST: the hour 02:00-03:00 does not exist that night


# ---------------------------------------------------------------- overflow and NaN
def test_segment_aggregate_overflow_is_an_error():
    big = pd.DataFrame({"id": [1, 2], "x": [2**62, 2**62]})
    with pytest.raises(DataError, match="bigint overflow"):
        match_recognize(big, "ORDER BY id MEASURES first(x) + last(x) AS s PATTERN (S) "
                             "DEFINE SEGMENT S AS window(2) AND first(x) + last(x) > 0")
    with pytest.raises(DataError, match="bigint overflow"):
        match_recognize(big, "ORDER BY id MEASURES A.x AS s PATTERN (A B) DEFINE B AS A.x + x > 0")


def test_power_of_a_negative_base_is_nan():
    neg = pd.DataFrame({"id": [1], "x": [-8.0]})
    out = match_recognize(neg, "ORDER BY id MEASURES power(A.x, 1.0/3) AS p PATTERN (A)")
    assert math.isnan(out.p[0])
    out = match_recognize(neg, "ORDER BY id MEASURES A.x AS p PATTERN (A) DEFINE A AS power(x, 1.0/3) > 0")
    assert len(out) == 0


# ---------------------------------------------------------------- nullable pandas dtypes
def test_nullable_dtypes_come_back():
    nd = pd.DataFrame({"id": [1, 2], "n": pd.array([2**53 + 1, None], dtype="Int64"),
                       "s": pd.array(["a", None], dtype="string[pyarrow]"),
                       "b": pd.array([True, None], dtype="boolean")})
    out = match_recognize(nd, "ORDER BY id MEASURES A.n AS n2, A.s AS s2, A.b AS b2 ALL ROWS PER MATCH PATTERN (A)")
    assert str(out.n.dtype) == "Int64" and str(out.n2.dtype) == "Int64"
    assert out.n2.tolist()[0] == 2**53 + 1 and out.n2.isna().tolist() == [False, True]
    assert out.s.dtype == nd.s.dtype and out.b.dtype == nd.b.dtype
    assert str(out.b2.dtype) == "boolean" and out.s2.tolist()[0] == "a"


def test_plain_numpy_frames_keep_numpy_dtypes():
    out = match_recognize(ROWS, "ORDER BY id MEASURES A.x AS y ALL ROWS PER MATCH PATTERN (A)")
    assert out.dtypes.tolist() == [np.dtype("int64"), np.dtype("float64"), np.dtype("float64")]


# ---------------------------------------------------------------- all-NULL columns
@pytest.mark.parametrize("data", [pd.DataFrame({"id": [1, 2], "k": [None, None]}),
                                  pa.table({"id": [1, 2], "k": pa.nulls(2)})])
def test_all_null_partition_key_is_one_partition(data):
    out = match_recognize(data, "PARTITION BY k ORDER BY id MEASURES COUNT(*) AS c PATTERN (A+) DEFINE A AS true")
    assert list(out["c"] if isinstance(out, pd.DataFrame) else out.column("c").to_pylist()) == [2]


@pytest.mark.parametrize("measure", ["linear_reg_r2(x, id)", "mann_kendall_test(x)", "linear_reg_r2(id, x)"])
def test_time_series_aggregates_over_all_null_column_are_null(measure):
    an = pd.DataFrame({"id": [1, 2, 3], "x": [None, None, None]})
    out = match_recognize(an, f"ORDER BY id MEASURES {measure} AS r PATTERN (S) DEFINE SEGMENT S AS window(3)")
    assert out.r.isna().all() and len(out) == 1


def test_zscore_over_all_null_column_never_holds():
    an = pd.DataFrame({"id": [1, 2, 3], "x": [None, None, None]})
    out = match_recognize(an, "ORDER BY id MEASURES first(id) AS r PATTERN (S A) "
                              "DEFINE SEGMENT S AS window(2), A AS zscore(x, 2) > 0")
    assert len(out) == 0


# ---------------------------------------------------------------- entry points
def test_explain_picture_in_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(SparkCepError, match="cannot write the picture") as e:
        sparkcep.explain(ROWS, "ORDER BY id MEASURES first(x) AS p PATTERN (S) DEFINE SEGMENT S AS window(2)",
                         picture=str(tmp_path / "missing" / "p.png"))
    assert not isinstance(e.value, InternalError)


def test_register_function_as_the_readme_shows(registered):
    registered("twice", lambda x: x * 2)  # returns defaults to "any"
    out = match_recognize(ROWS, "ORDER BY id MEASURES twice(A.x) AS y PATTERN (A) DEFINE A AS twice(x) > 3")
    assert out.y.tolist() == [4.0, 6.0]


@pytest.mark.parametrize("call", [lambda: sparkcep.register_function(5, abs, returns="double"),
                                  lambda: sparkcep.register_function("f", abs, returns="money"),
                                  lambda: sparkcep.register_aggregate(5, abs),
                                  lambda: sparkcep.unregister_function(None)])
def test_bad_registrations_are_sparkcep_errors(call):
    with pytest.raises(SparkCepError):
        call()


@pytest.mark.parametrize("where", ["WHERE skip_till_next_match(a, b) { true }",
                                   "WHERE skip_till_next_match(a, b)",
                                   "WHERE skip_till_next_match(a, b) { }"])
def test_sase_strategy_without_predicates(where):
    ev = pd.DataFrame({"time": [1, 2, 3], "event_type": ["A", "B", "B"], "x": [1, 2, 3]})
    out = sparkcep.sase(ev, f"PATTERN SEQ(A a, B b) {where} WITHIN 10 RETURN a.x, b.x")
    assert out.values.tolist() == [[1, 2]]


def test_sase_constant_false_predicate_matches_nothing():
    ev = pd.DataFrame({"time": [1, 2], "event_type": ["A", "B"], "x": [1, 2]})
    out = sparkcep.sase(ev, "PATTERN SEQ(A a, B+ b[]) WHERE skip_till_any_match(a, b[]) { 1 = 2 } RETURN a.x")
    assert len(out) == 0


def test_timestamp_results_of_functions_are_zoned_values(registered):
    registered("later", lambda t: t + dt.timedelta(hours=1), returns="timestamp")
    z = pd.DataFrame({"id": [1], "ts": _berlin("2024-03-31 00:30")})
    out = match_recognize(z, "ORDER BY id MEASURES later(A.ts) - A.ts AS gap PATTERN (A)")
    assert out.gap.tolist() == [pd.Timedelta(hours=1)]


@pytest.mark.parametrize("strategy", ["sequential", "sb", "tasks"])
def test_a_naive_function_result_in_a_zoned_measure_is_wall_time_there(registered, strategy):
    """A function that drops the zone (wall time in Berlin) in a measure typed by a zoned
    column: the value is that wall time in the zone, as DEFINE compares it, not UTC."""
    registered("wall", lambda t: t.replace(tzinfo=None), returns="timestamp")
    z = pd.DataFrame({"k": [1, 1, 2], "ts": _berlin("2024-03-30 23:30", "2024-03-31 00:30", "2024-03-31 01:30")})
    options = {"workers": 0} if strategy == "tasks" else {}
    out = match_recognize(z, "PARTITION BY k ORDER BY ts MEASURES wall(A.ts) AS w, A.ts AS a PATTERN (A) "
                             "DEFINE A AS wall(ts) = ts", strategy=strategy, **options)
    assert out.w.tolist() == out.a.tolist() == list(z.ts)
    assert str(out.w.dtype) == "datetime64[us, Europe/Berlin]"


@pytest.mark.parametrize("returns", ["timestamp", "any"])
@pytest.mark.parametrize("strategy, matches", [("sequential", ""), ("sb", ""), ("tasks", ""),
                                               ("sequential", "ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH"),
                                               ("tasks", "ALL MATCHES EVENT SELECTION SKIP TILL ANY MATCH")])
def test_zoned_function_results_keep_their_zone_where_no_column_has_one(registered, strategy, matches, returns):
    """Zoned values of a function declared "timestamp" (or "any"), in a query reading no
    zoned column: the measure takes the zone of the first (after a NULL, and a partition of
    naive values only) and keeps every instant; a naive value beside them is UTC, however
    the rows are cut (per partition, or all at once as the task engine measures them)."""
    tokyo, berlin = zoneinfo.ZoneInfo("Asia/Tokyo"), zoneinfo.ZoneInfo("Europe/Berlin")

    def when(x):
        t = dt.datetime(2026, 3, 29, 1, 30) + dt.timedelta(hours=x)
        return [None, t, t.replace(tzinfo=tokyo), t.replace(tzinfo=berlin), t, t.replace(tzinfo=berlin)][x]
    registered("when", when, returns=returns)
    data = pd.DataFrame({"k": [1, 1, 2, 2, 3, 3], "x": range(6)})
    options = {"workers": 0} if strategy == "tasks" else {}
    out = match_recognize(data, f"PARTITION BY k ORDER BY x MEASURES when(A.x) AS t {matches} PATTERN (A)",
                          strategy=strategy, **options)
    assert str(out.t.dtype) == "datetime64[us, Asia/Tokyo]"
    utc = [t.tz_convert("UTC").strftime("%d %H:%M") for t in out.t.tolist()[1:]]
    # 04:30 in Berlin that night is CEST (+02:00); 03:30 in Tokyo is 18:30 UTC the day before.
    assert utc == ["29 02:30", "28 18:30", "29 02:30", "29 05:30", "29 04:30"]
    assert pd.isna(out.t.tolist()[0])


@pytest.mark.parametrize("zone, name", [(dt.timezone(dt.timedelta(hours=5)), "+05:00"),
                                        ("dateutil", "Europe/Berlin")])
def test_function_results_in_any_zone_type_come_out(registered, zone, name):
    """A fixed UTC offset and a dateutil zone (which cannot be hashed) from a function: the
    measure is in that zone, not an internal error."""
    if zone == "dateutil":
        from dateutil import tz

        zone = tz.gettz("Europe/Berlin")
    registered("at", lambda x: dt.datetime(2026, 1, 1, x, tzinfo=zone), returns="timestamp")
    out = match_recognize(pd.DataFrame({"x": [1, 2]}), "ORDER BY x MEASURES at(A.x) AS t PATTERN (A) "
                                                       "DEFINE A AS at(x) > TIMESTAMP '2025-12-31 00:00:00'")
    assert pa.Table.from_pandas(out).schema.field("t").type.tz == name
    assert out.t.tolist() == [pd.Timestamp(dt.datetime(2026, 1, 1, h, tzinfo=zone)) for h in (1, 2)]


# ---------------------------------------------------------------- DECIMAL(p, s)
def _decimals(*values: str, precision: int = 38, scale: int = 2) -> pa.Table:
    import decimal

    xs = [None if v is None else decimal.Decimal(v) for v in values]
    return pa.table({"id": list(range(len(xs))), "x": pa.array(xs, pa.decimal128(precision, scale))})


def test_decimal_sum_is_exact_at_38_digits():
    import decimal

    big = "1" + "0" * 34 + ".01"  # 37 digits: doubles keep 16, Python's default context 28
    out = match_recognize(_decimals(big, "0.01", big), "ORDER BY id MEASURES SUM(x) AS s, AVG(x) AS av "
                          "PATTERN (A+) DEFINE A AS true").to_pandas()
    assert out.s.tolist() == [decimal.Decimal("2" + "0" * 34 + ".03")]
    assert out.av.tolist() == [decimal.Decimal("6" * 34 + ".68")]  # (2e34 + 0.03) / 3 = 6…6.67666…, half up


@pytest.mark.parametrize("expr, message", [
    ("A.x * A.x", "decimal overflow"),                   # 2 × 37 digits > 38
    ("SUM(x) * 1000", "decimal overflow"),
    ("A.x / 0", "division by zero"),
    ("A.x % 0", "division by zero"),
    ("CAST(A.x AS DECIMAL(5, 2))", "cannot cast"),
    ("CAST('abc' AS DECIMAL(5, 2))", "cannot cast"),
    ("CAST(1e300 AS DECIMAL(38, 0))", "cannot cast"),          # beyond any context: still the overflow error
    ("CAST(A.x AS DECIMAL(38, 0)) / CAST(0.00000000000000000000000000000000000001 AS DECIMAL(38, 38))",
     "decimal overflow"),
])
def test_decimal_errors_name_the_row(expr, message):
    big = "9" * 35 + ".99"
    with pytest.raises(DataError, match=message) as e:
        match_recognize(_decimals("1.00", big), f"ORDER BY id MEASURES {expr} AS v PATTERN (A) DEFINE A AS x > 1")
    assert e.value.row == 1 or "CAST('abc'" in expr or "1e300" in expr


def test_decimal_try_cast_and_pandas_round_trip():
    import decimal

    df = pd.DataFrame({"id": [1, 2], "x": [decimal.Decimal("1.5"), None]})
    out = match_recognize(df, "ORDER BY id MEASURES TRY_CAST(A.x * 1000 AS DECIMAL(3, 1)) AS t, A.x AS ax "
                          "ALL ROWS PER MATCH PATTERN (A)")
    assert out.t.tolist() == [None, None] and out.ax.tolist() == [decimal.Decimal("1.5"), None]


def test_decimal_functions_read_doubles_and_user_functions_get_decimals(registered):
    import decimal

    seen = []
    registered("show", lambda v: seen.append(v) or v, returns="double")
    out = match_recognize(_decimals("2.25"), "ORDER BY id MEASURES sqrt(A.x) AS r, show(A.x) AS s PATTERN (A)").to_pandas()
    assert out.r.tolist() == [1.5] and out.s.tolist() == [2.25]
    assert seen == [decimal.Decimal("2.25")]


def test_decimals_of_untyped_values_compute_exactly_or_as_doubles():
    import decimal

    big = "1" + "0" * 30 + ".01"
    out = match_recognize(_decimals(big), "ORDER BY id MEASURES (COLLECT(x) || COLLECT(x))[1] * 1.5 AS f, "
                          "(COLLECT(x) || COLLECT(x))[1] + 1 AS p, -(COLLECT(x) || COLLECT(x))[2] AS n, "
                          "TRY_CAST('1e200' AS DECIMAL(10, 2)) AS t PATTERN (A)").to_pylist()[0]
    assert out["f"] == float(decimal.Decimal(big)) * 1.5
    assert out["p"] == decimal.Decimal("1" + "0" * 29 + "1.01")  # 33 digits: exact, not Python's 28
    assert out["n"] == decimal.Decimal("-" + big) and out["t"] is None  # Python's own minus would round


_SMALL_OUTPUTS = [
    pa.table({"n": pa.array([1, 2], pa.int64()), "x": pa.array([0.5, -1.0]), "b": [True, False]}),
    pa.table({f"c{i}": pa.array([0, 1, 2], t) for i, t in enumerate(
        [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(), pa.float16(),
         pa.float32()])}),
    pa.table({"n": pa.array([], pa.int64()), "x": pa.array([], pa.float64())}),  # no match
    pa.Table.from_batches([], pa.schema([("n", pa.int64())])),  # no chunk at all
    pa.Table.from_batches([pa.record_batch({"n": [1]}), pa.record_batch({"n": [2, 3]})]),  # two chunks
    pa.table({"n": pa.array([1, None], pa.int64())}),  # NULL: an exact Int64, where pyarrow gives float64
    pa.table({"s": ["a", "b"], "n": [1, 2]}),
    pa.table({"t": pa.array([1, 2], pa.timestamp("us", "UTC")), "n": [1, 2]}),
    pa.table([pa.array([1]), pa.array([2])], names=["n", "n"]),  # a repeated name
]


_FROM_ARRAYS = [True, True, True, True, False, False, False, False, False]  # which take the fast path


@pytest.mark.parametrize("table, fast", list(zip(_SMALL_OUTPUTS, _FROM_ARRAYS, strict=True)),
                         ids=range(len(_SMALL_OUTPUTS)))
def test_results_as_pandas_equal_pyarrows_conversion(table, fast):
    from sparkcep.values import _from_arrays, to_pandas

    assert _from_arrays(table) == fast
    exact = {pa.int64(): pd.Int64Dtype()} if any(c.null_count for c in table.columns) else {}
    pd.testing.assert_frame_equal(to_pandas(table, pd.DataFrame({"x": [1]})), table.to_pandas(types_mapper=exact.get),
                                  check_exact=True, check_index_type=True, check_column_type=True)


@pytest.mark.parametrize("source", ["numpy", "nullable"])
def test_integers_with_nulls_stay_exact_in_pandas(source):
    """pandas makes an integer column with NULLs float64, which changes values past 2**53:
    such measures come back as Int64, and an array of integers holding NULL as Python lists."""
    big = 2**62 + 1
    ids = [big, big + 1, big + 2]
    frame = pd.DataFrame({"ts": [1, 2, 3], "id": pd.Series(ids, dtype="int64" if source == "numpy" else "Int64"),
                          "kind": ["a", "b", "a"]})
    out = sparkcep.match_recognize(frame, "ORDER BY ts MEASURES A.id AS a_id, B.id AS b_id, NEXT(B.id) AS nb "
                                          "PATTERN (A B?) DEFINE A AS kind = 'a', B AS kind = 'b'")
    assert str(out.b_id.dtype) == "Int64" and out.b_id.tolist() == [big + 1, pd.NA]
    assert out.a_id.tolist() == [big, big + 2]
    frame.loc[1, "id"] = None if source == "nullable" else big + 1
    arrays = sparkcep.match_recognize(frame, "ORDER BY ts MEASURES array_agg(id) AS ids PATTERN (A+)")
    expect = [big, None, big + 2] if source == "nullable" else ids
    assert [int(v) if v is not None else None for v in arrays.ids[0]] == expect


def test_a_result_without_columns_keeps_its_rows():
    from sparkcep.values import to_pandas

    table = pa.table({"n": [1, 2, 3]}).drop_columns(["n"])
    assert len(to_pandas(table)) == len(table.to_pandas()) == 3


@pytest.mark.parametrize("kind", ["naive", "zoned", "date"])
@pytest.mark.parametrize("measure", ["linear_reg_r2(ts, temp)", "linear_reg_r2_signed(ts, temp)",
                                     "mann_kendall_test(ts)"])
def test_series_aggregates_read_times_as_seconds(kind, measure):
    """Time-series aggregates over a timestamp or date read it as seconds since the epoch
    (naive = UTC): the same answer as over those seconds as numbers, in MEASURES and DEFINE."""
    stamps = pd.date_range("2024-03-09", periods=5, freq="D" if kind == "date" else "7h",
                           tz="America/New_York" if kind == "zoned" else None)
    secs = [s.timestamp() for s in stamps]
    ts = stamps.date if kind == "date" else stamps
    temps = [1.0, 2.0, 3.5, 3.0, 4.0]
    as_times = pd.DataFrame({"ts": ts, "temp": temps})
    as_numbers = pd.DataFrame({"ts": secs, "temp": temps})
    for text in (f"ORDER BY ts MEASURES {measure} AS r PATTERN (A+)",
                 f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS {measure} > -100"):
        got = sparkcep.match_recognize(as_times, text).to_dict("list")
        assert got == sparkcep.match_recognize(as_numbers, text).to_dict("list"), text
        assert got[next(iter(got))], text


@pytest.mark.parametrize("clause", [
    "MEASURES MAX(mixed(v)) AS x PATTERN (A+)",
    "MEASURES MIN(mixed(v)) AS x PATTERN (A+)",
    "MEASURES greatest(mixed(v), 1) AS x PATTERN (A)",
    "MEASURES A.ts AS t PATTERN (A) DEFINE A AS mixed(v) + 1 > 0",
    "MEASURES A.ts AS t PATTERN (A) DEFINE A AS mixed(v) < 5",
    "MEASURES A.ts AS t PATTERN (A B) DEFINE B AS mixed(v) > mixed(PREV(v))",
    "MEASURES mixed(A.v) * 2 AS x PATTERN (A)",
    "MEASURES max_by(A.v, mixed(A.v)) AS x PATTERN (A+)",
    "MEASURES max_by(A.v, mixed(A.v), 2) AS x PATTERN (A+)",
    "MEASURES -mixed(B.v) AS x PATTERN (A B)",
])
def test_values_of_an_any_function_that_do_not_meet_are_a_data_error(clause):
    """A function declared returns='any' may give values of different types; where two meet
    in an operation, a comparison or an aggregate, that is a DataError naming the row, not a
    Python TypeError."""
    sparkcep.register_function("mixed", lambda v: 1 if v == 1 else "many")
    frame = pd.DataFrame({"ts": [1, 2, 3], "v": [1, 2, 3]})
    with pytest.raises(DataError, match="cannot .* (values of types|a value of type)") as e:
        sparkcep.match_recognize(frame, "ORDER BY ts " + clause)
    assert e.value.row is not None


@pytest.mark.parametrize("measure", ["mixed(FIRST(v)) * 2", "mixed(FIRST(v)) + 1", "mixed(FIRST(v)) < 1"])
def test_segment_queries_refuse_values_of_an_any_function_that_do_not_meet(measure):
    """The segment evaluator applies the row evaluator's operators: 'many' * 2 is an error
    there too, not 'manymany'."""
    sparkcep.register_function("mixed", lambda v: 1 if v == 1 else "many")
    frame = pd.DataFrame({"ts": [1, 2, 3], "v": [1, 2, 3]})
    with pytest.raises(DataError, match="cannot .* values of types"):
        sparkcep.match_recognize(frame, f"ORDER BY ts MEASURES {measure} AS x "
                                        "PATTERN (S) DEFINE SEGMENT S AS window(1, 1)")


@pytest.mark.parametrize("big, first, message", [(2**64, 1, "does not fit 64 bits"),
                                                 (-2**63 - 1, 1, "does not fit 64 bits"),
                                                 (10**30, 1, "does not fit 64 bits"),
                                                 (2**63, -1, "is past a signed 64-bit integer")])
def test_an_object_column_holding_an_integer_past_64_bits_is_a_data_error(big, first, message):
    """pandas keeps such integers in an object column; no Arrow integer holds them (or not
    beside negative ones), so a query cannot read the column: a DataError naming the column
    and the row. Unread, it passes through as it is."""
    frame = pd.DataFrame({"ts": [1, 2, 3], "n": [first, big, 2]})
    for clause in ("MEASURES A.n AS n ALL ROWS PER MATCH PATTERN (A)", "MEASURES A.n AS n PATTERN (A)"):
        with pytest.raises(DataError, match=f"the integer {big} {message}") as e:
            sparkcep.match_recognize(frame, "ORDER BY ts " + clause)
        assert (e.value.column, e.value.row) == ("n", 1)
    out = sparkcep.match_recognize(frame, "ORDER BY ts ALL ROWS PER MATCH PATTERN (A)")
    assert out["n"].tolist() == [first, big, 2]


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "UInt8", "UInt64"])
@pytest.mark.parametrize("arrow", [False, True])
def test_an_unsigned_column_the_query_reads_keeps_its_type_in_the_output(dtype, arrow):
    """The query reads unsigned integers as BIGINT; ALL ROWS PER MATCH still copies the input
    column as given (a measure of it is a BIGINT)."""
    frame = pd.DataFrame({"ts": [1, 2, 3], "level": pd.Series([3, 200, 7], dtype=dtype)})
    data = pa.Table.from_pandas(frame, preserve_index=False) if arrow else frame
    out = sparkcep.match_recognize(data, "ORDER BY ts MEASURES A.level * 2 AS twice ALL ROWS PER MATCH "
                                         "PATTERN (A B*) DEFINE A AS level > 2, B AS level > PREV(level)")
    if arrow:
        assert out.schema.field("level").type == data.schema.field("level").type
        out = out.to_pandas()
    else:
        assert out.level.dtype == frame.level.dtype
    assert out.level.tolist() == [3, 200, 7] and out.twice.tolist() == [6, 6, 14]


@pytest.mark.parametrize("arrow", [False, True])
def test_whole_days_added_to_a_date_give_a_date(arrow):
    """date ± INTERVAL of days is a date in DEFINE and MEASURES, on every matcher path; an
    interval with hours is a DataError naming the row (Trino refuses it)."""
    days = [dt.date(2024, 3, 9), dt.date(2024, 3, 10), dt.date(2024, 3, 12), dt.date(2024, 3, 13)]
    frame = pd.DataFrame({"ts": range(4), "d": days})
    data = pa.Table.from_pandas(frame, preserve_index=False) if arrow else frame
    text = ("ORDER BY ts MEASURES A.d + INTERVAL '1' DAY AS nxt, INTERVAL '2' DAY + B.d AS later, "
            "B.d - INTERVAL '1' DAY AS before PATTERN (A B) DEFINE B AS B.d = A.d + INTERVAL '1' DAY")
    out = sparkcep.match_recognize(data, text)
    rows = (out.to_pylist() if arrow else out.to_dict("records"))
    assert [(r["nxt"], r["later"], r["before"]) for r in rows] == [
        (dt.date(2024, 3, 10), dt.date(2024, 3, 12), dt.date(2024, 3, 9)),
        (dt.date(2024, 3, 13), dt.date(2024, 3, 15), dt.date(2024, 3, 12))]
    from sparkcep.api import compile_query, run_plan
    from sparkcep.runtime.vm import Matcher

    table = pa.Table.from_pandas(frame, preserve_index=False)
    plan = compile_query(text, table)
    python = run_plan(plan, table, Matcher, use_kernel=False).to_pylist()
    assert run_plan(plan, table, use_kernel=True).to_pylist() == python and len(python) == 2
    with pytest.raises(DataError, match="cannot add hours, minutes or seconds to a date") as e:
        sparkcep.match_recognize(data, "ORDER BY ts MEASURES A.ts AS t PATTERN (A B) "
                                       "DEFINE B AS B.d > A.d + INTERVAL '1' HOUR")
    assert e.value.row == 1
    window = " PATTERN (S) DEFINE SEGMENT S AS window(1, 1)"  # the segment evaluator alike
    got = sparkcep.match_recognize(data, "ORDER BY ts MEASURES FIRST(d) + INTERVAL '1' DAY AS x" + window)
    assert list(got.column("x").to_pylist() if arrow else got.x) == [d + dt.timedelta(days=1) for d in days]
    with pytest.raises(DataError, match="cannot add hours, minutes or seconds to a date"):
        sparkcep.match_recognize(data, "ORDER BY ts MEASURES FIRST(d) + INTERVAL '25' HOUR AS x" + window)
    with pytest.raises(sparkcep.QueryError, match="cannot apply '-' to date and timestamp"):
        sparkcep.match_recognize(data, "ORDER BY ts MEASURES A.d - TIMESTAMP '2024-03-01 00:00:00' AS x PATTERN (A)")


def test_a_sum_past_bigint_in_define_names_the_row():
    """A running SUM in DEFINE that leaves BIGINT is a DataError naming the row and the
    condition, on the kernel and the Python matcher alike."""
    from sparkcep.api import compile_query, run_plan
    from sparkcep.runtime.vm import Matcher

    table = pa.table({"ts": list(range(8)), "v": [1, 2**61, 2**61, 2**61, 2**61, 5, 2**62, 2**62]})
    for cond, var in (("A AS SUM(v) > 0", "A"), ("B AS SUM(B.v) > A.v", "B")):
        plan = compile_query(f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN ({'A+' if var == 'A' else 'A B+'}) "
                             f"DEFINE {cond}", table)
        for kw in ({"use_kernel": True}, {"matcher_factory": Matcher, "use_kernel": False}):
            with pytest.raises(DataError, match=f"bigint overflow in sum in the condition of {var}") as e:
                run_plan(plan, table, **kw)
            assert e.value.row == 4


_MIN, _MAX = -2**63, 2**63 - 1


@pytest.mark.parametrize("values", [[_MIN], [_MIN, _MAX], [5, _MIN], [3, _MIN, 4, 5]])
@pytest.mark.parametrize("cond, what", [("-v > 0", "negation"), ("abs(v) > 0", "abs"), ("0 - v > 0", "subtraction"),
                                        ("v * -1 > 0", "multiplication"), ("v / -1 > 0", "division")])
def test_bigint_overflow_in_define_is_an_error_on_every_path(values, cond, what):
    """-(-2^63), abs(-2^63), -2^63 / -1 leave BIGINT: a DataError naming the row, whichever
    evaluator runs (a column holding -2^63 alone once passed for small and was vectorized
    with numpy's wraparound; the Python evaluator negated without a check)."""
    frame = pd.DataFrame({"ts": range(len(values)), "v": values})
    with pytest.raises(DataError, match=f"bigint overflow in {what} in the condition of A") as e:
        sparkcep.match_recognize(frame, f"ORDER BY ts MEASURES A.ts AS t PATTERN (A) DEFINE A AS {cond}")
    assert e.value.row == values.index(_MIN)
    assert sparkcep.match_recognize(frame, "ORDER BY ts MEASURES A.ts AS t PATTERN (A) DEFINE A AS v % -1 = 0"
                                    ).t.tolist() == list(range(len(values)))


def test_a_sum_of_products_past_bigint_is_an_error_not_a_wrap():
    frame = pd.DataFrame({"ts": [0, 1], "v": [2, 2**31 - 1]})
    with pytest.raises(DataError, match="bigint overflow in") as e:
        sparkcep.match_recognize(frame, "ORDER BY ts MEASURES A.ts AS t PATTERN (A) DEFINE A AS v*v + v*v + v*v > 0")
    assert e.value.row == 1


@pytest.mark.parametrize("measure, what", [("-A.v", "negation"), ("abs(A.v)", "abs"), ("A.v / -1", "division"),
                                           ("round(B.v, -1)", "round")])
def test_bigint_overflow_in_measures_names_the_row(measure, what):
    frame = pd.DataFrame({"ts": [0, 1], "v": [_MIN, _MAX]})
    with pytest.raises(DataError, match=f"bigint overflow in {what} in MEASURES") as e:
        sparkcep.match_recognize(frame, f"ORDER BY ts MEASURES {measure} AS x PATTERN (A B)")
    assert e.value.row == 0


def test_bigint_round_is_exact():
    """round(bigint[, n]) is integer arithmetic, half away from zero (never through a double)."""
    big = 4611686018427387905
    frame = pd.DataFrame({"ts": [0, 1, 2, 3], "v": [big, 15, -15, -25]})
    out = sparkcep.match_recognize(frame, "ORDER BY ts MEASURES round(A.v) AS r, round(A.v, -1) AS tens, "
                                          "round(A.v, -2) AS hundreds, round(A.v, 2) AS same PATTERN (A)")
    assert out.r.tolist() == [big, 15, -15, -25]
    assert out.tens.tolist() == [4611686018427387910, 20, -20, -30]
    assert out.hundreds.tolist() == [4611686018427387900, 0, 0, 0]
    assert out.same.tolist() == [big, 15, -15, -25]
    with pytest.raises(DataError, match="bigint overflow in round"):  # 10^19 is past BIGINT, as in Trino
        sparkcep.match_recognize(frame, "ORDER BY ts MEASURES round(A.v, -19) AS r PATTERN (A)")


def test_the_kernel_declines_a_column_holding_bigint_min():
    """A column whose values reach -2^63 (np.abs wraps it to itself) is not compiled: the
    Python evaluator reports the overflow of B.v * -1."""
    frame = pd.DataFrame({"ts": range(6), "v": [5, 6, 7, 8, 9, _MIN]})
    with pytest.raises(DataError, match="bigint overflow in multiplication in the condition of B") as e:
        sparkcep.match_recognize(frame, "ORDER BY ts MEASURES A.ts AS t PATTERN (A B) DEFINE B AS B.v * -1 > A.v")
    assert e.value.row == 5


@pytest.mark.parametrize("measure, expect", [("FIRST(v) / 2", [-2**62, 2]), ("FIRST(v) % -1", [0, 0]),
                                             ("-FIRST(v)", "negation"), ("FIRST(v) / -1", "division"),
                                             ("abs(FIRST(v))", "abs")])
def test_segment_queries_keep_bigint_rules(measure, expect):
    frame = pd.DataFrame({"ts": [0, 1], "v": [_MIN, 5]})
    text = f"ORDER BY ts MEASURES {measure} AS x PATTERN (S) DEFINE SEGMENT S AS window(1, 1)"
    if isinstance(expect, str):
        with pytest.raises(DataError, match=f"bigint overflow in {expect}"):
            sparkcep.match_recognize(frame, text)
    else:
        assert sparkcep.match_recognize(frame, text).x.tolist() == expect


@pytest.mark.parametrize("values, row, says", [
    ([dt.date(2024, 1, 1), 5, 3], 1, "mixes date values with int ones (5), which would be read as date32"),
    ([dt.timedelta(1), None, 5], 2, "mixes timedelta values with int ones"),
    ([dt.datetime(2024, 1, 1), 5, None], 1, "mixes datetime values with int ones"),
    ([1.5, None, True], 2, "mixes float values with bool ones"),
    (["a", b"b", None], 0, "mixes bytes values with str ones"),
    ([dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 5), None], 1, "mixes date values with datetime ones"),
    ([1, "a", 2], 1, "cannot read this column"),
    (["a", "b", "\udc80"], 2, "surrogates not allowed"),
])
def test_an_object_column_of_mixed_values_names_the_row(values, row, says):
    """An object column whose values Arrow cannot read as one type, or would read silently
    as another (an int among dates as days, True among floats as 1.0, a datetime among dates
    as its date): a DataError naming the column and the first row to blame."""
    df = pd.DataFrame({"ts": [1, 2, 3], "x": pd.Series(values, dtype=object)})
    with pytest.raises(DataError) as e:
        match_recognize(df, "ORDER BY ts MEASURES A.x AS v PATTERN (A)")
    assert (e.value.column, e.value.row) == ("x", row) and says in str(e.value), str(e.value)


@pytest.mark.parametrize("result, says", [
    (lambda x: __import__("decimal").Decimal("NaN"), "a DECIMAL has no NaN or infinity"),
    (lambda x: pd.Series([1]), "whose comparisons are element-wise"),
    (lambda x: [1, pd.DataFrame({"a": [1]})], "whose comparisons are element-wise"),
    (lambda x: __import__("sys").exit(3), "failed: SystemExit(3)"),
])
def test_an_untyped_function_returns_sql_values(registered, result, says):
    """A function left at returns="any" is checked at the boundary for what is sure to fail
    later (a decimal NaN, pandas objects), and sys.exit is a DataError naming the function
    and the row, in DEFINE and MEASURES (they failed deep inside, or left as SystemExit)."""
    registered("odd", result)
    df = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    for q in ("ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS odd(price) IS NOT NULL",
              "ORDER BY ts MEASURES odd(A.price) AS v PATTERN (A)"):
        with pytest.raises(DataError) as e:
            match_recognize(df, q)
        assert "ODD" in str(e.value).upper() and says in str(e.value) and e.value.row == 0, str(e.value)


def test_a_segment_query_calls_functions_by_the_same_rule(registered):
    """A segment condition's function that fails, or calls sys.exit, is a DataError naming
    it (the segment evaluator calls functions through call_function, as every other one)."""
    df = pd.DataFrame({"ts": range(6), "p": [1.0, 2, 3, 2, 1, 4]})
    for fn, says in ((lambda x: __import__("sys").exit(3), "failed: SystemExit(3)"),
                     (lambda x: 1 / 0, "failed: division by zero")):
        registered("seg_fn", fn, returns="double")
        with pytest.raises(DataError) as e:
            match_recognize(df, "ORDER BY ts MEASURES FIRST(ts) AS a PATTERN (S) "
                                "DEFINE SEGMENT S AS window(2, 3) AND avg(seg_fn(p)) > 0")
        assert "function SEG_FN " + says in str(e.value), str(e.value)


def test_a_measure_of_mixed_types_names_its_output_rows(registered):
    registered("mix", lambda x: 1 if x > 1 else "a")
    df = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    with pytest.raises(DataError, match=r"holds values of more than one type: 'a' \(str\) in output row 0, "
                                        r"1 \(int\) in output row 1") as e:
        match_recognize(df, "ORDER BY ts MEASURES mix(A.price) AS v PATTERN (A)")
    assert e.value.column == "v"


def test_a_half_float_key_partitions_as_its_float32_twin():
    """float16 as a PARTITION BY key (Arrow sorts and compares no half floats: it was an
    InternalError): the same matches as the same values in float32, the column kept as is."""
    h = np.array([2, 1, 2, np.nan, 1.5], dtype=np.float16)
    base = pd.DataFrame({"ts": [1, 2, 3, 4, 5], "price": [1.0, 2.0, 3.0, 4.0, 5.0]})
    q = "PARTITION BY h ORDER BY ts MEASURES COUNT(*) AS n, LAST(price) AS p ALL ROWS PER MATCH PATTERN (A+)"
    for wrap in (lambda d: d, pa.Table.from_pandas):
        got = match_recognize(wrap(base.assign(h=h)), q)
        want = match_recognize(wrap(base.assign(h=h.astype(np.float32))), q)
        got = got if isinstance(got, pa.Table) else pa.Table.from_pandas(got)
        want = want if isinstance(want, pa.Table) else pa.Table.from_pandas(want)
        assert got.schema.field("h").type == pa.float16()
        assert got.drop(["h"]).equals(want.drop(["h"]))
        assert got.column("h").cast(pa.float32()).equals(want.column("h"))


def test_a_column_without_an_arrow_type_is_an_error_only_where_read():
    """A complex or sparse pandas column (no Arrow type): a query that does not read it runs
    (ALL ROWS PER MATCH gives it back as it was); one that reads it names the column (and
    no row: the type is to blame)."""
    df = pd.DataFrame({"ts": [1, 2, 3], "z": np.array([1j, 2j, 3j]), "s": pd.arrays.SparseArray([0, 1, 0])})
    assert match_recognize(df, "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A)").n.tolist() == [1, 1, 1]
    out = match_recognize(df, "ORDER BY ts MEASURES A.ts AS v ALL ROWS PER MATCH PATTERN (A)")
    assert out["z"].tolist() == [1j, 2j, 3j] and out["s"].dtype == df["s"].dtype and out["s"].tolist() == [0, 1, 0]
    for q in ("ORDER BY ts MEASURES A.z AS v PATTERN (A)", "ORDER BY ts MEASURES A.z AS v ALL ROWS PER MATCH PATTERN (A)"):
        with pytest.raises(DataError) as e:
            match_recognize(df, q)
        assert e.value.column == "z" and e.value.row is None


def test_bad_call_arguments_are_option_errors():
    from sparkcep import QueryError

    df = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    m = match_recognize(df, "ORDER BY ts MEASURES FIRST(ts) AS a, LAST(ts) AS b PATTERN (A+)")
    for call, says in ((lambda: match_recognize(df, "ORDER BY ts PATTERN (A)", mode=[]), "mode must be"),
                       (lambda: sparkcep.snoop(df, "SELECT * FROM SEQ(A; B)", order_by="ts", partition_by=5),
                        "partition_by must name a column"),
                       (lambda: sparkcep.sql(None, "SELECT 1"), "sql runs on a SparkSession"),
                       (lambda: sparkcep.plot(df, m, x="ts", y="price", start="a", end="b", ax=5),
                        "ax must be a matplotlib Axes"),
                       (lambda: sparkcep.run_to_end(None, "ORDER BY ts PATTERN (A)", "out", "ckpt", watermark="1 second"),
                        "run_to_end needs a streaming DataFrame")):
        with pytest.raises(QueryError) as e:
            call()
        assert e.value.code == "INVALID_OPTION" and says in str(e.value), str(e.value)


def test_an_untyped_value_whose_comparison_raises_names_the_row(registered):
    """Objects a returns='any' function gives pass the boundary (they may be another
    function's arguments); compared, their own operator may raise: a DataError on the row,
    not an InternalError."""
    class Touchy:
        def __eq__(self, other):
            raise RuntimeError("no comparing me")

        def __lt__(self, other):
            raise ValueError("nor ordering")

        __hash__ = object.__hash__

    registered("touchy", lambda x: Touchy())
    df = pd.DataFrame({"ts": [1, 2, 3], "price": [1.0, 2.0, 3.0]})
    for cond, says in (("touchy(price) = touchy(price)", "RuntimeError: no comparing me"),
                       ("touchy(price) < touchy(price)", "ValueError: nor ordering")):
        with pytest.raises(DataError) as e:
            match_recognize(df, f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS {cond}")
        assert "cannot compare values of types Touchy and Touchy" in str(e.value) and says in str(e.value)
        assert e.value.row == 0


class _Opaque:
    """What a function declared returns='any' may give: an object of the user's."""


_NOT_NUMBERS = [({1: 1, 2: "many", 3: 3}, "needs numbers.*type str"),
                ({1: 1, 2: _Opaque(), 3: 3}, "needs numbers.*type _Opaque"),
                ({1: 1, 2: True, 3: 3}, "needs numbers.*type bool")]
# A float and a decimal do not add up; the aggregates that take the first and last value, or
# every value as a float, do not add them.
_NOT_MEETING = ({1: 1.5, 2: decimal.Decimal("2.5"), 3: 3.5}, "cannot combine the values")
_ARITHMETIC = ["SUM(x)", "AVG(x)", "stddev_pop(x)", "var_samp(x)", "delta(x)", "linear_reg_r2(x, v)",
               "linear_reg_r2(v, x)", "mann_kendall_test(x)"]


@pytest.mark.parametrize("values, message, aggregate", [
    (values, message, aggregate) for values, message in _NOT_NUMBERS for aggregate in _ARITHMETIC
] + [(*_NOT_MEETING, aggregate) for aggregate in ("SUM(x)", "AVG(x)", "stddev_pop(x)", "var_samp(x)")])
@pytest.mark.parametrize("where", ["measures", "define", "segment"])
def test_arithmetic_aggregates_refuse_values_of_an_any_function_that_are_not_numbers(values, message, aggregate,
                                                                                       where):
    """SUM over the values of a function declared returns='any' adds numbers only: a string,
    a bool or an object of the user's is a DataError naming the row, as are numbers whose
    types do not meet; never a sum of strings or a Python TypeError."""
    sparkcep.register_function("anything", lambda v: values[v], "any")
    frame = pd.DataFrame({"ts": [1, 2, 3], "v": [1, 2, 3]})
    call = aggregate.replace("(x", "(anything(v)").replace(", x)", ", anything(v))")
    text = {
        "measures": f"ORDER BY ts MEASURES {call} AS r PATTERN (A+) DEFINE A AS v > 0",
        "define": f"ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS {call} IS NOT NULL OR v > 0",
        "segment": f"ORDER BY ts MEASURES {call} AS r PATTERN (S) DEFINE SEGMENT S AS window(3, 3)",
    }[where]
    with pytest.raises(DataError, match=message) as e:
        sparkcep.match_recognize(frame, text)
    assert e.value.row is not None


def test_arithmetic_aggregates_take_numbers_of_an_any_function():
    sparkcep.register_function("anything", lambda v: {1: 1, 2: 2.5, 3: 3}[v], "any")
    frame = pd.DataFrame({"ts": [1, 2, 3], "v": [1, 2, 3]})
    got = sparkcep.match_recognize(frame, "ORDER BY ts MEASURES SUM(anything(v)) AS s, AVG(anything(v)) AS a, "
                                          "delta(anything(v)) AS d PATTERN (A+) DEFINE A AS v > 0")
    assert got.to_dict("records") == [{"s": 6.5, "a": 6.5 / 3, "d": 2}]


def test_nanoseconds_read_as_the_microsecond_they_fall_in_before_1970_too():
    """Floored, as a clock reads (Arrow's cast cuts toward zero: the last nanosecond of 1969
    read as 1970); PARTITION BY tells keys a nanosecond apart, as ORDER BY does."""
    import pandas as pd

    df = pd.DataFrame({"ts": pd.to_datetime(["1969-12-31 23:59:59.999999999", "1970-01-01 00:00:00.000000001",
                                             "1969-12-31 23:59:59.000000500"]), "i": [1, 2, 3]})
    out = sparkcep.match_recognize(df, "ORDER BY i MEASURES year(A.ts) AS y, A.ts < TIMESTAMP '1970-01-01 00:00:00' "
                                       "AS before, millisecond(A.ts) AS ms, second(A.ts) AS s ONE ROW PER MATCH "
                                       "PATTERN (A)")
    assert out[["y", "before", "ms", "s"]].values.tolist() == [[1969, True, 999, 59], [1970, False, 0, 0],
                                                               [1969, True, 0, 59]]
    keys = pd.DataFrame({"k": pd.to_datetime([1, 2, 2, -1], unit="ns"), "i": [1, 2, 3, 4]})
    got = sparkcep.match_recognize(keys, "PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n PATTERN (A+)")
    assert got["n"].tolist() == [1, 1, 2]


def test_what_the_query_does_not_read_passes_through_untouched():
    """Unread pandas columns of any objects (dicts, complex numbers, ints beside strings)
    come back as they were, under ALL ROWS PER MATCH too; Arrow's view types too."""
    import pandas as pd

    frame = pd.DataFrame({"i": [1, 2, 3], "o": [{"a": 1}, {"b": 2}, None], "c": [1 + 2j, 3j, 0j],
                          "m": [1, "x", None], "s": pd.Series(["a", None, "c"], dtype="string")})
    for rows in ("ONE ROW PER MATCH", "ALL ROWS PER MATCH"):
        out = sparkcep.match_recognize(frame, f"ORDER BY i MEASURES COUNT(*) AS n {rows} PATTERN (A B?)")
        if rows.startswith("ALL"):
            assert out["o"].tolist() == [{"a": 1}, {"b": 2}, None] and out["c"].tolist() == [1 + 2j, 3j, 0j]
            assert out["m"].tolist() == [1, "x", None] and str(out["s"].dtype) == "string"
            assert out["s"].tolist() == ["a", pd.NA, "c"] and out["n"].tolist() == [1, 2, 1]
        else:
            assert out["n"].tolist() == [2, 1]
    table = pa.table({"i": [1, 2], "s": pa.array(["a", "b"], pa.string_view()),
                      "b": pa.array([b"x", b"y"], pa.binary_view())})
    out = sparkcep.match_recognize(table, "ORDER BY i MEASURES COUNT(*) AS n ALL ROWS PER MATCH PATTERN (A)")
    assert out.schema.field("s").type == pa.string_view() and out.column("s").to_pylist() == ["a", "b"]
    assert out.schema.field("b").type == pa.binary_view() and out.column("b").to_pylist() == [b"x", b"y"]


def test_a_timestamp_literal_meets_a_zoned_one_as_in_comparisons():
    """GREATEST and LEAST read a naive timestamp beside a zoned one as wall time in its zone,
    as < does; ARRAY of values of no common type is refused at the query."""
    import pandas as pd

    zoned = pd.DataFrame({"ts": pd.to_datetime(["2024-03-10 01:00", "2024-03-10 04:00"]).tz_localize(
        "America/New_York"), "n": [1, 2], "i": [1, 2]})
    out = sparkcep.match_recognize(zoned, "ORDER BY i MEASURES greatest(A.ts, TIMESTAMP '2024-03-10 03:30:00') AS g, "
                                          "least(A.ts, TIMESTAMP '2024-03-10 03:30:00') AS l, "
                                          "A.ts < TIMESTAMP '2024-03-10 03:30:00' AS lt ONE ROW PER MATCH PATTERN (A)")
    assert [str(v) for v in out["g"]] == ["2024-03-10 03:30:00-04:00", "2024-03-10 04:00:00-04:00"]
    assert [str(v) for v in out["l"]] == ["2024-03-10 01:00:00-05:00", "2024-03-10 03:30:00-04:00"]
    assert out["lt"].tolist() == [True, False]
    with pytest.raises(sparkcep.QueryError, match="ARRAY needs elements of one type") as e:
        sparkcep.match_recognize(zoned, "ORDER BY i MEASURES ARRAY[A.ts, A.n] AS a ONE ROW PER MATCH PATTERN (A)")
    assert e.value.code == "TYPE_MISMATCH"
