"""A real Prometheus server (Debian's package) scrapes `housekeeping serve-metrics` on a generated store, and its
query API answers what the metadata says, before and after a real trim apply: stored bytes per namespace from the
ledger table, deleted and pending-purge bytes from the apply's own per-namespace result."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from sqlalchemy import func, select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction
from tests.conftest import iso, run_cli, run_steps
from tests.pg_server import free_port

pytestmark = [pytest.mark.processes, pytest.mark.spark, pytest.mark.runs]

T = 1_793_491_200_000  # 2026-11-01T00:00:00Z, the generator's reference time
AS_OF = T + 86_400_000


def stored_bytes(store: Store) -> dict[str, int]:
    with read_transaction(store.engine) as conn:
        rows = conn.execute(
            select(t.topics.c.namespace, func.coalesce(func.sum(t.ledgers.c.size_bytes), 0))
            .select_from(t.topics.outerjoin(t.ledgers, t.ledgers.c.topic == t.topics.c.name))
            .group_by(t.topics.c.namespace)
        ).all()
    return {namespace: int(size) for namespace, size in rows}


class Prometheus:
    def __init__(self, directory: Path, target_port: int) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed: run `make setup` (scripts/system-deps.sh installs it)")
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: housekeeping\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n",
            encoding="utf-8",
        )
        self.log = (directory / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Instant query: labels (without __name__, job, instance) -> value."""
        response = requests.get(
            f"http://127.0.0.1:{self.port}/api/v1/query", params={"query": promql}, timeout=5
        )
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return {
            tuple(
                sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "job", "instance"))
            ): float(r["value"][1])
            for r in body["data"]["result"]
        }

    def wait_for(self, promql: str, expected, timeout: float = 60) -> dict:
        """Poll until the query answers ``expected`` (the next scrapes bring a change in)."""
        deadline, answer = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                answer = self.query(promql)
            except requests.RequestException:
                answer = None
            if answer == expected:
                return answer
            time.sleep(0.5)
        raise AssertionError(f"{promql}: Prometheus answers {answer}, expected {expected}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def by_namespace(values: dict[str, float]) -> dict[tuple[tuple[str, str], ...], float]:
    return {(("namespace", ns),): float(v) for ns, v in values.items()}


def test_prometheus_scrapes_the_stores_metrics_before_and_after_a_trim_apply(tmp_path, capsys, spark):
    root = tmp_path / "store"
    code, _, err = run_cli(capsys, "generate", "--store", str(root), "--topics", "40", "--seed", "11")
    assert code == 0, err
    store = Store.open(root)
    metrics_port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "housekeeping.cli",
            "serve-metrics",
            "--store",
            str(root),
            "--port",
            str(metrics_port),
        ]
        + ["--host", "127.0.0.1", "--as-of", iso(AS_OF)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    prometheus = Prometheus(tmp_path, metrics_port)
    try:
        before = stored_bytes(store)
        assert len(before) >= 3 and all(before.values())
        prometheus.wait_for('up{job="housekeeping"}', {(): 1.0})
        prometheus.wait_for("pulsar_storage_size", by_namespace(before))
        assert prometheus.query("housekeeping_deleted_bytes_total") == {}
        assert prometheus.query("housekeeping_metrics_as_of_timestamp_seconds") == {(): AS_OF / 1000}

        # A real trim run (snapshot, Spark plan, Great Expectations gate, apply) with a day's grace: the deleted
        # ledgers leave the ledger list and wait for purge.
        run_dir = run_steps(store, "trim", AS_OF, "trim-1", grace=86_400)
        from housekeeping.engine.apply import read_apply_result

        deleted = {
            ns: v["bytes"] for ns, v in read_apply_result(run_dir)["perNamespace"].items() if v["bytes"]
        }
        assert deleted, "the generated store has consumed ledgers past retention"
        after = stored_bytes(store)
        assert {ns: before[ns] - after[ns] for ns in before if before[ns] != after[ns]} == deleted
        prometheus.wait_for("pulsar_storage_size", by_namespace(after))
        prometheus.wait_for("sum by (namespace) (housekeeping_deleted_bytes_total)", by_namespace(deleted))
        prometheus.wait_for("housekeeping_pending_purge_bytes > 0", by_namespace(deleted))
        assert prometheus.query("housekeeping_last_success_timestamp_seconds") == {
            (("mechanism", "trim"),): AS_OF / 1000
        }
        # The same text the server hands Prometheus is what `housekeeping metrics` prints.
        code, text, _ = run_cli(capsys, "metrics", "--store", str(root), "--as-of", iso(AS_OF))
        scraped = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        assert code == 0 and scraped == text
    finally:
        prometheus.stop()
        server.terminate()
        out, err = server.communicate(timeout=20)
    assert f"serving metrics of {root}" in err
