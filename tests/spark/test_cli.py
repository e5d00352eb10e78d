"""The sparkcep command line, run as a user would (real files, real local Spark)."""

import json
import os
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

import sparkcep
from sparkcep.workloads import rip
from tests.spark.helpers import classic_env, rows

CLI = [sys.executable, "-m", "sparkcep.cli.main"]


def run_cli(*args, cwd):
    env = classic_env(SPARKCEP_MASTER="local[2]", COLUMNS="200")
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    r = run_cli("generate", "stock", "--rows", "3000", "--seed", "4", "--output", "stock.parquet", cwd=d)
    assert r.returncode == 0, r.stderr
    r = run_cli("generate", "stock", "--rows", "500", "--format", "csv", "--output", "stock.csv", cwd=d)
    assert r.returncode == 0, r.stderr
    (d / "q7.sql").write_text(rip.query("Q7"))
    return d


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_run_writes_parquet_and_prints_summary(workdir):
    r = run_cli("run", "-q", "q7.sql", "-i", "stock.parquet", "-o", "out_q7", "--strategy", "runs", "--batch", "700", cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sparkcep run" in r.stdout and "│ runs (requested" in r.stdout and "strategy: runs" not in r.stdout
    got = pq.read_table(workdir / "out_q7")
    expected = sparkcep.match_recognize(pq.read_table(workdir / "stock.parquet"), rip.query("Q7"))
    assert expected.num_rows > 0 and rows(got) == rows(expected)  # every row, every column


@pytest.mark.slow  # the fast tier keeps a Connect session in test_connect
def test_run_on_a_spark_connect_server(workdir):
    """--remote: the job on a Spark Connect session (a local server here), its progress from
    the server's, the summary naming it."""
    env = classic_env(COLUMNS="200", PYSPARK_PYTHON=sys.executable)
    env.pop("SPARKCEP_MASTER", None)
    r = subprocess.run([*CLI, "run", "-q", "q7.sql", "-i", "stock.parquet", "-o", "out_remote", "--strategy",
                        "partition", "--remote", "local[2]"], cwd=workdir, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(Spark Connect)" in r.stdout
    expected = sparkcep.match_recognize(pq.read_table(workdir / "stock.parquet"), rip.query("Q7"))
    assert expected.num_rows > 0 and rows(pq.read_table(workdir / "out_remote")) == rows(expected)
    both = run_cli("run", "-q", "q7.sql", "-i", "stock.parquet", "-o", "x", "--master", "local[1]", "--remote",
                   "local[2]", cwd=workdir)
    assert both.returncode != 0 and "not both" in both.stdout + both.stderr


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_run_csv_in_json_out(workdir):
    r = run_cli("run", "-q", "q7.sql", "-i", "stock.csv", "-o", "out_json", "--format", "json", cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    parts = list((workdir / "out_json").glob("*.json"))
    got = [json.loads(line) for p in parts for line in p.read_text().splitlines()]
    expected = sparkcep.match_recognize(pd.read_csv(workdir / "stock.csv"), rip.query("Q7")).to_dict("records")
    assert len(expected) > 0 and rows(got) == rows(expected)


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_a_csv_holding_only_its_header_writes_no_rows(workdir):
    """Spark infers every column of a header-only CSV as a string; the query compares them
    with numbers all the same, and no rows are written (it was a TYPE_MISMATCH)."""
    (workdir / "header.csv").write_text("symbol,timestamp,price\n")
    (workdir / "typed_q.sql").write_text("ORDER BY timestamp MEASURES A.price AS p, SUM(B.price) AS s "
                                         "PATTERN (A B) DEFINE B AS price > 70")
    r = run_cli("run", "-q", "typed_q.sql", "-i", "header.csv", "-o", "out_header", cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 rows" in r.stdout and pq.read_table(workdir / "out_header").num_rows == 0


def test_a_small_parquet_input_runs_without_spark(workdir):
    """No master named: a small Parquet input is read, matched and written in this process
    (the summary says so), with Spark's answer; --master starts Spark."""
    env = {k: v for k, v in classic_env().items() if k != "SPARKCEP_MASTER"}
    env["COLUMNS"] = "200"
    r = subprocess.run([*CLI, "run", "-q", "q7.sql", "-i", "stock.parquet", "-o", "out_local"], cwd=workdir, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "in this process (no Spark" in r.stdout and "│ master" not in r.stdout, r.stdout
    got = pq.read_table(workdir / "out_local")
    expected = sparkcep.match_recognize(pq.read_table(workdir / "stock.parquet"), rip.query("Q7"))
    assert expected.num_rows > 0 and rows(got) == rows(expected)
    assert [p.name for p in (workdir / "out_local").iterdir()] == ["part-00000.parquet"]
    # Run again over its own output folder: replaced, as Spark's overwrite does.
    r = subprocess.run([*CLI, "run", "-q", "q7.sql", "-i", "stock.parquet", "-o", "out_local", "--show", "0"],
                       cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and rows(pq.read_table(workdir / "out_local")) == rows(expected)


def test_which_runs_start_spark(workdir, monkeypatch):
    from sparkcep.cli import main

    monkeypatch.delenv("SPARKCEP_MASTER", raising=False)
    stock, clause = str(workdir / "stock.parquet"), rip.query("Q7")

    def local(**kw):
        args = dict(input=stock, in_format="parquet", out_format="parquet", master=None, strategy="auto",
                    batch=None, shared=None, text=clause) | kw
        return main._small_local_input(**args)

    assert local() == 3000 and local(strategy="sequential") == 3000
    for kw in ({"master": "local[1]"}, {"strategy": "runs"}, {"batch": 100}, {"shared": 5}, {"out_format": "csv"},
               {"input": str(workdir / "stock.csv"), "in_format": "csv"}, {"text": "SELECT * FROM input"},
               {"input": str(workdir / "missing.parquet")}):
        assert local(**kw) is None, kw
    monkeypatch.setattr(main, "LOCAL_ROWS", 2999)
    assert local() is None  # a large input
    monkeypatch.setenv("SPARKCEP_MASTER", "local[2]")
    monkeypatch.setattr(main, "LOCAL_ROWS", 10**9)
    assert local() is None


def test_a_mistake_in_the_query_text_is_told_before_spark_starts(tmp_path):
    """A syntax error, in a clause or a whole SELECT, is reported from the text alone: before
    the input is even looked for (Spark started and read the input first), at its place in
    the file."""
    (tmp_path / "bad.sql").write_text("ORDER BY ts\nMEASURES A.x AS v PATERN (A)")
    (tmp_path / "bad_select.sql").write_text("SELECT * FROM input MATCH_RECOGNIZE (\n  ORDER BY ts PATERN (A))")
    for name, line in (("bad.sql", 2), ("bad_select.sql", 2)):
        r = run_cli("run", "-q", name, "-i", "missing.parquet", "-o", "x", cwd=tmp_path)
        assert r.returncode == 2 and "[SYNTAX] unexpected 'PATERN'" in r.stderr, r.stderr
        assert f"at line {line}," in r.stderr and "does not exist" not in r.stderr


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_clear_errors(workdir):
    (workdir / "bad.sql").write_text("ORDER BY timestampp PATTERN (A)")
    r = run_cli("run", "-q", "bad.sql", "-i", "stock.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "no column 'timestampp'" in r.stderr and "Traceback" not in r.stderr
    (workdir / "typed.sql").write_text("ORDER BY timestamp PATTERN (A) DEFINE A AS symbol > 3")
    r = run_cli("run", "-q", "typed.sql", "-i", "stock.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "TYPE_MISMATCH" in r.stderr
    (workdir / "junk.parquet").write_text("not parquet")
    r = run_cli("run", "-q", "q7.sql", "-i", "junk.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    assert "CANNOT_READ_FILE_FOOTER" in r.stderr and "An error occurred while calling" not in r.stderr
    r = run_cli("run", "-q", "q7.sql", "-i", "missing.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run_cli("explain", "-q", "missing.sql", "-i", "stock.parquet", cwd=workdir)
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    (workdir / "select.sql").write_text("SELECT m.nosuch FROM input MATCH_RECOGNIZE (ORDER BY timestamp "
                                        "MEASURES A.price AS p PATTERN (A)) AS m")
    r = run_cli("run", "-q", "select.sql", "-i", "stock.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "SPARK_SQL" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_brackets_in_queries_and_values_print_as_text(workdir):
    """Query text and result values holding [x] or [/] are printed as they are (rich read
    them as markup: text vanished, or the command crashed after writing its output); a bad
    --symbols is a one-line error."""
    (workdir / "brackets.sql").write_text("ORDER BY ts PATTERN (A) DEFINE A AS symbol = '[/]' AND [x] > 1")
    r = run_cli("explain", "-q", "brackets.sql", "-i", "stock.parquet", cwd=workdir)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line, caret = r.stderr.splitlines()[-2:]
    assert line.strip() == "ORDER BY ts PATTERN (A) DEFINE A AS symbol = '[/]' AND [x] > 1"
    assert line[caret.index("^")] == "["
    pd.DataFrame({"symbol": ["[/]", "[b]x"], "ts": [1, 2]}).to_csv(workdir / "brackets.csv", index=False)
    (workdir / "all.sql").write_text("ORDER BY ts MEASURES A.symbol AS s PATTERN (A)")
    r = run_cli("run", "-q", "all.sql", "-i", "brackets.csv", "-o", "out_brackets", cwd=workdir)
    assert r.returncode == 0 and "[/]" in r.stdout and "[b]x" in r.stdout, r.stdout + r.stderr
    for bad in ("0", "-2"):
        r = run_cli("generate", "trades", "--rows", "10", "--symbols", bad, "--output", "t.parquet", cwd=workdir)
        assert r.returncode == 2 and "--symbols must be at least 1" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_a_folder_of_rules_runs_in_one_pass_here_and_on_spark(workdir):
    """--rules: every .sql file of the folder, one table with the rule column first, in this
    process for a small Parquet input and on Spark with --master; explain --rules shows what
    the rules share; a broken rule file is named before anything runs."""
    folder = workdir / "rules"
    folder.mkdir()
    for name in ("Q2", "Q7", "Q12"):
        (folder / f"{name.lower()}.sql").write_text(rip.query(name, partition_by="symbol"))
    expected = sparkcep.match_rules(pq.read_table(workdir / "stock.parquet"), folder)
    env = {k: v for k, v in classic_env().items() if k != "SPARKCEP_MASTER"}
    r = subprocess.run([*CLI, "run", "--rules", "rules", "-i", "stock.parquet", "-o", "out_rules"], cwd=workdir,
                       env=dict(env, COLUMNS="200"), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    got = pq.read_table(workdir / "out_rules")
    assert got.column_names[0] == "rule" and expected.num_rows > 0 and rows(got) == rows(expected)
    r = run_cli("run", "--rules", "rules", "-i", "stock.parquet", "-o", "out_rules_spark", "--show", "0",
                "--strategy", "partition", cwd=workdir)
    assert r.returncode == 0 and "│ master" in r.stdout, r.stdout + r.stderr
    assert rows(pq.read_table(workdir / "out_rules_spark")) == rows(expected)
    r = run_cli("explain", "--rules", "rules", "-i", "stock.parquet", cwd=workdir)
    assert r.returncode == 0 and "PARTITION BY symbol: 3 rule(s)" in r.stdout, r.stdout + r.stderr
    (folder / "zz_broken.sql").write_text("PATTERN (A")
    r = run_cli("run", "--rules", "rules", "-i", "stock.parquet", "-o", "out_broken", cwd=workdir)
    assert r.returncode == 2 and "rule 'zz_broken'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_cli("run", "--rules", "rules", "-q", "q7.sql", "-i", "stock.parquet", "-o", "out_both", cwd=workdir)
    assert r.returncode == 2 and "one of them" in r.stderr


def test_explain(workdir):
    r = run_cli("explain", "-q", "q7.sql", "-i", "stock.parquet", cwd=workdir)
    assert r.returncode == 0, r.stderr
    assert "program:" in r.stdout and "strategy:" in r.stdout


@pytest.mark.slow  # the fast tier keeps test_run_a_snoop_query
def test_run_a_sase_query(workdir):
    (workdir / "rise.sase").write_text(
        "-- a rising run of prices, then a drop\n"
        "PATTERN SEQ(Trade+ a[], Trade b)\n"
        "WHERE skip_till_next_match(a[], b) { a[i].price > a[i-1].price and b.price < 0.5 * a[a.len].price }\n"
        "WITHIN 20 EVENTS RETURN a[1].tradeId AS first_trade, count(a[]) AS rises, b.tradeId AS drop_trade\n")
    r = run_cli("run", "-q", "rise.sase", "-i", "stock.parquet", "-o", "out_sase", "--order-by", "tradeId",
                "--type-column", "", cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "│ sequential (" in r.stdout and "strategy: sequential" not in r.stdout
    got = pq.read_table(workdir / "out_sase")
    expected = sparkcep.sase(pq.read_table(workdir / "stock.parquet"), (workdir / "rise.sase").read_text(),
                             order_by="tradeId", type_column=None)
    assert expected.num_rows > 0 and rows(got) == rows(expected)
    r = run_cli("explain", "-q", "rise.sase", "-i", "stock.parquet", "--order-by", "tradeId", "--type-column", "",
                cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pattern: A_1 A_I* B" in r.stdout and "skip till next match" in r.stdout


def test_run_a_snoop_query(workdir):
    (workdir / "rise.snoop").write_text(
        "-- three trades, each dearer, the last one within 60 seconds of the first\n"
        "SELECT *\nFROM SEQ(A; B; C)\nWHERE FILTER\n  B.price > A.price\n  C.price > B.price\n"
        "WITHIN 60 seconds\nRETURN A.tradeId AS a, C.tradeId AS c\nCONSUMING A, B, C\n")
    r = run_cli("run", "-q", "rise.snoop", "-i", "stock.parquet", "-o", "out_snoop.parquet", "--order-by",
                "timestamp", "--window", "5", "--workers", "2", "--block", "64", cwd=workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Extended SNOOP" in r.stdout and "tasks" in r.stdout
    got = pq.read_table(workdir / "out_snoop.parquet")
    expected = sparkcep.snoop(pq.read_table(workdir / "stock.parquet"), (workdir / "rise.snoop").read_text(),
                              order_by="timestamp", window=5, strategy="sequential")
    assert expected.num_rows > 0 and got.to_pylist() == expected.to_pylist()
    (workdir / "bad.snoop").write_text("SELECT * FROM SEQ(A; B) WHERE A.pricee > 1")
    r = run_cli("run", "-q", "bad.snoop", "-i", "stock.parquet", "-o", "x", cwd=workdir)
    assert r.returncode == 2 and "no column 'pricee'" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("run", "-q", "rise.snoop", "-i", "stock.parquet", "-o", "x", "--strategy", "runs", cwd=workdir)
    assert r.returncode == 2 and "SNOOP query runs with" in r.stderr


def test_version_and_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "sparkcep", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"sparkcep {sparkcep.__version__}", r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "sparkcep", "--help"], capture_output=True, text=True, timeout=120,
                       env=classic_env(COLUMNS="200"))
    assert r.returncode == 0 and "Usage: sparkcep" in r.stdout and "stream" in r.stdout


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment_and_runs(workdir, tmp_path):
    """A wheel built from the checkout (pip's isolated build), installed into a new virtual
    environment: its files are complete (grammars, data) and `sparkcep run` works from it.
    The dependencies come from this environment through a path file, so no download."""
    import site
    import venv

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"), root],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp_path / "dist").glob("sparkcep-*.whl")
    assert wheel.name.startswith(f"sparkcep-{sparkcep.__version__}-py3-none-any")
    venv.create(tmp_path / "env", with_pip=True)
    python = str(tmp_path / "env" / "bin" / "python")
    r = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    fresh = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                           text=True).stdout.strip()
    with open(os.path.join(fresh, "dependencies.pth"), "w") as f:  # this environment's packages, after the wheel's
        f.write("\n".join(site.getsitepackages()) + "\n")
    (tmp_path / "work").mkdir()
    env = {k: v for k, v in classic_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SPARKCEP_MASTER="local[2]", COLUMNS="200")
    r = subprocess.run([python, "-c", "import sparkcep, sys; print(sparkcep.__file__)"], cwd=tmp_path / "work",
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.startswith(str(tmp_path / "env")), r.stdout + r.stderr  # the wheel's copy, not the checkout
    sparkcep_cli = str(tmp_path / "env" / "bin" / "sparkcep")
    r = subprocess.run([sparkcep_cli, "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == f"sparkcep {sparkcep.__version__}", r.stdout + r.stderr
    r = subprocess.run([sparkcep_cli, "run", "-q", str(workdir / "q7.sql"), "-i", str(workdir / "stock.parquet"),
                        "-o", "out"], cwd=tmp_path / "work", env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    got = pq.read_table(tmp_path / "work" / "out").to_pandas()
    want = sparkcep.match_recognize(pq.read_table(workdir / "stock.parquet"), rip.query("Q7")).to_pandas()
    assert len(want) > 0 and len(got) == len(want)
    assert sorted(got.itertuples(index=False)) == sorted(want.itertuples(index=False))
