"""Fault points: named step boundaries where a test can have the process killed (SIGKILL, no clean-up, as a
crash or an OOM kill would), to prove that a rerun converges. Inert unless HOUSEKEEPING_FAULT_POINT names the
point (``name``: the first time it is reached; ``name@N``: the N-th time in this process); never set it in a
deployment. tests/e2e/test_fault_injection.py kills the process at every point listed here."""

from __future__ import annotations

import os
import signal
from collections import Counter

FAULT_POINT_ENV = "HOUSEKEEPING_FAULT_POINT"

FAULT_POINTS = (
    "snapshot_after_write",  # snapshot files written, nothing planned
    "plan_after_write",  # plan written, not validated
    "apply_inside_topic_transaction",  # a topic's metadata changes made, not committed
    "apply_after_topic_commit",  # a topic's metadata (and its pending-deletion records) committed
    "purge_after_file_removed",  # a ledger's files gone, its pending deletion not yet marked purged
    "purge_between_files",  # one ledger purged and recorded, the next not started
    "compaction_apply_after_stage",
    "compaction_apply_after_spark_write",  # the new compacted ledger written under the run dir
    "compaction_apply_between_ledger_renames",
    "compaction_apply_before_switch",
    "compaction_apply_after_switch",
    "erasure_apply_after_stage",  # a topic's new generations recorded, not yet installed
    "erasure_apply_after_install",  # a redacted ledger renamed into place, its topic not switched
    "erasure_apply_inside_topic_transaction",  # a topic's switch made, not committed
    "erasure_apply_after_topic_commit",  # a topic switched and journaled, the next not started
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
