"""Many rules at once: a set of MATCH_RECOGNIZE clauses over one table, sharing its read,
its sort per PARTITION BY and ORDER BY, and the conditions they define alike."""
