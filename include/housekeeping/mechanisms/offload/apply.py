"""Apply a checked offload plan (Pulsar ``ManagedLedgerImpl#offloadLoop``; docs/semantics.md §9).
Per planned ledger, oldest first within each topic:

1. prepare (one transaction, ``ApplyRun.commit``, not journaled): compare-and-set (the ledger is still listed with
   the entries and size the plan saw, closed, its offload not complete), then a fresh attempt UUID is written to
   its row **before** the upload (``prepareLedgerInfoForOffloaded``); an earlier attempt's object goes to the
   pending-deletion log, due at once (Pulsar deletes it first: "Found previous offload attempt");
2. upload its entries (the local copy) to ``<ledgerId>-<uuid>.parquet`` and read the object back: the entries and
   their bytes must equal what was uploaded (a short or altered object is never recorded complete);
3. complete (one transaction, journaled): compare-and-set on the UUID (``completeLedgerInfoForOffloaded``):
   still this attempt and not complete -> ``offload_complete``, ``offloaded_at_ms`` = the run's logical time. The
   ledger gone (trimmed meanwhile) or another attempt's UUID in its row -> the object just uploaded goes to the
   pending-deletion log and the ledger is reported skipped (Pulsar: OffloadConflict, "likely trimmed").

A crash anywhere leaves at most an object of an attempt the metadata names with ``complete`` false: the next
offload plans the ledger again (a new UUID, the old object to the pending-deletion log) and a trim that deletes it
deletes that object too. Offload bumps no topic version (the ledger list does not change; Pulsar's guard is the
UUID), moves no cursor and deletes nothing local. An upload that fails leaves the attempt incomplete and the run
goes on with the next ledger (``offloadThreeOneFails``), reporting the failure; the run fails at its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, select, update

from housekeeping.core.names import TopicName
from housekeeping.engine.apply import ApplyRun, TopicOutcome
from housekeeping.engine.faults import checkpoint
from housekeeping.store import metadata_schema as t
from housekeeping.store.journal import plan_rows
from housekeeping.store.store import TIER_OBJECT_KIND, Store, attempt_object, record_pending_deletion
from housekeeping.store.tier import ObjectTier, TierError, new_attempt_uuid, object_key

if TYPE_CHECKING:
    from housekeeping.engine.mechanism import Mechanism


class OffloadFailed(TierError):
    """Some uploads failed: the others were recorded, the failed ones stay incomplete for the next run."""


@dataclass
class Attempt:
    topic: str
    ledger_id: int
    uuid: str
    action: dict[str, Any]

    @property
    def key(self) -> str:
        return object_key(self.topic, self.ledger_id, self.uuid)


def _ledger_where(topic: str, ledger_id: int) -> Any:
    return and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id)


def _abandon_object(conn: Any, applying: ApplyRun, row: dict[str, Any], key: str) -> None:
    """An attempt's object the metadata no longer names: into the pending-deletion log, due now."""
    record_pending_deletion(
        conn,
        row,
        run_id=applying.run_id,
        as_of_ms=applying.as_of_ms,
        purge_after_ms=applying.as_of_ms,
        kind=TIER_OBJECT_KIND,
        tier_key=key,
        local=False,
    )


def _prepare(conn: Any, applying: ApplyRun, attempt: Attempt) -> TopicOutcome:
    action = attempt.action
    row = conn.execute(select(t.ledgers).where(_ledger_where(attempt.topic, attempt.ledger_id))).first()
    why = None
    if row is None:
        why = f"ledger {attempt.ledger_id} is no longer listed (trimmed since the snapshot)"
    elif row.offload_complete:
        # Done already: by an earlier attempt of this run (a retried task) or by another run since the snapshot.
        return TopicOutcome("already_offloaded", journaled=False)
    elif row.closed_at_ms is None or row.size_bytes != int(action["bytes"]):
        why = f"ledger {attempt.ledger_id} changed since the snapshot (size {row.size_bytes}, planned {action['bytes']})"
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "offload", {"why": why, "planRows": plan_rows([action])})
    previous = dict(row._mapping)
    earlier = attempt_object(previous)
    if earlier is not None:
        _abandon_object(conn, applying, previous, earlier)
    conn.execute(
        update(t.ledgers)
        .where(_ledger_where(attempt.topic, attempt.ledger_id))
        .values(offload_uuid=attempt.uuid, offload_complete=False, offloaded_at_ms=None)
    )
    return TopicOutcome("prepared", journaled=False, facts=previous)


def _upload(store: Store, tier: ObjectTier, attempt: Attempt, row: dict[str, Any]) -> int:
    """Upload the ledger's local copy and read it back: the object's size; TierError when it does not hold exactly
    the uploaded entries."""
    from types import SimpleNamespace

    table = store.read_ledger_entries(SimpleNamespace(**row))
    if table.num_rows != row["entries"]:
        raise TierError(
            f"topic {attempt.topic} ledger {attempt.ledger_id}: the local copy holds {table.num_rows} entries, the "
            f"metadata {row['entries']}; not offloaded"
        )
    size = tier.write_ledger(attempt.key, table)
    checkpoint("offload_apply_after_upload")
    back = tier.read_ledger(attempt.key)
    if not back.equals(table.cast(back.schema)):
        raise TierError(
            f"{tier.where}: object {attempt.key} read back differs from what was uploaded "
            f"({back.num_rows} entries, {sum(back.column('size').to_pylist())} payload bytes; uploaded "
            f"{table.num_rows}, {sum(table.column('size').to_pylist())})"
        )
    return size


def _complete(conn: Any, applying: ApplyRun, attempt: Attempt, object_bytes: int) -> TopicOutcome:
    row = conn.execute(select(t.ledgers).where(_ledger_where(attempt.topic, attempt.ledger_id))).first()
    detail = {"ledgerId": attempt.ledger_id, "uuid": attempt.uuid, "planRows": plan_rows([attempt.action])}
    if row is None or row.offload_uuid != attempt.uuid or row.offload_complete:
        why = (
            f"ledger {attempt.ledger_id} was trimmed during its offload"
            if row is None
            else f"ledger {attempt.ledger_id}'s offload attempt changed during the upload ({row.offload_uuid})"
        )
        orphan = {"topic": attempt.topic, "ledger_id": attempt.ledger_id, "size_bytes": object_bytes}
        _abandon_object(conn, applying, orphan, attempt.key)
        return TopicOutcome("skipped_conflict", why, "offload", {**detail, "why": why})
    conn.execute(
        update(t.ledgers)
        .where(
            and_(_ledger_where(attempt.topic, attempt.ledger_id), t.ledgers.c.offload_uuid == attempt.uuid)
        )
        .values(offload_complete=True, offloaded_at_ms=applying.as_of_ms)
    )
    return TopicOutcome(
        "applied",
        None,
        "offload",
        {**detail, "bytes": row.size_bytes, "objectBytes": object_bytes},
        facts=row.size_bytes,
    )


def _offload_one(applying: ApplyRun, tier: ObjectTier, attempt: Attempt) -> tuple[TopicOutcome, str | None]:
    """One ledger's three steps: its outcome, and the upload's failure (None: no failure)."""
    prepared = applying.commit(
        attempt.topic, [attempt.action], lambda conn: _prepare(conn, applying, attempt), held_action="offload"
    )
    if prepared.status != "prepared":
        return prepared, None
    checkpoint("offload_apply_after_prepare")
    try:
        object_bytes = _upload(applying.store, tier, attempt, prepared.facts)
    except TierError as exc:
        # Pulsar: complete stays false, the UUID stays, the loop goes on; a later offload retries.
        return TopicOutcome("failed", str(exc)), str(exc)
    outcome = applying.commit(
        attempt.topic,
        [attempt.action],
        lambda conn: _complete(conn, applying, attempt, object_bytes),
        held_action="offload",
        # The prepare re-checked the topic against the store as it is; completing records the upload it began,
        # compare-and-set on its attempt UUID (a topic gone or created again since has no such ledger row).
        recheck=False,
    )
    checkpoint("offload_apply_after_complete")
    return outcome, None


def apply_plan(store: Store, run_dir: Path, spec: Mechanism, *, purge_grace_seconds: int) -> dict[str, Any]:
    applying, by_topic = ApplyRun.open_by_topic(
        store, Path(run_dir), spec, purge_grace_seconds=purge_grace_seconds
    )
    tier = store.tier_for_writing("offloading ledgers") if by_topic else None
    result: dict[str, Any] = {
        "runId": applying.run_id,
        "appliedTopics": [],
        "alreadyAppliedTopics": sorted(topic for topic in by_topic if topic in applying.done),
        "alreadyOffloaded": [],
        "skippedTopics": {},
        "failedLedgers": {},
        "ledgersOffloaded": 0,
        "bytesOffloaded": 0,
        "perNamespace": {},
    }
    # Every topic, also one an earlier attempt of this run applied: its ledgers are done one by one (a crash may
    # come between two of them), and a completed one is found complete.
    for topic in sorted(by_topic):
        assert tier is not None
        offloaded = 0
        for action in sorted(by_topic[topic], key=lambda a: a["ledgerId"]):
            attempt = Attempt(topic, int(action["ledgerId"]), new_attempt_uuid(), action)
            outcome, failure = _offload_one(applying, tier, attempt)
            if failure is not None:
                result["failedLedgers"][f"{topic}:{attempt.ledger_id}"] = failure
            elif outcome.applied:
                offloaded += 1
                _count(result, topic, outcome.facts)
            elif outcome.status == "already_offloaded":
                result["alreadyOffloaded"].append(f"{topic}:{attempt.ledger_id}")
            else:
                result["skippedTopics"][f"{topic}:{attempt.ledger_id}"] = outcome.why
        if offloaded:
            result["appliedTopics"].append(topic)
    finished = applying.finish(result)
    if result["failedLedgers"]:
        first = next(iter(result["failedLedgers"].items()))
        raise OffloadFailed(
            f"{len(result['failedLedgers'])} ledger(s) could not be offloaded (the others were; these stay "
            f"incomplete and the next run retries them); first: {first[0]}: {first[1]}"
        )
    return finished


def _count(result: dict[str, Any], topic: str, size: int) -> None:
    result["ledgersOffloaded"] += 1
    result["bytesOffloaded"] += size
    namespace = str(TopicName.parse(topic).namespace_name)
    per_ns = result["perNamespace"].setdefault(namespace, {"ledgers": 0, "bytes": 0})
    per_ns["ledgers"] += 1
    per_ns["bytes"] += size
