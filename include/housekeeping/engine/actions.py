"""What an action is: one kind of change a plan can hold, declared once with its traits.

Every action kind is an :class:`ActionKind`, declared by the mechanism that plans it (``mechanisms/<m>/actions.py``;
the one kind three mechanisms plan, ``move_cursor``, in ``mechanisms/shared``) and found through the catalogue
(``housekeeping.mechanisms.registry``). Everything that treats actions differently asks the kind instead of keeping
a list of names:

- which bytes it frees and how many (:attr:`ActionKind.frees`, :meth:`ActionKind.freed_bytes`): the approval
  measure, the run figures, the metrics and the what-if all count them this one way;
- whether a hold forbids it (:attr:`ActionKind.held_forbidden`): the planners, the gate, apply and purge;
- what it changes (:attr:`ActionKind.changes`): apply compare-and-sets a topic's version before any change to its
  ledger list;
- how the shared Python apply executes it (:meth:`ActionKind.apply_in_topic`, :attr:`ActionKind.after_topics`); a
  kind its mechanism applies itself (compaction's Spark apply, key erasure's) leaves it unimplemented;
- what it does, measured for people (:meth:`ActionKind.effect`): the what-if's and the approval's measures.

The model is Iceberg's actions: a typed result per action, options owned by the action, no global switch.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol


class Changes(enum.StrEnum):
    """What applying the action changes in the store."""

    LEDGERS = "ledgers"  # a topic's ledger list (compare-and-set on the topic version)
    TOPICS = "topics"  # whole topics: every row of the topic
    FILES = "files"  # a ledger's files or the files waiting for purge; the ledger list stays
    CURSORS = "cursors"  # subscription cursors (each compare-and-set on its own position)
    STATE = "state"  # recorded state only (quota states, lastActive)
    METADATA = "metadata"  # metadata beside the topics (partitioned-topic metadata)


class Frees(enum.StrEnum):
    """Which stored bytes the action frees (:meth:`ActionKind.freed_bytes` counts them)."""

    NOTHING = "nothing"
    DATA = "data"  # messages leave the store (restorable from the pending-deletion log until purge)
    PAYLOAD = "payload"  # entries' payloads redacted; positions and the ledger stay
    REPLACED = "replaced"  # a file replaced by a smaller rewrite of it (net bytes)
    LOCAL_COPY = "local_copy"  # the local copy of data that stays readable from the object tier


# The frees that count as deleting data: the approval's bytes and the run's planned bytes. A local copy's bytes are
# counted beside them, never among them: the data stays (in the object tier).
DELETES_DATA = (Frees.DATA, Frees.PAYLOAD, Frees.REPLACED)


@dataclass(frozen=True)
class Effect:
    """What one planned action does, measured for people (approval, what-if): ``key`` names what it acts on."""

    namespace: str
    key: tuple
    ledgers: int = 0  # ledgers it deletes
    topics: int = 0  # topics it deletes or rewrites whole
    cursors: int = 0  # cursors it moves
    entries: int = 0  # entries it deletes, acknowledges, redacts or drops from a compacted view
    bytes: int = 0  # bytes it frees; a cursor move: the backlog bytes it acknowledges
    freed: int = 0  # bytes it frees (``freed_bytes``), whatever ``bytes`` says
    local_copy: int = 0  # local-copy bytes it frees (the data stays in the object tier)

    def measures(self, names: Iterable[str]) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in names}


class PlanView:
    """The snapshot facts an action's effect needs beyond its own row: a run's snapshot (read a bucket at a time, as
    asked), or the ledgers given (``ledgers_by_topic``)."""

    def __init__(
        self, run_dir: Any = None, ledgers_by_topic: Mapping[str, list[Mapping[str, Any]]] | None = None
    ) -> None:
        self._run_dir = run_dir
        self._ledgers = ledgers_by_topic
        self._snapshot: Any = (
            None  # the snapshot's ledgers (snapshot_reads.BucketedSnapshot), grouped by topic
        )
        self._last: tuple[str | None, list[dict[str, Any]]] = (None, [])

    def ledgers(self, topic: str) -> list[Mapping[str, Any]]:
        """The topic's snapshot ledger rows by ledger id, with the columns an effect reads (``topic``, ``ledgerId``,
        ``entries``, ``size``). The snapshot's are read a bucket at a time (the plan's actions come a bucket's part
        at a time) and held as Arrow columns grouped by topic, each topic's rows made when asked for: measuring a
        million-topic plan would otherwise hold 4.4 million ledger rows as dicts (3 GiB)."""
        if self._ledgers is not None:
            return list(self._ledgers.get(topic, []))
        if self._last[0] != topic:  # a plan's actions come topic by topic: one topic's rows kept
            if self._snapshot is None:
                from housekeeping.engine.contract import LEDGERS
                from housekeeping.engine.documents import read_run_info
                from housekeeping.engine.snapshot_reads import BucketedSnapshot

                columns = LEDGERS.select("topic", "ledgerId", "entries", "size")
                info = read_run_info(self._run_dir)
                self._snapshot = BucketedSnapshot(self._run_dir, info, columns, _by_topic, shared=["topic"])
            bounds, columns = self._snapshot.of(topic)
            start, stop = bounds.get(topic, (0, 0))
            rows = columns.slice(start, stop - start).to_pylist()
            for row in rows:
                row["topic"] = topic
            self._last = (topic, rows)
        return list(self._last[1])


def _by_topic(read: Any) -> tuple[dict[str, tuple[int, int]], Any]:
    """Snapshot ledger rows (``topic`` dictionary-encoded) grouped by topic, then ledger: each topic's (start, stop)
    among the returned columns. Sorting the topic's dictionary codes (integers), not the names."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    topic = read.column("topic")
    if not pa.types.is_dictionary(topic.type):
        topic = pc.dictionary_encode(topic)
    topic = topic.unify_dictionaries().combine_chunks() if isinstance(topic, pa.ChunkedArray) else topic
    grouped = pa.table(
        {"code": topic.indices, **{name: read.column(name) for name in ("ledgerId", "entries", "size")}}
    ).sort_by([("code", "ascending"), ("ledgerId", "ascending")])
    codes = grouped.column("code").to_numpy()
    starts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist()] if len(codes) else []
    stops = [*starts[1:], len(codes)] if starts else []
    names = topic.dictionary.to_pylist()
    bounds = {names[codes[start]]: (start, stop) for start, stop in zip(starts, stops, strict=True)}
    return bounds, grouped.select(["ledgerId", "entries", "size"])


# Cached: a plan names a topic once per ledger it acts on (162,527 actions over 48,618 topics at 100,000 topics).
@lru_cache(maxsize=1 << 17)
def namespace_of(topic: str) -> str:
    from housekeeping.core.names import TopicName

    return str(TopicName.parse(topic).namespace_name)


@dataclass
class TopicTally:
    """What one topic's transaction did in the shared Python apply: the kinds add to it; the engine adds
    ``counts`` (result key -> number, list or mapping; ``ActionKind.result_keys``) to the run's result and
    journals them with ``detail`` (journal-only facts)."""

    topic: str
    namespace: str
    counts: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    ledgers_deleted: list[int] = field(default_factory=list)
    bytes_deleted: int = 0
    # The topic's incarnation as the transaction read it: what a ledger it logs for purge is recorded under.
    incarnation: str | None = None

    def add(self, key: str, value: Any = 1) -> None:
        """Count into a result key: a number adds, a list extends, a mapping updates."""
        current = self.counts.get(key)
        if isinstance(value, list):
            self.counts[key] = [*(current or []), *value]
        elif isinstance(value, dict):
            self.counts[key] = {**(current or {}), **value}
        else:
            self.counts[key] = (current or 0) + value

    def note(self, key: str, value: Any) -> None:
        self.detail[key] = value


@dataclass(frozen=True)
class ActionKind:
    """One kind of action (see the module docstring). Subclass it to give a kind its behaviour; an instance is
    its declaration (trim's ``DELETE_LEDGER = DeleteLedger(...)``)."""

    name: str
    description: str
    changes: Changes
    frees: Frees = Frees.NOTHING
    # A hold on the topic forbids it: everything that deletes data, rewrites files or moves a cursor.
    held_forbidden: bool = True
    # Applied by the shared Python apply after every topic of the plan, each in its own transaction (a
    # partitioned topic's metadata goes after its partitions).
    after_topics: bool = False
    # The apply result's keys it adds to (with their zero): what ``apply_in_topic`` counts.
    result_keys: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changes_ledger_list(self) -> bool:
        return self.changes in (Changes.LEDGERS, Changes.TOPICS)

    @property
    def deletes_data(self) -> bool:
        return self.frees in DELETES_DATA

    # --- counting ---------------------------------------------------------------------------------------------
    def freed_bytes(self, row: Mapping[str, Any]) -> int:
        """Bytes the action frees, from its plan row alone (the journal keeps these rows, so applied runs are
        counted the same way). Default: its ``bytes`` when it frees anything."""
        if self.frees is Frees.NOTHING:
            return 0
        return int(row.get("bytes") or 0)

    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect | None:
        """What it does, measured; None: nothing a person measures (a recorded state). Default: the bytes it
        frees, keyed by kind, topic and ledger."""
        if self.frees is Frees.NOTHING:
            return None
        freed = self.freed_bytes(row)
        local = freed if self.frees is Frees.LOCAL_COPY else 0
        return Effect(
            namespace_of(row["topic"]),
            (self.name, row.get("topic"), row.get("ledgerId")),
            bytes=0 if local else freed,
            freed=0 if local else freed,
            local_copy=local,
        )

    def listed_deletions(self, row: Mapping[str, Any], listed: Mapping[int, int]) -> Iterable[int]:
        """The ledgers of its topic (``listed``: ledger id -> bytes, still in the ledger list) it deletes: the
        store's evidence that they are deletable (the deletion-lag metric). Default: none."""
        return ()

    # --- the shared Python apply ------------------------------------------------------------------------------
    def check_topic(self, conn: Any, run: Any, topic: str, row: Mapping[str, Any]) -> str | None:
        """Why the topic must be left alone now (None: go on), read in the topic's transaction before anything
        changes (inactive-topic GC's re-check). Default: nothing to check."""
        return None

    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        """Apply one planned row in the topic's transaction (``ApplyRun.commit``), counting into ``tally``."""
        raise NotImplementedError(f"{self.name} is applied by its mechanism's own apply, not the shared one")

    def apply_rows_in_topic(
        self, conn: Any, run: Any, tally: TopicTally, rows: list[Mapping[str, Any]]
    ) -> None:
        """Apply a topic's consecutive planned rows of this kind, in plan order. Default: each by
        :meth:`apply_in_topic`; a kind with many rows per topic (a ledger each) does them in a few statements."""
        for row in rows:
            self.apply_in_topic(conn, run, tally, row)

    def apply_after_topics(
        self, conn: Any, run: Any, row: Mapping[str, Any]
    ) -> tuple[str | None, dict[str, Any]]:
        """An ``after_topics`` kind's change in its own transaction: (why it was skipped, None when done; the
        journal row's detail)."""
        raise NotImplementedError(f"{self.name} is not applied after the topics")


class PlansActions(Protocol):
    """What the apply engine asks of a mechanism (``housekeeping.engine.mechanism.Mechanism`` is one): its name, the
    kinds its plans may hold and its re-check of a topic against the store as it is. The engine needs nothing else,
    so it does not depend on the mechanism module."""

    name: str
    actions: tuple[ActionKind, ...]
    recheck_reads_cursors: bool

    def action(self, name: str, where: str = "the plan") -> ActionKind: ...

    def recheck(self, now: Any, then: Any, rows: list[dict[str, Any]], as_of_ms: int) -> Any: ...
