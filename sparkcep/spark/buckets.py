"""Hash buckets of PARTITION BY keys: the state keys of a stream.

A stream's stateful operator keeps one state entry per bucket, and each call hands it every
row of a bucket's keys at once: no per-key state round trip, and one Arrow hand-off per
bucket. The bucket of a key is fixed for the life of a checkpoint, so its number is a
constant of the stream (``buckets``), never derived from the session's configuration.

Spark sends grouping value v to shuffle partition pmod(murmur3(v, 42), P). Bucket b's
grouping value is the smallest integer whose murmur3 hash has b in its low bits, so for any P
that divides the bucket count (1, 2, 4, ... 32 for 32 buckets) the buckets spread exactly
evenly over the partitions; the keys spread over buckets by xxhash64.
"""

from __future__ import annotations

import functools

DEFAULT_BUCKETS = 32
MAX_BUCKETS = 38  # the count is stored as a decimal's precision in the state's type (see spark.stream)
_MASK = 0xFFFFFFFF


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
