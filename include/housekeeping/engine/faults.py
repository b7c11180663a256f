"""Fault points: named step boundaries where a test can have the process killed (SIGKILL, no clean-up, as a
crash or an OOM kill would), to prove that a rerun converges. Inert unless HOUSEKEEPING_FAULT_POINT names the
point (``name``: the first time it is reached; ``name@N``: the N-th time in this process); never set it in a
deployment. The engine's points are listed here, a mechanism's own in its package (``Mechanism.fault_points``);
tests/e2e/test_fault_injection.py kills the process at every one (``housekeeping.mechanisms.registry.fault_points``)."""

from __future__ import annotations

import os
import signal
from collections import Counter

FAULT_POINT_ENV = "HOUSEKEEPING_FAULT_POINT"

FAULT_POINTS = (
    "snapshot_after_write",  # snapshot files written, nothing planned
    "plan_after_write",  # plan written, not validated
    "apply_inside_topic_transaction",  # a topic's metadata changes made, not committed
    # a batch of topics' metadata (and their pending-deletion records) committed, the next batch not started
    "apply_after_topic_commit",
    "purge_after_file_removed",  # a ledger's files gone, its pending deletion not yet marked purged
    "purge_after_object_removed",  # a pending deletion's tier object gone, not yet marked purged
    "purge_between_files",  # one ledger purged and recorded, the next not started
)

_reached: Counter[str] = Counter()


def checkpoint(name: str) -> None:
    wanted = os.environ.get(FAULT_POINT_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition("@")
    if point != name:
        return
    _reached[name] += 1
    if _reached[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
