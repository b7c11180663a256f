"""The scrub's part of the snapshot, written after the metadata tables (``Mechanism.after_snapshot``):

1. the wall clock, read once: the one physical time the scrub compares (a file's age is its modification time);
2. one read of every metadata row that names a file location (``SCRUB_EXPECTED``);
3. the storage listed: the ledger tree walked with ``os.scandir`` and the tier listed by prefix (S3 pages through
   the listing), one row per item (``STORAGE_ITEMS``);
4. the same rows read again: a row that changed while the storage was walked is not ``stable``, so a ledger written
   or deleted meanwhile is never reported missing.

Metadata first, storage second: a file written after the read is young (never an orphan candidate), and a file the
read names was there before the listing began unless something deleted it, which the second read sees.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName, topic_of_dir_parts
from housekeeping.core.scope import in_scope
from housekeeping.engine.parquet_rows import ParquetRows
from housekeeping.engine.run_dir import RunDir, write_json
from housekeeping.mechanisms.scrub.tables import LOCAL, SCRUB_EXPECTED, STORAGE_ITEMS, TIER
from housekeeping.store import metadata_schema as t
from housekeeping.store.fs import remove_file
from housekeeping.store.holds import hold_for, load_holds
from housekeeping.store.store import (
    LEDGER_DIR_NAME,
    LEDGERS_DIR,
    ORPHAN_KIND,
    WRITER_STAGING_NAME,
    Store,
    attempt_object,
    ledger_rel_path,
    read_transaction,
)
from housekeeping.store.tier import CLAIM_OBJECT, ObjectTier, TierError, parse_object_key

Row = dict[str, Any]
# An object whose store gives no modification time is treated as written now: never old enough to be a candidate.
UNKNOWN_MTIME_MS = 2**62


def scrub_info_path(run_dir: str | Path) -> Path:
    """``snapshot/scrub.json``: the scrub's wall clock, minimum age and what was listed."""
    return RunDir(run_dir).snapshot_dir / "scrub.json"


def write_scrub_snapshot(store: Store, run_dir: Path, scope: tuple[str, ...], min_age_seconds: int) -> dict:
    wall_clock_ms = int(time.time() * 1000)  # physical on purpose: file ages (docs/semantics.md §10)
    wanted = _scope_filter(scope)
    # The first read goes to a Parquet file as it is read (stable unknown yet); the second keeps a digest per row;
    # the table is then written from the first with ``stable`` set. At 100,000 topics both reads held as rows were
    # most of the scrub's Python memory.
    run = RunDir(run_dir)
    with ParquetRows(run.snapshot_dir / ".scrub_expected.first.parquet", SCRUB_EXPECTED) as first:
        first.extend({**row, "stable": False} for row in expected_rows(store) if wanted(row["topic"]))
    with ParquetRows(run.snapshot_table(STORAGE_ITEMS), STORAGE_ITEMS) as items:
        items.extend(item for item in list_local(store) if wanted(item["topic"]))
        tier = store.tier
        if tier is not None:
            items.extend(item for item in list_tier(tier) if wanted(item["topic"]))
    again = {_identity(row) for row in expected_rows(store) if wanted(row["topic"])}
    with ParquetRows(run.snapshot_table(SCRUB_EXPECTED), SCRUB_EXPECTED) as expected:
        expected.extend({**row, "stable": _identity(row) in again} for row in first.read_back())
    remove_file(first.path, within=run.snapshot_dir)
    info = {
        "wallClockMs": wall_clock_ms,
        "minAgeSeconds": int(min_age_seconds),
        "tier": tier.where if tier is not None else None,
        "itemsListed": items.count,
        "locationsExpected": expected.count,
        "scope": list(scope),
    }
    write_json(scrub_info_path(run_dir), info)
    return info


def _scope_filter(scope: tuple[str, ...]):
    def wanted(topic: str | None) -> bool:
        if not scope:
            return True
        return topic is not None and in_scope(topic, scope)

    return wanted


def _identity(row: Row) -> bytes:
    """A row's digest, ``stable`` aside (16 bytes per row instead of the row)."""
    return hashlib.blake2b(
        repr(sorted((k, v) for k, v in row.items() if k != "stable")).encode(), digest_size=16
    ).digest()


# --- what the metadata names ------------------------------------------------------------------------------------


def expected_rows(store: Store) -> Iterator[Row]:
    """Every file location the metadata names, from one read transaction (see ``SCRUB_EXPECTED``), as it is read."""
    with read_transaction(store.engine) as conn:
        holds = load_holds(conn)
        yield from _ledger_rows(conn)
        yield from _compacted_rows(conn)
        yield from _pending_rows(conn, holds)
    if store.tier is not None:
        yield _row(TIER, CLAIM_OBJECT, "claim", None)


def _row(location: str, path: str, source: str, topic: str | None, **facts: Any) -> Row:
    return {
        "location": location,
        "path": path,
        "source": source,
        "topic": topic,
        "ledgerId": facts.get("ledgerId"),
        "entries": facts.get("entries"),
        "size": facts.get("size"),
        "isOpen": bool(facts.get("isOpen", False)),
        "mustExist": bool(facts.get("mustExist", False)),
        "checkIds": bool(facts.get("checkIds", False)),
        "pendingId": facts.get("pendingId"),
        "purgeAfterMs": facts.get("purgeAfterMs"),
        "runId": facts.get("runId"),
        "held": bool(facts.get("held", False)),
    }


def _ledger_rows(conn: Any) -> Iterator[Row]:
    for r in conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id)):
        facts = {"ledgerId": r.ledger_id, "entries": r.entries, "size": r.size_bytes, "checkIds": True}
        if not r.local_deleted:
            # Named whether or not entries are stored: a directory of a ledger still listed is never an orphan.
            yield _row(
                LOCAL,
                ledger_rel_path(r.topic, r.ledger_id, r.files_generation),
                "ledger",
                r.topic,
                isOpen=r.closed_at_ms is None,
                mustExist=r.entries_stored,
                **facts,
            )
        key = attempt_object(r._mapping)
        if key is not None:
            yield _row(TIER, key, "ledger", r.topic, mustExist=r.offload_complete, **facts)


def _compacted_rows(conn: Any) -> Iterator[Row]:
    for r in conn.execute(select(t.compacted_ledgers).order_by(t.compacted_ledgers.c.topic)):
        yield _row(
            LOCAL,
            ledger_rel_path(r.topic, r.ledger_id, r.files_generation),
            "compacted",
            r.topic,
            ledgerId=r.ledger_id,
            entries=r.entries,
            size=r.size_bytes,
            mustExist=r.status == "current",
        )


def _pending_rows(conn: Any, holds: dict) -> Iterator[Row]:
    p = t.pending_deletions
    query = select(p).where(
        p.c.status.in_(("pending", "purged")) | ((p.c.status == "restored") & (p.c.kind == ORPHAN_KIND))
    )
    for r in conn.execute(query.order_by(p.c.id)):
        source = {"pending": "pending", "purged": "purged"}.get(r.status, "restored_orphan")
        facts = {
            "ledgerId": r.ledger_id,
            "size": r.size_bytes,
            "pendingId": r.id,
            "purgeAfterMs": r.purge_after_ms,
            "runId": r.run_id,
            "held": hold_for(r.topic, holds) is not None if _is_topic(r.topic) else False,
        }
        if r.path:
            yield _row(LOCAL, r.path, source, r.topic, **facts)
        if r.tier_key:
            yield _row(TIER, r.tier_key, source, r.topic, **facts)


def _is_topic(name: str) -> bool:
    try:
        TopicName.parse(name)
    except InputError:
        return False
    return True


# --- what the storage holds -------------------------------------------------------------------------------------


def _scan(path: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except PermissionError as exc:
        raise InputError(
            f"store scrub: directory {path} cannot be read ({exc.strerror}); nothing was changed"
        ) from exc
    except FileNotFoundError:
        return []  # removed while walking (a purge): nothing there to report


def _item(location: str, path: str, kind: str, topic: str | None, **facts: Any) -> Row:
    return {
        "location": location,
        "path": path,
        "kind": kind,
        "topic": topic,
        "ledgerId": facts.get("ledgerId"),
        "bytes": int(facts.get("bytes", 0)),
        "files": int(facts.get("files", 0)),
        "mtimeMs": int(facts.get("mtimeMs", 0)),
    }


def item_facts(path: Path) -> dict[str, int] | None:
    """A directory's file count, bytes and newest modification time (its own and its files'); a file's own. The
    listing records these and the repair compares them again before it queues the item. None: it is gone (a
    writer's staging directory renamed onto its ledger, a purge, while the tree was walked)."""
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return None
    if not path.is_dir() or path.is_symlink():
        return {"bytes": stat.st_size, "files": 1, "mtimeMs": stat.st_mtime_ns // 1_000_000}
    total, files, newest = 0, 0, stat.st_mtime_ns
    for child in _scan(path):
        try:
            child_stat = child.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        files += 1
        total += child_stat.st_size
        newest = max(newest, child_stat.st_mtime_ns)
    return {"bytes": total, "files": files, "mtimeMs": newest // 1_000_000}


def _present(item: Row, path: Path) -> Iterator[Row]:
    """The item with its facts, unless it went while the tree was walked."""
    facts = item_facts(path)
    if facts is not None:
        yield {**item, **facts}


def list_local(store: Store) -> Iterator[Row]:
    """Every item of the ledger tree ``ledgers/persistent/<tenant>/<namespace>/<topic>/<item>``; anything at another
    depth or of another shape is ``other``."""
    root = store.ledgers_root
    if not root.exists():
        return
    for entry in _scan(root):
        rel = f"{LEDGERS_DIR}/{entry.name}"
        if entry.name != "persistent" or not entry.is_dir(follow_symlinks=False):
            yield from _present(_item(LOCAL, rel, "other", None), Path(entry.path))
            continue
        yield from _walk(Path(entry.path), rel, ())


def _walk(path: Path, rel: str, parts: tuple[str, ...]) -> Iterator[Row]:
    for entry in sorted(_scan(path), key=lambda e: e.name):
        child_rel = f"{rel}/{entry.name}"
        is_dir = entry.is_dir(follow_symlinks=False)
        if len(parts) < 3:
            if is_dir:
                yield from _walk(Path(entry.path), child_rel, (*parts, entry.name))
            else:
                yield from _present(_item(LOCAL, child_rel, "other", None), Path(entry.path))
            continue
        topic = topic_of_dir_parts(*parts)
        ledger = LEDGER_DIR_NAME.match(entry.name)
        staging = WRITER_STAGING_NAME.match(entry.name)
        if is_dir and ledger:
            kind, ledger_id = "ledger_dir", int(entry.name.split(".")[0])
        elif is_dir and staging:
            kind, ledger_id = "staging_dir", int(staging.group(1).split(".")[0])
        else:
            kind, ledger_id = "other", None
        yield from _present(_item(LOCAL, child_rel, kind, topic, ledgerId=ledger_id), Path(entry.path))


def list_tier(tier: ObjectTier) -> Iterator[Row]:
    """Every object under the tier's ``persistent/`` prefix (by prefix listing); an unreachable tier or a bucket it
    may not list is bad input naming it."""
    tier.check()
    try:
        objects = list(tier.list_objects("persistent"))
    except TierError as exc:
        raise InputError(f"store scrub: {exc}; nothing was changed") from exc
    for obj in objects:
        mtime = obj.mtime_ms if obj.mtime_ms is not None else UNKNOWN_MTIME_MS
        parsed = parse_object_key(obj.key)
        if parsed is None:
            parts = obj.key.split("/")
            topic = topic_of_dir_parts(*parts[1:4]) if len(parts) == 5 else None
            yield _item(TIER, obj.key, "other", topic, bytes=obj.size, files=1, mtimeMs=mtime)
            continue
        directory, ledger_id, _ = parsed
        topic = topic_of_dir_parts(*directory.split("/"))
        yield _item(
            TIER, obj.key, "tier_object", topic, ledgerId=ledger_id, bytes=obj.size, files=1, mtimeMs=mtime
        )
