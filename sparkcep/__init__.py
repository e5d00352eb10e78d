"""sparkcep: complex event processing for Python — SQL:2016 MATCH_RECOGNIZE over pandas,
Arrow (and, with the Spark runner, Spark) tables."""

from sparkcep.api import explain, match_recognize
from sparkcep.errors import DataError, QueryError, SparkCepError
from sparkcep.functions import register_function, unregister_function

__all__ = [
    "DataError",
    "QueryError",
    "SparkCepError",
    "explain",
    "match_recognize",
    "register_function",
    "unregister_function",
]
__version__ = "0.1.0"
