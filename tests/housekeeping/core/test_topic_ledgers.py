"""A topic's ledger list with Pulsar's position arithmetic (``housekeeping.core.topic_ledgers``): the last confirmed
entry and the mark-delete a cursor accepts (``ManagedCursorImpl#asyncMarkDelete``). The estimate and the backlog are
tested with the backlog rules that read them (tests/backlog/test_plan.py)."""

from __future__ import annotations

import pytest

from housekeeping.core.topic_ledgers import Ledger, TopicLedgers

pytestmark = pytest.mark.unit


def rolled() -> TopicLedgers:
    """Ledgers 1 and 2 of 5 entries, closed; 3 the current ledger, empty after a roll."""
    return TopicLedgers([Ledger(1, 5, 50, 1), Ledger(2, 5, 50, 2), Ledger(3, 0, 0, None)])


def test_the_last_entry_is_the_newest_written_one():
    assert rolled().last_entry() == (2, 4)
    assert TopicLedgers([Ledger(1, 0, 0, None)]).last_entry() is None


def test_a_mark_delete_past_the_last_entry_is_refused_unless_the_cursor_consumed_its_ledger():
    ledgers = rolled()
    assert ledgers.accepts_mark_delete((1, -1), (2, -1))
    assert ledgers.accepts_mark_delete((1, 3), (2, 4))
    # past the last entry (2:4): refused from inside ledger 2 ...
    assert not ledgers.accepts_mark_delete((2, -1), (3, -1))
    assert not ledgers.accepts_mark_delete((2, 3), (3, -1))
    # ... accepted once every entry of ledger 2 is consumed, onto the ledger right after it only
    assert ledgers.accepts_mark_delete((2, 4), (3, -1))
    assert not ledgers.accepts_mark_delete((2, 4), (4, -1))
    # a mark-delete in a ledger no longer listed has no entry count to compare: refused past the end
    assert not ledgers.accepts_mark_delete((0, 7), (3, -1))
    assert not TopicLedgers([Ledger(1, 0, 0, None)]).accepts_mark_delete((1, -1), (1, -1))
