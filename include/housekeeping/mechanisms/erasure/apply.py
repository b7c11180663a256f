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
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import and_, select, update

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.engine.apply import ApplyRun, TopicOutcome
from housekeeping.engine.contract import ACTIONS, RunDir
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.erasure.actions import EXPEDITE_PURGE, REDACTIONS
from housekeeping.mechanisms.erasure.tables import ERASURE_LEDGERS
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.entries import files_sha256
from housekeeping.store.journal import plan_rows
from housekeeping.store.store import Store, record_pending_deletion

ERASED_KIND = "erased_ledger"  # a raw ledger's files replaced by their redacted generation (never restored)
STAGED_KIND = "erasure_staged"  # a new generation's directory between stage and switch (never restored)
SOURCE_TABLES = {"raw": t.ledgers, "compacted": t.compacted_ledgers}


def apply_plan(store: Store, run_dir: Path, spec: Any, *, purge_grace_seconds: int) -> dict[str, Any]:
    run = RunDir(run_dir)
    actions = read_table(run.path, ACTIONS.name)
    ledgers = {
        (r["topic"], int(r["ledgerId"]), r["source"]): r for r in read_table(run.path, ERASURE_LEDGERS.name)
    }
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for action in actions:
        by_topic[action["topic"]].append(action)
    applying = ApplyRun.open(
        store,
        run.path,
        spec,
        purge_grace_seconds=purge_grace_seconds,
        detail={"topics": len(by_topic), "actions": len(actions)},
        actions=actions,
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
        )
        if outcome.status == "staged":
            checkpoint("erasure_apply_after_stage")
            for item in planned.values():
                _install(applying.store, applying.run, topic, item)
            outcome = applying.commit(
                topic,
                topic_actions,
                lambda conn, tp=topic, acts=topic_actions, pl=planned: _switch(conn, applying, tp, acts, pl),
                held_action="erase",
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


def _install(store: Store, run: RunDir, topic: str, planned: dict[str, Any]) -> None:
    """Put the staged ledger at its new generation's directory (one rename), its bytes checked first."""
    target = store.ledger_dir(topic, int(planned["ledgerId"]), int(planned["toGeneration"]))
    staged = run.staged_ledger(planned["staged"])
    if target.is_dir() and files_sha256(target) == planned["stagedSha256"]:
        return  # this run installed it before a crash
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
    if target.exists():
        # No metadata row names this generation (the compare-and-set above saw the one before it): left by a
        # run that never switched. It holds no requested key either way; it is replaced.
        store.remove_ledger_dir(
            store.ledger_rel_path(topic, int(planned["ledgerId"]), int(planned["toGeneration"]))
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
    checkpoint("erasure_apply_after_install")


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


def _staged_path(store: Store, topic: str, ledger_id: int, item: dict[str, Any]) -> str:
    return store.ledger_rel_path(topic, ledger_id, int(item["toGeneration"]))


def _staged_records(path: str) -> Any:
    p = t.pending_deletions.c
    return and_(p.path == path, p.kind == STAGED_KIND, p.status == "pending")


def _stage(
    conn: Any,
    applying: ApplyRun,
    topic: str,
    actions: list[dict[str, Any]],
    planned: dict[tuple[str, int, str], dict[str, Any]],
) -> TopicOutcome:
    """Compare-and-set, then record each new generation's directory before it exists (not journaled)."""
    why = _conflicts(conn, topic, actions, planned)
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "erase", {"why": why, "planRows": plan_rows(actions)})
    for (_, ledger_id, source), item in sorted(planned.items()):
        path = _staged_path(applying.store, topic, ledger_id, item)
        mine = and_(_staged_records(path), t.pending_deletions.c.run_id == applying.run_id)
        if conn.execute(select(t.pending_deletions.c.id).where(mine)).first() is not None:
            continue  # a rerun: staged already
        table = SOURCE_TABLES[source]
        old = conn.execute(
            select(table).where(and_(table.c.topic == topic, table.c.ledger_id == ledger_id))
        ).one()
        staged = dict(
            old._mapping, files_generation=int(item["toGeneration"]), size_bytes=int(item["sizeAfter"])
        )
        record_pending_deletion(
            conn,
            staged,
            run_id=applying.run_id,
            as_of_ms=applying.as_of_ms,
            purge_after_ms=applying.purge_after_ms,
            kind=STAGED_KIND,
            erased_by=applying.run_id,
        )
    return TopicOutcome("staged", journaled=False)


def _switch(
    conn: Any,
    applying: ApplyRun,
    topic: str,
    actions: list[dict[str, Any]],
    planned: dict[tuple[str, int, str], dict[str, Any]],
) -> TopicOutcome:
    """Compare-and-set again, then switch each ledger to its new generation (module docstring, step 3)."""
    why = _conflicts(conn, topic, actions, planned)
    if why is not None:
        # The staged directories stay in the pending-deletion log: purge removes them after the grace period.
        return TopicOutcome("skipped_conflict", why, "erase", {"why": why, "planRows": plan_rows(actions)})
    erase_after_ms = applying.purge_after_ms
    entries = bytes_ = rewritten = compacted = 0
    for key, item in sorted(planned.items()):
        source = key[2]
        table = SOURCE_TABLES[source]
        where = and_(table.c.topic == topic, table.c.ledger_id == key[1])
        old = dict(conn.execute(select(table).where(where)).one()._mapping)
        record_pending_deletion(
            conn,
            old,
            run_id=applying.run_id,
            as_of_ms=applying.as_of_ms,
            purge_after_ms=erase_after_ms,
            kind=ERASED_KIND if source == "raw" else COMPACTED_KIND,
            erased_by=applying.run_id,
        )
        values: dict[str, Any] = {
            "files_generation": int(item["toGeneration"]),
            "size_bytes": int(item["sizeAfter"]),
        }
        if source == "compacted":
            values["tombstones"] = max(0, old["tombstones"] - int(item["tombstonesRedacted"]))
        conn.execute(update(table).where(where).values(**values))
        # The new directory is the ledger's files now, no longer a staged one waiting for purge (a staged record
        # of an earlier run that never switched goes too: it names the same directory).
        path = _staged_path(applying.store, topic, key[1], item)
        conn.execute(t.pending_deletions.delete().where(_staged_records(path)))
        entries += int(item["entriesRedacted"])
        bytes_ += int(item["bytesRedacted"])
        rewritten += source == "raw"
        compacted += source == "compacted"
    expedites = [a for a in actions if a["action"] == EXPEDITE_PURGE.name]
    expedited = 0
    for action in expedites:
        pending = t.pending_deletions
        row = conn.execute(select(pending).where(pending.c.id == int(action["pendingId"]))).first()
        if row is None or row.status != "pending":
            continue  # purged since the snapshot: gone already
        conn.execute(
            update(pending)
            .where(pending.c.id == row.id)
            .values(purge_after_ms=min(row.purge_after_ms, erase_after_ms), erased_by=applying.run_id)
        )
        expedited += 1
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
