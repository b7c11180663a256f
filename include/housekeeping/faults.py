"""Fault points: named step boundaries where a test can have the process killed (SIGKILL, no clean-up, as a
crash or an OOM kill would), to prove that a rerun converges. Inert unless HOUSEKEEPING_FAULT_POINT names the
point; never set it in a deployment."""

from __future__ import annotations

import os
import signal

FAULT_POINT_ENV = "HOUSEKEEPING_FAULT_POINT"


def checkpoint(name: str) -> None:
    if os.environ.get(FAULT_POINT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
