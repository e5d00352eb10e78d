"""A Spark standalone cluster on loopback (a master and two workers from the pyspark
installation): a run-strategy job keeps an exact answer when one worker is killed mid-job."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pandas as pd
import pytest

import sparkcep
from sparkcep.workloads import rip
from sparkcep.workloads.stock import stock_trades

pytestmark = pytest.mark.cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on port {port}")


def _spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "bin", "spark-class")


@pytest.fixture()
def cluster(tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_LOG_DIR=str(tmp_path / "logs"))
    port = _free_port()
    procs = []

    def start(*args, log):
        p = subprocess.Popen([_spark_class(), *args], env=env, stdout=open(tmp_path / log, "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
          "--webui-port", str(_free_port()), log="master.log")
    _wait_port(port)
    url = f"spark://127.0.0.1:{port}"
    workers = [start("org.apache.spark.deploy.worker.Worker", url, "--cores", "1", "--memory", "1500m",
                     "--host", "127.0.0.1", "--webui-port", str(_free_port()), log=f"worker{i}.log") for i in range(2)]
    yield url, workers, env
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def test_run_strategy_survives_a_killed_worker(cluster, tmp_path):
    url, workers, env = cluster
    pdf = stock_trades(40_000, seed=3)
    source = tmp_path / "stock.parquet"
    pdf.assign(timestamp=pdf.timestamp.astype("datetime64[us]")).to_parquet(source)
    target = tmp_path / "out"
    job = subprocess.Popen([sys.executable, "-m", "tests.spark.cluster_job", url, str(source), str(target)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    lines = []
    for line in job.stdout:
        lines.append(line)
        if line.startswith("running"):
            break  # both executors are running tasks: take one worker away for good
    os.killpg(workers[0].pid, signal.SIGKILL)
    rest, _ = job.communicate(timeout=600)
    output = "".join(lines) + rest
    assert job.returncode == 0, output[-3000:]
    assert "running" in "".join(lines), output[-2000:]
    done = re.search(r"with (\d+) executors alive, (\d+) failed task or stage attempts retried", output)
    assert done, output[-2000:]
    alive, failed = int(done.group(1)), int(done.group(2))
    assert alive == 1 and failed >= 1, output[-2000:]  # the lost tasks ran again elsewhere

    got = pd.read_parquet(target)
    expected = sparkcep.match_recognize(pdf, rip.query("Q1", maxlength=60))
    key = sorted(expected.columns)
    assert Counter(map(tuple, got[key].itertuples(index=False))) == Counter(map(tuple, expected[key].itertuples(index=False)))
    assert len(expected) > 0
