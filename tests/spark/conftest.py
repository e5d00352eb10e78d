import os
import sys

import pytest

from tests.spark.helpers import CONNECT


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
