import os
import sys

import pytest

# SPARKCEP_TEST_SESSION=connect: the Spark-layer tests on a Spark Connect session (a local
# Connect server over local[2]), as the full tier runs a selection of them
# (test_connect_suites.py); else a classic session.
CONNECT = os.environ.get("SPARKCEP_TEST_SESSION") == "connect"


@pytest.fixture(scope="session")
def spark():
    if CONNECT:
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the server's Python workers: this Python
        session = (SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC")
                   .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    else:
        from sparkcep.spark.session import get_session

        session = get_session("local[2]", config={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
