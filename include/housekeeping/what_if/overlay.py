"""A policy overlay: policies in the manifest's own shape that replace the stored ones for a what-if
(``housekeeping.what_if.what_if``), resolved by the snapshot as if they had been applied."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BROKER_DEFAULTS, BrokerConfig

if TYPE_CHECKING:
    from housekeeping.store.store import Store

OVERLAY_KEYS = ("broker", "namespaces", "topics")


def _merged(stored: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = {**stored, **changes}
    return {key: value for key, value in merged.items() if value is not None}


@dataclass(frozen=True)
class PolicyOverlay:
    broker: Mapping[str, Any] = field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    topics: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # topic -> its policies

    @classmethod
    def from_document(cls, document: Any, source: str) -> PolicyOverlay:
        """The overlay's shape (its values are checked against the store by ``validate_against``)."""
        if not isinstance(document, dict):
            raise InputError(f"{source}: a policy overlay is a JSON object with {', '.join(OVERLAY_KEYS)}")
        unknown = sorted(set(document) - set(OVERLAY_KEYS))
        if unknown:
            raise InputError(
                f"{source}: unknown overlay key(s) {unknown}; an overlay has {', '.join(OVERLAY_KEYS)}"
            )
        broker = document.get("broker") or {}
        namespaces = document.get("namespaces") or {}
        topics = document.get("topics") or {}
        if not isinstance(broker, dict) or not isinstance(namespaces, dict) or not isinstance(topics, dict):
            raise InputError(f"{source}: broker, namespaces and topics must be JSON objects")
        for name in sorted(broker):
            if name not in BROKER_DEFAULTS:
                # Stricter than a manifest (which ignores unknown broker.conf names): a what-if that silently
                # ignores a misspelt setting would answer a question nobody asked.
                raise InputError(f"{source}: broker setting {name!r} is not one housekeeping reads")
        for name, policies in namespaces.items():
            if not isinstance(policies, dict):
                raise InputError(f"{source}: namespace {name}: policies must be a JSON object")
        topic_policies: dict[str, Mapping[str, Any]] = {}
        for name, body in topics.items():
            if (
                not isinstance(body, dict)
                or set(body) - {"policies"}
                or not isinstance(body.get("policies"), dict)
            ):
                raise InputError(
                    f"{source}: topic {name}: an overlay changes a topic's policies only "
                    '({"policies": {...}}), not its ledgers or cursors'
                )
            topic_policies[name] = body["policies"]
        return cls(dict(broker), {k: dict(v) for k, v in namespaces.items()}, topic_policies)

    @classmethod
    def read(cls, path: Path) -> PolicyOverlay:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"policy overlay {path} does not exist") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"policy overlay {path} is not valid JSON: {exc}") from None
        return cls.from_document(document, f"policy overlay {path}")

    def validate_against(self, store: Store, manifest: Mapping[str, Any] | None = None) -> None:
        """The rules ``load`` applies (the manifest schema, then Pulsar's semantic rules), to the store's
        metadata with this overlay in place: a bad overlay is refused naming the namespace or topic, before any
        plan runs. ``manifest``: the store's, already exported (``export_manifest``), to check several overlays.

        An overlay without broker settings changes policies only, so the check reads each topic's policies and
        one of its ledgers (the schema wants one) and leaves out the cursors, the other ledgers and the
        compacted ledger, which no policy rule reads and which the store already holds valid; a broker setting
        can bear on those (``topicCompactionRetainNullKey``), so with one the whole store is checked."""
        from housekeeping.store.manifest.export import export_manifest
        from housekeeping.store.manifest.load import content_from_manifest
        from housekeeping.store.manifest.validate import validate_content

        if manifest is None:
            manifest = export_manifest(store)
        manifest = {key: value for key, value in manifest.items() if key != "store"}
        if not self.broker:
            manifest["topics"] = {
                name: {"policies": body.get("policies", {}), "ledgers": body["ledgers"][-1:]}
                for name, body in manifest.get("topics", {}).items()
            }
        content, _ = content_from_manifest(self.applied_to(manifest), "the store's policies with the overlay")
        validate_content(content)

    def namespace_policies(self, namespace: str, stored: Mapping[str, Any]) -> dict[str, Any]:
        return _merged(stored, self.namespaces.get(namespace, {}))

    def topic_policies(self, topic: str, stored: Mapping[str, Any]) -> dict[str, Any]:
        return _merged(stored, self.topics.get(topic, {}))

    def broker_config(self, stored: BrokerConfig) -> BrokerConfig:
        return BrokerConfig.from_layers(
            ("stored broker settings", stored.settings), ("policy overlay", self.broker)
        )

    def applied_to(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """The manifest (``inspect``'s shape) with the overlay's policies in place: what ``load`` would get if
        the change were made. Names a namespace or topic the store does not have."""
        changed = copy.deepcopy(dict(manifest))
        for name in self.namespaces:
            if name not in changed.get("namespaces", {}):
                raise InputError(f"policy overlay: namespace {name} does not exist in the store")
        for name in self.topics:
            if name not in changed.get("topics", {}):
                raise InputError(f"policy overlay: topic {name} does not exist in the store")
        changed["broker"] = _merged(changed.get("broker", {}), self.broker)
        for name in self.namespaces:
            changed["namespaces"][name] = self.namespace_policies(name, changed["namespaces"][name])
        for name in self.topics:
            body = changed["topics"][name]
            body["policies"] = self.topic_policies(name, body.get("policies", {}))
        return changed
