"""Hash buckets of PARTITION BY keys: the state keys of a stream.

A stream's stateful operator keeps one state entry per bucket, and each call hands it every
row of a bucket's keys at once: no per-key state round trip, and one Arrow hand-off per
bucket. The bucket of a key is fixed for the life of a checkpoint, so its number is a
constant of the stream (``buckets``), never derived from the session's configuration.

Spark sends grouping value v to shuffle partition pmod(murmur3(v, 42), P). Bucket b's
grouping value is the smallest integer whose murmur3 hash has b in its low bits, so for any P
that divides the bucket count (1, 2, 4, ... 32 for 32 buckets) the buckets spread exactly
evenly over the partitions; the keys spread over buckets by xxhash64.

A bucket is one Python call per micro-batch, and a shuffle partition runs its buckets one
after another, so buckets beyond one per partition add PySpark's per-group cost (a few ms
each) and no parallelism: the default is one bucket per shuffle partition when that count is
a power of two (the spread is then exact), else 32. Spark keeps a checkpoint's shuffle
partitions for the life of the query, and the count is read back from the checkpoint
(``checkpoint_buckets``) wherever sparkcep is given the checkpoint.
"""

from __future__ import annotations

import functools
import glob
import os
import re

DEFAULT_BUCKETS = 32
MAX_BUCKETS = 38  # the count is stored as a decimal's precision in the state's type (see spark.stream)
_MASK = 0xFFFFFFFF


def default_buckets(shuffle_partitions: int) -> int:
    """One bucket per shuffle partition when their count is a power of two up to 32, else 32."""
    p = shuffle_partitions
    return p if 1 <= p <= DEFAULT_BUCKETS and p & (p - 1) == 0 else DEFAULT_BUCKETS


def session_buckets(spark) -> int:
    """The default bucket count for a stream built in ``spark``'s session."""
    return default_buckets(int(spark.conf.get("spark.sql.shuffle.partitions") or DEFAULT_BUCKETS))


def checkpoint_buckets(checkpoint: str) -> int | None:
    """The bucket count of the stream whose checkpoint is at ``checkpoint`` (held in its state's
    Spark type, ``buckets decimal(n, 0)``), or None when it has no state yet."""
    # The schema file holds the state's type as Spark's JSON, between binary length prefixes.
    field = re.compile(r'"name"\s*:\s*"buckets"\s*,\s*"type"\s*:\s*"decimal\((\d+)\s*,\s*0\)"')
    for path in sorted(glob.glob(os.path.join(checkpoint, "state", "*", "*", "_metadata", "schema"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                m = field.search(f.read())
        except OSError:
            continue
        if m:
            return int(m.group(1))
    return None


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's Murmur3Hash of an INT (Murmur3_x86_32.hashInt), as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@functools.cache
def bucket_values(buckets: int) -> tuple[int, ...]:
    """The grouping value of each bucket (see the module's docstring)."""
    bits = max(buckets - 1, 1).bit_length()
    low = (1 << bits) - 1
    found: dict[int, int] = {}
    v = 0
    while len(found) < min(buckets, 1 << bits):
        b = murmur3_int(v) & low
        if b < buckets and b not in found:
            found[b] = v
        v += 1
    return tuple(found[b] for b in range(buckets))


def bucket_column(keys: list[str], buckets: int):
    """The Spark column holding each row's bucket value."""
    from pyspark.sql import functions as F

    values = bucket_values(buckets)
    if not keys or buckets == 1:
        return F.lit(values[0]).cast("int")
    index = F.pmod(F.xxhash64(*[F.col(k) for k in keys]), F.lit(buckets)).cast("int")
    return F.element_at(F.array(*[F.lit(v).cast("int") for v in values]), index + 1)
