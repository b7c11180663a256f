"""The metrics endpoint's protection, configured by a Prometheus web-config file (the exporter toolkit's format, which
Prometheus's own exporters read), as Pulsar protects its metrics with ``authenticateMetricsEndpoint``:

```yaml
tls_server_config:
  cert_file: server.crt      # relative paths: to the file's directory
  key_file: server.key
basic_auth_users:
  prometheus: $2y$10$...     # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':')
```

Either part may be left out. A scrape without the right user and password is answered 401 and reads nothing."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from housekeeping.core.errors import InputError


@dataclass(frozen=True)
class WebConfig:
    cert_file: Path | None = None
    key_file: Path | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash

    @classmethod
    def read(cls, path: Path) -> WebConfig:
        import yaml

        if not path.is_file():
            raise InputError(f"web config {path} does not exist")
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise InputError(f"web config {path} is not YAML: {exc}") from None
        unknown = set(document) - {"tls_server_config", "basic_auth_users"}
        if not isinstance(document, dict) or unknown:
            raise InputError(
                f"web config {path}: unknown keys {sorted(unknown)} (tls_server_config, basic_auth_users)"
            )
        tls = document.get("tls_server_config") or {}
        cert, key = tls.get("cert_file"), tls.get("key_file")
        if bool(cert) != bool(key):
            raise InputError(f"web config {path}: tls_server_config needs both cert_file and key_file")
        files = [path.parent / name for name in (cert, key) if name]
        for file in files:
            if not file.is_file():
                raise InputError(f"web config {path}: {file} does not exist")
        users = document.get("basic_auth_users") or {}
        for user, hashed in users.items():
            if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
                raise InputError(f"web config {path}: the password of {user!r} is not a bcrypt hash")
        return cls(*(files or [None, None]), users={u: h.encode() for u, h in users.items()})

    @property
    def tls(self) -> bool:
        return self.cert_file is not None

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header names a configured user with the right password (no users: all)."""
        import bcrypt

        if not self.users:
            return True
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            user, _, password = (
                base64.b64decode(authorization[6:], validate=True).decode("utf-8").partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        return hashed is not None and bcrypt.checkpw(password.encode("utf-8"), hashed)

    def protect(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """The WSGI ``app`` behind basic authentication."""

        def protected(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if self.allows(environ.get("HTTP_AUTHORIZATION")):
                return app(environ, start_response)
            start_response(
                "401 Unauthorized",
                [("WWW-Authenticate", 'Basic realm="housekeeping metrics"'), ("Content-Type", "text/plain")],
            )
            return [b"Unauthorized\n"]

        return protected
