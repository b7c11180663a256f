"""The one apply engine: only a checked plan changes the store, metadata first, each topic's change atomic.

:class:`ApplyRun` is the preamble every apply shares (the shared Python apply here, compaction's Spark apply, key
erasure's): the gate passed this plan byte for byte (digest), the run was planned on this store, the plan holds only
its mechanism's action kinds, the run is journaled as started once and the topics it already applied are known (a
retry skips them), and :meth:`ApplyRun.commit` runs one topic's change in one metadata transaction that first
re-reads the holds (a hold added after the snapshot wins) and journals the outcome.

The shared Python apply (:func:`apply_plan`) executes each planned row by its kind
(``ActionKind.apply_in_topic``, ``housekeeping.engine.actions``), per topic: when a kind changes the topic's ledger
list, the topic version recorded in the snapshot is compare-and-set first (a topic changed since is skipped and
reported, never overwritten); a kind may first check the topic (``ActionKind.check_topic``: inactive-topic GC's
re-check). Kinds applied after every topic (``after_topics``) get a transaction each. No file is touched: a deleted
ledger goes to the pending-deletion log with its purge time (``record_pending_deletion``) and purge
(``housekeeping.engine.purge``) removes its files after the grace period.

Pulsar updates the ledger list and then deletes BookKeeper ledgers asynchronously; a crash between leaves
orphans (PIP-186). Here the ledger-list change and the pending-deletion record commit together, so there is no
state in which a file is unknown to the metadata.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, update

from housekeeping.core.actor import current_actor
from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.core.settings import Setting
from housekeeping.engine.actions import PlansActions, TopicTally
from housekeeping.engine.contract import ACTIONS, CURSORS, TOPICS, topic_bucket
from housekeeping.engine.documents import AppliedRun, GateResult, RunInfo, read_run_info, write_document
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.gate import require_passed_gate
from housekeeping.engine.guards import refuse_applying
from housekeeping.engine.live import (
    CursorState,
    Narrowed,
    PoliciesNow,
    TopicNow,
    TopicThen,
    read_topics_now,
    topic_replaced,
)
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir, iter_jsonl
from housekeeping.engine.snapshot_reads import BucketedSnapshot, SnapshotTopicLookup, snapshot_has_column
from housekeeping.store import metadata_schema as t
from housekeeping.store.cursor_history import record_cursors
from housekeeping.store.holds import Hold, current_hold, hold_for, holds_for_this_transaction
from housekeeping.store.holds import describe as describe_hold
from housekeeping.store.journal import begin_run, finish_run, journal_row, journal_rows, plan_rows
from housekeeping.store.store import Store, write_transaction

log = logging.getLogger(__name__)

# Topics per metadata transaction in the shared apply: large enough that commits stop dominating, small enough that a
# batch holds the database's write lock briefly (a writer waits HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS at most).
APPLY_BATCH_TOPICS = Setting(
    "HOUSEKEEPING_APPLY_BATCH_TOPICS",
    int,
    500,
    minimum=1,
    help="shared apply: topics committed per metadata transaction (each topic still compare-and-set on its own)",
)


@dataclass
class TopicOutcome:
    """What one topic's transaction did: ``status`` applied, skipped_conflict or skipped_held, ``why`` when
    skipped, the journal row's ``action`` and ``detail`` (not journaled when ``journaled`` is false: a step that
    only prepares, as compaction's staging), and ``facts`` the caller adds up."""

    status: str
    why: str | None = None
    action: str = "apply"
    detail: dict[str, Any] = field(default_factory=dict)
    facts: Any = None
    journaled: bool = True

    @property
    def applied(self) -> bool:
        return self.status == "applied"


@dataclass
class ApplyRun:
    """One apply of a gate-checked plan (see the module docstring)."""

    store: Store
    run: RunDir
    info: RunInfo
    spec: PlansActions
    run_id: str
    purge_grace_seconds: int
    actor: str
    done: set[str] = field(default_factory=set)
    # The writes a batch's topics left to the end of its transaction (:meth:`at_batch_end`), by flush function;
    # None outside a batch.
    _batch_end: dict[Callable[..., None], list[Any]] | None = field(default=None, repr=False)

    @classmethod
    def open(
        cls,
        store: Store,
        run_dir: str | Path,
        spec: PlansActions,
        *,
        purge_grace_seconds: int,
        detail: dict[str, Any] | None = None,
        actions: list[dict[str, Any]] | None = None,
        kinds_checked: bool = False,
        gate: GateResult | None = None,
    ) -> ApplyRun:
        """``actions``: the plan's actions table when the caller has read it already (read once: at 100,000
        topics a trim plan's rows are a few hundred MiB of Python objects); ``kinds_checked``: instead, the caller
        reads the table a part at a time and checked every row's kind (and gives ``detail``); ``gate``: the verdict
        the caller checked already (:func:`require_passed_gate`)."""
        if purge_grace_seconds < 0:
            raise InputError(f"purge grace period {purge_grace_seconds} s must be >= 0")
        run = RunDir(run_dir)
        gate = gate if gate is not None else require_passed_gate(run.path)
        info = read_run_info(run)
        refuse_applying(info, run)
        if Path(info.store).resolve() != store.root:
            raise InputError(f"run {run} was planned on store {info.store}, not on {store.root}")
        if info.mechanism != spec.name:
            raise InputError(f"run {run} is a {info.mechanism} run, not a {spec.name} one")
        # Journal key = run + the validated plan's digest: a retried apply of the same plan is a no-op, while a
        # re-snapshotted (different) plan of the same Airflow run is applied on its own merits.
        run_id = f"{info.run_id}@{str(gate.plan_digest)[:16]}"
        actor = str(info.actor or current_actor())
        applying = cls(store, run, info, spec, run_id, purge_grace_seconds, actor)
        if not kinds_checked:
            if actions is not None:
                applying.__dict__["actions"] = actions  # the cached property, already read
            for action in applying.actions:
                spec.action(action["action"], where=f"plan in {run}")
        applying.done = begin_run(
            store,
            run_id=run_id,
            mechanism=spec.name,
            as_of_ms=applying.as_of_ms,
            actor=actor,
            detail=detail if detail is not None else {"actions": len(applying.actions)},
        )
        return applying

    @classmethod
    def open_by_topic(
        cls, store: Store, run_dir: str | Path, spec: PlansActions, *, purge_grace_seconds: int
    ) -> tuple[ApplyRun, dict[str, list[dict[str, Any]]]]:
        """Open the run of a mechanism whose own apply goes topic by topic: the run, and the plan's actions by
        topic (the journal's start records how many of each)."""
        actions = read_table(RunDir(run_dir).path, ACTIONS.name)
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for action in actions:
            by_topic[action["topic"]].append(action)
        applying = cls.open(
            store,
            run_dir,
            spec,
            purge_grace_seconds=purge_grace_seconds,
            detail={"topics": len(by_topic), "actions": len(actions)},
            actions=actions,
        )
        return applying, by_topic

    @property
    def mechanism(self) -> str:
        return self.spec.name

    @property
    def as_of_ms(self) -> int:
        return int(self.info.as_of_ms)

    @property
    def purge_after_ms(self) -> int:
        return self.as_of_ms + self.purge_grace_seconds * 1000

    @cached_property
    def actions(self) -> list[dict[str, Any]]:
        return read_table(self.run.path, ACTIONS.name)

    @cached_property
    def _snapshot_topics(self) -> SnapshotTopicLookup:
        """Per topic, what the snapshot recorded of it that apply compares: its version, incarnation (absent from a
        snapshot taken before topics had one) and effective policies; read a bucket at a time as the topics are
        applied (a few columns, not the whole topics table)."""
        columns = ["version", "policies"]
        if snapshot_has_column(self.run, TOPICS, "incarnation"):
            columns.append("incarnation")
        return SnapshotTopicLookup(self.run, self.info, *columns)

    @cached_property
    def _snapshot_cursors(self) -> BucketedSnapshot:
        return BucketedSnapshot(
            self.run,
            self.info,
            CURSORS.select("topic", "name", "durable", "markDeleteLedger", "markDeleteEntry", "consumers"),
            _cursors_by_topic,
            shared=["topic"],
        )

    def then(self, topic: str) -> TopicThen | None:
        """The topic as the run's snapshot recorded it (None: the snapshot has no such topic, as the partitioned
        topic a ``delete_partitioned_metadata`` row names)."""
        found = self._snapshot_topics.get(topic)
        if found is None:
            return None
        version, document, *incarnation = found
        legacy = self.info.legacy_topic_versions
        return TopicThen(
            int(legacy[topic]) if legacy and topic in legacy else int(version),
            incarnation[0] if incarnation else None,
            document,
            lambda: self._snapshot_cursors.of(topic).get(topic, ()),
            incarnation_known=bool(incarnation),
        )

    @cached_property
    def broker(self) -> BrokerConfig:
        """The broker settings now (read once per apply; a kind's re-check reads them)."""
        return self.store.broker_config()

    @cached_property
    def policies_now(self) -> PoliciesNow:
        """The effective policies of topics now, as the snapshot resolves them (the broker's settings as this
        apply read them)."""
        return PoliciesNow(self.broker)

    def recheck(
        self, conn: Any, topic: str, actions: list[dict[str, Any]], now: TopicNow | None = None
    ) -> Narrowed:
        """The topic's planned rows as the store now allows them (``housekeeping.engine.live``), read in ``conn``'s
        transaction: none when the topic is gone or another incarnation of its name, else what the mechanism's
        re-check leaves (``Mechanism.recheck``). ``now``: the topic as the caller's batch read it; else read here."""
        then = self.then(topic)
        if then is None:
            return Narrowed.as_planned(actions)
        if now is None:
            now = read_topics_now(conn, [topic], self.policies_now, cursors=False).get(topic)
        why = topic_replaced(then, now)
        if why is not None:
            return Narrowed.nothing(why)
        assert now is not None
        return self.spec.recheck(now, then, actions, self.as_of_ms)

    def journal_row(
        self, *, topic: str | None, action: str, status: str, detail: dict[str, Any]
    ) -> dict[str, Any]:
        return journal_row(
            run_id=self.run_id,
            mechanism=self.mechanism,
            topic=topic,
            action=action,
            status=status,
            detail=detail,
            as_of_ms=self.as_of_ms,
            actor=self.actor,
        )

    def at_batch_end(self, conn: Any, flush: Callable[[Any, ApplyRun, list[Any]], None], item: Any) -> None:
        """``flush(conn, run, items)`` for ``item``: at the end of the batch's transaction, with the items the
        batch's other topics gave the same ``flush`` (one statement for the batch, not one per topic: SQLAlchemy's
        work per statement is most of a large apply's time), or at once outside a batch. ``flush`` is a module
        function (the batch groups items by it) and raises when the store is not as the plan says, which rolls the
        whole batch back."""
        if self._batch_end is None:
            flush(conn, self, [item])
        else:
            self._batch_end.setdefault(flush, []).append(item)

    @contextmanager
    def batch(self, conn: Any) -> Iterator[None]:
        """A batch of topics in ``conn``'s transaction: what they left to its end (:meth:`at_batch_end`) is
        written when the block ends without error."""
        self._batch_end = {}
        try:
            yield
            for flush, items in self._batch_end.items():
                flush(conn, self, items)
        finally:
            self._batch_end = None

    def commit(
        self,
        topic: str,
        actions: list[dict[str, Any]],
        change: Callable[[Any], TopicOutcome],
        *,
        held_action: str = "apply",
        recheck: bool = True,
    ) -> TopicOutcome:
        """One topic's change in one metadata transaction of its own (see :meth:`commit_in`). ``recheck``: first
        re-check the topic against the store as it is (:meth:`recheck`); a mechanism's own apply changes a topic
        as planned or not at all, so a re-check that narrows its rows leaves the topic alone. A step that only
        completes what a re-checked step began (offload's record of an upload) passes false."""
        with write_transaction(self.store.engine) as conn:
            if recheck:
                narrowed = self.recheck(conn, topic, actions)
                if narrowed.narrowed:
                    return self._journal_outcome(
                        conn,
                        topic,
                        TopicOutcome(
                            "skipped_conflict",
                            narrowed.why,
                            held_action,
                            {"why": narrowed.why, "planRows": plan_rows(actions)},
                        ),
                        None,
                    )
            return self.commit_in(conn, topic, actions, change, held_action=held_action)

    def commit_in(
        self,
        conn: Any,
        topic: str,
        actions: list[dict[str, Any]],
        change: Callable[[Any], TopicOutcome],
        *,
        held_action: str = "apply",
        holds: Mapping[str, Hold] | None = None,
        journaled: list[dict[str, Any]] | None = None,
    ) -> TopicOutcome:
        """One topic's change inside the caller's transaction. When a hold forbids one of the actions' kinds, the
        holds are read again first: a hold that covers the topic now wins (``skipped_held``; the planner and the
        gate saw none). ``holds``: the holds the caller read for this transaction
        (:func:`holds_for_this_transaction`); else they are read for this topic. Otherwise ``change(conn)``
        decides; its outcome is journaled in the same transaction. A skipped topic changes nothing (its checks and
        its compare-and-set come before any write), so topics can share a transaction and a conflict still costs
        one topic, not its neighbours. ``journaled``: where to add the journal row, for the caller to write in the
        same transaction (:func:`housekeeping.store.journal.journal_rows`); else it is written here."""
        guarded = any(self.spec.action(a["action"]).held_forbidden for a in actions)
        if not guarded:
            hold = None
        elif holds is not None:
            hold = hold_for(topic, holds) if holds else None
        else:
            hold = current_hold(conn, topic)
        if hold is not None:
            why = describe_hold(hold)
            outcome = TopicOutcome(
                "skipped_held", why, held_action, {"why": why, "planRows": plan_rows(actions)}
            )
        else:
            outcome = change(conn)
        return self._journal_outcome(conn, topic, outcome, journaled)

    def _journal_outcome(
        self, conn: Any, topic: str, outcome: TopicOutcome, journaled: list[dict[str, Any]] | None
    ) -> TopicOutcome:
        if outcome.journaled:
            row = self.journal_row(
                topic=topic, action=outcome.action, status=outcome.status, detail=outcome.detail
            )
            if journaled is None:
                journal_rows(conn, [row])
            else:
                journaled.append(row)
        return outcome

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """Journal the run as finished with its result, and write ``apply/result.json``."""
        finish_run(
            self.store,
            run_id=self.run_id,
            mechanism=self.mechanism,
            as_of_ms=self.as_of_ms,
            actor=self.actor,
            detail=result,
        )
        write_document(self.run.apply_result, AppliedRun.from_json(result))
        return result


@dataclass
class ApplyResult:
    """What the shared Python apply did: the topics, the ledgers and bytes it deleted, per namespace, and the
    counts its mechanism's kinds declare (``ActionKind.result_keys``)."""

    run_id: str
    counts: dict[str, Any]
    applied_topics: list[str] = field(default_factory=list)
    already_applied_topics: list[str] = field(default_factory=list)
    skipped_topics: dict[str, str] = field(default_factory=dict)  # topic -> why
    # Applied with fewer or narrower rows than planned, the store having changed since the snapshot: topic -> why.
    narrowed_topics: dict[str, str] = field(default_factory=dict)
    ledgers_deleted: int = 0
    bytes_deleted: int = 0
    per_namespace: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, run_id: str, spec: PlansActions) -> ApplyResult:
        zero: dict[str, Any] = {}
        for kind in spec.actions:
            for key, value in kind.result_keys.items():
                zero[key] = type(value)(value)  # a fresh copy of a list or dict
        return cls(run_id, zero)

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "appliedTopics": self.applied_topics,
            "alreadyAppliedTopics": self.already_applied_topics,
            "skippedTopics": self.skipped_topics,
            "narrowedTopics": self.narrowed_topics,
            "ledgersDeleted": self.ledgers_deleted,
            "bytesDeleted": self.bytes_deleted,
            **self.counts,
            "perNamespace": self.per_namespace,
        }

    def count(self, key: str, value: Any) -> None:
        """Add a kind's count: a number adds, a list extends, a mapping updates."""
        current = self.counts.get(key)
        if isinstance(current, list):
            current.extend(value)
        elif isinstance(current, dict):
            current.update(value)
        else:
            self.counts[key] = (current or 0) + value

    def add(self, tally: TopicTally) -> None:
        self.applied_topics.append(tally.topic)
        if tally.detail.get("narrowed"):
            self.narrowed_topics[tally.topic] = str(tally.detail["narrowed"])
        self.ledgers_deleted += len(tally.ledgers_deleted)
        self.bytes_deleted += tally.bytes_deleted
        for key, value in tally.counts.items():
            self.count(key, value)
        per_ns = self.per_namespace.setdefault(tally.namespace, {"ledgers": 0, "bytes": 0, "topics": 0})
        per_ns["ledgers"] += len(tally.ledgers_deleted)
        per_ns["bytes"] += tally.bytes_deleted
        per_ns["topics"] += int(bool(tally.detail.get("topicDeleted")))


@dataclass(frozen=True)
class ActionParts:
    """The plan's actions table as its part files, read one at a time (a million topics' actions are never in
    memory at once), and what one pass over them found: how many rows and topics, the rows applied after every
    topic, whether each topic's rows are in one part (the one-pass planners write a topic's rows in its bucket's
    part; a plan whose topic spans parts is applied from the whole table, as one) and which parts list their rows in
    ascending topic order (those are applied as they are read, a topic's rows at a time)."""

    parts: list[Path]
    rows: int
    acted_on: int  # topics the rows name
    after: list[dict[str, Any]]
    after_kinds: frozenset[str]
    one_part_per_topic: bool
    in_topic_order: tuple[bool, ...]  # per part

    @classmethod
    def scan(cls, run: RunDir, spec: PlansActions, versions: TopicVersions, buckets: int) -> ActionParts:
        """Every row's kind checked and every topic found in the snapshot (``versions``) before anything is applied
        (bad input naming the plan). ``buckets``: the snapshot's (``snapshotBuckets``; 0 when not clustered): when
        no bucket's topics are in two parts, no topic is, and no set of every topic is built to know it."""
        table_dir = run.plan_table(ACTIONS)
        if not table_dir.is_dir():
            raise InputError(f"run directory {run.path} has no plan table {ACTIONS.name!r}")
        parts = sorted(table_dir.glob("part-*"))
        rows, topics, shared_bucket, after, in_order = 0, 0, not buckets, [], []
        part_of_bucket: dict[int, int] = {}
        for index, part in enumerate(parts):
            previous: str | None = None
            ordered, seen = True, set()
            for row in iter_jsonl(part):
                rows += 1
                if spec.action(row["action"], where=f"plan in {run}").after_topics:
                    after.append(row)
                    continue
                topic = row.get("topic")
                if not isinstance(topic, str):
                    raise InputError(f"plan in {run} has a {row['action']} row naming no topic")
                if topic == previous:
                    continue
                ordered = ordered and (previous is None or previous < topic)
                previous = topic
                if topic in seen:
                    continue
                if topic not in versions:
                    raise InputError(f"plan in {run} names topic {topic}, which is not in its snapshot")
                seen.add(topic)
                if buckets:
                    bucket = topic_bucket(topic, buckets)
                    shared_bucket = shared_bucket or part_of_bucket.setdefault(bucket, index) != index
            topics += len(seen)
            in_order.append(ordered)
        spans = False
        if shared_bucket and len(parts) > 1:
            spans, topics = _topics_across_parts(parts, spec)
        after_kinds = frozenset(kind.name for kind in spec.actions if kind.after_topics)
        # The topics only rows applied after every topic name (partitioned topics' metadata: few).
        only_after = {row["topic"] for row in after}
        if only_after:
            only_after -= {
                t
                for part in parts
                for row in iter_jsonl(part)
                if (t := row["topic"]) in only_after and row["action"] not in after_kinds
            }
        return cls(parts, rows, topics + len(only_after), after, after_kinds, not spans, tuple(in_order))

    def by_topic(self) -> Iterator[Iterator[tuple[str, list[dict[str, Any]]]]]:
        """Each topic's rows (after-topics rows left out), a part at a time: as they are read from a part in topic
        order, sorted by topic from one that is not; the whole table's, sorted, as one part when a topic spans
        parts."""
        if not self.one_part_per_topic:
            yield _grouped(row for part in self.parts for row in iter_jsonl(part) if self._in_topic(row))
            return
        for part, ordered in zip(self.parts, self.in_topic_order, strict=True):
            rows = (row for row in iter_jsonl(part) if self._in_topic(row))
            if ordered:
                yield ((topic, list(group)) for topic, group in groupby(rows, key=itemgetter("topic")))
            else:
                yield _grouped(rows)

    def _in_topic(self, row: dict[str, Any]) -> bool:
        return row["action"] not in self.after_kinds


def _grouped(rows: Iterator[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["topic"]].append(row)
    for topic in sorted(grouped):
        yield topic, grouped.pop(topic)


def _topics_across_parts(parts: list[Path], spec: PlansActions) -> tuple[bool, int]:
    """Whether a topic's rows are in two parts, and how many topics the rows applied topic by topic name: a set of
    every topic, when the parts are not one bucket each."""
    part_of: dict[str, int] = {}
    spans = False
    for index, part in enumerate(parts):
        for row in iter_jsonl(part):
            if not spec.action(row["action"]).after_topics:
                spans = part_of.setdefault(row["topic"], index) != index or spans
    return spans, len(part_of)


# A topic's version in the snapshot: a SnapshotTopicLookup, or a run.json's own mapping.
TopicVersions = Mapping[str, int] | SnapshotTopicLookup


def apply_plan(store: Store, run_dir: Path, spec: PlansActions, *, purge_grace_seconds: int) -> ApplyResult:
    """The shared Python apply of a checked plan: each topic's rows by their kinds (a part file of the plan at a
    time), then the rows applied after every topic."""
    batch_topics = int(APPLY_BATCH_TOPICS.read())  # bad input before the run is journaled as started
    run = RunDir(run_dir)
    # The gate's verdict first, then every row's kind and every topic against the snapshot, before anything else.
    gate = require_passed_gate(run.path)
    info = read_run_info(run)
    plan = ActionParts.scan(run, spec, snapshot_topic_versions(run, info), int(info.snapshot_buckets or 0))
    context = ApplyRun.open(
        store,
        run_dir,
        spec,
        purge_grace_seconds=purge_grace_seconds,
        detail={"topics": plan.acted_on, "actions": plan.rows},
        kinds_checked=True,
        gate=gate,
    )
    result = ApplyResult.of(context.run_id, spec)
    # Looked up again in the order they are applied (a bucket at a time), not held from the scan.
    _apply_topics(context, plan.by_topic(), result, batch_topics)
    # In the topics' order, as one pass over the whole table would list them.
    result.applied_topics.sort()
    result.already_applied_topics.sort()
    result.skipped_topics = dict(sorted(result.skipped_topics.items()))
    result.narrowed_topics = dict(sorted(result.narrowed_topics.items()))
    _apply_after_topics(context, plan.after, result)
    context.finish(result.to_json())
    _keep_cursors(store, run, info)
    return result


def _keep_cursors(store: Store, run: RunDir, info: RunInfo) -> None:
    """The snapshot's durable cursors into the store's cursor history (docs/semantics.md §12.4), once the run has
    applied: a run that only read the store (refused, rejected, a dry run) leaves it unchanged. The history is what
    a backtest reads; a failure to keep it is logged and leaves the applied run as it is."""
    table = run.snapshot_table(CURSORS)
    if not table.exists():  # a run snapshotted before the snapshot was Parquet
        return
    try:
        record_cursors(store, table, as_of_ms=info.as_of_ms, mechanism=info.mechanism, run_id=info.run_id)
    except OSError as error:
        log.warning("run %s: its cursors were not kept in the cursor history: %s", info.run_id, error)


def snapshot_topic_versions(run: RunDir, info: RunInfo) -> TopicVersions:
    """The version of each topic when it was snapshotted, which apply compare-and-sets: the snapshot's topics
    table (a bucket at a time), or the versions a run whose run.json carried them recorded there."""
    if info.legacy_topic_versions is not None:
        return dict(info.legacy_topic_versions)
    return SnapshotTopicLookup(run, info, "version")


def _apply_topics(
    context: ApplyRun,
    parts: Iterable[Iterable[tuple[str, list[dict[str, Any]]]]],
    result: ApplyResult,
    batch_topics: int,
) -> None:
    """The topics' rows, a part at a time, ``batch_topics`` (``APPLY_BATCH_TOPICS``) topics of a part per metadata
    transaction. Each topic keeps its own checks, compare-and-set and journal row inside the batch (a topic that
    changed since the snapshot is skipped, the others commit); a crash or an error rolls back the batch as a whole,
    and the retry of the same run applies it again (the journal, written in the same transaction, says which topics
    committed). One commit per topic was most of an apply's time at 100,000 topics (benchmarks/README.md)."""
    for part in parts:
        batch: list[tuple[str, list[dict[str, Any]]]] = []
        for topic, actions in part:
            if topic in context.done:
                result.already_applied_topics.append(topic)
                continue
            batch.append((topic, actions))
            if len(batch) == batch_topics:
                _apply_batch(context, batch, result)
                batch = []
        if batch:
            _apply_batch(context, batch, result)


def _apply_batch(
    context: ApplyRun, batch: list[tuple[str, list[dict[str, Any]]]], result: ApplyResult
) -> None:
    outcomes, journaled = [], []
    with write_transaction(context.store.engine) as conn:
        # Read once for the batch, not per topic, and held until it commits.
        holds = holds_for_this_transaction(conn)
        current = read_topics_now(
            conn,
            [topic for topic, _ in batch],
            context.policies_now,
            cursors=context.spec.recheck_reads_cursors,
        )
        with context.batch(conn):
            for topic, actions in batch:
                outcome = context.commit_in(
                    conn,
                    topic,
                    actions,
                    lambda conn, t=topic, a=actions: _apply_topic(conn, context, t, a, current),
                    holds=holds,
                    journaled=journaled,
                )
                outcomes.append((topic, outcome))
        # The batch's journal rows in one statement, in the topics' order, in the same transaction.
        journal_rows(conn, journaled)
    checkpoint("apply_after_topic_commit")
    for topic, outcome in outcomes:
        if outcome.applied:
            result.add(outcome.facts)
        else:
            result.skipped_topics[topic] = str(outcome.why)


def _apply_after_topics(context: ApplyRun, rows: list[dict[str, Any]], result: ApplyResult) -> None:
    for row in rows:
        name = row["topic"]
        if name in context.done:
            result.already_applied_topics.append(name)
            continue
        kind = context.spec.action(row["action"])

        def change(conn: Any, kind: Any = kind, row: dict[str, Any] = row) -> TopicOutcome:
            why, detail = kind.apply_after_topics(conn, context, row)
            if why is not None:
                return TopicOutcome("skipped_conflict", why, kind.name, {"why": why})
            return TopicOutcome("applied", None, kind.name, detail)

        outcome = context.commit(name, [row], change, held_action=kind.name, recheck=False)
        if outcome.applied:
            for key in kind.result_keys:
                result.count(key, [name])
        else:
            result.skipped_topics[name] = str(outcome.why)


def _apply_topic(
    conn: Any, context: ApplyRun, topic: str, actions: list[dict[str, Any]], current: Mapping[str, TopicNow]
) -> TopicOutcome:
    """One topic's rows, in the caller's transaction (``ApplyRun.commit``): the kinds' checks, the topic the same
    one (incarnation) and, when a kind changes the ledger list, the same version as in the snapshot; then the rows
    as the store now allows them (``ApplyRun.recheck``: never more than planned), each by its kind. ``current``:
    the batch's topics as its transaction read and locked them (``live.read_topics_now``)."""
    kinds = [(context.spec.action(a["action"]), a) for a in actions]
    for kind, row in kinds:
        why = kind.check_topic(conn, context, topic, row)
        if why is not None:
            # Pulsar's TopicBusyException (inactive-topic GC): the topic became active since the snapshot.
            return TopicOutcome("skipped_conflict", why, kind.name, {"why": why})
    changes_ledger_list = any(k.changes_ledger_list for k, _ in kinds)
    now, then = current.get(topic), context.then(topic)
    if then is None:  # ActionParts.scan found every topic in the snapshot; a run directory changed since
        raise InputError(f"plan in {context.run} names topic {topic}, which is not in its snapshot")
    expected_version = then.version
    why = _claim_topic(conn, context, now, then, changes_ledger_list)
    narrowed = Narrowed.as_planned(actions)
    if why is None and now is not None:
        narrowed = context.spec.recheck(now, then, actions, context.as_of_ms)
        why = narrowed.why if not narrowed.rows else None
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "apply", {"why": why, "planRows": plan_rows(actions)})
    assert now is not None
    tally = TopicTally(topic, now.namespace, incarnation=now.incarnation)
    # A run of rows of one kind together (trim's ledgers of a topic: a few statements, not three each).
    applied = [(context.spec.action(a["action"]), a) for a in narrowed.rows]
    for kind, group in groupby(applied, key=itemgetter(0)):
        kind.apply_rows_in_topic(conn, context, tally, [row for _, row in group])
    checkpoint("apply_inside_topic_transaction")
    narrowing = (
        {"narrowed": narrowed.why, "appliedRows": plan_rows(narrowed.rows)} if narrowed.narrowed else {}
    )
    tally.detail.update(narrowing)
    detail = {
        "ledgers": tally.ledgers_deleted,
        "bytes": tally.bytes_deleted,
        **tally.counts,
        **tally.detail,
        "fromVersion": expected_version,
        "planRows": plan_rows(actions),
    }
    return TopicOutcome("applied", None, "apply", detail, tally)


_BUMP_VERSIONS = (
    update(t.topics)
    .where(t.topics.c.name.in_(bindparam("claimed_topics", expanding=True)))
    .values(version=t.topics.c.version + 1)
)
_TOPICS_PER_STATEMENT = 500


def _bump_versions(conn: Any, run: ApplyRun, topics: list[str]) -> None:
    """The claimed topics' versions, one more each, at the end of the batch (a topic the batch deleted, as GC
    does, has no row left to bump)."""
    for start in range(0, len(topics), _TOPICS_PER_STATEMENT):
        conn.execute(_BUMP_VERSIONS, {"claimed_topics": topics[start : start + _TOPICS_PER_STATEMENT]})


def _claim_topic(
    conn: Any,
    context: ApplyRun,
    now: TopicNow | None,
    then: TopicThen,
    changes_ledger_list: bool,
) -> str | None:
    """Why the topic's rows cannot be applied (None: they can). The topic must be the snapshot's (not gone, not
    deleted and created again); a change to the ledger list compare-and-sets the topic version recorded in the
    snapshot against the version the batch read and locked, and bumps it at the end of the batch; cursor moves and
    recorded states do not (each cursor is compare-and-set on its own position, so a concurrent ack or ledger roll
    does not void the topic's plan)."""
    why = topic_replaced(then, now)
    if why is not None or now is None:
        return why or "topic no longer exists"
    if changes_ledger_list:
        if now.version != then.version:
            return f"topic changed since the snapshot (version {then.version} -> {now.version})"
        context.at_batch_end(conn, _bump_versions, now.name)
    return None


def _cursors_by_topic(read: Any) -> dict[str, tuple[CursorState, ...]]:
    """A read of the snapshot's cursors (a bucket's, or all) as topic -> its cursors."""
    found: dict[str, list[CursorState]] = defaultdict(list)
    for row in read.to_pylist():
        found[row["topic"]].append(
            CursorState(
                row["name"],
                bool(row["durable"]),
                (int(row["markDeleteLedger"]), int(row["markDeleteEntry"])),
                int(row["consumers"] or 0),
            )
        )
    return {topic: tuple(cursors) for topic, cursors in found.items()}
