"""One partition of a segment query as numpy columns, with the aggregate indexes built on
it (each once: T-REX's index(), shared by every operator that asks)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcep.aggregates import kernels as agg

_EPOCH = dt.datetime(1970, 1, 1)


class Series:
    """Rows of one partition in ORDER BY order. ``numeric(i)``: column i as numbers
    (timestamps as seconds since the epoch, naive = UTC); ``objects(i)``: as Python values."""

    def __init__(self, columns: list[pa.Array | pa.ChunkedArray | None], n: int):
        self.columns = columns
        self.n = n
        self._numeric: dict[int, agg.Column] = {}
        self._objects: dict[int, list[Any]] = {}
        self.indexes: dict[Any, Any] = {}  # (kind, key) -> built structure
        self.counters: dict[str, int] = {}
        self.sharing = True  # False: aggregates are computed per segment (no shared index)

    def numeric(self, i: int) -> agg.Column:
        got = self._numeric.get(i)
        if got is None:
            got = self._numeric[i] = numeric_column(self.columns[i])
        return got

    def objects(self, i: int) -> list[Any]:
        got = self._objects.get(i)
        if got is None:
            from sparkcep.values import python_values

            got = self._objects[i] = python_values(self.columns[i])
        return got

    def index(self, key, build):
        """The structure for ``key``, built by ``build()`` on first use."""
        got = self.indexes.get(key)
        if got is None:
            got = self.indexes[key] = build()
            self.counters["indexes built"] = self.counters.get("indexes built", 0) + 1
        return got


def numeric_column(col: pa.Array | pa.ChunkedArray) -> agg.Column:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    if pa.types.is_null(t):  # an all-NULL column (pandas' all-None, Arrow's null type): numbers, all NULL
        return agg.Column(np.zeros(len(col), dtype=np.float64), valid)
    if pa.types.is_timestamp(t):
        micros = pc.fill_null(col.cast(pa.timestamp("us", t.tz)).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return agg.Column(micros.astype(np.float64) / 1e6, valid)
    if pa.types.is_date(t):
        days = pc.fill_null(col.cast(pa.date32()).cast(pa.int32()), 0).to_numpy(zero_copy_only=False)
        return agg.Column(days.astype(np.float64) * 86400.0, valid)
    if pa.types.is_duration(t):
        micros = pc.fill_null(col.cast(pa.duration("us")).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return agg.Column(micros.astype(np.float64) / 1e6, valid)
    if pa.types.is_boolean(t):
        return agg.Column(pc.fill_null(col, False).to_numpy(zero_copy_only=False).astype(np.int64), valid)
    if pa.types.is_integer(t):
        return agg.Column(pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), valid)
    if pa.types.is_floating(t):
        return agg.Column(pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False).astype(np.float64), valid)
    raise TypeError(f"column type {t} is not numeric")
