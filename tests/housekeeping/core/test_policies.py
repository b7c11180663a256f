"""Policy validation as Pulsar's admin API, and topic > namespace > broker resolution."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.policies import (
    BROKER_DEFAULTS,
    BrokerConfig,
    RetentionPolicy,
    resolve_policies,
    validate_policies,
)

pytestmark = pytest.mark.unit

BROKER = BrokerConfig.from_layers()


def test_broker_defaults_are_pulsars():
    assert BROKER["defaultRetentionTimeInMinutes"] == 0 and BROKER["defaultRetentionSizeInMB"] == 0
    assert BROKER["ttlDurationDefaultInSeconds"] == 0
    assert BROKER["backlogQuotaDefaultLimitBytes"] == -1 and BROKER["backlogQuotaDefaultLimitSecond"] == -1
    assert BROKER["backlogQuotaDefaultRetentionPolicy"] == "producer_request_hold"
    assert BROKER["brokerDeleteInactiveTopicsEnabled"] is True
    assert BROKER["brokerDeleteInactiveTopicsMode"] == "delete_when_no_subscriptions"
    assert set(BROKER_DEFAULTS) <= set(BROKER.settings)


def test_broker_conf_file_layer(tmp_path):
    from housekeeping.core.policies import read_broker_conf

    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# comment\ndefaultRetentionTimeInMinutes=60\ndefaultRetentionSizeInMB=100\nsomeUnknownKey=x\n"
    )
    config = BrokerConfig.from_layers((str(conf), read_broker_conf(conf)))
    assert config.retention == RetentionPolicy(60, 100)
    bad = tmp_path / "bad.conf"
    bad.write_text("defaultRetentionTimeInMinutes=soon\n")
    with pytest.raises(InputError, match="bad.conf.*defaultRetentionTimeInMinutes"):
        BrokerConfig.from_layers((str(bad), read_broker_conf(bad)))


@pytest.mark.parametrize("time_minutes,size_mb", [(0, 10), (10, 0), (0, -1), (-1, 0)])
def test_single_zero_retention_is_rejected_naming_the_namespace(time_minutes, size_mb):
    policies = {"retention_policies": {"retentionTimeInMinutes": time_minutes, "retentionSizeInMB": size_mb}}
    with pytest.raises(InputError, match="namespace acme/orders.*single time or size limit to 0"):
        validate_policies("namespace acme/orders", policies, BROKER.retention)


@pytest.mark.parametrize("time_minutes,size_mb", [(-2, 10), (10, -5)])
def test_values_below_minus_one_are_rejected(time_minutes, size_mb):
    policies = {"retention_policies": {"retentionTimeInMinutes": time_minutes, "retentionSizeInMB": size_mb}}
    with pytest.raises(InputError, match=">= -1"):
        validate_policies("topic persistent://a/b/c", policies, BROKER.retention)


@pytest.mark.parametrize("time_minutes,size_mb", [(0, 0), (-1, -1), (-1, 5), (5, -1), (5, 5)])
def test_valid_retention_combinations(time_minutes, size_mb):
    policies = {"retention_policies": {"retentionTimeInMinutes": time_minutes, "retentionSizeInMB": size_mb}}
    validate_policies("namespace a/b", policies, RetentionPolicy(time_minutes, size_mb))


def test_backlog_quota_must_be_below_retention():
    retention = RetentionPolicy(60, 10)
    too_big = {
        "backlog_quota_map": {
            "destination_storage": {"limitSize": 10 * 1024 * 1024, "policy": "producer_exception"}
        }
    }
    with pytest.raises(InputError, match="namespace a/b: backlog quota destination_storage limitSize"):
        validate_policies("namespace a/b", too_big, retention)
    too_old = {"backlog_quota_map": {"message_age": {"limitTime": 3600}}}
    with pytest.raises(InputError, match="limitTime=3600 s must be less than the retention time 60 min"):
        validate_policies("namespace a/b", too_old, retention)
    validate_policies("namespace a/b", {"backlog_quota_map": {"message_age": {"limitTime": 3599}}}, retention)
    # no retention limit -> any quota
    validate_policies("namespace a/b", too_big, RetentionPolicy(-1, -1))


def test_unknown_backlog_policy_and_ttl_below_zero():
    with pytest.raises(InputError, match="policy='drop_everything'"):
        validate_policies(
            "namespace a/b",
            {"backlog_quota_map": {"message_age": {"policy": "drop_everything"}}},
            BROKER.retention,
        )
    with pytest.raises(InputError, match="message_ttl_in_seconds"):
        validate_policies("namespace a/b", {"message_ttl_in_seconds": -1}, BROKER.retention)


def test_resolution_topic_over_namespace_over_broker():
    ns = {
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
        "message_ttl_in_seconds": 30,
    }
    topic = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    eff = resolve_policies("persistent://a/b/c", topic, "a/b", ns, BROKER)
    assert eff.retention == RetentionPolicy(-1, -1) and eff.retention_source == "topic persistent://a/b/c"
    assert eff.message_ttl_seconds == 30 and eff.message_ttl_source == "namespace a/b"
    eff = resolve_policies("persistent://a/b/c", {}, "a/b", ns, BROKER)
    assert eff.retention == RetentionPolicy(60, 100)
    eff = resolve_policies("persistent://a/b/c", {}, "a/b", {}, BROKER)
    assert eff.retention == RetentionPolicy(0, 0) and eff.retention_source == "broker"
    assert eff.backlog_quotas["destination_storage"].limit_size == -1
    assert eff.inactive_topic_policies.max_inactive_seconds == 60  # falls back to the frequency


def test_system_topics_get_zero_retention_unless_a_topic_policy_says_otherwise():
    ns = {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}}
    eff = resolve_policies("persistent://a/b/__change_events", {}, "a/b", ns, BROKER)
    assert eff.retention == RetentionPolicy(0, 0) and eff.retention_source == "system topic default"
    topic = {"retention_policies": {"retentionTimeInMinutes": 5, "retentionSizeInMB": 5}}
    eff = resolve_policies("persistent://a/b/__change_events", topic, "a/b", ns, BROKER)
    assert eff.retention == RetentionPolicy(5, 5)


def test_backlog_quota_gb_setting_wins_over_bytes():
    config = BrokerConfig.from_layers(
        ("x", {"backlogQuotaDefaultLimitGB": 2, "backlogQuotaDefaultLimitBytes": 5})
    )
    eff = resolve_policies("persistent://a/b/c", {}, "a/b", {}, config)
    assert eff.backlog_quotas["destination_storage"].limit_size == 2 * (1 << 30)


@pytest.mark.parametrize("topic", ["persistent://a/b/c", "persistent://a/b/__change_events"])
def test_effective_policies_as_json_equal_dataclasses_asdict(topic):
    """``EffectivePolicies.to_json`` (the snapshot's ``policies`` column, and GC apply's re-check) is its own walk
    of the dataclasses, for speed: it must give what ``dataclasses.asdict`` gives, for every level and policy the
    generated store uses (quotas, inactive-topic policies, compaction, offload), at topic and namespace level."""
    import dataclasses

    from housekeeping.store.generate import NAMESPACE_POLICIES

    for policies in NAMESPACE_POLICIES.values():
        for topic_policies, namespace_policies in (({}, policies), (policies, {}), ({}, {})):
            eff = resolve_policies(topic, topic_policies, "a/b", namespace_policies, BROKER)
            assert eff.to_json() == dataclasses.asdict(eff)
