"""The soak's independent checker: what the load generator's own log (``housekeeping simulate --log``) says was
published and acknowledged, against what the store holds now. It reads the store's tables and entry files directly
and re-derives what it needs (the retention in force at a moment, from the journaled policy history) by its own
rules, never through housekeeping's; docs/RELIABILITY.md, "The soak", lists the invariants.

- ``unacknowledged_lost``: every entry the log has after a durable subscription's mark-delete is still stored, with
  its payload's checksum (an entry expiry or a backlog eviction skipped is behind the mark-delete they moved).
- ``entry_damaged``: an entry still stored whose payload is not the one published at that position.
- ``cursor_in_deleted_ledger``: no durable cursor's next entry lies in a ledger the topic no longer has.
- ``deletion_not_restorable``: every ledger the log saw that the topic no longer has is in the pending-deletion log
  (pending with its files, or purged), journaled by the run that deleted it; a topic gone is in the deleted-topics
  log, journaled.
- ``retention_violated``: no ledger deleted by trim that the retention in force when the deletion was applied kept:
  neither past its time nor deleted while the topic held more than its size (judged against an upper bound of what
  the topic held then, so a size deletion is called wrong only when it surely was).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction

Position = tuple[int, int]
# A policy change journaled this close before an apply may or may not have committed before the apply read it: both
# the policy before and after it are taken as possibly in force.
POLICY_RACE_MS = 5_000
# Pulsar's broker defaults: no retention beyond the slowest durable cursor.
BROKER_RETENTION = (0, 0)


@dataclass(frozen=True)
class Violation:
    invariant: str
    topic: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.topic}: {self.detail}"


def _position(text: str) -> Position:
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The generator's events; a last line still being written is not an event yet."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return events


@dataclass
class _Logged:
    entries: dict[str, dict[Position, str]]  # topic -> position -> checksum
    ledgers: dict[str, set[int]]  # every ledger the log saw per topic (published into or rolled)
    deleted_topics: set[str]  # deleted by the generator itself (an operator's delete)
    opened: dict[tuple[str, int], int]  # (topic, ledger) -> when a roll opened it


def _logged(events: list[dict[str, Any]]) -> _Logged:
    logged = _Logged(defaultdict(dict), defaultdict(set), set(), {})
    for event in events:
        kind = event["event"]
        if kind == "publish":
            for text, crc in event["entries"]:
                position = _position(text)
                logged.entries[event["topic"]][position] = crc
                logged.ledgers[event["topic"]].add(position[0])
        elif kind == "roll":
            logged.ledgers[event["topic"]].add(int(event["closed"]))
            logged.opened[(event["topic"], int(event["opened"]))] = event["at"]
        elif kind == "delete-topic":
            logged.deleted_topics.add(event["topic"])
        elif kind == "create-topic":  # a name used again is a new topic
            logged.deleted_topics.discard(event["topic"])
            logged.entries.pop(event["topic"], None)
            logged.ledgers.pop(event["topic"], None)
    return logged


def _crc(value: bytes | None) -> str:
    import zlib

    return f"{zlib.crc32(value or b''):08x}"


def check(store: Store, log_path: Path, *, settled: bool = True) -> list[Violation]:
    """The violations now. ``settled=False`` while the store still changes: the log is read before the store's
    tables (so every logged event committed before them) and a ledger whose files went between the tables' read and
    the files' (purged meanwhile) is judged at the next check, not now."""
    logged = _logged(read_log(log_path))
    with read_transaction(store.engine) as conn:
        topics = {r.name: r for r in conn.execute(select(t.topics))}
        namespaces = {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))}
        ledgers: dict[str, dict[int, Any]] = defaultdict(dict)
        for row in conn.execute(select(t.ledgers)):
            ledgers[row.topic][row.ledger_id] = row
        cursors = [r for r in conn.execute(select(t.cursors).where(t.cursors.c.durable.is_(True)))]
        pending = defaultdict(list)
        for row in conn.execute(select(t.pending_deletions)):
            pending[(row.topic, row.ledger_id)].append(row)
        gone_topics = defaultdict(list)
        for row in conn.execute(select(t.deleted_topics)):
            gone_topics[row.topic].append(row)
        journal = list(conn.execute(select(t.journal)))
        broker = conn.execute(
            select(t.store_settings.c.value).where(t.store_settings.c.key == "broker")
        ).scalar()
    journaled_runs = {(r.run_id, r.topic) for r in journal} | {(r.run_id, None) for r in journal}
    violations: list[Violation] = []
    stored = _StoredEntries(store, ledgers, settled=settled)

    # Entries a durable subscription has not acknowledged are all there, with the payload published.
    for cursor in cursors:
        own = logged.entries.get(cursor.topic, {})
        mark_delete = (cursor.mark_delete_ledger, cursor.mark_delete_entry)
        for position in sorted(p for p in own if p > mark_delete):
            found = stored.get(cursor.topic, position)
            if found is _MISSING:
                violations.append(
                    Violation(
                        "unacknowledged_lost",
                        cursor.topic,
                        f"entry {position[0]}:{position[1]} after subscription {cursor.name!r}'s mark-delete "
                        f"{mark_delete[0]}:{mark_delete[1]} is not stored",
                    )
                )
                break  # the first per subscription says it; the rest follow
    for topic, entries in logged.entries.items():
        if topic not in topics:
            continue
        for position, crc in entries.items():
            found = stored.get(topic, position)
            if found is not _MISSING and found is not _UNREADABLE_HERE and found != crc:
                violations.append(
                    Violation(
                        "entry_damaged", topic, f"entry {position[0]}:{position[1]}: crc {found} != {crc}"
                    )
                )

    # No durable cursor reads next from a ledger its topic no longer has.
    for cursor in cursors:
        have = ledgers.get(cursor.topic, {})
        ledger_id, entry_id = cursor.mark_delete_ledger, cursor.mark_delete_entry
        if not have or ledger_id in have:
            if (
                ledger_id in have
                and have[ledger_id].closed_at_ms is not None
                and entry_id >= have[ledger_id].entries
            ):
                violations.append(
                    Violation(
                        "cursor_in_deleted_ledger", cursor.topic, f"{cursor.name!r} past ledger {ledger_id}"
                    )
                )
            continue
        if ledger_id > min(have):
            violations.append(
                Violation(
                    "cursor_in_deleted_ledger",
                    cursor.topic,
                    f"{cursor.name!r} at {ledger_id}:{entry_id}, a ledger between ones the topic still has",
                )
            )
            continue
        last = _last_entry(logged, pending, cursor.topic, ledger_id)
        if last is not None and entry_id < last:
            violations.append(
                Violation(
                    "cursor_in_deleted_ledger",
                    cursor.topic,
                    f"{cursor.name!r} at {ledger_id}:{entry_id}: ledger {ledger_id} (entries to {last}) is deleted",
                )
            )

    # Every deletion is in the pending-deletion log, journaled, and restorable until purge.
    for topic, seen in logged.ledgers.items():
        if topic in logged.deleted_topics or topic not in topics:
            rows = gone_topics.get(topic, [])
            if not rows and topic not in topics:
                violations.append(
                    Violation("deletion_not_restorable", topic, "topic gone, not in the deleted-topics log")
                )
            for row in rows:
                if (row.run_id, None) not in journaled_runs:
                    violations.append(
                        Violation("deletion_not_restorable", topic, f"run {row.run_id} not journaled")
                    )
            continue
        for ledger_id in sorted(seen - set(ledgers.get(topic, {}))):
            rows = pending.get((topic, ledger_id), [])
            if not rows:
                violations.append(
                    Violation(
                        "deletion_not_restorable", topic, f"ledger {ledger_id} gone, not in the pending log"
                    )
                )
                continue
            for row in rows:
                if (row.run_id, topic) not in journaled_runs and (row.run_id, None) not in journaled_runs:
                    violations.append(
                        Violation(
                            "deletion_not_restorable",
                            topic,
                            f"ledger {ledger_id}: run {row.run_id} not journaled",
                        )
                    )
                if row.status == "pending" and row.kind == "ledger" and not row.tier_key:
                    if not any((store.root / row.path).glob("*.parquet")):
                        violations.append(
                            Violation(
                                "deletion_not_restorable", topic, f"ledger {ledger_id}: pending, files gone"
                            )
                        )

    # Trim deleted nothing the retention in force kept.
    history = _PolicyHistory(topics, namespaces, journal, json.loads(broker) if broker else {})
    applied_at = _apply_times(journal)
    sizes = _TopicSizes(ledgers, pending, applied_at, logged.opened)
    for (topic, ledger_id), rows in pending.items():
        for row in rows:
            if row.kind != "ledger" or applied_at.get(row.run_id, (None, ""))[1] != "trim":
                continue
            closed = json.loads(row.ledger_row).get("closed_at_ms")
            at = applied_at[row.run_id][0]
            # What the topic held when the run applied, at most, less what that run deleted before this ledger.
            held = sizes.at_most(topic, at) - sizes.deleted_before(row.run_id, topic, ledger_id)
            kept = [
                _kept(retention, closed, row.deleted_as_of_ms, held)
                for retention in (history.retention(topic, at), history.retention(topic, at - POLICY_RACE_MS))
            ]
            if all(kept):
                violations.append(
                    Violation(
                        "retention_violated",
                        topic,
                        f"ledger {ledger_id} (closed {closed}) deleted by {row.run_id} as of {row.deleted_as_of_ms}: "
                        f"the retention in force, {history.retention(topic, at)} (minutes, MB), kept it",
                    )
                )
    return violations


_MISSING = object()
_UNREADABLE_HERE = object()  # in the object tier: the store's tier checks cover it


class _StoredEntries:
    """Entries as the store holds them, read from each ledger's files once."""

    def __init__(self, store: Store, ledgers: dict[str, dict[int, Any]], *, settled: bool) -> None:
        self.store = store
        self.ledgers = ledgers
        self.settled = settled
        self.cache: dict[tuple[str, int], dict[int, str] | None] = {}

    def get(self, topic: str, position: Position) -> object:
        row = self.ledgers.get(topic, {}).get(position[0])
        if row is None or position[1] >= row.entries:
            return _MISSING
        if row.local_deleted:
            return _UNREADABLE_HERE
        key = (topic, position[0])
        if key not in self.cache:
            directory = self.store.ledger_dir(topic, row.ledger_id, row.files_generation)
            try:
                table = pq.read_table(directory, columns=["entryId", "value"])
            except OSError:
                if self.settled:
                    raise
                table = None  # changed since the tables were read: the next check judges it
            self.cache[key] = (
                None
                if table is None
                else {
                    e: _crc(v)
                    for e, v in zip(
                        table.column("entryId").to_pylist(), table.column("value").to_pylist(), strict=True
                    )
                }
            )
        found = self.cache[key]
        if found is None:
            return _UNREADABLE_HERE
        return found.get(position[1], _MISSING)


def _last_entry(logged: _Logged, pending: dict, topic: str, ledger_id: int) -> int | None:
    mine = [e for (ledger, e) in logged.entries.get(topic, {}) if ledger == ledger_id]
    if mine:
        return max(mine)
    for row in pending.get((topic, ledger_id), []):
        return int(json.loads(row.ledger_row).get("entries", 0)) - 1
    return None


def _apply_times(journal: list) -> dict[str, tuple[int, str]]:
    """Per run: the wall-clock moment its first action was journaled, and its mechanism."""
    first: dict[str, tuple[int, str]] = {}
    for row in journal:
        if row.run_id not in first or row.recorded_at_ms < first[row.run_id][0]:
            first[row.run_id] = (row.recorded_at_ms, row.mechanism)
    return first


def _kept(retention: tuple[int, int], closed_ms: int | None, as_of_ms: int, held_at_most: int) -> bool:
    """Whether the retention kept a consumed ledger: Pulsar trims one whose time has passed (closed more than the
    retention time before now; -1: never) or while the topic holds more than the retention size (-1: no limit), so
    it keeps one only when neither is so. ``held_at_most`` is an upper bound of what the topic held: a ledger is
    judged kept by size only when even that bound was within the limit."""
    minutes, megabytes = retention
    if closed_ms is None:
        return True  # the open ledger is never trimmed
    expired = minutes >= 0 and as_of_ms - closed_ms > minutes * 60_000
    over_size = megabytes >= 0 and held_at_most > megabytes * 1024 * 1024
    return not expired and not over_size


class _TopicSizes:
    """Upper bounds of what a topic held at a moment: every ledger it has now or that was deleted at or after that
    moment, but those a roll opened after it, each at its size now (an open ledger only grows)."""

    def __init__(
        self, ledgers: dict, pending: dict, applied_at: dict, opened: dict[tuple[str, int], int]
    ) -> None:
        self.ledgers, self.applied_at, self.opened = ledgers, applied_at, opened
        self.pending_by_topic: dict[str, list] = defaultdict(list)
        for (topic, _), rows in pending.items():
            self.pending_by_topic[topic].extend(rows)

    def at_most(self, topic: str, when_ms: int) -> int:
        total = 0
        for ledger_id, row in self.ledgers.get(topic, {}).items():
            if self.opened.get((topic, ledger_id), when_ms) <= when_ms:
                total += row.size_bytes
        for row in self.pending_by_topic.get(topic, []):
            deleted = self.applied_at.get(row.run_id, (0, ""))[0]
            if row.kind == "ledger" and deleted >= when_ms:
                total += row.size_bytes
        return total

    def deleted_before(self, run_id: str, topic: str, ledger_id: int) -> int:
        return sum(
            row.size_bytes
            for row in self.pending_by_topic.get(topic, [])
            if row.run_id == run_id and row.kind == "ledger" and row.ledger_id < ledger_id
        )


# Pulsar's SystemTopicNames: the namespace events topic, the transaction buffer's snapshots, the coordinator's
# topics and pending-ack stores (the local name, a partition's suffix taken off).
_SYSTEM_LOCAL_NAMES = {
    "__change_events",
    "__transaction_buffer_snapshot",
    "__transaction_buffer_snapshot_segments",
    "__transaction_buffer_snapshot_indexes",
}


def _is_system_topic(topic: str) -> bool:
    local = topic.rsplit("/", 1)[-1]
    if "-partition-" in local and local.rsplit("-partition-", 1)[1].isdigit():
        local = local.rsplit("-partition-", 1)[0]
    return (
        local in _SYSTEM_LOCAL_NAMES
        or local.startswith(("transaction_coordinator_assign", "__transaction_log_"))
        or local.endswith("__transaction_pending_ack")
    )


class _PolicyHistory:
    """The retention in force on a topic at a moment: the policies now, with every journaled change after that
    moment undone (topic level over namespace level over the broker's)."""

    def __init__(self, topics: dict, namespaces: dict, journal: list, broker: dict) -> None:
        self.now = {name: json.loads(row.policies) for name, row in topics.items()} | namespaces
        self.namespace_of = {name: row.namespace for name, row in topics.items()}
        self.changes = sorted(
            (
                (row.as_of_ms, json.loads(row.detail))
                for row in journal
                if row.mechanism == "admin" and row.action == "set-policies"
            ),
            key=lambda item: -item[0],
        )
        self.broker = (
            int(broker.get("defaultRetentionTimeInMinutes", BROKER_RETENTION[0])),
            int(broker.get("defaultRetentionSizeInMB", BROKER_RETENTION[1])),
        )

    def _at(self, target: str, when_ms: int) -> dict:
        policies = dict(self.now.get(target, {}))
        for as_of, detail in self.changes:
            if as_of <= when_ms:
                break
            if detail.get("target") == target:
                for key, change in detail.get("changes", {}).items():
                    if change.get("before") is None:
                        policies.pop(key, None)
                    else:
                        policies[key] = change["before"]
        return policies

    def retention(self, topic: str, when_ms: int) -> tuple[int, int]:
        namespace = self.namespace_of.get(topic) or topic.removeprefix("persistent://").rsplit("/", 1)[0]
        # Pulsar's BrokerService#getManagedLedgerConfig: a system topic (SystemTopicNames#isSystemTopic) without a
        # topic-level retention keeps nothing, whatever its namespace's (the CI's soak once reported trims of
        # __change_events under a namespace retention as violations).
        system = _is_system_topic(topic)
        for level in (topic,) if system else (topic, namespace):
            retention = self._at(level, when_ms).get("retention_policies")
            if retention is not None:
                return int(retention["retentionTimeInMinutes"]), int(retention["retentionSizeInMB"])
        return (0, 0) if system else self.broker
