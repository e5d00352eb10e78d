"""Matches drawn over the series they were found in: ``sparkcep.plot``.

One panel per PARTITION BY value asked for: the series as a line, each match shaded from
its first to its last row, and chosen points of each match marked. Events with no value to
draw (clicks, scans) get a timeline instead: one row per key value, each event a tick, each
match a bar. Input is what users
hold (pandas, Arrow, a Spark DataFrame small enough to collect); matplotlib draws, on the
backend matplotlib chooses (Agg when there is no display).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sparkcep.errors import OptionError, SparkCepError

_MARKERS = ("v", "^", "o", "s", "D", "P", "X")


def plot(data: Any, matches: Any, *, x: str, y: str | None, start: str, end: str, key: str | None = None,
         key_values: Sequence | None = None, marks: dict[str, tuple[str, str]] | None = None,
         span: tuple | None = None, title: str | None = None, ax: Any = None, path: str | None = None,
         color: str = "tab:orange"):
    """Draw ``matches`` over ``data``; returns the matplotlib Figure.

    ``x`` and ``y``: columns of ``data`` for the horizontal axis (usually the ORDER BY
    column) and the value drawn. ``start`` and ``end``: columns of ``matches`` holding each
    match's first and last ``x`` (measures such as ``FIRST(seq) AS first_seq``); the span
    between them is shaded. ``key``: a PARTITION BY column present in both; one panel per
    value of ``key_values`` (by default the value with the most matches). ``marks``: points
    to mark on each match, as ``{label: (x column, y column)}`` of ``matches``. ``span``:
    ``(low, high)`` limits on ``x``. ``ax``: draw into this matplotlib Axes (one key value
    only). ``path``: also save the picture there (PNG, SVG or PDF by the suffix).

    ``y=None`` draws a timeline instead, in one panel: a row per key value (``key_values``,
    by default every value in ``data``, sorted), each event a tick at its ``x``, each match a
    bar from ``start`` to ``end``. Rows keep their order when a second call draws more bars
    (timeouts, say) into the same ``ax``.
    """
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if span is not None and (not isinstance(span, (tuple, list)) or len(span) != 2):
        raise SparkCepError(f"plot: span must be a pair (low, high), not {span!r}")
    if marks is not None and not isinstance(marks, Mapping):
        raise OptionError("plot: marks must map a label to a pair of column names of matches, as "
                          f"{{'top': ('top_ts', 'top_price')}}, not a {type(marks).__name__}")
    if key_values is not None and (isinstance(key_values, (str, bytes)) or not isinstance(key_values, Iterable)):
        raise OptionError(f"plot: key_values must be a list of values of key, not {key_values!r}")
    if ax is not None and not isinstance(ax, Axes):
        raise OptionError(f"plot: ax must be a matplotlib Axes (as figure.subplots() gives), not {type(ax).__name__}")
    key_values = list(key_values) if key_values is not None else None
    for label, pair in (marks or {}).items():
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(c, str) for c in pair)):
            raise SparkCepError(f"plot: marks[{label!r}] must be a pair of column names (x, y) of matches, "
                                f"not {pair!r}")
    series = _pandas(data, "data")
    found = _pandas(matches, "matches")
    _need(series, [x] + ([y] if y is not None else []) + ([key] if key else []), "data")
    mark_columns = [c for pair in (marks or {}).values() for c in pair]
    _need(found, [start, end] + ([key] if key else []) + mark_columns, "matches")
    if y is None:
        if marks:
            raise SparkCepError("plot: marks need a value to stand at (y); a timeline (y=None) draws bars only")
        return _timeline(series, found, x=x, start=start, end=end, key=key, key_values=key_values, span=span,
                         title=title, ax=ax, path=path, color=color)
    if key is None:
        if key_values is not None:
            raise SparkCepError("plot: key_values needs key, the PARTITION BY column they are values of")
        panels = [(None, series, found)]
    else:
        asked = key_values is not None
        if key_values is None:
            counts = found[key].value_counts(dropna=False)
            key_values = [counts.index[0]] if len(counts) else list(series[key].drop_duplicates()[:1])
        panels = [(v, _where(series, key, v), _where(found, key, v)) for v in key_values]
        if not panels:
            raise SparkCepError("plot: key_values is empty: nothing to draw" if asked
                                else "plot: data has no rows: nothing to draw")
    if ax is not None and len(panels) > 1:
        raise SparkCepError("plot: ax holds one panel; pass one key value, or no ax for one panel per value")
    if ax is None:
        # A Figure of its own, not pyplot's: nothing stays open, a notebook shows it once.
        fig = Figure(figsize=(12, 3.2 * len(panels)))
        axes = [row[0] for row in fig.subplots(len(panels), 1, squeeze=False)]
    else:
        fig, axes = ax.figure, [ax]
    for target, (value, rows, hits) in zip(axes, panels, strict=True):
        try:
            _panel(target, rows, hits, x=x, y=y, start=start, end=end, marks=marks or {}, span=span, color=color)
        except (TypeError, ValueError) as e:  # e.g. a zoned x with a naive span, text where numbers are drawn
            raise SparkCepError(f"plot: cannot draw {y} by {x}: {e}") from None
        if title is None:
            label = f"{y} by {x}" + (f", {key} = {value}" if key is not None else "")
            shaded = f"{len(hits):,} match" + ("" if len(hits) == 1 else "es")
            target.set_title(f"{label} ({shaded} shaded)", fontsize=10)
        else:
            target.set_title(title, fontsize=10)
    return _finish(fig, ax, path)


def _finish(fig, ax, path: str | None):
    if ax is None:
        fig.tight_layout()
    if path is not None:
        try:
            fig.savefig(path, dpi=100)
        except (OSError, ValueError) as e:  # a folder that does not exist, an unknown suffix
            raise SparkCepError(f"plot: cannot save the picture to {path}: {e}") from None
    return fig


_TIMELINE_ROWS = 60  # more key values than this make an unreadable picture: ask for key_values


def _timeline(series, found, *, x: str, start: str, end: str, key: str | None, key_values, span, title, ax, path,
              color: str):
    import pandas as pd
    from matplotlib.figure import Figure

    if key is None:
        if key_values is not None:
            raise SparkCepError("plot: key_values needs key, the PARTITION BY column they are values of")
        rows = [(None, series, found)]
    else:
        if key_values is None:
            if not len(series):
                raise SparkCepError("plot: data has no rows: nothing to draw")
            present = series[key].drop_duplicates()
            try:
                key_values = sorted(present.dropna())
            except TypeError:  # values of several types: in order of appearance
                key_values = list(present.dropna())
            key_values += [None] if present.isna().any() else []
            if len(key_values) > _TIMELINE_ROWS:
                raise SparkCepError(f"plot: {len(key_values):,} values of {key} make {len(key_values):,} timeline "
                                    f"rows; pick at most {_TIMELINE_ROWS} with key_values=")
        rows = [(v, _where(series, key, v), _where(found, key, v)) for v in key_values]
        if not rows:
            raise SparkCepError("plot: key_values is empty: nothing to draw")
    if ax is None:
        fig = Figure(figsize=(12, 1.2 + 0.45 * len(rows)))
        ax = fig.subplots()
        own = None
    else:
        fig, own = ax.figure, ax
    shaded = 0
    try:
        for i, (_, events, hits) in enumerate(rows):
            if span is not None:
                low, high = span
                events = events[(events[x] >= low) & (events[x] <= high)]
                hits = hits[(hits[end] >= low) & (hits[start] <= high)]
            ax.plot(events[x], [i] * len(events), "|", ms=12, color="#333")
            spans = [(a, b) for a, b in zip(hits[start], hits[end], strict=True) if pd.notna(a) and pd.notna(b)]
            shaded += len(spans)
            if spans:
                ax.hlines([i] * len(spans), [a for a, _ in spans], [b for _, b in spans], lw=9, color=color,
                          alpha=0.45)
    except (TypeError, ValueError) as e:
        raise SparkCepError(f"plot: cannot draw a timeline by {x}: {e}") from None
    if span is not None:
        ax.set_xlim(span[0], span[1])
    ax.set_yticks(range(len(rows)), ["NULL" if pd.isna(v) else str(v) for v, _, _ in rows] if key else [""])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first value on top
    ax.set_xlabel(x)
    if key:
        ax.set_ylabel(key)
    ax.set_title(title if title is not None else f"events by {x} ({shaded:,} match{'' if shaded == 1 else 'es'} "
                                                   f"as bars)", fontsize=10)
    return _finish(fig, own, path)


def _panel(ax, rows, hits, *, x: str, y: str, start: str, end: str, marks: dict, span, color: str) -> None:
    import pandas as pd

    rows = rows.sort_values(x, kind="stable")
    if span is not None:
        low, high = span
        rows = rows[(rows[x] >= low) & (rows[x] <= high)]
        hits = hits[(hits[end] >= low) & (hits[start] <= high)]
    ax.plot(rows[x], rows[y], lw=0.8, color="#333", label=y)
    for first, last in zip(hits[start], hits[end], strict=True):
        if pd.notna(first) and pd.notna(last):
            ax.axvspan(first, last, color=color, alpha=0.3, lw=0)
    for i, (label, (mx, my)) in enumerate(marks.items()):
        ax.plot(hits[mx], hits[my], _MARKERS[i % len(_MARKERS)], ms=5, ls="none", label=label)
    if marks:
        ax.legend(fontsize=8, loc="best")
    if span is not None:  # a match running past the span is cut at its edge
        ax.set_xlim(span[0], span[1])
    ax.set_xlabel(x)
    ax.set_ylabel(y)


def _where(frame, key: str, value):
    """The rows whose ``key`` is ``value`` (NULL included: NaN never equals itself)."""
    import pandas as pd

    return frame[frame[key].isna()] if pd.isna(value) else frame[frame[key] == value]


def _pandas(table: Any, what: str):
    import pandas as pd
    import pyarrow as pa

    if isinstance(table, pd.DataFrame):
        return table
    if isinstance(table, pa.Table):
        return table.to_pandas()
    if hasattr(table, "toArrow") and hasattr(table, "sparkSession"):  # a Spark DataFrame: collected
        return table.toArrow().to_pandas()
    raise SparkCepError(f"plot: {what} must be a pandas DataFrame, a pyarrow Table or a Spark DataFrame, "
                        f"not {type(table).__name__}")


def _need(frame, columns: list[str], what: str) -> None:
    missing = [c for c in dict.fromkeys(columns) if c not in frame.columns]
    if missing:
        raise SparkCepError(f"plot: {what} has no column {', '.join(repr(c) for c in missing)} "
                            f"(it has {', '.join(map(str, frame.columns))})")
