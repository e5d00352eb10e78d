"""The conformance corpus: every case on every matcher path that accepts it.

Paths: the engine as users call it (Arrow and pandas input; the compiled kernel or the column
scan where they apply), the Python matcher (Pike VM) forced, NFA^b forced, the brute-force
reference matcher and the independent oracle. A case either expects rows (compared with a
float tolerance) or a QueryError code.
"""

from __future__ import annotations

import datetime as dt
import importlib
import math
import pkgutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sparkcep
from sparkcep.analysis.analyzer import analyze
from sparkcep.api import compile_query, run_plan
from sparkcep.data.ingest import schema_of
from sparkcep.errors import DataError, InternalError, QueryError
from sparkcep.language.parser import parse
from sparkcep.runtime.nfab import CompiledNFAb, NFAbMatcher
from sparkcep.runtime.vm import Matcher
from tests.conformance.case import Case
from tests.oracle import oracle
from tests.reference_matchers import ReferenceMatcher

TOPICS = sorted(m.name for m in pkgutil.iter_modules([__file__.rsplit("/", 1)[0]]) if m.name.startswith("cases_"))


def oracle_rows(text: str, table: pa.Table) -> list[dict]:
    return oracle(analyze(parse(text), schema_of(table)), table)


def all_cases() -> list[Case]:
    out = []
    for topic in TOPICS:
        out += importlib.import_module(f"tests.conformance.{topic}").CASES
    return out


CASES = all_cases()


def table_of(case: Case) -> pa.Table:
    arrays = {}
    for name, values in case.data.items():
        t = case.types.get(name)
        arrays[name] = pa.array(values, type=pa.type_for_alias(t) if t and "[" not in t and "(" not in t else _typed(t))
    return pa.table(arrays)


def _typed(t: str | None):
    if t is None:
        return None
    if t.startswith("decimal128("):
        precision, scale = (int(v) for v in t[len("decimal128("):-1].split(","))
        return pa.decimal128(precision, scale)
    if t.startswith("timestamp["):
        unit, _, tz = t[len("timestamp["):-1].partition(",")
        tz = tz.strip().removeprefix("tz=") or None
        return pa.timestamp(unit.strip(), tz)
    return pa.type_for_alias(t)


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and (a.tzinfo is None) != (b.tzinfo is None):
        a, b = (x if x.tzinfo is None else x.astimezone(dt.UTC).replace(tzinfo=None) for x in (a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def same_rows(got: list[dict], want: list[dict]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if set(g) != set(w) or not all(same(g[k], w[k]) for k in w):
            return False
    return True


def _outcome(run):
    try:
        return run()
    except InternalError:
        raise
    except QueryError as e:
        return ("query error", e.code)
    except DataError:
        return ("data error",)


def paths(case: Case, table: pa.Table):
    """(name, thunk) for every matcher path that accepts the case's plan."""
    yield "arrow", lambda: sparkcep.match_recognize(table, case.query).to_pylist()
    plan = compile_query(case.query, table)
    q = plan.query
    yield "python", lambda: run_plan(plan, table, Matcher, use_kernel=False).to_pylist()
    yield "nfab", lambda: run_plan(plan, table, NFAbMatcher).to_pylist()
    yield "nfab compiled", lambda: run_plan(plan, table, CompiledNFAb).to_pylist()
    if q.event_selection == "PARTITION" and not q.negated:
        yield "reference", lambda: run_plan(plan, table, ReferenceMatcher).to_pylist()
        yield "oracle", lambda: oracle_rows(case.query, table)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case):
    table = table_of(case)
    if case.error is not None:
        with pytest.raises(QueryError) as e:
            sparkcep.match_recognize(table, case.query)
        assert e.value.code == case.error, str(e.value)
        assert e.value.line is not None and e.value.excerpt, "errors point into the query"
        return
    for name, run in paths(case, table):
        got = _outcome(run)
        assert not isinstance(got, tuple), f"{name}: {got}\n{case.query}"
        assert same_rows(got, case.expected), f"{name} path\n{case.query}\ngot:  {got}\nwant: {case.expected}"
    # pandas in, pandas out: the same rows as Arrow's. Nullable pandas dtypes in give nullable
    # dtypes out: integer and boolean columns with NULLs stay what they are.
    expected = sparkcep.match_recognize(table, case.query).to_pandas()
    nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype()}
    got = sparkcep.match_recognize(table.to_pandas(types_mapper=nullable.get), case.query)
    assert list(got.columns) == list(expected.columns)
    assert _records(got) == _records(expected)
    for name in got.columns:
        if pd.api.types.is_integer_dtype(got[name].dtype) or pd.api.types.is_bool_dtype(got[name].dtype):
            assert not isinstance(got[name].dtype, np.dtype) or not got[name].isna().any(), name


def _records(frame: pd.DataFrame) -> list:
    """Rows as Python values, every missing value (None, NaN, NA, NaT) as None, numbers as floats."""
    def norm(v):
        if isinstance(v, (list, np.ndarray)):
            return [norm(x) for x in v]
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
            return None
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, float, np.integer, np.floating)):
            return float(v)
        return v
    return [[norm(v) for v in row] for row in frame.astype(object).itertuples(index=False)]


def test_corpus_size():
    assert len(CASES) >= 200
    assert len({c.name for c in CASES}) == len(CASES), "case names are unique"
