"""A stream matched by a folder of rules that changes while the stream runs.

The stream's keys (``partition_by``) hash into buckets as a single query's do, and one
stateful call per bucket runs every rule over the bucket's rows, each rule's keys with their
own state (runtime.keyed). Which rules run in a micro-batch is decided once, by the first
of its tasks to ask, and kept in the checkpoint (``sparkcep-rules/``, named by the
micro-batch's time): the folder's ``.sql``
files that parse and analyze for this stream, a rule whose new text does not keeping its
last good one. A replayed micro-batch (a restart) reads the same set, so every match of every
rule comes out exactly once. A rule is its name and text: a new one starts with the rows of
the micro-batch that first holds it, an edited one is a removal and an addition, and a
removed one's state goes. Output rows: the rule's name and its output row as JSON (rules
come and go, and a stream's columns are fixed when it starts).
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import logging
import math
import os
import pathlib
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from sparkcep.errors import DataError, OptionError, QueryError, SparkCepError
from sparkcep.rules.rule_set import Rule, in_rule, rule_files

SNAPSHOTS = "sparkcep-rules"  # the checkpoint's folder of rule sets, one file per micro-batch
OUTPUT_NAMES = ["rule", "match"]  # both strings: the rule's name, its match as JSON
_MAGIC = b"SPCEPR1\n"  # a bucket's state: meta as JSON (its rules in order), then each rule's keys
_KEEP = 200  # micro-batches whose rule sets stay in the checkpoint (Spark replays only the last)
_PLANS: dict = {}  # rules' plans by text, schema and mode
# A worker's matchers by rule version (a task's operator is unpickled afresh; the rules stay).
_MATCHERS: dict = {}

log = logging.getLogger("sparkcep")


def stream_rules(df, rules, *, watermark, event_time: str, partition_by=(), checkpoint: str, mode: str = "sql",
                 late: str = "drop", max_state_rows: int = 1_000_000, buckets: int | None = None,
                 end_of_input: bool = False, metrics=None):
    """Matches of every rule of the folder ``rules`` over the streaming DataFrame ``df``:
    rows ``(rule, match)``, ``match`` the rule's output row as a JSON object. Every rule must
    ORDER BY ``event_time`` first and PARTITION BY at least the columns ``partition_by``
    (the stream's keys); ``checkpoint`` is the folder the query is started with (required:
    the rule set of each micro-batch is kept there). ``end_of_input``: the input ends (an
    ``availableNow`` run, then ``flush(spark, None, checkpoint)``), so rules may use ``$``.
    ``metrics``: a StreamMetrics (rows, late rows, matches, rules skipped and the state
    gauges summed over rules; on Connect each call's figures come in an observed row, as
    for a stream of one clause). Other options as sparkcep.stream."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.streaming.state import GroupStateTimeout

    from sparkcep.spark.frames import TZ
    from sparkcep.spark.stream import (
        BUCKET,
        LATE_POLICIES,
        observed_output,
        prepared,
        state_type,
        with_metrics,
    )
    from sparkcep.spark.worker_python import check_workers

    if not getattr(df, "isStreaming", False):
        raise OptionError("sparkcep.stream needs a streaming DataFrame (spark.readStream...); "
                          "use sparkcep.match_rules for a batch DataFrame")
    folder = pathlib.Path(rules) if isinstance(rules, (str, os.PathLike)) else None
    if folder is None or not folder.is_dir():
        raise OptionError(f"a stream's rules must be a folder of .sql files (read again at each micro-batch), "
                          f"not {rules!r}")
    local = local_path(checkpoint)
    if local is None:
        raise OptionError("a stream of rules keeps each micro-batch's rule set in its checkpoint: pass "
                          "checkpoint= the folder the query starts with, a local or mounted path (every "
                          f"worker reads it), not {checkpoint!r}")
    keys = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    for name in [event_time, *keys]:
        if not isinstance(name, str) or name not in df.columns:
            raise OptionError(f"{name!r} is not a column of the stream ({', '.join(df.columns)})")
    if late not in LATE_POLICIES:
        raise OptionError(f"late must be one of {', '.join(LATE_POLICIES)}, not {late!r}")
    if not isinstance(max_state_rows, int) or max_state_rows < 1:
        raise OptionError("max_state_rows must be a positive number of rows")
    check_workers(df.sparkSession)
    arrow_schema = to_arrow_schema(df.schema, timezone=TZ)
    store = os.path.join(local, SNAPSHOTS)
    checker = RuleCheck(arrow_schema.serialize().to_pybytes(), mode, event_time, tuple(keys), end_of_input)
    for name, error in checker.errors(folder).items():  # told now; the stream skips them
        log.warning("sparkcep: rule %s is skipped: %s", name, error)
    data, wire, delay_millis, buckets = prepared(df, event_time, watermark, keys, buckets, local, arrow_schema)
    observed = metrics is not None and metrics.observed is not None  # (Connect: no accumulators)
    operator = RulesOperator(str(folder), store, checker, buckets, late, max_state_rows, delay_millis, wire,
                             None if observed else metrics, metrics.run if observed else None)
    output = output_type()
    out = data.groupBy(BUCKET).applyInPandasWithState(
        operator, outputStructType=with_metrics(output) if observed else output, stateStructType=state_type(buckets),
        outputMode="append", timeoutConf=GroupStateTimeout.EventTimeTimeout)
    return observed_output(out, metrics, output.names) if observed else out


def output_type():
    """A stream of rules' rows: ``OUTPUT_NAMES``, strings."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField(n, StringType()) for n in OUTPUT_NAMES])


def local_path(checkpoint) -> str | None:
    """``checkpoint`` as an absolute local path (``file:`` URLs too), or None for a path of
    another file system (the workers open the rule sets with Python's own files)."""
    import re
    from urllib.parse import urlparse

    if not isinstance(checkpoint, (str, os.PathLike)):
        return None
    text = str(checkpoint)
    if text.startswith("file:"):
        text = urlparse(text).path
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", text):
        return None
    return os.path.abspath(text) if text else None


def rule_errors(checkpoint: str) -> dict[str, str]:
    """The rules the stream with checkpoint ``checkpoint`` skipped in its latest micro-batch,
    by name: why (a rule whose new text was refused keeps running its last good one)."""
    store = os.path.join(local_path(checkpoint) or str(checkpoint), SNAPSHOTS)
    latest = _newest(store)
    return {} if latest is None else dict(_body(store, latest)["errors"])


class RuleCheck:
    """Whether a rule's text can run in this stream: it parses and analyzes over the
    stream's columns, orders by its event time first, partitions by (at least) its keys, and
    is a query a stream runs."""

    def __init__(self, schema: bytes, mode: str, event_time: str, keys: tuple[str, ...], end_of_input: bool = False):
        self.schema_bytes, self.mode, self.event_time, self.keys = schema, mode, event_time, keys
        self.end_of_input = end_of_input  # the input ends: $ can be decided
        self._schema: pa.Schema | None = None

    @property
    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = pa.ipc.read_schema(pa.py_buffer(self.schema_bytes))
        return self._schema

    def __getstate__(self):
        return {**self.__dict__, "_schema": None}

    def plan(self, text: str):
        """The rule's plan, or a QueryError saying why this stream cannot run it."""
        from sparkcep.analysis.patterns import find_in_pattern
        from sparkcep.language import ast
        from sparkcep.query import compile_query, is_segment_plan
        from sparkcep.runtime.incremental import IncrementalMatcher

        key = (text, self.schema_bytes, self.mode)
        plan = _PLANS.get(key)
        if plan is None:  # (kept here: a folder may hold more rules than compile_query's cache)
            plan = _PLANS[key] = compile_query(text, self.schema.empty_table(), self.mode)
            while len(_PLANS) > 4096:
                _PLANS.pop(next(iter(_PLANS)))
        if is_segment_plan(plan):
            raise QueryError("NOT_SUPPORTED", "segment queries do not run on streams")
        q = plan.query
        if not q.order_by or q.order_by[0].column != self.event_time:
            raise QueryError("NOT_SUPPORTED", f"a rule of this stream must ORDER BY its event time, "
                             f"{self.event_time}, first")
        missing = [k for k in self.keys if k not in {p.column for p in q.partition_by}]
        if missing:
            raise QueryError("NOT_SUPPORTED", f"a rule of this stream must PARTITION BY its key columns "
                             f"({', '.join(self.keys)}), and may add others; this one lacks {', '.join(missing)}")
        end = find_in_pattern(q.pattern, (ast.PEnd,))
        if end is not None and not self.end_of_input:
            raise QueryError("NOT_SUPPORTED", "$ (after the partition's last row) cannot be decided on an "
                             "unbounded stream (a stream whose input ends takes it: end_of_input=True, then flush)",
                             end.span, text)
        IncrementalMatcher(plan, self.schema)  # refuses what a stream cannot run
        return plan

    def errors(self, folder: pathlib.Path) -> dict[str, str]:
        """Why each of the folder's rules that cannot run is refused, by name."""
        out = {}
        for path in rule_files(folder):
            rule = _read_rule(path)
            try:
                self.plan(rule.text)
            except SparkCepError as e:
                out[rule.name] = str(in_rule(e, rule))
        return out


def _read_rule(path: pathlib.Path) -> Rule:
    try:
        return Rule(path.stem, path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as e:
        return Rule(path.stem, f"-- unreadable: {e}", str(path))


# ---------------------------------------------------------------- rule sets per micro-batch
def rule_set(store: str, batch: int, folder: str, checker: RuleCheck, run: str | None = None) -> dict:
    """The rules of the micro-batch of time ``batch``: {"rules": {name: text}, "seq": the set's
    place in the order they were decided, "since": {name: the seq its version started in},
    "errors": {name: why}, "news": the errors that are new since the set before, if this call
    decided}, read from the checkpoint if a task of this micro-batch (or its first run)
    decided it, else decided now from the folder and the set decided before, and kept. Sets
    are ordered by seq, not by time (a clock may step back between micro-batches). "skipped":
    how much the count of rules skipped moved, for the metrics of the query's ``run`` (all of
    them where the set before was another run's), if this call decided."""
    path = os.path.join(store, f"{batch:020d}.json")
    if os.path.exists(path):
        return {**_read(store, batch), "news": {}, "skipped": 0}
    os.makedirs(os.path.join(store, "texts"), exist_ok=True)
    order = [b for b in _by_seq(store) if b != batch]
    before = order[-1] if order else None
    previous = _read(store, before) if before is not None else {"rules": {}, "since": {}, "errors": {}, "seq": 0}
    seq = previous["seq"] + 1
    failed = _failed(store)
    rules, errors = {}, {}
    try:
        files = rule_files(pathlib.Path(folder))
    except OSError as e:  # the folder is gone or unreadable: the rules go on as they were
        files = None
        errors = {n: why for n, why in previous["errors"].items() if n != "(folder)"}
        errors["(folder)"] = f"the rules folder {folder} cannot be read ({e}); the rules run as before"
        rules = dict(previous["rules"])
    for p in files or ():
        rule = _read_rule(p)
        why = failed.get(rule_id(rule.name, rule.text))
        try:
            if why is not None:
                raise DataError(why)
            checker.plan(rule.text)
            rules[rule.name] = rule.text
        except SparkCepError as e:
            errors[rule.name] = str(in_rule(e, rule))
            last = previous["rules"].get(rule.name)
            if why is None and last is not None and rule_id(rule.name, last) not in failed:
                rules[rule.name] = last  # its last good version runs on
    body = {"batch": batch, "seq": seq, "run": run, "rules": {}, "errors": errors}
    for name, text in rules.items():
        digest = _digest(text)
        _keep_text(store, digest, text)
        kept = previous["rules"].get(name) == text and name in previous["since"]
        body["rules"][name] = [digest, previous["since"][name] if kept else seq]
    decided = _create_once(path, json.dumps(body))  # the first to decide wins; the others read its set
    _prune(store, [*order, batch])
    # What the decider reports (once, not once a worker): rules refused since the set before.
    news = {n: why for n, why in errors.items() if previous["errors"].get(n) != why} if decided else {}
    before_count = len(previous["errors"]) if previous.get("run") == run else 0
    return {**_read(store, batch), "news": news, "skipped": len(errors) - before_count if decided else 0}


def rule_id(name: str, text: str) -> str:
    """A rule version's identity: its name and text (an edit is another rule)."""
    return _digest(name + "\n" + text)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _create_once(path: str, content: str) -> bool:
    """Write ``path`` whole unless it exists; whether this call wrote it."""
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links (some mounts): created exclusively
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        return True
    finally:
        os.unlink(tmp)


def _keep_text(store: str, digest: str, text: str) -> None:
    path = os.path.join(store, "texts", f"{digest}.sql")
    if not os.path.exists(path):
        _create_once(path, text)


def rule_failed(store: str, rid: str, why: str) -> None:
    """Mark a rule version as failed on the data: from the next micro-batch decided, it is
    skipped (until its file changes)."""
    os.makedirs(os.path.join(store, "failed"), exist_ok=True)
    _create_once(os.path.join(store, "failed", f"{rid}.txt"), why)


def _failed(store: str) -> dict[str, str]:
    folder = os.path.join(store, "failed")
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".txt")]
    except FileNotFoundError:
        return {}
    out = {}
    for n in names:
        out[n[:-4]] = _text(os.path.join(folder, n))
    return out


def _text(path: str) -> str:
    """A file another worker may be writing still (where it was created exclusively):
    read again until whole."""
    import time

    for _ in range(50):
        with open(path, encoding="utf-8") as f:
            got = f.read()
        if got:
            return got
        time.sleep(0.02)
    return got


def _body(store: str, batch: int) -> dict:
    """A rule set's file as written (texts by digest)."""
    path = os.path.join(store, f"{batch:020d}.json")
    for _ in range(50):
        try:
            return json.loads(_text(path))
        except json.JSONDecodeError:  # (being written: see _create_once)
            import time

            time.sleep(0.02)
    return json.loads(_text(path))


def _read(store: str, batch: int) -> dict:
    body = _body(store, batch)
    texts, since = {}, {}
    for name, (digest, first) in body["rules"].items():
        texts[name] = _text(os.path.join(store, "texts", f"{digest}.sql"))
        since[name] = first
    return {"rules": texts, "since": since, "errors": body["errors"], "seq": body.get("seq", batch),
            "run": body.get("run")}


def _batches(store: str) -> list[int]:
    try:
        names = os.listdir(store)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def _by_seq(store: str) -> list[int]:
    """The kept sets' micro-batch times, in the order the sets were decided."""
    found = []
    for b in _batches(store):
        try:
            found.append((_body(store, b).get("seq", b), b))
        except (OSError, json.JSONDecodeError):  # (pruned or being written meanwhile)
            continue
    return [b for _, b in sorted(found)]


def _newest(store: str) -> int | None:
    """The micro-batch time of the set decided last."""
    found = _by_seq(store)
    return found[-1] if found else None


def _prune(store: str, order: list[int]) -> None:
    """Rule sets of micro-batches long committed go (Spark replays only the last one): of
    the sets in decision order, the newest _KEEP stay."""
    for b in order[:-_KEEP]:
        try:
            os.unlink(os.path.join(store, f"{b:020d}.json"))
        except FileNotFoundError:
            pass


def _batch_id(state) -> int:
    """The running micro-batch's identity: its batch time (ms), the same for every task of
    the micro-batch and kept in Spark's offset log for a replay. (Its number is not: on
    Spark Connect, foreachBatch runs the micro-batch from another thread, whose tasks do not
    carry it.) Rule sets are named by it (and ordered by the order they were decided in)."""
    return int(state.getCurrentProcessingTimeMs())


def load_states(blob: bytes, since: dict[str, int]) -> tuple[dict, dict]:
    """A bucket's (meta, each rule version's keys) by rule id: a version's keys saved before
    it started (it was removed and came back while this bucket was not called), or of a
    version not in ``since`` (removed), are dropped."""
    from sparkcep.data.ingest import unpack
    from sparkcep.runtime.keyed import KeyedState

    got = unpack(blob, _MAGIC)
    if got is None:
        raise SparkCepError("this checkpoint's state was written by a stream of one clause; a stream of rules "
                            "starts from a checkpoint of its own")
    meta = json.loads(got[0])
    states, at = {}, 0
    for rid, size, saved in meta.pop("rules"):
        if saved >= since.get(rid, saved + 1):
            states[rid] = KeyedState.from_bytes(got[1][at:at + size])
        at += size
    return meta, states


def flush_rules(spark, checkpoint: str, *, mode: str = "sql"):
    """A stopped stream of rules' end of input (see stream.flush): every rule of its last
    micro-batch's set, each key's buffered rows ending its partition; rows ``(rule, match)``."""
    from sparkcep.spark.stream import state_blobs

    store = os.path.join(local_path(checkpoint) or str(checkpoint), SNAPSHOTS)
    latest = _committed_set(checkpoint, store)
    blobs = state_blobs(spark, checkpoint)
    if blobs is None or latest is None:
        return spark.createDataFrame([], output_type())
    return blobs.mapInArrow(_Finisher(store, latest, mode), output_type())


def is_rule_checkpoint(checkpoint: str) -> bool:
    """Whether a stream of rules wrote ``checkpoint`` (it keeps its rule sets there)."""
    return os.path.isdir(os.path.join(local_path(checkpoint) or str(checkpoint), SNAPSHOTS))


def _committed_set(checkpoint: str, store: str) -> int | None:
    """The rule set of the last micro-batch the checkpoint committed (the one its state is
    of), by that micro-batch's time in Spark's offset log; else the set decided last."""
    folder = local_path(checkpoint) or str(checkpoint)
    try:
        done = [int(n) for n in os.listdir(os.path.join(folder, "commits")) if n.isdigit()]
        with open(os.path.join(folder, "offsets", str(max(done))), encoding="utf-8") as f:
            lines = f.read().splitlines()
        batch = int(json.loads(lines[1])["batchTimestampMs"])
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return _newest(store)
    return batch if os.path.exists(os.path.join(store, f"{batch:020d}.json")) else _newest(store)


class _Finisher:
    """mapInArrow over a stopped stream of rules' buckets: each rule's keys to their end."""

    def __init__(self, store: str, batch: int, mode: str):
        self.store, self.batch, self.mode = store, batch, mode

    def __call__(self, batches):
        from sparkcep.query import compile_query
        from sparkcep.runtime.keyed import KeyedMatcher
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            rules, failed = _read(self.store, self.batch), _failed(self.store)
            by_id = {rule_id(n, t): (n, t) for n, t in rules["rules"].items()}
            by_id = {rid: rule for rid, rule in by_id.items() if rid not in failed}  # (they stopped)
            since = {rid: rules["since"][n] for rid, (n, _) in by_id.items()}
            for batch in batches:
                for blob in batch.column(0).to_pylist():
                    if blob is None:
                        continue
                    for rid, keys in load_states(blob, since)[1].items():
                        name, text = by_id[rid]
                        try:
                            plan = compile_query(text, keys.rows.schema.empty_table(), self.mode)
                            done = KeyedMatcher(plan, keys.rows.schema, timeouts=False).finish(keys).out
                        except SparkCepError as e:  # it stops, not the end of input (as in the stream)
                            why = str(in_rule(e, Rule(name, text)))
                            log.warning("sparkcep: rule %s failed on the data at the end of input: %s", name, why)
                            rule_failed(self.store, rid, f"failed on the data at the end of input: {why}")
                            continue
                        if done.num_rows:
                            yield pa.record_batch([pa.array([name] * done.num_rows, pa.string()), as_json(done)],
                                                  names=["rule", "match"])


# ---------------------------------------------------------------- the bucket operator
class RulesOperator:
    """What applyInPandasWithState calls for one bucket: the micro-batch's rows of the
    bucket's keys, matched by every rule of the micro-batch, each with its keys' state."""

    def __init__(self, folder: str, store: str, checker: RuleCheck, buckets: int, late: str, max_rows: int,
                 delay_ms: int, wire: tuple, metrics=None, observed: str | None = None):
        self.folder, self.store, self.checker, self.buckets = folder, store, checker, buckets
        self.late_policy, self.max_rows, self.delay_ms, self.wire = late, max_rows, delay_ms, wire
        self.metrics = metrics  # a classic session's StreamMetrics (accumulators), or None
        self.observed = observed  # Connect: the metrics' run, each call reporting its figures in a row
        self._sets: dict = {}

    def __getstate__(self):
        return {**self.__dict__, "_sets": {}}

    def __call__(self, bucket, pdfs, state) -> Iterator:
        from sparkcep.spark.wire import errors_to_driver

        with errors_to_driver():
            if self.observed is None:
                yield from self._call(pdfs, state)
                return
            from sparkcep.spark.stream import call_metrics, reported

            self.metrics = call_metrics(self.observed)  # this call's figures
            yield from reported(self._call(pdfs, state), self.metrics, OUTPUT_NAMES)

    def _call(self, pdfs, state) -> Iterator:
        batch = _batch_id(state)
        rules = self._sets.get(batch)
        if rules is None:
            rules = rule_set(self.store, batch, self.folder, self.checker,
                             None if self.metrics is None else self.metrics.run)
            self._sets = {batch: rules}  # (one micro-batch at a time)
            if self.metrics is not None and rules["skipped"]:
                self.metrics.rules_skipped.add(rules["skipped"])
            for name, why in rules["news"].items():
                log.warning("sparkcep: rule %s is skipped: %s", name, why)
        yield from self._run(pdfs, state, rules, batch)

    def _matcher(self, rid: str, text: str):
        """The rule version's matcher, kept by this worker for the tasks to come."""
        from sparkcep.runtime.keyed import KeyedMatcher

        key = (rid, self.checker.schema_bytes, self.checker.mode, self.max_rows)
        got = _MATCHERS.get(key)
        if got is None:
            got = _MATCHERS[key] = KeyedMatcher(self.checker.plan(text), self.checker.schema, max_rows=self.max_rows,
                                                timeouts=False)
            while len(_MATCHERS) > 4096:
                _MATCHERS.pop(next(iter(_MATCHERS)))
        return got

    def _load(self, state, since: dict[str, int]) -> tuple[dict, dict]:
        if not state.exists:
            return {"latest": 0, "sealed": 0}, {}
        return load_states(bytes(state.get[0]), since)

    def _save(self, state, meta: dict, states: dict, seq: int) -> None:
        from sparkcep.data.ingest import pack

        if not states:
            if state.exists:
                state.remove()
            return
        blobs = [(rid, ks.to_bytes()) for rid, ks in states.items()]
        meta = {**meta, "rules": [[rid, len(b), seq] for rid, b in blobs]}
        state.update((pack(_MAGIC, json.dumps(meta).encode(), b"".join(b for _, b in blobs)), None))

    def _run(self, pdfs, state, rules: dict, batch: int) -> Iterator:
        import pyarrow.compute as pc

        from sparkcep.runtime.keyed import EventClock, KeyedState
        from sparkcep.spark.stream import arrived

        schema, event_time = self.checker.schema, self.checker.event_time
        clock = EventClock(schema.field(event_time).type, event_time)
        ms = state.getCurrentWatermarkMs()
        since = {rule_id(n, t): rules["since"][n] for n, t in rules["rules"].items()}
        meta, states = self._load(state, since)
        latest, sealed = meta["latest"], meta["sealed"]
        fresh = arrived(pdfs, schema, self.wire)
        if fresh.num_rows:
            self._check_times(fresh)
            watermark = clock.value(max(ms, sealed))
            times = fresh.column(event_time)
            late = pc.fill_null(pc.less(times, pa.scalar(watermark, type=times.type)), False)
            if pc.any(late).as_py():
                self._late(fresh.filter(late), watermark)
                if self.metrics is not None:
                    self.metrics.late.add(int(pc.sum(late).as_py()))
                fresh = fresh.filter(pc.invert(late))
            if self.metrics is not None:
                self.metrics.rows.add(fresh.num_rows)
            if fresh.num_rows:
                latest = max(latest, clock.millis(pc.max(fresh.column(event_time)).as_py()))
        sealed = max(ms, sealed, latest - self.delay_ms if latest else 0)
        kept, pending, out, sorts, stepped_by = {}, [], [], {}, {}
        for name, text in rules["rules"].items():
            rid = rule_id(name, text)
            # Copies of a rule (one text, started in the same micro-batch, their keys alike)
            # hold the same state and give the same matches: they step once.
            held = states.get(rid)
            twin = (text, rules["since"][name], None if held is None else (held.count, held.rows.num_rows))
            stepped = stepped_by.get(twin)
            if stepped is None:
                matcher = self._matcher(rid, text)
                rows, bounds = _sorted_once(sorts, fresh, matcher.plan.query)
                try:
                    stepped = matcher.advance(held or KeyedState.empty(schema), rows, clock.value(sealed), due_ms=ms,
                                              fresh_bounds=bounds)
                except SparkCepError as e:
                    stepped = e
                stepped_by[twin] = stepped
            if isinstance(stepped, SparkCepError):
                # A rule that fails on the data stops, not the stream: its keys here go, and
                # from the next micro-batch it is skipped until its file changes (the same
                # data fails it again on a replay: the outcome is the same).
                why = str(in_rule(stepped, Rule(name, text)))
                log.warning("sparkcep: rule %s failed on the data and stops (edit its file to start it again): %s",
                            name, why)
                rule_failed(self.store, rid, f"failed on the data in the micro-batch of time {batch}: {why}")
                continue
            if stepped.state.count:
                kept[rid] = stepped.state
                timers = stepped.state.keys["timer"]
                pending.extend(timers[timers > 0].tolist())
            if stepped.out.num_rows:
                out.append((name, stepped.out))
        if pending:
            state.setTimeoutTimestamp(max(int(min(pending)) - 1, ms, 1))
        new_meta = {"buckets": self.buckets, "latest": latest, "sealed": sealed}
        m = self.metrics
        if m is not None:
            m.matches.add(sum(t.num_rows for _, t in out))
            # Gauges summed over buckets as differences from what this bucket last reported
            # in this run (as a stream of one clause reports them), over all its rules' keys.
            now = [sum(x) for x in zip(*(ks.gauges() for ks in kept.values()), strict=True)] if kept else [0, 0, 0]
            before = meta.get("reported", [0, 0, 0]) if meta.get("run") == m.run else [0, 0, 0]
            m.buffered.add(now[0] - before[0])
            m.undecided.add(now[1] - before[1])
            m.state_bytes.add(now[2] - before[2])
            new_meta.update(reported=now, run=m.run)
        self._save(state, new_meta, kept, rules["seq"])
        if out:
            import pandas as pd

            # (Object columns: PySpark 4.3 fails on Arrow-backed ones here, handing a chunked
            # array to RecordBatch.from_arrays.)
            names = np.repeat(np.array([name for name, _ in out], dtype=object), [t.num_rows for _, t in out])
            written: dict[int, pa.Array] = {}  # (copies: one table, written once)
            for _, t in out:
                if id(t) not in written:
                    written[id(t)] = as_json(t)
            texts = [written[id(t)] for _, t in out]
            yield pd.DataFrame({"rule": names, "match": pa.concat_arrays(texts).to_numpy(zero_copy_only=False)})

    def _check_times(self, rows: pa.Table) -> None:
        import pyarrow.compute as pc

        times = rows.column(self.checker.event_time)
        missing = pc.is_null(times, nan_is_null=True)
        if pa.types.is_floating(times.type):
            missing = pc.or_(missing, pc.fill_null(pc.is_inf(times), False))
        if pc.any(missing).as_py():
            at = int(pc.index(missing, True).as_py())
            key = {k: rows.column(k)[at].as_py() for k in self.checker.keys}
            raise DataError("a streamed row needs an event time; this row has NULL, NaN or an infinity in "
                            f"{self.checker.event_time}", column=self.checker.event_time, key=key or None)

    def _late(self, late: pa.Table, watermark) -> None:
        first = late.column(self.checker.event_time)[0].as_py()
        key = {k: late.column(k)[0].as_py() for k in self.checker.keys}
        if self.late_policy == "error":
            raise DataError(f"a row arrived after the watermark had passed it: {self.checker.event_time} = {first}, "
                            f"watermark {watermark} (late='error'; with late='drop' such rows are dropped)",
                            column=self.checker.event_time, key={**key, self.checker.event_time: first})
        log.warning("stream: %d late row(s) dropped (the first: %s, %s = %s; watermark %s)", late.num_rows, key,
                    self.checker.event_time, first, watermark)


def _sorted_once(sorts: dict, fresh: pa.Table, q) -> tuple[pa.Table, list | None]:
    """The micro-batch's rows sorted as ``q`` sorts them, and their keys' bounds: once for
    every rule with the same PARTITION BY and ORDER BY (kept in ``sorts``)."""
    from sparkcep.data.partitions import sort_and_partition

    if not fresh.num_rows:
        return fresh, None
    key = (tuple(k.index for k in q.partition_by), tuple((k.index, k.descending, k.nulls_first) for k in q.order_by))
    got = sorts.get(key)
    if got is None:
        parts = sort_and_partition(fresh, q)
        got = sorts[key] = (fresh.take(pa.array(parts.order, pa.int64())), parts.bounds)
    return got


def as_json(table: pa.Table) -> pa.Array:
    """Each row as a JSON object (timestamps and dates in ISO 8601, intervals in seconds,
    decimals, NaN and infinities as strings, bytes as hex), column by column: numbers,
    booleans and text by Arrow's kernels, other values one by one in Python."""
    import pyarrow.compute as pc

    n = table.num_rows
    parts: list = []
    for i, field in enumerate(table.schema):
        parts += [pa.scalar(("{" if i == 0 else ", ") + json.dumps(field.name) + ": "), _json_values(table.column(i))]
    if not parts:
        return pa.array(["{}"] * n, pa.string())
    parts.append(pa.scalar("}"))
    got = pc.binary_join_element_wise(*parts, "")
    return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got


def _json_values(column) -> pa.Array:
    """A column's values as JSON text, NULL as null."""
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = column.type
    if pa.types.is_dictionary(t):
        column, t = column.cast(t.value_type), t.value_type
    if pa.types.is_boolean(t):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_integer(t):
        text = column.cast(pa.string())
    elif pa.types.is_floating(t):
        text = column.cast(pa.float64()).cast(pa.string())
        # Python writes whole floats with ".0" (Arrow: "1"), and NaN and infinities as strings here.
        whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
        text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
        finite = pc.is_finite(column)
        text = pc.if_else(finite, text, pc.binary_join_element_wise('"', text, '"', ""))
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not pc.any(
            pc.match_substring_regex(column, "[\\x00-\\x1f]")).as_py():
        escaped = pc.replace_substring(pc.replace_substring(column.cast(pa.string()), "\\", "\\\\"), '"', '\\"')
        text = pc.binary_join_element_wise('"', escaped, '"', "")
    else:
        text = pa.array([None if v is None else json.dumps(_plain(v), allow_nan=False) for v in column.to_pylist()],
                        pa.string())
    return pc.fill_null(text, "null")


def _plain(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, (list, tuple)):  # (a map's entries come as (key, value) tuples)
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v
