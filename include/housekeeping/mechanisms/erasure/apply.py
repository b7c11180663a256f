"""Apply a checked key-erasure plan: install each topic's redacted ledgers and switch to them in one metadata
transaction per topic (``ApplyRun.commit``: a hold added since the snapshot wins). Per topic:

1. stage (one transaction, not journaled): compare-and-set (every ledger to rewrite is still in force with the
   files generation, entry count and size the plan saw: a producer that appended to the open ledger since, a
   compaction that replaced the compacted ledger, a trim that deleted a ledger skip the topic, reported, and the
   next run plans again), then the directory each new generation will have is recorded in the pending-deletion
   log (kind ``erasure_staged``, the erasure grace), before it exists: were the run never to switch, purge removes
   it;
2. install: each staged ledger is moved (one rename) to ``<ledgerId>.<generation>`` beside the files in force,
   after checking its bytes are those the gate passed (SHA-256 bound in the plan); a directory already there with
   those bytes is this run's, installed before a crash;
3. switch (one transaction, journaled): compare-and-set again; the ledger's row names the new generation and the
   new size (a compacted ledger's tombstone count too) and the new directory leaves the pending-deletion log; the
   files in force until now go to it with the erasure grace period (``HOUSEKEEPING_ERASURE_GRACE_SECONDS``),
   marked ``erased_by`` so restore refuses them; files already waiting for purge that hold a requested key get the
   same grace (never later than they had) and the same mark; the topic's version moves on (its ledger sizes
   changed: a trim planned on the old sizes must plan again).

Every directory is known to the metadata at every point (the ledger's row, or the pending-deletion log); a crash
leaves the old files in force until the switch commits and the new ones after; a rerun completes what is left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, select, update

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.engine.apply import ApplyRun, TopicOutcome
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.erasure.actions import EXPEDITE_PURGE, REDACTIONS
from housekeeping.mechanisms.erasure.tables import ERASURE_LEDGERS
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.entries import files_sha256
from housekeeping.store.journal import plan_rows
from housekeeping.store.store import Store, attempt_object, record_pending_deletion
from housekeeping.store.tier import TierError, new_attempt_uuid, object_key, parse_object_key

if TYPE_CHECKING:
    from housekeeping.engine.mechanism import Mechanism

ERASED_KIND = "erased_ledger"  # a raw ledger's files replaced by their redacted generation (never restored)
STAGED_KIND = "erasure_staged"  # a new generation's directory between stage and switch (never restored)
SOURCE_TABLES = {"raw": t.ledgers, "compacted": t.compacted_ledgers}


def apply_plan(store: Store, run_dir: Path, spec: Mechanism, *, purge_grace_seconds: int) -> dict[str, Any]:
    run = RunDir(run_dir)
    ledgers = {
        (r["topic"], int(r["ledgerId"]), r["source"]): r for r in read_table(run.path, ERASURE_LEDGERS.name)
    }
    applying, by_topic = ApplyRun.open_by_topic(
        store, run.path, spec, purge_grace_seconds=purge_grace_seconds
    )
    result: dict[str, Any] = {
        "runId": applying.run_id,
        "appliedTopics": [],
        "alreadyAppliedTopics": sorted(topic for topic in by_topic if topic in applying.done),
        "skippedTopics": {},
        "ledgersRewritten": 0,
        "compactedLedgersRewritten": 0,
        "entriesRedacted": 0,
        "bytesRedacted": 0,
        "pendingFilesExpedited": 0,
        "perNamespace": {},
    }
    for topic in sorted(by_topic):
        if topic in applying.done:
            continue
        topic_actions = by_topic[topic]
        planned = _planned(topic, topic_actions, ledgers)
        outcome = applying.commit(
            topic,
            topic_actions,
            lambda conn, tp=topic, acts=topic_actions, pl=planned: _stage(conn, applying, tp, acts, pl),
            held_action="erase",
            recheck=False,  # see _switch's
        )
        if outcome.status == "staged":
            checkpoint("erasure_apply_after_stage")
            copies = outcome.facts
            for key, item in planned.items():
                _install(applying.store, applying.run, topic, item, copies[key])
            outcome = applying.commit(
                topic,
                topic_actions,
                lambda conn, tp=topic, acts=topic_actions, pl=planned, cp=copies: _switch(
                    conn, applying, tp, acts, pl, cp
                ),
                held_action="erase",
                # An erasure is owed whatever the policies say now, and the pending files it expedites may be of a
                # topic deleted since the snapshot: its own re-check compares every ledger it rewrites and every
                # pending deletion it expedites with the plan's (generation, files), so a topic created again under
                # the name (other ledgers) is left alone.
                recheck=False,
            )
        checkpoint("erasure_apply_after_topic_commit")
        if not outcome.applied:
            result["skippedTopics"][topic] = outcome.why
            continue
        facts = outcome.facts
        result["appliedTopics"].append(topic)
        result["ledgersRewritten"] += facts["ledgers"]
        result["compactedLedgersRewritten"] += facts["compacted"]
        result["entriesRedacted"] += facts["entries"]
        result["bytesRedacted"] += facts["bytes"]
        result["pendingFilesExpedited"] += facts["expedited"]
        namespace = str(TopicName.parse(topic).namespace_name)
        per_ns = result["perNamespace"].setdefault(
            namespace, {"topics": 0, "ledgers": 0, "entries": 0, "bytes": 0}
        )
        per_ns["topics"] += 1
        per_ns["ledgers"] += facts["ledgers"] + facts["compacted"]
        per_ns["entries"] += facts["entries"]
        per_ns["bytes"] += facts["bytes"]
    return applying.finish(result)


def _source(action: dict[str, Any]) -> str:
    return REDACTIONS[action["action"]]


def _conflict(conn: Any, topic: str, action: dict[str, Any], planned: dict[str, Any]) -> str | None:
    """Why the ledger is no longer what the plan rewrote (None: it is)."""
    source = _source(action)
    table = SOURCE_TABLES[source]
    row = conn.execute(
        select(table).where(and_(table.c.topic == topic, table.c.ledger_id == int(action["ledgerId"])))
    ).first()
    what = f"{'compacted ' if source == 'compacted' else ''}ledger {action['ledgerId']}"
    if row is None:
        return f"{what} is no longer in the metadata"
    if source == "compacted" and row.status != "current":
        return f"{what} is no longer the compacted ledger in force"
    if row.files_generation != int(planned["fromGeneration"]):
        return f"{what}'s files were rewritten since the snapshot (generation {planned['fromGeneration']} -> {row.files_generation})"
    if row.entries != int(planned["entries"]) or row.size_bytes != int(planned["sizeBefore"]):
        return (
            f"{what} changed since the snapshot ({planned['entries']} entries, {planned['sizeBefore']} bytes -> "
            f"{row.entries}, {row.size_bytes})"
        )
    return None


def _install(store: Store, run: RunDir, topic: str, planned: dict[str, Any], copies: Copies) -> None:
    """Upload the staged ledger as the new attempt's object (an offloaded ledger), then put it at its new
    generation's directory (one rename) unless the ledger's local copy is deleted; its bytes checked first."""
    target = store.ledger_dir(topic, int(planned["ledgerId"]), int(planned["toGeneration"]))
    staged = run.staged_ledger(planned["staged"])
    installed = target.is_dir() and files_sha256(target) == planned["stagedSha256"]
    source = target if installed else _checked_staged(topic, planned, staged)
    if copies.tier_key is not None:
        _upload_redacted(store, topic, int(planned["ledgerId"]), copies.tier_key, source)
    if not copies.local or installed:
        return  # an offloaded ledger whose local copy is gone keeps it gone; or this run installed it before a crash
    if target.exists():
        # No metadata row names this generation (the compare-and-set above saw the one before it): left by a
        # run that never switched. It holds no requested key either way; it is replaced.
        store.remove_ledger_dir(
            store.ledger_rel_path(topic, int(planned["ledgerId"]), int(planned["toGeneration"]))
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
    checkpoint("erasure_apply_after_install")


def _checked_staged(topic: str, planned: dict[str, Any], staged: Path) -> Path:
    if not staged.is_dir():
        raise InputError(
            f"topic {topic} ledger {planned['ledgerId']}: the staged redacted ledger {staged} is missing; plan the "
            "erasure again (nothing was changed)"
        )
    actual = files_sha256(staged)
    if actual != planned["stagedSha256"]:
        raise InputError(
            f"topic {topic} ledger {planned['ledgerId']}: the staged redacted ledger {staged} is not the one the "
            f"gate passed (SHA-256 {actual[:12]}, plan {planned['stagedSha256'][:12]}); nothing was changed"
        )
    return staged


def _upload_redacted(store: Store, topic: str, ledger_id: int, key: str, source: Path) -> None:
    """The redacted entries as the new attempt's object, read back and compared (a rerun finds it there)."""
    from housekeeping.store.entries import read_ledger

    tier = store.tier_for_writing(
        f"topic {topic} ledger {ledger_id} is offloaded: its redacted copy goes to the tier"
    )
    table = read_ledger(source)
    if tier.info(key) is None or not tier.read_ledger(key).equals(table):
        tier.write_ledger(key, table)
        if not tier.read_ledger(key).equals(table):
            raise TierError(f"{tier.where}: object {key} read back differs from the redacted ledger uploaded")
    checkpoint("erasure_apply_after_upload")


def _planned(
    topic: str, actions: list[dict[str, Any]], ledgers: dict[tuple[str, int, str], dict[str, Any]]
) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The plan's rewritten-ledger rows of the topic's redact actions."""
    planned = {}
    for action in actions:
        if action["action"] not in REDACTIONS:
            continue
        key = (topic, int(action["ledgerId"]), _source(action))
        if key not in ledgers:
            raise InputError(
                f"topic {topic}: {action['action']} of ledger {action['ledgerId']} has no staged ledger in the plan"
            )
        planned[key] = ledgers[key]
    return planned


def _conflicts(
    conn: Any, topic: str, actions: list[dict[str, Any]], planned: dict[tuple[str, int, str], dict[str, Any]]
) -> str | None:
    """Why the topic is no longer what the plan saw (None: it is)."""
    for action in actions:
        if action["action"] in REDACTIONS:
            why = _conflict(conn, topic, action, planned[(topic, int(action["ledgerId"]), _source(action))])
            if why is not None:
                return why
        elif action["action"] == EXPEDITE_PURGE.name:
            row = conn.execute(
                select(t.pending_deletions).where(t.pending_deletions.c.id == int(action["pendingId"]))
            ).first()
            if row is not None and row.status == "restored":
                return (
                    f"ledger {action['ledgerId']} was restored since the snapshot (it holds a requested key)"
                )
    return None


def _offload_after_rewrite(old: dict[str, Any], copies: Copies) -> dict[str, Any]:
    """A rewritten ledger's offload context: the new attempt's object when its offload had completed (complete, its
    completion time and its local copy's state kept); an attempt that had not completed is forgotten (its object,
    which may hold the key, goes with the old files), so a later offload uploads the redacted ledger afresh."""
    if copies.tier_key is not None:
        return {"offload_uuid": parse_object_key(copies.tier_key)[2]}
    if old.get("offload_uuid") is not None:
        return {
            "offload_uuid": None,
            "offload_complete": False,
            "offloaded_at_ms": None,
            "local_deleted": False,
        }
    return {}


def _staged_path(store: Store, topic: str, ledger_id: int, item: dict[str, Any]) -> str:
    return store.ledger_rel_path(topic, ledger_id, int(item["toGeneration"]))


def _staged_records(path: str) -> Any:
    p = t.pending_deletions.c
    return and_(p.path == path, p.kind == STAGED_KIND, p.status == "pending")


def _staged_objects(run_id: str, topic: str, ledger_id: int) -> Any:
    """This run's staged tier object of a ledger (its key names the new attempt's UUID)."""
    p = t.pending_deletions.c
    return and_(
        p.kind == STAGED_KIND,
        p.status == "pending",
        p.run_id == run_id,
        p.topic == topic,
        p.ledger_id == ledger_id,
        p.tier_key.is_not(None),
        p.path == "",
    )


def _stage(
    conn: Any,
    applying: ApplyRun,
    topic: str,
    actions: list[dict[str, Any]],
    planned: dict[tuple[str, int, str], dict[str, Any]],
) -> TopicOutcome:
    """Compare-and-set, then record each new generation's directory and, for an offloaded ledger, the new attempt's
    object before they exist (not journaled). Facts: per ledger where its redacted copies go (:class:`Copies`)."""
    why = _conflicts(conn, topic, actions, planned)
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "erase", {"why": why, "planRows": plan_rows(actions)})
    copies: dict[tuple[str, int, str], Copies] = {}
    for key, item in sorted(planned.items()):
        _, ledger_id, source = key
        table = SOURCE_TABLES[source]
        old = conn.execute(
            select(table).where(and_(table.c.topic == topic, table.c.ledger_id == ledger_id))
        ).one()
        staged = dict(
            old._mapping, files_generation=int(item["toGeneration"]), size_bytes=int(item["sizeAfter"])
        )
        copies[key] = _stage_copies(conn, applying, topic, ledger_id, source, old, staged, item)
    return TopicOutcome("staged", journaled=False, facts=copies)


@dataclass(frozen=True)
class Copies:
    """Where a rewritten ledger's redacted files go: its new local generation (unless its local copy is deleted)
    and, for a ledger whose offload completed, a new object in the tier (``tier_key``)."""

    local: bool
    tier_key: str | None


def _stage_copies(
    conn: Any, applying: ApplyRun, topic: str, ledger_id: int, source: str, old: Any, staged: dict, item: dict
) -> Copies:
    local = source == "compacted" or not old.local_deleted
    offloaded = (
        source == "raw" and old.offload_uuid is not None and old.entries_stored and old.offload_complete
    )
    tier_key = None
    common = {
        "run_id": applying.run_id,
        "as_of_ms": applying.as_of_ms,
        "purge_after_ms": applying.purge_after_ms,
        "kind": STAGED_KIND,
        "erased_by": applying.run_id,
    }
    if local:
        path = _staged_path(applying.store, topic, ledger_id, item)
        mine = and_(_staged_records(path), t.pending_deletions.c.run_id == applying.run_id)
        if conn.execute(select(t.pending_deletions.c.id).where(mine)).first() is None:  # else: a rerun
            record_pending_deletion(conn, staged, local=True, **common)
    if offloaded:
        earlier = conn.execute(
            select(t.pending_deletions.c.tier_key).where(_staged_objects(applying.run_id, topic, ledger_id))
        ).first()
        tier_key = earlier[0] if earlier is not None else object_key(topic, ledger_id, new_attempt_uuid())
        if earlier is None:
            record_pending_deletion(conn, staged, local=False, tier_key=tier_key, **common)
    return Copies(local, tier_key)


def _switch(
    conn: Any,
    applying: ApplyRun,
    topic: str,
    actions: list[dict[str, Any]],
    planned: dict[tuple[str, int, str], dict[str, Any]],
    copies: dict[tuple[str, int, str], Copies],
) -> TopicOutcome:
    """Compare-and-set again, then switch each ledger to its new generation (module docstring, step 3)."""
    why = _conflicts(conn, topic, actions, planned)
    if why is not None:
        # The staged directories stay in the pending-deletion log: purge removes them after the grace period.
        return TopicOutcome("skipped_conflict", why, "erase", {"why": why, "planRows": plan_rows(actions)})
    erase_after_ms = applying.purge_after_ms
    for key, item in sorted(planned.items()):
        _switch_ledger(conn, applying, topic, key, item, copies[key])
    expedites = [a for a in actions if a["action"] == EXPEDITE_PURGE.name]
    expedited = _expedite(conn, applying, expedites)
    entries = sum(int(item["entriesRedacted"]) for item in planned.values())
    bytes_ = sum(int(item["bytesRedacted"]) for item in planned.values())
    rewritten = sum(key[2] == "raw" for key in planned)
    compacted = sum(key[2] == "compacted" for key in planned)
    if planned:
        conn.execute(update(t.topics).where(t.topics.c.name == topic).values(version=t.topics.c.version + 1))
    checkpoint("erasure_apply_inside_topic_transaction")
    detail = {
        "ledgers": sorted(k[1] for k in planned if k[2] == "raw"),
        "compactedLedgers": sorted(k[1] for k in planned if k[2] == "compacted"),
        "entriesRedacted": entries,
        "bytesRedacted": bytes_,
        "pendingExpedited": sorted(int(a["pendingId"]) for a in expedites),
        "requestIds": sorted({i for item in planned.values() for i in item["requestIds"]}),
        "purgeAfterMs": erase_after_ms,
        "planRows": plan_rows(actions),
    }
    facts = {
        "ledgers": rewritten,
        "compacted": compacted,
        "entries": entries,
        "bytes": bytes_,
        "expedited": expedited,
    }
    return TopicOutcome("applied", None, "erase", detail, facts)


def _switch_ledger(
    conn: Any, applying: ApplyRun, topic: str, key: tuple[str, int, str], item: dict[str, Any], copies: Copies
) -> None:
    """Point one ledger at its new generation; the files in force until now go to the pending-deletion log."""
    source = key[2]
    table = SOURCE_TABLES[source]
    where = and_(table.c.topic == topic, table.c.ledger_id == key[1])
    old = dict(conn.execute(select(table).where(where)).one()._mapping)
    # The files in force until now, local and (an offloaded ledger: the attempt's object, complete or not) in
    # the tier, hold the key: to the pending-deletion log, marked erased (never restored).
    record_pending_deletion(
        conn,
        old,
        run_id=applying.run_id,
        as_of_ms=applying.as_of_ms,
        purge_after_ms=applying.purge_after_ms,
        kind=ERASED_KIND if source == "raw" else COMPACTED_KIND,
        erased_by=applying.run_id,
        tier_key=attempt_object(old) if source == "raw" else None,
    )
    values: dict[str, Any] = {
        "files_generation": int(item["toGeneration"]),
        "size_bytes": int(item["sizeAfter"]),
        **_offload_after_rewrite(old, copies),
    }
    if source == "compacted":
        values["tombstones"] = max(0, old["tombstones"] - int(item["tombstonesRedacted"]))
    conn.execute(update(table).where(where).values(**values))
    # The new directory is the ledger's files now, no longer a staged one waiting for purge (a staged record
    # of an earlier run that never switched goes too: it names the same directory).
    path = _staged_path(applying.store, topic, key[1], item)
    conn.execute(t.pending_deletions.delete().where(_staged_records(path)))
    if copies.tier_key is not None:
        conn.execute(
            t.pending_deletions.delete().where(
                and_(
                    _staged_objects(applying.run_id, topic, key[1]),
                    t.pending_deletions.c.tier_key == copies.tier_key,
                )
            )
        )


def _expedite(conn: Any, applying: ApplyRun, expedites: list[dict[str, Any]]) -> int:
    """Bring forward the purge of pending deletions that still hold a requested key; how many were."""
    expedited = 0
    pending = t.pending_deletions
    for action in expedites:
        row = conn.execute(select(pending).where(pending.c.id == int(action["pendingId"]))).first()
        if row is None or row.status != "pending":
            continue  # purged since the snapshot: gone already
        conn.execute(
            update(pending)
            .where(pending.c.id == row.id)
            .values(
                purge_after_ms=min(row.purge_after_ms, applying.purge_after_ms), erased_by=applying.run_id
            )
        )
        expedited += 1
    return expedited
