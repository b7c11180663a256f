"""Spark app: apply a checked compaction plan. Writes each topic's new compacted ledger, then switches the
topic to it (protocol in ``housekeeping.store.compacted_ledgers``), committing through the apply engine
(``housekeeping.engine.apply.ApplyRun``) as every apply does.

1. ``ApplyRun.open``: only a plan the gate passed unchanged (digest check), planned on this store; topics the
   journal shows applied for this run are skipped (a rerun after a crash completes the rest).
2. Stage every planned topic's new ledger in the metadata (before any file exists).
3. One Spark job copies the kept entries (payloads and properties included) of every staged topic whose ledger
   directory is not there yet into a temporary directory under the run, one sub-directory per topic written by
   the task that reads the topic's input and its kept positions in the plan; the row count of each is checked
   against the plan, then it is renamed into the store as the ledger directory.
4. Per topic, one transaction (``ApplyRun.commit``: a hold added since wins): compare-and-set, switch, journal.

Memory: entries flow executor-side from the input files to the output files, each topic's in one task that reads
its input a file at a time and holds only the kept entries (its new compacted ledger, sorted and written as one
file; no shuffle of the entries); the driver handles per-topic metadata only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.errors import InputError
from housekeeping.core.positions import parse_position
from housekeeping.engine.apply import ApplyRun, TopicOutcome
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.compaction.actions import REWRITE_COMPACTED
from housekeeping.mechanisms.compaction.tables import COMPACTION_DECISIONS, COMPACTION_KEPT
from housekeeping.store import compacted_ledgers
from housekeeping.store.fs import remove_tree
from housekeeping.store.journal import plan_rows
from housekeeping.store.store import Store
from spark_apps.compaction.entries import (
    TopicWork,
    at_positions,
    map_topic_inputs,
    positions_by_ledger,
    topic_inputs,
    topic_sources,
)
from spark_apps.shared.io import LedgerFiles
from spark_apps.shared.session import get_spark, run_scoped_cache

if TYPE_CHECKING:
    import pyarrow as pa


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Apply a gate-checked compaction plan to the store.")
    parser.add_argument("--run-dir", required=True)
    return parser.parse_args(argv)


def kept_ledger_facts(kept_dir: Path) -> dict[str, dict[str, Any]]:
    """Per topic of a plan's kept entries (the :data:`COMPACTION_KEPT` part files): its new compacted ledger's
    oldest and newest entry time, its tombstones (keyed, payload size 0) and the oldest tombstone's time. Read a
    row group at a time, so the driver holds a row per topic, not the entries."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    facts: dict[str, dict[str, Any]] = {}
    for path in sorted(kept_dir.glob("part-*")):
        for batch in pq.ParquetFile(path).iter_batches(columns=["topic", "entryTs", "size", "keyDigest"]):
            tombstone = pc.and_(pc.equal(batch["size"], 0), pc.is_valid(batch["keyDigest"]))
            rows = pa.table(
                {
                    "topic": batch["topic"],
                    "entryTs": batch["entryTs"],
                    "tombstone": tombstone.cast(pa.int64()),
                    "tombstoneTs": pc.if_else(tombstone, batch["entryTs"], pa.scalar(None, pa.int64())),
                }
            )
            aggregated = rows.group_by("topic", use_threads=False).aggregate(
                [("entryTs", "min"), ("entryTs", "max"), ("tombstone", "sum"), ("tombstoneTs", "min")]
            )
            for row in aggregated.to_pylist():
                _merge_facts(facts.setdefault(row["topic"], {}), row)
    return facts


def _merge_facts(into: dict[str, Any], row: dict[str, Any]) -> None:
    """Fold one batch's aggregates of a topic into its facts so far (a null is no value, as in SQL)."""
    for name, key, pick in (
        ("minTs", "entryTs_min", min),
        ("maxTs", "entryTs_max", max),
        ("oldestTombstone", "tombstoneTs_min", min),
    ):
        values = [v for v in (into.get(name), row[key]) if v is not None]
        into[name] = pick(values) if values else None
    into["tombstones"] = (into.get("tombstones") or 0) + (row["tombstone_sum"] or 0)


def _planned_ledgers(run: RunDir, actions: list[dict]) -> dict:
    stats = kept_ledger_facts(run.plan_table(COMPACTION_KEPT))
    planned = {}
    for action in actions:
        row = stats.get(action["topic"])
        where = f"topic {action['topic']} rewrite_compacted"
        planned[action["topic"]] = compacted_ledgers.PlannedLedger(
            topic=action["topic"],
            replaces=action.get("ledgerId"),
            cursor_from=parse_position(action["from"], where) if action.get("from") else None,
            horizon=parse_position(action["to"], where),
            entries=int(action["entriesKept"]),
            size_bytes=int(action["bytes"]),
            min_entry_ts_ms=row["minTs"] if row else None,
            max_entry_ts_ms=row["maxTs"] if row else None,
            tombstones=int(row["tombstones"]) if row else 0,
            oldest_tombstone_ts_ms=row["oldestTombstone"] if row else None,
        )
    return planned


def _ledger_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in sorted(path.glob("*.parquet")))


def kept_entries(parts: Iterable[pa.Table], kept: pa.Table | None) -> pa.Table:
    """The rows of one topic's input (``parts``, a file each) at the ``kept`` positions (ledgerId, entryId), in
    position order, as a ledger's entries. Pure. Each part is filtered as it comes, so a task holds the new
    compacted ledger, not the topic's input."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from housekeeping.store.entries import ENTRY_SCHEMA

    by_ledger = positions_by_ledger(kept)
    chosen_parts = [part.filter(at_positions(part, by_ledger)).select(ENTRY_SCHEMA.names) for part in parts]
    rows = pa.concat_tables(chosen_parts) if chosen_parts else ENTRY_SCHEMA.empty_table()
    return rows.take(pc.sort_indices(rows, [("ledgerId", "ascending"), ("entryId", "ascending")]))


def _write_ledgers(spark, store, run: RunDir, info: RunInfo, to_write: dict[str, int], planned: dict) -> None:
    """Copy the kept entries of the topics in ``to_write`` (topic -> new ledger id) into their ledger dirs: each
    topic's in the task that reads its input (no shuffle of the entries), into the run's staging directory."""
    import pyarrow as pa

    from housekeeping.store.entries import ENTRY_SCHEMA

    if not to_write:
        return
    run_dir = run.path
    slots = {topic: index for index, topic in enumerate(sorted(to_write))}
    decisions = [r for r in read_table(run_dir, COMPACTION_DECISIONS.name) if r["topic"] in slots]
    files = LedgerFiles.of(info)
    sources = topic_sources(spark, files, topic_inputs(decisions))
    staging = run.apply_dir / f"compacted-{uuid.uuid4().hex}"

    positions = pa.schema([COMPACTION_KEPT.arrow_schema().field(name) for name in ("ledgerId", "entryId")])

    def copy(work: TopicWork) -> Any:
        from housekeeping.store.entries import write_ledger

        rows = kept_entries(work.entries, work.rows[COMPACTION_KEPT.name])
        write_ledger(staging / f"slot={slots[work.source['topic']]}", rows)
        return pa.table({"topic": [work.source["topic"]], "rows": pa.array([rows.num_rows], pa.int64())})

    # Each task reads its topics' kept positions from the plan's part files itself: no shuffle of the positions.
    written = map_topic_inputs(
        sources,
        len(decisions),
        files.tier,
        ENTRY_SCHEMA.names,
        copy,
        "topic string, rows long",
        rows={COMPACTION_KEPT.name: (str(run.plan_table(COMPACTION_KEPT)), positions)},
    ).collect()
    checkpoint("compaction_apply_after_spark_write")
    try:
        if {r["topic"] for r in written} != set(slots):
            raise InputError(
                f"the compacted ledgers of {sorted(set(slots) - {r['topic'] for r in written})} were not written"
            )
        for topic, slot in slots.items():
            target = store.ledger_dir(topic, to_write[topic])
            written_dir = staging / f"slot={slot}"
            expected = planned[topic].entries
            count = _ledger_rows(written_dir)
            if count != expected:
                raise InputError(
                    f"topic {topic}: the written compacted ledger has {count} entries, the checked plan {expected}; "
                    "nothing switched"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(written_dir, target)  # one rename: the ledger directory is complete or absent
            checkpoint("compaction_apply_between_ledger_renames")
    finally:
        with contextlib.suppress(OSError):
            remove_tree(staging, within=run.apply_dir)


def _stage(conn: Any, applying: ApplyRun, planned: compacted_ledgers.PlannedLedger) -> TopicOutcome:
    """Record (or find, on a rerun) the staged ledger; not journaled: nothing is in force yet."""
    ledger_id = compacted_ledgers.stage(
        conn,
        planned,
        run_id=applying.run_id,
        as_of_ms=applying.as_of_ms,
        purge_after_ms=applying.purge_after_ms,
    )
    if ledger_id is None:
        return TopicOutcome("skipped_conflict", "topic no longer exists", journaled=False)
    return TopicOutcome("staged", facts={"ledgerId": ledger_id}, journaled=False)


def _switch(
    conn: Any, applying: ApplyRun, planned: compacted_ledgers.PlannedLedger, ledger_id: int, action: dict
) -> TopicOutcome:
    """Compare-and-set, then make the staged ledger current (``compacted_ledgers.switch``)."""
    why = compacted_ledgers.switch(
        conn,
        planned,
        ledger_id,
        run_id=applying.run_id,
        as_of_ms=applying.as_of_ms,
        purge_after_ms=applying.purge_after_ms,
    )
    if why:
        return TopicOutcome("skipped_conflict", why, REWRITE_COMPACTED.name, {"why": why})
    detail = {
        "compactedLedger": ledger_id,
        "replaced": action.get("ledgerId"),
        "horizon": action["to"],
        "entries": planned.entries,
        "bytes": planned.size_bytes,
        "reason": action["reason"],
        **{k: v for k, v in action.items() if k.startswith("entries")},
        "planRows": plan_rows([action]),
    }
    return TopicOutcome("applied", None, REWRITE_COMPACTED.name, detail)


def run(spark, run_dir: str | Path, store=None, purge_grace_seconds: int | None = None) -> dict:
    from housekeeping.core.settings import Settings
    from housekeeping.mechanisms.compaction import MECHANISM

    run_ = RunDir(run_dir)
    settings = Settings.from_env()
    store = store or Store.of_settings(settings)
    grace = MECHANISM.purge_grace_seconds(settings) if purge_grace_seconds is None else purge_grace_seconds
    actions = [a for a in read_table(run_.path, ACTIONS.name) if a["action"] == REWRITE_COMPACTED.name]
    with run_scoped_cache(spark):
        applying = ApplyRun.open(
            store, run_.path, MECHANISM, purge_grace_seconds=grace, detail={"topics": len(actions)}
        )
        result: dict = {
            "runId": applying.run_id,
            "appliedTopics": [],
            "alreadyAppliedTopics": sorted(a["topic"] for a in actions if a["topic"] in applying.done),
            "skippedTopics": {},
            "compactedLedgers": {},
            "compactedLedgersReplaced": 0,
            "entriesWritten": 0,
            "bytesWritten": 0,
            "ledgersDeleted": 0,
            "bytesDeleted": 0,
            "perNamespace": {},
        }
        todo = [a for a in actions if a["topic"] not in applying.done]
        planned = _planned_ledgers(run_, todo) if todo else {}
        staged: dict[str, int] = {}
        for action in todo:
            topic = action["topic"]
            outcome = applying.commit(
                topic,
                [action],
                lambda conn, t=topic: _stage(conn, applying, planned[t]),
                held_action=REWRITE_COMPACTED.name,
            )
            if outcome.status == "staged":
                staged[topic] = outcome.facts["ledgerId"]
            else:
                result["skippedTopics"][topic] = outcome.why
        checkpoint("compaction_apply_after_stage")
        # A rerun finds ledgers a crashed attempt already renamed into place: complete by construction (one
        # rename), but checked against the plan anyway; anything else is (re)written.
        to_write = {}
        for topic, ledger_id in staged.items():
            target = store.ledger_dir(topic, ledger_id)
            if target.is_dir() and _ledger_rows(target) == planned[topic].entries:
                continue
            if target.exists():
                store.remove_ledger_dir(store.ledger_rel_path(topic, ledger_id))
            to_write[topic] = ledger_id
        _write_ledgers(spark, store, run_, applying.info, to_write, planned)
        checkpoint("compaction_apply_before_switch")
        for action in todo:
            topic = action["topic"]
            if topic not in staged:
                continue
            # A hold added since staging wins (commit re-reads the holds): the staged ledger stays staged and the
            # next compaction apply abandons it into the pending-deletion log, as after a crash.
            outcome = applying.commit(
                topic,
                [action],
                lambda conn, t=topic, a=action: _switch(conn, applying, planned[t], staged[t], a),
                held_action=REWRITE_COMPACTED.name,
            )
            checkpoint("compaction_apply_after_switch")
            if not outcome.applied:
                result["skippedTopics"][topic] = outcome.why
                continue
            _count_switched(result, action, staged[topic], planned[topic])
        return applying.finish(result)


def _count_switched(
    result: dict, action: dict, ledger_id: int, planned: compacted_ledgers.PlannedLedger
) -> None:
    """Add a topic whose new compacted ledger is now in force to the run's result."""
    topic = action["topic"]
    result["appliedTopics"].append(topic)
    result["compactedLedgers"][topic] = ledger_id
    result["compactedLedgersReplaced"] += int(action.get("ledgerId") is not None)
    result["entriesWritten"] += planned.entries
    result["bytesWritten"] += planned.size_bytes
    namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]
    per_ns = result["perNamespace"].setdefault(namespace, {"topics": 0, "entries": 0, "bytes": 0})
    per_ns["topics"] += 1
    per_ns["entries"] += planned.entries
    per_ns["bytes"] += planned.size_bytes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = get_spark("housekeeping-apply-compaction")
    result = run(spark, args.run_dir)
    print(json.dumps(result, sort_keys=True))
    return 0
