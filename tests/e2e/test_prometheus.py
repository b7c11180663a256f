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

pytestmark = pytest.mark.processes

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
    def __init__(self, directory: Path, target_port: int, job: str = "") -> None:
        """``job``: the scrape job's settings beyond its target (an https scheme, basic auth)."""
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed: run `make setup` (scripts/system-deps.sh installs it)")
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: housekeeping\n{job}"
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


@pytest.mark.spark
@pytest.mark.runs
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
        from housekeeping.engine.documents import read_applied_run

        deleted = {
            ns: v["bytes"]
            for ns, v in read_applied_run(run_dir).figures["perNamespace"].items()
            if v["bytes"]
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


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own authority, and its key."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "housekeeping metrics")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
            False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "server.crt", directory / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


def test_serve_metrics_over_tls_with_basic_auth_is_scraped_with_credentials_and_refused_without(
    tmp_path, capsys
):
    """serve-metrics with a Prometheus web-config file: the real Prometheus scrapes it over TLS with its user and
    password; a request without them, with a wrong password, or in plain HTTP reads nothing."""
    import bcrypt

    root = tmp_path / "store"
    code, _, err = run_cli(capsys, "generate", "--store", str(root), "--topics", "6", "--seed", "3")
    assert code == 0, err
    cert_file, _ = _self_signed(tmp_path)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)
    web_config = tmp_path / "web.yml"
    web_config.write_text(
        f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: '{hashed}'\n",
        encoding="utf-8",
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "housekeeping.cli", "serve-metrics", "--store", str(root), "--port", str(port),
         "--as-of", iso(AS_OF), "--web-config", str(web_config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    job = (
        f"    scheme: https\n    tls_config:\n      ca_file: {cert_file}\n"
        "    basic_auth:\n      username: prometheus\n      password: s3cret\n"
    )
    prometheus = Prometheus(tmp_path, port, job)
    try:
        prometheus.wait_for('up{job="housekeeping"}', {(): 1.0})
        assert prometheus.query("housekeeping_metrics_as_of_timestamp_seconds") == {(): AS_OF / 1000}
        url = f"https://127.0.0.1:{port}/metrics"
        good = requests.get(url, auth=("prometheus", "s3cret"), verify=str(cert_file), timeout=5)
        assert good.status_code == 200 and "pulsar_storage_size" in good.text
        for auth in (None, ("prometheus", "wrong"), ("someone", "s3cret")):
            refused = requests.get(url, auth=auth, verify=str(cert_file), timeout=5)
            assert refused.status_code == 401 and "pulsar_storage_size" not in refused.text, auth
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/metrics", auth=("prometheus", "s3cret"), timeout=5)
    finally:
        prometheus.stop()
        server.terminate()
        _, err = server.communicate(timeout=20)
    assert f"on https://127.0.0.1:{port}/metrics, basic auth (1 users)" in err


def test_serve_metrics_listens_on_loopback_by_default_and_refuses_a_bad_web_config(tmp_path, capsys):
    root = tmp_path / "store"
    code, _, err = run_cli(capsys, "generate", "--store", str(root), "--topics", "3", "--seed", "3")
    assert code == 0, err
    bad = tmp_path / "web.yml"
    bad.write_text("basic_auth_users:\n  prometheus: plaintext\n", encoding="utf-8")
    code, _, err = run_cli(
        capsys, "serve-metrics", "--store", str(root), "--port", "1", "--web-config", str(bad)
    )
    assert code == 2 and "not a bcrypt hash" in err and "prometheus" in err
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "housekeeping.cli", "serve-metrics", "--store", str(root), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        import psutil

        deadline = time.monotonic() + 60
        while not (
            listening := [
                c for c in psutil.Process(server.pid).net_connections("tcp") if c.status == "LISTEN"
            ]
        ):
            assert server.poll() is None and time.monotonic() < deadline, server.communicate()[1]
            time.sleep(0.2)
        assert [(c.laddr.ip, c.laddr.port) for c in listening] == [("127.0.0.1", port)]
    finally:
        server.terminate()
        server.communicate(timeout=20)
