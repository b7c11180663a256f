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
# Test-only JVM settings for every Spark driver the suite starts (see the file).
os.environ["SPARK_CONF_DIR"] = str(REPO / "tests" / "spark-conf")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("HOUSEKEEPING_SPARK_MASTER", "local[2]")
for _name in ("HOUSEKEEPING_METADATA_URL", "HOUSEKEEPING_BROKER_CONF", "HOUSEKEEPING_STORE_ROOT"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def spark():
    from spark_apps.shared.session import get_spark

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


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server of this pytest worker (tests/pg_server.py), stopped at the end."""
    from tests.pg_server import PostgresServer

    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def metadata_backend(request, monkeypatch) -> str:
    """Runs the test once per metadata database: SQLite in the store (the default), then a fresh database on
    the real PostgreSQL server, chosen as users do, through HOUSEKEEPING_METADATA_URL. Every store the test
    opens without an explicit URL uses it, so such a test keeps to one store."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_server").create_database()
        monkeypatch.setenv("HOUSEKEEPING_METADATA_URL", url)
    return request.param


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
    from housekeeping.cli import main

    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def iso(ms: int) -> str:
    from housekeeping.timeutil import format_ms

    return format_ms(ms)


def rewrite_part(part: Path, text: str) -> None:
    """Replace a Spark-written part file as an editing tool would: Hadoop's checksum sidecar goes with the old
    bytes (left in place, Spark's reader refuses the file with a ChecksumException before any check runs)."""
    part.with_name(f".{part.name}.crc").unlink(missing_ok=True)
    part.write_text(text)


# The longest files first: `--dist loadfile` hands files to the two workers in collection order, so a long file
# collected last runs alone at the end. Every worker sorts the same way (stable sort), so collections agree.
LONGEST_FILES_FIRST = (
    "test_live_airflow.py",
    "test_races.py",
    "test_fault_injection.py",
    "test_compaction_dag.py",
    "test_gc_dag.py",
    "test_cursor_dags.py",
    "test_gate_mutations.py",
    "test_holds_and_journal.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
