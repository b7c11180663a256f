"""The trigger forms' schema refuses what the run would refuse: an as-of the form accepts is one ``parse_as_of``
reads, and one without a timezone is refused by both; a scope the form accepts is one ``parse_scope`` reads, and a
path, a topic without its scheme or a stray character is refused by both."""

from __future__ import annotations

import re

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.scope import SCOPE_PATTERN, parse_scope
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


@pytest.mark.parametrize(
    "text",
    [
        "",
        "*",
        "acme",
        "acme/orders",
        "acme/*, public",
        "persistent://acme/orders/*",
        "persistent://acme/*",
        "persistent://acme/orders/t-partition-[0-3]",
        "pulsar/broker-1:8080",
        "a.b/c=d",
    ],
)
def test_a_scope_the_form_accepts_is_one_the_run_reads(text):
    assert re.match(SCOPE_PATTERN, text)
    parse_scope(text)


@pytest.mark.parametrize(
    "text",
    [
        "../../etc",
        "acme/..",
        "./acme",
        "acme/orders/topic",  # a topic needs its persistent:// scheme
        "persistent://a/b/c/d",
        "non-persistent://acme/orders/t",
        "acme orders",
        "acme;rm",
        "acme,,/x",
        "/etc/passwd",
        "acme/orders\nother",
    ],
)
def test_a_scope_the_run_refuses_is_refused_by_the_form(text):
    assert not re.match(SCOPE_PATTERN, text)
    with pytest.raises(InputError, match="scope item"):
        parse_scope(text)
