"""Every code example in the documentation (README.md, docs/) runs as a test (sybil): a
```python block runs; one with >>> prompts is a doctest whose printed output must match.
Each page runs top to bottom in one namespace, in a temporary working folder, with
``spark`` (local Spark) in it."""

from __future__ import annotations

import doctest
import os
import tempfile

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

# The tests compare every matcher on inputs of a few rows, where a user's first query would
# take the Python matchers (sparkcep.jit's tiers): here the kernels run wherever they apply,
# in Spark's workers and the subprocesses too, unless a test says otherwise.
os.environ.setdefault("SPARKCEP_KERNEL", "1")


@pytest.fixture(scope="session")
def spark():
    from sparkcep.spark.session import get_session

    session = get_session("local[2]", config={"spark.sql.shuffle.partitions": "4"})
    _SESSION.append(session)
    _work_in(os.getcwd())  # the page's folder (its setup ran first); the JVM may have started elsewhere
    yield session
    session.stop()


_SESSION: list = []


def _setup(namespace: dict) -> None:
    namespace["_docs_home"] = os.getcwd()
    _work_in(tempfile.mkdtemp(prefix="sparkcep-docs-"))


def _teardown(namespace: dict) -> None:
    _work_in(namespace["_docs_home"])


def _work_in(folder: str) -> None:
    """Python's working folder and Spark's (the JVM keeps the one it started in, and Hadoop
    resolves a relative path against its local file system's working directory)."""
    os.chdir(folder)
    for spark in _SESSION:
        jvm = spark._jvm
        local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
        local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path("file://" + os.path.abspath(folder)))


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)],
    patterns=["README.md", "docs/*.md", "docs/*/*.md"],
    fixtures=["spark"],
    setup=_setup,
    teardown=_teardown,
).pytest()
