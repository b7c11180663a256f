"""The soak harness's own arithmetic: the stretches with no housekeeping task running, the baseline of the publish
latency comparison."""

from __future__ import annotations

import pytest

from tests.soak.harness import idle_windows

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "busy,expected",
    [
        ([], [(0, 100)]),
        ([(10, 20), (30, 40)], [(0, 10), (20, 30), (40, 100)]),
        ([(30, 40), (10, 35)], [(0, 10), (40, 100)]),  # overlapping, out of order
        ([(-5, 10), (90, 120)], [(10, 90)]),  # beyond either end
        ([(0, 100)], []),
        ([(10, 10)], [(0, 10), (10, 100)]),
    ],
)
def test_idle_windows_are_what_no_busy_window_covers(busy, expected):
    assert idle_windows(busy, 0, 100) == expected
