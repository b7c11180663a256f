"""A snapshot at a million topics: the store's topics, ledgers and cursors are read as the tables are written
(``engine.snapshot.streamed_store_state``), the buckets grow with the topics, ``run.json`` carries no per-topic
facts (apply reads the topic versions from the topics table), and ``housekeeping generate --metadata-only`` makes
such a store without entry files. Each shown on a small store against what it must equal."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine import contract
from housekeeping.engine.apply import snapshot_topic_versions
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot import read_store_state, snapshot_buckets, take_snapshot
from housekeeping.engine.snapshot_reads import SnapshotTopicLookup, read_snapshot_table, snapshot_topic_values
from housekeeping.mechanisms.registry import build_request
from housekeeping.store import metadata_schema as t
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from tests.conftest import record_snapshot_reads

pytestmark = pytest.mark.unit

AS_OF_MS = parse_as_of("2026-11-02T00:00:00Z")
OPTIONS = GenerateOptions(topics=24, seed=5, entries_per_ledger=20)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return generate_store(tmp_path_factory.mktemp("streamed") / "store", OPTIONS, None)


def _snapshot(store: Store, run_id: str, **kwargs) -> RunDir:
    request = build_request("gc", run_id=run_id, as_of_ms=AS_OF_MS, values={"max_deleted_share": 1.0})
    return RunDir(take_snapshot(store, request, **kwargs).run_dir)


def test_a_streamed_snapshot_equals_the_snapshot_of_a_read_held_in_memory(store):
    streamed = _snapshot(store, "streamed")
    held = _snapshot(store, "held", state=read_store_state(store))
    info = read_run_info(streamed)
    for name in info.snapshot_tables:
        table = contract.SNAPSHOT_TABLES[name]
        assert pq.read_table(streamed.snapshot_table(table)).equals(
            pq.read_table(held.snapshot_table(table))
        ), name
    volatile = {"runId", "takenAtWallClockMs"}
    held_info = read_run_info(held)
    assert {k: v for k, v in info.as_json().items() if k not in volatile} == {
        k: v for k, v in held_info.as_json().items() if k not in volatile
    }
    # What the namespaces table says, counted here from the store's rows.
    manifest = export_manifest(store)
    stored: dict[str, int] = {}
    for name, topic in manifest["topics"].items():
        namespace = name.split("://", 1)[1].rsplit("/", 1)[0]
        stored[namespace] = stored.get(namespace, 0) + sum(ledger["size"] for ledger in topic["ledgers"])
    rows = read_snapshot_table(streamed, contract.NAMESPACES)
    assert {r["namespace"]: r["storedBytes"] for r in rows} == stored


def test_run_json_carries_no_topic_versions_and_apply_reads_them_from_the_topics_table(store):
    run = _snapshot(store, "versions")
    info = read_run_info(run)
    written = run.run_info.read_text()
    assert "topicVersions" not in json.loads(written) and len(written) < 5000
    assert info.legacy_topic_versions is None
    with store.engine.connect() as conn:
        versions = dict(conn.execute(select(t.topics.c.name, t.topics.c.version)).all())
    lookup = snapshot_topic_versions(run, info)
    assert {name: lookup[name] for name in versions} == versions
    assert "persistent://t/n/never" not in lookup
    # A run snapshotted when run.json still carried them applies with those.
    older = replace(info, legacy_topic_versions={sorted(versions)[0]: 7})
    assert snapshot_topic_versions(run, older) == {sorted(versions)[0]: 7}


def test_a_lookup_reads_one_bucket_at_a_time_and_the_whole_table_once_when_asked_out_of_bucket_order(
    store, monkeypatch
):
    run = _snapshot(store, "lookup")
    info = read_run_info(run)
    expected = snapshot_topic_values(run, "version", "policies")
    by_bucket = sorted(expected, key=lambda name: (contract.topic_bucket(name, info.snapshot_buckets), name))
    reads = record_snapshot_reads(monkeypatch)
    lookup = SnapshotTopicLookup(run, info, "version", "policies")
    assert {name: lookup[name] for name in by_bucket} == {name: expected[name] for name in by_bucket}
    buckets = {contract.topic_bucket(name, info.snapshot_buckets) for name in expected}
    assert sorted(reads) == sorted([b] for b in buckets)  # each bucket's row group once, nothing else
    # Back to a bucket read before: the whole table, once, then every answer from it.
    reads.clear()
    assert {name: lookup[name] for name in sorted(expected)} == expected
    assert reads == [None]
    # Not clustered as run.json says (another writer's row groups): read whole at once.
    unclustered = SnapshotTopicLookup(run, replace(info, snapshot_buckets=1000), "version")
    reads.clear()
    assert {name: unclustered[name] for name in by_bucket} == {n: v for n, (v, _) in expected.items()}
    assert reads == [None]


def test_a_bucket_holding_another_buckets_topic_is_bad_input_naming_the_file(store):
    run = _snapshot(store, "misplaced")
    info = read_run_info(run)
    path = run.snapshot_table(contract.TOPICS)
    table = pq.read_table(path)
    # The same rows, two row groups of the same size, but not split by bucket.
    pq.write_table(table, path, row_group_size=-(-table.num_rows // 2))
    lookup = SnapshotTopicLookup(run, replace(info, snapshot_buckets=2), "version")
    names = table.column("topic").to_pylist()
    misplaced = next(n for n in names[: -(-len(names) // 2)] if contract.topic_bucket(n, 2) != 0)
    with pytest.raises(InputError, match=f"{path}: row group 0 holds topic {misplaced} of another bucket"):
        lookup[next(n for n in names if contract.topic_bucket(n, 2) == 0)]


def test_the_buckets_grow_with_the_topics_unless_the_setting_fixes_them(monkeypatch):
    monkeypatch.delenv("HOUSEKEEPING_SNAPSHOT_BUCKETS", raising=False)
    assert [snapshot_buckets(n) for n in (1, 400_000, 400_001, 1_000_004)] == [8, 8, 9, 21]
    monkeypatch.setenv("HOUSEKEEPING_SNAPSHOT_BUCKETS", "4")
    assert snapshot_buckets(1_000_004) == 4


def test_a_metadata_only_store_has_the_same_topics_and_no_entry_files(store, tmp_path):
    described = generate_store(
        tmp_path / "metadata-only",
        GenerateOptions(topics=OPTIONS.topics, seed=OPTIONS.seed, entries_per_ledger=20, metadata_only=True),
        None,
    )
    assert not any(p.is_file() for p in described.ledgers_root.rglob("*"))
    full, only = export_manifest(store)["topics"], export_manifest(described)["topics"]
    assert sorted(full) == sorted(only)
    for name, topic in full.items():
        mirrored = only[name]
        assert mirrored["cursors"] == topic["cursors"], name
        assert [(lg["ledgerId"], lg["entries"]) for lg in mirrored["ledgers"]] == [
            (lg["ledgerId"], lg["entries"]) for lg in topic["ledgers"]
        ], name
        assert all((lg["size"] > 0) == (lg["entries"] > 0) for lg in mirrored["ledgers"]), name
    with described.engine.connect() as conn:
        assert not any(conn.execute(select(t.ledgers.c.entries_stored)).scalars())
