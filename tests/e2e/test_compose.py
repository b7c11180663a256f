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
    """A compose value as the deployment sees it without an .env: ${X:-default} -> default, ${X:?msg} -> "x"."""
    value = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))
    return re.sub(r"\$\{\w+:\?[^}]*\}", "x", value)


def test_every_housekeeping_setting_of_compose_is_read_by_the_code(monkeypatch):
    """Each HOUSEKEEPING_ variable compose sets is read by the code: set alone to a value of its own, it reaches
    its Settings field (a misspelt or unread variable fails here); and compose's values together are valid."""
    from housekeeping.settings import ENV_FIELDS, Settings

    env = yaml.safe_load((REPO / "docker-compose.yaml").read_text())["services"]["airflow-scheduler"][
        "environment"
    ]
    ours = {name: _interpolated(value) for name, value in env.items() if name.startswith("HOUSEKEEPING_")}
    assert ours, "compose sets the store's settings"
    for name in ENV_FIELDS:
        monkeypatch.delenv(name, raising=False)
    defaults = Settings.from_env()
    for name in ours:
        assert name in ENV_FIELDS, f"{name} is set in compose but the code reads no such setting"
        default = getattr(defaults, ENV_FIELDS[name])
        sentinel = {int: 4321, float: 0.321}.get(type(default), f"sentinel-{name.lower()}")
        monkeypatch.setenv(name, str(sentinel))
        assert getattr(Settings.from_env(), ENV_FIELDS[name]) == sentinel, f"{name} does not reach the code"
        monkeypatch.delenv(name)
    for name, value in ours.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert settings.store_root == ours["HOUSEKEEPING_STORE_ROOT"]


def test_compose_topology_is_consistent_with_the_code():
    """The pieces that must agree for the compose deployment to work: Spark master URL, the store path seen by
    Airflow and by the Spark worker, the deleting steps' pool, the metadata database service."""
    from housekeeping.dag_factory import DELETING_POOL

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
    assert "@store-postgres/" in env["HOUSEKEEPING_METADATA_URL"] and "store-postgres" in services
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
