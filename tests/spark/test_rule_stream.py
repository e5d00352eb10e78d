"""A stream matched by a folder of rules that changes while the stream runs: rules added,
edited, broken and removed between micro-batches; the query stopped and restarted from its
checkpoint, and a micro-batch replayed after the folder changed; every rule's matches are
the batch engine's over the rows it saw, each exactly once."""

from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkcep
from sparkcep.errors import OptionError, SparkCepError
from sparkcep.spark.rule_stream import rule_errors
from tests.spark.helpers import classic_env
from tests.tiers import examples

DIP = ("PARTITION BY k ORDER BY ts MEASURES FIRST(A.p) AS top, LAST(C.p) AS end_p, COUNT(*) AS n "
       "PATTERN (A B+ C) DEFINE B AS p < PREV(p), C AS p > PREV(p)")
HIGH = "PARTITION BY k ORDER BY ts MEASURES LAST(B.p) AS high PATTERN (A B) DEFINE A AS p < 5, B AS p > 15"
HIGH2 = "PARTITION BY k ORDER BY ts MEASURES LAST(B.p) AS high2 PATTERN (A B) DEFINE A AS p < 8, B AS p > 12"
SPIKE = "PARTITION BY k, g ORDER BY ts MEASURES FIRST(ts) AS at PATTERN (A B) DEFINE A AS p < 10, B AS p > 10"
ROWS = 80  # per file, one file per micro-batch


@pytest.fixture
def folders(tmp_path):
    for name in ("in", "rules"):
        (tmp_path / name).mkdir()
    return tmp_path


def _file(folder, i: int, rng) -> pd.DataFrame:
    ts = np.arange(i * ROWS, (i + 1) * ROWS)
    df = pd.DataFrame({"ts": ts, "k": rng.choice(["a", "b", "c"], ROWS), "g": rng.integers(0, 2, ROWS),
                       "p": rng.integers(0, 20, ROWS)})
    df.to_json(folder / "in" / f"f{i:03d}.json", orient="records", lines=True)
    return df


def _in_order(folder, files: int) -> None:
    """The files' times one second apart: a file source reads the oldest first (files written
    in one millisecond would come in any order, their rows late)."""
    for i in range(files):
        os.utime(folder / "in" / f"f{i:03d}.json", (1_700_000_000 + i, 1_700_000_000 + i))


def _matches(got: pd.DataFrame, rule: str, column: str | None = None) -> list[tuple]:
    rows = [json.loads(m) for m in got[got["rule"] == rule]["match"]]
    if column is not None:
        rows = [r for r in rows if column in r]
    return sorted(tuple(sorted(r.items())) for r in rows)


def _rows(path: str) -> list[tuple]:
    return sorted(map(tuple, pd.read_parquet(path).values.tolist())) if os.path.exists(path) else []


def _alone(frames: list[pd.DataFrame], text: str) -> list[tuple]:
    out = sparkcep.match_recognize(pd.concat(frames, ignore_index=True), text)
    return sorted(tuple(sorted((k, v.item() if hasattr(v, "item") else v) for k, v in r.items()))
                  for r in out.to_dict("records"))


@pytest.fixture
def data_batches_only(spark):
    """Micro-batches only for new rows (none for a watermark alone): the last micro-batch
    before a stop is a file's."""
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    yield
    spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")


def test_rules_added_edited_broken_removed_and_restarted(spark, folders, data_batches_only):
    rng = np.random.default_rng(7)
    rules, ck, out = folders / "rules", str(folders / "ck"), str(folders / "out")
    (rules / "dip.sql").write_text(DIP)
    (rules / "high.sql").write_text(HIGH)
    events = (spark.readStream.schema("ts long, k string, g long, p long").option("maxFilesPerTrigger", 1)
              .json(str(folders / "in")))

    def start():
        matches = sparkcep.stream(events, rules=str(rules), watermark="2", event_time="ts", partition_by="k",
                                  checkpoint=ck)
        # each micro-batch's matches in a folder of its own, replaced when it is replayed
        return (matches.writeStream.option("checkpointLocation", ck)
                .foreachBatch(lambda df, b: df.write.mode("overwrite").parquet(f"{out}/batch={b}")).start())

    frames = []
    q = start()
    frames.append(_file(folders, 0, rng))
    q.processAllAvailable()
    (rules / "spike.sql").write_text(SPIKE)  # added: sees the rows from the next micro-batch on
    (rules / "dip_late.sql").write_text(DIP)  # a copy of a running rule, added: starts empty all the same
    (rules / "ratio.sql").write_text(DIP.replace("COUNT(*) AS n", "1 / (COUNT(*) - 3) AS n"))  # fails on data
    frames.append(_file(folders, 1, rng))
    q.processAllAvailable()
    (rules / "high.sql").write_text(HIGH2)  # edited: the old one goes, the new one starts
    frames.append(_file(folders, 2, rng))
    q.processAllAvailable()
    (rules / "dip.sql").write_text("PARTITION BY k ORDER BY ts PATTERN (A")  # broken: dip runs on as it was
    (rules / "other_key.sql").write_text(DIP.replace("PARTITION BY k", "PARTITION BY g"))  # refused
    frames.append(_file(folders, 3, rng))
    q.processAllAvailable()
    errors = rule_errors(ck)
    assert set(errors) == {"dip", "other_key", "ratio"} and "SYNTAX" in errors["dip"], errors
    assert "PARTITION BY" in errors["other_key"] and "failed on the data" in errors["ratio"], errors
    q.stop()
    # A crash after the sink wrote the last micro-batch's rows but before Spark committed it:
    # the restart replays it with the rules it ran with, though the folder changed since.
    last = max(int(n) for n in os.listdir(os.path.join(ck, "commits")) if n.isdigit())
    before = _rows(f"{out}/batch={last}")
    assert any(r[0] == "spike" for r in before), before  # (so that the replay could lose it)
    for name in (str(last), f".{last}.crc"):  # (the log's checksum too, or Spark takes it for another query's)
        if os.path.exists(os.path.join(ck, "commits", name)):
            os.remove(os.path.join(ck, "commits", name))
    (rules / "spike.sql").unlink()  # removed: its state goes with the next micro-batch
    q = start()
    q.processAllAvailable()
    assert _rows(f"{out}/batch={last}") == before
    frames.append(_file(folders, 4, rng))
    q.processAllAvailable()
    far = pd.DataFrame({"ts": [10_000] * 6, "k": ["a", "b", "c"] * 2, "g": [0, 0, 0, 1, 1, 1], "p": [10] * 6})
    far.to_json(folders / "in" / "z.json", orient="records", lines=True)  # moves the watermark past all
    q.processAllAvailable()
    q.stop()
    got = spark.read.parquet(out).toPandas().drop(columns="batch")
    assert list(got.columns) == ["rule", "match"]
    # dip ran from the start to the end (its broken edit kept the last good version)
    assert _matches(got, "dip") == _alone(frames, DIP) and len(_matches(got, "dip")) > 5
    assert _matches(got, "dip_late") == _alone(frames[1:], DIP) != _alone(frames, DIP)
    # high: the first version over files 0-1, the second from file 2 on
    assert _matches(got, "high", "high2") == _alone(frames[2:], HIGH2)
    # (a rule that goes: the matches its last micro-batch left undecided go with it)
    first = Counter(_matches(got, "high", "high"))
    assert first <= Counter(_alone(frames[:2], HIGH)) and first.total() >= len(_alone(frames[:2], HIGH)) - 2
    # spike: added after file 0, removed before file 4 (its rows of files 3 are replayed once)
    spike = Counter(_matches(got, "spike"))
    assert spike <= Counter(_alone(frames[1:4], SPIKE))
    assert spike.total() >= len([m for m in _alone(frames[1:4], SPIKE) if dict(m)["at"] < 4 * ROWS - 5]) > 0


def test_a_stream_of_rules_says_what_it_needs(spark, folders):
    events = spark.readStream.schema("ts long, k string, p long").json(str(folders / "in"))
    with pytest.raises(OptionError, match="event_time"):
        sparkcep.stream(events, rules=str(folders / "rules"), watermark="2", checkpoint=str(folders / "ck"))
    with pytest.raises(OptionError, match="checkpoint"):
        sparkcep.stream(events, rules=str(folders / "rules"), watermark="2", event_time="ts")
    with pytest.raises(OptionError, match="not a column"):
        sparkcep.stream(events, rules=str(folders / "rules"), watermark="2", event_time="time",
                        checkpoint=str(folders / "ck"))
    with pytest.raises(OptionError, match="not both"):
        sparkcep.stream(events, DIP, rules=str(folders / "rules"), watermark="2")


def test_matches_as_json_keep_every_kind_of_value():
    import datetime as dt
    import decimal
    import math

    import pyarrow as pa

    from sparkcep.spark.rule_stream import as_json

    t = pa.table({
        "m": pa.array([[("a", dt.datetime(2024, 1, 1))]], pa.map_(pa.string(), pa.timestamp("us"))),
        "x": pa.array([math.nan]), "d": pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
        "i": pa.array([dt.timedelta(seconds=90)]), "l": pa.array([[1.0, math.inf]]),
        "s": pa.array([{"k": dt.date(2024, 2, 3)}], pa.struct([("k", pa.date32())])),
    })
    assert [json.loads(r) for r in as_json(t).to_pylist()] == [{"m": [["a", "2024-01-01T00:00:00"]], "x": "nan", "d": "1.50",
                                                    "i": 90.0, "l": [1.0, "inf"], "s": {"k": "2024-02-03"}}]


_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e-7, 5e-324])


@given(ints=st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=4, max_size=4),
       floats=st.lists(st.one_of(st.none(), _FLOATS), min_size=4, max_size=4),
       texts=st.lists(st.one_of(st.none(), st.text()), min_size=4, max_size=4),
       flags=st.lists(st.one_of(st.none(), st.booleans()), min_size=4, max_size=4))
@settings(max_examples=examples(200), deadline=None)
def test_matches_as_json_are_what_python_writes(ints, floats, texts, flags):
    # Column by column (Arrow's kernels) against row by row (json.dumps): the same objects,
    # floats told apart from integers, -0.0 from 0.0, NaN and infinities as strings.
    import pyarrow as pa

    from sparkcep.spark.rule_stream import _plain, as_json

    t = pa.table({"i": pa.array(ints, pa.int64()), "f": pa.array(floats, pa.float64()),
                  "r": pa.array(floats, pa.float64()).cast(pa.float32(), safe=False),
                  "s": pa.array(texts, pa.string()), "b": pa.array(flags, pa.bool_()),
                  "d": pa.array(texts, pa.string()).dictionary_encode()})
    want = [json.dumps({k: _plain(v) for k, v in row.items()}, allow_nan=False) for row in t.to_pylist()]
    got = as_json(t).to_pylist()
    assert [repr(json.loads(g)) for g in got] == [repr(json.loads(w)) for w in want]
    assert as_json(t.slice(0, 0)).to_pylist() == []


def test_rule_sets_follow_the_order_they_were_decided_in_not_their_times(tmp_path):
    # A micro-batch's set is named by its time, which a clock stepping back may make smaller
    # than an earlier one's: the set before is the one decided last, and a version's start
    # is counted in decisions, so its state is not taken for older than its start.
    import pyarrow as pa

    from sparkcep.spark.rule_stream import RuleCheck, rule_errors, rule_set

    folder, store = tmp_path / "rules", str(tmp_path / "ck" / "sparkcep-rules")
    folder.mkdir()
    schema = pa.schema([("ts", pa.int64()), ("k", pa.string()), ("p", pa.int64())])
    check = RuleCheck(schema.serialize().to_pybytes(), "sql", "ts", ("k",))
    (folder / "dip.sql").write_text(DIP)
    first = rule_set(store, 1000, str(folder), check)
    (folder / "high.sql").write_text(HIGH)
    second = rule_set(store, 900, str(folder), check)  # the clock stepped back
    (folder / "dip.sql").write_text("PARTITION BY k ORDER BY ts PATTERN (A")  # broken: dip runs on
    third = rule_set(store, 950, str(folder), check)
    assert (first["seq"], second["seq"], third["seq"]) == (1, 2, 3)
    assert second["since"] == {"dip": 1, "high": 2} and third["since"] == {"dip": 1, "high": 2}
    assert third["rules"] == {"dip": DIP, "high": HIGH}
    assert set(rule_errors(str(tmp_path / "ck"))) == {"dip"}  # (the set decided last: 950's)
    assert rule_set(store, 900, str(folder), check)["seq"] == 2  # a replay reads its own set


def test_a_checkpoint_the_workers_cannot_open_is_refused():
    from sparkcep.spark.rule_stream import local_path

    assert local_path("file:/tmp/ck") == "/tmp/ck" and local_path("file:///tmp/ck") == "/tmp/ck"
    assert local_path("ck") == os.path.abspath("ck")
    assert local_path("dbfs:/mnt/ck") is None and local_path("s3a://bucket/ck") is None


def test_a_stream_of_rules_runs_to_its_end(spark, folders):
    # run_to_end over a folder of rules: the micro-batches' matches, then each rule's keys
    # ended (a rule with $ too, which only a stream whose input ends can decide); every
    # rule's rows are the batch engine's over every row; metrics count rows and matches.
    import pyarrow.parquet as pq

    from sparkcep.spark.stream import StreamMetrics

    rng = np.random.default_rng(11)
    frames = [_file(folders, i, rng) for i in range(3)]
    _in_order(folders, 3)
    last = ("PARTITION BY k ORDER BY ts MEASURES FIRST(A.p) AS first_p, COUNT(*) AS tail "
            "PATTERN (A B+ $) DEFINE A AS p > 15, B AS p <= 15")
    texts = {"dip": DIP, "dip_copy": DIP, "high": HIGH, "tail": last}  # (copies step once, out under each name)
    for name, text in texts.items():
        (folders / "rules" / f"{name}.sql").write_text(text)
    # fails on the data at the end of input only ($): it stops there, not the end of input
    (folders / "rules" / "boom.sql").write_text(last.replace("COUNT(*) AS tail", "1 / (COUNT(*) - COUNT(*)) AS r"))
    (folders / "rules" / "broken.sql").write_text("PARTITION BY k ORDER BY ts PATTERN (A B DEFINE A AS p > 1")
    events = (spark.readStream.schema("ts long, k string, g long, p long").option("maxFilesPerTrigger", 1)
              .json(str(folders / "in")))
    metrics = StreamMetrics.create(spark)
    ck, out = str(folders / "ck"), str(folders / "out")
    got = sparkcep.run_to_end(events, path=out, checkpoint=ck, rules=str(folders / "rules"), event_time="ts",
                              partition_by="k", watermark=3, metrics=metrics)
    table = pq.read_table(out).to_pandas()
    assert got["matches"] == len(table) and got["end_of_input_matches"] > 0
    assert metrics.snapshot()["rows"] == 3 * ROWS and metrics.snapshot()["matches"] == got["matches"] - \
        got["end_of_input_matches"]
    for name, text in texts.items():
        assert _matches(table, name) == _alone(frames, text), name
    assert set(rule_errors(ck)) == {"broken"} and "boom" not in set(table["rule"])
    assert metrics.snapshot()["rules_skipped"] == 1
    with pytest.raises(SparkCepError, match="flushed already"):
        sparkcep.flush(spark, None, ck)
    with pytest.raises(OptionError, match="stream of rules'"):
        sparkcep.flush(spark, DIP, ck)
    (folders / "one").mkdir()
    with pytest.raises(OptionError, match="stream of one clause's"):
        sparkcep.flush(spark, None, str(folders / "one"))


@pytest.mark.slow
def test_command_line_stream_of_rules(spark, folders):
    # `sparkcep stream --rules`: a folder of rules over JSON files to its end; the status
    # line names the rules skipped, the closing lines why; each rule's rows as in batch.
    import subprocess
    import sys

    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    frames = [_file(folders, i, rng) for i in range(2)]
    _in_order(folders, 2)
    (folders / "rules" / "dip.sql").write_text(DIP)
    (folders / "rules" / "high.sql").write_text(HIGH)
    (folders / "rules" / "broken.sql").write_text("PARTITION BY k ORDER BY ts PATTERN (A B DEFINE A AS p > 1")
    args = [sys.executable, "-m", "sparkcep.cli.main", "stream", "--rules", "rules", "--event-time", "ts",
            "--partition-by", "k", "-i", "in", "-o", "out", "--checkpoint", "ck", "--watermark", "3",
            "--schema", "ts long, k string, g long, p long", "--end-of-input"]
    r = subprocess.run(args, cwd=folders, env=classic_env(SPARKCEP_MASTER="local[2]", COLUMNS="200"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rules skipped 1" in r.stdout and "rule broken skipped:" in r.stdout, r.stdout
    table = pq.read_table(folders / "out").to_pandas()
    for name, text in {"dip": DIP, "high": HIGH}.items():
        assert _matches(table, name) == _alone(frames, text), name
    r = subprocess.run(args[:4] + ["-q", "x.sql"] + args[4:], cwd=folders, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "one of them" in r.stderr
