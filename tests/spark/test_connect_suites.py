"""The Spark-layer suites again on a Spark Connect session (a local Connect server), in the
full tier: a fresh pytest with SPARKCEP_TEST_SESSION=connect (its ``spark`` fixture a
Connect session), each suite's fast tier — the classic session's full tier runs every
example. Not here: the suites that start sessions of their own (the command lines, the
worker check, a standalone cluster) and the Connect scripts themselves."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
OWN_SESSIONS = {"test_cli.py", "test_cluster.py", "test_workers.py", "test_connect.py", "test_connect_conformance.py",
                "test_connect_suites.py"}


@pytest.mark.slow
def test_the_spark_suites_pass_on_a_connect_session():
    suites = sorted(str(p) for p in HERE.glob("test_*.py") if p.name not in OWN_SESSIONS)
    env = {k: v for k, v in os.environ.items() if k != "SPARKCEP_TEST_TIER"}
    env["SPARKCEP_TEST_SESSION"] = "connect"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short",
                           "-m", "not slow and not cluster", "-k", "not command_line", *suites],
                          env=env, capture_output=True, text=True, timeout=2400, cwd=HERE.parent.parent)
    summary = [ln for ln in done.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    assert done.returncode == 0, "\n".join(summary) + "\n" + done.stdout[-6000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]
