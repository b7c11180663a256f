"""The value forms ``pulsar-admin`` takes for times and sizes (``RelativeTimeUtil``, ``validateSizeString``), parsed
for the ``housekeeping topics|namespaces|topic-policies`` commands: ``120`` (seconds or bytes), ``10m``, ``3h``,
``2d``, ``5w``, ``1y``; ``4096``, ``10K``, ``10M``, ``16G``, ``3T`` (powers of 1024); ``-1`` (infinite) as is."""

from __future__ import annotations

import re

from housekeeping.core.errors import InputError

_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
_BYTES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_NUMBER = re.compile(r"^(-?\d+)([a-zA-Z]?)$")


def _parse(text: str, units: dict[str, int], what: str, forms: str) -> int:
    match = _NUMBER.match(str(text).strip())
    if match is None or (match.group(2) and match.group(2).lower() not in units):
        raise InputError(f"{what}: {text!r} is not a value like {forms}")
    value, unit = int(match.group(1)), match.group(2).lower()
    if value < -1:
        raise InputError(f"{what}: {text!r} is invalid: -1 (infinite) is the only negative value")
    if value == -1:
        if unit:
            raise InputError(f"{what}: {text!r} is invalid: -1 (infinite) takes no unit")
        return -1
    return value * (units[unit] if unit else 1)


def parse_seconds(text: str, what: str) -> int:
    """A duration in seconds: ``120``, ``10m``, ``3h``, ``2d``, ``5w``, ``1y``; ``-1`` stays -1."""
    return _parse(text, _SECONDS, what, "120, 10m, 3h, 2d, 5w or -1")


def parse_bytes(text: str, what: str) -> int:
    """A size in bytes: ``4096``, ``10K``, ``10M``, ``16G``, ``3T``; ``-1`` stays -1."""
    return _parse(text, _BYTES, what, "4096, 10K, 10M, 16G, 3T or -1")
