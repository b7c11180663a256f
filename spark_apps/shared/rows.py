"""Plain-Python helpers of the per-topic rules (``spark_apps.shared.topic_pass``): the contract's text forms,
written exactly as the Spark SQL expressions the gates and older runs use would write them, so a plan decided topic
by topic reads as one decided by Spark. No pyspark: the unit tests call the rules without a session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

Row = dict[str, Any]

HELD_KIND = "held"


def text(value: Any) -> str:
    """A value as Spark's ``format_string`` (Java's ``String.format``) writes it: ``null`` for a null."""
    return "null" if value is None else str(value)


def whole(value: float | None) -> int | None:
    """Spark's cast of a double to bigint: toward zero; null stays null."""
    return None if value is None else int(value)


def position_text(ledger: int | None, entry: int | None) -> str | None:
    """``"L:E"`` (the contract's position format); None when either part is None."""
    return None if ledger is None or entry is None else f"{ledger}:{entry}"


def utc_second(epoch_ms: int) -> str:
    """``yyyy-MM-dd'T'HH:mm:ss'Z'`` of an epoch-millisecond time (the session's time zone is UTC)."""
    return datetime.fromtimestamp(epoch_ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_millis(epoch_ms: int) -> str:
    """``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` of an epoch-millisecond time (the session's time zone is UTC)."""
    t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=epoch_ms)
    return f"{t.year:04d}-{t:%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z"


def java_fixed(value: float, digits: int) -> str:
    """``value`` as Java's ``String.format("%.<digits>f")`` writes it: its shortest decimal form rounded half up
    (Python's own format rounds the binary value half to even: 0.25 -> "0.2", Java's "0.3")."""
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def join_present(separator: str, *parts: str | None) -> str:
    """Spark's ``concat_ws``: the parts that are not null, joined."""
    return separator.join(p for p in parts if p is not None)


def keep_held(row: Row, held_by: str | None, *, decision: str, keep: str) -> Row:
    """``row`` kept when its topic is held (``spark_apps.shared.holds.keep_held``'s rule, for one row): decision
    ``keep``, kind ``held``, the reason naming the hold and what the rules alone would have done."""
    if held_by is None or row[decision] == keep:
        return row
    reason = row.get("reason")
    return {
        **row,
        decision: keep,
        "kind": HELD_KIND,
        "reason": None if reason is None else f"{held_by}; without the hold: {row[decision]}: {reason}",
    }


def json_lines(rows: list[Row]) -> bytes:
    """Rows as Spark's JSON writer writes them, one per line, null columns left out (the columns in the order the
    rule built each row: a contract table's order)."""
    import orjson

    return b"".join(orjson.dumps({k: v for k, v in row.items() if v is not None}) + b"\n" for row in rows)


def struct_key(*fields: Any) -> tuple:
    """A struct's ordering (Spark sorts a null field first): comparable with another of the same fields."""
    return tuple((0, 0) if f is None else (1, f) for f in fields)
