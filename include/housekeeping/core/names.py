"""Topic and namespace names, and their safe mapping onto the store's directory tree.

Names follow Pulsar's v2 form: ``persistent://tenant/namespace/local-name`` for topics and
``tenant/namespace`` for namespaces. Every name that reaches the file system goes through
:func:`topic_dir_parts`, which only ever yields plain path segments (no separators, no ``.``/``..``),
so a hostile name can never address a path outside the store root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from housekeeping.core.errors import InputError

# Pulsar's NamedEntity allows [-=:.\w] for tenants, namespaces and topic local names.
_SEGMENT = re.compile(r"^[A-Za-z0-9_\-=:.]+$")
_MAX_SEGMENT = 200
# Pulsar's Compactor.COMPACTION_SUBSCRIPTION: the durable cursor topic compaction reads with; its mark-delete is
# the compaction horizon.
COMPACTION_SUBSCRIPTION = "__compaction"
# Pulsar's TopicName.PARTITIONED_TOPIC_SUFFIX; a partition index is a Java int.
PARTITION_SUFFIX = "-partition-"
_MAX_PARTITION_INDEX = 2**31 - 1

# Pulsar's system topics, as the broker decides them (apache/pulsar master):
# - SystemTopicNames#isSystemTopic (pulsar-common .../naming/SystemTopicNames.java), on the partitioned topic's
#   name (partition suffix stripped first): the local name is one of EVENTS_TOPIC_NAMES
#   (isEventSystemTopic), or the name is a transaction-internal one (isTransactionInternalName: starts with
#   the coordinator-assign or coordinator-log topic, or ends with the pending-ack suffix).
# - BrokerService#isSystemTopic adds NamespaceService#isSystemServiceNamespace: the system namespace
#   pulsar/system, the heartbeat namespaces and the SLA-monitor namespace. Only pulsar/system and the v2
#   heartbeat namespace pulsar/<host>:<port> have the tenant/namespace form names have here; the v1 heartbeat
#   (pulsar/<cluster>/<host>:<port>) and SLA (sla-monitor/<cluster>/<host>:<port>) names have three segments.
# Nothing else is a system topic: a user topic named __ledger_copy or __change_events7 is an ordinary topic.
SYSTEM_NAMESPACE = "pulsar/system"
EVENTS_TOPIC_NAMES = frozenset(
    {
        "__change_events",
        "__transaction_buffer_snapshot",
        "__transaction_buffer_snapshot_segments",
        "__transaction_buffer_snapshot_indexes",
    }
)
TRANSACTION_COORDINATOR_ASSIGN = f"persistent://{SYSTEM_NAMESPACE}/transaction_coordinator_assign"
TRANSACTION_COORDINATOR_LOG = f"persistent://{SYSTEM_NAMESPACE}/__transaction_log_"
PENDING_ACK_STORE_SUFFIX = "__transaction_pending_ack"
# NamespaceService.HEARTBEAT_NAMESPACE_PATTERN_V2, matched whole as Java's Matcher#matches does.
_HEARTBEAT_NAMESPACE_V2 = re.compile(r"pulsar/[^:]+:[0-9]+")


def partition_index(name: str) -> int | None:
    """Pulsar ``TopicName#getPartitionIndex``: what follows the last ``-partition-`` read as a Java int, only
    when it is written canonically (``-partition-01`` and ``-partition--1`` are not partitions); else None."""
    _, suffix, index = name.rpartition(PARTITION_SUFFIX)
    if not suffix or not index.isascii() or not index.isdigit():
        return None
    value = int(index)
    if str(value) != index or value > _MAX_PARTITION_INDEX:
        return None
    return value


def partitioned_topic_name(name: str) -> str:
    """Pulsar ``TopicName#getPartitionedTopicName``: the name without its partition suffix (itself when it is
    not a partition)."""
    return name[: name.rindex(PARTITION_SUFFIX)] if partition_index(name) is not None else name


def is_system_service_namespace(namespace: str) -> bool:
    """Pulsar ``NamespaceService#isSystemServiceNamespace`` for tenant/namespace names."""
    return namespace == SYSTEM_NAMESPACE or _HEARTBEAT_NAMESPACE_V2.fullmatch(namespace) is not None


def is_system_topic_name(topic: str) -> bool:
    """Pulsar ``SystemTopicNames#isSystemTopic``: decides retention (0, 0) for a topic without a topic-level
    retention (``BrokerService#getManagedLedgerConfig``)."""
    base = partitioned_topic_name(topic)
    return (
        base.rsplit("/", 1)[-1] in EVENTS_TOPIC_NAMES
        or base.startswith(TRANSACTION_COORDINATOR_ASSIGN)
        or base.startswith(TRANSACTION_COORDINATOR_LOG)
        or base.endswith(PENDING_ACK_STORE_SUFFIX)
    )


def is_system_topic(topic: str) -> bool:
    """Pulsar ``BrokerService#isSystemTopic``: the broker loads such a topic as a ``SystemTopic``, whose message
    expiry and inactivity GC do nothing and whose backlog quota is never exceeded."""
    namespace = topic.removeprefix("persistent://").rsplit("/", 1)[0]
    return is_system_service_namespace(namespace) or is_system_topic_name(topic)


def _check_segment(kind: str, value: str, whole: str) -> None:
    if not value:
        raise InputError(f"{kind} of {whole!r} is empty")
    if len(value) > _MAX_SEGMENT:
        raise InputError(f"{kind} of {whole[:80]!r}... is longer than {_MAX_SEGMENT} characters")
    if value in (".", "..") or not _SEGMENT.match(value):
        raise InputError(
            f"{kind} {value!r} in {whole!r} is not a valid name: use letters, digits and -=:._ only"
        )


@dataclass(frozen=True, order=True)
class NamespaceName:
    tenant: str
    namespace: str

    @classmethod
    def parse(cls, text: str) -> NamespaceName:
        parts = text.split("/")
        if len(parts) != 2:
            raise InputError(f"namespace {text!r} must have the form tenant/namespace")
        _check_segment("tenant", parts[0], text)
        _check_segment("namespace", parts[1], text)
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True, order=True)
class TopicName:
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, text: str) -> TopicName:
        prefix = "persistent://"
        if not text.startswith(prefix):
            raise InputError(
                f"topic {text!r} must be a persistent topic name persistent://tenant/namespace/topic"
            )
        parts = text[len(prefix) :].split("/")
        if len(parts) != 3:
            raise InputError(f"topic {text!r} must have the form persistent://tenant/namespace/topic")
        _check_segment("tenant", parts[0], text)
        _check_segment("namespace", parts[1], text)
        _check_segment("topic name", parts[2], text)
        return cls(*parts)

    @property
    def namespace_name(self) -> NamespaceName:
        return NamespaceName(self.tenant, self.namespace)

    @property
    def is_system_topic(self) -> bool:
        """A Pulsar system topic for message expiry, backlog quota and GC (``BrokerService#isSystemTopic``)."""
        return is_system_topic(str(self))

    @property
    def is_system_topic_name(self) -> bool:
        """A Pulsar system topic for the retention default (``SystemTopicNames#isSystemTopic``)."""
        return is_system_topic_name(str(self))

    @property
    def partitioned_parent(self) -> str | None:
        """``persistent://t/n/orders`` for ``persistent://t/n/orders-partition-3``, else None."""
        return None if self.partition_index is None else partitioned_topic_name(str(self))

    @property
    def partition_index(self) -> int | None:
        """3 for ``...-partition-3``, else None (Pulsar's rule: :func:`partition_index`)."""
        # The suffix can only be in the local name: no other segment reaches the last '-partition-'.
        return partition_index(self.local_name)

    def __str__(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.local_name}"


def topic_dir_parts(topic: TopicName) -> tuple[str, str, str]:
    """Directory segments for a topic. Validation already excludes separators; quoting is a second
    line of defence so that even a name that slipped past validation cannot contain '/' or '\\'."""

    def encode(segment: str) -> str:
        encoded = quote(segment, safe="-_=:")
        # quote() leaves '.' alone; a segment made only of dots would be a path traversal.
        return encoded.replace(".", "%2E") if set(encoded) <= {"."} else encoded

    return (encode(topic.tenant), encode(topic.namespace), encode(topic.local_name))


def topic_of_dir_parts(tenant: str, namespace: str, local: str) -> str | None:
    """The topic whose directory segments (:func:`topic_dir_parts`) these are; None when they are not the encoding
    of a valid topic name (a directory no topic of this store could have written)."""
    try:
        topic = TopicName(unquote(tenant), unquote(namespace), unquote(local))
        parsed = TopicName.parse(str(topic))
    except InputError:
        return None
    return str(parsed) if topic_dir_parts(parsed) == (tenant, namespace, local) else None
