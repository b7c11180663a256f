"""What a simulation does, declared and checked before it starts: the workload's options, Pulsar's ledger rollover
rule, the consumers' acknowledgement profiles and the kinds of operator change it makes. Pure: no store, no clock."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig


class Clock(StrEnum):
    """``real``: the wall clock, sleeping between events (a live store beside running DAGs). ``simulated``: a clock
    that jumps to each next event from ``--start`` (hours of a store's life written in seconds)."""

    REAL = "real"
    SIMULATED = "simulated"


class Profile(StrEnum):
    """How a subscription's consumer acknowledges: all it was sent, a number of entries behind the last, or never
    (its consumer went away: a stuck subscription, the backlog every quota and TTL exists for)."""

    CAUGHT_UP = "caught_up"
    LAGGING = "lagging"
    STUCK = "stuck"


class Operation(StrEnum):
    """The changes clients and operators make to a live store between and during housekeeping runs."""

    SUBSCRIBE = "subscribe"  # a new durable subscription, at earliest or latest
    UNSUBSCRIBE = "unsubscribe"  # one the simulation created
    RESET_CURSOR = "reset-cursor"  # backward to a publish time, as an operator replaying
    CREATE_TOPIC = "create-topic"
    DELETE_TOPIC = "delete-topic"  # one the simulation created (forced: its clients are disconnected)
    SET_POLICIES = "set-policies"  # retention or TTL, on a namespace or a topic
    HOLD = "hold"
    RELEASE = "release"  # a hold the simulation placed


# How often each operation is drawn, relative to the others.
OPERATION_WEIGHTS: dict[Operation, int] = {
    Operation.SUBSCRIBE: 3,
    Operation.UNSUBSCRIBE: 2,
    Operation.RESET_CURSOR: 2,
    Operation.CREATE_TOPIC: 1,
    Operation.DELETE_TOPIC: 1,
    Operation.SET_POLICIES: 2,
    Operation.HOLD: 1,
    Operation.RELEASE: 1,
}

# The policy values a simulated operator picks from (each a valid value on its own; a combination Pulsar's rules
# refuse, such as a backlog quota above the new retention, is refused by the admin path and counted as refused).
RETENTION_MINUTES = (5, 60, 1440, -1)
RETENTION_MEGABYTES = (1, 100, -1)
TTL_SECONDS = (None, 60, 600, 3600)


@dataclass(frozen=True)
class Rollover:
    """Pulsar's ledger rollover (``ManagedLedgerImpl#currentLedgerIsFull``): a ledger is full when it holds
    ``managedLedgerMaxEntriesPerLedger`` entries or ``managedLedgerMaxSizePerLedgerMbytes``, or has been open
    ``managedLedgerMaxLedgerRolloverTimeMinutes`` (that limit drawn per ledger up to 5% above, as Pulsar spreads
    the rolls of topics created together); a full ledger rolls only once it has been open longer than
    ``managedLedgerMinLedgerRolloverTimeMinutes``."""

    max_entries: int
    max_bytes: int
    min_ms: int
    max_ms: int

    @classmethod
    def of(
        cls,
        broker: BrokerConfig,
        *,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        min_seconds: int | None = None,
        max_seconds: int | None = None,
    ) -> Rollover:
        rule = cls(
            max_entries=broker["managedLedgerMaxEntriesPerLedger"] if max_entries is None else max_entries,
            max_bytes=broker["managedLedgerMaxSizePerLedgerMbytes"] * 1024 * 1024
            if max_bytes is None
            else max_bytes,
            min_ms=(
                broker["managedLedgerMinLedgerRolloverTimeMinutes"] * 60
                if min_seconds is None
                else min_seconds
            )
            * 1000,
            max_ms=(
                broker["managedLedgerMaxLedgerRolloverTimeMinutes"] * 60
                if max_seconds is None
                else max_seconds
            )
            * 1000,
        )
        if rule.max_entries < 1 or rule.max_bytes < 1:
            raise InputError("--ledger-max-entries and --ledger-max-size must be at least 1")
        if rule.min_ms < 0 or rule.max_ms < 1:
            raise InputError("--ledger-min-rollover must be >= 0 and --ledger-max-rollover at least 1s")
        return rule

    def jittered_max_ms(self, rng: random.Random) -> int:
        return int(self.max_ms * (1 + rng.random() * 5 / 100))

    def is_full(self, entries: int, size_bytes: int, open_ms: int, max_ms: int) -> bool:
        """Whether the current ledger rolls now: ``open_ms`` since it opened, ``max_ms`` its own jittered limit."""
        if not (entries >= self.max_entries or size_bytes >= self.max_bytes or open_ms >= max_ms):
            return False
        return open_ms > self.min_ms if self.min_ms > 0 else True


@dataclass(frozen=True)
class Workload:
    """The options of ``housekeeping simulate`` (docs/cli.md), each checked with its option's name."""

    duration_seconds: int
    seed: int = 1
    rate: float = 50.0  # entries a second, over every topic
    batch: int = 10  # entries per publish call (a producer's batch)
    topics: int = 20
    scope: Sequence[str] = ()
    subscriptions: int = 2  # created per topic the simulation drives
    stuck_share: float = 0.1
    lagging_share: float = 0.3
    max_lag: int = 500  # entries a lagging subscription stays behind, drawn per subscription in 1..max_lag
    ack_interval_seconds: int = 1
    operations_per_minute: float = 6.0
    operations: Sequence[Operation] = field(default_factory=lambda: tuple(Operation))
    payload_bytes: int = 256
    keys: int = 100
    reset_back_seconds: int = 600  # a cursor reset goes back up to this far
    clock: Clock = Clock.REAL
    start_ms: int | None = None  # the simulated clock's first moment
    progress_seconds: int = 10

    def __post_init__(self) -> None:
        checks = [
            (self.duration_seconds >= 1, "--duration must be at least 1s"),
            (self.rate >= 0 and math.isfinite(self.rate), "--rate must be a number >= 0 (entries a second)"),
            (1 <= self.batch <= 10_000, "--batch must be 1..10000 entries"),
            (self.topics >= 1, "--topics must be at least 1"),
            (self.subscriptions >= 0, "--subscriptions must be >= 0"),
            (0 <= self.stuck_share <= 1, "--stuck-share must be 0..1"),
            (0 <= self.lagging_share <= 1, "--lagging-share must be 0..1"),
            (self.stuck_share + self.lagging_share <= 1, "--stuck-share + --lagging-share must be at most 1"),
            (self.max_lag >= 1, "--max-lag must be at least 1"),
            (self.ack_interval_seconds >= 1, "--ack-interval must be at least 1s"),
            (
                self.operations_per_minute >= 0 and math.isfinite(self.operations_per_minute),
                "--ops-per-minute must be >= 0",
            ),
            (1 <= self.payload_bytes <= 1 << 20, "--payload-bytes must be 1..1048576"),
            (self.keys >= 1, "--keys must be at least 1"),
            (self.reset_back_seconds >= 1, "--reset-back must be at least 1s"),
            (self.progress_seconds >= 0, "--progress must be >= 0 (0: no progress line)"),
            (
                self.clock is Clock.SIMULATED or self.start_ms is None,
                "--start is the simulated clock's start: give it with --clock simulated",
            ),
            (
                self.clock is Clock.REAL or self.start_ms is not None,
                "--clock simulated needs --start (ISO 8601 with a timezone)",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)

    def draw_profile(self, rng: random.Random) -> tuple[Profile, int]:
        """A new subscription's profile and, for a lagging one, how many entries behind the last it acknowledges."""
        draw = rng.random()
        if draw < self.stuck_share:
            return Profile.STUCK, 0
        if draw < self.stuck_share + self.lagging_share:
            return Profile.LAGGING, rng.randint(1, self.max_lag)
        return Profile.CAUGHT_UP, 0

    def draw_operation(self, rng: random.Random) -> Operation:
        kinds = list(self.operations)
        return rng.choices(kinds, weights=[OPERATION_WEIGHTS[k] for k in kinds])[0]


def parse_operations(text: str) -> tuple[Operation, ...]:
    """``--ops subscribe,reset-cursor,...`` (``all``: every kind; ``none``: no operator changes)."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return tuple(Operation)
    if words == ["none"]:
        return ()
    known = {op.value: op for op in Operation}
    unknown = [w for w in words if w not in known]
    if unknown:
        raise InputError(f"--ops: unknown operation {unknown[0]!r} (known: {', '.join(known)}, all, none)")
    return tuple(dict.fromkeys(known[w] for w in words))


def latency_figures(samples_ms: Sequence[float]) -> dict[str, float | int | None]:
    """p50, p99 and the maximum of the publish calls' latencies, in ms (None before two calls)."""
    if len(samples_ms) < 2:
        only = samples_ms[0] if samples_ms else None
        return {"count": len(samples_ms), "p50": only, "p99": only, "max": only}
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return {
        "count": len(samples_ms),
        "p50": round(cuts[49], 3),
        "p99": round(cuts[98], 3),
        "max": round(max(samples_ms), 3),
    }
