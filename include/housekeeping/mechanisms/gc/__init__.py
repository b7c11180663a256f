"""Inactive-topic GC (Pulsar ``PersistentTopic#checkGC``): deletes topics inactive longer than their limit
through the pending-deletion log (restorable until purge), at most a share of a namespace's topics per run. Its
package: the mechanism with its run option and setting (here), its action kinds (``actions``), its plan table
(``tables``), its report (``report``, ``report.md.j2``); its Spark apps are ``spark_apps/gc``."""

from __future__ import annotations

from housekeeping.core.settings import Setting
from housekeeping.engine.mechanism import Mechanism, RunOption, TaskIds
from housekeeping.mechanisms.gc.actions import DELETE_PARTITIONED_METADATA, DELETE_TOPIC, REFRESH_LAST_ACTIVE

# GC's blast radius: the largest share of a namespace's topics one run may delete.
MAX_DELETED_TOPIC_SHARE = Setting(
    "HOUSEKEEPING_MAX_DELETED_TOPIC_SHARE",
    float,
    0.5,
    minimum=0.0,
    maximum=1.0,
    help="GC blast radius: max share of a namespace's topics one run may delete",
)
TOPIC_SHARE_OPTION = RunOption(
    name="max_deleted_topic_share",
    flag="--max-deleted-topic-share",
    run_info_key="maxDeletedTopicShare",
    help="gc blast-radius override: share of a namespace's topics",
    param={
        "type": ["null", "number"],
        "minimum": 0,
        "maximum": 1,
        "title": "Blast-radius override (topics)",
        "description": "Max share of a namespace's topics this run may delete "
        "(empty = HOUSEKEEPING_MAX_DELETED_TOPIC_SHARE, default 0.5).",
    },
    value_type=float,
    setting=MAX_DELETED_TOPIC_SHARE,
)


MECHANISM = Mechanism(
    name="gc",
    title="inactive-topic GC",
    pulsar="PersistentTopic#checkGC",
    dag_id="inactive_topic_gc",
    schedule="@hourly",
    tags=("inactive-topics",),
    task_ids=TaskIds(
        plan="plan_inactive_topic_gc",
        validate="validate_gc_plan",
        apply="apply_inactive_topic_gc",
        report="write_gc_report",
    ),
    actions=(DELETE_TOPIC, REFRESH_LAST_ACTIVE, DELETE_PARTITIONED_METADATA),
    snapshot_tables=("partitioned_topics",),
    options=(TOPIC_SHARE_OPTION,),
    settings=(MAX_DELETED_TOPIC_SHARE,),
)
