"""The one DAG factory: snapshot -> Spark plan -> Spark/GX gate -> approval -> apply -> purge -> report.

Every housekeeping DAG is ``build_housekeeping_dag(<mechanism>, doc_md=__doc__)`` (DAG files import it from
``housekeeping.dag_factory``): the DAG id, schedule, tags, task ids, apps, params and notifiers come from the
mechanism (``housekeeping.mechanisms.registry``); DAG files are wiring only. Nothing here does work at parse time:
settings are read and libraries imported inside the tasks.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.orchestration.params import capacity_params, housekeeping_params, what_if_params

if TYPE_CHECKING:
    from housekeeping.engine.mechanism import Mechanism

DEFAULT_OWNER = "storage-platform"
# One slot: the steps that delete or move anything (apply, purge) of all the DAGs never run at once on the store,
# whatever the DAGs' schedules, manual triggers and backfills. Created by `make airflow`, the compose file's
# airflow-init and the live-Airflow test: `airflow pools set housekeeping_deletes 1 "..."`. (A task in a pool that
# does not exist is never scheduled; `housekeeping_deletes` missing shows as apply tasks stuck in "scheduled".)
DELETING_POOL = "housekeeping_deletes"
DELETING_POOL_DESCRIPTION = "housekeeping: deleting steps on the store, one at a time"
# Every apply step that changed the store emits an event of this Asset, its figures in the event's extra (a dry
# run's skipped apply, and an apply that changed nothing, emit none: ``record_store_change``); the storage_report DAG
# is scheduled on it. The apply steps name it through an alias, so they emit an event only when there is a change.
STORE_ASSET_NAME = "housekeeping_store"
STORE_ASSET_URI = "housekeeping://store"
STORE_ALIAS_NAME = "housekeeping_store_changes"
# A run not finished this long after it was queued is reported (a Deadline Alert; read when the DAG is built). Off
# unless set: in Airflow 3.3 a DAG with a deadline makes `airflow dags test` and `dag.test()` fail after a successful
# run (apache/airflow#73428), and both are how a run is previewed and tested; the scheduler's runs are unaffected,
# and the compose deployment sets it.
RUN_DEADLINE = "HOUSEKEEPING_RUN_DEADLINE_SECONDS"
RETRY_DELAY = "HOUSEKEEPING_TASK_RETRY_DELAY_SECONDS"
# The XCom of the snapshot task that every later task reads (the run directory, dry run).
RUN_DIR_TEMPLATE = "{{ ti.xcom_pull(task_ids='take_snapshot')['run_dir'] }}"


def store_asset():
    from airflow.sdk import Asset

    return Asset(name=STORE_ASSET_NAME, uri=STORE_ASSET_URI)


def store_alias():
    from airflow.sdk import AssetAlias

    return AssetAlias(name=STORE_ALIAS_NAME)


def record_store_change(context: Any, run_dir: str | Path) -> None:
    """The store Asset's event of an apply that changed something, its figures as the event's extra; none
    otherwise. Prints what apply did as one line."""
    from housekeeping.observe.run_figures import store_change

    change = store_change(run_dir)
    if change is None:
        print("APPLIED: nothing changed (no topic applied): no store event")
        return
    print(
        f"APPLIED: {change['topicsChanged']} topics changed; {change['ledgersDeleted']} ledgers and "
        f"{change['topicsDeleted']} topics deleted ({change['bytesDeleted']} bytes), {change['cursorsMoved']} "
        "cursors moved"
    )
    context["outlet_events"][store_alias()].add(store_asset(), extra=change)


def record_spark_apply(context: Any, result: Any = None) -> None:
    """``post_execute`` of an apply that is a Spark step: :func:`record_store_change` of its run."""
    record_store_change(context, context["ti"].xcom_pull(task_ids="take_snapshot")["run_dir"])


def record_failed_step(context: Any) -> None:
    """Every housekeeping task's ``on_failure_callback`` (its last try): why it failed, as the run's step failure
    (``failures/<task>.json``), unless the step's Spark app recorded its own error already. "Refused" is a step that
    refused its input (the snapshot's bad input and future as-of, apply's run not started to apply)."""
    from housekeeping.core.errors import InputError, StoreUnavailable
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import wall_clock_ms
    from housekeeping.engine.documents import read_step_failures, record_step_failure
    from housekeeping.mechanisms.registry import MECHANISMS
    from housekeeping.store.store import Store

    ti, error = context["ti"], context.get("exception")
    spec = next((m for m in MECHANISMS.values() if m.dag_id == ti.dag_id), None)
    if spec is None:
        return
    run_dir = Store.of_settings(Settings.from_env()).run_dir(spec.name, f"{ti.dag_id}__{ti.run_id}")
    started = getattr(ti, "start_date", None)
    recorded = {failure.step: failure for failure in read_step_failures(run_dir)}.get(ti.task_id)
    if (
        recorded is not None
        and started is not None
        and recorded.at_wall_clock_ms >= started.timestamp() * 1000
    ):
        return  # the step's Spark app recorded its own error during this try
    message = str(error) if error is not None else "the task failed without an error (killed, or timed out)"
    refused = (
        isinstance(error, InputError) and not isinstance(error, StoreUnavailable)
    ) or message.startswith("bad input:")
    record_step_failure(run_dir, ti.task_id, message, refused=refused, at_ms=wall_clock_ms())
    print(f"{'REFUSED' if refused else 'FAILED'}: {ti.task_id}: {message}")


def task_retry_delay() -> timedelta:
    """The first retry's delay of every housekeeping task: ``HOUSEKEEPING_TASK_RETRY_DELAY_SECONDS`` (default 120)."""
    from housekeeping.core.errors import InputError

    raw = os.environ.get(RETRY_DELAY) or "120"
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"{RETRY_DELAY}={raw!r} must be a whole number of seconds, at least 1")
    return timedelta(seconds=int(raw))


def run_deadline(spec: Mechanism) -> Any:
    """The DAG's Deadline Alert (None when ``HOUSEKEEPING_RUN_DEADLINE_SECONDS`` is unset or 0): a run not finished
    that long after it was queued is reported through the project's alert sinks
    (``orchestration.alerts.run_deadline_missed``, in the triggerer)."""
    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    from housekeeping.core.errors import InputError

    raw = os.environ.get(RUN_DEADLINE) or "0"
    if not raw.isdigit():
        raise InputError(f"{RUN_DEADLINE}={raw!r} must be a whole number of seconds (0: no deadline)")
    if int(raw) == 0:
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(seconds=int(raw)),
        callback=AsyncCallback(
            "housekeeping.orchestration.alerts.run_deadline_missed",
            kwargs={"mechanism": spec.name, "deadline_seconds": int(raw)},
        ),
        name=f"{spec.dag_id} unfinished after {int(raw)} s",
    )


@dataclass(frozen=True)
class DagDefaults:
    """What every housekeeping DAG shares (the mechanism gives the rest)."""

    start_date: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    retries: int = 2
    # HOUSEKEEPING_TASK_RETRY_DELAY_SECONDS when the DAG files are parsed (the soak retries within its minutes).
    retry_delay: timedelta = field(default_factory=lambda: task_retry_delay())
    # Each retry waits twice as long as the one before (2, then 4 min), at most max_retry_delay: a Spark
    # cluster that lost a worker or a database failing over gets time to come back.
    retry_exponential_backoff: float = 2.0
    max_retry_delay: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        if self.start_date.tzinfo is None:
            raise ValueError("start_date must be timezone-aware (UTC)")


def spark_submit(
    task_id: str,
    app: str,
    args: list[str],
    mechanism: str,
    operator: type | None = None,
    **operator_kwargs: Any,
):
    """The Spark step of this project (``SparkAppOperator``, a SparkSubmitOperator): runs the Spark app module
    ``app`` through ``spark_apps/submit.py`` (``housekeeping.engine.launcher``) with the Spark connection from
    settings: spark-submit for a ``spark`` connection, a client of the Spark Connect server for a ``spark_connect``
    one. Airflow's own Python (the project's virtualenv) is the driver's and the executors' unless
    PYSPARK_DRIVER_PYTHON / PYSPARK_PYTHON are set (on a cluster, PYSPARK_PYTHON names the workers'
    interpreter), and its bin is on PATH (SparkSubmitHook runs a bare ``spark-submit``)."""
    from housekeeping.core.settings import spark_conn_id
    from housekeeping.engine import launcher
    from housekeeping.orchestration.spark_operator import SparkAppOperator

    python = sys.executable
    log_settings = Path(__file__).with_name("spark-log4j2.properties")
    env_vars = {
        # The driver's JVM options of spark-submit, beside (not instead of) spark.driver.extraJavaOptions.
        "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} "
        f"-Dlog4j2.configurationFile=file:{log_settings}".strip(),
        "HOUSEKEEPING_STEP": task_id,  # the step a failure of the app is recorded under (spark_apps/submit.py)
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or python,
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON") or python,
    }
    return (operator or SparkAppOperator)(
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
    from housekeeping.core.timeutil import parse_as_of

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


def _run_facts(spec: Mechanism, context: dict[str, Any]) -> tuple[str, str, int | None]:
    """The run's id, its actor (this DAG run and who triggered it, journaled by apply and purge) and its data
    interval in ms (the time between scheduled runs; None for a manual run)."""
    dag_run = context.get("dag_run")
    user = getattr(dag_run, "triggering_user_name", None)
    actor = f"airflow {spec.dag_id} ({context['run_id']})" + (f" triggered by {user}" if user else "")
    start = getattr(dag_run, "data_interval_start", None)
    end = getattr(dag_run, "data_interval_end", None)
    interval = int((end - start).total_seconds() * 1000) if start is not None and end is not None else None
    return f"{spec.dag_id}__{context['run_id']}", actor, interval


def snapshot_task(spec: Mechanism, defaults: DagDefaults):
    """``take_snapshot``: what the form asks of the store (``Mechanism.before_snapshot``), the run request built
    from the params as the CLI builds it from its options (``registry.build_request``), then the snapshot."""
    from airflow.sdk import get_current_context, task

    @task(task_id="take_snapshot", retries=defaults.retries, show_return_value_in_logs=False)
    def take_snapshot() -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from housekeeping.core.errors import InputError, StoreUnavailable

        context = get_current_context()
        try:
            return _take_snapshot(spec, context)
        except StoreUnavailable:
            raise  # the database away for a while: the task's retries are for this
        except InputError as exc:
            # Bad input is not worth a retry: one line naming the param and the rule, and nothing changed.
            raise AirflowFailException(f"bad input: {exc}") from None

    return take_snapshot()


def run_preview_reason(params: Any, context: dict[str, Any]) -> str | None:
    """Why this run previews (a dry run) whatever its form says: a scheduled run that started late
    (``housekeeping.engine.guards.late_scheduled_start``: the run Airflow creates when a DAG is unpaused)."""
    import time

    from housekeeping.engine.guards import SCHEDULED_START_TOLERANCE, late_scheduled_start

    dag_run = context.get("dag_run")
    run_type = getattr(dag_run, "run_type", None)
    if params.get("dry_run") or dag_run is None or getattr(run_type, "value", run_type) != "scheduled":
        return None
    started = getattr(dag_run, "start_date", None)
    started_ms = int(started.timestamp() * 1000) if started is not None else int(time.time() * 1000)
    slot_ms = int(dag_run.run_after.timestamp() * 1000)
    return late_scheduled_start(slot_ms, started_ms, int(SCHEDULED_START_TOLERANCE.read()))


def _take_snapshot(spec: Mechanism, context: dict[str, Any]) -> dict[str, Any]:
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import format_ms
    from housekeeping.engine.documents import Intent
    from housekeeping.engine.guards import refuse_acting_in_the_future
    from housekeeping.mechanisms.steps import snapshot_step
    from housekeeping.store.store import Store

    params = context["params"]
    as_of_ms = resolve_as_of_ms(params, context)
    preview = run_preview_reason(params, context)
    dry_run = bool(params.get("dry_run")) or preview is not None
    if preview is not None:
        print(f"PREVIEW: {preview}")
    if not dry_run:
        refuse_acting_in_the_future(as_of_ms)
    settings = Settings.from_env()
    store = Store.of_settings(settings)
    run_id, actor, interval = _run_facts(spec, context)
    spec.before_snapshot(store, params, as_of_ms, actor)
    info = snapshot_step(
        store,
        spec.name,
        run_id=run_id,
        as_of_ms=as_of_ms,
        values=params,
        scope=params.get("scope") or None,
        settings=settings,
        actor=actor,
        schedule_interval_ms=interval,
        intent=Intent.PREVIEW if preview else Intent.DRY_RUN if dry_run else Intent.APPLY,
        preview_reason=preview,
    )
    print(
        f"SNAPSHOT: {info.topic_count} topics as of {format_ms(as_of_ms)}{' (dry run)' if dry_run else ''}: {info.run_dir}"
    )
    return {
        "run_dir": str(info.run_dir),
        "as_of": format_ms(as_of_ms),
        "topics": info.topic_count,
        "dry_run": dry_run,
        "preview_reason": preview,
    }


def gate_steps(spec: Mechanism):
    """The Spark plan, the Spark/GX gate and the approval step. A rejected plan is a deterministic verdict that
    needs a person, not a retry (``GateOperator`` fails it at once); Spark failing under the gate is retried."""
    from housekeeping.engine import launcher
    from housekeeping.orchestration.alerts import GateFailedNotifier
    from housekeeping.orchestration.approval_operator import DeletionApprovalOperator
    from housekeeping.orchestration.spark_operator import GateOperator

    ids = spec.task_ids
    plan = spark_submit(ids.plan, spec.plan_app, ["--run-dir", RUN_DIR_TEMPLATE], spec.name)
    validate = spark_submit(
        ids.validate,
        launcher.GATE_APP,
        ["--run-dir", RUN_DIR_TEMPLATE, "--mechanism", spec.name],
        spec.name,
        operator=GateOperator,
        on_failure_callback=[GateFailedNotifier(), record_failed_step],
    )
    # Between the gate and apply: a person says yes to a plan over the approval thresholds.
    approve = DeletionApprovalOperator(task_id=ids.approve, mechanism=spec.name, retries=0)
    plan >> validate >> approve
    return plan, approve


def apply_steps(spec: Mechanism, snapshot: Any) -> tuple[Any, Any]:
    """(first, last) of the apply: the mechanism's apply in the task, or its Spark apply app (a dry run skips it
    with a short circuit: purge then skips too, the report still runs)."""
    from airflow.sdk import task

    if spec.apply_app is not None:

        @task.short_circuit(task_id="skip_apply_on_dry_run", ignore_downstream_trigger_rules=False)
        def not_dry_run(snapshot_info: dict[str, Any]) -> bool:
            return not snapshot_info["dry_run"]

        gate = not_dry_run(snapshot)
        applied = spark_submit(
            spec.task_ids.apply,
            spec.apply_app,
            ["--run-dir", RUN_DIR_TEMPLATE],
            spec.name,
            pool=DELETING_POOL,
            outlets=[store_alias()],
            post_execute=record_spark_apply,
        )
        gate >> applied
        return gate, applied

    @task(
        task_id=spec.task_ids.apply,
        pool=DELETING_POOL,
        outlets=[store_alias()],
        show_return_value_in_logs=False,
    )
    def apply_plan(snapshot_info: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk import get_current_context
        from airflow.sdk.exceptions import AirflowSkipException

        from housekeeping.core.settings import Settings
        from housekeeping.mechanisms.steps import apply_step
        from housekeeping.store.store import Store

        if snapshot_info["dry_run"]:
            raise AirflowSkipException("dry run: the checked plan is reported, not applied")
        result = apply_step(Store.of_settings(Settings.from_env()), Path(snapshot_info["run_dir"]))
        record_store_change(get_current_context(), snapshot_info["run_dir"])
        return result

    applied = apply_plan(snapshot)
    return applied, applied


def purge_and_report(spec: Mechanism, snapshot: Any) -> tuple[Any, Any]:
    """``purge_pending_deletions`` (files past their grace period) and the report task (with the run's figures
    through Airflow's metrics path, and the mechanism's notifiers)."""
    from airflow.sdk import TriggerRule, task

    @task(task_id="purge_pending_deletions", pool=DELETING_POOL, show_return_value_in_logs=False)
    def purge_pending(snapshot_info: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from housekeeping.core.settings import Settings
        from housekeeping.mechanisms.steps import purge_step
        from housekeeping.observe.run_figures import describe_purge
        from housekeeping.store.store import Store

        if snapshot_info["dry_run"]:
            raise AirflowSkipException("dry run: nothing is purged")
        result = purge_step(Store.of_settings(Settings.from_env()), Path(snapshot_info["run_dir"]))
        print(f"PURGED: {describe_purge(result)}")
        return result

    @task(
        task_id=spec.task_ids.report,
        show_return_value_in_logs=False,
        trigger_rule=TriggerRule.NONE_FAILED,
        on_success_callback=list(spec.report_notifiers()) or None,
    )
    def write_report(snapshot_info: dict[str, Any]) -> str:
        from airflow.sdk.observability import stats

        from housekeeping.mechanisms.steps import report_step
        from housekeeping.observe.run_figures import describe, emit_run_figures

        path = report_step(Path(snapshot_info["run_dir"]), dry_run=snapshot_info["dry_run"])
        print(f"REPORT: {path}")
        # Through Airflow's [metrics] backend (StatsD / OpenTelemetry), where its own metrics go.
        figures = emit_run_figures(snapshot_info["run_dir"], stats, dry_run=snapshot_info["dry_run"])
        print(f"RUN: {describe(figures)}")
        return str(path)

    return purge_pending(snapshot), write_report(snapshot)


def build_housekeeping_dag(mechanism: str, *, doc_md: str, defaults: DagDefaults | None = None):
    from airflow.sdk import DAG

    from housekeeping.mechanisms.registry import get_mechanism

    defaults = (
        defaults or DagDefaults()
    )  # read when the DAG file is parsed, not when this module was imported

    spec = get_mechanism(mechanism)
    with DAG(
        dag_id=spec.dag_id,
        schedule=spec.schedule,
        start_date=defaults.start_date,
        catchup=False,
        max_active_runs=1,  # one deleting run at a time per mechanism; apply's CAS covers the rest
        doc_md=doc_md,
        tags=["housekeeping", "pulsar", spec.name, *spec.tags],
        params=housekeeping_params(spec),
        deadline=run_deadline(spec),
        default_args={
            "owner": DEFAULT_OWNER,
            "retries": defaults.retries,
            "retry_delay": defaults.retry_delay,
            "retry_exponential_backoff": defaults.retry_exponential_backoff,
            "max_retry_delay": defaults.max_retry_delay,
            "on_failure_callback": [record_failed_step],
        },
        render_template_as_native_obj=False,
    ) as dag:
        snapshot = snapshot_task(spec, defaults)
        plan, approve = gate_steps(spec)
        first_apply, last_apply = apply_steps(spec, snapshot)
        purged, report = purge_and_report(spec, snapshot)
        snapshot >> plan
        approve >> first_apply
        last_apply >> purged >> report
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
        from housekeeping.orchestration.alerts import DeletionLagNotifier

        @task(task_id="write_storage_report", on_success_callback=[DeletionLagNotifier()])
        def write_storage_report() -> str:
            from housekeeping.core.settings import Settings
            from housekeeping.observe.storage_report import write_storage_report
            from housekeeping.store.store import Store

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
                Store.of_settings(settings), int(moment.timestamp() * 1000), settings.deletion_lag_objectives
            )
            events = context.get("triggering_asset_events") or {}
            changed = sum(len(v) for v in events.values())
            print(f"STORAGE REPORT: {page} ({changed} store change event(s) since the last report)")
            return str(page)

        write_storage_report()
    return dag


def build_capacity_report_dag(doc_md: str):
    """The capacity_report DAG: daily, and backfillable: each run's as-of is its logical date, so a backfilled date
    writes what a run on that date wrote. No Spark: it reads the metadata."""
    from airflow.sdk import DAG, get_current_context, task
    from airflow.timetables.trigger import CronTriggerTimetable

    from housekeeping.orchestration.alerts import CapacityNotifier

    with DAG(
        dag_id="capacity_report",
        schedule=CronTriggerTimetable("0 1 * * *", timezone="UTC"),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        doc_md=doc_md,
        params=capacity_params(),
        tags=["housekeeping", "report"],
        default_args={"owner": DEFAULT_OWNER, "retries": 1, "retry_delay": timedelta(minutes=1)},
    ) as dag:

        @task(task_id="write_capacity_report", on_success_callback=[CapacityNotifier()])
        def write_capacity_report() -> str:
            from housekeeping.core.settings import Settings
            from housekeeping.observe.capacity.forecast import ForecastOptions
            from housekeeping.observe.capacity.report import write_capacity_report
            from housekeeping.store.store import Store

            context = get_current_context()
            params = context["params"]
            horizon = str(params.get("horizon") or "30d")
            horizon_s = ForecastOptions.parse(horizon, name=lambda option: f"param {option}").horizon_s
            as_of_ms = resolve_as_of_ms(params, context)
            settings = Settings.from_env()
            page = write_capacity_report(
                Store.of_settings(settings), as_of_ms, horizon_s=horizon_s, budgets=settings.capacity_budgets
            )
            print(f"CAPACITY REPORT: {page}")
            return str(page)

        write_capacity_report()
    return dag


def build_policy_what_if_dag(doc_md: str):
    """The policy_what_if DAG: manual only; the what-if (or sweep) runs as a Spark step of its own and its report
    is drawn after. No apply, no purge, no slot of the deleting pool: it changes nothing in the store."""
    from airflow.sdk import DAG, get_current_context, task

    from housekeeping.engine import launcher

    with DAG(
        dag_id="policy_what_if",
        schedule=None,
        # Manual only and it changes nothing: unpaused, so a what-if asked from the form or the console runs.
        is_paused_upon_creation=False,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        doc_md=doc_md,
        tags=["housekeeping", "what-if"],
        params=what_if_params(),
        default_args={"owner": DEFAULT_OWNER, "retries": 0},
    ) as dag:

        @task(task_id="prepare_what_if", show_return_value_in_logs=False)
        def prepare_what_if() -> dict[str, Any]:
            """Checks the form before Spark starts and writes the request the Spark step reads."""
            return prepare_what_if_request(get_current_context())

        @task(task_id="write_what_if_report")
        def write_what_if_report(prepared: dict[str, Any]) -> str:
            from housekeeping.core.settings import Settings
            from housekeeping.store.store import Store
            from housekeeping.what_if.report import WHAT_IF_JSON, record_latest, write_page

            report_dir = Path(prepared["report_dir"])
            document = json.loads((report_dir / WHAT_IF_JSON).read_text(encoding="utf-8"))
            page = write_page(document, report_dir)
            record_latest(
                Store.of_settings(Settings.from_env()).root,
                report_dir,
                document,
                get_current_context()["run_id"],
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


def prepare_what_if_request(context: dict[str, Any]) -> dict[str, Any]:
    """``prepare_what_if``: the form checked against the store (bad input fails here, before Spark starts), then the
    request the Spark step reads written to the run's report directory."""

    from airflow.sdk.exceptions import AirflowFailException

    from housekeeping.core.errors import InputError, StoreUnavailable
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import format_ms
    from housekeeping.store.store import Store
    from housekeeping.what_if.overlay import PolicyOverlay
    from housekeeping.what_if.report import report_dir_of
    from housekeeping.what_if.what_if import check_against_store

    params = context["params"]
    policies = params.get("policies") or {}
    sweep = params.get("sweep") or None
    store = Store.of_settings(Settings.from_env())
    try:
        overlay = PolicyOverlay.from_document(policies, "the policies param") if policies else None
        check_against_store(store, params["mechanism"], overlay, sweep, params.get("scope") or None)
    except StoreUnavailable:
        raise  # the database away for a while: the task's retries are for this
    except InputError as exc:
        # Bad input fails here, in one line naming the param and the rule, before any Spark step.
        raise AirflowFailException(f"bad input: {exc}") from None
    report_dir = report_dir_of(store.root, context["run_id"])
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
