"""The SASE+ front end: the paper's three example queries (Figure 1) parse, translate into
MATCH_RECOGNIZE terms and run; bad queries get positioned errors."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

import sparkcep
from sparkcep.errors import QueryError
from sparkcep.language.sase import parse_sase

T0 = dt.datetime(2026, 1, 1)

Q1 = """PATTERN SEQ(Shelf a, !(Register b), Exit c)
WHERE skip_till_next_match(a, b, c) { [tag_id] }
WITHIN 12 hours
RETURN a.tag_id, a.time AS shelf_time, c.time AS exit_time"""

Q2 = """PATTERN SEQ(Alert a, Shipment+ b[])
WHERE skip_till_any_match(a, b[]) {
  a.type = 'contaminated' and b[1].from = a.site and b[i].from = b[i-1].to }
WITHIN 3 hours
RETURN count(b[]) AS shipments, b[1].to AS first_to, b[b.len].to AS last_to"""

Q3 = """PATTERN SEQ(Stock+ a[], Stock b)
WHERE skip_till_next_match(a[], b) {
  [symbol] and a[1].volume > 1000 and a[i].price > avg(a[..i-1].price)
  and b.volume < 80%*a[a.len].volume }
WITHIN 1 hour
RETURN a[1].time AS a_first, a[a.len].time AS a_last, count(a[]) AS n, b.time AS b_time"""


def _minutes(n, step=1):
    return [T0 + dt.timedelta(minutes=step * m) for m in range(n)]


def test_query1_shoplifting():
    ev = pd.DataFrame({"time": _minutes(8),
                       "event_type": ["Shelf", "Shelf", "Register", "Exit", "Shelf", "Exit", "Exit", "Exit"],
                       "tag_id": [1, 2, 1, 2, 3, 1, 3, 2]})
    got = sparkcep.sase(ev, Q1)
    # Tag 1 passed the register, so its exit is no theft; tags 2 and 3 left unpaid.
    assert got[["tag_id", "shelf_time", "exit_time"]].values.tolist() == [
        [2, T0 + dt.timedelta(minutes=1), T0 + dt.timedelta(minutes=3)],
        [3, T0 + dt.timedelta(minutes=4), T0 + dt.timedelta(minutes=6)],
    ]


def test_query1_with_explicit_equalities_equals_the_equivalence_test():
    ev = pd.DataFrame({"time": _minutes(10),
                       "event_type": ["Shelf", "Shelf", "Register", "Exit", "Shelf", "Exit", "Exit", "Exit", "Shelf", "Exit"],
                       "tag_id": [1, 2, 1, 2, 3, 1, 3, 2, 1, 1]})
    explicit = Q1.replace("{ [tag_id] }", "{ a.tag_id = b.tag_id and a.tag_id = c.tag_id }")
    a = sparkcep.sase(ev, Q1)[["shelf_time", "exit_time"]].values.tolist()
    b = sparkcep.sase(ev, explicit)[["shelf_time", "exit_time"]].values.tolist()
    assert sorted(a) == sorted(b) and len(a) == 3


def test_query2_contaminated_shipments():
    ship = pd.DataFrame({"time": _minutes(7, 10),
                         "event_type": ["Alert"] + ["Shipment"] * 6,
                         "type": ["contaminated"] + [None] * 6, "site": ["X"] + [None] * 6,
                         "from": [None, "X", "Y", "X", "Z", "Y", "Q"], "to": [None, "Y", "Z", "Z", "W", "V", "R"]})
    got = sparkcep.sase(ship, Q2)
    chains = sorted(got[["shipments", "first_to", "last_to"]].values.tolist())
    # Skip till any match: every chain of shipments from the contaminated site.
    assert chains == sorted([[3, "Y", "W"], [2, "Y", "Z"], [2, "Y", "V"], [1, "Y", "Y"], [2, "Z", "W"], [1, "Z", "Z"]])


def test_query3_over_the_figure3_stream():
    # The stream of the paper's Figure 3 (its digits are lost in our copy; reconstructed):
    # the price rises on average, then the volume drops.
    stock = pd.DataFrame({"time": _minutes(8), "event_type": "Stock", "symbol": "GOOG",
                          "price": [100, 120, 120, 121, 120, 125, 120, 120],
                          "volume": [1010, 990, 1005, 999, 999, 750, 950, 700]})
    got = sparkcep.sase(stock, Q3)
    m = lambda k: T0 + dt.timedelta(minutes=k)  # noqa: E731
    assert got[["a_first", "a_last", "n", "b_time"]].values.tolist() == [
        [m(0), m(6), 7, m(7)], [m(0), m(4), 5, m(5)], [m(2), m(3), 2, m(5)]]


def test_translation_is_match_recognize():
    plan = sparkcep.api.compile_query(parse_sase(Q3), _stock_schema())
    text = plan.explain()
    assert "pattern: A_1 A_I* B" in text and "event selection: skip till next match" in text
    assert "partition by: symbol" in text


def _stock_schema():
    import pyarrow as pa

    return pa.table({"time": pa.array([], pa.timestamp("us")), "event_type": pa.array([], pa.string()),
                     "symbol": pa.array([], pa.string()), "price": pa.array([], pa.int64()),
                     "volume": pa.array([], pa.int64())})


@pytest.mark.parametrize("query, code, at", [
    ("PATTERN SEQ(Stock a, Stock b) WHERE a[i].price > 1", "INVALID_REFERENCE", "a[i]"),
    ("PATTERN SEQ(Stock+ a[], Stock b) WHERE a.price > 1", "INVALID_REFERENCE", "a.price"),
    ("PATTERN SEQ(Stock a, Stock b) WHERE c.price > 1", "UNKNOWN_VARIABLE", "c.price"),
    ("PATTERN SEQ(Stock a, Stock b) WHERE a.price > )", "SYNTAX", ")"),
    ("PATTERN SEQ(Stock a, Stock b) WHERE skip_till_next_match(a) { a.price > 1 }", "INVALID_PATTERN", "a)"),
    ("PATTERN SEQ(Stock a, Stock b) WHERE median(a.price) > 1", "UNKNOWN_FUNCTION", "median"),
    ("PATTERN SEQ(Stock a, Stock b) WHERE a.nope > 1", "UNKNOWN_COLUMN", "a.nope"),
    ("PATTERN SEQ(Stock+ a[], Stock b) WHERE a[a.len].price > 1", "NOT_SUPPORTED", "a[a.len]"),
    ("PATTERN SEQ(Stock a, Stock b) WITHIN 30000000000 days", "NUMBER_OUT_OF_RANGE", "WITHIN"),
    ("PATTERN SEQ(Stock a, Stock b) WITHIN 99999999999999999999999 hours", "NUMBER_OUT_OF_RANGE", "WITHIN"),
    ("PATTERN SEQ(Stock a, Stock b) WITHIN 99999999999999999999999 events", "NUMBER_OUT_OF_RANGE", "WITHIN"),
])
def test_errors_point_into_the_sase_text(query, code, at):
    with pytest.raises(QueryError) as e:
        sparkcep.sase(_stock_schema().to_pandas(), query)
    assert e.value.code == code
    assert f"line 1, column {query.rindex(at) + 1}" in str(e.value)
    assert "^" in str(e.value)


@pytest.mark.parametrize("order_by, type_column", [(None, "event_type"), (5, "event_type"), ("time", 3)])
def test_bad_column_arguments_are_clear_errors(order_by, type_column):
    with pytest.raises(sparkcep.SparkCepError, match="must name") as e:
        sparkcep.sase(_stock_schema().to_pandas(), "PATTERN SEQ(Stock a, Stock b)", order_by=order_by,
                      type_column=type_column)
    assert e.value.code == "INVALID_OPTION"  # not an InternalError
