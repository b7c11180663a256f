"""docker-compose.yaml parses and agrees with the settings the code reads (no Docker engine here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_compose_services_and_settings():
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    services = set(compose["services"])
    assert {
        "postgres",
        "store-postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    } <= services
    env = compose["services"]["airflow-scheduler"]["environment"]
    assert "store" in compose["volumes"]
    assert '"conn_type": "spark"' in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert not (REPO / ".env").exists() or ".env" in (REPO / ".gitignore").read_text()
    example = (REPO / ".env.example").read_text()
    for variable in set(re.findall(r"\$\{(\w+):\?", (REPO / "docker-compose.yaml").read_text())):
        assert f"{variable}=" in example, f"{variable} is required by compose but missing from .env.example"


def _interpolated(value: str) -> str:
    """A compose value as the deployment sees it without an .env: ${X:-default} (or ${X-default}) -> default,
    ${X:?msg} -> "x"."""
    value = re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", str(value))
    return re.sub(r"\$\{\w+:\?[^}]*\}", "x", value)


def test_every_housekeeping_setting_of_compose_is_read_by_the_code(monkeypatch):
    """Each HOUSEKEEPING_ variable compose sets is read by the code: set alone to a value of its own, it reaches
    its Settings field or the mechanism setting that declares it (a misspelt or unread variable fails here); and
    compose's values together are valid."""
    import typing

    from housekeeping.core.settings import ENV_FIELDS, Settings
    from housekeeping.mechanisms.registry import mechanism_settings
    from housekeeping.store.tier import OFFLOAD_ENDPOINT_ENV, OFFLOAD_URL_ENV, tier_of_settings

    hints = typing.get_type_hints(Settings)
    own = {setting.env: setting for setting in mechanism_settings()}
    # The object tier's two settings are read by the tier itself (housekeeping.store.tier).
    tier_reads = {
        OFFLOAD_URL_ENV: lambda: tier_of_settings().url,
        OFFLOAD_ENDPOINT_ENV: lambda: tier_of_settings("s3://bucket/prefix").endpoint_url,
    }
    # Read when the DAGs are built: the Deadline Alert's interval.
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.orchestration.dags import RUN_DEADLINE, run_deadline

    tier_reads[RUN_DEADLINE] = lambda: str(int(run_deadline(get_mechanism("trim")).interval.total_seconds()))
    # Read by the Spark steps launched on Connect and by the warm-up (the file they share).
    from housekeeping.orchestration.spark_connect import BUSY_FILE_ENV, busy_file

    tier_reads[BUSY_FILE_ENV] = lambda: str(busy_file())

    env = yaml.safe_load((REPO / "docker-compose.yaml").read_text())["services"]["airflow-scheduler"][
        "environment"
    ]
    ours = {name: _interpolated(value) for name, value in env.items() if name.startswith("HOUSEKEEPING_")}
    assert ours, "compose sets the store's settings"
    for name in [*ENV_FIELDS, *own, *tier_reads]:
        monkeypatch.delenv(name, raising=False)
    for name in ours:
        assert name in ENV_FIELDS or name in own or name in tier_reads, (
            f"{name} is set in compose but the code reads no such setting"
        )
        if name in tier_reads:
            text = {
                OFFLOAD_URL_ENV: "s3://sentinel-bucket/prefix",
                RUN_DEADLINE: "4321",
                BUSY_FILE_ENV: "/x/busy",
            }.get(name, "http://sentinel:9000")
            monkeypatch.setenv(name, text)
            assert tier_reads[name]() == text, f"{name} does not reach the code"
            monkeypatch.delenv(name)
            continue
        # A value of the field's own type (an optional threshold by its number type, objectives as JSON).
        kind = hints[ENV_FIELDS[name]] if name in ENV_FIELDS else own[name].kind
        if kind in (int, int | None):
            sentinel, text = 4321, "4321"
        elif kind in (float, float | None):
            sentinel, text = 0.321, "0.321"
        elif typing.get_origin(kind) is dict:
            sentinel, text = {"*": 4321}, '{"*": 4321}'
        elif kind is bool:  # the opposite of its default
            sentinel = not getattr(Settings.from_env(), ENV_FIELDS[name])
            text = str(sentinel).lower()
        else:
            sentinel = text = f"sentinel-{name.lower()}"
        monkeypatch.setenv(name, text)
        read = own[name].read() if name in own else getattr(Settings.from_env(), ENV_FIELDS[name])
        assert read == sentinel, f"{name} does not reach the code"
        monkeypatch.delenv(name)
    for name, value in ours.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert settings.store_root == ours["HOUSEKEEPING_STORE_ROOT"]
    for setting in own.values():
        setting.read()
    assert tier_of_settings().where == "s3://pulsar-offload/housekeeping at http://object-store:9000"


def test_compose_topology_is_consistent_with_the_code():
    """The pieces that must agree for the compose deployment to work: Spark master URL, the store path seen by
    Airflow and by the Spark worker, the deleting steps' pool, the metadata database service."""
    from housekeeping.orchestration.dags import DELETING_POOL

    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    services = compose["services"]
    env = services["airflow-scheduler"]["environment"]
    connection = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    master = connection["host"]
    assert master.startswith("spark://spark-master:"), master
    port = master.rsplit(":", 1)[1]
    assert f"{port}:{port}" in services["spark-master"]["ports"]
    assert connection["extra"]["deploy-mode"] == "client"  # the driver runs in the Airflow worker
    store_root = env["HOUSEKEEPING_STORE_ROOT"]
    for name in ("airflow-scheduler", "spark-worker"):
        assert f"store:{store_root}" in services[name]["volumes"], (
            f"{name} must see the store at {store_root}"
        )
    worker = services["spark-worker"]
    assert "./:/opt/airflow/project:ro" in worker["volumes"], "executors import the project's Spark apps"
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    for package in ("pandas", "pyarrow", "numpy"):
        assert f"{package}=={pins[package]}" in " ".join(worker["command"]), (
            f"worker {package} != requirements"
        )
    init = services["airflow-init"]["command"]
    assert "airflow db migrate" in " ".join(init) and f"airflow pools set {DELETING_POOL} 1" in " ".join(init)
    # Named volumes are created root-owned: the init, as root, hands every one an Airflow service writes to the
    # user the Airflow containers run as, before they start.
    assert services["airflow-init"]["user"] == "0:0"
    airflow_user = services["airflow-scheduler"]["user"].split(":")[0]
    written = {
        volume.split(":")[1]
        for name, service in services.items()
        if name.startswith("airflow-") and service.get("user", "").startswith(airflow_user)
        for volume in service.get("volumes", [])
        if not volume.startswith(".")
        and volume.split(":")[0] in compose["volumes"]
        and not volume.endswith(":ro")
    }
    assert written, "Airflow services write to named volumes"
    chown = next(part for part in " ".join(init).split("&&") if "chown" in part)
    assert airflow_user.replace("${AIRFLOW_UID:-", "").rstrip("}") in chown
    assert all(path in chown.split() for path in written), (written, chown)
    assert {v.split(":")[1] for v in services["airflow-init"]["volumes"]} >= written
    # The console's plugin is mounted where Airflow looks for plugins, in every Airflow container.
    for name, service in services.items():
        if name.startswith("airflow-"):
            assert "./plugins:/opt/airflow/plugins" in service["volumes"], name
    assert "@store-postgres/" in env["HOUSEKEEPING_METADATA_URL"] and "store-postgres" in services
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"


def test_compose_has_the_object_tier_the_settings_name_and_the_spark_executors_can_read_it():
    """The object-store service answers at the endpoint HOUSEKEEPING_OFFLOAD_ENDPOINT_URL names, its init job makes
    the bucket HOUSEKEEPING_OFFLOAD_URL names before any Airflow service starts, and the Airflow services and the
    Spark processes (which read offloaded ledgers) get the same credentials, by the standard AWS variables."""
    from urllib.parse import urlparse

    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    services = compose["services"]
    env = services["airflow-scheduler"]["environment"]
    endpoint = urlparse(_interpolated(env["HOUSEKEEPING_OFFLOAD_ENDPOINT_URL"]))
    assert (
        endpoint.hostname in services
        and f"{endpoint.port}:{endpoint.port}" in services[endpoint.hostname]["ports"]
    )
    bucket = urlparse(_interpolated(env["HOUSEKEEPING_OFFLOAD_URL"])).netloc
    init = services["object-store-init"]
    assert f"mc mb --ignore-existing tier/{bucket}" in " ".join(init["entrypoint"])
    assert f"http://{endpoint.hostname}:{endpoint.port}" in " ".join(init["entrypoint"])
    assert services["airflow-scheduler"]["depends_on"]["object-store-init"]["condition"] == (
        "service_completed_successfully"
    )
    store = services[endpoint.hostname]["environment"]
    for name in ("airflow-scheduler", "spark-worker", "spark-connect"):
        own = services[name]["environment"]
        assert own["AWS_ACCESS_KEY_ID"] == store["MINIO_ROOT_USER"], name
        assert own["AWS_SECRET_ACCESS_KEY"] == store["MINIO_ROOT_PASSWORD"], name
    assert "object-store-data" in compose["volumes"]


def test_compose_prometheus_scrapes_the_store_metrics_and_airflows_statsd_figures():
    """The metrics wiring: the metrics service runs `housekeeping serve-metrics` on the store every DAG writes, on
    the port Prometheus's scrape config names; Airflow's StatsD backend points at the exporter Prometheus also
    scrapes; the configuration and rules are valid for Prometheus's own checker."""
    import shutil
    import subprocess

    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    services = compose["services"]
    airflow_env = services["airflow-scheduler"]["environment"]
    metrics = services["housekeeping-metrics"]
    command = " ".join(metrics["command"])
    assert "housekeeping serve-metrics" in command and '--store "$$HOUSEKEEPING_STORE_ROOT"' in command
    assert metrics["environment"]["HOUSEKEEPING_STORE_ROOT"] == airflow_env["HOUSEKEEPING_STORE_ROOT"]
    assert f"store:{airflow_env['HOUSEKEEPING_STORE_ROOT']}" in metrics["volumes"]
    assert metrics["environment"]["HOUSEKEEPING_METADATA_URL"] == airflow_env["HOUSEKEEPING_METADATA_URL"]
    metrics_port = re.search(r"--port (\d+)", command).group(1)

    prometheus = services["prometheus"]
    # ./source:/target:ro -> {source: target}
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in prometheus["volumes"] if v.startswith("./"))
    config_file = next(REPO / s for s, t in mounts.items() if t == "/etc/prometheus/prometheus.yml")
    config = yaml.safe_load(config_file.read_text())
    targets = {
        job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
        for job in config["scrape_configs"]
    }
    assert targets["housekeeping-store"] == [f"housekeeping-metrics:{metrics_port}"]
    assert airflow_env["AIRFLOW__METRICS__STATSD_ON"] == "true"
    assert airflow_env["AIRFLOW__METRICS__STATSD_HOST"] == "statsd-exporter" and "statsd-exporter" in services
    assert targets["airflow"] == ["statsd-exporter:9102"]  # the exporter's metrics port (9125: StatsD in)
    assert airflow_env["AIRFLOW__METRICS__STATSD_PORT"] == "9125"
    for rule_file in config["rule_files"]:
        assert rule_file in mounts.values(), f"{rule_file} is not mounted into the container"

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool (Debian's prometheus package) is missing: run `make setup`")
    checked = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(config_file)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = next(REPO / s for s, t in mounts.items() if t.endswith("housekeeping-rules.yml"))
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert checked.returncode == 0 and "7 rules found" in checked.stdout, checked.stdout + checked.stderr
    # The capacity alerts fire on the series they are for and on no other (promtool's rule unit test).
    tested = subprocess.run(
        [promtool, "test", "rules", "housekeeping-rules.test.yml"],
        cwd=rules.parent,
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    # Every metric the rules use is one the store's metrics define (docs/metrics.md lists them).
    documented = (REPO / "docs" / "metrics.md").read_text()
    for name in set(re.findall(r"\b(housekeeping_[a-z_]+|pulsar_[a-z_]+)\b", rules.read_text())):
        assert f"`{name}`" in documented, f"{name} (used by the alert rules) is not documented"
