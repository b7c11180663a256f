"""The one SparkSession builder, the interpreter its Python workers use, progress logging under spark-submit, and
run-scoped materialization of intermediate results.

An app runs on one of two kinds of session, with the same code: a classic one (spark-submit starts the driver,
or an in-process caller passes a master such as ``local[2]``) or a Spark Connect one (``SPARK_REMOTE`` set by the
Connect launch of a DAG task, or a master ``sc://host:port``), which talks to a long-lived server instead of
starting a JVM (``housekeeping.orchestration.spark_connect``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from housekeeping.core.errors import InputError
from housekeeping.core.spark_conf import CONNECT_SQL_CONF_ENV, LONG_LIVED_DRIVER_CONF, is_session_setting

PROGRESS_ENV = "HOUSEKEEPING_PROGRESS_SECONDS"

# Shuffle partitions of a classic session unless its Spark configuration (spark-defaults.conf, spark-submit's
# --conf, the Spark connection's conf) says otherwise: Spark's 200 is thousands of near-empty tasks for a store's
# metadata. A Connect session always asks for this many (the server's configuration is shared by every client).
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
DEFAULT_SHUFFLE_PARTITIONS = "8"


def progress_line(app_name: str, elapsed_s: float, stages: list) -> str:
    """One progress line: each active stage's completed/total tasks (Spark's own stage names)."""
    active = "; ".join(
        f"stage {s.stageId} ({s.name.split(' at ')[0][:40]}): {s.numCompletedTasks}/{s.numTasks} tasks"
        + (f", {s.numActiveTasks} running" if s.numActiveTasks else "")
        + (f", {s.numFailedTasks} failed" if s.numFailedTasks else "")
        for s in stages
    )
    return f"[{app_name}] {elapsed_s:.0f} s: {active or 'driver work (no Spark stage running)'}"


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect session (no SparkContext in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class _ConnectProgress:
    """Spark Connect's progress handler, printing at most one line per interval (the server reports stages by
    id and task counts only)."""

    def __init__(self, app_name: str, interval: float) -> None:
        self.app_name, self.interval = app_name, interval
        self.started = self.last = time.monotonic()

    def __call__(self, stages, inflight_tasks: int, operation_id, done: bool) -> None:
        now = time.monotonic()
        if done or now - self.last < self.interval:
            return
        self.last = now
        active = "; ".join(
            f"stage {s.stage_id}: {s.num_completed_tasks}/{s.num_tasks} tasks"
            for s in stages or ()
            if not s.done
        )
        print(
            f"[{self.app_name}] {now - self.started:.0f} s: {active or 'driver work'}"
            + (f", {inflight_tasks} running" if inflight_tasks else ""),
            file=sys.stderr,
            flush=True,
        )


def start_progress_log(spark: SparkSession, app_name: str) -> None:
    """Under spark-submit or a Connect launch, print the app's Spark progress to stderr every
    HOUSEKEEPING_PROGRESS_SECONDS (default 30; 0 turns it off). The task streams the app's output into the
    Airflow task log, so a long plan or gate shows where it is (the console progress bar is off: its carriage
    returns garble a log)."""
    interval = float(os.environ.get(PROGRESS_ENV, "30"))
    if interval <= 0:
        return
    if is_connect(spark):
        spark.registerProgressHandler(_ConnectProgress(app_name, interval))
        return
    tracker = spark.sparkContext.statusTracker()
    started = time.monotonic()

    def report() -> None:
        while True:
            time.sleep(interval)
            try:
                stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                line = progress_line(
                    app_name, time.monotonic() - started, [s for s in stages if s is not None]
                )
            except Exception:  # the session is stopping; progress is best effort
                return
            print(line, file=sys.stderr, flush=True)

    threading.Thread(target=report, name="housekeeping-progress", daemon=True).start()


def use_own_interpreter() -> None:
    """Spark starts its Python workers with ``PYSPARK_PYTHON``, else the first ``python3`` on PATH, which need not
    have this project's packages (a command run by its full path from a virtualenv that is not on PATH, as cron,
    systemd or another tool runs it). Unless the user set ``PYSPARK_PYTHON``, the workers use the interpreter
    this driver runs in. Read by the SparkContext when the session starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def get_spark(
    app_name: str, master: str | None = None, driver_conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The one SparkSession builder of the project. Under spark-submit (the DAGs) the master comes from the
    submit command, under a Connect launch from ``SPARK_REMOTE`` (pyspark reads it); in-process callers (CLI,
    tests, benchmarks) pass one and get a UI-less, quiet session, or a Connect session for ``sc://...``.
    ``driver_conf`` overrides ``LONG_LIVED_DRIVER_CONF`` for a classic session this call starts (a benchmark's
    before figure)."""
    use_own_interpreter()
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        # Plan strings are built for every SQL execution (UI/status store); bound them.
        .config("spark.sql.maxPlanStringLength", "200000")
    )
    if master is not None and master.startswith("sc://"):
        # A Connect session takes SQL settings only (the server owns the rest: housekeeping.orchestration.spark_connect).
        return session_settings(builder.remote(master).getOrCreate())
    if not os.environ.get("SPARK_REMOTE"):
        for key, value in {**LONG_LIVED_DRIVER_CONF, **(driver_conf or {})}.items():
            builder = builder.config(key, value)
    if master is None:
        session = session_settings(builder.getOrCreate())
        start_progress_log(session, app_name)
        return session
    spark = (
        builder.master(master)
        .config("spark.ui.enabled", "false")
        # In-process callers share one JVM for every run (tests run the whole suite in it).
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return session_settings(spark)


def session_settings(spark: SparkSession) -> SparkSession:
    """The session as every app gets it: the default shuffle partitions, then, on Connect, the launch's own SQL
    settings (CONNECT_SQL_CONF_ENV), which may set them otherwise."""
    default_shuffle_partitions(spark)
    if is_connect(spark):
        for key, value in connect_sql_conf().items():
            spark.conf.set(key, value)
    else:
        import_jvm_classes(spark)
    return spark


# The JVM classes PySpark's classic DataFrame API reaches by a simple name that its gateway imports only with a whole
# package (``functions``, the most used, PySpark imports by name itself): ``PythonUtils`` for every list of columns
# or names, ``PythonSQLUtils``.
SIMPLE_NAME_CLASSES = (
    "org.apache.spark.api.python.PythonUtils",
    "org.apache.spark.sql.api.python.PythonSQLUtils",
)


def import_jvm_classes(spark: SparkSession) -> None:
    """py4j resolves a simple name by trying it as a class of its own, then each package the gateway imports whole
    in turn (``PythonUtils`` is in the third of nine, ``PythonSQLUtils`` the seventh), each miss a search of every
    jar on the classpath; imported by name, the name's package is found first. A plan and its gate make thousands of
    such lookups."""
    from py4j.java_gateway import java_import

    for name in SIMPLE_NAME_CLASSES:
        java_import(spark.sparkContext._jvm, name)


def default_shuffle_partitions(spark: SparkSession) -> SparkSession:
    """The session with DEFAULT_SHUFFLE_PARTITIONS: a Connect session always, a classic one unless its
    application's configuration sets them."""
    if is_connect(spark) or not spark.sparkContext.getConf().contains(SHUFFLE_PARTITIONS):
        spark.conf.set(SHUFFLE_PARTITIONS, DEFAULT_SHUFFLE_PARTITIONS)
    return spark


def connect_sql_conf() -> dict[str, str]:
    """A Connect launch's SQL settings from CONNECT_SQL_CONF_ENV (the step's operator writes it): a JSON object of
    ``spark.sql.*`` settings; anything else is refused naming the variable, before the session runs a query."""
    text = os.environ.get(CONNECT_SQL_CONF_ENV) or "{}"
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{CONNECT_SQL_CONF_ENV} is not JSON ({exc}): {text[:200]}") from exc
    if not isinstance(settings, dict):
        raise InputError(
            f"{CONNECT_SQL_CONF_ENV} must be a JSON object of Spark SQL settings, not {text[:200]}"
        )
    others = sorted(str(k) for k in settings if not is_session_setting(k))
    if others:
        raise InputError(f"{CONNECT_SQL_CONF_ENV} may set spark.sql.* settings only, not {', '.join(others)}")
    return {str(k): str(v) for k, v in settings.items()}


def materialize(frame: DataFrame) -> DataFrame:
    """Compute an intermediate result once and cut its lineage (an eager local checkpoint). Reused results are
    materialized this way rather than cached: a cached frame keeps its whole plan, so every later query nests
    the plans of all the caches it reads, and planning, plan strings and the status store grow with each
    step (a precise backlog run ran the driver out of heap printing one such plan). The blocks live on the
    executors: losing one fails the task (no recomputation) and Airflow's retry reruns the application."""
    return frame.localCheckpoint(eager=True)


@contextmanager
def run_scoped_cache(spark: SparkSession) -> Iterator[None]:
    """Frames an app caches or materializes live for one run. Under spark-submit the application ends anyway;
    in-process callers (CLI, tests, benchmarks) reuse one session, which would otherwise keep every run's
    blocks until the driver heap fills and the JVM spends its time in full GCs."""
    try:
        yield
    finally:
        spark.catalog.clearCache()
        # A Connect session's checkpoints are released with the session (closed when the launch ends).
        if not is_connect(spark):
            for rdd in spark.sparkContext._jsc.getPersistentRDDs().values():
                rdd.unpersist(False)


def interrupt_connect_work_on_sigterm() -> None:
    """A Connect launch stopped by SIGTERM (Airflow's on_kill, a task timeout) interrupts what its session runs
    on the server before it exits: the server would otherwise finish a dead client's queries and writes. A
    no-op under spark-submit, where the application ends with its driver."""
    if not os.environ.get("SPARK_REMOTE"):
        return
    import signal

    def interrupt(signum: int, frame: object) -> None:
        import threading

        # Exit whatever happens: the interrupt is a gRPC call to a possibly busy server, and a normal exit would
        # wait for the client's own threads (reattach, release, progress), which once held a launch for minutes.
        watchdog = threading.Timer(30, os._exit, (128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        active = _active_connect_session()
        if active is not None:
            try:
                active.interruptAll()
                active.stop()
            except Exception as exc:  # best effort: the server drops the session at its idle timeout anyway
                print(f"could not interrupt the Spark Connect session: {exc!r}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, interrupt)


def stop_connect_session() -> None:
    """Close this process's Spark Connect session, if it has one, so the server frees what the run left
    (checkpointed blocks, cached data) now rather than at its idle timeout. A no-op under spark-submit."""
    active = _active_connect_session() if os.environ.get("SPARK_REMOTE") else None
    if active is not None:
        active.stop()


def _active_connect_session():
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession.getActiveSession()
