"""Helpers of the Pulsar message-expiry and backlog-quota scenarios (tests/expiry/test_pulsar_scenarios.py,
tests/backlog/test_pulsar_scenarios.py): load a manifest, plan and apply through the command-line contract, and
Pulsar's producer timelines written as entries and ledger close times."""

from __future__ import annotations

import json

from tests.conftest import iso, run_cli, write_manifest

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
KIB = 1024
AS_OF = T0 + 3_600_000


def load(capsys, tmp_path, namespaces: dict, topics: dict, broker: dict | None = None) -> str:
    document = {"broker": broker or {}, "namespaces": namespaces, "topics": topics}
    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, document))
    )
    assert code == 0, err
    return store


def plan(capsys, mechanism: str, store: str, as_of_ms: int) -> dict:
    code, out, err = run_cli(
        capsys, "plan", mechanism, "--store", store, "--as-of", iso(as_of_ms), "--format", "json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["gate"]["success"], document["gate"]
    return document


def apply(capsys, mechanism: str, store: str, as_of_ms: int) -> None:
    code, _, err = run_cli(capsys, "apply", mechanism, "--store", store, "--as-of", iso(as_of_ms))
    assert code == 0, err


def moves(document: dict, topic: str) -> dict[str, str]:
    """subscription -> planned mark-delete position for one topic."""
    return {
        a["subscription"]: a["to"]
        for a in document["actions"]
        if a["action"] == "move_cursor" and a["topic"] == topic
    }


def backlog_after(ledger_sizes: list[tuple[int, int]], position: str) -> int:
    """Entries after a mark-delete position (ledger_sizes: (ledgerId, entries) oldest first)."""
    ledger_id, entry_id = (int(p) for p in position.split(":"))
    return sum(
        n if lid > ledger_id else (n - 1 - entry_id if lid == ledger_id else 0) for lid, n in ledger_sizes
    )


def producer_timeline(count: int, start_ms: int, per_ledger: int = 5, eager_rollover: bool = False):
    """`count` messages published 1 ms apart from `start_ms` into ledgers 1, 2, ... of `per_ledger` entries, each
    closed at its last entry's time; the last ledger is the current (open) one, an empty one when
    `eager_rollover` (Pulsar creates the next ledger as soon as one is full)."""
    stamps = [start_ms + i for i in range(count)]
    chunks = [stamps[i : i + per_ledger] for i in range(0, count, per_ledger)]
    ledgers = [(1 + i, chunk, chunk[-1]) for i, chunk in enumerate(chunks)]
    if eager_rollover:
        ledgers.append((1 + len(chunks), [], None))
    else:
        last_id, last_chunk, _ = ledgers[-1]
        ledgers[-1] = (last_id, last_chunk, None)
    return ledgers


def sizes(ledgers) -> list[tuple[int, int]]:
    return [(lid, len(stamps)) for lid, stamps, _ in ledgers]


def cursors(**positions: str) -> dict:
    """Durable subscriptions with no consumer connected (Pulsar's finder and monitor tests call the search
    directly, without the subscription's small-backlog guard)."""
    return {name: {"markDeletePosition": position} for name, position in positions.items()}
