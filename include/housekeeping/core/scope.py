"""A run's scope: comma-separated shell globs, ``persistent://...`` matching topics, ``tenant/ns`` namespaces and
``tenant`` tenants (``*`` or nothing: every topic)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from housekeeping.core.names import TopicName


def parse_scope(scope: str | Sequence[str] | None) -> list[str]:
    if scope is None:
        return []
    items = scope.split(",") if isinstance(scope, str) else list(scope)
    return [item.strip() for item in items if item and item.strip() and item.strip() != "*"]


def in_scope(topic: str, patterns: Sequence[str]) -> bool:
    """Whether ``topic`` matches one of the patterns (none: every topic does)."""
    if not patterns:
        return True
    parsed = TopicName.parse(topic)
    for pattern in patterns:
        if "://" in pattern:
            subject = topic
        elif "/" in pattern:
            subject = f"{parsed.tenant}/{parsed.namespace}"
        else:
            subject = parsed.tenant
        if fnmatch.fnmatchcase(subject, pattern):
            return True
    return False
