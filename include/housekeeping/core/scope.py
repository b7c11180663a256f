"""A run's scope: comma-separated shell globs, ``persistent://...`` matching topics, ``tenant/ns`` namespaces and
``tenant`` tenants (``*`` or nothing: every topic).

One grammar, :data:`SCOPE_PATTERN`, is both the trigger form's JSON schema (Airflow refuses a run whose scope does
not match, before the run exists) and what :func:`parse_scope` holds every item to, so the CLI, the console and the
DAGs refuse the same scopes: a glob over Pulsar's name characters (``[-=:.\\w]``) and the glob characters
``*?[]!``, at most three segments after ``persistent://`` and two without it, no segment ``.`` or ``..``."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName

# ASCII only, written so that Python's re and the browser's (ECMAScript) read it alike.
_GLOB_SEGMENT = r"(?!\.\.?(?:/|,|\s|$))[A-Za-z0-9_\-=:.*?\[\]!]+"
SCOPE_ITEM = (
    rf"(?:persistent://{_GLOB_SEGMENT}(?:/{_GLOB_SEGMENT}){{0,2}}|{_GLOB_SEGMENT}(?:/{_GLOB_SEGMENT})?)"
)
SCOPE_PATTERN = rf"^\s*(?:{SCOPE_ITEM}(?:\s*,\s*{SCOPE_ITEM})*)?\s*$"
_ITEM = re.compile(SCOPE_ITEM)


def parse_scope(scope: str | Sequence[str] | None) -> list[str]:
    """The scope's globs (``*`` and blanks dropped); an item outside the grammar is bad input named in full."""
    if scope is None:
        return []
    items = scope.split(",") if isinstance(scope, str) else list(scope)
    globs = [item.strip() for item in items if item and item.strip() and item.strip() != "*"]
    for item in globs:
        if not _ITEM.fullmatch(item):
            raise InputError(
                f"scope item {item!r} is not a tenant, tenant/namespace or persistent://tenant/namespace/topic "
                "glob (name characters [-=:.A-Za-z0-9_] and the glob characters *?[]!, no '.' or '..' segment)"
            )
    return globs


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
