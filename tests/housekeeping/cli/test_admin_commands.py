"""``housekeeping topics | namespaces | topic-policies`` (docs/cli.md, "Admin"): the pulsar-admin shapes end to end
through the CLI, and bad input refused with exit 2, a message naming the value, and the store unchanged."""

from __future__ import annotations

import json

import pytest

from housekeeping.store import clients
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import cli_json, run_cli, write_manifest

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
AT = "2026-01-01T00:10:00Z"
TOPIC = "persistent://p/ns/orders"


@pytest.fixture
def root(tmp_path) -> str:
    store = load_manifest(
        tmp_path / "store", write_manifest(tmp_path, {"namespaces": {"p/ns": {}}, "topics": {}})
    )
    clients.create_topic(store, TOPIC, now_ms=T0)
    clients.connect_producer(store, TOPIC, now_ms=T0)
    clients.publish(
        store, TOPIC, [{"value": str(i), "publishTime": T0 + i * 60_000} for i in range(4)], now_ms=T0
    )
    clients.roll_ledger(store, TOPIC, now_ms=T0 + 300_000)
    clients.disconnect_producer(store, TOPIC, now_ms=T0 + 300_000)
    clients.subscribe(store, TOPIC, "sub", now_ms=T0)
    return str(store.root)


def test_the_commands_change_the_store_as_pulsar_admin_would(capsys, root):
    reset = cli_json(
        capsys, "topics", "reset-cursor", TOPIC, "-s", "sub", "-m", "0:1", "--store", root, "--at", AT
    )
    assert (reset["from"], reset["to"]) == ("0:3", "0:0")
    # 8 minutes before 00:10: entries published at 00:00 and 00:01 came before it.
    by_time = cli_json(
        capsys, "topics", "reset-cursor", TOPIC, "-s", "sub", "-t", "8m", "--store", root, "--at", AT
    )
    assert by_time["to"] == "0:1"
    cli_json(capsys, "topics", "create-subscription", TOPIC, "-s", "late", "-m", "earliest", "--store", root)
    cli_json(capsys, "namespaces", "set-retention", "p/ns", "--time", "3h", "--size", "1G", "--store", root)
    cli_json(capsys, "topic-policies", "set-message-ttl", TOPIC, "--ttl", "10m", "--store", root)
    cli_json(
        capsys, "namespaces", "set-backlog-quota", "p/ns", "-p", "consumer_backlog_eviction", "-l", "100M",
        "--store", root,
    )  # fmt: skip
    shown = cli_json(capsys, "namespaces", "policies", "p/ns", "--store", root)
    assert shown["policies"]["retention_policies"] == {
        "retentionTimeInMinutes": 180,
        "retentionSizeInMB": 1024,
    }
    assert shown["policies"]["backlog_quota_map"]["destination_storage"]["limitSize"] == 100 * (1 << 20)
    assert (
        cli_json(capsys, "topic-policies", "get", TOPIC, "--store", root)["effective"]["message_ttl_seconds"]
        == 600
    )
    cli_json(capsys, "namespaces", "remove-retention", "p/ns", "--store", root)
    assert (
        "retention_policies"
        not in cli_json(capsys, "namespaces", "policies", "p/ns", "--store", root)["policies"]
    )
    cli_json(capsys, "topics", "unsubscribe", TOPIC, "-s", "late", "--store", root)
    deleted = cli_json(capsys, "topics", "delete", TOPIC, "--store", root)
    assert deleted["ledgers"] == [0, 1]
    journal = cli_json(capsys, "journal", "--store", root, "--topic", TOPIC, "--format", "json")
    actions = [row["action"] for row in journal["entries"] if row["mechanism"] == "admin"]
    assert {"reset-cursor", "create-subscription", "set-policies", "unsubscribe", "delete"} <= set(actions)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["topics", "reset-cursor", "persistent://p/ns/nope", "-s", "sub", "-m", "0:0"],
            "persistent://p/ns/nope does not exist",
        ),
        (["topics", "reset-cursor", TOPIC, "-s", "nope", "-m", "0:0"], "subscription 'nope' does not exist"),
        (["topics", "reset-cursor", TOPIC, "-s", "sub", "-m", "zero"], "position 'zero' must have the form"),
        (
            ["topics", "reset-cursor", TOPIC, "-s", "sub", "-m", "1:5"],
            "position '1:5' is beyond the topic's end",
        ),
        (
            ["topics", "reset-cursor", TOPIC, "-s", "sub", "-t", "yesterday"],
            "--time: 'yesterday' is not a value",
        ),
        (["topics", "reset-cursor", TOPIC, "-s", "sub"], "give --messageId or --time"),
        (["topics", "reset-cursor", TOPIC, "-s", "sub", "-m", "0:0", "--at", "soon"], "soon"),
        (["topics", "unsubscribe", TOPIC, "-s", "nope"], "subscription 'nope' does not exist"),
        (["topics", "delete", "persistent://p/ns/nope"], "topic persistent://p/ns/nope does not exist"),
        (["topics", "create-subscription", TOPIC, "-s", "sub"], "subscription 'sub' already exists"),
        (
            ["namespaces", "set-retention", "p/nope", "--time", "1h", "--size", "1G"],
            "namespace p/nope does not exist",
        ),
        (
            ["namespaces", "set-retention", "p/ns", "--time", "0", "--size", "1G"],
            "single time or size limit to 0",
        ),
        (["namespaces", "set-retention", "p/ns", "--time", "-5", "--size", "1G"], "--time: '-5' is invalid"),
        (["namespaces", "set-message-ttl", "p/ns", "--ttl", "3x"], "--ttl: '3x' is not a value"),
        (["namespaces", "set-backlog-quota", "p/ns", "-p", "drop_everything", "-l", "1M"], "drop_everything"),
        (["namespaces", "set-retention", TOPIC, "--time", "1h", "--size", "1G"], "is not a namespace"),
        (["topic-policies", "set-message-ttl", "p/ns", "--ttl", "1h"], "'p/ns' is not a topic"),
        (
            ["namespaces", "set-inactive-topic-policies", "p/ns", "-m", "delete_sometimes", "-t", "1h", "-e"],
            "delete_sometimes",
        ),
    ],
)
def test_bad_input_exits_2_naming_it_and_changes_nothing(capsys, root, argv, message):
    store = Store.open(root)
    before = export_manifest(store)
    code, _, err = run_cli(capsys, *argv, "--store", root)
    assert code == 2, err
    assert message in err, err
    assert export_manifest(store) == before
    journal = json.loads(run_cli(capsys, "journal", "--store", root, "--format", "json")[1])
    assert not [row for row in journal["entries"] if row["mechanism"] == "admin"]
