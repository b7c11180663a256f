"""Key erasure requests: "forget key K in topic T (or namespace NS)".

A request is recorded in the metadata store (``erasure_requests``) and journaled with who asked; the key erasure
mechanism (the ``key_erasure`` DAG) acts on every request whose ``requested_at`` is at or before its run's as-of.
States: ``pending`` (waiting for a run), ``held`` (a hold covers the target: the hold wins, the request waits),
``done`` (with the path of its proof-of-erasure report), ``failed`` (with why).

Neither the request row nor the journal holds the key itself, only its SHA-256 (``keyDigest``): the metadata
(SQLite by default, a file under the store root) and the journal are kept for ever, and an erasure log that
repeated the erased key would defeat it. Entries are matched by the digest of their key, so the key is needed
nowhere after the request is recorded. (The digest of a guessable key is not anonymous; it is what proves which
key was erased.)
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from typing import Any

from sqlalchemy import insert, select

from housekeeping.core.errors import InputError
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import describe as describe_hold
from housekeeping.store.holds import hold_for, load_holds, target_exists
from housekeeping.store.journal import journal
from housekeeping.store.store import Store, read_transaction, write_transaction

PENDING, HELD, DONE, FAILED = "pending", "held", "done", "failed"
MAX_KEY_BYTES = 64 * 1024  # a message key, not a document


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _target(topic: str | None, namespace: str | None) -> tuple[str, str]:
    if (topic is None) == (namespace is None):
        raise InputError("an erasure request names exactly one of --topic or --namespace")
    if topic is not None:
        return "topic", str(TopicName.parse(topic))
    return "namespace", str(NamespaceName.parse(namespace))


def add_request(
    store: Store,
    *,
    key: str | None = None,
    key_sha256: str | None = None,
    topic: str | None = None,
    namespace: str | None = None,
    reason: str,
    requested_at_ms: int | None = None,
    actor: str,
    once: bool = False,
) -> dict[str, Any]:
    """Record a request (checked first: nothing is written for a bad one) for ``key`` or for the key whose SHA-256
    (hex) is ``key_sha256`` (so the key need not be typed where it would be kept, as an Airflow run's conf).
    ``requested_at_ms`` default: now (the request takes effect for runs at or after the moment it was made).
    ``once``: an identical request already recorded (same digest, target, requested-at) is returned instead (a
    retried DAG task records its form's request once)."""
    scope, target = _target(topic, namespace)
    if (key is None) == (key_sha256 is None):
        raise InputError("an erasure request names the key or its SHA-256, one of the two")
    if key is not None and not key:
        raise InputError("an erasure request needs the key to erase (an empty key is not a key)")
    if key is not None and len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InputError(f"the key to erase is longer than {MAX_KEY_BYTES} bytes: not a message key")
    if key_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", key_sha256):
        raise InputError(f"{key_sha256!r} is not a SHA-256 in hex (64 characters 0-9a-f)")
    digest = key_digest(key) if key is not None else str(key_sha256)
    if not reason.strip():
        raise InputError(
            f"erasure of a key in {target}: give a reason (--reason), it is kept with the request"
        )
    recorded_at_ms = int(time.time() * 1000)  # wall clock: when it was asked (audit)
    effective_ms = requested_at_ms if requested_at_ms is not None else recorded_at_ms
    c = t.erasure_requests.c
    same_request = (
        (c.key_sha256 == digest)
        & (c.scope == scope)
        & (c.target == target)
        & (c.requested_at_ms == effective_ms)
    )
    with write_transaction(store.engine) as conn:
        if not target_exists(conn, scope, target):
            raise InputError(
                f"erasure in namespace {target}: no such namespace in store {store.root}"
                if scope == "namespace"
                else f"erasure in topic {target}: no such topic or partitioned topic in store {store.root}"
            )
        same = conn.execute(select(c.id).where(same_request)).first() if once else None
        if same is not None:
            request_id = same.id
        else:
            request_id = _record(
                conn, digest, scope, target, reason.strip(), effective_ms, recorded_at_ms, actor
            )
    return next(r for r in list_requests(store) if r["id"] == request_id)


def _record(
    conn: Any,
    digest: str,
    scope: str,
    target: str,
    reason: str,
    effective_ms: int,
    recorded_at_ms: int,
    actor: str,
) -> int:
    """Insert the request and journal it, in the caller's transaction; its id."""
    request_id = conn.execute(
        insert(t.erasure_requests).values(
            key_sha256=digest,
            scope=scope,
            target=target,
            reason=reason,
            requested_at_ms=effective_ms,
            requested_by=actor,
            recorded_at_ms=recorded_at_ms,
            state=PENDING,
        )
    ).inserted_primary_key[0]
    journal(
        conn,
        run_id=f"cli-erase-{uuid.uuid4().hex[:8]}",
        mechanism="erasure",
        topic=target if scope == "topic" else None,
        action="erase_request",
        status="requested",
        detail={
            "requestId": request_id,
            "keyDigest": digest,
            "scope": scope,
            "target": target,
            "why": reason,
            "requestedAt": format_ms(effective_ms),
        },
        as_of_ms=effective_ms,
        actor=actor,
    )
    return request_id


def list_requests(store: Store) -> list[dict[str, Any]]:
    """Every request, oldest first. A pending request whose target a hold covers now shows as ``held`` with the
    hold (the erasure run records the same when it meets it)."""
    with read_transaction(store.engine) as conn:
        rows = list(conn.execute(select(t.erasure_requests).order_by(t.erasure_requests.c.id)))
        holds = load_holds(conn)
    requests = []
    for row in rows:
        state, detail = row.state, row.state_detail
        if state in (PENDING, HELD):
            hold = _hold_covering(row.scope, row.target, holds)
            if hold is not None:
                state, detail = HELD, describe_hold(hold)
            elif state == HELD:  # the hold was released since: waits for the next run
                state, detail = PENDING, None
        requests.append(
            {
                "id": row.id,
                "keyDigest": row.key_sha256,
                "scope": row.scope,
                "target": row.target,
                "reason": row.reason,
                "requestedAt": format_ms(row.requested_at_ms),
                "requestedBy": row.requested_by,
                "recordedAt": format_ms(row.recorded_at_ms),
                "state": state,
                "detail": detail,
                "runId": row.run_id,
            }
        )
    return requests


def _hold_covering(scope: str, target: str, holds: dict[str, Any]) -> Any:
    return holds.get(target) if scope == "namespace" else hold_for(target, holds)


def format_text(requests: list[dict[str, Any]]) -> str:
    if not requests:
        return "no erasure requests"
    lines = []
    for r in requests:
        lines.append(
            f"#{r['id']}  {r['state']:<8} {r['scope']:<9} {r['target']}  key sha256 {r['keyDigest'][:12]}  "
            f"requested at {r['requestedAt']} by {r['requestedBy']}: {r['reason']}"
        )
        if r["detail"]:
            lines.append(f"    {r['detail']}")
    return "\n".join(lines)


def record_form_request(store: Store, params: dict[str, Any], as_of_ms: int, actor: str) -> None:
    """A request from the trigger form (``erase_key`` or ``erase_key_sha256``, ``erase_topic`` or
    ``erase_namespace``, ``erase_reason``), in effect at the run's logical time; recorded once per run."""
    if not (params.get("erase_key") or params.get("erase_key_sha256")):
        return
    add_request(
        store,
        key=params.get("erase_key") or None,
        key_sha256=params.get("erase_key_sha256") or None,
        topic=params.get("erase_topic") or None,
        namespace=params.get("erase_namespace") or None,
        reason=str(params.get("erase_reason") or ""),
        requested_at_ms=as_of_ms,
        actor=actor,
        once=True,
    )
