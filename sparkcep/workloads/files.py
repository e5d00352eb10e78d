"""Writing generated workloads to Parquet that Spark reads (Spark has no nanosecond
timestamps in Parquet, so timestamps are stored in microseconds)."""

from __future__ import annotations

import pathlib

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(pdf: pd.DataFrame, path: str | pathlib.Path) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(pdf, preserve_index=False), path, coerce_timestamps="us",
                   allow_truncated_timestamps=True, row_group_size=200_000)
