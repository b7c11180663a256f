"""The policy backtest: what a policy change would have done over the store's own history (docs/semantics.md §12.5).

The record (``housekeeping.observe.capacity.record``) says when each ledger arrived, when it left the ledger list
and when its files and objects were purged; the policy history (``housekeeping.store.policy_history``) which
policies were in force; the cursor history (``housekeeping.store.cursor_history``) where the durable cursors stood at
the runs that applied. The backtest puts the alternative policies in force from ``--from`` on (the overlay on top
of whatever was in force then, later changes included) and asks, per ledger, when trim's rule would first have let
it go under each: the ledger closed, consumed by every durable subscription (or expired by the TTL or evicted by a
backlog quota), and the retention passed (closed longer ago than the retention time, or the bytes after it at or
over the retention size), as an oldest-first prefix of its topic. Where the two answers agree the ledger's history
is the record's, untouched: a policy document equal to what was in force answers the actual figures exactly. Where
they differ the ledger leaves the list that much earlier or later (the runs' own delay after it became deletable
carries over), and its purge follows by the grace it had.

Consumption is known only from evidence: a deletion by trim (trim deletes only what every durable cursor has
consumed) and the kept runs' cursors. A ledger with neither is taken as never consumed, so the bytes a shorter
retention saves are a lower bound where the cursor history is sparse. Entries a stricter TTL or an evicting backlog
quota would have skipped before their subscription acknowledged them are counted per subscription from the cursor
history, with bounds: ``low`` those a kept run after their deadline still had unacknowledged, ``high`` those no kept
run before their deadline had acknowledged.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName, is_system_topic_name
from housekeeping.core.policies import BrokerConfig, EffectivePolicies, resolve_policies
from housekeeping.core.timeutil import format_ms
from housekeeping.observe.capacity.curves import MS_PER_HOUR, Segments, byte_ms, peak, value_at
from housekeeping.observe.capacity.record import INF, PIECE_TIERS, TIERS, Record, ramp_of
from housekeeping.observe.capacity.usage import in_scope, segments_by, write_quorum
from housekeeping.store import metadata_schema as t
from housekeeping.store.cursor_history import CursorSeries, read_series
from housekeeping.store.policy_history import PolicyHistory
from housekeeping.store.store import read_transaction

if TYPE_CHECKING:
    from housekeeping.store.store import Store
    from housekeeping.what_if.overlay import PolicyOverlay

TRIM = "trim"
EVICTION = "consumer_backlog_eviction"
EVENTS_SHOWN = 1000
SQL_TOPIC_LIST = 1000  # the most topics named in a query's IN list
SERIES_POINTS = 97  # the plot's points over the period (a day: every 15 minutes)


# ---------------------------------------------------------------------------------------------------------------
# What the backtest reads


@dataclass(frozen=True, slots=True)
class LedgerFacts:
    """One ledger of a topic as the record knows it at the period's end."""

    ledger: int
    entries: int
    size: int
    first_ms: float  # first entry's publish time (its close time when unknown)
    last_ms: float  # last entry's publish time
    closed_ms: float  # INF: the open ledger
    deleted_ms: float = INF  # its first deletion from the ledger list
    deleted_by: str | None = None  # the deleting run's mechanism
    restored: bool = False


@dataclass
class History:
    """Everything the backtest reads besides the record."""

    ledgers: Mapping[str, list[LedgerFacts]]  # topic -> its ledgers, oldest first
    cursors: dict[str, dict[str, CursorSeries]]  # topic -> durable subscription -> its series
    kept_runs: list[int]  # the kept runs' times
    durable_now: set[str]  # topics with a durable subscription in the store now
    policies: PolicyHistory
    broker: BrokerConfig


class LedgerFactsOf(Mapping[str, list[LedgerFacts]]):
    """Each topic's ledgers as the record knows them at its as-of, made when asked (one object a ledger for every
    topic at once was most of a backtest's memory at 100,000 topics): the listed ones (the record's rows) and the
    deleted ones (a deletion, or a restore, only when done by then: a ledger deleted later was listed then), with
    who deleted them."""

    def __init__(
        self,
        record: Record,
        topics: set[str],
        saved: dict[str, dict[int, Mapping[str, Any]]],
        deletions: dict[tuple[str, int], list[Any]],
        mechanism_of: dict[str, str],
    ) -> None:
        self._record, self._topics, self._saved = record, topics, saved
        self._deletions, self._mechanism_of = deletions, mechanism_of
        self._last: tuple[str, list[LedgerFacts]] | None = None  # the loop asks for one topic several times

    def __getitem__(self, topic: str) -> list[LedgerFacts]:
        if topic not in self._topics:
            raise KeyError(topic)
        if self._last is None or self._last[0] != topic:
            self._last = (topic, self._facts(topic))
        return self._last[1]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._topics))

    def __len__(self) -> int:
        return len(self._topics)

    def _facts(self, topic: str) -> list[LedgerFacts]:
        rows = dict(self._saved.get(topic, {}))
        for row in self._record.ledgers.get(topic):
            rows[row.ledger_id] = row._asdict()
        facts = []
        to_ms = self._record.as_of_ms
        for ledger, row in sorted(rows.items()):
            ramp = ramp_of(row)
            if ramp is None:
                continue  # neither entry times nor a close time: not placed in time (§12.1)
            closed = row.get("closed_at_ms")
            history = self._deletions.get((topic, ledger))
            facts.append(
                LedgerFacts(
                    ledger,
                    int(row["entries"]),
                    int(row["size_bytes"]),
                    *ramp,
                    float(closed) if closed is not None else INF,
                    float(history[0].deleted_as_of_ms) if history else INF,
                    self._mechanism_of.get(history[0].run_id) if history else None,
                    any(
                        r.status == "restored" and (r.finished_as_of_ms or INF) <= to_ms
                        for r in history or ()
                    ),
                )
            )
        return facts


def read_ledger_facts(store: Store, record: Record, topics: set[str]) -> LedgerFactsOf:
    """Every ledger of ``topics`` the record knows at its as-of (see :class:`LedgerFactsOf`)."""
    to_ms = record.as_of_ms
    pending_query = select(t.pending_deletions).where(t.pending_deletions.c.kind == "ledger")
    if len(topics) <= SQL_TOPIC_LIST:  # else all of them, sorted out here (a long IN list costs more)
        pending_query = pending_query.where(t.pending_deletions.c.topic.in_(sorted(topics)))
    with read_transaction(store.engine) as conn:
        pending = [r for r in conn.execute(pending_query) if r.topic in topics]
        runs = {r.run_id for r in pending if r.deleted_as_of_ms <= to_ms}
        mechanism_of: dict[str, str] = {}
        if runs:
            query = select(t.journal.c.run_id, t.journal.c.mechanism).where(
                t.journal.c.run_id.in_(sorted(runs))
            )
            mechanism_of = {r.run_id: r.mechanism for r in conn.execute(query.distinct())}
    deletions: dict[tuple[str, int], list[Any]] = defaultdict(list)
    saved: dict[str, dict[int, Mapping[str, Any]]] = defaultdict(dict)
    for row in sorted(pending, key=lambda r: r.deleted_as_of_ms):
        saved[row.topic].setdefault(row.ledger_id, json.loads(row.ledger_row))
        if row.deleted_as_of_ms <= to_ms:
            deletions[(row.topic, row.ledger_id)].append(row)
    return LedgerFactsOf(record, topics, dict(saved), dict(deletions), mechanism_of)


def read_history(store: Store, record: Record, policies: PolicyHistory, *, topics: set[str]) -> History:
    """What the backtest of ``topics`` (those the alternative changes) reads, as of the record's as-of."""
    facts = read_ledger_facts(store, record, topics)
    cursors, kept = read_series(store, topics, to_ms=record.as_of_ms)
    durable_now = record.cursors.topics_where(record.cursors.column("durable"))
    return History(
        facts,
        cursors,
        kept,
        durable_now,
        policies,
        record.broker if record.broker is not None else store.broker_config(),
    )


# ---------------------------------------------------------------------------------------------------------------
# The rules, pure


@dataclass(frozen=True)
class Terms:
    """The policies one rule reads, resolved for one topic."""

    retention_time_ms: float  # -1: infinite
    retention_size_bytes: float  # -1: infinite
    ttl_ms: float  # 0: off
    evict_size_bytes: float  # -1: no evicting size quota
    evict_age_ms: float  # -1: no evicting time quota

    @classmethod
    def of(cls, policies: EffectivePolicies, topic: str) -> Terms:
        system = is_system_topic_name(topic)  # expiry and backlog quotas never act on system topics (§4, §5)
        size = policies.backlog_quotas.get("destination_storage")
        age = policies.backlog_quotas.get("message_age")
        return cls(
            float(policies.retention.time_ms),
            float(policies.retention.size_bytes),
            0.0 if system else float(policies.message_ttl_seconds) * 1000,
            float(size.limit_size) if size and size.policy == EVICTION and not system else -1.0,
            float(age.limit_time) * 1000
            if age and age.policy == EVICTION and age.limit_time > 0 and not system
            else -1.0,
        )


Timeline = list[tuple[float, Terms]]  # (from, terms), the first from -inf


def first_time(timeline: Timeline, when: Callable[[Terms], Any]) -> Any:
    """The first time a condition holds that, under fixed terms, holds from ``when(terms)`` on: the first interval
    of the timeline whose terms make it hold before the interval ends (INF: none). ``when`` answers a time or an
    array of them (one per ledger or entry); the answer has its shape."""
    out: Any = None
    pending: Any = None
    for i, (start, terms) in enumerate(timeline):
        end = timeline[i + 1][0] if i + 1 < len(timeline) else INF
        moment = np.maximum(start, when(terms))
        if out is None:
            out = np.full(np.shape(moment), INF)
            pending = np.ones(np.shape(moment), dtype=bool)
        hit = pending & (moment < end)
        out = np.where(hit, moment, out)
        pending = pending & ~hit
        if not pending.any():
            break
    return out if np.ndim(out) else float(out)


class TopicBytes:
    """A topic's ledgers' arrivals (oldest first), to ask when the bytes after a ledger reached a size."""

    def __init__(self, ledgers: list[LedgerFacts]) -> None:
        self.size = np.array([ledger.size for ledger in ledgers], dtype=np.float64)
        self.first = np.array([ledger.first_ms for ledger in ledgers], dtype=np.float64)
        self.last = np.array([ledger.last_ms for ledger in ledgers], dtype=np.float64)
        self.closed = np.array([ledger.closed_ms for ledger in ledgers], dtype=np.float64)
        self.cumulative = np.cumsum(self.size)

    def after_reaches(self, index: Any, limit: float) -> Any:
        """When the bytes of the ledgers after ``ledgers[index]`` (an index or an array of them) first reached
        ``limit``, each ledger's bytes arriving linearly over its entries' publish times (INF: never, in the
        record; -INF: a limit of 0)."""
        index = np.asarray(index)
        if limit < 0:
            return np.full(index.shape, INF) if index.ndim else INF
        if limit == 0:
            return np.full(index.shape, -INF) if index.ndim else -INF
        base = self.cumulative[index]
        j = np.searchsorted(self.cumulative, base + limit, side="left")
        inside = j < len(self.size)
        j = np.minimum(j, len(self.size) - 1)
        before = self.cumulative[j] - self.size[j] - base
        fraction = np.divide(limit - before, self.size[j], out=np.ones(np.shape(j)), where=self.size[j] > 0)
        moment = np.where(inside, self.first[j] + fraction * (self.last[j] - self.first[j]), INF)
        return moment if moment.ndim else float(moment)


def expiry_deadline(
    terms: Terms, publish_ms: Any, closed_ms: Any, bytes_after: Callable[[float], Any]
) -> Any:
    """When entries published at ``publish_ms`` in ledgers closed at ``closed_ms`` (times or arrays of them) stop
    being kept for a subscription that has not acknowledged them: the TTL (§4), an evicting time quota (their
    ledger's close, §5) or an evicting size quota (the bytes after their ledger reach the limit, §5); INF: never."""
    deadline = np.full(np.broadcast(publish_ms, closed_ms).shape, INF)
    if terms.ttl_ms > 0:
        deadline = np.minimum(deadline, np.asarray(publish_ms) + terms.ttl_ms)
    if terms.evict_age_ms > 0:
        deadline = np.minimum(deadline, np.asarray(closed_ms) + terms.evict_age_ms)
    if terms.evict_size_bytes >= 0:
        deadline = np.minimum(deadline, bytes_after(terms.evict_size_bytes))
    return deadline


def retention_allows(terms: Terms, closed_ms: Any, bytes_after: Callable[[float], Any]) -> Any:
    """From when the retention lets consumed, closed ledgers go (§3): closed longer ago than the retention time, or
    the bytes after each at or over the retention size (-1: that limit infinite)."""
    by_time = np.asarray(closed_ms) + terms.retention_time_ms if terms.retention_time_ms >= 0 else INF
    by_size = bytes_after(terms.retention_size_bytes) if terms.retention_size_bytes >= 0 else INF
    return np.minimum(by_time, by_size)


def consumed_times(topic: str, ledgers: list[LedgerFacts], history: History) -> list[float]:
    """Per ledger, the first time the record shows every durable subscription past it: trim deleting it, or a kept
    run whose durable cursors of the topic (at least one) were all at or past its last entry; its close for a topic
    never seen with a durable subscription; INF: no evidence."""
    series = history.cursors.get(topic, {})
    if not series and topic not in history.durable_now:
        return [ledger.closed_ms for ledger in ledgers]
    slowest: dict[float, tuple[int, int]] = {}  # kept run -> the slowest durable cursor it listed
    for kept in series.values():
        for moment, ledger_id, entry in zip(kept.times, kept.ledger, kept.entry, strict=True):
            position = (int(ledger_id), int(entry))
            slowest[float(moment)] = min(slowest.get(float(moment), position), position)
    runs = sorted(slowest.items())
    known = []
    for ledger in ledgers:
        first = ledger.deleted_ms if ledger.deleted_by == TRIM else INF
        last_entry = (ledger.ledger, ledger.entries - 1)
        for moment, position in runs:
            if moment >= first:
                break
            if position >= last_entry:
                first = moment
                break
        known.append(first)
    return known


def deletable_from(topic: str, timeline: Timeline, history: History) -> list[float]:
    """Per ledger of the topic (oldest first), from when trim would have deleted it under ``timeline``: closed,
    consumed (or expired for every subscription), the retention passed, and every older ledger deletable."""
    ledgers = history.ledgers.get(topic, [])
    if not ledgers:
        return []
    sizes = TopicBytes(ledgers)
    every = np.arange(len(ledgers))

    def after(limit: float) -> Any:
        return sizes.after_reaches(every, limit)

    known = np.array(consumed_times(topic, ledgers, history), dtype=np.float64)
    expired = first_time(timeline, lambda terms: expiry_deadline(terms, sizes.last, sizes.closed, after))
    consumed = np.minimum(known, expired)
    allowed = first_time(
        timeline,
        lambda terms: np.maximum(
            np.maximum(sizes.closed, consumed), retention_allows(terms, sizes.closed, after)
        ),
    )
    # The walk from the oldest ledger stops at the first it keeps.
    return [float(x) for x in np.maximum.accumulate(allowed)]


def alternative_deletion(ledger: LedgerFacts, actual_allowed: float, alternative_allowed: float) -> float:
    """When the ledger leaves the list under the alternative: as it did where both policies agree (or another
    mechanism than trim removed it); else when the alternative allows it, plus the delay the runs took after the
    policies in force allowed it."""
    if ledger.restored or (ledger.deleted_by is not None and ledger.deleted_by != TRIM):
        return ledger.deleted_ms
    if alternative_allowed == actual_allowed:
        return ledger.deleted_ms
    if alternative_allowed == INF:
        return INF
    delay = ledger.deleted_ms - actual_allowed if ledger.deleted_ms < INF and actual_allowed < INF else 0.0
    return alternative_allowed + max(delay, 0.0)


def skipped_entries(
    topic: str,
    actual: Timeline,
    alternative: Timeline,
    history: History,
    window: tuple[float, float],
) -> dict[str, dict[str, Any]]:
    """Per durable subscription of the topic in the cursor history, the entries the alternative would have skipped
    (expired or evicted) before the subscription acknowledged them and the policies in force did not, their
    deadline in the period: ``low`` (a kept run after the deadline still had them unacknowledged), ``high`` (no
    kept run before it had acknowledged them), and the first and last of their deadlines (``from``, ``to``)."""
    subscriptions = history.cursors.get(topic, {})
    if not subscriptions:
        return {}  # no kept run listed a durable subscription of the topic: nothing to count against
    ledgers = history.ledgers.get(topic, [])
    sizes = TopicBytes(ledgers)
    # Per ledger: its entries due earlier under the alternative, and when.
    due: list[tuple[LedgerFacts, np.ndarray, np.ndarray]] = []
    for i, ledger in enumerate(ledgers):
        if ledger.entries <= 0:
            continue
        entries = np.arange(ledger.entries)
        span = ledger.last_ms - ledger.first_ms
        publish = ledger.first_ms + span * entries / max(ledger.entries - 1, 1)  # an array, one entry too
        stricter = _entry_deadlines(alternative, sizes, i, ledger, publish)
        usual = _entry_deadlines(actual, sizes, i, ledger, publish)
        chosen = (stricter < usual) & (stricter >= window[0]) & (stricter < window[1])
        if chosen.any():
            due.append((ledger, entries[chosen], stricter[chosen]))
    result: dict[str, dict[str, Any]] = {}
    for name, series in sorted(subscriptions.items()):
        low = high = 0
        first, last = INF, -INF
        for ledger, which, at in due:
            before = np.searchsorted(series.times, at, side="right") - 1
            after = np.searchsorted(series.times, at, side="left")
            possible = ~series.acked(before, ledger.ledger, which)
            high += int(possible.sum())
            low += int(((after < len(series.times)) & ~series.acked(after, ledger.ledger, which)).sum())
            if possible.any():
                first, last = min(first, float(at[possible].min())), max(last, float(at[possible].max()))
        if high:
            result[name] = {
                "low": low,
                "high": high,
                "from": format_ms(int(first)),
                "to": format_ms(int(last)),
            }
    return result


def _entry_deadlines(
    timeline: Timeline, sizes: TopicBytes, index: int, ledger: LedgerFacts, publish: np.ndarray
) -> np.ndarray:
    """Per entry, the first time a timeline's terms stop keeping it for a subscription behind it (INF: never)."""

    def after(limit: float) -> Any:
        return sizes.after_reaches(index, limit)

    return np.broadcast_to(
        first_time(timeline, lambda terms: expiry_deadline(terms, publish, ledger.closed_ms, after)),
        publish.shape,
    )


# ---------------------------------------------------------------------------------------------------------------
# The timelines and the answer


@dataclass
class Backtest:
    """The period, the record as of its end, the alternative overlay."""

    record: Record
    overlay: PolicyOverlay
    from_ms: int
    to_ms: int
    history: History
    # Topics alike (a namespace's topics without policies of their own or a history) share their timelines.
    _alike: dict[tuple[str, str, bool], tuple[Timeline, Timeline]] = field(default_factory=dict)

    def timelines(self, topic: str) -> tuple[Timeline, Timeline]:
        """The terms in force over time for the topic, and the alternative's: the overlay on them from the period's
        start."""
        namespace = self.record.namespace_of.get(topic) or str(TopicName.parse(topic).namespace_name)
        if topic in self.history.policies.changes or topic in self.overlay.topics:
            return self._timelines(topic, namespace)
        row = self.record.topics.get(topic)
        key = (namespace, row.policies if row is not None else "", is_system_topic_name(topic))
        if key not in self._alike:
            self._alike[key] = self._timelines(topic, namespace)
        return self._alike[key]

    def _timelines(self, topic: str, namespace: str) -> tuple[Timeline, Timeline]:
        policies = self.history.policies
        moments = sorted(
            {m for target in (topic, namespace) for m, _ in policies.changes.get(target, [])} | {self.from_ms}
        )
        broker = self.history.broker
        alternative_broker = self.overlay.broker_config(broker)
        actual: Timeline = []
        alternative: Timeline = []
        for moment in [-INF, *moments]:
            at = int(moment) if moment > -INF else int(moments[0]) - 1
            topic_policies = (
                policies.at(topic, at) if topic in policies.changes else self._stored_topic_policies(topic)
            )
            namespace_policies = (
                policies.at(namespace, at)
                if namespace in policies.changes
                else dict(self.record.namespaces.get(namespace, {}))
            )
            terms = Terms.of(
                resolve_policies(topic, topic_policies, namespace, namespace_policies, broker), topic
            )
            actual.append((moment, terms))
            if moment < self.from_ms:
                alternative.append((moment, terms))
            else:
                changed = resolve_policies(
                    topic,
                    self.overlay.topic_policies(topic, topic_policies),
                    namespace,
                    self.overlay.namespace_policies(namespace, namespace_policies),
                    alternative_broker,
                )
                alternative.append((moment, Terms.of(changed, topic)))
        return actual, alternative

    def _stored_topic_policies(self, topic: str) -> dict[str, Any]:
        """A topic the policy history never names: its own policies as the store has them."""
        row = self.record.topics.get(topic)
        return json.loads(row.policies) if row is not None and row.policies else {}


def affected_topics(record: Record, overlay: PolicyOverlay) -> set[str]:
    """The topics the overlay can change: every one when it sets broker settings, else those of the namespaces it
    names and the topics it names."""
    if overlay.broker:
        return set(record.namespace_of)
    return {
        topic
        for topic, namespace in record.namespace_of.items()
        if namespace in overlay.namespaces or topic in overlay.topics
    }


def backtest(
    store: Store,
    record: Record,
    overlay: PolicyOverlay,
    policies: PolicyHistory,
    *,
    from_ms: int,
    to_ms: int,
    purge_grace_ms: int,
) -> dict[str, Any]:
    """Per tenant, namespace and tier over ``[from_ms, to_ms)``: byte-hours and peaks in fact and under the
    alternative, the bytes deleted earlier and kept longer, the entries skipped unacknowledged (bounds); the
    alternative's deletions and expiries that differ from the record's."""
    check_period(record, from_ms, to_ms)
    topics = affected_topics(record, overlay)
    history = read_history(store, record, policies, topics=topics)
    run = Backtest(record, overlay, from_ms, to_ms, history)
    ends: dict[tuple[str, int], tuple[float, float]] = {}  # (topic, ledger) -> (actual, alternative) deletion
    deletions, expiries = [], []
    skipped: dict[str, dict[str, int]] = defaultdict(lambda: {"low": 0, "high": 0})
    for topic in sorted(topics):
        actual, alternative = run.timelines(topic)
        if actual == alternative:
            continue
        ledgers = history.ledgers.get(topic, [])
        before = deletable_from(topic, actual, history)
        after = deletable_from(topic, alternative, history)
        for ledger, a, b in zip(ledgers, before, after, strict=True):
            moved = alternative_deletion(ledger, a, b)
            if moved != ledger.deleted_ms:
                ends[(topic, ledger.ledger)] = (ledger.deleted_ms, moved)
                if min(moved, ledger.deleted_ms) < to_ms:
                    deletions.append(
                        {
                            "topic": topic,
                            "ledger": ledger.ledger,
                            "bytes": ledger.size,
                            "actual": _time(ledger.deleted_ms, to_ms),
                            "alternative": _time(moved, to_ms),
                        }
                    )
        namespace = record.namespace_of[topic]
        found = skipped_entries(topic, actual, alternative, history, (from_ms, to_ms))
        for subscription, skips in found.items():
            bounds = {"low": skips["low"], "high": skips["high"]}
            expiries.append(
                {
                    "topic": topic,
                    "subscription": subscription,
                    "entries": bounds,
                    "from": skips["from"],
                    "to": skips["to"],
                }
            )
            for key in ("low", "high"):
                skipped[namespace][key] += bounds[key]
    alternative_record = replace(record, pieces=moved_pieces(record, ends, purge_grace_ms))
    # Both records' curves per namespace and tier, once: the rows and the plot's series read them.
    curves = _Curves.of(record, alternative_record)
    rows = _rows(record, curves, ends, skipped, from_ms, to_ms)
    changed = {record.namespace_of[topic] for topic in topics}
    notes = _notes(history, policies, from_ms, to_ms)
    deletions.sort(key=lambda d: (d["topic"], d["ledger"]))
    return {
        "from": format_ms(from_ms),
        "to": format_ms(to_ms),
        "rows": rows,
        "series": _series(curves, changed, from_ms, to_ms),
        "deletions": deletions[:EVENTS_SHOWN],
        "deletionsLeftOff": max(len(deletions) - EVENTS_SHOWN, 0),
        "expiries": expiries[:EVENTS_SHOWN],
        "expiriesLeftOff": max(len(expiries) - EVENTS_SHOWN, 0),
        "cursorHistory": {"keptRuns": len(history.kept_runs), **_kept_span(history.kept_runs)},
        "policyHistoryBegins": format_ms(policies.begins_ms) if policies.begins_ms is not None else None,
        "notes": notes,
    }


@dataclass(frozen=True)
class _Curves:
    """The record's and the alternative's bytes per namespace and tier, as segments in the same groups."""

    actual: Segments
    alternative: Segments
    groups: list[tuple[tuple[str, ...], str]]  # ((tenant, namespace), tier)

    @classmethod
    def of(cls, record: Record, alternative: Record) -> _Curves:
        everything = in_scope(None, None)
        actual, groups = segments_by(record, "namespace", TIERS, everything)
        changed, changed_groups = segments_by(alternative, "namespace", TIERS, everything)
        assert groups == changed_groups  # the same pieces, some ends moved
        return cls(actual, changed, groups)


def _series(
    curves: _Curves, namespaces: set[str], from_ms: int, to_ms: int
) -> dict[str, dict[str, list[list[float]]]]:
    """Per namespace the overlay changes and tier (``listed``, ``local``), ``[[ms, actual bytes, alternative
    bytes], ...]`` at ``SERIES_POINTS`` times over the period (its end excluded: the last point just before it)."""
    times = [from_ms + (to_ms - 1 - from_ms) * k / (SERIES_POINTS - 1) for k in range(SERIES_POINTS)]
    actual = np.array([value_at(curves.actual, moment) for moment in times])
    changed = np.array([value_at(curves.alternative, moment) for moment in times])
    series: dict[str, dict[str, list[list[float]]]] = defaultdict(dict)
    for i, ((_, namespace), tier) in enumerate(curves.groups):
        if namespace in namespaces and tier in ("listed", "local"):
            series[namespace][tier] = [
                [float(int(moment)), float(actual[k, i]), float(changed[k, i])]
                for k, moment in enumerate(times)
            ]
    return {name: series[name] for name in sorted(series)}


def backtest_store(
    store: Store, overlay: PolicyOverlay, *, from_ms: int, to_ms: int, purge_grace_ms: int
) -> dict[str, Any]:
    """The backtest of ``overlay`` on the store: the overlay checked against it (bad input names what it refuses),
    then the record, the policy history and the cursor history as of ``to_ms``."""
    from housekeeping.observe.capacity.record import read_record
    from housekeeping.store.policy_history import read_policy_history

    record = read_record(store, to_ms)
    overlay.validate_against(store, _policies_manifest(store, record, overlay))
    return backtest(
        store,
        record,
        overlay,
        read_policy_history(store, to_ms),
        from_ms=from_ms,
        to_ms=to_ms,
        purge_grace_ms=purge_grace_ms,
    )


def _policies_manifest(store: Store, record: Record, overlay: PolicyOverlay) -> dict[str, Any]:
    """The store's policies in the manifest's shape, as far as the overlay bears on them: the broker's, every
    namespace's and the named topics' (each with its newest ledger, which the schema wants). A backtest reads
    policies only; checking every topic's ledgers and cursors again (``validate_against`` without it) took most
    of a 100,000-topic backtest."""
    from housekeeping.store.manifest.model import MANIFEST_VERSION

    with read_transaction(store.engine) as conn:
        stored = conn.execute(
            select(t.store_settings.c.value).where(t.store_settings.c.key == "broker")
        ).scalar()
    topics = {}
    for name in overlay.topics:
        row, ledgers = record.topics.get(name), record.ledgers.get(name)
        if row is None or not ledgers:
            continue  # not in the store: the check names it
        newest = max(ledgers, key=lambda ledger: ledger.ledger_id)
        ledger = {"ledgerId": newest.ledger_id, "entries": newest.entries, "size": newest.size_bytes}
        if newest.closed_at_ms is not None:
            ledger["timestamp"] = newest.closed_at_ms
        topics[name] = {"policies": json.loads(row.policies), "ledgers": [ledger]}
    return {
        "manifestVersion": MANIFEST_VERSION,
        "broker": json.loads(stored) if stored else {},
        "namespaces": dict(record.namespaces),
        "topics": topics,
    }


def _time(moment: float, to_ms: int) -> str | None:
    """A deletion's time, None when it falls at or after the period's end (not in it)."""
    return format_ms(int(moment)) if moment < to_ms else None


def _kept_span(times: list[int]) -> dict[str, Any]:
    return (
        {"first": format_ms(times[0]), "last": format_ms(times[-1])}
        if times
        else {"first": None, "last": None}
    )


def check_period(record: Record, from_ms: int, to_ms: int) -> None:
    """``--from`` before ``--to``, and a period that reaches the record's first entry (before it the record holds
    nothing)."""
    if from_ms >= to_ms:
        raise InputError(f"--from {format_ms(from_ms)} is not before --to {format_ms(to_ms)}")
    ingest = record.pieces.on("ingest")
    if not ingest.any():
        raise InputError("the store's record holds no entry: there is no history to backtest")
    first = int(record.pieces.ramp_from[ingest].min())
    if to_ms <= first:
        raise InputError(
            f"the period {format_ms(from_ms)} to {format_ms(to_ms)} is before the record's first entry "
            f"({format_ms(first)}): the record holds nothing to backtest then"
        )


def moved_pieces(record: Record, ends: dict[tuple[str, int], tuple[float, float]], grace_ms: int) -> Any:
    """The record's pieces with each moved ledger's ends moved: off the list at its alternative deletion, its
    files and its object purged the grace its deletion had later (the configured grace when it was never purged);
    a local copy an offload purged earlier stays purged then."""
    pieces = record.pieces
    if not ends:
        return pieces
    end = pieces.end.copy()
    listed, local, tier = (PIECE_TIERS.index(x) for x in ("listed", "local", "tier"))
    for (actual, moved), mine in _pieces_of(pieces, ends):
        for i in mine:
            kind = int(pieces.tier[i])
            if kind == listed and end[i] == actual:
                end[i] = moved
            elif kind in (local, tier):
                delay = end[i] - actual if actual < INF and end[i] < INF and end[i] >= actual else None
                purge = moved + (delay if delay is not None else grace_ms)
                if kind == local and end[i] < actual:
                    continue  # its local copy was purged after an offload, before the deletion
                end[i] = purge
    return replace(pieces, end=end)


def _pieces_of(
    pieces: Any, ends: dict[tuple[str, int], tuple[float, float]]
) -> Iterator[tuple[tuple[float, float], list[int]]]:
    """Each moved ledger's (actual, alternative) deletion with its pieces' indices (found in one pass over the
    pieces of the topics concerned)."""
    code = {name: i for i, name in enumerate(pieces.topics)}
    wanted = {(code[topic], ledger): moved for (topic, ledger), moved in ends.items() if topic in code}
    if not wanted:
        return
    concerned = np.flatnonzero(np.isin(pieces.topic, sorted({key[0] for key in wanted})))
    found: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, topic, ledger in zip(concerned, pieces.topic[concerned], pieces.ledger[concerned], strict=True):
        key = (int(topic), int(ledger))
        if key in wanted:
            found[key].append(int(i))
    for key, mine in found.items():
        yield wanted[key], mine


def _rows(
    record: Record,
    curves: _Curves,
    ends: dict[tuple[str, int], tuple[float, float]],
    skipped: dict[str, dict[str, int]],
    from_ms: int,
    to_ms: int,
) -> list[dict[str, Any]]:
    figures = {
        "actualByteHours": byte_ms(curves.actual, from_ms, to_ms) / MS_PER_HOUR,
        "alternativeByteHours": byte_ms(curves.alternative, from_ms, to_ms) / MS_PER_HOUR,
        "actualPeakBytes": peak(curves.actual, from_ms, to_ms),
        "alternativePeakBytes": peak(curves.alternative, from_ms, to_ms),
    }
    earlier, longer = _moved_bytes(record, ends, to_ms)
    rows = []
    for i, ((tenant, namespace), tier) in enumerate(curves.groups):
        rows.append(
            {
                "tenant": tenant,
                "namespace": namespace,
                "tier": tier,
                **{name: float(values[i]) for name, values in figures.items()},
                "deletedEarlierBytes": earlier.get((namespace, tier), 0),
                "keptLongerBytes": longer.get((namespace, tier), 0),
                "skippedUnacknowledgedEntries": dict(skipped.get(namespace, {"low": 0, "high": 0})),
            }
        )
    rows.sort(key=lambda row: (row["tenant"], row["namespace"], TIERS.index(row["tier"])))
    return rows


def _moved_bytes(
    record: Record, ends: dict[tuple[str, int], tuple[float, float]], to_ms: int
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """Per (namespace, tier): the bytes of the ledgers the alternative deletes earlier (within the period) and of
    those it keeps longer than the record did (deleted within the period in fact); locally times the write quorum,
    as the byte-hours."""
    earlier: dict[tuple[str, str], int] = defaultdict(int)
    longer: dict[tuple[str, str], int] = defaultdict(int)
    pieces = record.pieces
    for (actual, moved), mine in _pieces_of(pieces, ends):
        namespace = record.namespace_of[pieces.topics[int(pieces.topic[mine[0]])]]
        copies = write_quorum(record.namespaces.get(namespace, {}), record.broker)
        for i in mine:
            tier = PIECE_TIERS[int(pieces.tier[i])]
            if tier == "ingest":
                continue
            size = int(pieces.size[i]) * (copies if tier == "local" else 1)
            if moved < actual and moved < to_ms:
                earlier[(namespace, tier)] += size
            elif moved > actual and actual < to_ms:
                longer[(namespace, tier)] += size
    return dict(earlier), dict(longer)


def _notes(history: History, policies: PolicyHistory, from_ms: int, to_ms: int) -> list[str]:
    """What the answer cannot know, in words."""
    notes = []
    if policies.begins_ms is None:
        notes.append(
            "the journal holds no policy history: the policies in force are taken as the store's now"
        )
    elif policies.begins_ms > from_ms:
        notes.append(
            f"the policy history begins at {format_ms(policies.begins_ms)}: before it the policies in force are "
            "taken as its first record's"
        )
    inside = [moment for moment in history.kept_runs if from_ms <= moment < to_ms]
    if not inside:
        notes.append(
            "no run kept its cursors in the period: consumption is known only from trim's deletions, and skipped "
            "entries cannot be counted"
        )
    return notes
