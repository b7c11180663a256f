"""The object tier: where offloaded ledgers live (Pulsar's tiered storage), named by ``HOUSEKEEPING_OFFLOAD_URL``.

- ``s3://bucket/prefix``: an S3 bucket (``HOUSEKEEPING_OFFLOAD_ENDPOINT_URL`` for a non-AWS endpoint such as MinIO
  or a test server). Credentials come from the standard AWS environment and configuration chain
  (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``~/.aws``, an instance role); this project never stores or
  logs them. Region: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else ``us-east-1``.
- a directory (``/path`` or ``file:///path``): the embedded default, for a single machine and for tests.
- unset: no offloader. Like Pulsar's ``NullLedgerOffloader``, nothing is offloaded and the offload-deletion lag
  does nothing; :func:`tier_of_settings` returns None.

Both kinds go through ``pyarrow.fs`` (S3 through the AWS SDK), never hand-written HTTP.

Layout (docs/store.md): one object per offload attempt,
``<prefix>/persistent/<tenant>/<namespace>/<topic>/<ledgerId>-<uuid>.parquet``, as Pulsar's
``<managed-ledger>/<ledgerId>-<uuid>``: the attempt's UUID is written to the metadata before the upload, so an
object of an attempt that never completed is always named by a metadata row (or the pending-deletion log) and is
removed by a later offload or trim. The object holds the ledger's entries in the entry schema
(``housekeeping.store.entries``).

:meth:`ObjectTier.delete` is the only function that deletes an object; it checks the object is gone afterwards
(Pulsar's offloader once reported success for S3 deletes that removed nothing: apache/pulsar#14693).
"""

from __future__ import annotations

import os
import re
import uuid as uuid_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from housekeeping.core.errors import HousekeepingError, InputError
from housekeeping.core.names import TopicName, topic_dir_parts

OFFLOAD_URL_ENV = "HOUSEKEEPING_OFFLOAD_URL"
OFFLOAD_ENDPOINT_ENV = "HOUSEKEEPING_OFFLOAD_ENDPOINT_URL"
# The marker object naming the store whose tier this is (:meth:`ObjectTier.claim`).
CLAIM_OBJECT = "housekeeping-store.json"
# <ledgerId>-<uuid>.parquet
OBJECT_NAME = re.compile(r"^(\d+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.parquet$")


class TierError(HousekeepingError):
    """The object tier could not be reached or did not do what was asked (names the tier and the object). Nothing
    in the metadata claims what the tier did not do, so a rerun completes. Exit code 1, as any failure in
    the middle of a run; a tier that cannot be reached before anything starts is bad input (:meth:`ObjectTier.check`,
    exit 2)."""

    exit_code = 1


def new_attempt_uuid() -> str:
    """A fresh offload attempt's UUID (Pulsar: a random UUID per attempt)."""
    return str(uuid_module.uuid4())


def object_key(topic: str, ledger_id: int, attempt: str) -> str:
    """The object of one offload attempt, relative to the tier's base."""
    tenant, namespace, local = topic_dir_parts(TopicName.parse(topic))
    return f"persistent/{tenant}/{namespace}/{local}/{int(ledger_id)}-{uuid_module.UUID(attempt)}.parquet"


def parse_object_key(key: str) -> tuple[str, int, str] | None:
    """(topic directory ``tenant/ns/topic``, ledger id, UUID) of a key laid out as :func:`object_key` writes it;
    None for anything else (never deleted, never read as a ledger)."""
    parts = key.split("/")
    if len(parts) != 5 or parts[0] != "persistent":
        return None
    match = OBJECT_NAME.match(parts[4])
    if match is None:
        return None
    return "/".join(parts[1:4]), int(match.group(1)), match.group(2)


@dataclass(frozen=True)
class TierObject:
    key: str
    size: int
    mtime_ms: int | None


@dataclass
class ObjectTier:
    """One object tier (see the module docstring)."""

    url: str
    endpoint_url: str | None = None
    _fs: Any = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, url: str, endpoint_url: str | None = None) -> ObjectTier:
        tier = cls(url.rstrip("/") or url, endpoint_url or None)
        _ = tier.base  # parse now: a malformed URL is bad input before anything runs
        return tier

    @property
    def is_s3(self) -> bool:
        return urlparse(self.url).scheme == "s3"

    @cached_property
    def base(self) -> str:
        """The filesystem path of the tier's root: ``bucket/prefix`` (S3) or an absolute directory."""
        parsed = urlparse(self.url)
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise InputError(
                    f"{OFFLOAD_URL_ENV}={self.url!r}: an S3 URL names a bucket (s3://bucket/prefix)"
                )
            return f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
        if parsed.scheme not in ("", "file"):
            raise InputError(
                f"{OFFLOAD_URL_ENV}={self.url!r}: expected s3://bucket/prefix or a directory (/path, file:///path)"
            )
        path = Path(parsed.path if parsed.scheme == "file" else self.url).expanduser()
        if not path.is_absolute():
            raise InputError(f"{OFFLOAD_URL_ENV}={self.url!r}: a directory tier must be an absolute path")
        return str(path.resolve())

    @property
    def bucket(self) -> str | None:
        return urlparse(self.url).netloc if self.is_s3 else None

    @property
    def where(self) -> str:
        """The tier as named in messages (no credentials are ever part of it)."""
        if self.is_s3:
            return f"{self.url}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")
        return f"directory tier {self.base}"

    @property
    def fs(self) -> Any:
        if self._fs is None:
            from pyarrow import fs as pafs

            if self.is_s3:
                region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
                options: dict[str, Any] = {
                    "region": region,
                    "retry_strategy": pafs.AwsStandardS3RetryStrategy(3),
                }
                if self.endpoint_url:
                    endpoint = urlparse(self.endpoint_url)
                    options["endpoint_override"] = endpoint.netloc or self.endpoint_url
                    options["scheme"] = endpoint.scheme or "https"
                self._fs = pafs.S3FileSystem(**options)
            else:
                self._fs = pafs.LocalFileSystem()
        return self._fs

    def path(self, key: str) -> str:
        if parse_object_key(key) is None:
            raise InputError(f"{key!r} is not an object key of the tier's layout")
        return f"{self.base}/{key}"

    def _fail(self, doing: str, exc: BaseException) -> TierError:
        return TierError(f"{self.where}: {doing} failed: {exc}")

    # --- checks ----------------------------------------------------------------------------------------------
    def check(self) -> None:
        """The tier can be listed (the bucket exists and the credentials may read it; a directory exists): else
        bad input naming the tier, before a run uploads or deletes anything."""
        from pyarrow import fs as pafs

        try:
            info = self.fs.get_file_info(self.bucket if self.is_s3 else self.base)
            if info.type == pafs.FileType.NotFound:
                what = f"bucket {self.bucket}" if self.is_s3 else f"directory {self.base}"
                raise InputError(f"{self.where}: {what} does not exist")
            self.fs.get_file_info(pafs.FileSelector(self.base, allow_not_found=True, recursive=False))
        except OSError as exc:
            what = f"bucket {self.bucket}" if self.is_s3 else f"directory {self.base}"
            raise InputError(f"{self.where}: cannot list {what}: {exc}") from exc

    # --- objects ---------------------------------------------------------------------------------------------
    def write_ledger(self, key: str, table: pa.Table) -> int:
        """Upload one ledger's entries as the object ``key``; returns the object's size in bytes. On S3 the object
        appears whole or not at all; in a directory tier a crash may leave a partial file, which the metadata
        names as an incomplete attempt."""
        from housekeeping.store.entries import ENTRY_SCHEMA

        path = self.path(key)
        try:
            if not self.is_s3:
                self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            with self.fs.open_output_stream(path) as out:
                pq.write_table(table.cast(ENTRY_SCHEMA), out, compression="zstd")
            return int(self.fs.get_file_info(path).size)
        except OSError as exc:
            raise self._fail(f"uploading {key}", exc) from exc

    def read_ledger(self, key: str, columns: list[str] | None = None) -> pa.Table:
        from housekeeping.store.entries import ENTRY_SCHEMA

        try:
            with self.fs.open_input_file(self.path(key)) as handle:
                return pq.read_table(handle, columns=columns, schema=ENTRY_SCHEMA)
        except FileNotFoundError as exc:
            raise TierError(f"{self.where}: object {key} is missing") from exc
        except (OSError, pa.ArrowException) as exc:
            raise self._fail(f"reading {key}", exc) from exc

    def info(self, key: str) -> TierObject | None:
        from pyarrow import fs as pafs

        try:
            found = self.fs.get_file_info(self.path(key))
        except OSError as exc:
            raise self._fail(f"looking up {key}", exc) from exc
        if found.type == pafs.FileType.NotFound:
            return None
        mtime = found.mtime_ns // 1_000_000 if found.mtime_ns is not None else None
        return TierObject(key, int(found.size or 0), mtime)

    def delete(self, key: str) -> bool:
        """Delete one object (the only function that deletes from the tier). Returns False when it was already gone
        (idempotent). Raises :class:`TierError` when the delete fails or the object is still there afterwards."""
        if self.info(key) is None:
            return False
        try:
            self.fs.delete_file(self.path(key))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._fail(f"deleting {key}", exc) from exc
        if self.info(key) is not None:
            raise TierError(f"{self.where}: deleting {key} returned success but the object is still there")
        return True

    def list_objects(self, prefix: str = "persistent") -> Iterator[TierObject]:
        """Every object under ``prefix`` (relative to the base), by prefix listing (S3 pages through the listing)."""
        from pyarrow import fs as pafs

        base = f"{self.base}/{prefix.strip('/')}"
        try:
            found = self.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=True))
        except OSError as exc:
            raise self._fail(f"listing {prefix}", exc) from exc
        for item in found:
            if item.type == pafs.FileType.File:
                mtime = item.mtime_ns // 1_000_000 if item.mtime_ns is not None else None
                yield TierObject(item.path[len(self.base) + 1 :], int(item.size or 0), mtime)

    # --- whose tier it is -------------------------------------------------------------------------------------
    def claimed_by(self) -> dict[str, Any] | None:
        """The store that claimed this tier (its marker object ``CLAIM_OBJECT`` at the base), None: unclaimed."""
        import json

        path = f"{self.base}/{CLAIM_OBJECT}"
        try:
            with self.fs.open_input_stream(path) as handle:
                return json.loads(handle.read().decode("utf-8"))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._fail(f"reading {CLAIM_OBJECT}", exc) from exc

    def claim(self, store_id: str, store_root: str) -> None:
        """Mark the tier as this store's before its first object (idempotent). A tier another store claimed is
        refused: two stores under one prefix would each see the other's objects as their own orphans."""
        import json

        owner = self.claimed_by()
        if owner is not None:
            if owner.get("storeId") != store_id:
                raise InputError(
                    f"{self.where} belongs to another store ({owner.get('storeRoot')}, id {owner.get('storeId')}); "
                    f"give store {store_root} a prefix of its own (HOUSEKEEPING_OFFLOAD_URL)"
                )
            return
        document = json.dumps({"storeId": store_id, "storeRoot": store_root}, sort_keys=True).encode("utf-8")
        try:
            if not self.is_s3:
                self.fs.create_dir(self.base, recursive=True)
            with self.fs.open_output_stream(f"{self.base}/{CLAIM_OBJECT}") as out:
                out.write(document)
        except OSError as exc:
            raise self._fail(f"writing {CLAIM_OBJECT}", exc) from exc


def tier_of_settings(url: str | None = None, endpoint_url: str | None = None) -> ObjectTier | None:
    """The deployment's tier (``HOUSEKEEPING_OFFLOAD_URL``, ``HOUSEKEEPING_OFFLOAD_ENDPOINT_URL``); None: no
    offloader."""
    url = url if url is not None else os.environ.get(OFFLOAD_URL_ENV)
    if not url:
        return None
    endpoint = endpoint_url if endpoint_url is not None else os.environ.get(OFFLOAD_ENDPOINT_ENV)
    return ObjectTier.of(url, endpoint or None)
