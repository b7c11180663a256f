"""Positions ``(ledgerId, entryId)`` in Spark columns: the contract's text form ``"L:E"`` and comparable structs."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def position_text(ledger: Column, entry: Column) -> Column:
    """``"L:E"`` (the contract's position format); null when either part is null."""
    return F.concat(ledger.cast("string"), F.lit(":"), entry.cast("string"))


def position_key(ledger: Column | str, entry: Column | str) -> Column:
    """A comparable position: structs compare field by field (ledger, then entry)."""

    def column(value: Column | str) -> Column:
        return F.col(value) if isinstance(value, str) else value

    return F.struct(
        column(ledger).cast("long").alias("ledgerId"), column(entry).cast("long").alias("entryId")
    )
