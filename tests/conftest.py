"""Shared fixtures: one session-scoped local SparkSession, a private Airflow home, store builders.

Airflow's environment must be set before anything imports airflow, so it is set here at import time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

_airflow_home = Path(tempfile.mkdtemp(prefix="housekeeping-airflow-"))
os.environ["AIRFLOW_HOME"] = str(_airflow_home)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
os.environ["GX_ANALYTICS_ENABLED"] = "False"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("HOUSEKEEPING_SPARK_MASTER", "local[2]")
for _name in ("HOUSEKEEPING_METADATA_URL", "HOUSEKEEPING_BROKER_CONF", "HOUSEKEEPING_STORE_ROOT"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def spark():
    from spark_apps.common import get_spark

    session = get_spark("housekeeping-tests", "local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated Airflow metadata DB in the session's private AIRFLOW_HOME."""
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], check=True, capture_output=True, env=os.environ.copy()
    )
    return _airflow_home


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
