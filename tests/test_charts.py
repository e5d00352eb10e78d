"""sparkcep.plot: matches drawn over their series (matplotlib's Agg backend, no display)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import sparkcep  # noqa: E402

QUERY = """PARTITION BY k ORDER BY t
MEASURES FIRST(t) AS s, LAST(t) AS e, MAX(v) AS top, LAST(U.t) AS top_t
PATTERN (D U+) DEFINE D AS v < PREV(v), U AS v > PREV(v)"""


def _series() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 120
    return pd.DataFrame({"k": np.where(np.arange(n) % 3 == 0, "a", "b"), "t": np.arange(n),
                         "v": rng.integers(0, 10, n).astype("int64")})


def _spans(ax) -> int:
    return sum(1 for p in ax.patches if type(p).__name__ in ("Rectangle", "Polygon"))


def test_one_panel_per_key_value_with_every_match_shaded_and_marked(tmp_path):
    data = _series()
    found = sparkcep.match_recognize(data, QUERY)
    busiest = found.k.value_counts().index[0]
    fig = sparkcep.plot(data, found, x="t", y="v", start="s", end="e", key="k",
                        marks={"top": ("top_t", "top")}, path=str(tmp_path / "m.png"))
    (ax,) = fig.axes
    assert _spans(ax) == int((found.k == busiest).sum()) > 0
    assert f"k = {busiest}" in ax.get_title()
    line, marked = ax.lines
    assert len(line.get_xdata()) == int((data.k == busiest).sum())
    assert len(marked.get_xdata()) == int((found.k == busiest).sum())
    assert (tmp_path / "m.png").stat().st_size > 1000
    both = sparkcep.plot(pa.Table.from_pandas(data), pa.Table.from_pandas(found), x="t", y="v", start="s",
                         end="e", key="k", key_values=["a", "b"])
    assert [_spans(a) for a in both.axes] == [int((found.k == k).sum()) for k in "ab"]


def test_span_limits_the_picture_and_no_key_draws_one_series():
    data = _series()
    found = sparkcep.match_recognize(data[data.k == "b"], QUERY)
    fig = sparkcep.plot(data[data.k == "b"], found, x="t", y="v", start="s", end="e", span=(20, 60))
    (ax,) = fig.axes
    inside = found[(found.e >= 20) & (found.s <= 60)]
    assert _spans(ax) == len(inside) > 0
    assert min(ax.lines[0].get_xdata()) >= 20 and max(ax.lines[0].get_xdata()) <= 60


def test_timestamps_no_matches_and_an_axes_given():
    import matplotlib.pyplot as plt

    data = pd.DataFrame({"ts": pd.date_range("2024-03-30 23:00", periods=40, freq="15min", tz="Europe/Berlin"),
                         "v": np.arange(40.0) % 7})
    found = sparkcep.match_recognize(data, "ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e PATTERN (A B+) "
                                           "DEFINE B AS v > PREV(v)")
    _fig, ax = plt.subplots()
    fig = sparkcep.plot(data, found, x="ts", y="v", start="s", end="e", ax=ax, title="rises")
    assert fig is ax.figure and _spans(ax) == len(found) > 0 and ax.get_title() == "rises"
    empty = sparkcep.plot(data, found.iloc[:0], x="ts", y="v", start="s", end="e")
    assert _spans(empty.axes[0]) == 0 and len(empty.axes[0].lines) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"y": "price"}, "data has no column 'price'"),
    ({"start": "first"}, "matches has no column 'first'"),
    ({"marks": {"top": ("top_t", "peak")}}, "matches has no column 'peak'"),
    ({"key_values": ["a"]}, "key_values needs key"),
    ({"key": "k", "key_values": []}, "key_values is empty"),
    # Arguments of the wrong kind: option errors, never an InternalError from inside matplotlib.
    ({"marks": ["top"]}, "marks must map a label to a pair of column names"),
    ({"key": "k", "key_values": 5}, "key_values must be a list of values of key"),
    ({"key": "k", "key_values": "a"}, "key_values must be a list of values of key"),
    ({"ax": "figure"}, "ax must be a matplotlib Axes"),
    ({"ax": Figure()}, "ax must be a matplotlib Axes"),
    ({"y": None, "ax": 5}, "ax must be a matplotlib Axes"),
])
def test_mistakes_are_clear_errors(kwargs, message):
    data = _series()
    found = sparkcep.match_recognize(data, QUERY)
    args = {"x": "t", "y": "v", "start": "s", "end": "e", **kwargs}
    with pytest.raises(sparkcep.SparkCepError, match=message):
        sparkcep.plot(data, found, **args)
    with pytest.raises(sparkcep.SparkCepError, match="pandas DataFrame, a pyarrow Table"):
        sparkcep.plot([1, 2], found, x="t", y="v", start="s", end="e")


def test_explain_takes_a_picture_path_only():
    for picture in (5, ["plan.png"]):
        with pytest.raises(sparkcep.SparkCepError, match="picture must be a file.s path") as e:
            sparkcep.explain(_series(), QUERY, picture=picture)
        assert e.value.code == "INVALID_OPTION"


def test_explain_renders_in_a_notebook():
    text = sparkcep.explain(_series(), QUERY)
    assert isinstance(text, str) and "PATTERN" in text.upper()
    import html

    assert text._repr_html_() == f"<pre>{html.escape(text)}</pre>"


def test_a_match_running_past_the_span_is_cut_at_its_edge():
    data = _series()
    found = sparkcep.match_recognize(data, QUERY)
    fig = sparkcep.plot(data, found, x="t", y="v", start="s", end="e", key="k", key_values=["b"], span=(0, 50),
                        title="given")
    (ax,) = fig.axes
    assert ax.get_xlim() == (0, 50) and ax.get_title() == "given"


def test_user_mistakes_in_drawing_are_clear_errors(tmp_path):
    data = pd.DataFrame({"ts": pd.date_range("2024-01-01", periods=7, freq="h", tz="UTC"),
                         "v": [1.0, 2, 1, 1, 2, 1, 2], "k": ["a", "a", "a", None, None, None, None]})
    found = sparkcep.match_recognize(data, "PARTITION BY k ORDER BY ts MEASURES FIRST(ts) AS s, LAST(ts) AS e "
                                           "PATTERN (A B) DEFINE B AS v > PREV(v)")
    args = {"x": "ts", "y": "v", "start": "s", "end": "e"}
    for kwargs, message in (({"span": (1,)}, "span must be a pair"),
                            ({"marks": {"p": "s2"}}, "must be a pair of column names"),
                            ({"span": (pd.Timestamp("2024-01-01"), pd.Timestamp("2024-01-02"))}, "cannot draw v by ts"),
                            ({"path": str(tmp_path / "no" / "such" / "folder.png")}, "cannot save the picture")):
        with pytest.raises(sparkcep.SparkCepError, match=message):
            sparkcep.plot(data, found, **args, **kwargs)
    with pytest.raises(sparkcep.SparkCepError, match="data has no rows"):
        sparkcep.plot(data.iloc[:0], found.iloc[:0], key="k", **args)
    # A NULL key is a key like the others: here it has the most matches.
    fig = sparkcep.plot(data, found, key="k", **args)
    assert "k = None" in fig.axes[0].get_title() and _spans(fig.axes[0]) == 2


def test_a_timeline_draws_a_row_per_key_value_with_its_matches_as_bars():
    # Events with no value to draw: y=None puts each key value on a row of its own, every
    # event a tick, every match a bar; a second call into the same axes keeps the rows.
    import matplotlib.pyplot as plt

    data = _series()
    data.loc[data.index[-3:], "k"] = None  # a NULL key gets its row, last
    found = sparkcep.match_recognize(data, QUERY)
    fig = sparkcep.plot(data, found, x="t", y=None, start="s", end="e", key="k")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "NULL"]
    ticks = [line for line in ax.lines if line.get_marker() == "|"]
    assert [len(line.get_xdata()) for line in ticks] == [int((data.k == "a").sum()), int((data.k == "b").sum()),
                                                          int(data.k.isna().sum())]
    bars = sum(len(c.get_segments()) for c in ax.collections)
    assert bars == len(found) > 0 and f"{len(found):,} matches as bars" in ax.get_title()

    _fig, own = plt.subplots()
    sparkcep.plot(data, found[found.k == "b"], x="t", y=None, start="s", end="e", key="k", key_values=["a", "b"],
                  ax=own)
    sparkcep.plot(data, found[found.k == "a"], x="t", y=None, start="s", end="e", key="k", key_values=["a", "b"],
                  ax=own, color="tab:red", title="two layers")
    assert own.get_title() == "two layers"
    assert [c.get_segments()[0][0][1] for c in own.collections] == [1.0, 0.0]  # b's row, then a's
    with pytest.raises(sparkcep.SparkCepError, match="marks need a value"):
        sparkcep.plot(data, found, x="t", y=None, start="s", end="e", key="k", marks={"top": ("top_t", "top")})
    many = pd.DataFrame({"k": np.arange(100), "t": np.arange(100)})
    with pytest.raises(sparkcep.SparkCepError, match="100 timeline rows; pick at most 60 with key_values"):
        sparkcep.plot(many, many.assign(s=0, e=1).iloc[:0], x="t", y=None, start="s", end="e", key="k")
    one = sparkcep.plot(data, found, x="t", y=None, start="s", end="e")  # no key: one row
    assert len(one.axes[0].get_yticks()) == 1


def test_a_timeline_of_keys_of_several_types_or_of_no_rows():
    data = pd.DataFrame({"k": [1, "a", 2, "b", 1], "t": range(5)})
    found = pd.DataFrame({"k": [1], "s": [0], "e": [4]})
    fig = sparkcep.plot(data, found, x="t", y=None, start="s", end="e", key="k", span=(0, 3))
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "a", "2", "b"]  # in order of appearance
    assert "1 match as bars" in ax.get_title()
    with pytest.raises(sparkcep.SparkCepError, match="data has no rows"):
        sparkcep.plot(data.iloc[:0], found, x="t", y=None, start="s", end="e", key="k")
