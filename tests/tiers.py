"""The two test tiers. ``make test`` runs the fast tier (the default): every module's tests,
property tests with a tenth of their examples, a sample of the conformance corpus on Spark.
``make test-all`` (what CI runs) sets SPARKCEP_TEST_TIER=full: every example, every case,
and the tests marked ``slow`` or ``cluster`` — among them the Spark-layer suites once more on
a Spark Connect session (tests/spark/test_connect_suites.py). SPARKCEP_PROPERTY_EXAMPLES, when set, fixes the
count of the property tests that scale with it, in either tier."""

from __future__ import annotations

import os

FULL = os.environ.get("SPARKCEP_TEST_TIER", "fast") == "full"


def examples(full: int, scaled: bool = False) -> int:
    """Hypothesis examples for a property test that runs ``full`` in the full tier: a tenth
    (at least 10) in the fast tier. ``scaled``: the test's count follows
    SPARKCEP_PROPERTY_EXAMPLES (the count given for a count of 1500) when it is set."""
    override = os.environ.get("SPARKCEP_PROPERTY_EXAMPLES")
    if scaled and override:
        return max(1, full * int(override) // 1500)
    return full if FULL else max(10, full // 10)


def sample(cases: list, every: int = 8) -> list:
    """All ``cases`` in the full tier; every ``every``-th (a fixed spread over the list) in the fast one."""
    return list(cases) if FULL else list(cases)[::every]
