"""The one DAG factory: snapshot -> Spark plan -> Spark/GX gate -> apply -> purge -> report.

Every housekeeping DAG is ``build_housekeeping_dag(<mechanism>, doc_md=__doc__)``: the DAG id, schedule, tags,
task ids, apps, extra params and notifiers come from the mechanism's spec (``housekeeping.registry``); DAG files
are wiring only. Nothing here does work at parse time: settings are read and libraries imported inside the tasks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_OWNER = "storage-platform"
# One slot: the steps that delete or move anything (apply, purge) of all five DAGs never run at once on the store,
# whatever the DAGs' schedules, manual triggers and backfills. Created by `make airflow`, the compose file's
# airflow-init and the live-Airflow test: `airflow pools set housekeeping_deletes 1 "..."`. (A task in a pool that
# does not exist is never scheduled; `housekeeping_deletes` missing shows as apply tasks stuck in "scheduled".)
DELETING_POOL = "housekeeping_deletes"
DELETING_POOL_DESCRIPTION = "housekeeping: deleting steps on the store, one at a time"
# Every apply step that changed the store emits an event of this Asset (a dry run's skipped apply emits none);
# the storage_report DAG is scheduled on it.
STORE_ASSET_NAME = "housekeeping_store"
STORE_ASSET_URI = "housekeeping://store"


def store_asset():
    from airflow.sdk import Asset

    return Asset(name=STORE_ASSET_NAME, uri=STORE_ASSET_URI)


@dataclass(frozen=True)
class DagDefaults:
    """What every housekeeping DAG shares (the mechanism's spec gives the rest)."""

    start_date: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    retries: int = 2
    retry_delay: timedelta = timedelta(minutes=2)
    # Each retry waits twice as long as the one before (2, then 4 min), at most max_retry_delay: a Spark
    # cluster that lost a worker or a database failing over gets time to come back.
    retry_exponential_backoff: float = 2.0
    max_retry_delay: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        if self.start_date.tzinfo is None:
            raise ValueError("start_date must be timezone-aware (UTC)")


def scope_param() -> Any:
    """The scope param of every DAG that reads topics."""
    from airflow.sdk import Param

    # Nullable: the UI trigger form treats a plain "string" param as required and refuses an empty one.
    return Param(
        None,
        type=["null", "string"],
        title="Scope",
        description="Comma-separated globs: a tenant (acme), a namespace (acme/orders) or topics "
        "(persistent://acme/orders/*). Empty = all topics.",
    )


def housekeeping_params(extra: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The trigger form (JSON schema per param): the common params, then the mechanism's (``extra``: name ->
    {"default": ..., JSON-schema keywords}). Scheduled runs get these safe defaults."""
    from airflow.sdk import Param

    return {
        "dry_run": Param(
            False, type="boolean", title="Dry run", description="Plan, gate and report only; change nothing."
        ),
        "scope": scope_param(),
        "as_of": Param(
            None,
            type=["null", "string"],
            title="As of (UTC)",
            description="Logical 'now' for the decisions, ISO 8601 with timezone. Empty = the run's "
            "data interval end (scheduled/backfill) or its run time (manual).",
        ),
        "max_deleted_share": Param(
            None,
            type=["null", "number"],
            minimum=0,
            maximum=1,
            title="Blast-radius override",
            description="Max share of a namespace's stored bytes this run may delete "
            "(empty = HOUSEKEEPING_MAX_DELETED_SHARE, default 0.9).",
        ),
        # Approval thresholds (housekeeping.approval): a run may only tighten the deployment's settings.
        "approval_bytes": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above bytes",
            description="Ask a person before applying a plan that deletes more bytes than this "
            "(empty = HOUSEKEEPING_APPROVAL_BYTES; can only lower it).",
        ),
        "approval_namespace_share": Param(
            None,
            type=["null", "number"],
            minimum=0,
            maximum=1,
            title="Approval above namespace share",
            description="... that deletes more than this share of one namespace's stored bytes "
            "(empty = HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE; can only lower it).",
        ),
        "approval_topics": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above topics deleted",
            description="... that deletes more topics (empty = HOUSEKEEPING_APPROVAL_TOPICS; can only lower it).",
        ),
        "approval_cursors": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Approval above cursors moved",
            description="... that moves more cursors (empty = HOUSEKEEPING_APPROVAL_CURSORS; can only lower it).",
        ),
        **{
            name: Param(definition.get("default"), **{k: v for k, v in definition.items() if k != "default"})
            for name, definition in extra.items()
        },
    }


def spark_submit(task_id: str, app: str, args: list[str], mechanism: str, **operator_kwargs: Any):
    """The Spark step of this project (``SparkAppOperator``, a SparkSubmitOperator): runs the Spark app module
    ``app`` through ``spark_apps/submit.py`` (``housekeeping.launcher``) with the Spark connection from settings:
    spark-submit for a ``spark`` connection, a client of the Spark Connect server for a ``spark_connect`` one.
    Airflow's own Python (the project's virtualenv) is the driver's and the executors' unless
    PYSPARK_DRIVER_PYTHON / PYSPARK_PYTHON are set (on a cluster, PYSPARK_PYTHON names the workers'
    interpreter), and its bin is on PATH (SparkSubmitHook runs a bare ``spark-submit``)."""
    from housekeeping import launcher
    from housekeeping.settings import spark_conn_id
    from housekeeping.spark_operator import SparkAppOperator

    python = sys.executable
    env_vars = {
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or python,
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON") or python,
    }
    return SparkAppOperator(
        task_id=task_id,
        application=str(launcher.SUBMIT_APP),
        application_args=launcher.submit_args(app, args),
        conn_id=spark_conn_id(),
        name=f"housekeeping-{mechanism}-{task_id}",
        env_vars=env_vars,
        verbose=False,
        **operator_kwargs,
    )


def resolve_as_of_ms(params: dict[str, Any], context: dict[str, Any]) -> int:
    """The run's logical "now": the as_of param, else the data interval end, else the run time."""
    from housekeeping.timeutil import parse_as_of

    if params.get("as_of"):
        return parse_as_of(str(params["as_of"]))
    dag_run = context.get("dag_run")
    for candidate in (
        getattr(dag_run, "data_interval_end", None),
        context.get("logical_date"),
        getattr(dag_run, "run_after", None),
    ):
        if candidate is not None:
            return int(candidate.timestamp() * 1000)
    raise ValueError("cannot determine the run's logical time; pass the as_of param")


def build_housekeeping_dag(mechanism: str, *, doc_md: str, defaults: DagDefaults = DagDefaults()):
    from airflow.sdk import DAG, TriggerRule, get_current_context, task

    from housekeeping import launcher
    from housekeeping.alerts import GateFailedNotifier
    from housekeeping.registry import mechanism_spec

    spec = mechanism_spec(mechanism)
    ids = spec.task_ids

    with DAG(
        dag_id=spec.dag_id,
        schedule=spec.schedule,
        start_date=defaults.start_date,
        catchup=False,
        max_active_runs=1,  # one deleting run at a time per mechanism; apply's CAS covers the rest
        doc_md=doc_md,
        tags=["housekeeping", "pulsar", spec.name, *spec.tags],
        params=housekeeping_params(spec.extra_params),
        default_args={
            "owner": DEFAULT_OWNER,
            "retries": defaults.retries,
            "retry_delay": defaults.retry_delay,
            "retry_exponential_backoff": defaults.retry_exponential_backoff,
            "max_retry_delay": defaults.max_retry_delay,
        },
        render_template_as_native_obj=False,
    ) as dag:

        @task(task_id="take_snapshot", retries=defaults.retries)
        def take_snapshot() -> dict[str, Any]:
            from housekeeping.settings import Settings
            from housekeeping.snapshot import take_snapshot
            from housekeeping.timeutil import format_ms

            context = get_current_context()
            params = context["params"]
            settings = Settings.from_env()
            store = settings.open_store()
            as_of_ms = resolve_as_of_ms(params, context)
            share = (
                settings.max_deleted_share
                if params.get("max_deleted_share") is None
                else float(params["max_deleted_share"])
            )
            topic_share = (
                settings.max_deleted_topic_share
                if params.get("max_deleted_topic_share") is None
                else float(params["max_deleted_topic_share"])
            )
            run_id = f"{spec.dag_id}__{context['run_id']}"
            dag_run = context.get("dag_run")
            # Journaled by apply and purge as who did it: this DAG run, and the user who triggered it if any.
            user = getattr(dag_run, "triggering_user_name", None)
            actor = f"airflow {spec.dag_id} ({context['run_id']})" + (f" triggered by {user}" if user else "")
            start = getattr(dag_run, "data_interval_start", None)
            end = getattr(dag_run, "data_interval_end", None)
            if spec.before_snapshot is not None:
                spec.before_snapshot(store, params, as_of_ms, actor)
            info = take_snapshot(
                store,
                mechanism=spec.name,
                run_id=run_id,
                as_of_ms=as_of_ms,
                scope=params.get("scope") or None,
                max_deleted_share=share,
                max_deleted_topic_share=topic_share,
                compact_topics=list(params.get("compact_topics") or ()),
                schedule_interval_ms=(
                    int((end - start).total_seconds() * 1000)
                    if start is not None and end is not None
                    else None
                ),
                actor=actor,
            )
            return {
                "run_dir": str(info.run_dir),
                "as_of": format_ms(as_of_ms),
                "topics": info.topic_count,
                "dry_run": bool(params.get("dry_run")),
            }

        snapshot = take_snapshot()
        run_dir = "{{ ti.xcom_pull(task_ids='take_snapshot')['run_dir'] }}"
        plan = spark_submit(ids.plan, spec.plan_app, ["--run-dir", run_dir], spec.name)
        # A rejected plan is a deterministic verdict that needs a person, not a retry; a transient Spark
        # failure here is re-done by the next scheduled run.
        validate = spark_submit(
            ids.validate,
            launcher.GATE_APP,
            ["--run-dir", run_dir, "--mechanism", spec.name],
            spec.name,
            retries=0,
            on_failure_callback=[GateFailedNotifier()],
        )
        from housekeeping.approval_operator import DeletionApprovalOperator

        # Between the gate and apply: a person says yes to a plan over the approval thresholds.
        approve = DeletionApprovalOperator(task_id=ids.approve, mechanism=spec.name, retries=0)

        @task(task_id=ids.apply, pool=DELETING_POOL, outlets=[store_asset()])
        def apply_plan(snapshot_info: dict[str, Any]) -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowSkipException

            from housekeeping.runner import apply_step
            from housekeeping.settings import Settings

            if snapshot_info["dry_run"]:
                raise AirflowSkipException("dry run: the checked plan is reported, not applied")
            settings = Settings.from_env()
            store = settings.open_store()
            return apply_step(
                store,
                Path(snapshot_info["run_dir"]),
                purge_grace_seconds=getattr(settings, spec.purge_grace_setting),
            )

        @task(task_id="purge_pending_deletions", pool=DELETING_POOL)
        def purge_pending(snapshot_info: dict[str, Any]) -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowSkipException

            from housekeeping.runner import purge_step
            from housekeeping.settings import Settings

            if snapshot_info["dry_run"]:
                raise AirflowSkipException("dry run: nothing is purged")
            settings = Settings.from_env()
            store = settings.open_store()
            return purge_step(store, Path(snapshot_info["run_dir"]))

        @task(
            task_id=ids.report,
            trigger_rule=TriggerRule.NONE_FAILED,
            on_success_callback=list(spec.report_notifiers()) or None,
        )
        def write_report(snapshot_info: dict[str, Any]) -> str:
            from airflow.sdk.observability import stats

            from housekeeping.run_figures import emit_run_figures
            from housekeeping.runner import report_step

            path = report_step(Path(snapshot_info["run_dir"]), dry_run=snapshot_info["dry_run"])
            print(f"REPORT: {path}")
            # Through Airflow's [metrics] backend (StatsD / OpenTelemetry), where its own metrics go.
            figures = emit_run_figures(snapshot_info["run_dir"], stats)
            print(f"RUN FIGURES: {figures}")
            return str(path)

        purged = purge_pending(snapshot)
        report = write_report(snapshot)
        if spec.apply_app is None:
            applied = apply_plan(snapshot)
            snapshot >> plan >> validate >> approve >> applied >> purged >> report
        else:
            # Skips only the Spark apply on a dry run; purge then skips too, the report still runs.
            @task.short_circuit(task_id="skip_apply_on_dry_run", ignore_downstream_trigger_rules=False)
            def not_dry_run(snapshot_info: dict[str, Any]) -> bool:
                return not snapshot_info["dry_run"]

            applied = spark_submit(
                ids.apply,
                spec.apply_app,
                ["--run-dir", run_dir],
                spec.name,
                pool=DELETING_POOL,
                outlets=[store_asset()],
            )
            snapshot >> plan >> validate >> approve >> not_dry_run(snapshot) >> applied >> purged >> report
    return dag


def build_storage_report_dag(doc_md: str):
    """The storage_report DAG: rebuilt whenever an apply step changed the store (the store Asset), and daily."""
    from airflow.sdk import DAG, get_current_context, task
    from airflow.timetables.assets import AssetOrTimeSchedule
    from airflow.timetables.trigger import CronTriggerTimetable

    with DAG(
        dag_id="storage_report",
        schedule=AssetOrTimeSchedule(
            timetable=CronTriggerTimetable("0 6 * * *", timezone="UTC"), assets=[store_asset()]
        ),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        doc_md=doc_md,
        tags=["housekeeping", "report"],
        default_args={"owner": DEFAULT_OWNER, "retries": 1, "retry_delay": timedelta(minutes=1)},
    ) as dag:
        from housekeeping.alerts import DeletionLagNotifier

        @task(task_id="write_storage_report", on_success_callback=[DeletionLagNotifier()])
        def write_storage_report() -> str:
            from housekeeping.settings import Settings
            from housekeeping.storage_report import write_storage_report

            context = get_current_context()
            dag_run = context.get("dag_run")
            # "As of" is the run's logical time (run_after for an asset-triggered run), as for every DAG here.
            moment = (
                context.get("logical_date")
                or getattr(dag_run, "run_after", None)
                or getattr(dag_run, "data_interval_end", None)
            )
            settings = Settings.from_env()
            page = write_storage_report(
                settings.open_store(), int(moment.timestamp() * 1000), settings.deletion_lag_objectives
            )
            events = context.get("triggering_asset_events") or {}
            changed = sum(len(v) for v in events.values())
            print(f"STORAGE REPORT: {page} ({changed} store change event(s) since the last report)")
            return str(page)

        write_storage_report()
    return dag


def what_if_params() -> dict[str, Any]:
    """The policy_what_if trigger form."""
    from airflow.sdk import Param

    from housekeeping.policy_sweep import KNOBS
    from housekeeping.registry import what_if_mechanisms

    return {
        "mechanism": Param(
            "trim",
            type="string",
            enum=[*what_if_mechanisms(), "all"],
            title="Mechanism",
            description="The mechanism whose plan the change would alter, or all of them (a sweep: the "
            "mechanism of its policy).",
        ),
        "policies": Param(
            {},
            type="object",
            title="Policy overlay",
            description='Policies in the manifest\'s shape: {"broker": {...}, "namespaces": {"acme/orders": '
            '{"retention_policies": {"retentionTimeInMinutes": 4320, "retentionSizeInMB": 5120}}}, "topics": '
            '{"persistent://...": {"policies": {...}}}}; null removes a policy. May be empty with a sweep.',
        ),
        "as_of": Param(
            None,
            type=["null", "string"],
            title="As of (UTC)",
            description="Logical 'now' for the decisions, ISO 8601 with timezone. Empty = the run's time.",
        ),
        "sweep": Param(
            None,
            type=["null", "string"],
            pattern=f"^({'|'.join(KNOBS)})=[^=]+$",
            title="Sweep",
            description="One policy at several values, e.g. retention-time=1h,6h,1d,3d,7d (or retention-size="
            "1G,5G,-1, ttl=1h,1d): bytes freed and kept per namespace at each, set in every namespace in scope.",
        ),
        "scope": scope_param(),
    }


def build_policy_what_if_dag(doc_md: str):
    """The policy_what_if DAG: manual only; the what-if (or sweep) runs as a Spark step of its own and its report
    is drawn after. No apply, no purge, no slot of the deleting pool: it changes nothing in the store."""
    from airflow.sdk import DAG, get_current_context, task

    from housekeeping import launcher

    with DAG(
        dag_id="policy_what_if",
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        doc_md=doc_md,
        tags=["housekeeping", "what-if"],
        params=what_if_params(),
        default_args={"owner": DEFAULT_OWNER, "retries": 0},
    ) as dag:

        @task(task_id="prepare_what_if")
        def prepare_what_if() -> dict[str, Any]:
            """Checks the form before Spark starts and writes the request the Spark step reads."""
            import re

            from housekeeping.policy_overlay import PolicyOverlay
            from housekeeping.settings import Settings
            from housekeeping.timeutil import format_ms
            from housekeeping.what_if import check_request
            from housekeeping.what_if_report import REPORTS_DIR

            context = get_current_context()
            params = context["params"]
            policies = params.get("policies") or {}
            sweep = params.get("sweep") or None
            overlay = PolicyOverlay.from_document(policies, "the policies param") if policies else None
            check_request(params["mechanism"], overlay, sweep)
            store = Settings.from_env().open_store()
            report_dir = store.root / REPORTS_DIR / re.sub(r"[^A-Za-z0-9._-]", "_", context["run_id"])
            report_dir.mkdir(parents=True, exist_ok=True)
            request = {
                "mechanism": params["mechanism"],
                "policies": policies,
                "asOf": format_ms(resolve_as_of_ms(params, context)),
                "sweep": sweep,
                "scope": params.get("scope") or None,
                "reportDir": str(report_dir),
            }
            path = report_dir / "request.json"
            path.write_text(json.dumps(request, indent=2), encoding="utf-8")
            return {"request": str(path), "report_dir": str(report_dir)}

        @task(task_id="write_what_if_report")
        def write_what_if_report(prepared: dict[str, Any]) -> str:
            from housekeeping.settings import Settings
            from housekeeping.what_if_report import WHAT_IF_JSON, record_latest, write_page

            report_dir = Path(prepared["report_dir"])
            document = json.loads((report_dir / WHAT_IF_JSON).read_text(encoding="utf-8"))
            page = write_page(document, report_dir)
            record_latest(
                Settings.from_env().open_store().root, report_dir, document, get_current_context()["run_id"]
            )
            print(f"WHAT-IF REPORT: {page}")
            return str(page)

        prepared = prepare_what_if()
        run_what_if = spark_submit(
            "run_what_if",
            launcher.WHAT_IF_APP,
            ["--request", "{{ ti.xcom_pull(task_ids='prepare_what_if')['request'] }}"],
            "what-if",
        )
        prepared >> run_what_if >> write_what_if_report(prepared)
    return dag
