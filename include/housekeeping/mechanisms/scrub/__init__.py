"""The store scrub: what the metadata says against what the storage holds, on both tiers, and proof that deleted is
freed. Its findings are the plan (orphans, items purges left behind, missing and mismatched ledgers, unreadable
files, overdue purges); its one action, ``delete_orphan``, queues an old unreferenced item for purge. Its package:
the mechanism with its setting and run option (here), its action kind (``actions``), its tables (``tables``), its
part of the snapshot (``listing``: the storage listed after the metadata read), its apply (``apply``), its report
(``report``, ``report.md.j2``) and its command (``commands``: ``housekeeping scrub``); its Spark apps are
``spark_apps/scrub``. No Pulsar code does this; the references are BookKeeper's ``verifyMetadataOnGC`` and Iceberg's
orphan-file removal (docs/semantics.md §10)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.engine.live import Narrowed, TopicNow, TopicThen
from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.scrub.actions import DELETE_ORPHAN
from housekeeping.mechanisms.scrub.options import MIN_AGE, MIN_AGE_OPTION

if TYPE_CHECKING:
    from housekeeping.engine.request import RunRequest
    from housekeeping.store.store import Store


class StoreScrub(Mechanism):
    def after_snapshot(self, store: Store, run_dir: Path, request: RunRequest) -> None:
        from housekeeping.mechanisms.scrub.listing import write_scrub_snapshot

        write_scrub_snapshot(
            store, Path(run_dir), tuple(request.scope), int(request.option(MIN_AGE_OPTION.name))
        )

    def metric_samples(self, store: Store, as_of_ms: int) -> list[tuple[str, str, float]]:
        from housekeeping.mechanisms.scrub.report import metric_samples

        return metric_samples(store, as_of_ms)

    def apply(
        self, store: Store, run_dir: Path, *, purge_grace_seconds: int, spark_master: str | None = None
    ) -> dict[str, Any]:
        from housekeeping.mechanisms.scrub.apply import apply_plan

        return apply_plan(store, Path(run_dir), self, purge_grace_seconds=purge_grace_seconds)

    def command_group(self) -> tuple[str, Any] | None:
        from housekeeping.mechanisms.scrub.commands import scrub_app_for

        return "scrub", scrub_app_for(self)

    def recheck(self, now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
        """No policy decides what the scrub queues: each orphan is re-checked against the metadata in its own
        transaction instead (``scrub.apply``: still named by no row, still as listed)."""
        return Narrowed.as_planned(rows)


MECHANISM = StoreScrub(
    name="scrub",
    title="store scrub",
    pulsar="none (BookKeeper GarbageCollectorThread verifyMetadataOnGC; Iceberg DeleteOrphanFiles)",
    dag_id="store_scrub",
    schedule="@daily",
    tags=("scrub",),
    task_ids=TaskIds(
        plan="plan_store_scrub",
        validate="validate_scrub_plan",
        apply="apply_scrub_repair",
        report="write_scrub_report",
    ),
    actions=(DELETE_ORPHAN,),
    options=(MIN_AGE_OPTION,),
    settings=(MIN_AGE,),
    fault_points=("scrub_apply_between_orphans",),  # one orphan recorded and committed, the next not started
    policy_driven=False,
)
