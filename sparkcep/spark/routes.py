"""Where each row of a keyed run goes, without sampling the input.

One aggregate counts each PARTITION BY key's rows and finds the least and greatest value
of its first ORDER BY column (what ``auto`` reads to choose, and what the run strategy
reads to cut). A key holding more rows than a batch is *hot*. Where one is worth cutting
(``KeySizes.worth_cutting``), each hot key's rows are cut at evenly spaced values of that
column into ranges that follow each other in the whole order (as even in rows as its
events are in time; event times mostly are); else every key stays whole, a hot key in a
route of its own (``whole_routes``). Every other key goes whole to a bucket by its hash.
A row's *route* is a number: the hot keys' ranges first, then the buckets; Spark
partition p receives route p (hash partitioning of a value chosen to hash to p), so no
Spark job samples the rows for range bounds, and a route is named by its number, not by
where Spark put it.

Keys are told apart by a 64-bit hash of their values, floating -0.0 read as 0.0 (as GROUP
BY groups them) and which of them are NULL. Keys of one hash share a bucket (a bucket
holds many keys anyway); a hot key's ranges must hold its rows alone (else its pieces
would not follow each other), so two hot keys of one hash are not cut, and another key
found among a hot key's routes (a task finding two keys in a range, or the driver a
second key's pieces between the hot key's) sends the run to the range sort (``Widen``).
Where a cut falls decides balance, never which rows match."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sparkcep.compile.plan import Plan
from sparkcep.spark.session import parallelism
from sparkcep.spark.wire import collect_arrow

HOT = "__sparkcep_hot__"  # a hot key's hash in the aggregate (NULL: the other keys)
COUNT = "__sparkcep_count__"
ORDER, LEAST, MOST = "__sparkcep_order__", "__sparkcep_least__", "__sparkcep_most__"
KEYS, LARGEST = "__sparkcep_keys__", "__sparkcep_largest__"
ROUTE = "__sparkcep_route__"
HASH = "__sparkcep_hash__"
# Hot ranges one route expression holds (a CASE branch per hot key, a binary search of its
# cut points); more go to the range sort, which cuts any number of batches.
MAX_RANGES = 1024
MAX_HOT_KEYS = 128  # (a cold row is compared with each hot key's hash)
# A hot key is cut only where, matched whole, it would keep its task slot busy well after
# the others finish: where it holds more than CUT_SHARE times a slot's share of the rows.
# Below that every slot is busy anyway, and cutting costs more than it saves: a second job
# reading the first pass back and the driver's stitch, 10-30 % of Spark's floor for a key
# of half the rows on two slots (benchmarks/spark_scale). Tests set 0 to cut every key
# larger than a batch.
CUT_SHARE = 1.3


@dataclass(frozen=True)
class Hot:
    """A hot key's rows, the hot keys of its hash (more than one: never cut), and the
    least and greatest value of its first ORDER BY column as a number (None: no numbers to
    cut at)."""

    rows: int
    keys: int = 1
    least: float | None = None
    most: float | None = None


@dataclass(frozen=True)
class KeySizes:
    """The input's rows, its keys, its largest key's rows, and each hot key (a key of more
    than ``batch`` rows) by its hash; counted for these PARTITION BY columns and this first
    ORDER BY column (rules of one PARTITION BY share a count only where both agree)."""

    rows: int
    keys: int
    largest: int
    batch: int
    hot: dict[int, Hot] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    order: str | None = None

    def fits(self, plan: Plan, batch: int) -> bool:
        q = plan.query
        return (self.batch == batch and self.columns == tuple(k.column for k in q.partition_by)
                and self.order == q.order_by[0].column)

    def worth_cutting(self, slots: int, bound: int) -> bool:
        """Whether the largest key must be cut into batches on ``slots`` task slots: it
        holds more than a batch, and more than one task's ``bound`` of rows or more than
        CUT_SHARE times a slot's share of the rows."""
        return self.largest > self.batch and (self.largest > bound or self.largest * slots > CUT_SHARE * self.rows)

    @property
    def hot_rows(self) -> int:
        return sum(h.rows for h in self.hot.values())


def _key_columns(plan: Plan, base) -> list:
    """The PARTITION BY columns as GROUP BY compares them: a floating -0.0 as 0.0 (NaN
    hashes as one value already)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    out = []
    for k in plan.query.partition_by:
        c = F.col(k.column)
        t = base.schema[k.column].dataType
        if isinstance(t, (FloatType, DoubleType)):
            c = F.when(c == 0, F.lit(0.0).cast(t)).otherwise(c)
        out.append(c)
    return out


def _hash(cols: list):
    """A key's 64-bit hash: its values and which are NULL (Spark's hash skips a NULL, so
    (1, NULL) and (NULL, 1) would hash alike)."""
    from pyspark.sql import functions as F

    return F.xxhash64(*cols, *[c.isNull() for c in cols])


def key_hash(plan: Plan, base):
    return _hash(_key_columns(plan, base))


def _order(plan: Plan, base):
    """The first ORDER BY column and its Spark type, where cut points of it can be made
    (a number, a date or a time; not a string or a boolean: such runs are range-sorted)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        DateType,
        DoubleType,
        FloatType,
        NumericType,
        TimestampNTZType,
        TimestampType,
    )

    name = plan.query.order_by[0].column
    t = base.schema[name].dataType
    if not isinstance(t, (NumericType, DateType, TimestampType, TimestampNTZType)):
        return None, t
    c = F.col(name)
    # NaN sorts after every number: the cut points come from the numbers.
    return (F.nanvl(c, F.lit(None).cast(t)) if isinstance(t, (FloatType, DoubleType)) else c), t


def key_sizes(plan: Plan, base, batch: int) -> KeySizes:
    """Rows, keys, the largest key and the hot keys with their first ORDER BY column's
    least and greatest values, in one read of those columns (then counts per key, and
    over the hot keys by their hash and the others)."""
    from pyspark.sql import functions as F

    names = [f"__sparkcep_k{i}__" for i in range(len(plan.query.partition_by))]
    order, _ = _order(plan, base)
    cols = [c.alias(n) for c, n in zip(_key_columns(plan, base), names, strict=True)]
    per_key = [F.count(F.lit(1)).alias(COUNT)]
    over = [F.sum(COUNT).alias(COUNT), F.count(F.lit(1)).alias(KEYS), F.max(COUNT).alias(LARGEST)]
    if order is not None:
        cols.append(order.alias(ORDER))
        per_key += [F.min(ORDER).alias(LEAST), F.max(ORDER).alias(MOST)]
        over += [F.min(LEAST).alias(LEAST), F.max(MOST).alias(MOST)]
    hot = F.when(F.col(COUNT) > batch, _hash([F.col(n) for n in names]))
    got = collect_arrow(base.select(*cols).groupBy(*names).agg(*per_key).groupBy(hot.alias(HOT)).agg(*over))
    rows = got.column(COUNT).to_pylist()
    if order is not None:
        spans = list(zip(_numbers(got.column(LEAST)), _numbers(got.column(MOST)), strict=True))
    else:
        spans = [(None, None)] * got.num_rows
    hot_keys = {h: Hot(r, k, lo, hi)
                for h, r, k, (lo, hi) in zip(got.column(HOT).to_pylist(), rows, got.column(KEYS).to_pylist(), spans,
                                             strict=True)
                if h is not None}
    return KeySizes(sum(rows), sum(got.column(KEYS).to_pylist()), max(got.column(LARGEST).to_pylist(), default=0),
                    batch, hot_keys, tuple(k.column for k in plan.query.partition_by), plan.query.order_by[0].column)


def _numbers(col) -> list[float | None]:
    """Collected values of the ORDER BY column as numbers: times as microseconds (a time
    without zone as its wall clock's), dates as days, numbers as floats."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        col = col.cast(pa.int64() if pa.types.is_timestamp(col.type) else pa.int32())
        return col.to_pylist()
    return [None if v is None else float(v) for v in col.to_pylist()]


@dataclass(frozen=True)
class Routes:
    """Each hot key's cut points by its hash (its ranges: one more than its points), and
    the buckets of the other keys."""

    cuts: dict[int, list[float]]
    buckets: int

    @property
    def ranges(self) -> int:
        return sum(len(c) + 1 for c in self.cuts.values())

    @property
    def width(self) -> int:
        return self.ranges + self.buckets

    def spans(self) -> list[tuple[int, int]]:
        """Each hot key's routes [first, end), in the order route_column numbers them."""
        out, at = [], 0
        for key in sorted(self.cuts):
            out.append((at, at + len(self.cuts[key]) + 1))
            at = out[-1][1]
        return out


def routes(plan: Plan, base, sizes: KeySizes) -> Routes | None:
    """Where the rows go: a hot key of n rows in about n / batch ranges, evenly spaced over
    its values. None where the rows must be range-sorted instead: the first ORDER BY column
    has no values to cut at, a hot key cannot be cut (one value, or none finite), two hot
    keys share a hash, or the hot keys or cut points are too many for one expression
    (MAX_HOT_KEYS, MAX_RANGES)."""
    order, t = _order(plan, base)
    buckets = _buckets(base, sizes)
    if not sizes.hot:
        return Routes({}, buckets)
    pieces = {key: -(-hot.rows // sizes.batch) for key, hot in sizes.hot.items()}
    if order is None or sum(pieces.values()) > MAX_RANGES or len(pieces) > MAX_HOT_KEYS:
        return None
    cuts = {}
    for key, hot in sizes.hot.items():
        if hot.keys > 1 or hot.least is None or hot.most is None or not hot.least < hot.most \
                or not math.isfinite(hot.most - hot.least):
            return None
        j = pieces[key]
        step = (hot.most - hot.least) / j
        cuts[key] = sorted({_typed_point(hot.least + i * step, t) for i in range(1, j)})
    return Routes(cuts, buckets)


def whole_routes(base, sizes: KeySizes) -> Routes | None:
    """Routes that keep every key whole: each hot key a route of its own (its task holds
    no other key but those of its hash), the other keys in buckets by hash; None past
    MAX_HOT_KEYS."""
    if len(sizes.hot) > MAX_HOT_KEYS:
        return None
    return Routes({key: [] for key in sizes.hot}, _buckets(base, sizes))


def _buckets(base, sizes: KeySizes) -> int:
    """Buckets for the keys that are not hot: about a batch each, a few per task slot."""
    cold_keys = sizes.keys - len(sizes.hot)
    cold = sizes.rows - sizes.hot_rows
    return max(1, min(cold_keys, max(-(-cold // sizes.batch), 4 * parallelism(base.sparkSession))))


def _typed_point(x: float, t) -> float:
    """A cut point as the column's values can hold it (whole microseconds, days, integers)."""
    from pyspark.sql.types import DecimalType, DoubleType, FloatType

    if isinstance(t, (DoubleType, FloatType, DecimalType)):
        return x
    return float(math.floor(x))


def _literal(x: float, t):
    """A cut point as a literal of the ORDER BY column's type (a time without zone from
    its wall clock's fields, never through the session's zone)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ByteType,
        DateType,
        IntegerType,
        IntegralType,
        ShortType,
        TimestampNTZType,
        TimestampType,
    )

    if isinstance(t, TimestampType):
        return F.timestamp_micros(F.lit(int(x)))
    if isinstance(t, TimestampNTZType):
        wall = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(x))
        return F.lit(wall.isoformat(sep=" ", timespec="microseconds")).cast(t)
    if isinstance(t, DateType):
        return F.date_from_unix_date(F.lit(int(x)))
    if isinstance(t, IntegralType):  # (a point rounded past the type's end: its end)
        bits = 8 * {ByteType: 1, ShortType: 2, IntegerType: 4}.get(type(t), 8)
        return F.lit(min(max(int(x), -(1 << bits - 1)), (1 << bits - 1) - 1)).cast(t)
    return F.lit(x).cast(t)


def route_column(plan: Plan, base, r: Routes, h):
    """A row's route from its key's hash ``h``: a hot key's range (how many cut points its
    first ORDER BY value passes, read in that column's direction and NULL order), else its
    bucket after all ranges."""
    from pyspark.sql import functions as F

    bucket = F.pmod(h, F.lit(r.buckets)) + F.lit(r.ranges)
    if not r.cuts:
        return bucket
    first = plan.query.order_by[0]
    c, t = F.col(first.column), base.schema[first.column].dataType
    case = None  # one CASE, a branch per hot key (not nested: Connect bounds a plan's depth)
    for (at, _), key in zip(r.spans(), sorted(r.cuts), strict=True):
        cuts = r.cuts[key]
        within = _passed(c, [_literal(x, t) for x in (cuts[::-1] if first.descending else cuts)], first.descending,
                         0, len(cuts))
        if not first.nulls_first:
            within = F.when(c.isNull(), F.lit(len(cuts))).otherwise(within)
        case = (F.when if case is None else case.when)(h == F.lit(key), F.lit(at) + within)
    return case.otherwise(bucket)


def _passed(c, cuts: list, descending: bool, lo: int, hi: int):
    """How many of ``cuts`` (in the column's order) a value passes, as a binary search of
    CASEs (log2 of the cuts' comparisons per row). NULL compares to nothing: 0, first;
    NaN is greater than every number."""
    from pyspark.sql import functions as F

    if lo == hi:
        return F.lit(lo)
    mid = (lo + hi) // 2
    beyond = (c < cuts[mid]) if descending else (c > cuts[mid])
    return F.when(beyond, _passed(c, cuts, descending, mid + 1, hi)).otherwise(_passed(c, cuts, descending, lo, mid))


def placed(plan: Plan, base, r: Routes):
    """``base`` with each row's route (column ROUTE) in Spark partition ROUTE (unsorted:
    its task sorts each route's rows, as the local engine does, cheaper than Spark's sort
    by the key's strings)."""
    from pyspark.sql import functions as F

    # The hash a column of its own: Spark does not share it between a CASE's branches.
    hashed = base.withColumn(HASH, key_hash(plan, base))
    routed = hashed.withColumn(ROUTE, route_column(plan, base, r, F.col(HASH))).drop(HASH)
    values = F.array(*[F.lit(int(v)).cast("long") for v in partition_values(r.width)])
    return routed.repartition(r.width, F.element_at(values, F.col(ROUTE).cast("int") + 1))


# Spark's hash partitioning: pmod(Murmur3 x86_32 of the value, seed 42, n) (HashPartitioning).
_C1, _C2, _SEED = 0xCC9E2D51, 0x1B873593, 42


def _murmur3_long(v: np.ndarray) -> np.ndarray:
    """Spark's Murmur3_x86_32.hashLong of int64 values, as int32."""
    m32 = np.uint64(0xFFFFFFFF)

    def rotl(x, r):
        return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & m32

    def mix_k1(k):
        k = (k * np.uint64(_C1)) & m32
        return (rotl(k, 15) * np.uint64(_C2)) & m32

    def mix_h1(h, k):
        h = rotl(h ^ k, 13)
        return (h * np.uint64(5) + np.uint64(0xE6546B64)) & m32

    u = v.astype(np.int64).view(np.uint64)
    h = mix_h1(np.full(u.shape, _SEED, np.uint64), mix_k1(u & m32))
    h = mix_h1(h, mix_k1(u >> np.uint64(32)))
    h ^= np.uint64(8)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m32
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32).view(np.int32)


def partition_values(n: int) -> list[int]:
    """For each Spark partition p < n, a long that Spark's hash partitioning into n
    partitions sends to p (the smallest such)."""
    out: dict[int, int] = {}
    start = 0
    while len(out) < n:
        candidates = np.arange(start, start + 64 * n, dtype=np.int64)
        for v, p in zip(candidates.tolist(), (_murmur3_long(candidates).astype(np.int64) % n).tolist(), strict=True):
            out.setdefault(p, v)
        start += 64 * n
    return [out[p] for p in range(n)]
