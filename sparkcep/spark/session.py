"""A Spark session for sparkcep: local mode by default, quiet logs, a clear message when Java
is missing. A cluster is a ``master`` URL away."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import weakref

from sparkcep.errors import SparkCepError

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
# A failed task comes back to the driver as an exception, which sparkcep turns into one
# clear error: the task's Python traceback is not printed again on the way.
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
logger.microbatch.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.microbatch.level = off
logger.microbatch2.name = org.apache.spark.sql.execution.streaming.MicroBatchExecution
logger.microbatch2.level = off
"""


def java_version() -> str | None:
    """The `java -version` line, or None when no Java runtime is found."""
    java = shutil.which("java")
    if java is None and os.environ.get("JAVA_HOME"):
        candidate = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        java = candidate if os.path.exists(candidate) else None
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stderr or out.stdout).strip().splitlines()
    return text[0] if text else None


def _quiet_environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run the interpreter that has sparkcep and pyarrow installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # pandas 3 warns in every Python worker; the warning is about pandas-on-Spark, not us.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::UserWarning")
    if "SPARK_CONF_DIR" not in os.environ:
        import hashlib

        # Named by its content: a changed configuration gets its own folder.
        digest = hashlib.sha1(_LOG4J.encode()).hexdigest()[:8]
        conf = os.path.join(tempfile.gettempdir(), f"sparkcep-spark-conf-{digest}")
        os.makedirs(conf, exist_ok=True)
        path = os.path.join(conf, "log4j2.properties")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(_LOG4J)
        os.environ["SPARK_CONF_DIR"] = conf


def _local_cores(master: str) -> int | None:
    """The cores a ``local``, ``local[N]``, ``local[*]`` or ``local[N, F]`` master runs on;
    None for a cluster."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    if m.group(1) is None:
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


def get_session(master: str | None = None, app_name: str = "sparkcep", config: dict[str, str] | None = None,
                remote: str | None = None):
    """The active SparkSession, or a new one on ``master`` (default ``local[*]``); with
    ``remote`` (``sc://host:port``), a Spark Connect session to that server."""
    if remote is not None:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.remote(remote)
        for key, value in (config or {}).items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    if java_version() is None:
        raise SparkCepError(
            "Spark needs a Java runtime (Java 17 or newer) and none was found: install one "
            "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
        )
    _quiet_environment()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    master = master or os.environ.get("SPARKCEP_MASTER", "local[*]")
    builder = SparkSession.builder.appName(app_name).master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": os.environ.get("SPARKCEP_DRIVER_MEMORY", "4g"),
        # Streaming state (sparkcep.stream) stays in Spark's default, memory-backed store: a
        # few bucket entries, where RocksDB's per-batch commit (fsync and zip upload, ~250 ms
        # here) cost 15% of a 100 000-row micro-batch.
    }
    local_cores = _local_cores(master)
    if local_cores is not None:
        # Local mode: a few shuffle partitions per core, not Spark's 200. On a cluster the
        # driver's cores say nothing about the executors': Spark's default stands, and
        # adaptive execution coalesces small partitions.
        settings["spark.sql.shuffle.partitions"] = str(max(2, 2 * local_cores))
    settings.update(config or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def is_connect(frame_or_session) -> bool:
    """Whether a DataFrame or session is Spark Connect's (no JVM behind it on this side)."""
    return type(frame_or_session).__module__.startswith("pyspark.sql.connect")


# Per live session (weakly: a stopped session's entry goes with it).
_parallelism: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def parallelism(spark) -> int:
    """Spark's default parallelism (the task slots a stage fills). A Connect client cannot
    ask the SparkContext: it counts the partitions of a range Spark cuts at that width,
    once per session (a job of the JVM alone, ~0.1 s); a range takes
    ``spark.sql.leafNodeDefaultParallelism`` where it is set, so the probe runs without it."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    got = _parallelism.get(spark)
    if got is None:
        from pyspark.sql import functions as F

        leaf = "spark.sql.leafNodeDefaultParallelism"
        set_to = spark.conf.get(leaf, None)
        if set_to is not None:
            spark.conf.unset(leaf)
        try:
            n = spark.range(0, 1 << 20).select(F.spark_partition_id().alias("p")).agg(F.countDistinct("p")).first()[0]
        finally:
            if set_to is not None:
                spark.conf.set(leaf, set_to)
        got = _parallelism[spark] = max(1, int(n))
    return got


def runs_on(spark) -> str:
    """What the session runs on, for a summary: its master, or its Connect server."""
    if not is_connect(spark):
        return spark.sparkContext.master
    return f"{spark.conf.get('spark.master', 'a Spark Connect server')} (Spark Connect)"
