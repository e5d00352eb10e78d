"""Aggregate kernels shared by the executors: the vectorized segment aggregates (prefix sums,
sparse tables, regression, Mann-Kendall, zscore) and registered user aggregates. ``compile``
builds incremental per-row aggregates on the same definitions; ``segments`` evaluates them
over candidate segments at once."""
