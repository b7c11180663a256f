"""Positions ``(ledgerId, entryId)`` in Spark columns: the contract's text form ``"L:E"`` and comparable structs."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def position_text(ledger: Column, entry: Column) -> Column:
    """``"L:E"`` (the contract's position format); null when either part is null."""
    return F.concat(ledger.cast("string"), F.lit(":"), entry.cast("string"))


def position_part(text_column: str, index: int) -> Column:
    """Ledger (0) or entry (1) id of an ``"L:E"`` column."""
    return F.split(F.col(text_column), ":").getItem(index).cast("long")


def position_key(ledger: Column | str, entry: Column | str) -> Column:
    """A comparable position: structs compare field by field (ledger, then entry)."""

    def column(value: Column | str) -> Column:
        return F.col(value) if isinstance(value, str) else value

    return F.struct(
        column(ledger).cast("long").alias("ledgerId"), column(entry).cast("long").alias("entryId")
    )


# A position packed into one long, order kept: Spark hash-aggregates fixed-width buffers only, and ``max``/``max_by``
# over a struct (``position_key``) fall back to sorting every row. Exact while 0 <= entryId < 2^24 (16,777,216
# entries in a ledger) and 0 <= ledgerId < 2^39; a caller checks ``position_packs`` over the same rows and keeps a
# struct-ordered path for the rows that do not fit.
PACKED_ENTRY_BITS = 24
_ENTRY_MASK = (1 << PACKED_ENTRY_BITS) - 1
_LEDGER_LIMIT = 1 << (63 - PACKED_ENTRY_BITS)


def packed_position(ledger: Column, entry: Column) -> Column:
    return F.shiftleft(ledger.cast("long"), PACKED_ENTRY_BITS).bitwiseOR(entry.cast("long"))


def position_packs(ledger: Column, entry: Column) -> Column:
    """Whether :func:`packed_position` of this position is exact."""
    return (ledger >= 0) & (ledger < _LEDGER_LIMIT) & (entry >= 0) & (entry <= _ENTRY_MASK)


def unpacked_ledger(packed: Column) -> Column:
    return F.shiftright(packed, PACKED_ENTRY_BITS)


def unpacked_entry(packed: Column) -> Column:
    return packed.bitwiseAND(F.lit(_ENTRY_MASK))


# The same packing on Arrow arrays, for work a task does on one topic's entries in Arrow.
def arrow_packed_position(ledger, entry):
    """:func:`packed_position` of Arrow int64 arrays."""
    import pyarrow.compute as pc

    return pc.bit_wise_or(pc.shift_left(ledger, PACKED_ENTRY_BITS), entry)


def arrow_position_packs(ledger, entry):
    """:func:`position_packs` of Arrow int64 arrays."""
    import pyarrow.compute as pc

    return pc.and_(
        pc.and_(pc.greater_equal(ledger, 0), pc.less(ledger, _LEDGER_LIMIT)),
        pc.and_(pc.greater_equal(entry, 0), pc.less_equal(entry, _ENTRY_MASK)),
    )
