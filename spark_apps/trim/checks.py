"""Trim's gate checks over one bucket of topics, re-derived from the snapshot apart from the planner: plain Python
over the bucket's rows (``spark_apps.trim.gate`` runs them in one Spark pass; the unit tests call them alone). Each
check is an invariant of the planned actions, not a second copy of the rule: a deletion is checked against every
durable cursor of its topic, not against "the slowest" one.

- deletions: the ledger exists in the snapshot with the planned size; it is not the topic's current ledger and is
  closed; no durable cursor pins it; the deleted set is a contiguous oldest prefix; retention allows it (time
  strictly expired, or what remains of the topic's total is still >= the size quota); the system-topic retention
  default (0, 0) applies exactly to the topics whose name makes them system topics (read from the name here).
- cursor moves: the cursor exists at the planned ``from``; it is non-durable; ``to`` is strictly after ``from``
  (never backward), is the last entry of the topic's deleted range and not past the topic's end.
- local copies (the offload-deletion lag): each planned one is listed, offloaded (complete, at the time the plan
  names), still local, under an offloader, past its lag (>= 0, strict), not deleted by retention in the same plan,
  with the snapshot's bytes; every due local copy of an unheld topic is planned.
- namespaces: the bytes deleted per namespace, added up by the gate (``namespace_frame``) to reconcile with the
  planner's summary and the blast-radius limit.

Unknowns (a topic, ledger or cursor the snapshot lacks, a position that does not parse, a null the plan holds) fail
the check that needs them: each check is a plain boolean, true only when what it needs is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER, DELETE_LOCAL_COPY
from spark_apps.shared.rows import Row, struct_key
from spark_apps.shared.topic_names import name_facts, retention_default_fits

DELETION_CHECKS = (
    "ledger_in_snapshot",
    "bytes_match_snapshot",
    "not_current_ledger",
    "ledger_is_closed",
    "no_durable_cursor_pins_it",
    "contiguous_oldest_prefix",
    "retention_allows_delete",
    "retention_default_fits_the_name",
)
CURSOR_CHECKS = (
    "cursor_in_snapshot",
    "from_is_current_mark_delete",
    "cursor_is_non_durable",
    "moves_forward",
    "to_is_end_of_deleted_range",
    "not_past_last_entry",
)
LOCAL_COPY_CHECKS = (
    "ledger_in_snapshot",
    "offload_complete",
    "local_copy_present",
    "offload_time_matches_snapshot",
    "offloader_applies",
    "deletion_lag_passed",
    "not_deleted_by_retention",
    "bytes_match_snapshot",
)


def _position(text: str | None, index: int) -> int | None:
    """Ledger (0) or entry (1) id of an ``"L:E"`` text; None when it is not there or not a number."""
    parts = None if text is None else text.split(":")
    try:
        return int(parts[index]) if parts is not None and index < len(parts) else None
    except ValueError:
        return None


class TopicFacts:
    """What the checks read of one topic in the snapshot."""

    def __init__(self, topic: Row | None, ledgers: list[Row], cursors: list[Row]) -> None:
        self.topic = topic
        self.ledgers = {r["ledgerId"]: r for r in ledgers}
        order = sorted(self.ledgers)
        self.rank = {ledger_id: i for i, ledger_id in enumerate(order, start=1)}
        self.current = order[-1] if order else None
        self.total = sum(r["size"] for r in ledgers) if ledgers else None
        self.cursors = {c["name"]: c for c in cursors}
        self.durable_marks = [(c["markDeleteLedger"], c["markDeleteEntry"]) for c in cursors if c["durable"]]
        written = [r for r in ledgers if r["entries"] > 0]
        last = max(written, key=lambda r: (r["ledgerId"], r["entries"])) if written else None
        self.end = (None, None) if last is None else (last["ledgerId"], last["entries"] - 1)

    def value(self, column: str) -> Any:
        return None if self.topic is None else self.topic.get(column)


def deletion_rows(facts: TopicFacts, deletions: list[Row], as_of_ms: int) -> list[Row]:
    system_topic_name = None
    rows, planned_up_to, bytes_up_to = [], 0, 0
    for action in sorted(deletions, key=lambda a: struct_key(a["ledgerId"])):
        if system_topic_name is None:
            system_topic_name = name_facts(action["topic"])["isSystemTopicName"]
        ledger_id = action["ledgerId"]
        ledger = facts.ledgers.get(ledger_id)
        closed = None if ledger is None else ledger["closedAtMs"]
        planned_up_to += 1
        bytes_up_to += 0 if ledger is None else ledger["size"]

        def pins(mark: tuple[int, int], ledger_id=ledger_id, ledger=ledger) -> bool:
            """The mark-delete is before the ledger, or on it without freeing it: short of its last entry, or on
            the current ledger (never freed)."""
            if ledger_id is None or mark[0] > ledger_id:
                return False
            if mark[0] < ledger_id:
                return True
            return (ledger is not None and mark[1] != ledger["entries"] - 1) or ledger_id == facts.current

        retention_ms, retention_bytes = facts.value("retentionTimeMs"), facts.value("retentionSizeBytes")
        expired = (
            retention_ms is not None
            and retention_ms >= 0
            and closed is not None
            and as_of_ms - closed > retention_ms
        )
        remaining = None if facts.total is None else facts.total - bytes_up_to
        over_quota = (
            retention_bytes is not None
            and retention_bytes >= 0
            and remaining is not None
            and remaining >= retention_bytes
        )
        rows.append(
            {
                "topic": action["topic"],
                "ledgerId": ledger_id,
                "ledger_in_snapshot": ledger is not None,
                "bytes_match_snapshot": ledger is not None and action["bytes"] == ledger["size"],
                "not_current_ledger": None not in (ledger_id, facts.current) and ledger_id != facts.current,
                "ledger_is_closed": closed is not None,
                "no_durable_cursor_pins_it": not any(pins(m) for m in facts.durable_marks),
                "contiguous_oldest_prefix": facts.rank.get(ledger_id) == planned_up_to,
                "retention_allows_delete": expired or over_quota,
                "retention_default_fits_the_name": retention_default_fits(facts.topic, system_topic_name),
            }
        )
    return rows


def cursor_move_rows(facts: TopicFacts, moves: list[Row], deletions: list[Row]) -> list[Row]:
    last_deleted = max((d["ledgerId"] for d in deletions if d["ledgerId"] is not None), default=None)
    deleted_ledger = facts.ledgers.get(last_deleted)
    end_entry = None if deleted_ledger is None else deleted_ledger["entries"] - 1
    rows = []
    for move in moves:
        cursor = facts.cursors.get(move["subscription"])
        from_l, from_e = _position(move["from"], 0), _position(move["from"], 1)
        to_l, to_e = _position(move["to"], 0), _position(move["to"], 1)
        durable = None if cursor is None else cursor["durable"]
        md = (None, None) if cursor is None else (cursor["markDeleteLedger"], cursor["markDeleteEntry"])
        # L:-1 ("nothing of ledger L") acknowledges only entries of older ledgers, all written: never past the end
        # as long as L is one of the topic's ledgers. Pulsar's advanceCursorsIfNecessary produces it when the last
        # deleted ledger is empty (a ledger rolled with no entry).
        before_a_ledger = to_e == -1 and None not in (to_l, facts.current) and to_l <= facts.current
        rows.append(
            {
                "topic": move["topic"],
                "name": move["subscription"],
                "from": move["from"],
                "to": move["to"],
                "cursor_in_snapshot": durable is not None,
                "from_is_current_mark_delete": cursor is not None and (from_l, from_e) == md,
                "cursor_is_non_durable": durable is False,
                "moves_forward": struct_key(to_l, to_e) > struct_key(from_l, from_e),
                "to_is_end_of_deleted_range": end_entry is not None
                and (to_l, to_e) == (last_deleted, end_entry),
                "not_past_last_entry": struct_key(to_l, to_e) <= struct_key(*facts.end) or before_a_ledger,
            }
        )
    return rows


def _lag_passed(facts: TopicFacts, ledger: Row | None, as_of_ms: int) -> bool:
    """The offload-deletion lag is set (>= 0) and has passed since the ledger's offload, strictly."""
    lag = facts.value("offloadDeletionLagMs")
    offloaded = None if ledger is None else ledger["offloadedAtMs"]
    return lag is not None and lag >= 0 and offloaded is not None and as_of_ms - offloaded > lag


def local_copy_rows(facts: TopicFacts, copies: list[Row], deletions: list[Row], as_of_ms: int) -> list[Row]:
    deleted = [d["ledgerId"] for d in deletions]
    rows = []
    for copy in copies:
        ledger = facts.ledgers.get(copy["ledgerId"])
        row = {
            "topic": copy["topic"],
            "ledgerId": copy["ledgerId"],
            "ledger_in_snapshot": ledger is not None,
            "offload_complete": ledger is not None and ledger["offloadComplete"],
            "local_copy_present": ledger is not None and ledger["localDeleted"] is False,
            "offload_time_matches_snapshot": ledger is not None
            and ledger["offloadedAtMs"] is not None
            and copy["offloadedAtMs"] == ledger["offloadedAtMs"],
            "offloader_applies": facts.value("offloader") is True,
            "deletion_lag_passed": _lag_passed(facts, ledger, as_of_ms),
            "bytes_match_snapshot": ledger is not None and copy["bytes"] == ledger["size"],
        }
        # One row per retention deletion of the same ledger (a join), each failing; one passing row without any.
        also = deleted.count(copy["ledgerId"]) if copy["ledgerId"] is not None else 0
        rows.extend([{**row, "not_deleted_by_retention": also == 0}] * max(also, 1))
    return rows


def local_copy_selection_rows(facts: TopicFacts, planned: list[Row], as_of_ms: int) -> list[Row]:
    """One row per local copy the lag lets go on an unheld topic: ``planned`` is false for one the plan leaves out
    (a deletion of the ledger by retention counts as planned)."""
    if facts.topic is None or facts.value("offloader") is not True or facts.value("heldBy") is not None:
        return []
    in_plan = [p["ledgerId"] for p in planned]
    rows = []
    for ledger_id, ledger in sorted(facts.ledgers.items()):
        if ledger["offloadComplete"] and not ledger["localDeleted"] and _lag_passed(facts, ledger, as_of_ms):
            times = in_plan.count(ledger_id)
            rows.extend(
                [{"topic": ledger["topic"], "ledgerId": ledger_id, "planned": times > 0}] * max(times, 1)
            )
    return rows


def check_topic(facts: TopicFacts, actions: list[Row], as_of_ms: int) -> dict[str, list[Row]]:
    """Every check frame's rows of one topic (the topic of the snapshot or of the plan)."""
    of = {
        name: [a for a in actions if a["action"] == name]
        for name in (DELETE_LEDGER.name, MOVE_CURSOR.name, DELETE_LOCAL_COPY.name)
    }
    deletions, copies = of[DELETE_LEDGER.name], of[DELETE_LOCAL_COPY.name]
    namespace = facts.value("namespace")
    return {
        "actions": [
            {"topic": a["topic"], "action": a["action"], "topic_in_snapshot": facts.topic is not None}
            for a in actions
        ],
        "deletions": deletion_rows(facts, deletions, as_of_ms),
        "cursor_moves": cursor_move_rows(facts, of[MOVE_CURSOR.name], deletions),
        "local_copies": local_copy_rows(facts, copies, deletions, as_of_ms),
        "local_copy_selection": local_copy_selection_rows(facts, deletions + copies, as_of_ms),
        "namespace_deleted": [
            {
                "namespace": namespace,
                "deletedBytes": sum(
                    (facts.ledgers.get(d["ledgerId"]) or {}).get("size") or 0 for d in deletions
                ),
            }
        ]
        if deletions
        else [],
    }


def namespace_rows(
    deleted: Mapping[str | None, int],
    stored: Mapping[str, int],
    planned: Mapping[str, Mapping[str, Any]],
    max_share: float,
) -> list[Row]:
    """Per namespace of the snapshot, of the deletions or of the planner's summary: the deletions' bytes reconcile
    with the summary, and their share of the namespace's stored bytes (a namespace the snapshot lacks: of 1 byte)."""
    rows = []
    keys = list(dict.fromkeys([*stored, *deleted, *(ns for ns in planned if ns != "")]))
    for namespace in keys:
        deleted_bytes = deleted.get(namespace, 0) if namespace is not None else deleted.get(None, 0)
        summary = planned.get(namespace) if namespace is not None else None
        share = deleted_bytes / max(stored.get(namespace, 1) if namespace in stored else 1, 1)
        rows.append(
            {
                "namespace": namespace,
                "namespace_in_snapshot": namespace in stored,
                "summary_reconciles": deleted_bytes == int((summary or {}).get("bytes", 0)),
                "deleted_share": share,
                "within_blast_radius": share <= max_share,
            }
        )
    return rows
