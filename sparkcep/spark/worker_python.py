"""Whether Spark's Python workers can run sparkcep, asked once per session.

sparkcep matches inside Spark's Python workers, which import it when they unpickle a task.
Where their Python lacks it (a cluster set up without it, PYSPARK_PYTHON pointing elsewhere)
the job would fail at the user's first action with a worker traceback; a one-row job at the
first query of a session tells it at the call instead, as an ExecutionError saying what to
install where (errors.workers_missing)."""

from __future__ import annotations

import importlib.util
import threading
import weakref

import pyarrow as pa

from sparkcep.errors import workers_missing

_ready: weakref.WeakSet = weakref.WeakSet()  # the live sessions whose workers import sparkcep
_lock = threading.Lock()


def check_workers(spark) -> None:
    """Raise the ExecutionError of errors.workers_missing when this session's Python workers
    cannot import sparkcep or the libraries it runs on; other failures are left to the
    query's own job (and the probe, having told what it can, is not run again)."""
    if spark in _ready:
        return
    try:
        spark.range(1, numPartitions=1).mapInArrow(_probe, "ok int").collect()
    except Exception as exc:  # noqa: BLE001 - Spark wraps the worker's ImportError in its own types
        missing = workers_missing(exc)
        if missing is not None:
            raise missing from None
    with _lock:
        _ready.add(spark)


def _probe(batches):
    # Pickled by reference: a worker unpickling it imports sparkcep first.
    for name in ("numpy", "pandas", "numba", "lark"):
        if importlib.util.find_spec(name) is None:  # (found, not imported: numba loads slowly)
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"ok": pa.array([1], pa.int32())})
