"""The documentation itself: every error code documented, the README a front page, the site
builds without warnings (the examples in it run as tests of their own, see conftest.py)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _codes_in_source() -> set[str]:
    # A QueryError's code is its first argument: QueryError("CODE", ...), self.error("CODE", ...),
    # also written over several lines.
    call = re.compile(r'(?:QueryError|\berror|_err|_error|query_error|__init__)\(\s*(?:self,\s*)?"([A-Z][A-Z_]+)"')
    codes: set[str] = set()
    for path in (ROOT / "sparkcep").rglob("*.py"):
        codes |= set(call.findall(path.read_text()))
    return codes


def test_every_error_code_has_its_section_on_the_errors_page():
    page = (ROOT / "docs" / "errors.md").read_text()
    documented = set(re.findall(r"^### ([A-Z][A-Z_]+)\s*$", page, flags=re.M))
    codes = _codes_in_source()
    assert len(codes) >= 30
    assert codes - documented == set(), "codes raised but not documented on docs/errors.md"
    assert documented - codes == set(), "codes documented but never raised"


def test_the_readme_is_a_front_page_that_opens_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert lines[2:5] == ["```", "make demo    # set everything up and run the demo job on Spark local",
                          "make test    # set everything up and run the tests (the fast tier, a few minutes)"]
    for link in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (ROOT / link).exists(), link


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING" not in run.stderr, run.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "run_to_end" in api and "match_recognize" in api
