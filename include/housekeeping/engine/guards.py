"""Guards on what a run was asked, the only place a run compares anything with the wall clock.

The decision rules never read the clock: "now" is the run's as-of (docs/semantics.md §11). These guards decide
whether a run may act at all, from facts about the request, and refuse or downgrade it before anything changes:

- **A future as-of does not delete.** A run that would apply or purge with an as-of later than the wall clock (beyond
  ``HOUSEKEEPING_CLOCK_SKEW_SECONDS``) is refused: a purge "as of next month" would take every pending deletion's
  undo window at once. Dry runs, plans and what-ifs may look ahead.
- **A scheduled run that starts late previews.** Airflow creates a DAG's latest scheduled run at once when the DAG
  is unpaused, for a slot already past; a run that starts more than ``HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS``
  after its slot was not asked for at its time (an unpause, a scheduler that was down, a previous run that overran),
  so it plans, checks and reports as a dry run; the next slot applies. Manual runs and backfills are what they say.
- **Only a run started to apply applies.** The run's intent is recorded at its snapshot; apply refuses a dry run's,
  a preview's, a plan's or a what-if's run directory.
"""

from __future__ import annotations

import time

from housekeeping.core.errors import InputError
from housekeeping.core.settings import Setting
from housekeeping.core.timeutil import format_ms
from housekeeping.engine.documents import RunInfo

CLOCK_SKEW = Setting(
    "HOUSEKEEPING_CLOCK_SKEW_SECONDS",
    int,
    300,
    minimum=0,
    help="how far past the wall clock an applying run's as-of may be (clock skew between machines)",
)
SCHEDULED_START_TOLERANCE = Setting(
    "HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS",
    int,
    120,
    minimum=0,
    help="a scheduled run starting later than this after its slot previews (a dry run) instead of applying",
)
GUARD_SETTINGS = (CLOCK_SKEW, SCHEDULED_START_TOLERANCE)


def refuse_future_as_of(as_of_ms: int, now_ms: int, skew_seconds: int, *, param: str = "as_of") -> None:
    """Refuse (bad input, nothing changed) an applying or purging run whose as-of is later than ``now_ms`` by more
    than ``skew_seconds``."""
    if as_of_ms > now_ms + skew_seconds * 1000:
        raise InputError(
            f"{param} {format_ms(as_of_ms)} is later than the clock ({format_ms(now_ms)}, {skew_seconds} s of skew "
            "allowed): a run that applies or purges must not act on the future (it would end the undo window of "
            "every pending deletion due before it); use a dry run, a plan or a what-if to look ahead"
        )


def refuse_acting_in_the_future(as_of_ms: int, *, param: str = "as_of") -> None:
    """:func:`refuse_future_as_of` against this machine's clock and ``HOUSEKEEPING_CLOCK_SKEW_SECONDS``: what an
    applying or purging command or task calls before it changes anything."""
    refuse_future_as_of(as_of_ms, int(time.time() * 1000), int(CLOCK_SKEW.read()), param=param)


def refuse_applying(info: RunInfo, run_dir: object) -> None:
    """Only a run started to apply may change the store: a dry run's, a preview's, a plan's or a what-if's run
    directory handed to apply (a retried or misrouted task, a hand-run command) is refused naming it."""
    if info.applies:
        return
    why = f" ({info.preview_reason})" if info.preview_reason else ""
    raise InputError(
        f"run {run_dir} was started as a {info.intent} run{why}: it applies nothing; trigger a run without "
        "dry run to apply"
    )


def late_scheduled_start(slot_ms: int, started_ms: int, tolerance_seconds: int) -> str | None:
    """Why a scheduled run whose slot is ``slot_ms`` and which started at ``started_ms`` previews instead of
    applying, or None when it started on time."""
    late_ms = started_ms - slot_ms
    if late_ms <= tolerance_seconds * 1000:
        return None
    return (
        f"this scheduled run started {late_ms // 1000} s after its slot {format_ms(slot_ms)} (more than "
        f"{SCHEDULED_START_TOLERANCE.env}={tolerance_seconds}): the run Airflow creates when a DAG is unpaused, or "
        "one held back by an outage or a long previous run. It plans, checks and reports as a dry run; the next "
        "scheduled run applies"
    )
