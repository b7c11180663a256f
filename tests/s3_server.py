"""A real S3 API server for the tests: moto's server (`moto_server`, PyPI `moto[server]`) on a free loopback port,
started and stopped by the test session. The object tier talks to it over HTTP through pyarrow.fs exactly as it
would talk to S3 or MinIO; the tests only use boto3 to set up and inspect buckets.

Each test that asks gets a fresh bucket. Credentials are dummy values set in the environment (the standard AWS
chain the tier reads), never in a URL. A server started ``authenticating`` checks them as S3 does (moto's IAM
enforcement, INITIAL_NO_AUTH_ACTION_COUNT): only the access key ``grant`` made may act, any other is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.pg_server import free_port

# Loopback, never through a proxy the environment may name.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    port: int
    process: subprocess.Popen
    _buckets: int = field(default=0, init=False)
    _granted: dict[str, str] | None = field(default=None, init=False)

    @classmethod
    def start(cls, wait_s: float = 60, *, authenticating: bool = False) -> S3Server:
        env = dict(os.environ)
        if authenticating:
            # The three IAM calls of ``grant`` go unchecked; every request after them is authenticated.
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
        for _ in range(3):
            port = free_port()
            process = subprocess.Popen(
                [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
            server = cls(port, process)
            if server.wait_answering(wait_s):
                return server
            server.stop()
        raise RuntimeError("moto_server could not bind a port in three tries (each exited at start)")

    def wait_answering(self, wait_s: float = 60) -> bool:
        """Until this moto answers on its port (True), or it exited (False: the port was taken first). An HTTP answer
        from moto's own API, not a connect, since another process on the port would accept one; that API is
        outside S3's and IAM's, so it spends none of an authenticating server's unchecked calls."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with _DIRECT.open(f"{self.endpoint_url}/moto-api/data.json", timeout=5) as answer:
                    if answer.status == 200 and answer.headers.get("Server", "").startswith("Werkzeug"):
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"moto_server did not answer on port {self.port} within {wait_s} s")

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, service: str = "s3", credentials: dict[str, str] | None = None):
        import boto3

        credentials = credentials or self.credentials
        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            region_name=credentials["AWS_REGION"],
        )

    @property
    def credentials(self) -> dict[str, str]:
        return self._granted or CREDENTIALS

    def grant(self) -> dict[str, str]:
        """On an authenticating server: an IAM user allowed every S3 action and its access key (the credentials
        the tests' own S3 calls use from now on)."""
        import json

        iam = self.client("iam")
        iam.create_user(UserName="offloader")
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="offloader", PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="offloader")["AccessKey"]
        self._granted = {
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            "AWS_REGION": CREDENTIALS["AWS_REGION"],
        }
        return self._granted

    def create_bucket(self, prefix: str = "tier") -> str:
        self._buckets += 1
        name = f"{prefix}-{os.getpid()}-{self._buckets}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def pause(self) -> None:
        """Stop answering (SIGSTOP): requests time out as with a server that went away mid-run."""
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGCONT)
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
