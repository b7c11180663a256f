"""Chargeback: byte-hours, average and peak bytes per tenant, namespace or topic and tier over a period, from the
store's record (docs/semantics.md §12.2).

Tiers: ``local`` (the bookies' disks: a ledger's files until purged, times the write quorum), ``tier`` (the
object tier: an offloaded ledger's object until purged) and ``listed`` (what the policies see: a ledger in its
topic's ledger list, once, wherever its copies are). An offloaded ledger whose local copy is kept counts on
``local`` and on ``tier``, once on ``listed``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.core.timeutil import format_ms
from housekeeping.observe.capacity.curves import MS_PER_HOUR, Segments, byte_ms, peak, value_at
from housekeeping.observe.capacity.record import PIECE_TIERS, TIERS, Record

GROUPINGS = ("tenant", "namespace", "topic")


def write_quorum(namespace_policies: Mapping[str, Any], broker: BrokerConfig | None) -> int:
    """Copies of each entry on the bookies: the namespace's ``persistence.bookkeeperWriteQuorum``, else the
    broker's ``managedLedgerDefaultWriteQuorum``."""
    persistence = namespace_policies.get("persistence") or {}
    if persistence.get("bookkeeperWriteQuorum") is not None:
        return int(persistence["bookkeeperWriteQuorum"])
    return int(broker["managedLedgerDefaultWriteQuorum"]) if broker is not None else 2


def group_key(by: str, namespace: str, topic: str) -> tuple[str, ...]:
    tenant = namespace.split("/", 1)[0]
    return {"tenant": (tenant,), "namespace": (tenant, namespace), "topic": (tenant, namespace, topic)}[by]


def check_scope(record: Record, tenant: str | None, namespace: str | None) -> None:
    """An unknown tenant or namespace is bad input, named."""
    known = set(record.namespaces) | set(record.namespace_of.values())
    if namespace is not None and namespace not in known:
        raise InputError(f"namespace {namespace!r} is not in the store")
    if tenant is not None and tenant not in {n.split("/", 1)[0] for n in known}:
        raise InputError(f"tenant {tenant!r} is not in the store")


def in_scope(tenant: str | None, namespace: str | None) -> Callable[[str], bool]:
    def accepts(candidate: str) -> bool:
        if namespace is not None and candidate != namespace:
            return False
        return tenant is None or candidate.split("/", 1)[0] == tenant

    return accepts


def segments_by(
    record: Record, by: str, tiers: tuple[str, ...], accepts: Callable[[str], bool]
) -> tuple[Segments, list[tuple[tuple[str, ...], str]]]:
    """The record's pieces on ``tiers`` as segments, one group per (key, tier) in the order the pieces first name
    them; the local tier times its namespace's write quorum."""
    pieces = record.pieces
    quorum = {name: write_quorum(policies, record.broker) for name, policies in record.namespaces.items()}
    default = write_quorum({}, record.broker)
    # Per topic code: its key's index (-1 out of scope) and its local copies.
    keys: dict[tuple[str, ...], int] = {}
    key_of, copies_of = [], []
    for topic in pieces.topics:
        namespace = record.namespace_of[topic]
        key_of.append(
            keys.setdefault(group_key(by, namespace, topic), len(keys)) if accepts(namespace) else -1
        )
        copies_of.append(quorum.get(namespace, default))
    key_code = np.array(key_of, dtype=np.int64)[pieces.topic] if len(pieces) else np.zeros(0, dtype=np.int64)
    wanted = np.isin(pieces.tier, [PIECE_TIERS.index(tier) for tier in tiers]) & (key_code >= 0)
    pair = key_code[wanted] * len(PIECE_TIERS) + pieces.tier[wanted]
    # Groups numbered in the order the pieces first name them, as they were piece by piece.
    _, first_seen, inverse = np.unique(pair, return_index=True, return_inverse=True)
    order = np.argsort(first_seen, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    group = rank[inverse]
    key_names = list(keys)
    groups = [
        (key_names[int(code) // len(PIECE_TIERS)], PIECE_TIERS[int(code) % len(PIECE_TIERS)])
        for code in pair[first_seen[order]]
    ]
    local = pieces.tier[wanted] == PIECE_TIERS.index("local")
    copies = np.where(local, np.array(copies_of, dtype=np.float64)[pieces.topic[wanted]], 1.0)
    segments = Segments(
        group.astype(np.int64), pieces.size[wanted] * copies, pieces.ramp_from[wanted], pieces.ramp_to[wanted],
        pieces.start[wanted], pieces.end[wanted], len(groups),
    )  # fmt: skip
    return segments, groups


def usage(
    record: Record,
    *,
    from_ms: int,
    to_ms: int,
    by: str,
    tier: str | None = None,
    tenant: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """The period's rows, sorted by group then tier."""
    if by not in GROUPINGS:
        raise InputError(f"--by {by!r} is not one of {', '.join(GROUPINGS)}")
    if tier is not None and tier not in TIERS:
        raise InputError(f"--tier {tier!r} is not one of {', '.join(TIERS)}")
    if from_ms >= to_ms:
        raise InputError(f"--from {format_ms(from_ms)} is not before --to {format_ms(to_ms)}")
    check_scope(record, tenant, namespace)
    tiers = (tier,) if tier else TIERS
    segments, groups = segments_by(record, by, tiers, in_scope(tenant, namespace))
    hours = (to_ms - from_ms) / MS_PER_HOUR
    areas = byte_ms(segments, from_ms, to_ms)
    peaks = peak(segments, from_ms, to_ms)
    rows = []
    for (key, where), area, top in zip(groups, areas, peaks, strict=True):
        names = dict(zip(("tenant", "namespace", "topic"), key, strict=False))
        byte_hours = float(area) / MS_PER_HOUR
        rows.append(
            {
                **names,
                "tier": where,
                "byteHours": byte_hours,
                "avgBytes": byte_hours / hours,
                "peakBytes": float(top),
            }
        )
    rows.sort(key=lambda row: (*(row.get(k, "") for k in GROUPINGS), TIERS.index(row["tier"])))
    return {"from": format_ms(from_ms), "to": format_ms(to_ms), "by": by, "rows": rows}


def bytes_now(record: Record, by: str, tiers: tuple[str, ...]) -> dict[tuple[tuple[str, ...], str], float]:
    """Bytes per (key, tier) at the record's as-of."""
    segments, groups = segments_by(record, by, tiers, in_scope(None, None))
    return dict(zip(groups, value_at(segments, record.as_of_ms).tolist(), strict=True))


def series(record: Record, tier: str, days: int, points: int) -> dict[str, list[list[float]]]:
    """Per namespace, ``[[ms, bytes], ...]`` on ``tier`` at ``points`` times over the last ``days`` before the
    record's as-of (or since its first entry), the as-of included."""
    segments, groups = segments_by(record, "namespace", (tier,), in_scope(None, None))
    on = record.pieces.on(tier)
    first = float(record.pieces.ramp_from[on].min()) if on.any() else record.as_of_ms
    start = max(record.as_of_ms - days * 86_400_000, int(first))
    times = sorted({int(start + (record.as_of_ms - start) * k / (points - 1)) for k in range(points)})
    values = [value_at(segments, moment) for moment in times]
    return {
        key[1]: [[moment, float(column[i])] for moment, column in zip(times, values, strict=True)]
        for i, (key, _) in sorted(enumerate(groups), key=lambda item: item[1][0][1])
    }
