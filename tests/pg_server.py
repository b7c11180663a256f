"""A real PostgreSQL server for the tests: initdb and pg_ctl from the Debian server packages (installed by the
project's set-up, scripts/system-deps.sh) in a temporary directory, on a free loopback port.

No mock and no shared server: each pytest worker starts its own cluster, and each test that asks gets a fresh
database in it. As root (CI), the server runs as the `postgres` user the Debian package creates, because
initdb refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SUPERUSER = "housekeeping"


def server_bin_dir() -> Path:
    """The newest installed PostgreSQL server's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) are not installed: run `make setup` (scripts/system-deps.sh "
        "installs Debian's postgresql package) or `apt-get install postgresql`"
    )


# Below the kernel's ephemeral range (Linux: 32768-60999). A port the kernel hands out for ``bind(0)`` is free now,
# but the next process binding port 0 (a Spark application's driver in another worker) or a client's source port can
# take it before the test's server binds it; a short-lived taker answers the start-up probe and is gone when the test
# connects. Ports below the range are only ever taken by a process naming them.
_TEST_PORTS = range(20000, 32000)


def free_port() -> int:
    """A free TCP port on loopback (for the servers the tests start), chosen below the ephemeral range."""
    chooser = random.Random()
    for _ in range(200):
        port = chooser.choice(_TEST_PORTS)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_TEST_PORTS.start}-{_TEST_PORTS.stop - 1} after 200 tries")


@dataclass
class PostgresServer:
    directory: Path
    port: int
    bin_dir: Path
    _databases: int = field(default=0, init=False)

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = server_bin_dir()
        directory = Path(tempfile.mkdtemp(prefix="housekeeping-pg-"))
        server = cls(directory, free_port(), bin_dir)
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        server._run(
            "initdb",
            "--pgdata",
            str(server.data_dir),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--no-sync",
        )
        server._start()
        return server

    def _start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.directory} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "--pgdata", str(self.data_dir), "--log", str(self.log), "-o", options, "--wait", "start"
        )
        self._wait_ready()

    def halt(self) -> None:
        """Stop as an operator's restart does (``fast``: every client cut off, open transactions rolled back, what
        was committed kept); its data stays for :meth:`resume`. Not ``immediate``: with this test server's
        ``synchronous_commit=off`` a crash may lose commits a client was told of, which no store could survive."""
        self._run("pg_ctl", "--pgdata", str(self.data_dir), "--mode", "fast", "--wait", "stop")

    def resume(self) -> None:
        """Start again on the same port and data after :meth:`halt`."""
        self._start()

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "store") -> str:
        """A new empty database; its SQLAlchemy URL."""
        import sqlalchemy

        self._databases += 1
        name = f"{prefix}_{os.getpid()}_{self._databases}"
        engine = sqlalchemy.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "--pgdata", str(self.data_dir), "--mode", "immediate", "--wait", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, cwd=self.directory)
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{program} failed ({result.returncode}): {result.stderr}{result.stdout}{log}")

    def _wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            ready = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} not ready: {self.log.read_text()}")
            time.sleep(0.2)
