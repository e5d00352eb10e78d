"""The first answer: kernels built on first call, the tiers that pick the Python matchers
before the kernels are loaded or compiled, the background compile and its stamp; the first
compile in a process says so, and ``sparkcep warm`` reaches every engine it names."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sparkcep import jit
from sparkcep.cli import warm as kernels
from sparkcep.cli.main import app


def _function(module: str):
    def add(x):
        return x + 1
    add.__module__ = module
    return numba.njit(add)  # no cache: every type compiles


def test_the_first_compile_of_a_sparkcep_kernel_says_so_once(monkeypatch, capsys):
    jit.load_numba()  # (registers the notice; a sparkcep kernel's first call does it)
    monkeypatch.setattr(jit, "_noticed", False)
    _function("users.own")(1)  # the user's numba code: not ours to announce
    assert jit.NOTICE not in capsys.readouterr().err
    ours = _function("sparkcep.runtime.example")
    ours(1)
    ours(2.5)  # a second compile, same process
    _function("sparkcep.runtime.other")(3)
    assert capsys.readouterr().err.count(jit.NOTICE) == 1


def test_a_kernel_read_from_the_cache_raises_no_notice():
    code = ("import numpy as np; from sparkcep.runtime import automaton; "
            "automaton._row_codes(np.zeros((1, 3), dtype=bool), 3, 2)")

    def run():
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)

    first = run()  # compiles if numba's cache lacks it
    assert first.returncode == 0, first.stderr
    second = run()  # a new process: read from the cache
    assert second.returncode == 0 and jit.NOTICE not in second.stderr, second.stderr


def test_warm_runs_every_kind_on_the_engine_it_names():
    got = list(kernels.warm())
    assert [k.name for k, _, _ in got] == [k.name for k in kernels.kinds()]
    assert len({k.name for k, _, _ in got}) == len(got)
    wrong = {k.name: matcher for k, _, matcher in got if matcher != k.matcher}
    assert not wrong
    assert {k.matcher for k in kernels.kinds()} == {"kernel", "automaton", "column scan", "NFAb kernel", "segments"}


@pytest.mark.parametrize("args", [["warm"], ["warm", "--help"]])
def test_the_warm_command(args):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    if args == ["warm"]:
        for kind in kernels.kinds():
            assert kind.name in r.output
        assert f"{len(kernels.kinds())} kinds are in numba's cache" in r.output
    else:
        assert "Compile the common kinds" in r.output


def test_a_failing_warm_is_one_clear_line(monkeypatch):
    def broken():
        raise RuntimeError("numba could not write its cache")
        yield  # pragma: no cover

    monkeypatch.setattr(kernels, "warm", broken)
    r = CliRunner().invoke(app, ["warm"])
    assert r.exit_code == 2
    said = " ".join(r.output.split())  # rich wraps lines at the terminal's width
    assert said.startswith("error:") and "numba could not write its cache" in said and "sparkcep warm" in said
    assert "Traceback" not in r.output


_README = r"""
import json, sys
import pandas as pd
from sparkcep.api import run_local
trades = pd.DataFrame({"symbol": ["X"] * 7, "ts": range(7), "price": [10, 8, 6, 7, 9, 5, 6]})
stats = {}
out = run_local(trades, '''PARTITION BY symbol ORDER BY ts
    MEASURES A.price AS top, MIN(B.price) AS bottom, LAST(C.price) AS recovered, COUNT(*) AS length
    ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C+)
    DEFINE B AS price < PREV(price), C AS price > PREV(price)''', stats=stats)
print(json.dumps({"rows": out.to_dict("records"), "matcher": stats["matcher"], "numba": "numba" in sys.modules}))
"""


def _auto_env(tmp_path, **extra):
    """A user's environment: the tiers on (the tests force the kernels), a cache of its own."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKCEP_KERNEL"}
    env.update(SPARKCEP_CACHE_DIR=str(tmp_path / "cache"), **extra)
    return env


def test_a_first_small_query_runs_in_python_without_loading_numba(tmp_path):
    """The README's query in a new process: answered by the Python matcher, numba never
    imported (its start alone costs half a second), the same rows as the kernel gives."""
    env = _auto_env(tmp_path, SPARKCEP_BACKGROUND_COMPILE="0")
    r = subprocess.run([sys.executable, "-c", _README], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["matcher"] == "python" and got["numba"] is False
    assert got["rows"] == [{"symbol": "X", "top": 10, "bottom": 6, "recovered": 9, "length": 5}]
    assert jit.NOTICE not in r.stderr
    assert not (tmp_path / "cache").exists()  # no background compile was started


def test_the_tiers(monkeypatch):
    monkeypatch.delenv("SPARKCEP_KERNEL", raising=False)
    monkeypatch.setattr(jit, "_active", False)
    started = []
    monkeypatch.setattr(jit, "warm_in_background", lambda: started.append(1) or True)
    monkeypatch.setattr(jit, "compiled", lambda: False)
    # Nothing compiled: Python up to COLD_ROWS while the background compile runs.
    assert [jit.use_compiled(n) for n in (0, jit.SMALL_ROWS + 1, jit.COLD_ROWS)] == [False] * 3
    assert jit.use_compiled(jit.COLD_ROWS + 1) and started
    # Compiled (the stamp): kernels past SMALL_ROWS, no background compile.
    monkeypatch.setattr(jit, "compiled", lambda: True)
    started.clear()
    assert [jit.use_compiled(n) for n in (jit.SMALL_ROWS, jit.SMALL_ROWS + 1)] == [False, True] and not started
    # Loaded in this process: kernels for every size.
    monkeypatch.setattr(jit, "_active", True)
    assert jit.use_compiled(1)
    for value, want in (("1", True), ("0", False)):
        monkeypatch.setenv("SPARKCEP_KERNEL", value)
        assert jit.use_compiled(1) is want and jit.use_compiled(10**9) is want
    monkeypatch.setenv("SPARKCEP_KERNEL", "0")
    with jit.forcing("on"):
        assert jit.use_compiled(1)
    assert not jit.use_compiled(10**9)


def test_a_default_query_takes_the_tier(monkeypatch):
    """run_local without a choice follows use_compiled: the matcher it names ran."""
    from sparkcep.api import run_local

    df = __import__("pandas").DataFrame({"ts": range(50), "p": [i % 7 for i in range(50)]})
    clause = "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS p > PREV(p)"
    seen = {}
    for tier in (False, True):
        monkeypatch.setattr(jit, "use_compiled", lambda rows, tier=tier: tier)
        stats: dict = {}
        seen[tier] = (run_local(df, clause, stats=stats).to_dict("records"), stats["matcher"])
    assert seen[False][1] == "python" and seen[True][1] != "python"
    assert seen[False][0] == seen[True][0] and seen[True][0]


def test_kernels_are_built_on_first_call_and_pickled_by_name():
    from sparkcep.runtime import automaton

    code = ("import sys; from sparkcep.runtime import kernel, automaton; from sparkcep import jit; "
            "assert 'numba' not in sys.modules and isinstance(automaton._row_codes, jit.Kernel); print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    f = automaton._row_codes
    assert pickle.loads(pickle.dumps(f)) is automaton._row_codes
    f(np.zeros((1, 3), dtype=bool), 3, 2)  # through the wrapper: the module now holds dispatchers
    assert not isinstance(automaton._row_codes, jit.Kernel) and jit.active()
    assert f.py_func is automaton._row_codes.py_func and f.signatures


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 3), st.just(float("nan"))), min_size=2, max_size=12),
       st.booleans(), st.booleans())
def test_the_ordered_check_in_numpy_is_the_compiled_one(values, floats, descending):
    from sparkcep.data.partitions import _ordered_numpy, _ordered_pass

    if floats:
        a = np.array(values, dtype=np.float64)
    else:
        a = np.array([0 if v != v else v for v in values], dtype=np.int64)
    assert _ordered_numpy(a, descending) == _ordered_pass(a, descending)


def test_the_stamp_lists_numba_index_files_and_a_cleared_cache_unstamps(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKCEP_CACHE_DIR", str(tmp_path))
    from sparkcep.runtime import automaton

    automaton._row_codes(np.zeros((1, 3), dtype=bool), 3, 2)
    assert not jit.compiled()
    path = jit.write_stamp()
    indexes = json.loads(open(path).read())["indexes"]
    assert any("_row_codes" in p for p in indexes) and jit.compiled()
    with open(path, "w") as f:
        json.dump({"indexes": indexes + [str(tmp_path / "gone.nbi")]}, f)
    assert not jit.compiled()


def test_the_background_compile_starts_once(tmp_path, monkeypatch):
    """One background process per source and machine: a second process finds the lock."""
    monkeypatch.setenv("SPARKCEP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARKCEP_BACKGROUND_COMPILE", raising=False)
    monkeypatch.setattr(jit, "_warming", None)
    assert jit.warm_in_background()
    child = jit._warming
    try:
        lock = jit.stamp_path() + ".lock"
        assert open(lock).read() == str(child.pid)
        assert not jit.warm_in_background()  # this process started one already
        monkeypatch.setattr(jit, "_warming", None)
        assert not jit.warm_in_background()  # another process: the lock is held
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    monkeypatch.setenv("SPARKCEP_BACKGROUND_COMPILE", "0")
    monkeypatch.setattr(jit, "_warming", None)
    os.unlink(lock)
    assert not jit.warm_in_background()


@pytest.mark.slow
def test_the_background_compile_writes_the_stamp(tmp_path):
    """The background compile runs every kind, writes the stamp and releases the lock; a
    query past SMALL_ROWS then takes the kernels at once."""
    env = _auto_env(tmp_path)
    lock = str(tmp_path / "warm.lock")
    open(lock, "w").write("")
    r = subprocess.run([sys.executable, "-m", "sparkcep.cli.warm", "--background", lock], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(lock)
    code = ("import pandas as pd; from sparkcep import jit; from sparkcep.api import run_local; "
            "from sparkcep.workloads import rip; from sparkcep.workloads.stock import stock_trades; "
            "s = {}; run_local(stock_trades(5000, seed=1), rip.query('Q4'), stats=s); "
            "print(jit.compiled(), s['matcher'])")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["True", "kernel"], r.stdout + r.stderr
    assert jit.NOTICE not in r.stderr and time.perf_counter() - t0 < 300
