"""The simulation's loop: producers publish, ledgers roll, consumers acknowledge and operators change the store, each
at its seeded time, through the store's client paths (``housekeeping.store.clients``) and admin paths
(``housekeeping.store.admin``, holds), exactly as anything beside housekeeping would; it never calls housekeeping.

Events come off one queue in time order, so a seed gives one sequence of choices; on the real clock the loop sleeps
until each event is due (the store's writers are the clients' own locks, not this loop's threads), on the simulated
clock it jumps there. A client's refusal (a topic deleted under it, a producer refused by a backlog quota, a policy
Pulsar's rules refuse) is counted and the simulation goes on, as a client would; so is a fault (the metadata
database down, a file system error), after a short back-off. What the simulation connected (producers, consumers)
and the holds it placed are released when it ends, interrupted or not."""

from __future__ import annotations

import heapq
import random
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from housekeeping.core.actor import current_actor
from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName, is_system_topic
from housekeeping.core.positions import format_position, parse_position
from housekeeping.core.scope import in_scope
from housekeeping.core.settings import Settings
from housekeeping.core.timeutil import format_ms, wall_clock_ms
from housekeeping.store import admin, clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import lift_hold, list_holds, place_hold
from housekeeping.store.simulate.log import SimulationLog, checksum
from housekeeping.store.simulate.workload import (
    RETENTION_MEGABYTES,
    RETENTION_MINUTES,
    TTL_SECONDS,
    Clock,
    Operation,
    Profile,
    Rollover,
    Workload,
    latency_figures,
)
from housekeeping.store.store import Store, read_transaction

Position = tuple[int, int]
# How many of a topic's newest positions the simulation remembers (a lagging consumer acknowledges one of them).
RECENT = 10_000
FAULT_BACKOFF_SECONDS = 0.5
HOLD_REASON = "simulate: an operator's hold"


@dataclass
class Subscription:
    name: str
    profile: Profile
    lag: int
    own: bool  # created by this simulation (it may remove it)
    consumer: bool = False
    acked: Position | None = None


@dataclass
class Topic:
    name: str
    own: bool  # created by this simulation (it may delete it)
    ledger_id: int
    entries: int
    size_bytes: int
    opened_ms: int
    max_open_ms: int
    producer: bool = False
    recent: deque[Position] = field(default_factory=lambda: deque(maxlen=RECENT))
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


class RealClock:
    def now_ms(self) -> int:
        return wall_clock_ms()

    def sleep_until(self, due_ms: int) -> None:
        delay = due_ms - self.now_ms()
        if delay > 0:
            time.sleep(delay / 1000)

    def back_off(self, seconds: float) -> None:
        time.sleep(seconds)


class SimulatedClock:
    def __init__(self, start_ms: int) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def sleep_until(self, due_ms: int) -> None:
        self._now = max(self._now, due_ms)

    def back_off(self, seconds: float) -> None:
        time.sleep(seconds)  # a fault is real even when time is not


class Simulation:
    def __init__(
        self,
        store: Store,
        workload: Workload,
        rollover: Rollover,
        log: SimulationLog,
        *,
        progress: TextIO | None = None,
        actor: str | None = None,
    ) -> None:
        self.store = store
        self.workload = workload
        self.rollover = rollover
        self.log = log
        self.progress = progress
        self.actor = actor or f"{current_actor()} (simulate)"
        self.rng = random.Random(workload.seed)
        self.clock: RealClock | SimulatedClock = (
            RealClock() if workload.clock is Clock.REAL else SimulatedClock(int(workload.start_ms or 0))
        )
        self.grace_seconds = Settings.from_env().purge_grace_seconds
        self.topics: dict[str, Topic] = {}
        self.namespaces: list[str] = []
        self.holds: list[str] = []
        self.counter = 0  # the event queue's tie-break, in the order events were scheduled
        self.names = 0  # the last number given to a topic or subscription the simulation created
        self.published = 0
        self.published_bytes = 0
        self.acknowledgements = 0
        self.rolled = 0
        self.done: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.last_problems: deque[str] = deque(maxlen=10)
        self.latencies: list[float] = []
        self.interrupted = False

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.started_ms = self.clock.now_ms()
        self.log.event("start", self.started_ms, seed=self.workload.seed, clock=self.workload.clock.value)
        end_ms = self.started_ms + self.workload.duration_seconds * 1000
        with _interrupt_on_sigterm():
            try:
                self._attach_topics()
                queue = self._first_events()
                while queue:
                    due, _, kind = heapq.heappop(queue)
                    if due >= end_ms:
                        break
                    self.clock.sleep_until(int(due))
                    follow_up = self._handle(kind)
                    if follow_up is not None:
                        heapq.heappush(queue, (due + follow_up, self._next_seq(), kind))
                self.clock.sleep_until(end_ms)  # the whole duration, also after its last event
            except KeyboardInterrupt:
                self.interrupted = True
            finally:
                self._release()
        self.ended_ms = self.clock.now_ms()
        self.log.event("end", self.ended_ms, interrupted=self.interrupted)
        self.log.close()
        self._progress_line(final=True)
        return self.summary()

    def _next_seq(self) -> int:
        self.counter += 1
        return self.counter

    def _first_events(self) -> list[tuple[float, int, str]]:
        start = float(self.started_ms)
        events = [(start + 1000, self._next_seq(), "roll"), (start, self._next_seq(), "ack")]
        if self.workload.rate > 0:
            events.append((start, self._next_seq(), "publish"))
        if self.workload.operations_per_minute > 0 and self.workload.operations:
            events.append((start + self._op_gap_ms(), self._next_seq(), "operate"))
        if self.workload.progress_seconds:
            events.append((start + self.workload.progress_seconds * 1000, self._next_seq(), "progress"))
        heapq.heapify(events)
        return events

    def _op_gap_ms(self) -> float:
        return self.rng.expovariate(self.workload.operations_per_minute / 60_000)

    def _handle(self, kind: str) -> float | None:
        """Do one event; the ms until its kind's next one (None: no more)."""
        w = self.workload
        if kind == "publish":
            self._guarded("publish", self._publish)
            return self.rng.expovariate(w.rate / w.batch / 1000)
        if kind == "ack":
            self._guarded("ack", self._acknowledge_all)
            return w.ack_interval_seconds * 1000
        if kind == "roll":
            self._guarded("roll", self._roll_full_ledgers)
            return 1000
        if kind == "operate":
            operation = w.draw_operation(self.rng)
            self._guarded(operation.value, lambda: self._operate(operation))
            return self._op_gap_ms()
        self._progress_line()
        return w.progress_seconds * 1000

    def _guarded(self, what: str, action: Callable[[], object]) -> None:
        """A client's refusal is the store answering; a fault is the store unreachable: count both, go on."""
        try:
            action()
        except InputError as exc:
            if isinstance(exc.__cause__, DBAPIError):  # the store names a database it cannot use: a fault
                self._fault(what, exc.__cause__)
                return
            self.refused[what] += 1
            self.last_problems.append(f"{what}: refused: {exc}")
        except (DBAPIError, OSError) as exc:
            self._fault(what, exc)

    def _fault(self, what: str, exc: Exception) -> None:
        self.faults[type(exc).__name__] += 1
        message = (str(exc).splitlines() or [""])[0][:300]
        self.last_problems.append(f"{what}: {type(exc).__name__}: {message}")
        self.log.event("fault", self.clock.now_ms(), during=what, error=type(exc).__name__, message=message)
        self.clock.back_off(FAULT_BACKOFF_SECONDS)

    # --- topics the simulation drives ------------------------------------------------------------------------

    def _attach_topics(self) -> None:
        """The topics it publishes to: a seeded sample of the store's topics in scope that a producer can append to
        (their entries stored, not metadata only), and new topics for the rest."""
        scope = list(self.workload.scope)
        with read_transaction(self.store.engine) as conn:
            names = sorted(conn.execute(select(t.topics.c.name)).scalars())
            self.namespaces = sorted(conn.execute(select(t.namespaces.c.name)).scalars())
            appendable = set(
                conn.execute(
                    select(t.ledgers.c.topic)
                    .where(t.ledgers.c.closed_at_ms.is_(None))
                    .where((t.ledgers.c.entries == 0) | t.ledgers.c.entries_stored.is_(True))
                ).scalars()
            )
        existing = [n for n in names if n in appendable and in_scope(n, scope) and not is_system_topic(n)]
        chosen = sorted(self.rng.sample(existing, min(len(existing), self.workload.topics)))
        self.namespaces = [ns for ns in self.namespaces if in_scope(f"persistent://{ns}/sim", scope)]
        if len(chosen) < self.workload.topics and not self.namespaces:
            raise InputError(
                f"simulate: {len(chosen)} topic(s) in scope {','.join(scope) or '*'} a producer can append to, "
                f"and no namespace in that scope to create the other {self.workload.topics - len(chosen)} in"
            )
        for name in chosen:
            self._drive(name, own=False)
        while len(self.topics) < self.workload.topics:
            self._create_topic()

    def _drive(self, name: str, *, own: bool) -> None:
        now = self.clock.now_ms()
        with read_transaction(self.store.engine) as conn:
            ledger = conn.execute(
                select(t.ledgers)
                .where(t.ledgers.c.topic == name)
                .order_by(t.ledgers.c.ledger_id.desc())
                .limit(1)
            ).one()
            cursors = set(conn.execute(select(t.cursors.c.name).where(t.cursors.c.topic == name)).scalars())
            last = clients.last_entry(conn, name)
        topic = Topic(
            name=name,
            own=own,
            ledger_id=ledger.ledger_id,
            entries=ledger.entries,
            size_bytes=ledger.size_bytes,
            # When the open ledger was opened is not recorded; its first entry is the earliest it can have been.
            opened_ms=min(now, ledger.min_entry_ts_ms or now),
            max_open_ms=self.rollover.jittered_max_ms(self.rng),
        )
        if last is not None:
            topic.recent.append(last)
        self.topics[name] = topic
        try:
            clients.connect_producer(self.store, name, now_ms=now)
            topic.producer = True
        except clients.ProducerBlocked as exc:
            self.refused["connect-producer"] += 1
            self.last_problems.append(str(exc))
        for _ in range(self.workload.subscriptions):
            self._subscribe(topic, "latest", taken=cursors)

    def _fresh_name(self, prefix: str, taken: set[str]) -> str:
        while True:
            self.names += 1
            name = f"{prefix}{self.names}"
            if name not in taken:
                return name

    def _create_topic(self) -> Topic:
        namespace = self.rng.choice(self.namespaces)
        with read_transaction(self.store.engine) as conn:
            taken = set(
                conn.execute(select(t.topics.c.name).where(t.topics.c.namespace == namespace)).scalars()
            )
        name = self._fresh_name(f"persistent://{namespace}/sim-", taken)
        now = self.clock.now_ms()
        clients.create_topic(self.store, name, now_ms=now)
        self.log.event("create-topic", now, topic=name)
        self._drive(name, own=True)
        return self.topics[name]

    def _subscribe(self, topic: Topic, initial: str, *, taken: set[str] | None = None) -> Subscription:
        name = self._fresh_name("sim-", (taken or set()) | set(topic.subscriptions))
        profile, lag = self.workload.draw_profile(self.rng)
        now = self.clock.now_ms()
        mark_delete = clients.subscribe(self.store, topic.name, name, now_ms=now, initial=initial)
        sub = Subscription(name, profile, lag, own=True, acked=parse_position(mark_delete, name))
        topic.subscriptions[name] = sub
        self.log.event(
            "subscribe",
            now,
            topic=topic.name,
            subscription=name,
            initial=initial,
            profile=profile.value,
            lag=lag,
            markDelete=mark_delete,
        )
        if profile is not Profile.STUCK:
            clients.connect_consumer(self.store, topic.name, name, now_ms=now)
            sub.consumer = True
        return sub

    # --- producers and consumers ----------------------------------------------------------------------------

    def _publish(self) -> None:
        writable = [topic for topic in self.topics.values() if topic.producer]
        if not writable:
            return
        # Skewed as real topics are: the k-th topic (in the order they were attached) gets weight 1/k.
        topic = self.rng.choices(writable, weights=[1 / (k + 1) for k in range(len(writable))])[0]
        size = self.workload.payload_bytes
        messages = [
            {
                "key": f"key-{self.rng.randrange(self.workload.keys)}",
                "value": self.rng.randbytes(size).hex()[:size],
            }
            for _ in range(self.workload.batch)
        ]
        now = self.clock.now_ms()
        began = time.perf_counter()
        try:
            positions = clients.publish(self.store, topic.name, messages, now_ms=now)
        except InputError:
            self._forget_if_gone(topic)
            raise
        latency = (time.perf_counter() - began) * 1000
        self.latencies.append(latency)
        self.log.event(
            "publish",
            now,
            topic=topic.name,
            ms=round(latency, 3),
            entries=[[p, checksum(m["value"])] for p, m in zip(positions, messages, strict=True)],
        )
        parsed = [parse_position(p, topic.name) for p in positions]
        if parsed[0][0] != topic.ledger_id:  # the ledger rolled under it (never by this simulation)
            topic.ledger_id, topic.entries, topic.size_bytes = parsed[0][0], 0, 0
        topic.entries += len(parsed)
        topic.size_bytes += size * len(parsed)
        topic.recent.extend(parsed)
        self.published += len(parsed)
        self.published_bytes += size * len(parsed)
        self._roll_if_full(topic, now)

    def _forget_if_gone(self, topic: Topic) -> None:
        """A topic deleted under the simulation (by an operator, or by GC once it was idle) is no longer driven."""
        with read_transaction(self.store.engine) as conn:
            gone = conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic.name)).first() is None
        if gone:
            self.topics.pop(topic.name, None)
            self.log.event("topic-gone", self.clock.now_ms(), topic=topic.name)

    def _acknowledge_all(self) -> None:
        for topic in list(self.topics.values()):
            for sub in list(topic.subscriptions.values()):
                if sub.profile is Profile.STUCK or len(topic.recent) <= sub.lag:
                    continue
                target = topic.recent[-1 - sub.lag]
                if sub.acked is not None and target <= sub.acked:
                    continue
                now = self.clock.now_ms()
                try:
                    mark_delete = clients.acknowledge(
                        self.store, topic.name, sub.name, format_position(target), now_ms=now
                    )
                except InputError:
                    self._forget_if_gone(topic)
                    raise
                sub.acked = parse_position(mark_delete, sub.name)
                self.acknowledgements += 1
                self.log.event(
                    "ack",
                    now,
                    topic=topic.name,
                    subscription=sub.name,
                    position=format_position(target),
                    markDelete=mark_delete,
                )

    def _roll_full_ledgers(self) -> None:
        now = self.clock.now_ms()
        for topic in list(self.topics.values()):
            self._roll_if_full(topic, now)

    def _roll_if_full(self, topic: Topic, now: int) -> None:
        # An empty ledger never rolls (Pulsar rolls on time only a ledger that has entries).
        if topic.entries == 0 or not self.rollover.is_full(
            topic.entries, topic.size_bytes, now - topic.opened_ms, topic.max_open_ms
        ):
            return
        closed = topic.ledger_id
        topic.ledger_id = clients.roll_ledger(self.store, topic.name, now_ms=now)
        topic.entries, topic.size_bytes, topic.opened_ms = 0, 0, now
        topic.max_open_ms = self.rollover.jittered_max_ms(self.rng)
        self.rolled += 1
        self.log.event("roll", now, topic=topic.name, closed=closed, opened=topic.ledger_id)

    # --- operators -------------------------------------------------------------------------------------------

    def _operate(self, operation: Operation) -> None:
        handler = {
            Operation.SUBSCRIBE: self._op_subscribe,
            Operation.UNSUBSCRIBE: self._op_unsubscribe,
            Operation.RESET_CURSOR: self._op_reset_cursor,
            Operation.CREATE_TOPIC: self._op_create_topic,
            Operation.DELETE_TOPIC: self._op_delete_topic,
            Operation.SET_POLICIES: self._op_set_policies,
            Operation.HOLD: self._op_hold,
            Operation.RELEASE: self._op_release,
        }[operation]
        if handler():
            self.done[operation.value] += 1
        else:
            self.skipped[operation.value] += 1

    def _any_topic(self) -> Topic | None:
        return self.rng.choice(list(self.topics.values())) if self.topics else None

    def _own_subscription(self) -> tuple[Topic, Subscription] | None:
        owned = [
            (topic, sub) for topic in self.topics.values() for sub in topic.subscriptions.values() if sub.own
        ]
        return self.rng.choice(owned) if owned else None

    def _op_subscribe(self) -> bool:
        topic = self._any_topic()
        if topic is None:
            return False
        self._subscribe(topic, self.rng.choice(("earliest", "latest")))
        return True

    def _op_unsubscribe(self) -> bool:
        found = self._own_subscription()
        if found is None:
            return False
        topic, sub = found
        now = self.clock.now_ms()
        if sub.consumer:
            clients.disconnect_consumer(self.store, topic.name, sub.name, now_ms=now)
            sub.consumer = False
        clients.unsubscribe(self.store, topic.name, sub.name, now_ms=now)
        del topic.subscriptions[sub.name]
        self.log.event("unsubscribe", now, topic=topic.name, subscription=sub.name)
        return True

    def _op_reset_cursor(self) -> bool:
        found = self._own_subscription()
        if found is None:
            return False
        topic, sub = found
        now = self.clock.now_ms()
        back = self.rng.randint(1, self.workload.reset_back_seconds) * 1000
        result = admin.reset_cursor(
            self.store, topic.name, sub.name, now_ms=now, time_ms=now - back, actor=self.actor
        )
        sub.acked = parse_position(result["to"], sub.name)
        self.log.event(
            "reset-cursor",
            now,
            topic=topic.name,
            subscription=sub.name,
            timeMs=now - back,
            markDelete=result["to"],
        )
        return True

    def _op_create_topic(self) -> bool:
        if not self.namespaces:
            return False
        self._create_topic()
        return True

    def _op_delete_topic(self) -> bool:
        owned = [topic for topic in self.topics.values() if topic.own]
        if not owned or len(self.topics) < 2:  # keep one topic to publish to
            return False
        topic = self.rng.choice(owned)
        now = self.clock.now_ms()
        admin.delete_topic(
            self.store,
            topic.name,
            now_ms=now,
            purge_grace_seconds=self.grace_seconds,
            force=True,
            actor=self.actor,
        )
        del self.topics[topic.name]
        self.log.event("delete-topic", now, topic=topic.name)
        return True

    def _op_set_policies(self) -> bool:
        topic = self._any_topic()
        if topic is None:
            return False
        target = topic.name if self.rng.random() < 0.5 else str(TopicName.parse(topic.name).namespace_name)
        if self.rng.random() < 0.5:
            changes: dict[str, Any] = {
                "retention_policies": {
                    "retentionTimeInMinutes": self.rng.choice(RETENTION_MINUTES),
                    "retentionSizeInMB": self.rng.choice(RETENTION_MEGABYTES),
                }
            }
        else:
            changes = {"message_ttl_in_seconds": self.rng.choice(TTL_SECONDS)}
        now = self.clock.now_ms()
        detail = admin.set_policies(self.store, target, changes, now_ms=now, actor=self.actor)
        self.log.event("set-policies", now, target=target, changes=detail["changes"])
        return True

    def _op_hold(self) -> bool:
        topic = self._any_topic()
        if topic is None:
            return False
        target = topic.name if self.rng.random() < 0.5 else str(TopicName.parse(topic.name).namespace_name)
        if any(hold["target"] == target for hold in list_holds(self.store)):
            return False
        place_hold(self.store, target, reason=HOLD_REASON, actor=self.actor)
        self.holds.append(target)
        self.log.event("hold", self.clock.now_ms(), target=target)
        return True

    def _op_release(self) -> bool:
        if not self.holds:
            return False
        target = self.holds.pop(self.rng.randrange(len(self.holds)))
        lift_hold(self.store, target, actor=self.actor)
        self.log.event("release", self.clock.now_ms(), target=target)
        return True

    # --- the end ---------------------------------------------------------------------------------------------

    def _release(self) -> None:
        """Disconnect what it connected and lift the holds it placed (a client's clean shutdown)."""
        for topic in list(self.topics.values()):
            for sub in topic.subscriptions.values():
                if sub.consumer:
                    self._guarded(
                        "disconnect",
                        lambda topic=topic, sub=sub: clients.disconnect_consumer(
                            self.store, topic.name, sub.name, now_ms=self.clock.now_ms()
                        ),
                    )
            if topic.producer:
                self._guarded(
                    "disconnect",
                    lambda topic=topic: clients.disconnect_producer(
                        self.store, topic.name, now_ms=self.clock.now_ms()
                    ),
                )
        for target in self.holds:
            self._guarded("release", lambda target=target: lift_hold(self.store, target, actor=self.actor))
            self.log.event("release", self.clock.now_ms(), target=target)
        self.holds = []

    def summary(self) -> dict[str, Any]:
        seconds = max(0.001, (self.ended_ms - self.started_ms) / 1000)
        kinds = sorted(set(self.done) | set(self.refused) | set(self.skipped))
        return {
            "seed": self.workload.seed,
            "clock": self.workload.clock.value,
            "startedAt": format_ms(self.started_ms),
            "endedAt": format_ms(self.ended_ms),
            "seconds": round(seconds, 3),
            "interrupted": self.interrupted,
            "topics": len(self.topics),
            "published": {
                "entries": self.published,
                "bytes": self.published_bytes,
                "perSecond": round(self.published / seconds, 3),
            },
            "acknowledgements": self.acknowledgements,
            "ledgersRolled": self.rolled,
            "operations": {
                kind: {"done": self.done[kind], "refused": self.refused[kind], "skipped": self.skipped[kind]}
                for kind in kinds
            },
            "refused": dict(sorted(self.refused.items())),
            "faults": dict(sorted(self.faults.items())),
            "lastProblems": list(self.last_problems),
            "publishLatencyMs": latency_figures(self.latencies),
            "log": None if self.log.path is None else str(self.log.path),
        }

    def _progress_line(self, *, final: bool = False) -> None:
        if self.progress is None or not self.workload.progress_seconds:
            return
        elapsed = max(0.001, (self.clock.now_ms() - self.started_ms) / 1000)
        latency = latency_figures(self.latencies[-5000:])
        p50, p99 = latency["p50"], latency["p99"]
        self.progress.write(
            f"[{elapsed:7.0f} s] {self.published} published ({self.published / elapsed:.1f}/s), "
            f"{self.acknowledgements} acks, {self.rolled} ledgers rolled, {sum(self.done.values())} operations, "
            f"{sum(self.refused.values())} refused, {sum(self.faults.values())} faults; publish p50 "
            f"{'-' if p50 is None else f'{p50:.1f}'} ms p99 {'-' if p99 is None else f'{p99:.1f}'} ms"
            f"{' (done)' if final else ''}\n"
        )
        self.progress.flush()


@contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM ends the simulation as Ctrl-C does: its clients disconnect and its summary is printed."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: the caller stops it
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def simulate(
    store: Store,
    workload: Workload,
    rollover: Rollover,
    log: SimulationLog,
    *,
    progress: TextIO | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    """Run ``workload`` on ``store``; its summary (docs/cli.md, "Simulate")."""
    return Simulation(store, workload, rollover, log, progress=progress, actor=actor).run()
