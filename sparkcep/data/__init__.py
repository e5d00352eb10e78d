"""Tables in and out: ingest (pandas/Arrow to one Arrow table), partitions (sorting and
partition bounds, one partition's columns) and output (the result table)."""
