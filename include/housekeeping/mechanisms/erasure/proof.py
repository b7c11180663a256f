"""Proof of erasure, per request: what the erasure runs did for it, when the files they replaced were purged, and
a final scan of every file the store holds for the request's target (every Parquet file under the topic's, its
partitions' or the namespace's directories, and every object of the object tier under them, whatever the metadata
says: raw, compacted, offloaded, waiting for purge, or named by nothing) that looks for an entry whose key's SHA-256
is the request's.

The request's state follows from the proof, recorded in the metadata with the proof's path:

- ``held``: a hold covers a topic of the target (the hold wins; the request waits, with the hold's reason);
- ``done``: the scan found the key nowhere (the proof's path in ``state_detail``);
- ``pending``: found only in files an erasure replaced that wait for their purge (until when is said);
- ``failed``: found in a file no erasure has replaced nor is waiting for purge (the file is named): an erasure
  run must plan it (it retries; a file the metadata does not name needs an operator).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from housekeeping.core.names import NamespaceName, TopicName, topic_dir_parts
from housekeeping.core.timeutil import format_ms
from housekeeping.engine.documents import RunInfo, read_run_info
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir, read_json, write_json
from housekeeping.mechanisms.erasure.requests import DONE, FAILED, HELD, PENDING
from housekeeping.mechanisms.erasure.tables import ERASURE_DECISIONS, ERASURE_LEDGERS
from housekeeping.store import metadata_schema as t
from housekeeping.store.journal import journal
from housekeeping.store.store import LEDGERS_DIR, Store, read_transaction, write_transaction
from housekeeping.store.tier import ObjectTier


def target_dirs(store: Store, scope: str, target: str) -> list[Path]:
    """The directories that hold every file of the target: the namespace's, or the topic's and its partitions'."""
    if scope == "namespace":
        name = NamespaceName.parse(target)
        tenant, namespace, _ = topic_dir_parts(TopicName(name.tenant, name.namespace, "x"))
        return [store.root / LEDGERS_DIR / "persistent" / tenant / namespace]
    tenant, namespace, local = topic_dir_parts(TopicName.parse(target))
    namespace_dir = store.root / LEDGERS_DIR / "persistent" / tenant / namespace
    if not namespace_dir.is_dir():
        return []
    return sorted(
        child
        for child in namespace_dir.iterdir()
        if child.name == local
        or (child.name.startswith(local + "-partition-") and child.name[len(local) + 11 :].isdigit())
    )


TIER_PREFIX = "tier:"  # how the proof names a tier object it found: tier:<object key>


def target_objects(tier: ObjectTier | None, scope: str, target: str) -> list[str]:
    """Every object of the tier under the target's topics (the namespace's, or the topic's and its partitions'),
    whatever the metadata says."""
    if tier is None:
        return []
    if scope == "namespace":
        name = NamespaceName.parse(target)
        tenant, namespace, _ = topic_dir_parts(TopicName(name.tenant, name.namespace, "x"))
        return sorted(o.key for o in tier.list_objects(f"persistent/{tenant}/{namespace}"))
    tenant, namespace, local = topic_dir_parts(TopicName.parse(target))
    keys = []
    for item in tier.list_objects(f"persistent/{tenant}/{namespace}"):
        topic_dir = item.key.split("/")[3] if item.key.count("/") >= 4 else ""
        if topic_dir == local or (
            topic_dir.startswith(local + "-partition-") and topic_dir[len(local) + 11 :].isdigit()
        ):
            keys.append(item.key)
    return sorted(keys)


def scan(
    dirs: list[Path], digests: set[str], tier: ObjectTier | None = None, objects: list[str] = ()
) -> dict[str, dict[str, Any]]:
    """Every Parquet file under ``dirs`` and every tier object of ``objects``, read once for all ``digests``: per
    digest the files holding an entry whose key's SHA-256 it is (each distinct key of a file is hashed once; an
    object is named ``tier:<key>``)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = entries = 0
    found: dict[str, list[str]] = {digest: [] for digest in digests}

    def look(name: str, keys: Any) -> None:
        nonlocal files, entries
        files += 1
        entries += len(keys)
        for value in pc.unique(keys).to_pylist():
            if value is not None:
                digest = hashlib.sha256(value.encode("utf-8")).hexdigest()
                if digest in found:
                    found[digest].append(name)

    for base in dirs:
        for path in sorted(base.rglob("*.parquet")):
            look(str(path), pq.read_table(path, columns=["key"]).column("key"))
    for key in objects:
        assert tier is not None
        look(TIER_PREFIX + key, tier.read_ledger(key, columns=["key"]).column("key"))
    return {
        digest: {"filesScanned": files, "entriesScanned": entries, "filesHoldingTheKey": paths}
        for digest, paths in found.items()
    }


def _ledger_dir_of(path: str, root: Path) -> str:
    """The ledger directory (relative to the store root) a found file is in; a tier object: its key."""
    if path.startswith(TIER_PREFIX):
        return path[len(TIER_PREFIX) :]
    return str(Path(path).parent.relative_to(root))


@dataclass(frozen=True)
class _RunFacts:
    """What a proof reads of its run and the store, once for every request."""

    run: RunDir
    info: RunInfo
    ledgers: list[dict[str, Any]]  # the plan's rewritten ledgers
    applied: set[str]  # topics the run's apply switched (or had switched)
    waiting: dict[str, Any]  # pending deletions an erasure marked, by path and by tier object key
    requests: dict[int, Any]


def _run_facts(store: Store, run: RunDir) -> _RunFacts:
    apply_result = read_json(run.apply_result) or {}
    with read_transaction(store.engine) as conn:
        p = t.pending_deletions.c
        waiting: dict[str, Any] = {}
        for row in conn.execute(
            select(t.pending_deletions).where((p.status == "pending") & p.erased_by.is_not(None))
        ):
            # Its local files by their path, its tier object by its key.
            for place in (row.path, row.tier_key):
                if place:
                    waiting[place] = row
        requests = {row.id: row for row in conn.execute(select(t.erasure_requests))}
    return _RunFacts(
        run,
        read_run_info(run),
        read_table(run.path, ERASURE_LEDGERS.name),
        set(apply_result.get("appliedTopics", [])) | set(apply_result.get("alreadyAppliedTopics", [])),
        waiting,
        requests,
    )


def _state(
    facts: _RunFacts, store: Store, request: Any, rows: list[dict[str, Any]], result: dict[str, Any]
) -> tuple[str, str, list[Any]]:
    """The request's state after this run (and why), from its decisions and the final scan of its target; the
    replaced files holding the key that wait for purge."""
    first = rows[0]
    held = [r for r in rows if r.get("topic") and r["kind"] == "held"]
    found_dirs = [_ledger_dir_of(p, store.root) for p in result["filesHoldingTheKey"]]
    awaiting = [facts.waiting[d] for d in found_dirs if d in facts.waiting]
    elsewhere = [
        p for p, d in zip(result["filesHoldingTheKey"], found_dirs, strict=True) if d not in facts.waiting
    ]
    if first["kind"] in ("not_yet_in_effect", "no_topic_in_scope"):
        return request.state, first["reason"], awaiting
    if held:
        return HELD, held[0]["reason"], awaiting
    if not result["filesHoldingTheKey"]:
        return DONE, str(facts.run.erasure_proof(request.id)), awaiting
    if not elsewhere:
        until = max(row.purge_after_ms for row in awaiting)
        return (
            PENDING,
            f"erased from the files in force; {len(awaiting)} replaced files wait for purge until {format_ms(until)}",
            awaiting,
        )
    more = f" and {len(elsewhere) - 1} more files" if len(elsewhere) > 1 else ""
    return FAILED, f"the key is still in {elsewhere[0]}{more}", awaiting


def _proof(
    facts: _RunFacts,
    store: Store,
    request: Any,
    rows: list[dict[str, Any]],
    result: dict[str, Any],
    *,
    dry_run: bool,
) -> dict[str, Any]:
    state, detail, awaiting = _state(facts, store, request, rows, result)
    return {
        "requestId": request.id,
        "keyDigest": request.key_sha256,
        "scope": request.scope,
        "target": request.target,
        "reason": request.reason,
        "requestedAt": format_ms(request.requested_at_ms),
        "requestedBy": request.requested_by,
        "runId": facts.info.run_id,
        "asOf": facts.info.as_of,
        "dryRun": dry_run,
        "state": state,
        "detail": detail,
        "topics": [
            {k: r.get(k) for k in ("topic", "kind", "reason", "ledgers", "entries", "bytes", "pendingFiles")}
            for r in rows
            if r.get("topic")
        ],
        "ledgersRewritten": [
            {
                "topic": r["topic"],
                "ledgerId": r["ledgerId"],
                "source": r["source"],
                "generation": r["toGeneration"],
                "entriesRedacted": r["entriesRedacted"],
                "applied": r["topic"] in facts.applied and not dry_run,
            }
            for r in facts.ledgers
            if request.id in (r.get("requestIds") or [])
        ],
        "replacedFilesWaitingForPurge": [
            {
                "path": row.path,
                **({"tierObject": row.tier_key} if row.tier_key else {}),
                "purgeAfter": format_ms(row.purge_after_ms),
                "erasedBy": row.erased_by,
            }
            for row in {id(r): r for r in awaiting}.values()
        ],
        "purged": _purged(store, request),
        "finalScan": result,
    }


def prove(store: Store, run_dir: Path, *, dry_run: bool) -> list[dict[str, Any]]:
    """A proof per request this run decided on (``plan/decisions``), written to ``report/proofs/``; unless a dry
    run, each request's state is recorded from it (and journaled)."""
    run = RunDir(run_dir)
    facts = _run_facts(store, run)
    by_request: dict[int, list[dict[str, Any]]] = {}
    for row in read_table(run.path, ERASURE_DECISIONS.name):
        by_request.setdefault(int(row["requestId"]), []).append(row)
    # One read of each target's files for all the requests naming it.
    wanted: dict[tuple[str, str], set[str]] = {}
    for request_id in by_request:
        if (request := facts.requests.get(request_id)) is not None:
            wanted.setdefault((request.scope, request.target), set()).add(request.key_sha256)
    scans = {
        target: scan(target_dirs(store, *target), digests, store.tier, target_objects(store.tier, *target))
        for target, digests in sorted(wanted.items())
    }
    proofs = []
    for request_id, rows in sorted(by_request.items()):
        request = facts.requests.get(request_id)
        if request is None:
            continue
        proof = _proof(
            facts,
            store,
            request,
            rows,
            scans[(request.scope, request.target)][request.key_sha256],
            dry_run=dry_run,
        )
        write_json(run.erasure_proof(request_id), proof)
        proofs.append(proof)
        if not dry_run and (proof["state"] != request.state or proof["detail"] != request.state_detail):
            _record(store, request_id, proof["state"], proof["detail"], facts.info)
    return proofs


def _purged(store: Store, request: Any) -> list[dict[str, Any]]:
    """Files an erasure replaced or brought forward for the target's topics that purge has removed, and when."""
    with read_transaction(store.engine) as conn:
        rows = conn.execute(
            select(t.pending_deletions).where(
                (t.pending_deletions.c.status == "purged") & t.pending_deletions.c.erased_by.is_not(None)
            )
        ).all()
    out = []
    for row in rows:
        name = TopicName.parse(row.topic)
        covered = (
            str(name.namespace_name) == request.target
            if request.scope == "namespace"
            else request.target in (row.topic, name.partitioned_parent)
        )
        if covered:
            out.append(
                {
                    "path": row.path,
                    **({"tierObject": row.tier_key} if row.tier_key else {}),
                    "purgedAsOf": format_ms(row.finished_as_of_ms),
                    "erasedBy": row.erased_by,
                }
            )
    return out


def _record(store: Store, request_id: int, state: str, detail: str, info: RunInfo) -> None:
    with write_transaction(store.engine) as conn:
        conn.execute(
            update(t.erasure_requests)
            .where(t.erasure_requests.c.id == request_id)
            .values(state=state, state_detail=detail, run_id=info.run_id, updated_as_of_ms=int(info.as_of_ms))
        )
        request = conn.execute(
            select(t.erasure_requests).where(t.erasure_requests.c.id == request_id)
        ).first()
        journal(
            conn,
            run_id=info.run_id,
            mechanism="erasure",
            topic=request.target if request.scope == "topic" else None,
            action="erase_request",
            status=state,
            detail={"requestId": request_id, "keyDigest": request.key_sha256, "detail": detail},
            as_of_ms=int(info.as_of_ms),
            actor=str(info.actor or "housekeeping"),
        )
