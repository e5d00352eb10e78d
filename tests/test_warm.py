"""Compiling ahead: the first compile in a process says so, and ``sparkcep warm`` reaches
every engine it names."""

from __future__ import annotations

import subprocess
import sys

import numba
import pytest
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
            "automaton._row_codes(np.zeros((1, 3), dtype=bool), 3)")

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
