"""Offload policies (Pulsar's ``OffloadPoliciesImpl``; docs/semantics.md §9): their names, defaults,
validation and resolution.

- Broker (broker.conf): ``managedLedgerOffloadAutoTriggerSizeThresholdBytes`` -1,
  ``managedLedgerOffloadThresholdInSeconds`` -1, ``managedLedgerOffloadDeletionLagMs`` 14400000 (4 h). As in
  ``OffloadPoliciesImpl#create(Properties)``, the field names (``managedLedgerOffloadThresholdInBytes``,
  ``managedLedgerOffloadDeletionLagInMillis``) win over the conf-file aliases when both are set.
- Namespace: ``offload_policies`` (OffloadPolicies field names) and the legacy ``offload_threshold``,
  ``offload_threshold_in_seconds``, ``offload_deletion_lag_ms``, which count only where the new field is unset and
  the legacy one is set (-1 and null are unset; ``OffloadPoliciesImpl#oldPoliciesCompatible``).
- Topic: ``offload_policies`` (``TopicPolicies.offloadPolicies``).

Resolution is per field, topic > namespace > broker (``OffloadPoliciesImpl#mergeConfiguration``). Thresholds: < 0
disabled, 0 every closed ledger. Deletion lag: -1 never (PIP-350).

Credentials are never part of a policy here: the tier's are the deployment's AWS chain (``housekeeping.store.tier``),
so ``s3ManagedLedgerOffloadCredentialId``/``...Secret`` are refused. The driver, bucket and endpoint fields are
accepted and kept (a manifest taken from a cluster has them) but do not choose a tier: the deployment has one,
``HOUSEKEEPING_OFFLOAD_URL``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from housekeeping.core.errors import InputError

THRESHOLD_BYTES = "managedLedgerOffloadThresholdInBytes"
THRESHOLD_SECONDS = "managedLedgerOffloadThresholdInSeconds"
DELETION_LAG = "managedLedgerOffloadDeletionLagInMillis"
RULE_FIELDS = (THRESHOLD_BYTES, THRESHOLD_SECONDS, DELETION_LAG)

# broker.conf: the conf-file name of each field and Pulsar's shipped value.
BROKER_CONF_NAMES = {
    THRESHOLD_BYTES: "managedLedgerOffloadAutoTriggerSizeThresholdBytes",
    THRESHOLD_SECONDS: "managedLedgerOffloadThresholdInSeconds",
    DELETION_LAG: "managedLedgerOffloadDeletionLagMs",
}
BROKER_DEFAULTS = {
    "managedLedgerOffloadAutoTriggerSizeThresholdBytes": -1,
    "managedLedgerOffloadThresholdInSeconds": -1,
    "managedLedgerOffloadDeletionLagMs": 14_400_000,
    # The field names at broker level: unset unless given (then they win over the conf-file names).
    THRESHOLD_BYTES: None,
    DELETION_LAG: None,
}
# Namespace legacy fields (Policies) by the field they stand in for.
LEGACY_NAMESPACE_FIELDS = {
    "offload_threshold": THRESHOLD_BYTES,
    "offload_threshold_in_seconds": THRESHOLD_SECONDS,
    "offload_deletion_lag_ms": DELETION_LAG,
}
CREDENTIAL_FIELDS = ("s3ManagedLedgerOffloadCredentialId", "s3ManagedLedgerOffloadCredentialSecret")
READ_PRIORITIES = ("tiered-storage-first", "bookkeeper-first", "TIERED_STORAGE_FIRST", "BOOKKEEPER_FIRST")


@dataclass(frozen=True)
class OffloadPolicy:
    """What applies to one topic, with the level each value came from."""

    threshold_bytes: int  # < 0: size offload disabled
    threshold_seconds: int  # < 0: time offload disabled
    deletion_lag_ms: (
        int | None
    )  # -1: never delete the local copy; None: unset everywhere (never, as the ML layer)
    threshold_bytes_source: str
    threshold_seconds_source: str
    deletion_lag_source: str

    @property
    def auto_offload(self) -> bool:
        """Either threshold enables automatic offload (``maybeOffloadInBackground``)."""
        return self.threshold_bytes >= 0 or self.threshold_seconds >= 0

    def describe(self) -> str:
        size = f"{self.threshold_bytes} bytes" if self.threshold_bytes >= 0 else "off"
        time = f"{self.threshold_seconds} s" if self.threshold_seconds >= 0 else "off"
        if self.deletion_lag_ms is None:
            lag = "kept (no lag set)"
        elif self.deletion_lag_ms < 0:
            lag = "kept (lag -1)"
        else:
            lag = f"deleted {self.deletion_lag_ms} ms after offload"
        return f"size threshold {size}, time threshold {time}; local copy {lag}"


def broker_field(broker: Mapping[str, Any], field: str) -> int | None:
    """The broker's value of an offload field: its field name if set, else its conf-file name."""
    value = broker.get(field)
    if value is None:
        value = broker.get(BROKER_CONF_NAMES[field])
    return None if value is None else int(value)


def _integer(where: str, name: str, value: Any, minimum: int = -1) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: {name}={value!r} must be an integer >= {minimum} (or null)")


def validate_offload_policies(where: str, policies: Mapping[str, Any], *, namespace_level: bool) -> None:
    """Semantic checks of a namespace's or topic's offload policies (the JSON schema checks the shape)."""
    offload = policies.get("offload_policies")
    if offload is not None:
        for name in CREDENTIAL_FIELDS:
            if offload.get(name) is not None:
                raise InputError(
                    f"{where}: offload_policies.{name} is refused: credentials are never stored in policies; the "
                    "object tier takes them from the deployment's AWS environment (docs/deployment.md)"
                )
        for name in RULE_FIELDS:
            _integer(where, f"offload_policies.{name}", offload.get(name))
        priority = offload.get("managedLedgerOffloadedReadPriority")
        if priority is not None and priority not in READ_PRIORITIES:
            raise InputError(
                f"{where}: offload_policies.managedLedgerOffloadedReadPriority={priority!r} is not one of "
                "tiered-storage-first, bookkeeper-first"
            )
    legacy = [name for name in LEGACY_NAMESPACE_FIELDS if name in policies]
    if legacy and not namespace_level:
        raise InputError(
            f"{where}: {', '.join(legacy)} are namespace-level (legacy) policies; a topic sets offload_policies"
        )
    for name in legacy:
        _integer(where, name, policies.get(name))


def validate_broker_offload(broker: Mapping[str, Any]) -> None:
    for name in (*BROKER_CONF_NAMES.values(), THRESHOLD_BYTES, DELETION_LAG):
        _integer("broker settings", name, broker.get(name))


def _namespace_value(namespace: Mapping[str, Any], field: str) -> Any:
    value = (namespace.get("offload_policies") or {}).get(field)
    if value is not None:
        return value
    legacy = next(name for name, target in LEGACY_NAMESPACE_FIELDS.items() if target == field)
    old = namespace.get(legacy)
    # oldPoliciesCompatible: a legacy value counts only when set (-1 and null are "unset").
    return old if old is not None and old != -1 else None


def resolve_offload_policy(
    topic_name: str,
    topic: Mapping[str, Any],
    namespace_name: str,
    namespace: Mapping[str, Any],
    broker: Mapping[str, Any],
) -> OffloadPolicy:
    """Per field, topic > namespace > broker."""
    resolved: dict[str, tuple[int | None, str]] = {}
    for field in RULE_FIELDS:
        value = (topic.get("offload_policies") or {}).get(field)
        if value is not None:
            resolved[field] = (int(value), f"topic {topic_name}")
            continue
        value = _namespace_value(namespace, field)
        if value is not None:
            resolved[field] = (int(value), f"namespace {namespace_name}")
            continue
        resolved[field] = (broker_field(broker, field), "broker")
    bytes_, seconds, lag = (resolved[f] for f in RULE_FIELDS)
    return OffloadPolicy(
        threshold_bytes=-1 if bytes_[0] is None else bytes_[0],
        threshold_seconds=-1 if seconds[0] is None else seconds[0],
        deletion_lag_ms=lag[0],
        threshold_bytes_source=bytes_[1],
        threshold_seconds_source=seconds[1],
        deletion_lag_source=lag[1],
    )
