"""The object tier (housekeeping.store.tier) on both kinds: a directory and a bucket on a real S3 API server. The
layout names the ledger and the attempt's UUID; an upload reads back whole; a delete is checked to have removed the
object; a tier that cannot be listed is bad input naming it; a hostile key is refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from housekeeping.core.errors import InputError
from housekeeping.store.entries import ENTRY_SCHEMA
from housekeeping.store.tier import (
    ObjectTier,
    TierError,
    new_attempt_uuid,
    object_key,
    parse_object_key,
    tier_of_settings,
)

pytestmark = pytest.mark.unit

TOPIC = "persistent://acme/orders/o-1"


def entries(ledger_id: int, count: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "topic": TOPIC,
                "ledgerId": ledger_id,
                "entryId": i,
                "publishTime": 1_000 + i,
                "brokerTimestamp": None,
                "key": f"k{i % 3}",
                "value": b"v" * 10,
                "size": 10,
                "properties": None,
            }
            for i in range(count)
        ],
        schema=ENTRY_SCHEMA,
    )


def test_the_object_key_names_topic_ledger_and_attempt():
    attempt = new_attempt_uuid()
    key = object_key(TOPIC, 42, attempt)
    assert key == f"persistent/acme/orders/o-1/42-{attempt}.parquet"
    assert parse_object_key(key) == ("acme/orders/o-1", 42, attempt)
    for foreign in ("persistent/acme/orders/o-1/42.parquet", "../x/42-" + attempt + ".parquet", "a/b"):
        assert parse_object_key(foreign) is None


def test_no_tier_when_the_url_is_unset(monkeypatch):
    monkeypatch.delenv("HOUSEKEEPING_OFFLOAD_URL", raising=False)
    assert tier_of_settings() is None


@pytest.mark.parametrize(
    "url, message",
    [
        ("relative/dir", "absolute path"),
        ("s3:///prefix", "names a bucket"),
        ("gs://bucket/x", "expected s3://"),
    ],
)
def test_a_malformed_url_is_bad_input_naming_it(url, message):
    with pytest.raises(InputError, match=message):
        ObjectTier.of(url)


def test_upload_read_back_list_and_delete(object_tier):
    object_tier.check()
    attempt = new_attempt_uuid()
    key = object_key(TOPIC, 7, attempt)
    size = object_tier.write_ledger(key, entries(7, 5))
    assert size > 0 and object_tier.info(key).size == size
    assert object_tier.read_ledger(key).to_pylist() == entries(7, 5).to_pylist()
    assert object_tier.read_ledger(key, columns=["entryId"]).column("entryId").to_pylist() == [0, 1, 2, 3, 4]
    other = object_key(TOPIC, 8, new_attempt_uuid())
    object_tier.write_ledger(other, entries(8, 1))
    assert sorted(o.key for o in object_tier.list_objects()) == sorted([key, other])
    assert object_tier.delete(key) is True
    assert object_tier.info(key) is None
    assert object_tier.delete(key) is False  # idempotent
    with pytest.raises(TierError, match="is missing"):
        object_tier.read_ledger(key)
    assert [o.key for o in object_tier.list_objects()] == [other]


def test_a_hostile_key_is_refused(object_tier):
    for key in (
        "../../etc/passwd",
        "persistent/a/b/c/../../x-1.parquet",
        "persistent/a/b/c/1-not-a-uuid.parquet",
    ):
        with pytest.raises(InputError, match="not an object key"):
            object_tier.delete(key)


@pytest.mark.processes
def test_a_missing_bucket_is_bad_input_naming_it(s3_server, monkeypatch):
    from tests.s3_server import CREDENTIALS

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    tier = ObjectTier.of("s3://no-such-bucket/offloaded", s3_server.endpoint_url)
    with pytest.raises(InputError, match="no-such-bucket"):
        tier.check()


def test_a_missing_directory_is_bad_input_naming_it(tmp_path):
    tier = ObjectTier.of(str(tmp_path / "absent"))
    with pytest.raises(InputError, match="absent"):
        tier.check()


@pytest.mark.processes
def test_a_server_that_stops_answering_is_a_tier_error_naming_the_object(s3_server, monkeypatch):
    from tests.s3_server import CREDENTIALS

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    tier = ObjectTier.of(f"s3://{s3_server.create_bucket()}/x", s3_server.endpoint_url)
    key = object_key(TOPIC, 9, new_attempt_uuid())
    s3_server.stop()
    try:
        with pytest.raises(TierError, match=f"uploading {key}"):
            tier.write_ledger(key, entries(9, 2))
    finally:
        restarted = type(s3_server).start()
        s3_server.port, s3_server.process = restarted.port, restarted.process
