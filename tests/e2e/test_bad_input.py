"""The bad-input catalogue: every kind gets exit code 2, an error that names the offending topic, namespace,
file or setting, and changes nothing (metadata and entry files byte for byte).

Manifest-content kinds are also covered at the API level in tests/housekeeping/store/test_manifest.py and
tests/housekeeping/core/test_policies.py; here each kind goes through the public CLI contract. DAG params that fail the
schema are checked with Airflow's own param validation in test_dag_params_that_fail_the_schema_are_refused.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from housekeeping.mechanisms import registry
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from tests.conftest import run_cli, topic_body
from tests.store_invariants import store_contents

pytestmark = pytest.mark.spark

AS_OF = "2026-11-02T00:00:00Z"
KEYED_NAMESPACE = "globex/tables"

GOOD_MANIFEST = {
    "broker": {"defaultRetentionTimeInMinutes": 0, "defaultRetentionSizeInMB": 0},
    "namespaces": {
        "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}}
    },
    "topics": {
        "persistent://acme/orders/a": topic_body([(1, 2, 20, 1000), (2, 1, 10, None)], {"sub": "1:1"}),
    },
}


def _manifest(path: str, value) -> dict:
    """GOOD_MANIFEST with ``value`` at the |-separated ``path``."""
    document = copy.deepcopy(GOOD_MANIFEST)
    *parents, last = path.split("|")
    target = document
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return document


TOPIC = "topics|persistent://acme/orders/a"
FAR_FUTURE_MS = 1_767_225_600_000_000  # 2026-01-01 in microseconds, read as milliseconds: year ~57,000

# (kind, manifest document or raw text, message fragment)
MANIFEST_CASES = [
    ("manifest not JSON", "{not json", "is not valid JSON"),
    (
        "retention time 0 with size > 0",
        _manifest(
            "namespaces|acme/orders|retention_policies", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}
        ),
        "namespace acme/orders",
    ),
    (
        "retention value below -1",
        _manifest(
            "namespaces|acme/orders|retention_policies",
            {"retentionTimeInMinutes": -3, "retentionSizeInMB": 5},
        ),
        "retentionTimeInMinutes",
    ),
    (
        "unknown backlog quota policy",
        _manifest(
            "namespaces|acme/orders|backlog_quota_map",
            {"destination_storage": {"limitSize": 10, "limitTime": -1, "policy": "drop_everything"}},
        ),
        "drop_everything",
    ),
    (
        "cursor beyond the topic's last entry",
        _manifest(f"{TOPIC}|cursors|sub", {"markDeletePosition": "9:0"}),
        "persistent://acme/orders/a",
    ),
    (
        "duplicate ledger ids",
        _manifest(f"{TOPIC}|ledgers|1", {"ledgerId": 1, "entries": 1, "size": 10}),
        "unique and increasing",
    ),
    (
        "non-increasing ledger ids",
        _manifest(
            f"{TOPIC}|ledgers",
            [
                {"ledgerId": 5, "entries": 1, "size": 10, "timestamp": 1000},
                {"ledgerId": 3, "entries": 1, "size": 10},
            ],
        ),
        "unique and increasing",
    ),
    (
        "negative size",
        _manifest(f"{TOPIC}|ledgers|0", {"ledgerId": 1, "entries": 2, "size": -20, "timestamp": 1000}),
        "minimum",
    ),
    (
        "timestamp far in the future (microseconds)",
        _manifest(
            f"{TOPIC}|ledgers|0", {"ledgerId": 1, "entries": 2, "size": 20, "timestamp": FAR_FUTURE_MS}
        ),
        "persistent://acme/orders/a",
    ),
    (
        "lastActive far in the future",
        _manifest(f"{TOPIC}|lastActive", FAR_FUTURE_MS),
        "persistent://acme/orders/a",
    ),
    (
        "undeclared namespace",
        _manifest("topics|persistent://other/ns/b", topic_body([(1, 0, 0, None)])),
        "namespace other/ns is not declared",
    ),
    (
        "topic name with ..",
        _manifest("topics|persistent://acme/../b", topic_body([(1, 0, 0, None)])),
        "not a valid name",
    ),
    (
        "topic name with a backslash",
        _manifest("topics|persistent://acme/orders/a\\b", topic_body([(1, 0, 0, None)])),
        "not a valid name",
    ),
    (
        "topic name with NUL",
        _manifest("topics|persistent://acme/orders/a\u0000b", topic_body([(1, 0, 0, None)])),
        "not a valid name",
    ),
    (
        "topic name with SQL metacharacters",
        _manifest("topics|persistent://acme/orders/x';DROP TABLE topics;--", topic_body([(1, 0, 0, None)])),
        "not a valid name",
    ),
    (
        "very long topic name",
        _manifest(f"topics|persistent://acme/orders/{'t' * 300}", topic_body([(1, 0, 0, None)])),
        "longer than 200",
    ),
    (
        "unknown broker setting value",
        _manifest("broker|backlogQuotaDefaultRetentionPolicy", "nope"),
        "backlogQuotaDefaultRetentionPolicy",
    ),
    ("unknown namespace policy", _manifest("namespaces|acme/orders|bogus_policy", 1), "bogus_policy"),
    (
        "negative message TTL",
        _manifest("namespaces|acme/orders|message_ttl_in_seconds", -5),
        "message_ttl_in_seconds",
    ),
]


def fingerprint(root: Path) -> tuple:
    """Everything a failed command must leave alone: the metadata and every file under the store root outside
    ``runs/`` (a failed run may leave its own artefacts there)."""
    return store_contents(root, leave_out=("runs",))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp("bad-input") / "store"
    generate_store(root, GenerateOptions(12, 7, 40, 4, 60, "2026-11-01T00:00:00Z", False), None)
    return root


@pytest.fixture()
def store(template, tmp_path) -> Store:
    shutil.copytree(template, tmp_path / "store")
    return Store.open(tmp_path / "store")


@pytest.mark.parametrize(("kind", "document", "message"), MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_bad_manifests_exit_2_name_the_object_and_change_nothing(
    store, tmp_path, capsys, kind, document, message
):
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    before = fingerprint(store.root)
    code, _, err = run_cli(capsys, "load", "--store", str(store.root), "--manifest", str(path))
    assert code == 2, (kind, err)
    assert message in err, (kind, err)
    assert fingerprint(store.root) == before


def _keyed_topic(store: Store) -> tuple[str, list[int]]:
    """A keyed topic and its ledger ids with stored entries (compaction reads every one of them)."""
    topics = export_manifest(store)["topics"]
    name = sorted(t for t in topics if t.startswith(f"persistent://{KEYED_NAMESPACE}/"))[0]
    return name, [ledger["ledgerId"] for ledger in topics[name]["ledgers"]]


def _ledger_file(store: Store, topic: str, ledger_id: int) -> Path:
    return sorted(store.ledger_dir(topic, ledger_id).glob("*.parquet"))[0]


def _corrupt(store: Store, topic: str, ledger_id: int) -> str:
    _ledger_file(store, topic, ledger_id).write_bytes(b"PAR1 this is not a parquet file PAR1")
    return str(ledger_id)


def _truncate(store: Store, topic: str, ledger_id: int) -> str:
    part = _ledger_file(store, topic, ledger_id)
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    return str(ledger_id)


def _wrong_schema(store: Store, topic: str, ledger_id: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = _ledger_file(store, topic, ledger_id)
    pq.write_table(pa.table({"topic": [topic], "ledgerId": ["not a number"], "entryId": [0]}), part)
    return "schema"


def _missing_dir(store: Store, topic: str, ledger_id: int) -> str:
    shutil.rmtree(store.ledger_dir(topic, ledger_id))
    return str(ledger_id)


@pytest.mark.runs
@pytest.mark.parametrize(
    "damage",
    [_missing_dir, _corrupt, _truncate, _wrong_schema],
    ids=[
        "ledger directory missing",
        "corrupt Parquet file",
        "truncated Parquet file",
        "Parquet with wrong schema",
    ],
)
def test_damaged_entry_files_are_named_and_nothing_changes(store, capsys, damage: Callable):
    topic, ledger_ids = _keyed_topic(store)
    fragment = damage(store, topic, ledger_ids[0])
    before = fingerprint(store.root)
    code, _, err = run_cli(
        capsys, "apply", "compaction", "--store", str(store.root), "--as-of", AS_OF, "--compact-topic", topic
    )
    assert code == 2, err
    assert topic in err and fragment in err, err
    assert fingerprint(store.root) == before


def _cli_cases(store: Store, tmp_path: Path) -> list[tuple[str, list[str], str]]:
    root = str(store.root)
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    empty = tmp_path / "empty-store"
    empty.mkdir()
    plan = ["plan", "trim", "--store", root, "--as-of", AS_OF]
    return [
        ("unknown mechanism", ["plan", "compaktion", "--store", root, "--as-of", AS_OF], "compaktion"),
        ("malformed as_of", ["plan", "trim", "--store", root, "--as-of", "yesterday"], "yesterday"),
        (
            "as_of without timezone",
            ["plan", "trim", "--store", root, "--as-of", "2026-11-02T00:00:00"],
            "timezone",
        ),
        (
            "store path does not exist",
            ["plan", "trim", "--store", str(tmp_path / "nope"), "--as-of", AS_OF],
            "nope",
        ),
        ("store path is a file", ["plan", "trim", "--store", str(not_a_dir), "--as-of", AS_OF], "a-file"),
        ("empty store directory", ["plan", "trim", "--store", str(empty), "--as-of", AS_OF], "empty-store"),
        ("scope matching nothing", [*plan, "--scope", "nobody/*"], "nobody/*"),
        ("scope that is a path", [*plan, "--scope", "acme/*,../../etc"], "scope item '../../etc'"),
        (
            "blast-radius share out of range",
            ["apply", "trim", "--store", root, "--as-of", AS_OF, "--max-deleted-share", "1.5"],
            "--max-deleted-share",
        ),
        (
            "compact topic that does not exist",
            [
                "plan",
                "compaction",
                "--store",
                root,
                "--as-of",
                AS_OF,
                "--compact-topic",
                "persistent://globex/tables/nope",
            ],
            "persistent://globex/tables/nope",
        ),
        ("restore a hostile name", ["restore", "persistent://a/../x", "--store", root], "not a valid name"),
        (
            "manifest file missing",
            ["load", "--store", root, "--manifest", str(tmp_path / "missing.json")],
            "missing.json",
        ),
        (
            "metadata database unreachable",
            [*plan, "--metadata-url", "postgresql://u:secret@127.0.0.1:9/x"],
            "127.0.0.1:9",
        ),
    ]


CLI_KINDS = [
    "unknown mechanism",
    "malformed as_of",
    "as_of without timezone",
    "store path does not exist",
    "store path is a file",
    "empty store directory",
    "scope matching nothing",
    "scope that is a path",
    "blast-radius share out of range",
    "compact topic that does not exist",
    "restore a hostile name",
    "manifest file missing",
    "metadata database unreachable",
]


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_bad_cli_input_exits_2_names_it_and_changes_nothing(store, tmp_path, capsys, kind):
    cases = {c[0]: c for c in _cli_cases(store, tmp_path)}
    assert set(cases) == set(CLI_KINDS)
    _, argv, message = cases[kind]
    before = fingerprint(store.root)
    code, _, err = run_cli(capsys, *argv)
    assert code == 2, (kind, err)
    assert message in err, (kind, err)
    assert "secret" not in err  # a database URL's password is never printed
    assert fingerprint(store.root) == before


@pytest.mark.runs
def test_a_locked_database_is_named_and_nothing_changes(store, capsys, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS", "1")
    before = fingerprint(store.root)
    holder = sqlite3.connect(store.root / "metadata.db", timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = run_cli(capsys, "apply", "trim", "--store", str(store.root), "--as-of", AS_OF)
    finally:
        holder.rollback()
        holder.close()
    assert code == 2, err
    assert "metadata.db" in err and "locked" in err
    assert fingerprint(store.root) == before


@pytest.mark.airflow
def test_dag_params_that_fail_the_schema_are_refused(airflow_db):
    """Airflow validates a run's conf against each DAG's params before the run exists (the trigger form and
    `airflow dags test -c` use the same validation)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import ParamValidationError

    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
    assert not bag.import_errors
    bad_confs = [
        {"dry_run": "maybe"},
        {"as_of": 12},
        {"as_of": "2026-11-02T00:00:00"},  # no timezone
        {"as_of": "yesterday"},
        {"scope": ["acme/*"]},
        {"scope": "../../etc"},
        {"scope": "acme/orders/topic"},  # a topic without its persistent:// scheme
        {"max_deleted_share": 7},
    ]
    dag_ids = {registry.get_mechanism(name).dag_id for name in registry.mechanism_names()}
    housekeeping = {dag_id: dag for dag_id, dag in bag.dags.items() if dag_id in dag_ids}
    assert len(housekeeping) == len(registry.mechanism_names())  # one DAG per mechanism
    for dag_id, dag in housekeeping.items():
        good = copy.deepcopy(dag.params)
        good.update({"dry_run": True, "as_of": "2026-11-02T00:00:00Z", "max_deleted_share": 0.5})
        good.validate()
        for conf in bad_confs:
            params = copy.deepcopy(dag.params)
            with pytest.raises(ParamValidationError, match=next(iter(conf))):
                params.update(conf)
                params.validate()
        assert dag_id
    what_if = bag.dags["policy_what_if"]
    for conf in (
        {"mechanism": "everything"},
        {"policies": "retention 1d"},
        {"sweep": "retention=1d"},
        {"as_of": 12},
        {"scope": ["acme/*"]},
    ):
        params = copy.deepcopy(what_if.params)
        with pytest.raises(ParamValidationError, match=next(iter(conf))):
            params.update(conf)
            params.validate()
    capacity = bag.dags["capacity_report"]
    for conf in ({"horizon": "soon"}, {"horizon": 30}, {"as_of": "yesterday"}):
        params = copy.deepcopy(capacity.params)
        with pytest.raises(ParamValidationError, match=next(iter(conf))):
            params.update(conf)
            params.validate()
