"""Apply a checked scrub plan: each ``delete_orphan`` goes to the pending-deletion log (kind ``orphan``) with the grace
period, in one metadata transaction of its own (``ApplyRun.commit``: a hold on its topic added since wins), journaled.
Nothing is deleted here; purge removes it after the grace period, checking once more that no row names it.

In the transaction, before recording, the item is checked again against the metadata now (no ledger row names its
ledger and generation or its offload attempt, no compacted ledger, no pending deletion: a writer or a run that
claimed it since the snapshot wins) and against the storage (still there, same modification time and bytes: an
item written since is not the one the gate passed). An item already recorded by this run (a retried apply after a
crash) is counted as done; the rest are recorded. A crash between two items leaves the first ones recorded and the
rest for the rerun."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, select

from housekeeping.core.names import TopicName
from housekeeping.engine.apply import ApplyRun, TopicOutcome
from housekeeping.engine.faults import checkpoint
from housekeeping.mechanisms.scrub.listing import item_facts
from housekeeping.mechanisms.scrub.tables import LOCAL
from housekeeping.store import metadata_schema as t
from housekeeping.store.journal import plan_rows
from housekeeping.store.store import ORPHAN_KIND, Store, orphan_named, record_pending_deletion

if TYPE_CHECKING:
    from housekeeping.engine.mechanism import Mechanism


def _where(action: dict[str, Any]) -> dict[str, str | None]:
    """The item as the pending-deletion log names it: a local ``path`` or a ``tier_key``."""
    local = action["location"] == LOCAL
    return {"path": action["path"] if local else None, "tier_key": None if local else action["path"]}


def _named_now(conn: Any, action: dict[str, Any]) -> str | None:
    """Why a row names the item now (None: none does)."""
    return orphan_named(conn, action["topic"], int(action["ledgerId"]), **_where(action))


def _as_listed(store: Store, action: dict[str, Any]) -> str | None:
    """Why the item is not the one planned (None: it is, unchanged)."""
    if action["location"] == LOCAL:
        facts = item_facts(store.root / action["path"])
        if facts is None:
            return f"{action['path']} is gone"
        mtime, size = facts["mtimeMs"], facts["bytes"]
    else:
        tier = store.require_tier(f"orphan object {action['path']}")
        found = tier.info(action["path"])
        if found is None:
            return f"object {action['path']} is gone"
        mtime, size = found.mtime_ms, found.size
    if mtime != int(action["mtimeMs"]) or size != int(action["bytes"]):
        return f"{action['path']} changed since the scrub listed it (modified {mtime}, {size} bytes)"
    return None


def _record(conn: Any, applying: ApplyRun, action: dict[str, Any]) -> TopicOutcome:
    detail = {"location": action["location"], "path": action["path"], "planRows": plan_rows([action])}
    why = _named_now(conn, action) or _as_listed(applying.store, action)
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "delete_orphan", {**detail, "why": why})
    row = {
        "topic": action["topic"],
        "ledger_id": int(action["ledgerId"]),
        "size_bytes": int(action["bytes"]),
        "location": action["location"],
        "path": action["path"],
        "mtime_ms": int(action["mtimeMs"]),
        "reason": action["reason"],
    }
    record_pending_deletion(
        conn,
        row,
        run_id=applying.run_id,
        as_of_ms=applying.as_of_ms,
        purge_after_ms=applying.purge_after_ms,
        kind=ORPHAN_KIND,
        local=action["location"] == LOCAL,
        **_where(action),
    )
    return TopicOutcome("applied", None, "delete_orphan", {**detail, "bytes": row["size_bytes"]}, facts=row)


def _already(conn: Any, applying: ApplyRun, action: dict[str, Any]) -> bool:
    p = t.pending_deletions.c
    column = p.path if _where(action)["path"] else p.tier_key
    found = conn.execute(
        select(p.id).where(and_(column == action["path"], p.run_id == applying.run_id, p.kind == ORPHAN_KIND))
    ).first()
    return found is not None


def apply_plan(store: Store, run_dir: Path, spec: Mechanism, *, purge_grace_seconds: int) -> dict[str, Any]:
    applying, by_topic = ApplyRun.open_by_topic(
        store, Path(run_dir), spec, purge_grace_seconds=purge_grace_seconds
    )
    result: dict[str, Any] = {
        "runId": applying.run_id,
        "appliedTopics": [],
        "alreadyAppliedTopics": [],
        "skippedTopics": {},
        "orphansQueued": [],
        "alreadyQueued": [],
        "bytesQueued": 0,
        "purgeAfterMs": applying.purge_after_ms,
        "perNamespace": {},
    }
    for topic in sorted(by_topic):
        queued = 0
        for action in sorted(by_topic[topic], key=lambda a: (a["location"], a["path"])):

            def change(conn: Any, action: dict[str, Any] = action) -> TopicOutcome:
                if _already(conn, applying, action):
                    return TopicOutcome("already_applied", journaled=False)
                return _record(conn, applying, action)

            outcome = applying.commit(topic, [action], change, held_action="delete_orphan")
            where = f"{action['location']}:{action['path']}"
            if outcome.applied:
                queued += 1
                _count(result, topic, where, int(action["bytes"]))
                checkpoint("scrub_apply_between_orphans")
            elif outcome.status == "already_applied":
                result["alreadyQueued"].append(where)
            else:
                result["skippedTopics"][where] = outcome.why
        if queued:
            result["appliedTopics"].append(topic)
    return applying.finish(result)


def _count(result: dict[str, Any], topic: str, where: str, size: int) -> None:
    result["orphansQueued"].append(where)
    result["bytesQueued"] += size
    namespace = str(TopicName.parse(topic).namespace_name)
    per_ns = result["perNamespace"].setdefault(namespace, {"orphans": 0, "bytes": 0})
    per_ns["orphans"] += 1
    per_ns["bytes"] += size
