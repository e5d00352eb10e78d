"""Spark's Python workers without sparkcep: the query says what to install where, at the call
(not a worker traceback at the first action). Real local Spark in a fresh process whose
workers run a Python that cannot import sparkcep."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

BLOCK = textwrap.dedent("""
    import sys


    class NoSparkcep:
        def find_spec(self, name, path=None, target=None):
            if name == "sparkcep" or name.startswith("sparkcep."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, NoSparkcep())
""")

DRIVER = textwrap.dedent("""
    import os, sys
    import pandas as pd
    import sparkcep
    from sparkcep.spark.session import get_session

    os.environ["PYSPARK_PYTHON"] = sys.argv[1]
    spark = get_session("local[1]")
    df = spark.createDataFrame(pd.DataFrame({"ts": [1, 2, 3], "p": [1.0, 2.0, 1.5]}))
    for strategy in ("sequential", "runs"):
        try:
            sparkcep.match_recognize(df, "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B) DEFINE B AS p > PREV(p)",
                                     strategy=strategy).collect()
            print(strategy, "ran")
        except sparkcep.SparkCepError as e:
            print(strategy, type(e).__name__, str(e).replace("\\n", " "))
""")


@pytest.mark.slow  # a Spark session of its own
def test_workers_without_sparkcep_are_named_at_the_call(tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(BLOCK)
    worker = tmp_path / "python.sh"
    worker.write_text(f'#!/bin/sh\nexport PYTHONPATH="{block}${{PYTHONPATH:+:$PYTHONPATH}}"\nexec "{sys.executable}" "$@"\n')
    worker.chmod(0o755)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    done = subprocess.run([sys.executable, str(driver), str(worker)], capture_output=True, text=True, env=env,
                          timeout=300)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("sequential", "runs"))]
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        assert "ExecutionError Spark's Python workers cannot import sparkcep" in line, line
        assert "PYSPARK_PYTHON" in line and "addArtifacts" in line, line
