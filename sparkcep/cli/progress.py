"""A progress bar over Spark's jobs and stages, read from the status tracker."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def spark_progress(spark, console: Console, label: str):
    """Show tasks done / total of the active Spark stages while the body runs: read from the
    status tracker, or on Spark Connect (no SparkContext) from the progress the server
    sends with each operation."""
    from sparkcep.spark.session import is_connect

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[stages]}"), TimeElapsedColumn(), console=console, transient=False)
    task = progress.add_task(label, total=None, stages="")
    seen_done: dict[int, int] = {}
    seen_total: dict[int, int] = {}
    if is_connect(spark):
        with _connect_progress(spark, progress, task, seen_done, seen_total):
            yield
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

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


@contextmanager
def _connect_progress(spark, progress: Progress, task, seen_done: dict[int, int], seen_total: dict[int, int]):
    """spark_progress on a Connect session: a progress handler of the session."""
    operations: set[str] = set()

    def handler(stages=None, inflight_tasks=0, operation_id=None, done=False, **_):
        for st in stages or ():
            seen_total[st.stage_id] = st.num_tasks
            seen_done[st.stage_id] = st.num_completed_tasks
        if operation_id:
            operations.add(operation_id)
        total = sum(seen_total.values())
        progress.update(task, total=total or None, completed=sum(seen_done.values()),
                        stages=f"operations: {len(operations)}, stages seen: {len(seen_total)}")

    spark.registerProgressHandler(handler)
    with progress:
        try:
            yield
        finally:
            spark.removeProgressHandler(handler)
            total = sum(seen_total.values())
            progress.update(task, total=total or 1, completed=total or 1,
                            stages=f"stages: {len(seen_total)}, tasks: {total}")
