"""T-REX segment queries: segment variables, And (&), Not (~), window(), segment aggregates
with shared indexes, a tree executor over search spaces and its plans."""
