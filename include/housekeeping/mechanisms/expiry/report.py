"""Message expiry's report: the cursor mechanisms' shared report (``housekeeping.mechanisms.shared.cursor_report``)
over its subscriptions table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.mechanisms.expiry.tables import EXPIRY_SUBSCRIPTIONS
from housekeeping.mechanisms.shared.cursor_report import cursor_report


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    return cursor_report(run_dir, EXPIRY_SUBSCRIPTIONS, dry_run=dry_run)
