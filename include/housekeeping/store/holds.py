"""Holds: a namespace or topic that no deleting or cursor-moving action may touch (``housekeeping hold``).

As Hudi savepoints and Iceberg tags protect data from cleaning, a hold protects everything it covers from
ledger trim, message expiry, backlog-quota eviction, inactive-topic deletion, compaction rewrites and purge,
until it is removed. It is enforced three times, each on its own reading of the holds:

- the snapshot records the holds and marks each held topic (``heldBy``), and every planner keeps a held topic's
  rows with kind ``held`` (so the report says why nothing happened to it);
- the gate re-derives from the raw holds which planned actions a hold covers and rejects the plan if any (which
  actions a hold forbids is a trait of each action kind, ``ActionKind.held_forbidden``);
- apply and purge read the holds again inside each topic's transaction, so a hold added after the snapshot
  still wins (the topic is skipped and journaled as ``skipped_held``).

Matching: a namespace hold ``tenant/ns`` covers every topic of that namespace; a topic hold covers that topic
and, for a partitioned topic's name, each of its partitions ``<name>-partition-<i>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select, text

from housekeeping.core.errors import InputError
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.timeutil import wall_clock_ms
from housekeeping.store import metadata_schema as t

if TYPE_CHECKING:
    from housekeeping.store.store import Store


@dataclass(frozen=True)
class Hold:
    target: str
    scope: str  # namespace | topic
    reason: str
    created_by: str
    created_at_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "scope": self.scope,
            "reason": self.reason,
            "createdBy": self.created_by,
            "createdAtMs": self.created_at_ms,
        }


def parse_target(text: str) -> tuple[str, str]:
    """(canonical target, scope) for a namespace ``tenant/ns`` or a topic ``persistent://...``."""
    if text.startswith("persistent://"):
        return str(TopicName.parse(text)), "topic"
    if "://" in text:
        raise InputError(
            f"hold target {text!r}: only persistent:// topics and tenant/namespace names are held"
        )
    return str(NamespaceName.parse(text)), "namespace"


def covering_targets(name: str) -> list[str]:
    """Every hold target that would cover ``name`` (a topic, or a partitioned topic's own name), most specific
    first: the topic, its partitioned parent, its namespace."""
    topic = TopicName.parse(name)
    return [t for t in (str(topic), topic.partitioned_parent, str(topic.namespace_name)) if t is not None]


def hold_for(name: str, holds: dict[str, Hold]) -> Hold | None:
    """The hold covering ``name`` (the most specific one)."""
    return next((holds[target] for target in covering_targets(name) if target in holds), None)


def describe(hold: Hold) -> str:
    return f"held by {hold.scope} hold on {hold.target} ({hold.created_by}): {hold.reason}"


def _row_to_hold(row: Any) -> Hold:
    return Hold(row.target, row.scope, row.reason, row.created_by, int(row.created_at_ms))


def load_holds(conn: Any) -> dict[str, Hold]:
    return {row.target: _row_to_hold(row) for row in conn.execute(select(t.holds))}


def holds_for_this_transaction(conn: Any) -> dict[str, Hold]:
    """Every hold, read in the caller's write transaction and kept as they are until it commits: on PostgreSQL the
    holds table is share-locked, so a hold being placed waits for the commit (on SQLite the write transaction
    already excludes other writers). Apply reads them once per batch of topics instead of per topic
    (:func:`current_hold`), with the same guarantee: no topic of the batch is changed under a hold committed
    before its change commits."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE holds IN SHARE MODE"))
    return load_holds(conn)


def current_hold(conn: Any, name: str) -> Hold | None:
    """The hold covering ``name`` now, read in the caller's transaction (apply's and purge's re-check)."""
    row = conn.execute(_HOLDS_COVERING, {"targets": covering_targets(name)}).all()
    return hold_for(name, {r.target: _row_to_hold(r) for r in row})


# Compiled once (an expanding IN), not built per topic: apply re-checks the holds of every topic it changes.
_HOLDS_COVERING = select(t.holds).where(t.holds.c.target.in_(bindparam("targets", expanding=True)))


def target_exists(conn: Any, scope: str, canonical: str) -> bool:
    """Whether the store has the namespace (scope ``namespace``) or the topic or partitioned topic named."""
    if scope == "namespace":
        return (
            conn.execute(select(t.namespaces.c.name).where(t.namespaces.c.name == canonical)).first()
            is not None
        )
    return (
        conn.execute(select(t.topics.c.name).where(t.topics.c.name == canonical)).first()
        or conn.execute(
            select(t.partitioned_topics.c.name).where(t.partitioned_topics.c.name == canonical)
        ).first()
    ) is not None


def add_hold(conn: Any, target: str, *, reason: str, actor: str) -> Hold:
    canonical, scope = parse_target(target)
    if not reason.strip():
        raise InputError(f"hold on {canonical}: give a reason (--reason) so others know why it is held")
    if not target_exists(conn, scope, canonical):
        raise InputError(
            f"hold on namespace {canonical}: no such namespace in the store"
            if scope == "namespace"
            else f"hold on topic {canonical}: no such topic or partitioned topic in the store"
        )
    existing = conn.execute(select(t.holds).where(t.holds.c.target == canonical)).first()
    if existing is not None:
        raise InputError(f"{canonical} is already held ({existing.created_by}: {existing.reason})")
    hold = Hold(canonical, scope, reason.strip(), actor, wall_clock_ms())  # when it was placed, for people
    conn.execute(
        t.holds.insert().values(
            target=hold.target,
            scope=hold.scope,
            reason=hold.reason,
            created_by=hold.created_by,
            created_at_ms=hold.created_at_ms,
        )
    )
    return hold


def remove_hold(conn: Any, target: str) -> Hold:
    canonical, _ = parse_target(target)
    row = conn.execute(select(t.holds).where(t.holds.c.target == canonical)).first()
    if row is None:
        raise InputError(f"{canonical} is not held")
    conn.execute(t.holds.delete().where(t.holds.c.target == canonical))
    return _row_to_hold(row)


def place_hold(store: Store, target: str, *, reason: str, actor: str) -> Hold:
    """Hold ``target`` and journal it with ``actor``, in one transaction: what ``housekeeping hold add`` and the
    console's ``POST holds`` do."""
    from housekeeping.store.store import write_transaction

    with write_transaction(store.engine) as conn:
        hold = add_hold(conn, target, reason=reason, actor=actor)
        _journal_hold(conn, hold, "hold_added", actor)
    return hold


def lift_hold(store: Store, target: str, *, actor: str) -> Hold:
    """Remove the hold on ``target`` and journal it with ``actor``: ``housekeeping hold remove``, ``DELETE holds``."""
    from housekeeping.store.store import write_transaction

    with write_transaction(store.engine) as conn:
        hold = remove_hold(conn, target)
        _journal_hold(conn, hold, "hold_removed", actor)
    return hold


def list_holds(store: Store) -> list[dict[str, Any]]:
    """The holds in force, by target."""
    from housekeeping.store.store import read_transaction

    with read_transaction(store.engine) as conn:
        return [hold.to_json() for _, hold in sorted(load_holds(conn).items())]


def _journal_hold(conn: Any, hold: Hold, status: str, actor: str) -> None:
    import uuid

    from housekeeping.store.journal import journal

    # A person's action: its logical time is when they placed or removed the hold.
    journal(
        conn,
        run_id=f"hold-{uuid.uuid4().hex[:8]}",
        mechanism="hold",
        topic=hold.target if hold.scope == "topic" else None,
        action="hold",
        status=status,
        detail={**hold.to_json(), "why": hold.reason},
        as_of_ms=hold.created_at_ms if status == "hold_added" else wall_clock_ms(),
        actor=actor,
    )
