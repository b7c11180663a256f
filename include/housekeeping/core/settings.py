"""Deployment settings, read from the environment when a task runs (never at DAG-parse time).

| variable                          | default                          | meaning                                     |
|-----------------------------------|----------------------------------|---------------------------------------------|
| HOUSEKEEPING_STORE_ROOT           | (required for the DAGs)          | the store's root directory                  |
| HOUSEKEEPING_METADATA_URL         | sqlite:///<store>/metadata.db    | SQLAlchemy URL of the metadata database     |
| HOUSEKEEPING_BROKER_CONF          | (none)                           | a broker.conf whose settings apply          |
| HOUSEKEEPING_PURGE_GRACE_SECONDS  | 86400                            | pending deletions wait this long (logical)  |
| HOUSEKEEPING_MAX_DELETED_SHARE    | 0.9                              | blast radius: max share of a namespace's    |
|                                   |                                  | stored bytes one run may delete             |
| HOUSEKEEPING_SPARK_CONN_ID        | spark_default                    | Airflow connection of the Spark steps:      |
|                                   |                                  | spark (spark-submit) or spark_connect       |
| HOUSEKEEPING_SPARK_MASTER         | local[2]                         | master for the CLI's in-process Spark       |
|                                   |                                  | (sc://host:port: a Spark Connect server)    |
| HOUSEKEEPING_DELETION_LAG_OBJECTIVES | {"*": 21600}                  | deletion-lag objective per namespace, in    |
|                                   |                                  | seconds: JSON, keys a namespace, a glob     |
|                                   |                                  | (tenant/*) or "*" (docs/metrics.md)         |
| HOUSEKEEPING_APPROVAL_BYTES       | (none)                           | a plan deleting more bytes waits for a      |
|                                   |                                  | person's approval (docs/deployment.md)      |
| HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE | (none)                       | ... more than this share of a namespace's   |
|                                   |                                  | stored bytes (0-1)                          |
| HOUSEKEEPING_APPROVAL_TOPICS      | (none)                           | ... deleting more topics                    |
| HOUSEKEEPING_APPROVAL_CURSORS     | (none)                           | ... moving more cursors                     |
| HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS | 86400                        | unanswered that long: rejected              |
| HOUSEKEEPING_APPROVAL_FIRST_APPLY | false                            | a mechanism's first apply on a store that   |
|                                   |                                  | changes anything waits for a person         |
| HOUSEKEEPING_OFFLOAD_URL          | (none: no offloader)             | the object tier: s3://bucket/prefix or a    |
|                                   |                                  | directory (housekeeping.store.tier)         |
| HOUSEKEEPING_OFFLOAD_ENDPOINT_URL | (AWS)                            | the tier's S3 endpoint (MinIO, a test       |
|                                   |                                  | server); credentials: the AWS chain         |

A mechanism's own settings (GC's HOUSEKEEPING_MAX_DELETED_TOPIC_SHARE, key erasure's
HOUSEKEEPING_ERASURE_GRACE_SECONDS) are :class:`Setting` declarations in its package; docs/deployment.md lists
every one.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from housekeeping.core.errors import InputError


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return default if raw in (None, "") else float(raw)
    except ValueError:
        raise InputError(f"environment variable {name}={raw!r} is not a number") from None


def _optional(name: str, kind: type) -> int | float | None:
    """An optional threshold: unset or empty is None (no threshold)."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return None
    try:
        return kind(raw)
    except ValueError:
        raise InputError(
            f"environment variable {name}={raw!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None


def _bool(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in ("true", "1", "yes", "on"):
        return True
    if raw in ("false", "0", "no", "off"):
        return False
    raise InputError(f"environment variable {name}={raw!r} is not true or false")


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    try:
        return default if raw in (None, "") else int(raw)
    except ValueError:
        raise InputError(f"environment variable {name}={raw!r} is not an integer") from None


# The environment variables the library reads, by the Settings field each one sets (one definition: the compose
# file's settings are checked against it).
ENV_FIELDS = {
    "HOUSEKEEPING_STORE_ROOT": "store_root",
    "HOUSEKEEPING_METADATA_URL": "metadata_url",
    "HOUSEKEEPING_PURGE_GRACE_SECONDS": "purge_grace_seconds",
    "HOUSEKEEPING_MAX_DELETED_SHARE": "max_deleted_share",
    "HOUSEKEEPING_SPARK_CONN_ID": "spark_conn_id",
    "HOUSEKEEPING_SPARK_MASTER": "spark_master",
    "HOUSEKEEPING_DELETION_LAG_OBJECTIVES": "deletion_lag_objectives",
    "HOUSEKEEPING_APPROVAL_BYTES": "approval_bytes",
    "HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE": "approval_namespace_share",
    "HOUSEKEEPING_APPROVAL_TOPICS": "approval_topics",
    "HOUSEKEEPING_APPROVAL_CURSORS": "approval_cursors",
    "HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS": "approval_timeout_seconds",
    "HOUSEKEEPING_APPROVAL_FIRST_APPLY": "approval_first_apply",
    "HOUSEKEEPING_CAPACITY_BUDGETS": "capacity_budgets",
}
# Hourly trim and purge keep deletable data waiting under about two hours; six leaves room for a slow run.
DEFAULT_DELETION_LAG_OBJECTIVES = {"*": 21600}


def parse_lag_objectives(
    text: str | None, where: str = "HOUSEKEEPING_DELETION_LAG_OBJECTIVES"
) -> dict[str, int]:
    """``{"<namespace or glob or *>": seconds}``; unset or empty: the default."""
    if text in (None, ""):
        return dict(DEFAULT_DELETION_LAG_OBJECTIVES)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InputError(f"{where} must be a JSON object of namespace (or glob, or *) -> seconds")
    for key, seconds in value.items():
        if key != "*" and key.count("/") != 1:
            raise InputError(f"{where}: {key!r} is not a namespace (tenant/namespace), a glob of one, or *")
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
            raise InputError(
                f"{where}: the objective of {key} must be a whole number of seconds > 0, got {seconds!r}"
            )
    return value


def parse_capacity_budgets(
    text: str | None, where: str = "HOUSEKEEPING_CAPACITY_BUDGETS"
) -> dict[str, dict[str, int]]:
    """``{"<tenant or *>": {"local": bytes, "tier": bytes}}`` (either tier may be left out); unset: none."""
    if text in (None, ""):
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InputError(
            f'{where} must be a JSON object of tenant (or *) -> {{"local": bytes, "tier": bytes}}'
        )
    for tenant, budget in value.items():
        if not isinstance(budget, dict) or not budget or set(budget) - {"local", "tier"}:
            raise InputError(
                f'{where}: the budget of {tenant!r} must be an object with "local" and/or "tier"'
            )
        for tier, size in budget.items():
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise InputError(
                    f"{where}: {tenant}.{tier} must be a whole number of bytes > 0, got {size!r}"
                )
    return value


def lag_objective(namespace: str, objectives: Mapping[str, int]) -> int | None:
    """The objective of ``namespace``: its own entry, else the most specific matching glob, else ``*``."""
    if namespace in objectives:
        return objectives[namespace]
    globs = [k for k in objectives if k != "*" and fnmatch.fnmatchcase(namespace, k)]
    if globs:
        return objectives[max(globs, key=lambda k: (len(k) - k.count("*"), k))]
    return objectives.get("*")


@dataclass(frozen=True)
class Setting:
    """One deployment setting a mechanism reads on its own (its package declares it): the environment variable,
    its type (int or float), its default, and the bounds a value must keep. Read when a task runs."""

    env: str
    kind: type
    default: int | float
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""

    def read(self) -> int | float:
        value = (_int if self.kind is int else _float)(self.env, self.default)  # type: ignore[arg-type]
        if (self.minimum is not None and value < self.minimum) or (
            self.maximum is not None and value > self.maximum
        ):
            bounds = (
                f">= {self.minimum:g}"
                if self.maximum is None
                else f"between {self.minimum:g} and {self.maximum:g}"
            )
            raise InputError(f"{self.env} must be {bounds}, got {value}")
        return value


SPARK_CONN_ENV = "HOUSEKEEPING_SPARK_CONN_ID"


def spark_conn_id() -> str:
    """The Airflow connection of the DAGs' Spark steps, of type spark (spark-submit) or spark_connect (read alone:
    an operator needs it when the DAG is built)."""
    return os.environ.get(SPARK_CONN_ENV) or "spark_default"


@dataclass(frozen=True)
class Settings:
    store_root: str | None
    metadata_url: str | None
    purge_grace_seconds: int
    max_deleted_share: float
    spark_conn_id: str
    spark_master: str
    deletion_lag_objectives: dict[str, int] = field(
        default_factory=lambda: dict(DEFAULT_DELETION_LAG_OBJECTIVES)
    )
    # Approval thresholds (None: no threshold); housekeeping.engine.approval.
    approval_bytes: int | None = None
    approval_namespace_share: float | None = None
    approval_topics: int | None = None
    approval_cursors: int | None = None
    approval_timeout_seconds: int = 86400
    # A mechanism's first apply on a store (one that changes anything) waits for a person.
    approval_first_apply: bool = False
    # Physical bytes per tenant and tier the capacity forecast measures against (housekeeping.observe.capacity).
    capacity_budgets: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> Settings:
        settings = cls(
            store_root=os.environ.get("HOUSEKEEPING_STORE_ROOT") or None,
            metadata_url=os.environ.get("HOUSEKEEPING_METADATA_URL") or None,
            purge_grace_seconds=_int("HOUSEKEEPING_PURGE_GRACE_SECONDS", 86400),
            max_deleted_share=_float("HOUSEKEEPING_MAX_DELETED_SHARE", 0.9),
            spark_conn_id=spark_conn_id(),
            spark_master=os.environ.get("HOUSEKEEPING_SPARK_MASTER", "local[2]"),
            deletion_lag_objectives=parse_lag_objectives(
                os.environ.get("HOUSEKEEPING_DELETION_LAG_OBJECTIVES")
            ),
            approval_bytes=_optional("HOUSEKEEPING_APPROVAL_BYTES", int),
            approval_namespace_share=_optional("HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE", float),
            approval_topics=_optional("HOUSEKEEPING_APPROVAL_TOPICS", int),
            approval_cursors=_optional("HOUSEKEEPING_APPROVAL_CURSORS", int),
            approval_timeout_seconds=_int("HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS", 86400),
            approval_first_apply=_bool("HOUSEKEEPING_APPROVAL_FIRST_APPLY", False),
            capacity_budgets=parse_capacity_budgets(os.environ.get("HOUSEKEEPING_CAPACITY_BUDGETS")),
        )
        if settings.purge_grace_seconds < 0:
            raise InputError("HOUSEKEEPING_PURGE_GRACE_SECONDS must be >= 0")
        if not 0.0 <= settings.max_deleted_share <= 1.0:
            raise InputError("HOUSEKEEPING_MAX_DELETED_SHARE must be between 0 and 1")
        for name in ("approval_bytes", "approval_topics", "approval_cursors"):
            if (getattr(settings, name) or 0) < 0:
                raise InputError(f"HOUSEKEEPING_{name.upper()} must be >= 0")
        if (
            settings.approval_namespace_share is not None
            and not 0.0 <= settings.approval_namespace_share <= 1.0
        ):
            raise InputError("HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE must be between 0 and 1")
        if settings.approval_timeout_seconds <= 0:
            raise InputError("HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS must be > 0")
        return settings
