"""A progress bar over Spark's jobs and stages, read from the status tracker."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def spark_progress(spark, console: Console, label: str):
    """Show tasks done / total of the active Spark stages while the body runs."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[stages]}"), TimeElapsedColumn(), console=console, transient=False)
    task = progress.add_task(label, total=None, stages="")
    seen_done: dict[int, int] = {}
    seen_total: dict[int, int] = {}

    def poll() -> None:
        while not stop.is_set():
            active = tracker.getActiveStageIds()
            for sid in active:
                info = tracker.getStageInfo(sid)
                if info is not None:
                    seen_total[sid] = info.numTasks
                    seen_done[sid] = info.numCompletedTasks
            total = sum(seen_total.values())
            done = sum(seen_done.values())
            jobs = len(tracker.getActiveJobsIds())
            progress.update(task, total=total or None, completed=done,
                            stages=f"jobs running: {jobs}, stages seen: {len(seen_total)}")
            time.sleep(0.25)

    thread = threading.Thread(target=poll, daemon=True)
    with progress:
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            total = sum(seen_total.values())
            progress.update(task, total=total or 1, completed=total or 1,
                            stages=f"stages: {len(seen_total)}, tasks: {total}")
