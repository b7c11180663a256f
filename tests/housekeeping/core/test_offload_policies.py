"""Offload policies (housekeeping.core.offload_policies): Pulsar's names and defaults, per-field resolution topic >
namespace > broker (OffloadPoliciesTest#mergeTest), the legacy namespace fields counting only where set
(#oldPoliciesCompatibleTest), the broker's field names over its conf-file names (OffloadPoliciesImpl#create), and
validation naming the namespace or topic."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.offload_policies import resolve_offload_policy, validate_offload_policies
from housekeeping.core.policies import BrokerConfig

pytestmark = pytest.mark.unit

TOPIC, NS = "persistent://t/ns/a", "t/ns"


def resolve(topic=None, namespace=None, broker=None):
    config = BrokerConfig.from_layers(("test broker", broker or {}))
    return resolve_offload_policy(TOPIC, topic or {}, NS, namespace or {}, config.settings)


def test_a_stock_broker_offloads_nothing_and_keeps_local_copies_4_hours():
    policy = resolve()
    assert (policy.threshold_bytes, policy.threshold_seconds, policy.deletion_lag_ms) == (-1, -1, 14_400_000)
    assert not policy.auto_offload
    assert policy.deletion_lag_source == "broker"


def test_each_field_comes_from_the_most_specific_level_that_sets_it():
    policy = resolve(
        topic={"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 60}},
        namespace={"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 1000}},
        broker={"managedLedgerOffloadAutoTriggerSizeThresholdBytes": 1 << 20},
    )
    assert (policy.threshold_bytes, policy.threshold_seconds, policy.deletion_lag_ms) == (1 << 20, 60, 1000)
    assert (policy.threshold_bytes_source, policy.threshold_seconds_source, policy.deletion_lag_source) == (
        "broker",
        f"topic {TOPIC}",
        f"namespace {NS}",
    )
    assert policy.auto_offload


def test_legacy_namespace_fields_count_only_where_set_and_the_new_field_is_unset():
    legacy = {"offload_threshold": 100, "offload_threshold_in_seconds": -1, "offload_deletion_lag_ms": None}
    policy = resolve(namespace=legacy, broker={"managedLedgerOffloadThresholdInSeconds": 30})
    # -1 and null are "unset": the broker's values apply.
    assert (policy.threshold_bytes, policy.threshold_seconds, policy.deletion_lag_ms) == (100, 30, 14_400_000)
    both = resolve(namespace={**legacy, "offload_policies": {"managedLedgerOffloadThresholdInBytes": 5}})
    assert both.threshold_bytes == 5


def test_an_explicit_minus_one_in_offload_policies_disables_what_the_broker_enables():
    policy = resolve(
        namespace={"offload_policies": {"managedLedgerOffloadThresholdInBytes": -1}},
        broker={"managedLedgerOffloadAutoTriggerSizeThresholdBytes": 10},
    )
    assert policy.threshold_bytes == -1 and not policy.auto_offload


def test_the_broker_field_name_wins_over_the_conf_file_name():
    policy = resolve(
        broker={
            "managedLedgerOffloadAutoTriggerSizeThresholdBytes": 10,
            "managedLedgerOffloadThresholdInBytes": 20,
            "managedLedgerOffloadDeletionLagMs": 1,
            "managedLedgerOffloadDeletionLagInMillis": 2,
        }
    )
    assert (policy.threshold_bytes, policy.deletion_lag_ms) == (20, 2)


def test_a_lag_of_minus_one_means_never():
    policy = resolve(topic={"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": -1}})
    assert policy.deletion_lag_ms == -1 and "kept (lag -1)" in policy.describe()


@pytest.mark.parametrize(
    "policies, namespace_level, message",
    [
        (
            {"offload_policies": {"s3ManagedLedgerOffloadCredentialSecret": "x"}},
            True,
            "credentials are never",
        ),
        (
            {"offload_policies": {"managedLedgerOffloadThresholdInBytes": -2}},
            True,
            "must be an integer >= -1",
        ),
        (
            {"offload_policies": {"managedLedgerOffloadedReadPriority": "fastest"}},
            False,
            "tiered-storage-first",
        ),
        ({"offload_threshold": 10}, False, "namespace-level"),
        ({"offload_deletion_lag_ms": "1h"}, True, "must be an integer"),
    ],
)
def test_bad_offload_policies_are_refused_naming_where(policies, namespace_level, message):
    with pytest.raises(InputError, match=message) as raised:
        validate_offload_policies("namespace t/ns", policies, namespace_level=namespace_level)
    assert "namespace t/ns" in str(raised.value)


def test_a_bad_broker_offload_setting_is_refused():
    with pytest.raises(InputError, match="managedLedgerOffloadDeletionLagMs"):
        BrokerConfig.from_layers(("broker.conf", {"managedLedgerOffloadDeletionLagMs": "-7"}))
