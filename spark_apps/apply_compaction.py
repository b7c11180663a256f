"""Spark app: apply a checked compaction plan. Writes each topic's new compacted ledger, then switches the
topic to it (protocol in ``housekeeping.compaction``).

1. Only a plan the gate passed unchanged (digest check); topics the journal shows applied for this run are
   skipped (a rerun after a crash completes the rest).
2. Stage every planned topic's new ledger in the metadata (before any file exists).
3. One Spark job copies the kept entries (payloads and properties included) of every staged topic whose ledger
   directory is not there yet into a temporary directory under the run, one sub-directory per topic; the row
   count of each is checked against the plan, then it is renamed into the store as the ledger directory.
4. Per topic, one transaction: compare-and-set, switch, journal.

Memory: entries flow executor-side from the input files to the output files (a join on positions and a sort
per topic); the driver handles per-topic metadata only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import uuid
from pathlib import Path

from pyspark.sql import functions as F

if __package__ in (None, ""):  # run by spark-submit as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from housekeeping.faults import checkpoint  # noqa: E402
from housekeeping.fs import remove_file, remove_tree  # noqa: E402
from spark_apps.common import get_spark, run_scoped_cache  # noqa: E402
from spark_apps.compaction_io import read_compaction_input, topic_inputs  # noqa: E402
from spark_apps.validate_compaction import KEPT_SCHEMA  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Apply a gate-checked compaction plan to the store.")
    parser.add_argument("--run-dir", required=True)
    return parser.parse_args(argv)


def _planned_ledgers(spark, run_dir: Path, actions: list[dict]) -> dict:
    from housekeeping.compaction import PlannedLedger
    from housekeeping.manifest import parse_position

    kept = spark.read.schema(KEPT_SCHEMA).parquet(str(run_dir / "plan" / "compaction" / "kept"))
    tombstone = (F.col("size") == 0) & F.col("key").isNotNull()
    stats = {
        r["topic"]: r
        for r in kept.groupBy("topic")
        .agg(
            F.min("entryTs").alias("minTs"),
            F.max("entryTs").alias("maxTs"),
            F.sum(tombstone.cast("long")).alias("tombstones"),
            F.min(F.when(tombstone, F.col("entryTs"))).alias("oldestTombstone"),
        )
        .collect()
    }
    planned = {}
    for action in actions:
        row = stats.get(action["topic"])
        where = f"topic {action['topic']} rewrite_compacted"
        planned[action["topic"]] = PlannedLedger(
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


def _write_ledgers(spark, store, run_dir: Path, info: dict, to_write: dict[str, int], planned: dict) -> None:
    """Copy the kept entries of the topics in ``to_write`` (topic -> new ledger id) into their ledger dirs."""
    import pyarrow as pa

    from housekeeping.entries import ENTRY_SCHEMA, write_ledger
    from housekeeping.errors import InputError
    from housekeeping.plan import read_table

    if not to_write:
        return
    slots = {topic: index for index, topic in enumerate(sorted(to_write))}
    decisions = [r for r in read_table(run_dir, "decisions") if r["topic"] in slots]
    entries = read_compaction_input(spark, info["store"], topic_inputs(decisions), full=True)
    kept = (
        spark.read.schema(KEPT_SCHEMA)
        .parquet(str(run_dir / "plan" / "compaction" / "kept"))
        .select("topic", "ledgerId", "entryId")
    )
    slot_frame = spark.createDataFrame(list(slots.items()), "topic string, slot int")
    staging = run_dir / "apply" / f"compacted-{uuid.uuid4().hex}"
    (
        entries.join(kept, ["topic", "ledgerId", "entryId"])
        .join(F.broadcast(slot_frame), "topic")
        .select("slot", *ENTRY_SCHEMA.names)
        .repartition(max(1, min(len(slots), 64)), "slot")
        .sortWithinPartitions("slot", "ledgerId", "entryId")
        .write.option("compression", "zstd")
        .partitionBy("slot")
        .parquet(str(staging))
    )
    checkpoint("compaction_apply_after_spark_write")
    try:
        for topic, slot in slots.items():
            target = store.ledger_dir(topic, to_write[topic])
            written = staging / f"slot={slot}"
            expected = planned[topic].entries
            if not written.is_dir():
                if expected != 0:
                    raise InputError(
                        f"topic {topic}: the compacted ledger was not written ({expected} entries planned)"
                    )
                write_ledger(target, pa.table({name: [] for name in ENTRY_SCHEMA.names}, schema=ENTRY_SCHEMA))
                continue
            count = _ledger_rows(written)
            if count != expected:
                raise InputError(
                    f"topic {topic}: the written compacted ledger has {count} entries, the checked plan {expected}; "
                    "nothing switched"
                )
            for crc in written.glob(".*.crc"):
                remove_file(crc, within=staging)  # Hadoop checksum side files of the run's own staging output
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(written, target)  # one rename: the ledger directory is complete or absent
            checkpoint("compaction_apply_between_ledger_renames")
    finally:
        with contextlib.suppress(OSError):
            remove_tree(staging, within=run_dir / "apply")


def run(spark, run_dir: str | Path, store=None, purge_grace_seconds: int | None = None) -> dict:

    from housekeeping import compaction
    from housekeeping.actor import current_actor
    from housekeeping.apply import begin_run, finish_run, journal, plan_rows
    from housekeeping.errors import InputError
    from housekeeping.gate import require_passed_gate
    from housekeeping.holds import current_hold
    from housekeeping.holds import describe as describe_hold
    from housekeeping.plan import read_table
    from housekeeping.settings import Settings
    from housekeeping.snapshot import read_run_info
    from housekeeping.store import write_transaction

    run_dir = Path(run_dir)
    gate = require_passed_gate(run_dir)
    info = read_run_info(run_dir)
    settings = Settings.from_env()
    store = store or settings.open_store()
    if Path(info["store"]).resolve() != store.root:
        raise InputError(f"run {run_dir} was planned on store {info['store']}, not on {store.root}")
    grace = settings.purge_grace_seconds if purge_grace_seconds is None else purge_grace_seconds
    as_of_ms = int(info["asOfMs"])
    purge_after_ms = as_of_ms + grace * 1000
    run_id = f"{info['runId']}@{gate['planDigest'][:16]}"
    actor = str(info.get("actor") or current_actor())
    actions = [a for a in read_table(run_dir, "actions") if a["action"] == "rewrite_compacted"]
    result: dict = {
        "runId": run_id,
        "appliedTopics": [],
        "alreadyAppliedTopics": [],
        "skippedTopics": {},
        "compactedLedgers": {},
        "compactedLedgersReplaced": 0,
        "entriesWritten": 0,
        "bytesWritten": 0,
        "ledgersDeleted": 0,
        "bytesDeleted": 0,
        "perNamespace": {},
    }
    with run_scoped_cache(spark):
        done = begin_run(
            store,
            run_id=run_id,
            mechanism="compaction",
            as_of_ms=as_of_ms,
            actor=actor,
            detail={"topics": len(actions)},
        )
        todo = [a for a in actions if a["topic"] not in done]
        result["alreadyAppliedTopics"] = sorted(a["topic"] for a in actions if a["topic"] in done)
        planned = _planned_ledgers(spark, run_dir, todo) if todo else {}
        staged: dict[str, int] = {}
        for action in todo:
            topic = action["topic"]
            with write_transaction(store.engine) as conn:
                if (hold := current_hold(conn, topic)) is not None:
                    result["skippedTopics"][topic] = describe_hold(hold)
                    journal(
                        conn,
                        run_id=run_id,
                        mechanism="compaction",
                        topic=topic,
                        action="rewrite_compacted",
                        status="skipped_held",
                        detail={"why": describe_hold(hold), "planRows": plan_rows([action])},
                        as_of_ms=as_of_ms,
                        actor=actor,
                    )
                    continue
                ledger_id = compaction.stage(
                    conn,
                    planned[topic],
                    run_id=run_id,
                    as_of_ms=as_of_ms,
                    purge_after_ms=purge_after_ms,
                )
            if ledger_id is None:
                result["skippedTopics"][topic] = "topic no longer exists"
            else:
                staged[topic] = ledger_id
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
        _write_ledgers(spark, store, run_dir, info, to_write, planned)
        checkpoint("compaction_apply_before_switch")
        for action in todo:
            topic = action["topic"]
            if topic not in staged:
                continue
            with write_transaction(store.engine) as conn:
                # A hold added since staging wins: the staged ledger stays staged and the next compaction
                # apply abandons it into the pending-deletion log, as after a crash.
                hold = current_hold(conn, topic)
                why = (
                    describe_hold(hold)
                    if hold is not None
                    else compaction.switch(
                        conn,
                        planned[topic],
                        staged[topic],
                        run_id=run_id,
                        as_of_ms=as_of_ms,
                        purge_after_ms=purge_after_ms,
                    )
                )
                journal(
                    conn,
                    run_id=run_id,
                    mechanism="compaction",
                    topic=topic,
                    action="rewrite_compacted",
                    status="skipped_held" if hold is not None else "skipped_conflict" if why else "applied",
                    detail=(
                        {"why": why}
                        if why
                        else {
                            "compactedLedger": staged[topic],
                            "replaced": action.get("ledgerId"),
                            "horizon": action["to"],
                            "entries": planned[topic].entries,
                            "bytes": planned[topic].size_bytes,
                            "reason": action["reason"],
                            **{k: v for k, v in action.items() if k.startswith("entries")},
                            "planRows": plan_rows([action]),
                        }
                    ),
                    as_of_ms=as_of_ms,
                    actor=actor,
                )
            checkpoint("compaction_apply_after_switch")
            if why:
                result["skippedTopics"][topic] = why
                continue
            result["appliedTopics"].append(topic)
            result["compactedLedgers"][topic] = staged[topic]
            result["compactedLedgersReplaced"] += int(action.get("ledgerId") is not None)
            result["entriesWritten"] += planned[topic].entries
            result["bytesWritten"] += planned[topic].size_bytes
            namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]
            per_ns = result["perNamespace"].setdefault(namespace, {"topics": 0, "entries": 0, "bytes": 0})
            per_ns["topics"] += 1
            per_ns["entries"] += planned[topic].entries
            per_ns["bytes"] += planned[topic].size_bytes
        finish_run(
            store, run_id=run_id, mechanism="compaction", as_of_ms=as_of_ms, actor=actor, detail=result
        )
    out = run_dir / "apply"
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = get_spark("housekeeping-apply-compaction")
    result = run(spark, args.run_dir)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
