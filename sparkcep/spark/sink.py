"""A stream's matches in one folder that its readers see whole, the end of input included.

Spark's file sink lists what it wrote in the folder's ``_spark_metadata`` log, and its
readers (``spark.read.parquet(folder)``) see only the files in that log: a flush appended to
that folder afterwards is invisible to them. So a stream whose input ends writes through
``FolderSink`` instead: a Parquet file per micro-batch, named by batch id and replaced on a
replay (exactly once with the checkpoint), then the flush as ``end-of-input.parquet``, with
no log, so every reader sees every file.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sparkcep.errors import OptionError, SparkCepError

END_OF_INPUT = "end-of-input.parquet"
TIMEOUTS_FOLDER = "_timeouts"
_SPARK_LOG = "_spark_metadata"


def refuse_file_sink_folder(path: str) -> None:
    """A folder Spark's file sink wrote holds a log its readers trust: files added beside it
    are invisible to them. Refuse it with why."""
    if os.path.isdir(os.path.join(path, _SPARK_LOG)):
        raise SparkCepError(f"{path} is the folder of a Spark file sink (it has {_SPARK_LOG}): Spark's readers see "
                            f"only the files listed in that log, so matches added to it would be invisible to "
                            f"spark.read. Write the stream and its end of input together with "
                            f"sparkcep.run_to_end(..., path=...), or the flush to another folder")


class FolderSink:
    """Tables written as Parquet files into one folder; with ``timeouts``, the rows carrying
    a ``_timeout`` (a stream's timed-out partial matches) go to ``folder/_timeouts/``, flat:
    Spark's and pyarrow's readers skip a name starting with ``_``, so reading the folder
    gives the matches alone, never timeouts merged in as rows of NULLs."""

    def __init__(self, path: str, timeouts: bool = False):
        refuse_file_sink_folder(path)
        old = pathlib.Path(path) / "timeouts"
        if old.is_dir() and any(old.glob("*.parquet")):
            # Written by an earlier version: a reader of the folder would take them for
            # matches (rows of NULLs). Moving them is the user's call, not ours.
            raise SparkCepError(f"{old} holds timed-out partial matches written where readers of {path} see them "
                                f"as matches; move its files into {pathlib.Path(path) / TIMEOUTS_FOLDER} (which "
                                "readers skip) and run again")
        self.path = pathlib.Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.timeouts = timeouts
        self.totals = {"matches": 0, "timeouts": 0}
        self.batches = 0

    def write(self, table: pa.Table, name: str) -> None:
        if not table.num_columns:  # a flush of a checkpoint with no state: nothing to write
            return
        if self.timeouts:
            from sparkcep.spark.stream import TIMEOUT

            timed = pc.is_valid(table.column(TIMEOUT))
            column = table.filter(timed).column(TIMEOUT).combine_chunks()
            expired = pa.Table.from_arrays(column.flatten(), names=[f.name for f in column.type])
            table = table.filter(pc.invert(timed)).drop_columns([TIMEOUT])
            (self.path / TIMEOUTS_FOLDER).mkdir(exist_ok=True)
            write_parquet(expired, self.path / TIMEOUTS_FOLDER / name)
            self.totals["timeouts"] += expired.num_rows
        write_parquet(table, self.path / name)
        self.totals["matches"] += table.num_rows

    def count_written(self, batch_ids: range) -> None:
        """The totals of micro-batches another process wrote (Spark Connect runs foreachBatch
        on its server): read back from their files."""
        for i in batch_ids:
            name = f"batch-{i:010d}.parquet"
            if (self.path / name).exists():
                self.totals["matches"] += pq.ParquetFile(self.path / name).metadata.num_rows
                self.batches += 1
            if (self.path / TIMEOUTS_FOLDER / name).exists():
                self.totals["timeouts"] += pq.ParquetFile(self.path / TIMEOUTS_FOLDER / name).metadata.num_rows

    def batch(self, df, batch_id: int) -> None:
        """For ``foreachBatch``: one file per micro-batch, replaced when Spark replays it."""
        self.write(df.toArrow(), f"batch-{batch_id:010d}.parquet")
        self.batches += 1


def write_parquet(table: pa.Table, path: pathlib.Path) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    try:
        pq.write_table(table, tmp)
        tmp.replace(path)  # readers never see half a file
    except OSError as e:
        raise SparkCepError(f"cannot write {path}: {e.strerror or e}") from None


def run_to_end(df, clause: str | None = None, path: str | None = None, checkpoint: str | None = None, *,
               watermark: str | float, mode: str = "sql", late: str = "drop", timeouts: bool = False, metrics=None,
               max_state_rows: int = 1_000_000, buckets: int | None = None, follow: Callable | None = None,
               rules=None, event_time: str | None = None, partition_by=()) -> dict:
    """Run the stream ``df`` (a file source, say) over the input it has now, then end its
    input: every match, the end of input's included, written to the folder ``path`` where
    ``spark.read.parquet(path)`` sees them all. Equal to ``match_recognize`` over every row
    the stream accepted. Resumes from ``checkpoint`` (the bucket count read back from it);
    a checkpoint ends once, and a run whose end of input failed to be written can be
    retried. ``follow(query, sink)``, if given, runs while the query does (a progress
    display). Returns the counts written: matches, timeouts, those of them the
    end of input added, and the micro-batches this run wrote. ``rules`` (with
    ``event_time`` and ``partition_by``) instead of ``clause``: a stream of rules (see
    ``stream``), rows ``(rule, match)``."""
    from sparkcep.spark.session import is_connect
    from sparkcep.spark.stream import flush, mark_flushed, refuse_flushed, stream
    from sparkcep.spark.wire import collect_errors

    for name, value in (("path", path), ("checkpoint", checkpoint)):
        if not isinstance(value, (str, os.PathLike)):
            raise OptionError(f"{name} must be a folder's path, not {value!r}")
    if not getattr(df, "isStreaming", False):
        raise OptionError("run_to_end needs a streaming DataFrame (spark.readStream...)")
    refuse_flushed(checkpoint)
    refuse_file_sink_folder(path)  # stream() below checks the checkpoint itself
    matches = stream(df, clause, watermark=watermark, mode=mode, end_of_input=True, late=late, timeouts=timeouts,
                     metrics=metrics, max_state_rows=max_state_rows, buckets=buckets, checkpoint=checkpoint,
                     rules=rules, event_time=event_time, partition_by=partition_by)
    sink = FolderSink(path, timeouts)
    elsewhere = is_connect(df.sparkSession)  # foreachBatch runs on the Connect server, not in this sink
    first = _committed(checkpoint) + 1
    q = (matches.writeStream.foreachBatch(sink.batch).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    with collect_errors():  # a worker's DataError comes back as it was
        if follow is not None:
            follow(q, sink)
        q.awaitTermination()
        if metrics is not None:
            metrics.absorb(q.recentProgress)  # (Connect: progress events may still be on their way)
        if elsewhere:
            sink.count_written(range(first, _committed(checkpoint) + 1))
        before = dict(sink.totals)
        rest = flush(df.sparkSession, clause, checkpoint, mode=mode, timeouts=timeouts, mark=False)
        sink.write(rest.toArrow(), END_OF_INPUT)
        mark_flushed(checkpoint)  # only once the end of input is written: a failed write can be retried
    return {**sink.totals, "end_of_input_matches": sink.totals["matches"] - before["matches"],
            "end_of_input_timeouts": sink.totals["timeouts"] - before["timeouts"], "micro_batches": sink.batches}


def _committed(checkpoint: str) -> int:
    """The last micro-batch the checkpoint committed (-1: none)."""
    commits = pathlib.Path(checkpoint) / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(ids, default=-1)
