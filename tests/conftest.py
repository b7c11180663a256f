"""Shared fixtures: one session-scoped local SparkSession, a private Airflow home, store builders.

Airflow's environment must be set before anything imports airflow, so it is set here at import time.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Real admin JSON a test reads (tests/samples/README.md says where each came from).
SAMPLES = REPO / "tests" / "samples"
VENV_BIN = Path(sys.executable).parent

_airflow_home = Path(tempfile.mkdtemp(prefix="housekeeping-airflow-"))
os.environ["AIRFLOW_HOME"] = str(_airflow_home)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
os.environ["GX_ANALYTICS_ENABLED"] = "False"
# Test-only JVM settings for every Spark driver the suite starts (see the file).
os.environ["SPARK_CONF_DIR"] = str(REPO / "tests" / "spark-conf")
# No bytecode verification of the classes every JVM loads from Spark's jars, in every test JVM (tests/spark-conf says
# why).
NO_CLASS_VERIFICATION = "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
# The JVM options of the short-lived Spark processes the suite starts from Python (the standalone cluster's
# daemons), as spark-defaults.conf gives spark-submit's drivers: C1 only, which halves a JVM's CPU over its first
# seconds.
TEST_JVM_OPTIONS = f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 {NO_CLASS_VERIFICATION}"
# The long-lived ones (each worker's in-process session and the run's Spark Connect server, which plan and gate
# hundreds of times over the run) keep the JVM's full tiered JIT: C2's compiled Catalyst repays its compiling within
# a few dozen plans (benchmarks/README.md, "The test suite"). Which JIT compiles the JVM's code changes no result.
LONG_LIVED_JVM_OPTIONS = f"-XX:+UseSerialGC {NO_CLASS_VERIFICATION}"
# PYSPARK_SUBMIT_ARGS is read only when pyspark starts its own JVM (the in-process session).
os.environ["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{LONG_LIVED_JVM_OPTIONS}" pyspark-shell'
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("HOUSEKEEPING_SPARK_MASTER", "local[2]")
# One directory for the whole pytest run, shared by its xdist workers: the process that imports this file first (the
# xdist controller, whose environment the workers inherit) makes it, and stops what the workers left running there
# (pytest_sessionfinish below).
_SHARED_DIR_ENV = "HOUSEKEEPING_TESTS_SHARED_DIR"
_OWNS_SHARED_DIR = _SHARED_DIR_ENV not in os.environ
if _OWNS_SHARED_DIR:
    os.environ[_SHARED_DIR_ENV] = tempfile.mkdtemp(prefix="housekeeping-tests-shared-")
SHARED_DIR = Path(os.environ[_SHARED_DIR_ENV])
for _name in (
    "HOUSEKEEPING_METADATA_URL",
    "HOUSEKEEPING_BROKER_CONF",
    "HOUSEKEEPING_STORE_ROOT",
    "HOUSEKEEPING_OFFLOAD_URL",
    "HOUSEKEEPING_OFFLOAD_ENDPOINT_URL",
):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def spark():
    from spark_apps.shared.session import get_spark

    session = get_spark("housekeeping-tests", "local[2]")
    yield session
    session.stop()


# The Spark Connect server's settings over tests/spark-conf's: Spark's adaptive execution and broadcast joins of
# small sides, as in production (the physical plans a deployment runs; a Connect session asks for 8 shuffle
# partitions, which adaptive execution coalesces), with the suite's interpreted expressions: compiling each
# query's generated code was a large share of the server's CPU per DAG run. Its JIT is the full tiered one
# (LONG_LIVED_JVM_OPTIONS): with interpreted expressions C2 costs less over the run than C1 alone.
CONNECT_SERVER_EXECUTION = {
    "spark.driver.extraJavaOptions": LONG_LIVED_JVM_OPTIONS,
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.autoBroadcastJoinThreshold": "10MB",
}
# Spark's code generation and runtime bloom filters as production runs them: the sessions of the Connect equality
# test set them (their operator's conf reaches their Connect session), so that test compares the classic session's
# execution (tests/spark-conf) with Spark's defaults, adaptive execution and broadcast joins on every mechanism.
PRODUCTION_SQL = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
}

# The Airflow connection of the run's Spark Connect server (spark_connect_server below).
SPARK_CONNECT_CONN_ID = "spark_connect_tests"


@pytest.fixture(scope="session")
def spark_connect_server():
    """A real Spark Connect server (housekeeping.orchestration.spark_connect, as `housekeeping spark-connect start`
    runs it), registered as the Airflow connection SPARK_CONNECT_CONN_ID. One for the whole pytest run: the first
    worker to need it starts it, the others connect to it (a Connect server serves each client its own session, as
    a deployment's does), and the run's first process stops it at the end; one server instead of one per worker
    saves the start and the compilation of the same query shapes in each. Unlike the suite's other drivers
    (tests/spark-conf) it plans queries as production does, with adaptive execution and broadcast joins
    (CONNECT_SERVER_EXECUTION). Yields its sc:// URL."""
    from housekeeping.orchestration import spark_connect
    from tests.pg_server import free_port

    state_dir = SHARED_DIR / "spark-connect"
    state = spark_connect.ServerState(state_dir)
    with (SHARED_DIR / "spark-connect.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if state.pid() is None:
            # Three workers' queries at once (each worker's own server had the default 2 GiB).
            spark_connect.start(
                state_dir,
                port=free_port(),
                driver_memory="3g",
                extra_conf=CONNECT_SERVER_EXECUTION,
                wait_s=180,
            )
        port = state.port()
    os.environ[f"AIRFLOW_CONN_{SPARK_CONNECT_CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "spark_connect", "host": "localhost", "port": port}
    )
    return f"sc://localhost:{port}"


def pytest_sessionfinish(session, exitstatus):
    """The run's first process (the xdist controller, after every worker has finished) stops the shared Spark
    Connect server, if a worker started it."""
    if _OWNS_SHARED_DIR:
        from housekeeping.orchestration import spark_connect

        spark_connect.stop(SHARED_DIR / "spark-connect")


def connect_app(task_id: str, module: str, args: list[str], conf: dict[str, str] | None = None):
    """The DAGs' operator launching the Spark app ``module`` with ``args`` on the run's Spark Connect server (its
    ``run_on_connect``: plain Python, SPARK_REMOTE, the server's executors); ``conf``: its session's settings."""
    from housekeeping.engine import launcher
    from housekeeping.orchestration.spark_operator import SparkAppOperator

    return SparkAppOperator(
        task_id=task_id,
        application=str(launcher.SUBMIT_APP),
        application_args=launcher.submit_args(module, args),
        conn_id=SPARK_CONNECT_CONN_ID,
        conf=conf,
    )


def plan_and_gate_on_connect(run_dir: Path, mechanism: str) -> dict:
    """As a DAG run's plan and gate tasks on the Spark Connect server (the ``spark_connect_server`` fixture must be
    up), with Spark's code generation and runtime filters as production runs them (PRODUCTION_SQL). The gate's
    result document."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    from housekeeping.engine import launcher
    from housekeeping.engine.documents import read_gate_result
    from housekeeping.mechanisms.registry import get_mechanism

    url = SparkConnectHook(SPARK_CONNECT_CONN_ID).get_connection_url()
    connect_app(
        "plan", get_mechanism(mechanism).plan_app, ["--run-dir", str(run_dir)], PRODUCTION_SQL
    ).run_on_connect(url)
    gate_args = ["--run-dir", str(run_dir), "--mechanism", mechanism]
    connect_app("gate", launcher.GATE_APP, gate_args, PRODUCTION_SQL).run_on_connect(url)
    return read_gate_result(run_dir)


@pytest.fixture(scope="session")
def dagbag_on_spark_connect(airflow_db, spark_connect_server):
    """The DAGs parsed with HOUSEKEEPING_SPARK_CONN_ID naming the run's Spark Connect server: their Spark
    steps connect to it, as in `make airflow` (the spark-submit path: tests/dags/test_dags.py)."""
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOUSEKEEPING_SPARK_CONN_ID", SPARK_CONNECT_CONN_ID)
        return DagBag(dag_folder=str(REPO / "dags"))


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated Airflow metadata DB in the session's private AIRFLOW_HOME."""
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], check=True, capture_output=True, env=os.environ.copy()
    )
    return _airflow_home


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server of this pytest worker (tests/pg_server.py), stopped at the end."""
    from tests.pg_server import PostgresServer

    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.processes)])
def metadata_backend(request, monkeypatch) -> str:
    """Runs the test once per metadata database: SQLite in the store (the default), then a fresh database on
    the real PostgreSQL server, chosen as users do, through HOUSEKEEPING_METADATA_URL. Every store the test
    opens without an explicit URL uses it, so such a test keeps to one store."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_server").create_database()
        monkeypatch.setenv("HOUSEKEEPING_METADATA_URL", url)
    return request.param


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API server of this pytest worker (tests/s3_server.py: moto's server on loopback), stopped at the
    end."""
    from tests.s3_server import S3Server

    server = S3Server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and worker of this pytest worker (tests/spark_cluster.py), stopped at the end."""
    from tests.spark_cluster import StandaloneCluster

    cluster = StandaloneCluster.start(tmp_path_factory.mktemp("spark-cluster"), TEST_JVM_OPTIONS)
    yield cluster
    cluster.stop()


def plan_and_gate_on_cluster(cluster, run_dir: Path, mechanism: str) -> dict:
    """As a DAG run's plan and gate tasks submitted to the standalone cluster (``standalone_cluster``, with
    ``airflow_db``): the gate's result document."""
    from housekeeping.engine import launcher
    from housekeeping.engine.documents import read_gate_result
    from housekeeping.mechanisms.registry import get_mechanism
    from tests.spark_cluster import submit_app

    submit_app(cluster, "plan", get_mechanism(mechanism).plan_app, ["--run-dir", str(run_dir)], mechanism)
    gate_args = ["--run-dir", str(run_dir), "--mechanism", mechanism]
    submit_app(cluster, "validate", launcher.GATE_APP, gate_args, mechanism)
    return read_gate_result(run_dir)


def _use_tier(kind: str, request, monkeypatch, tmp_path):
    from housekeeping.store.tier import OFFLOAD_ENDPOINT_ENV, OFFLOAD_URL_ENV, tier_of_settings

    if kind == "s3":
        from tests.s3_server import CREDENTIALS

        server = request.getfixturevalue("s3_server")
        for name, value in CREDENTIALS.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv(OFFLOAD_URL_ENV, f"s3://{server.create_bucket()}/offloaded")
        monkeypatch.setenv(OFFLOAD_ENDPOINT_ENV, server.endpoint_url)
    else:
        directory = tmp_path / "tier"
        directory.mkdir()
        monkeypatch.setenv(OFFLOAD_URL_ENV, str(directory))
        monkeypatch.delenv(OFFLOAD_ENDPOINT_ENV, raising=False)
    return tier_of_settings()


@pytest.fixture(params=["directory", pytest.param("s3", marks=pytest.mark.processes)])
def object_tier(request, monkeypatch, tmp_path):
    """Runs the test once per kind of object tier, chosen as users do (HOUSEKEEPING_OFFLOAD_URL): a directory (the
    embedded default), then a fresh bucket on the real S3 API server with the standard AWS credentials in the
    environment. Yields the ObjectTier; every store the test opens uses it. For the tests where the kind of tier
    matters: uploads, reads, deletes."""
    return _use_tier(request.param, request, monkeypatch, tmp_path)


@pytest.fixture
def directory_tier(request, monkeypatch, tmp_path):
    """A directory tier only: for tests whose decisions read the metadata and not the tier's objects (the tier
    code is the same pyarrow.fs path for both kinds, which ``object_tier`` tests)."""
    return _use_tier("directory", request, monkeypatch, tmp_path)


@pytest.fixture
def s3_tier(request, monkeypatch, tmp_path):
    """An S3 tier only (a fresh bucket on the real S3 API server): for a costly test whose directory twin adds
    nothing the ``object_tier`` tests do not already cover. Its test must carry the ``processes`` mark."""
    return _use_tier("s3", request, monkeypatch, tmp_path)


def write_manifest(tmp_path: Path, document: dict, name: str = "manifest.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def topic_body(ledgers: list[tuple], cursors: dict | None = None, **extra) -> dict:
    """ledgers: (ledgerId, entries, size, closeTimestamp or None); the last one is the current ledger."""
    body = {
        "ledgers": [
            {
                "ledgerId": lid,
                "entries": entries,
                "size": size,
                **({"timestamp": ts} if ts is not None else {}),
            }
            for lid, entries, size, ts in ledgers
        ],
        "cursors": {
            name: ({"markDeletePosition": spec} if isinstance(spec, str) else spec)
            for name, spec in (cursors or {}).items()
        },
    }
    body.update(extra)
    return body


def ledger_topic(
    ledgers: list[tuple[int, list[int], int | None]],
    cursors: dict,
    policies: dict | None = None,
    entry_size: int = 10,
    **extra,
) -> dict:
    """A manifest topic with real entries. ledgers: (ledgerId, entry publish times, close time or None for the
    current ledger); every entry holds `entry_size` bytes."""
    body: dict = {"ledgers": [], "cursors": cursors, "messages": [], **extra}
    for ledger_id, stamps, closed in ledgers:
        body["ledgers"].append(
            {
                "ledgerId": ledger_id,
                "entries": len(stamps),
                "size": entry_size * len(stamps),
                **({"timestamp": closed} if closed else {}),
            }
        )
        body["messages"] += [
            {"ledgerId": ledger_id, "entryId": i, "publishTime": ts, "value": "v" * entry_size}
            for i, ts in enumerate(stamps)
        ]
    if policies:
        body["policies"] = policies
    return body


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`housekeeping ARGV` in process: (exit code, stdout, stderr)."""
    from housekeeping.cli.main import main

    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys, *argv: str) -> dict:
    """`housekeeping ARGV` in process, which must succeed: its JSON output."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def load_store(capsys, tmp_path: Path, document: dict) -> str:
    """`housekeeping load` of the manifest ``document`` into ``tmp_path/store``: the store's path."""
    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, document))
    )
    assert code == 0, err
    return store


def run_steps(
    store,
    mechanism: str,
    as_of_ms: int,
    run_id: str,
    *,
    dry_run: bool = False,
    grace: int = 0,
    values: dict | None = None,
):
    """A DAG run's task steps in-process, in the DAG's order (take_snapshot -> plan -> validate -> apply ->
    purge -> report; a dry run skips apply and purge), on the session's Spark; ``values``: the run request's
    (``max_deleted_share``, a run option). Returns the run directory."""
    from housekeeping.mechanisms.steps import (
        apply_step,
        plan_and_gate_in_process,
        purge_step,
        report_step,
        snapshot_step,
    )

    info = snapshot_step(
        store, mechanism, run_id=run_id, as_of_ms=as_of_ms, actor=f"test {run_id}", values=values
    )
    gate = plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")
    assert gate.success, gate.failed
    if not dry_run:
        apply_step(store, info.run_dir, purge_grace_seconds=grace)
        purge_step(store, info.run_dir)
    report_step(info.run_dir, dry_run=dry_run)
    return info.run_dir


def cursor_positions(store) -> dict[tuple[str, str], str]:
    """(topic, cursor) -> mark-delete position, read back from the store."""
    from housekeeping.store.manifest.export import export_manifest

    return {
        (topic, name): cursor["markDeletePosition"]
        for topic, body in export_manifest(store)["topics"].items()
        for name, cursor in body["cursors"].items()
    }


# The offload columns of a store that never offloaded (no object tier, no offload context): what a planner's unit
# test means when it leaves them out.
NEVER_OFFLOADED = {
    "ledgers": {"offloadAttempted": False, "offloadComplete": False, "localDeleted": False},
    "topics": {
        "offloader": False,
        "offloadThresholdBytes": -1,
        "offloadThresholdSeconds": -1,
        "offloadDeletionLagMs": 14_400_000,
        "offloadPolicyDescription": "offload disabled",
    },
}


def topic_row(topic: str, **columns) -> dict:
    """A snapshot topics row of a plain topic (no retention, no TTL, no quota, no offload) with ``columns`` over it:
    what a planner's unit test varies."""
    from housekeeping.core.names import TopicName

    name = TopicName.parse(topic)
    return {
        "topic": topic,
        "namespace": str(name.namespace_name),
        "tenant": name.tenant,
        "isSystemTopic": False,
        "version": 1,
        "producers": 0,
        "consumers": 0,
        "retentionTimeMs": -1,
        "retentionSizeBytes": -1,
        "retentionSource": "test",
        "retentionDescription": "test",
        "messageTtlSeconds": 0,
        "messageTtlSource": "broker",
        "sizeQuotaLimitBytes": -1,
        "sizeQuotaPolicy": "producer_request_hold",
        "timeQuotaLimitSeconds": -1,
        "timeQuotaPolicy": "producer_request_hold",
        "policies": "{}",
        **NEVER_OFFLOADED["topics"],
        **columns,
    }


def contract_frame(spark, table, rows: list[dict]):
    """A DataFrame of a contract table (``housekeeping.engine.contract``) from rows given by column name: a column left
    out is null (the offload columns: a store that never offloaded, NEVER_OFFLOADED), a name the table does not have
    is an error (never positional tuples)."""
    from spark_apps.shared.io import schema

    defaults = NEVER_OFFLOADED.get(table.name, {})
    return spark.createDataFrame(
        [tuple(table.row({**defaults, **row}).values()) for row in rows], schema(table)
    )


def iso(ms: int) -> str:
    from housekeeping.core.timeutil import format_ms

    return format_ms(ms)


def record_snapshot_reads(monkeypatch) -> list[object]:
    """The row groups of each read of a snapshot table's columns from now on (None: the whole table), as
    ``snapshot_reads.read_snapshot_columns`` is called; the reads themselves unchanged."""
    from housekeeping.engine import snapshot_reads

    reads: list[object] = []
    read_columns = snapshot_reads.read_snapshot_columns

    def recorded(*args, **kwargs):
        reads.append(kwargs.get("row_groups"))
        return read_columns(*args, **kwargs)

    monkeypatch.setattr(snapshot_reads, "read_snapshot_columns", recorded)
    return reads


def table_parts(table_dir: Path) -> dict[Path, str]:
    """A plan table's part files and their text (a planner writes one per task)."""
    parts = {part: part.read_text() for part in sorted(table_dir.glob("part-*"))}
    assert parts, f"no part file in {table_dir}"
    return parts


def rewrite_table(table_dir: Path, rows: list[dict]) -> None:
    """Replace a plan table's rows as an editing tool would: all of them in its first part file, the others
    emptied."""
    first, *others = table_parts(table_dir)
    rewrite_part(first, "".join(json.dumps(r) + "\n" for r in rows))
    for part in others:
        rewrite_part(part, "")


def restore_table(parts: dict[Path, str]) -> None:
    for part, text in parts.items():
        rewrite_part(part, text)


def rewrite_part(part: Path, text: str) -> None:
    """Replace a Spark-written part file as an editing tool would: Hadoop's checksum sidecar goes with the old
    bytes (left in place, Spark's reader refuses the file with a ChecksumException before any check runs)."""
    part.with_name(f".{part.name}.crc").unlink(missing_ok=True)
    part.write_text(text)


# The longest files first: `--dist loadfile --no-loadscope-reorder` (Makefile) hands files to the workers in
# collection order, so a long file collected last runs alone at the end. Ordered by worker-seconds in a clean clone's
# CI run (benchmarks/README.md, "The test suite"); a name matches every file of that name (test_scenarios.py of each mechanism). Every worker sorts the same way (stable sort), so
# collections agree.
LONGEST_FILES_FIRST = (
    "test_soak.py",
    "test_live_airflow.py",
    "test_spark_connect.py",
    "test_scenarios.py",
    "test_cli_contract.py",
    "test_what_if.py",
    "test_holds_and_journal.py",
    "test_action_catalogue.py",
    "test_plan_fingerprints.py",
    "test_fault_injection.py",
    "test_spark_cluster.py",
    "test_gate.py",
    "test_races.py",
    "test_system_topics.py",
    "test_dags.py",
    "test_policy_what_if.py",
    "test_sweep.py",
    "test_plan.py",
    "test_installed_command.py",
    "test_dag.py",
    "test_pulsar_scenarios.py",
    "test_bad_input.py",
)


LANE_MARKERS = ("unit", "spark", "processes", "airflow")
# A fixture that starts something lends its lane to every test that uses it.
FIXTURE_LANES = {
    "spark": "spark",
    "postgres_server": "processes",
    "s3_server": "processes",
    "s3_tier": "processes",
    "spark_connect_server": "processes",
    "standalone_cluster": "processes",
    "airflow_db": "airflow",
    "dagbag_on_spark_connect": "airflow",
}


def _markers(item) -> set[str]:
    return {mark.name for mark in item.iter_markers()}


def _lanes_missing(item) -> list[str]:
    """The lane markers the test's fixtures imply and it does not carry (a parametrized fixture's PostgreSQL or S3
    case carries ``processes`` through its param's marks)."""
    marks = _markers(item)
    return sorted(
        f"{lane} (it uses the {name} fixture)"
        for name, lane in FIXTURE_LANES.items()
        if name in item.fixturenames and lane not in marks
    )


def pytest_collection_modifyitems(config, items):
    unmarked = [item.nodeid for item in items if not any(item.get_closest_marker(m) for m in LANE_MARKERS)]
    if unmarked:
        raise pytest.UsageError(
            f"every test needs one of the markers {', '.join(LANE_MARKERS)} (pyproject.toml); unmarked: "
            + ", ".join(unmarked[:10])
        )
    untrue = [f"{item.nodeid}: {', '.join(missing)}" for item in items if (missing := _lanes_missing(item))]
    if untrue:
        raise pytest.UsageError(
            "a test's lane markers must say what it does; missing: "
            + "; ".join(untrue[:10])
            + (f" (and {len(untrue) - 10} more)" if len(untrue) > 10 else "")
        )
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# The test being set up, run or torn down (its module- and session-scoped fixtures included).
_RUNNING: list = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _RUNNING.append(item)
    try:
        return (yield)
    finally:
        _RUNNING.pop()


def _require_marker(needed: str, what: str) -> None:
    if _RUNNING and needed not in _markers(_RUNNING[-1]):
        raise AssertionError(f"{_RUNNING[-1].nodeid} {what}: mark it {needed} (pyproject.toml's markers)")


@pytest.fixture(scope="session", autouse=True)
def lane_markers_are_true():
    """What a test's markers promise, held while it runs, its fixtures included: a test without ``spark`` starts no
    SparkSession, and one without ``runs`` validates no gate in this process (Great Expectations over check frames:
    a gate follows a plan, a whole run, kept out of the fast lane). A wrong marker fails the test naming the marker
    it needs."""
    from pyspark.sql import SparkSession

    import spark_apps.validate_plan as gate_app
    from housekeeping.engine import gate

    get_or_create, run_gate = SparkSession.Builder.getOrCreate, gate.run_gate

    def checked_get_or_create(self):
        _require_marker("spark", "starts a SparkSession")
        return get_or_create(self)

    def checked_run_gate(*args, **kwargs):
        _require_marker("runs", "validates a gate in this process")
        return run_gate(*args, **kwargs)

    # The gate app binds run_gate at import: both names.
    SparkSession.Builder.getOrCreate = checked_get_or_create
    gate.run_gate = gate_app.run_gate = checked_run_gate
    yield
    SparkSession.Builder.getOrCreate = get_or_create
    gate.run_gate = gate_app.run_gate = run_gate
