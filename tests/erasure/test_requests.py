"""Key erasure requests through the command line: recorded with who asked and when they take effect, journaled
without the key (its SHA-256 only), listed with their state (a hold on the target shows as held), and a bad
request refused naming what is wrong, with nothing written."""

from __future__ import annotations

import hashlib
import json

import pytest

from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store, read_transaction
from tests.conftest import run_cli, topic_body, write_manifest

pytestmark = pytest.mark.unit

DOCUMENT = {
    "namespaces": {"acme/orders": {}, "acme/audit": {}},
    "topics": {
        "persistent://acme/orders/payments": topic_body([(1, 10, 1000, None)]),
        "persistent://acme/audit/log": topic_body([(1, 10, 1000, None)]),
    },
}


@pytest.fixture
def store(tmp_path) -> Store:
    return load_manifest(tmp_path / "store", write_manifest(tmp_path, DOCUMENT))


def _request(capsys, store: Store, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "erase", "request", *args, "--store", str(store.root))


def test_a_request_is_recorded_listed_and_journaled_without_the_key(store, capsys, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_ACTOR", "dpo@example")
    code, out, err = _request(
        capsys, store, "customer-42", "--topic", "persistent://acme/orders/payments",
        "--reason", "GDPR art. 17, ticket 981", "--requested-at", "2026-11-01T00:00:00Z",
    )  # fmt: skip
    assert code == 0, err
    request = json.loads(out)
    digest = hashlib.sha256(b"customer-42").hexdigest()
    assert {
        k: request[k] for k in ("keyDigest", "scope", "target", "state", "requestedAt", "requestedBy")
    } == {
        "keyDigest": digest,
        "scope": "topic",
        "target": "persistent://acme/orders/payments",
        "state": "pending",
        "requestedAt": "2026-11-01T00:00:00.000Z",
        "requestedBy": "dpo@example",
    }
    # By its SHA-256: the key is typed nowhere, the request is the same.
    code, out, _ = _request(
        capsys, store, "--key-sha256", digest, "--namespace", "acme/audit", "--reason", "same ticket"
    )
    assert code == 0 and json.loads(out)["scope"] == "namespace" and json.loads(out)["keyDigest"] == digest

    code, out, _ = run_cli(capsys, "erase", "list", "--store", str(store.root), "--format", "json")
    assert code == 0
    listed = json.loads(out)["requests"]
    assert [(r["id"], r["target"], r["state"]) for r in listed] == [
        (1, "persistent://acme/orders/payments", "pending"),
        (2, "acme/audit", "pending"),
    ]
    code, out, _ = run_cli(capsys, "erase", "list", "--store", str(store.root))
    assert code == 0 and "#1  pending" in out and "customer-42" not in out, (
        "the text listing shows the digest"
    )

    code, out, _ = run_cli(capsys, "journal", "--store", str(store.root), "--format", "json")
    requests = [e for e in json.loads(out)["entries"] if e["action"] == "erase_request"]
    assert [(e["actor"], e["detail"]["keyDigest"], e["why"]) for e in requests] == [
        ("dpo@example", digest, "GDPR art. 17, ticket 981"),
        ("dpo@example", digest, "same ticket"),
    ]
    assert "customer-42" not in out, "the journal never holds the key"
    # Nor does the metadata database (its files under the store root, the WAL included): only the digest.
    databases = [p for p in store.root.iterdir() if p.name.startswith("metadata.db")]
    assert databases and all(b"customer-42" not in p.read_bytes() for p in databases)


def test_a_hold_on_the_target_or_its_namespace_shows_the_request_as_held(store, capsys):
    _request(capsys, store, "k", "--topic", "persistent://acme/orders/payments", "--reason", "r")
    code, _, err = run_cli(
        capsys, "hold", "add", "acme/orders", "--store", str(store.root), "--reason", "legal"
    )
    assert code == 0, err
    code, out, _ = run_cli(capsys, "erase", "list", "--store", str(store.root), "--format", "json")
    (request,) = json.loads(out)["requests"]
    assert request["state"] == "held" and "namespace hold on acme/orders" in request["detail"]
    run_cli(capsys, "hold", "remove", "acme/orders", "--store", str(store.root))
    code, out, _ = run_cli(capsys, "erase", "list", "--store", str(store.root), "--format", "json")
    assert json.loads(out)["requests"][0]["state"] == "pending"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["k", "--reason", "r"], "exactly one of --topic or --namespace"),
        (["k", "--topic", "persistent://acme/orders/payments", "--namespace", "acme/orders", "--reason", "r"],
         "exactly one of"),
        (["k", "--topic", "persistent://acme/orders/nope", "--reason", "r"], "persistent://acme/orders/nope"),
        (["k", "--topic", "acme/orders/payments", "--reason", "r"], "acme/orders/payments"),
        (["k", "--namespace", "acme/none", "--reason", "r"], "acme/none"),
        (["k", "--namespace", "acme", "--reason", "r"], "'acme'"),
        (["", "--namespace", "acme/orders", "--reason", "r"], "empty key"),
        (["k", "--namespace", "acme/orders", "--reason", "  "], "give a reason"),
        (["k", "--namespace", "acme/orders", "--reason", "r", "--requested-at", "tomorrow"], "tomorrow"),
        (["--key-sha256", "xyz", "--namespace", "acme/orders", "--reason", "r"], "'xyz' is not a SHA-256"),
        (["k", "--key-sha256", "a" * 64, "--namespace", "acme/orders", "--reason", "r"], "one of the two"),
        (["--namespace", "acme/orders", "--reason", "r"], "one of the two"),
    ],
)  # fmt: skip
def test_a_bad_request_is_refused_naming_it_and_nothing_is_written(store, capsys, args, named):
    code, out, err = _request(capsys, store, *args)
    assert code == 2 and out == "" and named in err, err
    from housekeeping.store import metadata_schema as t

    with read_transaction(store.engine) as conn:
        assert conn.execute(t.erasure_requests.select()).all() == []
        assert conn.execute(t.journal.select()).all() == []
