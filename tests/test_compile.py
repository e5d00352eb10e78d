"""The compiler: golden program listings, IR passes, and the layering rules."""

import ast as pyast
import pathlib
import re

import pytest

from sparkcep.analysis.analyzer import analyze
from sparkcep.compile import pattern as ir
from sparkcep.compile.plan import build_plan
from sparkcep.language.parser import parse

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
PACKAGE = pathlib.Path(__file__).parent.parent / "sparkcep"


def _golden_programs():
    blocks = (FIXTURES / "programs.txt").read_text().strip().split("\n\n")
    for block in blocks:
        head, _, listing = block.partition("\n")
        yield head.removeprefix("pattern: "), listing.strip()


@pytest.mark.parametrize("pattern, listing", list(_golden_programs()))
def test_program_listing(pattern, listing):
    plan = build_plan(analyze(parse(f"MEASURES MATCH_NUMBER() AS m PATTERN ({pattern})"), []))
    assert plan.program.listing() == listing


@pytest.mark.parametrize("text, expected", [
    ("A (B C) D", "A B C D"),
    ("A | (B | C)", "A | B | C"),
    ("A () B", "A B"),
    ("(A B)+?", "(A B)+?"),
    ("PERMUTE(A, B)", "A B | B A"),
    ("{- A B -}{2,}", "({- A B -}){2,}"),
])
def test_pattern_ir_passes(text, expected):
    q = analyze(parse(f"MEASURES MATCH_NUMBER() AS m PATTERN ({text})"), [])
    assert ir.to_text(ir.from_ast(q.pattern, q.variables), q.variables) == expected


def _imports(path: pathlib.Path) -> set[str]:
    tree = pyast.parse(path.read_text())
    found = set()
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, pyast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "sparkcep":  # from sparkcep import functions
                found |= {f"sparkcep.{a.name}" for a in node.names}
    return found


def _modules(folder: str):
    return sorted((PACKAGE / folder).rglob("*.py")) if (PACKAGE / folder).is_dir() else []


def test_runtime_depends_only_on_compile_types():
    for path in _modules("runtime"):
        for mod in _imports(path):
            assert not mod.startswith(("sparkcep.language", "sparkcep.analysis.analyzer")), f"{path.name} imports {mod}"


def test_compile_does_not_use_the_analyzer():
    for path in _modules("compile"):
        for mod in _imports(path):
            assert not mod.startswith("sparkcep.analysis.analyzer"), f"{path.name} imports {mod}"


def test_only_spark_imports_pyspark_and_only_cli_imports_terminal_libraries():
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).parts
        for mod in _imports(path):
            if mod.split(".")[0] == "pyspark":
                assert rel[0] == "spark", f"{path} imports pyspark"
            if mod.split(".")[0] in ("typer", "click", "rich"):
                assert rel[0] == "cli", f"{path} imports {mod}"


@pytest.mark.parametrize("pattern, expected", [
    ("A B* C", {"A": ({"B", "C"}, False)}),
    ("A B?", {"A": ({"B"}, True)}),
    ("(A | B C) D", {"A": ({"D"}, False), "B": ({"C"}, False)}),
    ("A+ B", {"A": ({"A", "B"}, False)}),
    ("A* B", {"A": ({"A", "B"}, False), "B": (set(), True)}),
])
def test_next_labels_prune_start_rows(pattern, expected):
    from sparkcep.compile.program import next_labels

    plan = build_plan(analyze(parse(f"MEASURES MATCH_NUMBER() AS m PATTERN ({pattern})"), []))
    got = {plan.labels[f]: ({plan.labels[g] for g in seconds}, end)
           for f, (seconds, end) in next_labels(plan.program).items()}
    assert got == expected


# The real order of the rooms, from the ground floor up: a room imports only rooms on lower
# floors (even lazily), never one on its own floor or above. The data's path is language →
# analysis → compile → the dispatcher (query) → executors (runtime: automata; segments: T-REX;
# tasks) → parallel → spark → cli; in imports the dispatcher stands above the executors it
# calls, and the facade (api, __init__) and the command line on top.
FLOORS: list[set[str]] = [
    {"errors", "types", "jit"},
    {"values", "options"},
    {"language", "workloads"},
    {"aggregates"},
    {"functions"},
    {"analysis"},
    {"compile"},
    {"data"},
    {"runtime", "segments"},
    {"tasks"},
    {"parallel"},
    {"query"},
    {"rules"},
    {"spark"},
    {"api", "charts"},
    {"cli", "__init__"},
    {"__main__"},
]
_FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def _room(path: pathlib.Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _upward(path: pathlib.Path) -> list[str]:
    room = _room(path)
    return sorted(m for m in _imports(path)
                  if m.startswith("sparkcep.") and m.split(".")[1] != room
                  and _FLOOR[m.split(".")[1]] >= _FLOOR[room])


def test_every_room_has_a_floor():
    rooms = {_room(p) for p in PACKAGE.rglob("*.py")}
    assert rooms <= set(_FLOOR), sorted(rooms - set(_FLOOR))


def test_no_module_imports_upward():
    wrong = {str(p.relative_to(PACKAGE)): _upward(p) for p in PACKAGE.rglob("*.py") if _upward(p)}
    assert not wrong


def test_runtime_never_imports_segments_nor_segments_runtime():
    for a, b in (("runtime", "segments"), ("segments", "runtime")):
        for path in _modules(a):
            assert not any(m.startswith(f"sparkcep.{b}") for m in _imports(path)), path


def test_the_layering_rule_sees_lazy_imports(tmp_path):
    fake = tmp_path / "sparkcep" / "parallel"
    fake.mkdir(parents=True)
    (fake / "m.py").write_text("def f():\n    from sparkcep.spark.batch import SparkRun\n    from sparkcep import api\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "sparkcep"
    try:
        assert _upward(fake / "m.py") == ["sparkcep.api", "sparkcep.spark.batch"]
    finally:
        PACKAGE = saved


@pytest.mark.parametrize("pattern, rows, expected", [
    ("((A)*)*", "a", [(0, "A")]),  # a loop entered at one place, checked at the next, on one thread
    ("((A)*)*", "aa", [(0, "AA")]),
    ("(A* B*)*", "ab", [(0, "AB")]),
    ("((A?)*)*", "a", [(0, "A")]),
])
def test_nested_nullable_loops_on_every_matcher(pattern, rows, expected):
    import pyarrow as pa

    from sparkcep.api import compile_query, run_plan
    from sparkcep.runtime.nfab import NFAbMatcher
    from sparkcep.runtime.vm import Matcher

    table = pa.table({"i": list(range(len(rows))), "c": list(rows)})
    defines = ", ".join(f"{v} AS c = '{v.lower()}'" for v in "AB" if v in pattern)
    text = f"ORDER BY i MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH PATTERN ({pattern}) DEFINE {defines}"
    plan = compile_query(text, table)
    for factory, kernel in ((Matcher, False), (Matcher, True), (NFAbMatcher, False)):
        got = run_plan(plan, table, factory, use_kernel=kernel).to_pylist()
        assert [(got[0]["i"], "".join(r["cls"] for r in got))] == expected, (factory, kernel)


@pytest.mark.parametrize("pattern, expected", [
    ("A B+ C", (("A", "B"), "B", ("C",))),  # B's one mandatory row is always the second
    ("A B* C", (("A",), "B", ("C",))),
    ("A{2} B? C D", (("A", "A"), "B", ("C", "D"))),
    ("A B{2,} C", (("A", "B", "B"), "B", ("C",))),
    ("A+", (("A",), "A", ())),
    ("A {- B -} C", (("A", "B", "C"), None, ())),
    ("A{3}", (("A", "A", "A"), None, ())),
    ("A B+ C+", None),
    ("A (B C)+", None),
    ("A | B", None),
    ("^ A B+", None),
])
def test_label_layout(pattern, expected):
    """Where each matched row's label follows from the match's length alone."""
    from sparkcep.compile.pattern import label_layout

    plan = build_plan(analyze(parse(f"MEASURES MATCH_NUMBER() AS m PATTERN ({pattern})"), []))
    got = label_layout(plan.pattern)
    name = lambda ids: tuple(plan.labels[i] for i in ids)  # noqa: E731
    assert (got if got is None else (name(got.head), None if got.middle is None else plan.labels[got.middle],
                                     name(got.tail))) == expected


def test_the_numeric_limits_live_in_the_value_boundary_only():
    """BIGINT's range, 64-bit unsigned integers and 2^53 (the integers a double holds
    exactly) are named in values.py; every other module imports them, so one rule holds."""
    literal = re.compile(r"(?<![\w.])(?:2(?:\.0)?\s*\*\*\s*(?:53|63|64)|1\s*<<\s*(?:53|63)|9007199254740992|"
                         r"9223372036854775807|18446744073709551615)(?![\w.])")
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.name != "values.py" or path.parent != PACKAGE
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if literal.search(line.split("#")[0])]
    assert not found, "\n".join(found)
