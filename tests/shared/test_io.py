"""The Spark apps' readers (spark_apps/shared/io.py): a snapshot table read with the contract's schema, from its Parquet
file or, for a run snapshotted before the snapshot was Parquet, its JSON-lines file; keys' digests; the entries of
requested keys."""

from __future__ import annotations

import json

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.contract import CURSORS
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.io import read_snapshot_table

pytestmark = pytest.mark.spark

ROWS = [
    {"topic": "t", "name": "s", "durable": True, "markDeleteLedger": 2**40, "markDeleteEntry": -1, "consumers": 0},
    {"topic": "t", "name": "r", "durable": False, "markDeleteLedger": 1, "markDeleteEntry": 3, "lastActiveMs": 5,
     "consumers": 2},
]  # fmt: skip


def _read(spark, run: RunDir) -> list[dict]:
    frame = read_snapshot_table(spark, run, CURSORS)
    assert frame.columns == list(CURSORS.names)
    return sorted((row.asDict() for row in frame.collect()), key=lambda r: r["name"])


def test_a_snapshot_table_is_read_from_parquet_with_the_contract_schema(spark, tmp_path):
    run = RunDir(tmp_path)
    write_parquet(run.snapshot_table(CURSORS), CURSORS, ROWS)
    assert _read(spark, run) == sorted((CURSORS.row(r) for r in ROWS), key=lambda r: r["name"])


def test_a_run_snapshotted_as_json_lines_is_read_the_same(spark, tmp_path):
    run = RunDir(tmp_path)
    run.snapshot_dir.mkdir()
    (run.snapshot_dir / "cursors.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert _read(spark, run) == sorted((CURSORS.row(r) for r in ROWS), key=lambda r: r["name"])


def test_a_missing_snapshot_table_names_the_file(spark, tmp_path):
    with pytest.raises(InputError, match=r"no snapshot table 'cursors' \(.*cursors.parquet is missing\)"):
        read_snapshot_table(spark, RunDir(tmp_path), CURSORS)


def test_key_digests_are_spark_sha2_of_the_keys_utf8_bytes(spark):
    import pyarrow as pa
    from pyspark.sql import functions as F

    from spark_apps.shared.io import key_digests

    keys = ["k1", "clé-ü", "", None]
    expected = [
        r[0]
        for r in spark.createDataFrame([(k,) for k in keys], "key string")
        .select(F.sha2("key", 256))
        .collect()
    ]
    assert key_digests(pa.chunked_array([pa.array(keys)])).to_pylist() == expected
    assert expected[3] is None


def test_the_entries_of_requested_digests_are_read_with_their_plain_directory(spark, tmp_path):
    """Only entries whose key's SHA-256 is requested, each with its digest and the directory it was read from as a
    plain path (a '+', a space and a '%' in it kept), whichever digests the frame repeats."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_apps.shared.io import entry_columns, read_dirs_of_digests

    def digest(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    dirs = [tmp_path / "run+1 a%20b" / "7", tmp_path / "plain" / "8"]
    for ledger_id, directory in enumerate(dirs, start=7):
        directory.mkdir(parents=True)
        keys = ["wanted", "other", None, "clé"]
        pq.write_table(
            pa.table(
                {
                    "ledgerId": pa.array([ledger_id] * 4, pa.int64()),
                    "entryId": pa.array(range(4), pa.int64()),
                    "key": pa.array(keys, pa.string()),
                }
            ),
            directory / "part-0.parquet",
        )
    digests = spark.createDataFrame(
        [(digest("wanted"),), (digest("clé"),), (digest("wanted"),), (digest("absent"),)], "keyDigest string"
    )
    columns = entry_columns("ledgerId", "entryId", "key")
    found = read_dirs_of_digests(spark, [str(d) for d in dirs], columns, digests)
    rows = sorted((r["dir"], r["ledgerId"], r["entryId"], r["key"], r["keyDigest"]) for r in found.collect())
    assert rows == sorted(
        (str(d), ledger_id, entry_id, key, digest(key))
        for ledger_id, d in enumerate(dirs, start=7)
        for entry_id, key in ((0, "wanted"), (3, "clé"))
    )
    assert read_dirs_of_digests(spark, [], columns, digests).count() == 0
