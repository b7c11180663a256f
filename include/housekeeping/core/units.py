"""pulsar-admin's relative times and sizes (``30m``, ``7d``; ``500M``, ``5G``; ``-1`` infinite), read the same way
by the policy what-if's sweep and the capacity commands; ``what`` names the value in an error."""

from __future__ import annotations

import re

from housekeeping.core.errors import InputError

TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
SIZE_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_seconds(text: str, what: str = "value") -> int:
    """A pulsar-admin relative time (``90``, ``30m``, ``6h``, ``7d``, ``2w``, ``1y``; ``-1`` infinite) in seconds."""
    match = re.fullmatch(r"(-1|\d+)([smhdwy]?)", text.strip().lower())
    if not match:
        raise InputError(f"{what} {text!r} is not a time: a number with s, m, h, d, w or y, or -1")
    number, unit = int(match.group(1)), match.group(2)
    if number < 0:
        return -1
    return number * TIME_UNITS[unit or "s"]


def parse_bytes(text: str, what: str = "value") -> int:
    """A pulsar-admin size (``4096``, ``500M``, ``5G``, ``1T``; ``-1`` infinite) in bytes."""
    match = re.fullmatch(r"(-1|\d+)([kmgt]?)", text.strip().lower())
    if not match:
        raise InputError(f"{what} {text!r} is not a size: a number with k, M, G or T, or -1")
    number, unit = int(match.group(1)), match.group(2)
    if number < 0:
        return -1
    return number * (SIZE_UNITS[unit] if unit else 1)
