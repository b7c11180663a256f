"""Message expiry (TTL, Pulsar ``PersistentMessageExpiryMonitor``, with a safer entry search): moves each
subscription's cursor past its expired entries, never past an unexpired one. Its package: the mechanism (here), its
plan table (``tables``), its report template; it plans the shared ``move_cursor`` kind; its Spark apps are
``spark_apps/expiry``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.live import Narrowed, TopicNow, TopicThen, changed
from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR


class Expiry(Mechanism):
    @property
    def template_dirs(self) -> tuple[Path, ...]:
        from housekeeping.mechanisms.shared.cursor_report import TEMPLATES

        return (*super().template_dirs, TEMPLATES)

    def recheck(self, now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
        """A TTL raised or switched off since the snapshot keeps every cursor where it is (the plan acknowledges
        what the snapshot's TTL expired; a lowered TTL expires at least as much, so the plan stands). A
        subscription a consumer connected to since the snapshot is not moved: Pulsar's expiry guard then applies
        (docs/semantics.md §4), which the snapshot could not see. Each move is still compare-and-set on its
        cursor (``move_cursor``): a cursor reset behind the plan's start is left alone."""
        ttl = changed(then, now, "message_ttl_seconds")
        if ttl is not None and (ttl[1] == 0 or ttl[1] > ttl[0]):
            return Narrowed.nothing(
                f"the message TTL in force changed since the snapshot ({ttl[0]} s -> {ttl[1]} s): no cursor moves"
            )
        connected = sorted(
            c.name
            for c in now.cursors
            if c.consumers > 0 and c.name in then.cursors and then.cursors[c.name].consumers == 0
        )
        kept = [row for row in rows if row.get("subscription") not in connected]
        if len(kept) == len(rows):
            return Narrowed.as_planned(rows)
        return Narrowed(
            kept,
            f"consumer(s) connected to {', '.join(repr(n) for n in connected)} since the snapshot: Pulsar's expiry "
            "guard applies to them now, so they are not moved",
        )


MECHANISM = Expiry(
    name="expiry",
    title="message expiry (TTL)",
    pulsar="PersistentMessageExpiryMonitor#expireMessages",
    dag_id="message_expiry",
    schedule="*/15 * * * *",
    tags=("ttl",),
    task_ids=TaskIds(
        plan="plan_message_expiry",
        validate="validate_expiry_plan",
        apply="apply_message_expiry",
        report="write_expiry_report",
    ),
    actions=(MOVE_CURSOR,),
    sweeps=("ttl",),
    recheck_reads_cursors=True,
)
