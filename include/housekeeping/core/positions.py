"""Positions ``ledgerId:entryId``, as Pulsar writes them (a cursor's mark-delete, a compaction horizon)."""

from __future__ import annotations

from housekeeping.core.errors import InputError


def parse_position(text: str, where: str) -> tuple[int, int]:
    """``"12:3"`` -> (12, 3); anything else is bad input naming ``where``."""
    ledger, sep, entry = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        return int(ledger), int(entry)
    except ValueError:
        raise InputError(f"{where}: position {text!r} must have the form ledgerId:entryId") from None


def format_position(position: tuple[int, int]) -> str:
    return f"{position[0]}:{position[1]}"
