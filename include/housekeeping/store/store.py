"""The store: a root directory of ledger Parquet files plus a SQL metadata database.

Layout under the root::

    ledgers/persistent/<tenant>/<namespace>/<topic>/<ledgerId>/part-00000.parquet   one directory per ledger
    ledgers/persistent/<tenant>/<namespace>/<topic>/<ledgerId>.<n>/...                 its files' generation n > 0
    runs/<mechanism>/<run_id>/{snapshot,plan,gate,report}                            per-run artefacts
    metadata.db                                                                      SQLite (default)

A ledger is removed as a unit (its directory), as BookKeeper removes a ledger. A ledger's files are rewritten
(key erasure) as a new generation beside the old one, never in place: the metadata row names the generation in
force (``files_generation``), so a reader of an older snapshot keeps reading the files it planned on until they
are purged. The only function in the
project that deletes files is :func:`Store.remove_ledger_dir`; it refuses any path outside ``ledgers/``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, create_engine, event, insert, select
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import OperationalError

from housekeeping.core.errors import InputError, PathOutsideStore, StoreUnavailable
from housekeeping.core.names import TopicName, topic_dir_parts
from housekeeping.core.policies import BrokerConfig, read_broker_conf
from housekeeping.core.settings import Settings
from housekeeping.store import metadata_schema as t
from housekeeping.store.fs import prune_empty_dirs, remove_tree
from housekeeping.store.tier import ObjectTier, object_key, tier_of_settings

METADATA_URL_ENV = "HOUSEKEEPING_METADATA_URL"
BROKER_CONF_ENV = "HOUSEKEEPING_BROKER_CONF"
LEDGERS_DIR = "ledgers"
RUNS_DIR = "runs"
# Kinds of pending deletion beyond a ledger of the ledger list (``ledger``): an offloaded ledger's local copy (the
# ledger stays listed, read from the tier) and an offload attempt's object alone (superseded or abandoned).
LOCAL_COPY_KIND = "local_copy"
TIER_OBJECT_KIND = "tier_object"
# Files no metadata row referenced, found by the store scrub and queued by its repair (``housekeeping scrub
# --repair``): a ledger directory, a writer's staging directory or a tier object; restore leaves them where they are.
ORPHAN_KIND = "orphan"


def new_incarnation(seed: str | None = None) -> str:
    """A topic incarnation (``topics.incarnation``): random for a topic created now; from ``seed`` (a load's id and
    the topic's name) when the same input must give the same store, as ``generate`` does."""
    return (uuid.uuid4() if seed is None else uuid.uuid5(uuid.NAMESPACE_URL, seed)).hex


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite (which only BEGINs before DML) so that a read-only
    # snapshot is one real transaction; the "begin" listener below issues BEGIN itself.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # WAL lets a snapshot read run beside an apply; busy_timeout waits for a lock instead of failing.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={lock_timeout_ms()}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    # Writers take the lock up front (BEGIN IMMEDIATE): a deferred transaction that reads, then writes
    # after another writer committed, fails in WAL mode instead of waiting.
    mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def lock_timeout_ms() -> int:
    """How long a transaction waits for another process's lock before giving up (HOUSEKEEPING_DB_LOCK_TIMEOUT_
    SECONDS, default 30 s)."""
    raw = os.environ.get("HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS", "30")
    try:
        seconds = float(raw)
    except ValueError:
        raise InputError(f"HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS={raw!r} is not a number of seconds") from None
    if seconds < 0:
        raise InputError(f"HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS={raw!r} must be >= 0")
    return int(seconds * 1000)


def mask_url(url: str) -> str:
    """A database URL fit for messages and logs: the password is never shown."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def make_engine(url: str) -> Engine:
    try:
        connect_args = {}
        if make_url(url).get_backend_name() == "postgresql":
            # The same bounded wait for another transaction's row lock as SQLite's busy_timeout.
            connect_args["options"] = f"-c lock_timeout={lock_timeout_ms()}"
        engine = create_engine(url, connect_args=connect_args)
    except Exception as exc:
        masked = mask_url(url)
        text = str(exc)
        password = _password(url)
        if password:
            text = text.replace(password, "***")
        raise InputError(f"metadata database URL {masked!r} is not usable: {text}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _password(url: str) -> str | None:
    try:
        return make_url(url).password
    except Exception:
        return None


@contextmanager
def _named_database_errors(engine: Engine) -> Iterator[None]:
    """A locked or unreachable database is bad input that names the database (the transaction rolled back,
    so nothing changed), not a stack trace."""
    try:
        yield
    except OperationalError as exc:
        where = engine.url.render_as_string(hide_password=True)
        detail = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc).splitlines()[0]
        if "locked" in detail or "busy" in detail or "lock timeout" in detail:
            raise StoreUnavailable(
                f"metadata database {where} is locked by another process (waited "
                f"{lock_timeout_ms() / 1000:g} s, HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS); nothing was changed "
                f"by this transaction: {detail}"
            ) from exc
        raise StoreUnavailable(f"metadata database {where} cannot be used: {detail}") from exc


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """One consistent view of the metadata (snapshot isolation on both SQLite WAL and PostgreSQL)."""
    with _named_database_errors(engine), engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    with _named_database_errors(engine), engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            connection = connection.execution_options(sqlite_begin="IMMEDIATE")
        with connection.begin():
            yield connection


def _quiet_alembic() -> None:
    # Its per-connection INFO lines ("Context impl PostgresqlImpl.", "Will assume transactional DDL.") say nothing
    # an operator reads in a task's log.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _alembic_config():
    from alembic.config import Config

    _quiet_alembic()
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    return config


@lru_cache(maxsize=1)
def schema_revisions() -> tuple[str, ...]:
    """This code's metadata schema revisions, oldest first (the last one is the head it needs)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(_alembic_config())
    return tuple(reversed([s.revision for s in scripts.walk_revisions()]))


def schema_revision(connection: Connection) -> str | None:
    """The revision a metadata database is at (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    _quiet_alembic()
    return MigrationContext.configure(connection).get_current_revision()


def migrate(engine: Engine) -> None:
    """Bring the metadata schema to the newest Alembic revision (idempotent)."""
    from alembic import command

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


LEDGER_DIR_NAME = re.compile(r"^\d+(\.[1-9]\d*)?$")  # <ledgerId> or <ledgerId>.<generation>
# A writer's staging directory beside a ledger directory (``housekeeping.store.entries.write_ledger``): renamed onto
# the ledger when complete, left behind only by a crash.
WRITER_STAGING_NAME = re.compile(r"^\.tmp-(\d+(?:\.[1-9]\d*)?)-[0-9a-f]{32}$")


def ledger_dir_name(ledger_id: int, generation: int = 0) -> str:
    return str(int(ledger_id)) if not generation else f"{int(ledger_id)}.{int(generation)}"


def ledger_rel_path(topic: str, ledger_id: int, generation: int = 0) -> str:
    """Where a ledger's entries live, relative to the store root (one directory per ledger and files
    generation; generation 0 is the ledger's first and usually only one)."""
    return f"{_topic_rel_dir(topic)}/{ledger_dir_name(ledger_id, generation)}"


@lru_cache(maxsize=4096)
def _topic_rel_dir(topic: str) -> str:
    # Cached: apply asks for each of a topic's ledgers in turn, and parsing and quoting the name each time is
    # work per ledger, not per topic. A name that does not parse raises, and is not cached.
    tenant, namespace, local = topic_dir_parts(TopicName.parse(topic))
    return f"{LEDGERS_DIR}/persistent/{tenant}/{namespace}/{local}"


def attempt_object(row: Mapping[str, Any]) -> str | None:
    """The tier object of a ``ledgers`` row's offload attempt, complete or not (None: never attempted, or entries
    not stored: a metadata-only ledger uploads nothing)."""
    if row.get("offload_uuid") and row.get("entries_stored"):
        return object_key(row["topic"], row["ledger_id"], row["offload_uuid"])
    return None


def orphan_named(
    conn: Connection,
    topic: str,
    ledger_id: int,
    *,
    path: str | None = None,
    tier_key: str | None = None,
    other_than: int | None = None,
) -> str | None:
    """Why a row names an orphan the scrub found, now (None: none does), read in the caller's transaction: a pending
    deletion (other than ``other_than``) or a restored orphan naming the same location; for a ledger directory
    (``path``), a ledger or compacted ledger of that ledger id and files generation; for an object (``tier_key``), a
    ledger naming its offload attempt. A writer's staging directory is never named by a row. The scrub's apply and
    purge both ask it (BookKeeper's ``verifyMetadataOnGC``)."""
    from housekeeping.store.tier import parse_object_key

    p = t.pending_deletions.c
    same = (p.path == path) if path else (p.tier_key == tier_key)
    live = (p.status == "pending") | ((p.status == "restored") & (p.kind == ORPHAN_KIND))
    query = select(p.id, p.run_id, p.status).where(same & live)
    if other_than is not None:
        query = query.where(p.id != other_than)
    pending = conn.execute(query).first()
    if pending is not None:
        return f"pending deletion {pending.id} of run {pending.run_id} names it ({pending.status})"
    if tier_key:
        attempt = (parse_object_key(tier_key) or (None, None, None))[2]
        tables = [(t.ledgers, t.ledgers.c.offload_uuid == attempt, "its offload attempt")]
    else:
        name = str(path).rsplit("/", 1)[-1]
        if not LEDGER_DIR_NAME.match(name):
            return None
        generation = int(name.split(".")[1]) if "." in name else 0
        tables = [
            (table, table.c.files_generation == generation, f"its directory (generation {generation})")
            for table in (t.ledgers, t.compacted_ledgers)
        ]
    for table, condition, what in tables:
        where = (table.c.topic == topic) & (table.c.ledger_id == int(ledger_id)) & condition
        if conn.execute(select(table.c.ledger_id).where(where)).first() is not None:
            return f"{table.name} names {what}: ledger {ledger_id} of {topic}"
    return None


def record_pending_deletion(conn: Connection, row: dict[str, Any], **options: Any) -> None:
    """Log a ledger (a ``ledgers`` or ``compacted_ledgers`` row, kept whole for restore) for purge after its
    grace period, in the caller's transaction; ``options`` as :func:`_pending_deletion_values`. The caller removes
    the row itself."""
    record_pending_deletions(conn, [row], **options)


def record_pending_deletions(
    conn: Connection,
    rows: list[dict[str, Any]],
    *,
    incarnations: Mapping[str, str | None] | None = None,
    **options: Any,
) -> None:
    """:func:`record_pending_deletion` of several rows as one statement executed for each (one round of
    SQLAlchemy's per-statement work for a topic's ledgers, not one per ledger). ``incarnations``: each row's topic's
    incarnation as the caller's transaction read it (the shared apply's batch has them); else the insert reads it."""
    if rows:
        # Values as execution parameters of one statement object: SQLAlchemy compiles it once (literal values
        # would build and key a new statement per row, most of an apply's time at 100,000 topics).
        values = [_pending_deletion_values(row, **options) for row in rows]
        if incarnations is None:
            conn.execute(_INSERT_PENDING_DELETION, values)
            return
        for value in values:
            value["topic_incarnation"] = incarnations[value.pop("incarnation_of")]
        conn.execute(_INSERT_PENDING_DELETION_OF, values)


def _pending_deletion_values(
    row: dict[str, Any],
    *,
    run_id: str,
    as_of_ms: int,
    purge_after_ms: int,
    kind: str = "ledger",
    erased_by: str | None = None,
    tier_key: str | None = None,
    local: bool | None = None,
    path: str | None = None,
) -> dict[str, Any]:
    """The pending-deletion log's row for a ledger (a ``ledgers`` or ``compacted_ledgers`` row, kept whole for
    restore).

    Its files: the local directory unless ``local`` is false (default: unless the row says its local copy is
    gone), and the tier object ``tier_key`` (default, for a ledger leaving the ledger list: the object of the row's
    offload attempt when its entries are stored), so a ledger deleted from the ledger list is deleted from both tiers (Pulsar's trim deletes the BK
    ledger and the offloaded object, complete or not). ``path``: the local directory when it is not the row's
    ledger directory (a writer's staging directory the scrub found)."""
    if local is None:
        local = not row.get("local_deleted")
    if kind == "ledger" and tier_key is None:
        tier_key = attempt_object(row)
    return {
        "topic": row["topic"],
        "ledger_id": row["ledger_id"],
        "path": (path or ledger_rel_path(row["topic"], row["ledger_id"], row.get("files_generation") or 0))
        if local
        else "",
        "tier_key": tier_key,
        "ledger_row": json.dumps(row, sort_keys=True),
        "size_bytes": row["size_bytes"],
        "run_id": run_id,
        "deleted_as_of_ms": as_of_ms,
        "purge_after_ms": purge_after_ms,
        "status": "pending",
        "kind": kind,
        "erased_by": erased_by,
        "incarnation_of": row["topic"],
    }


# The topic's incarnation is read by the insert itself (a subquery on the topic's row: its primary key), in the same
# transaction as the change that logs the ledger, so no caller passes it and none can pass a stale one. A ledger whose
# topic row is gone (a scrub's orphan) records none.
_INSERT_PENDING_DELETION = insert(t.pending_deletions).values(
    topic_incarnation=select(t.topics.c.incarnation)
    .where(t.topics.c.name == bindparam("incarnation_of"))
    .scalar_subquery()
)
_INSERT_PENDING_DELETION_OF = insert(t.pending_deletions)


@dataclass
class Store:
    root: Path
    metadata_url: str

    @classmethod
    def open(
        cls,
        root: str | Path,
        metadata_url: str | None = None,
        *,
        must_exist: bool = True,
        check_schema: bool = True,
    ) -> Store:
        root_path = Path(root).expanduser().resolve()
        if must_exist and not root_path.is_dir():
            raise InputError(
                f"store {root_path} does not exist (create one with `housekeeping load` or `generate`)"
            )
        url = metadata_url or os.environ.get(METADATA_URL_ENV) or f"sqlite:///{root_path / 'metadata.db'}"
        store = cls(root_path, url)
        if must_exist:
            store.require_initialised(check_schema=check_schema)
        return store

    @classmethod
    def of_settings(cls, settings: Settings) -> Store:
        """The store the DAGs housekeep (HOUSEKEEPING_STORE_ROOT, HOUSEKEEPING_METADATA_URL)."""
        if not settings.store_root:
            raise InputError("HOUSEKEEPING_STORE_ROOT is not set: point it at the store the DAGs housekeep")
        return cls.open(settings.store_root, settings.metadata_url)

    # --- database -------------------------------------------------------------------------------
    _engine: Engine | None = field(default=None, init=False, repr=False)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.metadata_url)
        return self._engine

    def require_initialised(self, *, check_schema: bool = True) -> None:
        from sqlalchemy import inspect

        try:
            names = set(inspect(self.engine).get_table_names())
        except Exception as exc:  # unreachable server, locked or corrupt file
            raise InputError(
                f"store {self.root}: metadata database {self.safe_url} cannot be read: {exc}"
            ) from exc
        if "topics" not in names:
            raise InputError(
                f"store {self.root}: metadata database {self.safe_url} holds no store "
                "(create one with `housekeeping load` or `generate`)"
            )
        if check_schema:
            self.require_current_schema()

    def require_current_schema(self) -> None:
        """A store whose metadata an older housekeeping wrote is refused with the command that upgrades it,
        rather than failing later on a missing table or column; one a newer housekeeping wrote is refused
        outright (this code cannot know what that schema means)."""
        self._refuse_schema(self._schema_revision(), older_ok=False)

    def upgrade_schema(self) -> dict[str, str | None]:
        """Migrate the metadata to this code's head revision (idempotent); what it was and what it is now."""
        before = self._schema_revision()
        self._refuse_schema(before, older_ok=True)
        with _named_database_errors(self.engine):
            migrate(self.engine)
        return {"store": str(self.root), "fromRevision": before, "toRevision": schema_revisions()[-1]}

    def _schema_revision(self) -> str | None:
        with self.engine.connect() as connection:
            return schema_revision(connection)

    def _refuse_schema(self, current: str | None, *, older_ok: bool) -> None:
        revisions = schema_revisions()
        if current == revisions[-1]:
            return
        if current is None or current in revisions:
            if older_ok:
                return
            raise InputError(
                f"store {self.root}: metadata database {self.safe_url} is at schema revision "
                f"{current or 'none'}, this housekeeping needs {revisions[-1]}; back up the metadata, then run "
                f"`housekeeping upgrade --store {self.root}` (nothing was changed)"
            )
        raise InputError(
            f"store {self.root}: metadata database {self.safe_url} is at schema revision {current}, which "
            f"this housekeeping does not know (newest it knows: {revisions[-1]}); a newer housekeeping wrote "
            "it, so use that version (nothing was changed)"
        )

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def broker_config(self) -> BrokerConfig:
        """Pulsar defaults < broker.conf file named by HOUSEKEEPING_BROKER_CONF < the store's broker section."""
        layers: list[tuple[str, dict[str, Any]]] = []
        conf_path = os.environ.get(BROKER_CONF_ENV)
        if conf_path:
            layers.append((conf_path, read_broker_conf(Path(conf_path))))
        with self.engine.connect() as connection:
            row = connection.execute(
                select(t.store_settings.c.value).where(t.store_settings.c.key == "broker")
            ).first()
        if row is not None:
            layers.append((f"store {self.root} broker settings", json.loads(row[0])))
        return BrokerConfig.from_layers(*layers)

    # --- the object tier ------------------------------------------------------------------------
    @cached_property
    def tier(self) -> ObjectTier | None:
        """The deployment's object tier (``HOUSEKEEPING_OFFLOAD_URL``); None: no offloader."""
        return tier_of_settings()

    def require_tier(self, why: str) -> ObjectTier:
        """The tier, for something that cannot be done without it (bad input naming what, otherwise)."""
        if self.tier is None:
            raise InputError(f"{why}: no object tier is configured (set HOUSEKEEPING_OFFLOAD_URL)")
        return self.tier

    def store_id(self) -> str:
        """This store's identity (``store_settings.storeId``, made once and kept across loads)."""
        import uuid

        with write_transaction(self.engine) as conn:
            row = conn.execute(
                select(t.store_settings.c.value).where(t.store_settings.c.key == "storeId")
            ).first()
            if row is not None:
                return json.loads(row[0])
            made = str(uuid.uuid4())
            conn.execute(t.store_settings.insert().values(key="storeId", value=json.dumps(made)))
            return made

    def tier_for_writing(self, why: str) -> ObjectTier:
        """The tier, checked reachable and claimed for this store, before the first object is written."""
        tier = self.require_tier(why)
        tier.check()
        tier.claim(self.store_id(), str(self.root))
        return tier

    def read_ledger_entries(self, row: Any, columns: list[str] | None = None) -> Any:
        """A ``ledgers`` row's entries (Arrow table): the local copy, or the tier's when the local copy is gone
        (``local_deleted``: an offloaded ledger whose local copy the offload-deletion lag removed)."""
        from housekeeping.store.entries import read_ledger

        if getattr(row, "local_deleted", False):
            tier = self.require_tier(f"topic {row.topic} ledger {row.ledger_id} is only in the object tier")
            return tier.read_ledger(object_key(row.topic, row.ledger_id, row.offload_uuid), columns)
        ledger_dir = self.ledger_dir(row.topic, row.ledger_id, row.files_generation)
        if not ledger_dir.is_dir():
            raise InputError(f"topic {row.topic} ledger {row.ledger_id}: directory {ledger_dir} is missing")
        table = read_ledger(ledger_dir)
        return table.select(columns) if columns else table

    # --- files ----------------------------------------------------------------------------------
    @property
    def ledgers_root(self) -> Path:
        return self.root / LEDGERS_DIR

    def ledger_rel_path(self, topic: str, ledger_id: int, generation: int = 0) -> str:
        return ledger_rel_path(topic, ledger_id, generation)

    def ledger_dir(self, topic: str, ledger_id: int, generation: int = 0) -> Path:
        return self.root / self.ledger_rel_path(topic, ledger_id, generation)

    def run_dir(self, mechanism: str, run_id: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_.+" else "_" for ch in run_id).strip(".")
        return self.root / RUNS_DIR / mechanism / (safe or "run")

    def contained(self, path: Path) -> Path:
        """The resolved path if it lies strictly inside ``ledgers/``; raise otherwise."""
        base = self.ledgers_root.resolve()
        resolved = (path if path.is_absolute() else self.root / path).resolve()
        if resolved == base or base not in resolved.parents:
            raise PathOutsideStore(
                f"refusing to touch {path}: it is not inside the store's ledger tree {base}"
            )
        return resolved

    def remove_ledger_dir(self, rel_path: str) -> bool:
        """Delete one ledger directory. The single file-deleting function of the project.

        Returns False when it was already gone (idempotent)."""
        raw = Path(rel_path) if Path(rel_path).is_absolute() else self.root / rel_path
        if raw.is_symlink():
            raise PathOutsideStore(f"refusing to delete {raw}: a ledger is a real directory, not a link")
        target = self.contained(Path(rel_path))
        depth = target.relative_to(self.ledgers_root.resolve()).parts
        if (
            len(depth) != 5
            or depth[0] != "persistent"
            or not (LEDGER_DIR_NAME.match(depth[4]) or WRITER_STAGING_NAME.match(depth[4]))
        ):
            raise PathOutsideStore(
                f"refusing to delete {target}: not a ledger directory "
                "(ledgers/persistent/<tenant>/<namespace>/<topic>/<ledgerId>[.<generation>]) or a writer's staging "
                "directory beside one (.tmp-<ledgerId>-<32 hex>)"
            )
        if target.exists() and not target.is_dir():
            raise PathOutsideStore(f"refusing to delete {target}: a ledger is a real directory, not a file")
        return remove_tree(target, within=self.ledgers_root)

    def prune_empty_parents(self, rel_path: str) -> None:
        """Remove the now-empty topic/namespace/tenant directories above a removed ledger directory, up to
        ``ledgers/``. ``rmdir`` only removes empty directories, so no file can go this way."""
        prune_empty_dirs(self.contained(Path(rel_path)).parent, within=self.ledgers_root)
