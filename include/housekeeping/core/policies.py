"""Policy model: broker defaults (broker.conf names), namespace/topic policies, validation, resolution.

Resolution is topic > namespace > broker for every policy, as Pulsar's ``HierarchyTopicPolicies``
(docs/semantics.md §1). One Pulsar special case is kept: system topics
(``housekeeping.core.names.is_system_topic_name``) with no topic-level retention get retention (0, 0), not the
namespace's (``BrokerService#getManagedLedgerConfig``).

Validation follows Pulsar's admin API (``AdminResource#validateRetentionPolicies`` and
``#checkBacklogQuota``) and every error names the namespace or topic it is about.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.core.names import is_system_topic_name
from housekeeping.core.offload_policies import BROKER_DEFAULTS as OFFLOAD_BROKER_DEFAULTS
from housekeeping.core.offload_policies import (
    OffloadPolicy,
    resolve_offload_policy,
    validate_broker_offload,
    validate_offload_policies,
)

MIB = 1024 * 1024
# The retention source of a system topic without a topic-level retention (the gate checks it against the name).
SYSTEM_TOPIC_RETENTION_SOURCE = "system topic default"

BACKLOG_QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
INACTIVE_TOPIC_DELETE_MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")

# broker.conf settings this project reads, with Pulsar's defaults. Unknown keys in a user's broker.conf
# are accepted and ignored, so a real broker.conf can be pointed at as it is.
BROKER_DEFAULTS: dict[str, Any] = {
    "defaultRetentionTimeInMinutes": 0,
    "defaultRetentionSizeInMB": 0,
    "ttlDurationDefaultInSeconds": 0,
    "backlogQuotaCheckEnabled": True,
    "backlogQuotaDefaultLimitBytes": -1,
    "backlogQuotaDefaultLimitGB": -1.0,
    "backlogQuotaDefaultLimitSecond": -1,
    "backlogQuotaDefaultRetentionPolicy": "producer_request_hold",
    "preciseTimeBasedBacklogQuotaCheck": False,
    "brokerDeleteInactiveTopicsEnabled": True,
    "brokerDeleteInactiveTopicsMode": "delete_when_no_subscriptions",
    "brokerDeleteInactiveTopicsFrequencySeconds": 60,
    # Unset in broker.conf; Pulsar then falls back to the frequency value.
    "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": None,
    "brokerDeleteInactivePartitionedTopicMetadataEnabled": False,
    "brokerServiceCompactionThresholdInBytes": 0,
    "topicCompactionRetainNullKey": False,
    # Not a Pulsar setting (Pulsar drops tombstones at compaction): how long a tombstone stays in the compacted
    # ledger so readers can observe the delete, as Kafka's delete.retention.ms. 0 = Pulsar's behaviour.
    "housekeepingCompactedTombstoneGraceSeconds": 0,
    "retentionCheckIntervalInSeconds": 120,
    "messageExpiryCheckIntervalInMinutes": 5,
    "managedLedgerMaxEntriesPerLedger": 50000,
    "managedLedgerMinLedgerRolloverTimeMinutes": 10,
    "managedLedgerMaxLedgerRolloverTimeMinutes": 240,
    "managedLedgerMaxSizePerLedgerMbytes": 2048,
    # Copies of each entry the bookies keep (the capacity commands' physical bytes on the local tier).
    "managedLedgerDefaultWriteQuorum": 2,
    # Not broker.conf settings: Pulsar hard-codes these constants of the message-expiry guard
    # (PersistentSubscription.MINIMUM_BACKLOG_FOR_EXPIRY_CHECK, PersistentTopic.MESSAGE_EXPIRY_THRESHOLD).
    # This project makes them configurable under these names, with Pulsar's values as defaults.
    "housekeepingExpiryGuardMinimumBacklog": 1000,
    "housekeepingExpiryGuardAgeFactor": 1.5,
    # Tiered storage (housekeeping.core.offload_policies): offload thresholds and the offload-deletion lag.
    **OFFLOAD_BROKER_DEFAULTS,
}


def _coerce(key: str, value: Any, source: str) -> Any:
    default = BROKER_DEFAULTS[key]
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "false"):
                return text == "true"
            raise ValueError
        if default is None:  # an integer setting that is unset unless given
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return None if value in (None, "") else int(value)
        if isinstance(default, float):
            return float(value)
        if isinstance(default, int):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        return str(value).strip()
    except (TypeError, ValueError):
        raise InputError(
            f"{source}: broker setting {key}={value!r} is not a valid {type(default).__name__}"
        ) from None


@dataclass(frozen=True)
class BrokerConfig:
    """Effective broker settings: Pulsar defaults < broker.conf file < the store's own broker section."""

    settings: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    @classmethod
    def from_layers(cls, *layers: tuple[str, Mapping[str, Any]]) -> BrokerConfig:
        merged = dict(BROKER_DEFAULTS)
        for source, layer in layers:
            for key, value in layer.items():
                if key in BROKER_DEFAULTS:
                    merged[key] = _coerce(key, value, source)
        config = cls(merged)
        config.validate()
        return config

    def validate(self) -> None:
        where = "broker settings"
        _validate_retention(
            where, "defaultRetention", self["defaultRetentionTimeInMinutes"], self["defaultRetentionSizeInMB"]
        )
        if self["ttlDurationDefaultInSeconds"] < 0:
            raise InputError(f"{where}: ttlDurationDefaultInSeconds must be >= 0")
        if self["housekeepingExpiryGuardMinimumBacklog"] < 0 or self["housekeepingExpiryGuardAgeFactor"] < 0:
            raise InputError(
                f"{where}: housekeepingExpiryGuardMinimumBacklog and housekeepingExpiryGuardAgeFactor must be >= 0"
            )
        if self["housekeepingCompactedTombstoneGraceSeconds"] < 0:
            raise InputError(f"{where}: housekeepingCompactedTombstoneGraceSeconds must be >= 0")
        validate_broker_offload(self.settings)
        if self["managedLedgerDefaultWriteQuorum"] < 1:
            raise InputError(f"{where}: managedLedgerDefaultWriteQuorum must be >= 1")
        if self["brokerServiceCompactionThresholdInBytes"] < 0:
            raise InputError(f"{where}: brokerServiceCompactionThresholdInBytes must be >= 0")
        if self["backlogQuotaDefaultRetentionPolicy"] not in BACKLOG_QUOTA_POLICIES:
            raise InputError(
                f"{where}: backlogQuotaDefaultRetentionPolicy={self['backlogQuotaDefaultRetentionPolicy']!r} "
                f"is not one of {', '.join(BACKLOG_QUOTA_POLICIES)}"
            )
        if self["brokerDeleteInactiveTopicsMode"] not in INACTIVE_TOPIC_DELETE_MODES:
            raise InputError(
                f"{where}: brokerDeleteInactiveTopicsMode={self['brokerDeleteInactiveTopicsMode']!r} "
                f"is not one of {', '.join(INACTIVE_TOPIC_DELETE_MODES)}"
            )

    @property
    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(self["defaultRetentionTimeInMinutes"], self["defaultRetentionSizeInMB"])


def read_broker_conf(path: Path) -> dict[str, str]:
    """Read a broker.conf (Java properties: ``key=value``, ``#`` comments)."""
    if not path.is_file():
        raise InputError(f"broker config file {path} does not exist")
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise InputError(f"{path}:{number}: expected key=value, got {raw!r}")
        values[key.strip()] = value.strip()
    return values


@dataclass(frozen=True)
class RetentionPolicy:
    """Pulsar ``RetentionPolicies``: -1 infinite, 0 none, >0 limit (minutes / MiB)."""

    time_minutes: int
    size_mb: int

    @property
    def time_ms(self) -> int:
        return -1 if self.time_minutes < 0 else self.time_minutes * 60_000

    @property
    def size_bytes(self) -> int:
        return -1 if self.size_mb < 0 else self.size_mb * MIB

    def describe(self) -> str:
        def part(value: int, unit: str) -> str:
            return "infinite" if value < 0 else ("0" if value == 0 else f"{value} {unit}")

        return f"time {part(self.time_minutes, 'min')}, size {part(self.size_mb, 'MB')}"


def _validate_retention(where: str, field: str, time_minutes: Any, size_mb: Any) -> None:
    for name, value in (("retentionTimeInMinutes", time_minutes), ("retentionSizeInMB", size_mb)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {field}.{name} must be an integer, got {value!r}")
        if value < -1:
            raise InputError(f"{where}: {field}.{name}={value} is invalid: values must be >= -1")
    if (time_minutes == 0) != (size_mb == 0):
        raise InputError(
            f"{where}: {field} ({time_minutes} min, {size_mb} MB) is invalid: setting a single time or "
            "size limit to 0 is invalid; both must be 0 (no retention) or both non-zero"
        )


@dataclass(frozen=True)
class BacklogQuota:
    limit_size: int
    limit_time: int
    policy: str


@dataclass(frozen=True)
class InactiveTopicPolicies:
    delete_mode: str
    max_inactive_seconds: int
    delete_while_inactive: bool


POLICY_KEYS = (
    "retention_policies",
    "message_ttl_in_seconds",
    "backlog_quota_map",
    "inactive_topic_policies",
    "compacted_retention",
    "compaction_threshold",
    "compacted_tombstone_grace_seconds",
    "offload_policies",
    "offload_threshold",
    "offload_threshold_in_seconds",
    "offload_deletion_lag_ms",
)


def namespace_retention(policies: Mapping[str, Any], broker: BrokerConfig) -> RetentionPolicy:
    """The retention in force at a namespace's level: its own, else the broker's (what its backlog quotas must stay
    below: ``validate_policies``)."""
    retention = policies.get("retention_policies")
    if not retention:
        return broker.retention
    return RetentionPolicy(retention["retentionTimeInMinutes"], retention["retentionSizeInMB"])


def validate_policies(where: str, policies: Mapping[str, Any], retention_in_force: RetentionPolicy) -> None:
    """Semantic checks beyond the JSON schema, as Pulsar's admin API makes them.

    ``retention_in_force`` is the retention that applies at this level after resolution; backlog
    quotas must be strictly below it (``AdminResource#checkBacklogQuota``).
    """
    for name in ("retention_policies", "compacted_retention"):
        if name in policies and policies[name] is not None:
            value = policies[name]
            _validate_retention(
                where, name, value.get("retentionTimeInMinutes"), value.get("retentionSizeInMB")
            )
    ttl = policies.get("message_ttl_in_seconds")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
        raise InputError(f"{where}: message_ttl_in_seconds={ttl!r} is invalid: must be an integer >= 0")
    for quota_type, quota in (policies.get("backlog_quota_map") or {}).items():
        if quota_type not in BACKLOG_QUOTA_TYPES:
            raise InputError(
                f"{where}: backlog_quota_map has unknown quota type {quota_type!r} "
                f"(expected one of {', '.join(BACKLOG_QUOTA_TYPES)})"
            )
        policy = quota.get("policy", "producer_request_hold")
        if policy not in BACKLOG_QUOTA_POLICIES:
            raise InputError(
                f"{where}: backlog_quota_map.{quota_type}.policy={policy!r} is not one of "
                f"{', '.join(BACKLOG_QUOTA_POLICIES)}"
            )
        for field in ("limitSize", "limitTime"):
            value = quota.get(field, -1)
            if isinstance(value, bool) or not isinstance(value, int) or value < -1:
                raise InputError(
                    f"{where}: backlog_quota_map.{quota_type}.{field}={value!r} must be an integer >= -1"
                )
        limit_size, limit_time = quota.get("limitSize", -1), quota.get("limitTime", -1)
        if retention_in_force.size_mb > 0 and limit_size > 0 and limit_size >= retention_in_force.size_bytes:
            raise InputError(
                f"{where}: backlog quota {quota_type} limitSize={limit_size} bytes must be less than the "
                f"retention size {retention_in_force.size_mb} MB ({retention_in_force.size_bytes} bytes)"
            )
        if (
            retention_in_force.time_minutes > 0
            and limit_time > 0
            and limit_time >= retention_in_force.time_minutes * 60
        ):
            raise InputError(
                f"{where}: backlog quota {quota_type} limitTime={limit_time} s must be less than the "
                f"retention time {retention_in_force.time_minutes} min"
            )
    inactive = policies.get("inactive_topic_policies")
    if inactive is not None:
        mode = inactive.get("inactiveTopicDeleteMode")
        if mode is not None and mode not in INACTIVE_TOPIC_DELETE_MODES:
            raise InputError(
                f"{where}: inactive_topic_policies.inactiveTopicDeleteMode={mode!r} is not one of "
                f"{', '.join(INACTIVE_TOPIC_DELETE_MODES)}"
            )
    threshold = policies.get("compaction_threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
    ):
        raise InputError(f"{where}: compaction_threshold={threshold!r} must be an integer >= 0")
    grace = policies.get("compacted_tombstone_grace_seconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int) or grace < 0):
        raise InputError(f"{where}: compacted_tombstone_grace_seconds={grace!r} must be an integer >= 0")
    validate_offload_policies(where, policies, namespace_level=where.startswith("namespace"))


@dataclass(frozen=True)
class EffectivePolicies:
    """What applies to one topic, with the level each value came from (for reports)."""

    retention: RetentionPolicy
    retention_source: str
    message_ttl_seconds: int
    message_ttl_source: str
    backlog_quotas: dict[str, BacklogQuota]
    inactive_topic_policies: InactiveTopicPolicies
    inactive_topic_policies_source: str
    compacted_retention: RetentionPolicy | None
    compaction_threshold_bytes: int
    compacted_tombstone_grace_seconds: int = 0
    offload: OffloadPolicy | None = None

    def to_json(self) -> dict[str, Any]:
        """As ``dataclasses.asdict``, which deep-copies every value and was a quarter of a 100,000-topic snapshot
        (tests/housekeeping/core/test_policies.py holds the two equal)."""
        return _plain(self)

    def document(self) -> str:
        """The policies as one JSON text: what the snapshot records per topic and apply compares with the policies
        in force when it acts (equal texts, equal policies)."""
        return json.dumps(self.to_json(), sort_keys=True)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = (str, int, float, type(None))  # bool is an int


def _plain(value: Any) -> Any:
    """A dataclass as nested dicts, lists and tuples of its values (which are immutable scalars here)."""
    if isinstance(value, _SCALARS):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES.get(type(value))
        if names is None:
            names = _FIELD_NAMES.setdefault(type(value), tuple(f.name for f in fields(value)))
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _retention_of(value: Mapping[str, Any]) -> RetentionPolicy:
    return RetentionPolicy(int(value["retentionTimeInMinutes"]), int(value["retentionSizeInMB"]))


@dataclass(frozen=True)
class _Levels:
    """One topic's policies at each level, topic over namespace over broker."""

    topic_name: str
    topic: Mapping[str, Any]
    namespace_name: str
    namespace: Mapping[str, Any]
    broker: BrokerConfig

    def pick(self, key: str) -> tuple[Any, str]:
        """The policy ``key`` from the most specific level that sets it, and that level (None, "broker": none)."""
        if self.topic.get(key) is not None:
            return self.topic[key], f"topic {self.topic_name}"
        if self.namespace.get(key) is not None:
            return self.namespace[key], f"namespace {self.namespace_name}"
        return None, "broker"


def _retention(levels: _Levels) -> tuple[RetentionPolicy, str]:
    value, source = levels.pick("retention_policies")
    system_topic = is_system_topic_name(levels.topic_name)
    if value is not None and not (system_topic and source.startswith("namespace")):
        return _retention_of(value), source
    if system_topic:
        # BrokerService#getManagedLedgerConfig: a topic SystemTopicNames#isSystemTopic names gets (0, 0)
        # without a topic-level retention; the namespace's does not apply to it.
        return RetentionPolicy(0, 0), SYSTEM_TOPIC_RETENTION_SOURCE
    return levels.broker.retention, source


def _backlog_quotas(levels: _Levels) -> dict[str, BacklogQuota]:
    """Per quota type, the most specific level's quota (a quota map entry replaces the lower levels' whole)."""
    broker = levels.broker
    broker_limit_size = (
        int(broker["backlogQuotaDefaultLimitGB"] * (1 << 30))
        if broker["backlogQuotaDefaultLimitGB"] > 0
        else int(broker["backlogQuotaDefaultLimitBytes"])
    )
    quotas: dict[str, BacklogQuota] = {}
    for quota_type in BACKLOG_QUOTA_TYPES:
        chosen = next(
            (
                (level.get("backlog_quota_map") or {})[quota_type]
                for level in (levels.topic, levels.namespace)
                if quota_type in (level.get("backlog_quota_map") or {})
            ),
            None,
        )
        quotas[quota_type] = (
            BacklogQuota(
                broker_limit_size,
                int(broker["backlogQuotaDefaultLimitSecond"]),
                broker["backlogQuotaDefaultRetentionPolicy"],
            )
            if chosen is None
            else BacklogQuota(
                int(chosen.get("limitSize", -1)),
                int(chosen.get("limitTime", -1)),
                chosen.get("policy", "producer_request_hold"),
            )
        )
    return quotas


def _inactive_topic_policies(levels: _Levels) -> tuple[InactiveTopicPolicies, str]:
    broker = levels.broker
    value, source = levels.pick("inactive_topic_policies")
    max_inactive_default = broker["brokerDeleteInactiveTopicsMaxInactiveDurationSeconds"]
    if max_inactive_default is None:
        max_inactive_default = broker["brokerDeleteInactiveTopicsFrequencySeconds"]
    if value is None:
        # Pulsar's broker-level policy: (brokerDeleteInactiveTopicsMode, ...MaxInactiveDurationSeconds,
        # brokerDeleteInactiveTopicsEnabled).
        return (
            InactiveTopicPolicies(
                broker["brokerDeleteInactiveTopicsMode"],
                int(max_inactive_default),
                bool(broker["brokerDeleteInactiveTopicsEnabled"]),
            ),
            source,
        )
    # A policy object replaces the lower levels whole (Pulsar has no per-field merge). A field left out takes the
    # broker's mode and duration; deleteWhileInactive left out is false, as in Pulsar's InactiveTopicPolicies (and
    # the safe reading: no deletion that was not asked for).
    return (
        InactiveTopicPolicies(
            value.get("inactiveTopicDeleteMode") or broker["brokerDeleteInactiveTopicsMode"],
            int(value.get("maxInactiveDurationSeconds", max_inactive_default)),
            bool(value.get("deleteWhileInactive", False)),
        ),
        source,
    )


def resolve_policies(
    topic_name: str,
    topic_policies: Mapping[str, Any],
    namespace_name: str,
    namespace_policies: Mapping[str, Any],
    broker: BrokerConfig,
) -> EffectivePolicies:
    """Topic > namespace > broker, per policy."""
    levels = _Levels(topic_name, topic_policies, namespace_name, namespace_policies, broker)
    retention, retention_source = _retention(levels)
    ttl_value, ttl_source = levels.pick("message_ttl_in_seconds")
    inactive, inactive_source = _inactive_topic_policies(levels)
    compacted_value, _ = levels.pick("compacted_retention")
    threshold_value, _ = levels.pick("compaction_threshold")
    grace_value, _ = levels.pick("compacted_tombstone_grace_seconds")
    return EffectivePolicies(
        retention=retention,
        retention_source=retention_source,
        message_ttl_seconds=int(ttl_value)
        if ttl_value is not None
        else int(broker["ttlDurationDefaultInSeconds"]),
        message_ttl_source=ttl_source,
        backlog_quotas=_backlog_quotas(levels),
        inactive_topic_policies=inactive,
        inactive_topic_policies_source=inactive_source,
        compacted_retention=_retention_of(compacted_value) if compacted_value is not None else None,
        compaction_threshold_bytes=int(
            threshold_value
            if threshold_value is not None
            else broker["brokerServiceCompactionThresholdInBytes"]
        ),
        compacted_tombstone_grace_seconds=int(
            grace_value if grace_value is not None else broker["housekeepingCompactedTombstoneGraceSeconds"]
        ),
        offload=resolve_offload_policy(
            topic_name, topic_policies, namespace_name, namespace_policies, broker.settings
        ),
    )
