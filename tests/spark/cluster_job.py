"""A job for the standalone-cluster test: runs RIP Q1 with the run strategy on the given
master and writes the result as Parquet. Run as a separate process (one SparkContext each)."""

import sys
import time

from sparkcep.spark.batch import SparkRun, collect_errors, match_recognize_spark
from sparkcep.spark.session import get_session
from sparkcep.workloads import rip


def main(master: str, source: str, target: str) -> None:
    spark = get_session(master, app_name="sparkcep-cluster-test", config={
        "spark.executor.cores": "1", "spark.cores.max": "2", "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable, "spark.task.maxFailures": "8",
    })
    df = spark.read.parquet(source)
    run = SparkRun("runs", "test")
    df.count()  # executors are up and working before the test kills one
    print("started", flush=True)
    t0 = time.perf_counter()
    with collect_errors():
        out = match_recognize_spark(df, rip.query("Q1", maxlength=60), strategy="runs", batch=2000, run=run)
        out.write.mode("overwrite").parquet(target)
    # Executors still registered (the driver's block manager counts as one more).
    alive = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(f"done in {time.perf_counter() - t0:.1f} s with {alive} executors alive: {run.describe()}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
