"""``python -m housekeeping.cli``: the same command as the installed ``housekeeping``."""

from __future__ import annotations

import sys

from housekeeping.cli.main import command

sys.exit(command())
