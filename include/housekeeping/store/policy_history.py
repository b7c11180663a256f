"""The store's policy history: which policies each namespace and topic had at a time (docs/semantics.md §12.4).

It is read from the journal, where every change is written in the transaction that makes it: ``load`` records the
manifest's policies as of its load (mechanism ``load``, action ``load-policies``: the broker settings, every
namespace's policies and every topic's own), and every change through the admin paths records each changed policy
before and after (mechanism ``admin``, action ``set-policies``; ``housekeeping.store.admin``). A ``load`` replaces
the journal with the store, so a store's history begins at its last load. Before that first record, the policies
are the ones the first record shows (the history cannot know older ones, and says so: ``begins_ms``).
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, or_, select

from housekeeping.store import metadata_schema as t
from housekeeping.store.journal import journal

if TYPE_CHECKING:
    from housekeeping.store.manifest.model import StoreContent
    from housekeeping.store.store import Store

LOAD = "load"
LOAD_POLICIES = "load-policies"
SET_POLICIES = "set-policies"


def journal_loaded_policies(
    conn: Any, content: StoreContent, load_id: str, at_ms: int, source: str | None
) -> None:
    """The loaded store's policies as one journal row, in the load's transaction."""
    detail = {
        "manifest": source,
        "broker": dict(content.broker),
        "namespaces": {name: dict(policies) for name, policies in content.namespaces.items()},
        "topics": {topic.name: dict(topic.policies) for topic in content.topics if topic.policies},
    }
    journal(
        conn,
        run_id=f"{LOAD}-{load_id[:12]}",
        mechanism=LOAD,
        topic=None,
        action=LOAD_POLICIES,
        status="applied",
        detail=detail,
        as_of_ms=at_ms,
    )


@dataclass
class PolicyHistory:
    """Each namespace's and topic's own policies over time: per target, its changes ``(at_ms, policies)`` in
    order; ``begins_ms`` the first record (None: the journal holds none)."""

    changes: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    begins_ms: int | None = None

    def at(self, target: str, at_ms: int) -> dict[str, Any]:
        """The target's own policies in force at ``at_ms``: its last change at or before then, or before its first
        change the policies that change replaced ({} for a target the history never names)."""
        changes = self.changes.get(target)
        if not changes:
            return {}
        index = bisect.bisect_right([moment for moment, _ in changes], at_ms) - 1
        return dict(changes[max(index, 0)][1]) if index >= 0 else dict(changes[0][1])

    def targets(self) -> list[str]:
        return sorted(self.changes)


def read_policy_history(store: Store, until_ms: int | None = None) -> PolicyHistory:
    """The history from the journal, its changes up to ``until_ms`` (default: all)."""
    from housekeeping.store.store import read_transaction

    j = t.journal.c
    query = (
        select(j.mechanism, j.action, j.detail, j.as_of_ms)
        .where(
            or_(
                and_(j.mechanism == LOAD, j.action == LOAD_POLICIES),
                and_(j.mechanism == "admin", j.action == SET_POLICIES),
            )
        )
        .order_by(j.as_of_ms, j.id)
    )
    if until_ms is not None:
        query = query.where(j.as_of_ms <= until_ms)
    with read_transaction(store.engine) as conn:
        rows = conn.execute(query).all()
    return history_of(rows)


def history_of(rows: list[Any]) -> PolicyHistory:
    """The history from journal rows (``mechanism``, ``action``, ``detail``, ``as_of_ms``), oldest first."""
    history = PolicyHistory(defaultdict(list))
    current: dict[str, dict[str, Any]] = {}
    for row in rows:
        detail = json.loads(row.detail)
        if history.begins_ms is None:
            history.begins_ms = int(row.as_of_ms)
        if row.action == LOAD_POLICIES:
            loaded = {**detail.get("namespaces", {}), **detail.get("topics", {})}
            for target in set(current) | set(loaded):  # a load replaces every target's policies
                current[target] = dict(loaded.get(target, {}))
                history.changes[target].append((int(row.as_of_ms), dict(current[target])))
            continue
        target = detail["target"]
        if target not in current and "previous" in detail:
            # The first record of a target no load named: what the change replaced was in force before it.
            current[target] = dict(detail["previous"])
            history.changes[target].append((int(row.as_of_ms) - 1, dict(current[target])))
        if "policies" in detail:
            updated = dict(detail["policies"])
        else:  # a change journaled before the whole policies were: its changed ones on the last known
            updated = dict(current.get(target, {}))
            for key, change in detail["changes"].items():
                if change["after"] is None:
                    updated.pop(key, None)
                else:
                    updated[key] = change["after"]
        current[target] = updated
        history.changes[target].append((int(row.as_of_ms), dict(updated)))
    history.changes = dict(history.changes)
    return history
