"""A job for the standalone-cluster test: runs RIP Q1 with the run strategy on the given
master and writes the result as Parquet. Run as a separate process (one SparkContext each)."""

import sys
import threading
import time

from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
from sparkcep.spark.session import get_session
from sparkcep.workloads import rip


def main(master: str, source: str, target: str) -> None:
    spark = get_session(master, app_name="sparkcep-cluster-test", config={
        "spark.executor.cores": "1", "spark.cores.max": "2", "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable, "spark.task.maxFailures": "8",
    })
    # Shuffled into four partitions: no longer in ORDER BY order, so the run strategy sorts
    # into batches of 4 000 rows that both executors work on, long enough that the kill lands
    # inside a task rather than between two (one Parquet split would be
    # one batch, matched where it lies).
    df = spark.read.parquet(source).repartition(4)
    run = SparkRun("runs", "test")
    df.count()  # executors are up and working before the test kills one
    print("started", flush=True)
    t0 = time.perf_counter()
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()
    failure: list[BaseException] = []

    def job() -> None:
        try:
            with collect_errors():
                out = match_recognize_spark(df, rip.query("Q1", maxlength=60), strategy="runs", batch=4000, run=run)
                out.write.mode("overwrite").parquet(target)
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)
        finally:
            done.set()

    worker = threading.Thread(target=job)
    worker.start()
    # Tell the test when both executors are busy with tasks, so the kill loses running work.
    told = False
    while not done.wait(0.05):
        if not told and sum(tracker.getStageInfo(s).numActiveTasks for s in tracker.getActiveStageIds()
                            if tracker.getStageInfo(s) is not None) >= 2:
            print("running", flush=True)
            told = True
    worker.join()
    if failure:
        raise failure[0]
    # Work lost with the executor runs again: as failed task attempts retried within a stage
    # attempt, or as stage attempts resubmitted (their tasks' outputs were on the lost worker).
    infos = [info for j in tracker.getJobIdsForGroup() for sid in tracker.getJobInfo(j).stageIds
             if (info := tracker.getStageInfo(sid)) is not None]
    failed = sum(info.numFailedTasks for info in infos) + sum(info.currentAttemptId for info in infos)
    # Executors still registered (the driver's block manager counts as one more).
    alive = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(f"done in {time.perf_counter() - t0:.1f} s with {alive} executors alive, {failed} failed task or stage attempts "
          f"retried: {run.describe()}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
