"""The trigger forms' schema refuses what the run would refuse: an as-of the form accepts is one ``parse_as_of``
reads, and one without a timezone is refused by both."""

from __future__ import annotations

import re

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import parse_as_of
from housekeeping.orchestration.params import AS_OF_PATTERN

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "text",
    ["2026-11-02T00:00:00Z", "2026-11-02T00:00Z", "2026-11-02 06:30:00+01:00", "2026-11-02T00:00:00.25Z"],
)
def test_an_as_of_the_form_accepts_is_one_the_run_reads(text):
    assert re.match(AS_OF_PATTERN, text)
    parse_as_of(text)


@pytest.mark.parametrize("text", ["2026-11-02T00:00:00", "yesterday", "2026-11-02", "12"])
def test_an_as_of_the_run_refuses_is_refused_by_the_form(text):
    assert not re.match(AS_OF_PATTERN, text)
    with pytest.raises(InputError):
        parse_as_of(text)
