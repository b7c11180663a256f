"""What the console's pages show a person: a report's Markdown as HTML (its raw HTML escaped, never run) and the
plans' durations in seconds with their days and hours beside them (the plan's own words unchanged)."""

from __future__ import annotations

import pytest

from housekeeping.console.pages import human_seconds, markdown_html

pytestmark = pytest.mark.unit


def test_a_duration_in_seconds_is_followed_by_its_days_and_hours():
    assert human_seconds("closed 3074513 s before as-of > retention time 86400 s") == (
        "closed 3074513 s (35d 14h) before as-of > retention time 86400 s (1d)"
    )
    # Under ten seconds, a word that merely ends in s, and a number without its unit stay as written.
    assert human_seconds("5 s, 120 ss, ledgers 86400") == "5 s, 120 ss, ledgers 86400"


def test_a_report_is_html_with_its_tables_and_what_it_quotes_is_text():
    page = str(
        markdown_html("# Trim\n\n| topic | why |\n|---|---|\n| `t` | <img src=x onerror=alert(1)> |\n")
    )
    assert (
        "<h3>Trim</h3>" in page and "<table>" in page
    )  # under the page's own headings and "<code>t</code>" in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
