"""Topic compaction with retention on the compacted ledger (Pulsar's compactor, plus apache/pulsar #19665,
PIP-252): a new compacted ledger per topic written by Spark, then one metadata switch per topic. Its package: the
mechanism with its run option (here), its action kind (``actions``), its plan tables (``tables``), its report
(``report``, ``report.md.j2``), its fault points; its Spark apps, its apply among them, are
``spark_apps/compaction``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.engine.mechanism import Mechanism, RunOption, TaskIds
from housekeeping.mechanisms.compaction.actions import REWRITE_COMPACTED

if TYPE_CHECKING:
    from housekeeping.store.store import Store


def check_compact_topics(topics: list[str], known: set[str], selected: set[str], where: str) -> None:
    """Each topic named for compaction exists and is in the run's scope."""
    for name in topics:
        TopicName.parse(name)
        if name not in known:
            raise InputError(f"topic {name} named for compaction does not exist in {where}")
        if name not in selected:
            raise InputError(f"topic {name} named for compaction is outside the run's scope ({where})")


COMPACT_TOPICS_OPTION = RunOption(
    name="compact_topics",
    flag="--compact-topic",
    run_info_key="compactTopics",
    help="compaction: also compact this topic whatever its backlog (repeatable; Pulsar's `topics compact`)",
    param={
        "type": ["null", "array"],
        "items": {"type": "string", "pattern": "^persistent://[^/]+/[^/]+/.+$"},
        "title": "Compact these topics",
        "description": "Topics (persistent://tenant/ns/topic) to compact whatever their backlog, as "
        "`pulsar-admin topics compact`. Empty = only topics over their compaction threshold or due "
        "for compacted retention.",
    },
    repeatable=True,
    check_topics=check_compact_topics,
)


class Compaction(Mechanism):
    def apply(
        self, store: Store, run_dir: Path, *, purge_grace_seconds: int, spark_master: str | None = None
    ) -> dict[str, Any]:
        """Its Spark apply app, in this process (the DAG submits the same app)."""
        from housekeeping.engine import launcher

        spark = launcher.local_spark(spark_master or "local[2]")
        return launcher.apply_in_process(spark, Path(run_dir), self, store, purge_grace_seconds)


MECHANISM = Compaction(
    name="compaction",
    title="topic compaction and compacted-ledger retention",
    pulsar="Compactor#compact (PublishingOrderCompactor) + apache/pulsar#19665",
    dag_id="compacted_ledger_retention",
    schedule="@hourly",
    tags=("compaction",),
    task_ids=TaskIds(
        plan="plan_compaction",
        validate="validate_compaction_plan",
        apply="apply_compaction",
        report="write_compaction_report",
    ),
    apply_app="spark_apps.compaction.apply",
    actions=(REWRITE_COMPACTED,),
    snapshot_tables=("compacted_ledgers",),
    options=(COMPACT_TOPICS_OPTION,),
    fault_points=(
        "compaction_apply_after_stage",
        "compaction_apply_after_spark_write",  # the new compacted ledger written under the run dir
        "compaction_apply_between_ledger_renames",
        "compaction_apply_before_switch",
        "compaction_apply_after_switch",
    ),
)
