"""The one skeleton of every gate decided topic by topic, as :mod:`spark_apps.shared.plan_app` is the plan's: a gate is
a :class:`TopicPassGate` declaration (the snapshot tables it reads, its check frames, its per-topic check, what each
frame must meet, and what the driver adds up across buckets); the skeleton does the rest the same way for all. One
Spark job (:func:`spark_apps.shared.topic_pass.check_pass`) routes the plan's rows to their topic's bucket and runs
the per-topic check over the bucket's snapshot rows, reading entries in the task where the check needs them; the
pass adds the hold checks; the driver gets the frames each bucket could fail, Great Expectations validates them.

A gate module binds ``checks`` (what ``spark_apps.validate_plan`` calls) to its declaration:
``GATE = TopicPassGate(...)`` and ``checks = GATE.checks``. A gate that does not decide topic by topic (key erasure,
compaction, the store scrub) writes its own ``checks`` with the same signature."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import Table
from housekeeping.engine.documents import RunInfo, read_run_info
from housekeeping.engine.gate import CheckFrame, Expectation, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.cursor_rule import EntryReader
from spark_apps.shared.holds import HOLD_CHECKS
from spark_apps.shared.io import LedgerFiles, TopicEntryReads
from spark_apps.shared.move_checks import SUMMARY_CHECKS, summary_rows
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import (
    BucketPlan,
    BucketRows,
    CheckedFrames,
    by_topic,
    check_pass,
    pandas_frame,
)


def no_entries(ledger_id: int, payload_bytes: int) -> list[dict]:
    """The entry reader of a topic only the plan names (nothing of it is in the snapshot to read)."""
    return []


@dataclass(frozen=True)
class GateTopic:
    """One topic as a gate's per-topic check reads it: its snapshot row (None: only the plan names it), its snapshot
    rows of each table the gate reads, the plan's actions and rows of each routed table naming it, and (for a gate
    that reads entries) its entries, each ledger read once when a check first asks."""

    name: str | None
    row: Row | None
    rows: Mapping[str, list[Row]]
    actions: list[Row]
    routed: Mapping[str, list[Row]]
    entries: EntryReader = no_entries


# A gate's per-topic check: the topic, the run's facts -> its rows of each check frame.
TopicCheck = Callable[[GateTopic, RunInfo], Mapping[str, list[Row]]]
# What the driver adds from the frames every bucket sent (figures that span buckets, the summary reconciled):
# (the frames, the run, its facts) -> further check frames.
DriverChecks = Callable[[CheckedFrames, RunDir, RunInfo], list[CheckFrame]]


def moves_reconcile_with_summary(frames: CheckedFrames, run: RunDir, info: RunInfo) -> list[CheckFrame]:
    """The plan summary's ``cursorsToMove`` is the number of cursor moves the buckets checked."""
    summary = summary_rows(read_summary(run.path), frames.rows["cursor_moves"])
    return [CheckFrame("summary", pandas_frame(SUMMARY_CHECKS, summary), must_be_true("summary_reconciles"))]


def namespace_frame(frame: Table, rows: list[Row], share_column: str, max_share: float) -> CheckFrame:
    """A deleting gate's namespace frame: every namespace the plan deletes in is in the snapshot, its deletions
    reconcile with the summary, and its share deleted stays within the blast radius."""
    return CheckFrame(
        frame.name,
        pandas_frame(frame, rows),
        [
            *must_be_true("namespace_in_snapshot", "summary_reconciles"),
            expect("ExpectColumnValuesToBeBetween", column=share_column, min_value=0.0, max_value=max_share),
        ],
    )


@dataclass(frozen=True)
class TopicPassGate:
    """A gate decided topic by topic (see the module docstring).

    ``reads``: the snapshot tables (beyond topics) each topic's check reads. ``frames``: the check frames it returns
    rows of. ``expectations``: what each validated frame must meet, given the mechanism (its action kinds); a frame
    without any comes whole to the driver, for ``driver`` to add up. ``every_topic``: visit every snapshot topic of a
    bucket, not only the topics the plan names (a check that something due was planned needs all of them).
    ``routed``: other plan tables read beside the actions (a ``topic`` column each). ``reads_entries``: the check
    reads entries (``GateTopic.entries``)."""

    reads: Sequence[str]
    frames: Sequence[Table]
    check: TopicCheck
    expectations: Callable[[Mechanism], dict[str, list[Expectation]]]
    every_topic: bool = False
    routed: Sequence[Table] = ()
    reads_entries: bool = False
    driver: DriverChecks | None = None

    def check_bucket(
        self, bucket: int, plan: BucketPlan, run_dir: str, info: RunInfo
    ) -> dict[str, list[Row]]:
        """Every check frame's rows of one bucket: each topic the plan's rows of the bucket name (and, with
        ``every_topic``, each topic of the bucket's snapshot)."""
        snapshot = BucketRows.read(run_dir, info, self.reads, bucket)
        actions = by_topic(plan.actions)
        routed = {table.name: by_topic(plan.tables[table.name]) for table in self.routed}
        files = LedgerFiles.of(info) if self.reads_entries else None
        named = [*actions, *(topic for rows in routed.values() for topic in rows)]
        topics = dict.fromkeys([*snapshot.topics, *named] if self.every_topic else named)
        frames: dict[str, list[Row]] = {frame.name: [] for frame in self.frames}
        for topic in topics:
            checked = self.check(
                GateTopic(
                    topic,
                    snapshot.topics.get(topic) if topic is not None else None,
                    {name: snapshot.of(name, topic) for name in self.reads},
                    actions.get(topic, []),
                    {name: rows.get(topic, []) for name, rows in routed.items()},
                    TopicEntryReads(files, topic) if files is not None and topic is not None else no_entries,
                ),
                info,
            )
            for name, rows in checked.items():
                frames[name].extend(rows)
        return frames

    def checks(self, spark: Any, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
        """The gate's check frames in the order Great Expectations validates them: each validated frame of the
        pass, then the driver's, then the hold checks."""
        run = RunDir(run_dir)
        info = read_run_info(run)
        expectations = self.expectations(spec)
        frames = check_pass(
            spark, run.path, info, checker=self.check_bucket, frames=self.frames,
            expectations=expectations, routed=self.routed,
        )  # fmt: skip
        validated = [frames.check(frame.name) for frame in self.frames if frame.name in expectations]
        further = self.driver(frames, run, info) if self.driver is not None else []
        return [*validated, *further, frames.check(HOLD_CHECKS.name)]
