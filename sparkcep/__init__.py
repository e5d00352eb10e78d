"""sparkcep: complex event processing for Python — SQL:2016 MATCH_RECOGNIZE over pandas,
Arrow and Spark tables."""

from sparkcep.api import explain, match_recognize, sase
from sparkcep.errors import (
    DataError,
    ExecutionError,
    InternalError,
    QueryError,
    SparkCepError,
    guarded,
)
from sparkcep.functions import register_aggregate, register_function, unregister_function


@guarded
def sql(spark, statement: str, **options):
    """Run ``SELECT ... FROM t MATCH_RECOGNIZE (...) [AS m] [WHERE ...]`` on Spark."""
    from sparkcep.spark.sql import sql as _sql

    return _sql(spark, statement, **options)

__all__ = [
    "DataError",
    "ExecutionError",
    "InternalError",
    "QueryError",
    "SparkCepError",
    "explain",
    "match_recognize",
    "register_aggregate",
    "register_function",
    "sase",
    "sql",
    "unregister_function",
]
__version__ = "0.1.0"
