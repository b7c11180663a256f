"""pulsar-admin's time and size forms (``housekeeping.core.admin_units``)."""

from __future__ import annotations

import pytest

from housekeeping.core.admin_units import parse_bytes, parse_seconds
from housekeeping.core.errors import InputError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("120", 120), ("10m", 600), ("3h", 10_800), ("2d", 172_800), ("5w", 3_024_000), ("1y", 31_536_000),
     ("0", 0), ("-1", -1), ("2H", 7_200)],
)  # fmt: skip
def test_times(text, seconds):
    assert parse_seconds(text, "--time") == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("10K", 10_240),
        ("10M", 10_485_760),
        ("16G", 17_179_869_184),
        ("3t", 3 << 40),
        ("-1", -1),
    ],
)
def test_sizes(text, size):
    assert parse_bytes(text, "--size") == size


@pytest.mark.parametrize("text", ["", "m", "1.5h", "3x", "-2", "-1h", "10MB", "ten"])
def test_anything_else_is_refused_naming_the_option(text):
    with pytest.raises(InputError, match="--time"):
        parse_seconds(text, "--time")
