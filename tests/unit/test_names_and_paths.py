"""Names are validated and every file path stays inside the store's ledger tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from housekeeping.errors import InputError, PathOutsideStore
from housekeeping.names import NamespaceName, TopicName, topic_dir_parts
from housekeeping.store import Store


def test_parse_topic_and_namespace():
    name = TopicName.parse("persistent://acme/orders/payments-partition-3")
    assert (name.tenant, name.namespace, name.local_name) == ("acme", "orders", "payments-partition-3")
    assert name.partitioned_parent == "persistent://acme/orders/payments"
    assert TopicName.parse("persistent://a/b/__change_events").is_system_topic
    assert str(NamespaceName.parse("acme/orders")) == "acme/orders"


@pytest.mark.parametrize(
    "bad",
    [
        "persistent://a/../c",
        "persistent://a/b/..",
        "persistent://a/b/c/d",
        "persistent://a/b/c\\d",
        "persistent://a/b/c\x00",
        "non-persistent://a/b/c",
        "persistent://a/b/" + "x" * 201,
        "persistent://a/b/c';drop",
        "persistent://a//c",
        "a/b/c",
    ],
)
def test_hostile_topic_names_are_rejected(bad):
    with pytest.raises(InputError):
        TopicName.parse(bad)


def test_dir_parts_are_single_segments():
    for part in topic_dir_parts(TopicName.parse("persistent://a.b/c:d/e=f.g")):
        assert "/" not in part and "\\" not in part and part not in (".", "..")


def test_remove_ledger_dir_refuses_paths_outside_the_ledger_tree(tmp_path):
    store = Store(tmp_path / "store", "sqlite://")
    (store.ledgers_root / "persistent/a/b/c/1").mkdir(parents=True)
    outside = tmp_path / "precious"
    outside.mkdir()
    for rel in ("../precious", "ledgers/../../precious", str(outside), "ledgers", "metadata.db"):
        with pytest.raises(PathOutsideStore):
            store.remove_ledger_dir(rel)
    assert outside.is_dir()
    link = store.ledgers_root / "persistent/a/b/c/2"
    link.symlink_to(outside)
    with pytest.raises(PathOutsideStore):
        store.remove_ledger_dir("ledgers/persistent/a/b/c/2")
    assert outside.is_dir()
    assert store.remove_ledger_dir("ledgers/persistent/a/b/c/1") is True
    assert store.remove_ledger_dir("ledgers/persistent/a/b/c/1") is False  # idempotent
    assert not Path(store.ledgers_root / "persistent/a/b/c/1").exists()
