"""The store scrub's setting and run option: the minimum age of an orphan candidate."""

from __future__ import annotations

from housekeeping.core.settings import Setting
from housekeeping.engine.mechanism import RunOption

# Iceberg's default for orphan-file removal (3 days): a writer's or a run's files in flight are never candidates.
MIN_AGE = Setting(
    "HOUSEKEEPING_SCRUB_MIN_AGE_SECONDS",
    int,
    3 * 24 * 3600,
    minimum=0,
    help="store scrub: an unreferenced item is an orphan only once this old (physical modification time)",
)
MIN_AGE_OPTION = RunOption(
    name="scrub_min_age_seconds",
    flag="--min-age-seconds",
    run_info_key="scrubMinAgeSeconds",
    help="scrub: minimum age of an orphan candidate in seconds (default HOUSEKEEPING_SCRUB_MIN_AGE_SECONDS)",
    param={
        "type": ["null", "integer"],
        "minimum": 0,
        "title": "Minimum age of an orphan (seconds)",
        "description": "An unreferenced item younger than this is a file in flight, never a candidate "
        "(empty = HOUSEKEEPING_SCRUB_MIN_AGE_SECONDS, default 259200: 3 days).",
    },
    value_type=int,
    setting=MIN_AGE,
)
