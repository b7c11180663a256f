"""Key erasure through the CLI: requests across topics of two namespaces and a compacted topic, a trimmed ledger
waiting for purge; after apply and purge no file under the store holds the key (Parquet read column by column,
every other file byte by byte), cursors, entry counts and every other key's compacted view are as before, the
request is done with its proof; restore refuses the replaced files; a hold wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store
from tests.conftest import run_cli, write_manifest
from tests.store_invariants import files_holding

pytestmark = [pytest.mark.spark, pytest.mark.runs]

KEY = "customer-42"
OTHER = "customer-7"
PRICES = "persistent://acme/tables/prices"  # compacted
ORDERS = "persistent://acme/tables/orders"  # a consumed ledger trimmed (waiting for purge) before the erasure
EVENTS = "persistent://globex/audit/events"  # another namespace: a topic-scoped request
KEEP = "persistent://globex/audit/other"  # not covered by any request
T0 = 1_780_000_000_000
AS_OF_MS = 1_793_491_200_000  # 2026-11-01T00:00:00Z


def iso(ms: int) -> str:
    from housekeeping.core.timeutil import format_ms

    return format_ms(ms)


def _messages(ledger_keys: dict[int, list[str | None]]) -> list[dict]:
    out = []
    for ledger, keys in ledger_keys.items():
        for entry, key in enumerate(keys):
            out.append(
                {
                    "ledgerId": ledger,
                    "entryId": entry,
                    "publishTime": AS_OF_MS - 3_600_000 + ledger * 1000 + entry,
                    "key": key,
                    "value": f"{key or 'nokey'}-payload-{ledger}-{entry}",
                    "properties": {"source": f"{key or 'none'}"},
                }
            )
    return out


def _topic(ledger_keys: dict[int, list[str | None]], cursors: dict | None = None) -> dict:
    messages = _messages(ledger_keys)
    ids = sorted(ledger_keys)
    ledgers = []
    for i in ids:
        size = sum(len(m["value"].encode()) for m in messages if m["ledgerId"] == i)
        ledgers.append(
            {
                "ledgerId": i,
                "entries": len(ledger_keys[i]),
                "size": size,
                **({"timestamp": T0} if i != ids[-1] else {}),
            }
        )
    return {"ledgers": ledgers, "cursors": cursors or {}, "messages": messages, "lastActive": T0}


def _manifest() -> dict:
    return {
        "namespaces": {
            "acme/tables": {
                "compaction_threshold": 1,
                "retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
            },
            "globex/audit": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
        },
        "topics": {
            PRICES: _topic({10: [KEY, OTHER, "a", KEY], 11: [OTHER, None, KEY]}),
            ORDERS: _topic(
                {20: [KEY, OTHER], 21: ["b", KEY, OTHER]},
                {"billing": {"markDeletePosition": "21:0", "lastActive": T0}},
            ),
            EVENTS: _topic(
                {30: [KEY, KEY, "c"]}, {"audit": {"markDeletePosition": "30:1", "lastActive": T0}}
            ),
            KEEP: _topic({40: [KEY, "d"]}),
        },
    }


def _cli(capsys, *argv) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return out


def _facts(root: Path) -> dict:
    store = Store.open(root)
    with store.engine.connect() as conn:
        cursors = {
            (r.topic, r.name): (r.mark_delete_ledger, r.mark_delete_entry)
            for r in conn.execute(select(t.cursors))
        }
        ledgers = {(r.topic, r.ledger_id): r.entries for r in conn.execute(select(t.ledgers))}
    return {"cursors": cursors, "ledgers": ledgers}


def _requests(capsys, root: Path) -> dict[int, dict]:
    listed = json.loads(_cli(capsys, "erase", "list", "--store", str(root), "--format", "json"))["requests"]
    return {r["id"]: r for r in listed}


def _view(capsys, root: Path, topic: str) -> dict:
    out = _cli(capsys, "inspect", "--store", str(root), "--compacted", "--topic", topic)
    return json.loads(out)["compactedView"][topic]["keys"]


@pytest.fixture
def store(tmp_path, capsys, monkeypatch) -> Path:
    root = tmp_path / "store"
    _cli(capsys, "load", "--store", str(root), "--manifest", str(write_manifest(tmp_path, _manifest())))
    monkeypatch.setenv("HOUSEKEEPING_ERASURE_GRACE_SECONDS", "0")
    return root


def test_erasure_forgets_the_key_everywhere_and_keeps_every_position(store, capsys, monkeypatch):
    root = store
    # Compaction writes the compacted ledger of prices; trim frees orders' consumed ledger 20 (1 day grace).
    _cli(capsys, "apply", "compaction", "--store", str(root), "--as-of", iso(AS_OF_MS - 7_200_000))
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "86400")
    trim = json.loads(
        _cli(
            capsys,
            "apply",
            "trim",
            "--store",
            str(root),
            "--as-of",
            iso(AS_OF_MS - 3_600_000),
            "--scope",
            ORDERS,
        )
    )
    assert trim["ledgersDeleted"] == 1
    other_keys_before = {k: v for k, v in _view(capsys, root, PRICES).items() if k != KEY}
    assert KEY in _view(capsys, root, PRICES)
    before = _facts(root)

    _cli(
        capsys,
        "erase",
        "request",
        KEY,
        "--namespace",
        "acme/tables",
        "--store",
        str(root),
        "--reason",
        "GDPR art. 17",
        "--requested-at",
        iso(AS_OF_MS - 60_000),
    )
    _cli(
        capsys,
        "erase",
        "request",
        KEY,
        "--topic",
        EVENTS,
        "--store",
        str(root),
        "--reason",
        "ticket 9",
        "--requested-at",
        iso(AS_OF_MS - 60_000),
    )
    # Not yet in effect at the run's as-of: waits.
    _cli(
        capsys,
        "erase",
        "request",
        "d",
        "--topic",
        KEEP,
        "--store",
        str(root),
        "--reason",
        "later",
        "--requested-at",
        iso(AS_OF_MS + 3_600_000),
    )

    result = json.loads(_cli(capsys, "apply", "erasure", "--store", str(root), "--as-of", iso(AS_OF_MS)))
    # prices: ledgers 10, 11 and its compacted ledger; orders: 21 and its compacted ledger (20 waits for purge:
    # brought forward); events: 30.
    assert result["ledgersRewritten"] == 4 and result["compactedLedgersRewritten"] == 2
    # prices 3 raw + 1 compacted (the latest), orders 1 raw + 1 compacted, events 2
    assert result["entriesRedacted"] == 3 + 1 + 1 + 1 + 2
    assert result["pendingFilesExpedited"] == 1
    after = _facts(root)
    assert after == before  # every cursor and every ledger's entry count as before
    view = _view(capsys, root, PRICES)
    assert KEY not in view and view == other_keys_before

    # The replaced files wait for their (0 s) grace: the key is still on disk until purge.
    assert files_holding(root, KEY)
    requests = _requests(capsys, root)
    assert requests[1]["state"] == "pending" and "wait for purge" in requests[1]["detail"]

    # Restore refuses the replaced and the brought-forward files.
    code, _, err = run_cli(capsys, "restore", ORDERS, "--store", str(root), "--as-of", iso(AS_OF_MS))
    assert code != 0 and "erased" in err

    purged = json.loads(_cli(capsys, "purge", "--store", str(root), "--as-of", iso(AS_OF_MS + 1000)))
    assert len(purged["purged"]) == 6 + 1, purged  # the 6 replaced ledgers' files and the trimmed ledger 20
    second = json.loads(
        _cli(capsys, "apply", "erasure", "--store", str(root), "--as-of", iso(AS_OF_MS + 60_000))
    )
    assert second["ledgersRewritten"] == 0
    requests = _requests(capsys, root)
    assert requests[1]["state"] == "done" and requests[2]["state"] == "done", [
        (r["state"], r["detail"]) for r in requests.values()
    ]
    assert requests[3]["state"] == "pending"
    proof = json.loads(Path(requests[1]["detail"]).read_text())
    assert proof["finalScan"]["filesHoldingTheKey"] == [] and proof["finalScan"]["filesScanned"] > 0
    assert {p["path"].rsplit("/", 2)[-2] for p in proof["purged"]} >= {"orders", "prices"}

    # A later compaction reads the redacted ledgers: the key does not come back into the compacted view.
    _cli(capsys, "apply", "compaction", "--store", str(root), "--as-of", iso(AS_OF_MS + 120_000),
         "--compact-topic", PRICES)  # fmt: skip
    view = _view(capsys, root, PRICES)
    assert KEY not in view and view == other_keys_before
    # Only the uncovered topic still holds the key; nothing else under the store does (runs, metadata, reports).
    holding = files_holding(root, KEY)
    assert holding and all("globex/audit/other" in path for path in holding), holding
    assert files_holding(root, "d")  # a key not yet in effect is untouched
    # Sizes shrank by the redacted payloads, so retention size rules see the new sizes.
    store_ = Store.open(root)
    with store_.engine.connect() as conn:
        events = conn.execute(select(t.ledgers).where(t.ledgers.c.topic == EVENTS)).one()
    assert events.files_generation == 1 and events.size_bytes == len("c-payload-30-2")


def test_a_hold_wins_and_the_request_shows_held(store, capsys):
    root = store
    _cli(capsys, "hold", "add", EVENTS, "--store", str(root), "--reason", "litigation 12")
    _cli(
        capsys,
        "erase",
        "request",
        KEY,
        "--topic",
        EVENTS,
        "--store",
        str(root),
        "--reason",
        "ticket 9",
        "--requested-at",
        iso(AS_OF_MS - 60_000),
    )
    result = json.loads(_cli(capsys, "apply", "erasure", "--store", str(root), "--as-of", iso(AS_OF_MS)))
    assert result["ledgersRewritten"] == 0
    (request,) = _requests(capsys, root).values()
    assert request["state"] == "held" and "litigation 12" in request["detail"]
    assert any("globex/audit/events" in p for p in files_holding(root, KEY))
