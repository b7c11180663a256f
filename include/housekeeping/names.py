"""Topic and namespace names, and their safe mapping onto the store's directory tree.

Names follow Pulsar's v2 form: ``persistent://tenant/namespace/local-name`` for topics and
``tenant/namespace`` for namespaces. Every name that reaches the file system goes through
:func:`topic_dir_parts`, which only ever yields plain path segments (no separators, no ``.``/``..``),
so a hostile name can never address a path outside the store root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from housekeeping.errors import InputError

# Pulsar's NamedEntity allows [-=:.\w] for tenants, namespaces and topic local names.
_SEGMENT = re.compile(r"^[A-Za-z0-9_\-=:.]+$")
_MAX_SEGMENT = 200
_PARTITION_SUFFIX = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d+)$")
SYSTEM_TOPIC_PREFIX = "__"


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
        """Pulsar's internal topics (``__change_events``, ``__transaction_buffer_snapshot``, ...)."""
        return self.local_name.startswith(SYSTEM_TOPIC_PREFIX)

    @property
    def partitioned_parent(self) -> str | None:
        """``persistent://t/n/orders`` for ``persistent://t/n/orders-partition-3``, else None."""
        match = _PARTITION_SUFFIX.match(self.local_name)
        if match is None:
            return None
        return f"persistent://{self.tenant}/{self.namespace}/{match.group('base')}"

    @property
    def partition_index(self) -> int | None:
        """3 for ``...-partition-3``, else None."""
        match = _PARTITION_SUFFIX.match(self.local_name)
        return None if match is None else int(match.group("index"))

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
