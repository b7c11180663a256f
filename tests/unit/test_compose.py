"""docker-compose.yaml parses and agrees with the settings the code reads (no Docker engine here)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

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
    settings_doc = (REPO / "include/housekeeping/settings.py").read_text()
    for name in (n for n in env if n.startswith("HOUSEKEEPING_")):
        assert name in settings_doc, f"{name} is set in compose but not read by the code"
    assert "store" in compose["volumes"]
    assert '"conn_type": "spark"' in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert not (REPO / ".env").exists() or ".env" in (REPO / ".gitignore").read_text()
    example = (REPO / ".env.example").read_text()
    for variable in set(re.findall(r"\$\{(\w+):\?", (REPO / "docker-compose.yaml").read_text())):
        assert f"{variable}=" in example, f"{variable} is required by compose but missing from .env.example"
