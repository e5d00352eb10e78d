"""The conformance corpus on a Spark Connect session: the cases that expect rows give them
from a Connect DataFrame (partition strategy; the run strategy too where it applies), as
test_conformance_spark checks on a classic session. In a fresh process, so that its Connect
server and the tests' classic session do not share a JVM; every fifth case in the full
tier, every twenty-fifth in the fast one."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

from tests.tiers import FULL

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    import sparkcep
    from sparkcep.api import compile_query
    from tests.conformance.test_conformance import CASES, same_rows, table_of
    from tests.spark.test_conformance_spark import _ordered

    every = int(sys.argv[1])
    spark = (SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    cases = [c for c in CASES if c.error is None][::every]
    failures, runs = [], 0
    for case in cases:
        table = table_of(case)
        plan = compile_query(case.query, table)
        df = spark.createDataFrame(table)
        strategies = ["partition"]
        if not plan.define_match_number and plan.query.event_selection == "PARTITION" and not plan.query.partition_by:
            strategies.append("runs")
        for strategy in strategies:
            runs += 1
            try:
                got = sparkcep.match_recognize(df, case.query, strategy=strategy, batch=2).toArrow().to_pylist()
            except Exception as e:
                failures.append(f"{case.name} {strategy}: {type(e).__name__}: {e}")
                continue
            got = _ordered(got, case)
            want = case.expected
            if strategy == "runs":
                got, want = sorted(got, key=repr), sorted(want, key=repr)
            if not same_rows(got, want):
                failures.append(f"{case.name} {strategy}: got {got!r}, want {want!r}")
    print("RESULT " + json.dumps({"cases": len(cases), "runs": runs, "failures": failures}))
    spark.stop()
""")


def test_the_conformance_corpus_on_a_connect_session():
    every = 5 if FULL else 25
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(every)], capture_output=True, text=True, timeout=1200,
                          cwd=ROOT, env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(lines[0].removeprefix("RESULT "))
    assert got["cases"] >= (50 if FULL else 10) and got["runs"] > got["cases"]
    assert got["failures"] == [], "\n".join(got["failures"])
