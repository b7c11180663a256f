"""``housekeeping topics | namespaces | topic-policies``: the admin paths of a live cluster, in the shape of
``pulsar-admin`` (docs/cli.md, "Admin"): reset a cursor, create or delete a subscription, delete a topic, set or
remove a namespace's or a topic's policies. A thin front end over ``housekeeping.store.admin``, which checks and
journals each change; every command prints what it changed as JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from housekeeping.cli.common import emit
from housekeeping.store.command_line import MetadataOpt, StoreOpt, open_store

if TYPE_CHECKING:
    from housekeeping.store.store import Store

topics_app = typer.Typer(
    no_args_is_help=True,
    help="A topic's subscriptions and the topic itself, as `pulsar-admin topics`: reset-cursor, "
    "create-subscription, unsubscribe, delete.",
)
namespaces_app = typer.Typer(
    no_args_is_help=True, help="A namespace's policies, as `pulsar-admin namespaces` (tenant/ns)."
)
topic_policies_app = typer.Typer(
    no_args_is_help=True, help="A topic's own policies, as `pulsar-admin topicPolicies` (persistent://...)."
)

TopicArg = Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic")]
# One argument for both policy groups: the commands are made once for each (``_policy_commands``).
TargetArg = Annotated[
    str,
    typer.Argument(
        help="tenant/namespace (namespaces), persistent://tenant/namespace/topic (topic-policies)"
    ),
]
SubscriptionOpt = Annotated[str, typer.Option("--subscription", "-s", help="the subscription's name")]
AtOpt = Annotated[
    str | None,
    typer.Option(
        "--at", help="when the change happens, ISO 8601 with timezone (default: now); the journal's time"
    ),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", "-f", help="disconnect connected clients instead of refusing")
]


def _now(at: str | None) -> int:
    from housekeeping.core.timeutil import parse_as_of, wall_clock_ms

    # The moment of a client's change, journaled; never a decision's "now".
    return parse_as_of(at) if at is not None else wall_clock_ms()


def _actor() -> str:
    from housekeeping.core.actor import current_actor

    return current_actor()


# --- topics ---------------------------------------------------------------------------------------------------


@topics_app.command("reset-cursor")
def reset_cursor(
    topic: TopicArg,
    subscription: SubscriptionOpt,
    store: StoreOpt,
    message_id: Annotated[
        str | None,
        typer.Option("--messageId", "-m", help="ledgerId:entryId, the next message the subscription reads"),
    ] = None,
    time: Annotated[
        str | None,
        typer.Option(
            "--time",
            "-t",
            help="a time back from --at (10m, 3h, 2d, 5w) or an ISO 8601 time: the next message read is the first "
            "published at or after it",
        ),
    ] = None,
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Move a subscription's cursor backward or forward, to a position or a publish time."""
    from housekeeping.core.admin_units import parse_seconds
    from housekeeping.core.errors import InputError
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.store.admin import reset_cursor as reset

    now = _now(at)
    time_ms = None
    if time is not None:
        time_ms = parse_as_of(time) if "T" in time else now - parse_seconds(time, "--time") * 1000
    if (message_id is None) == (time is None):
        raise InputError(
            f"topic {topic} subscription {subscription!r}: give --messageId or --time, one of them"
        )
    store_ = open_store(store, metadata_url)
    emit(
        reset(store_, topic, subscription, position=message_id, time_ms=time_ms, now_ms=now, actor=_actor()),
        "json",
    )


@topics_app.command("create-subscription")
def create_subscription(
    topic: TopicArg,
    subscription: SubscriptionOpt,
    store: StoreOpt,
    message_id: Annotated[
        str,
        typer.Option(
            "--messageId", "-m", help="latest, earliest or ledgerId:entryId (the first message read)"
        ),
    ] = "latest",
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Create a durable subscription."""
    from housekeeping.store.admin import subscribe

    emit(
        subscribe(
            open_store(store, metadata_url),
            topic,
            subscription,
            initial=message_id,
            now_ms=_now(at),
            actor=_actor(),
        ),
        "json",
    )


@topics_app.command("unsubscribe")
def unsubscribe(
    topic: TopicArg,
    subscription: SubscriptionOpt,
    store: StoreOpt,
    force: ForceOpt = False,
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Delete a subscription (refused while consumers are connected, unless --force)."""
    from housekeeping.store.admin import delete_subscription

    emit(
        delete_subscription(
            open_store(store, metadata_url), topic, subscription, force=force, now_ms=_now(at), actor=_actor()
        ),
        "json",
    )


@topics_app.command("delete")
def delete(
    topic: TopicArg,
    store: StoreOpt,
    force: ForceOpt = False,
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Delete a topic: its metadata at once, its ledgers after the purge grace period (HOUSEKEEPING_PURGE_GRACE_
    SECONDS); `housekeeping restore TOPIC` brings it back whole until then."""
    from housekeeping.core.settings import Settings
    from housekeeping.store.admin import delete_topic

    grace = Settings.from_env().purge_grace_seconds
    emit(
        delete_topic(
            open_store(store, metadata_url),
            topic,
            force=force,
            now_ms=_now(at),
            purge_grace_seconds=grace,
            actor=_actor(),
        ),
        "json",
    )


# --- policies: one set of commands for namespaces and topics ------------------------------------------------


def _set(
    store: Store, metadata_url: str | None, target: str, changes: dict[str, Any], at: str | None
) -> None:
    from housekeeping.store.admin import set_policies

    emit(
        set_policies(open_store(store, metadata_url), target, changes, now_ms=_now(at), actor=_actor()),
        "json",
    )


def _check_target(ctx: typer.Context, target: str) -> None:
    """The target must be of the group's kind: a namespace under ``namespaces``, a topic under ``topic-policies``
    (one set of commands serves both groups)."""
    from housekeeping.core.errors import InputError

    topic_group = ctx.parent is not None and ctx.parent.info_name == "topic-policies"
    if ("://" in target) != topic_group:
        expected = "a topic (persistent://tenant/ns/topic)" if topic_group else "a namespace (tenant/ns)"
        raise InputError(f"{target!r} is not {expected}")


def show(ctx: typer.Context, target: TargetArg, store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Its own policies as stored (and a topic's effective ones)."""
    from housekeeping.store.admin import policies_of

    _check_target(ctx, target)
    emit(policies_of(open_store(store, metadata_url), target), "json")


def set_retention(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    time: Annotated[str, typer.Option("--time", "-t", help="120 (s), 10m, 3h, 2d, 5w; 0 none; -1 infinite")],
    size: Annotated[str, typer.Option("--size", "-s", help="4096 (bytes), 10M, 16G; 0 none; -1 infinite")],
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Retention: how long and how much consumed data is kept."""
    from housekeeping.core.admin_units import parse_bytes, parse_seconds

    _check_target(ctx, target)
    seconds, size_bytes = parse_seconds(time, "--time"), parse_bytes(size, "--size")
    retention = {
        "retentionTimeInMinutes": -1 if seconds == -1 else seconds // 60,
        "retentionSizeInMB": -1 if size_bytes == -1 else size_bytes // (1 << 20),
    }
    _set(store, metadata_url, target, {"retention_policies": retention}, at)


def set_message_ttl(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    ttl: Annotated[str, typer.Option("--ttl", "--messageTTL", help="120 (s), 10m, 3h; 0 disables")],
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Message TTL: unacknowledged messages older than it are acknowledged (expiry)."""
    from housekeeping.core.admin_units import parse_seconds

    _check_target(ctx, target)
    _set(store, metadata_url, target, {"message_ttl_in_seconds": parse_seconds(ttl, "--ttl")}, at)


def set_backlog_quota(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    policy: Annotated[
        str,
        typer.Option(
            "--policy", "-p", help="producer_request_hold, producer_exception or consumer_backlog_eviction"
        ),
    ],
    limit_size: Annotated[
        str | None, typer.Option("--limit-size", "--limitSize", "-l", help="10M, 2G (destination_storage)")
    ] = None,
    limit_time: Annotated[
        str | None, typer.Option("--limit-time", "--limitTime", help="1h, 2d (message_age)")
    ] = None,
    quota_type: Annotated[
        str, typer.Option("--type", help="destination_storage or message_age")
    ] = "destination_storage",
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """A backlog quota of one type, replacing that type's whole."""
    from housekeeping.core.admin_units import parse_bytes, parse_seconds
    from housekeeping.store.admin import policies_of

    _check_target(ctx, target)
    quota: dict[str, Any] = {"policy": policy}
    if limit_size is not None:
        quota["limitSize"] = parse_bytes(limit_size, "--limit-size")
    if limit_time is not None:
        quota["limitTime"] = parse_seconds(limit_time, "--limit-time")
    own = policies_of(open_store(store, metadata_url), target)["policies"]
    quotas = {**(own.get("backlog_quota_map") or {}), quota_type: quota}
    _set(store, metadata_url, target, {"backlog_quota_map": quotas}, at)


def set_inactive_topic_policies(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    delete_mode: Annotated[
        str,
        typer.Option(
            "--delete-mode", "-m", help="delete_when_no_subscriptions or delete_when_subscriptions_caught_up"
        ),
    ],
    max_inactive_duration: Annotated[
        str, typer.Option("--max-inactive-duration", "-t", help="1h, 2d: inactive this long, it goes")
    ],
    enable_delete_while_inactive: Annotated[
        bool,
        typer.Option(
            "--enable-delete-while-inactive/--disable-delete-while-inactive",
            "-e/-d",
            help="whether inactive topics are deleted at all",
        ),
    ],
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Inactive-topic deletion."""
    from housekeeping.core.admin_units import parse_seconds

    _check_target(ctx, target)
    value = {
        "inactiveTopicDeleteMode": delete_mode,
        "maxInactiveDurationSeconds": parse_seconds(max_inactive_duration, "--max-inactive-duration"),
        "deleteWhileInactive": enable_delete_while_inactive,
    }
    _set(store, metadata_url, target, {"inactive_topic_policies": value}, at)


def set_offload_threshold(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    size: Annotated[
        str | None, typer.Option("--size", "-s", help="10M, 16G: offload once more is stored")
    ] = None,
    time: Annotated[
        str | None, typer.Option("--time", "-t", help="1h, 2d: offload ledgers older than this")
    ] = None,
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Offload thresholds (by size, by time): -1 disables one."""
    from housekeeping.core.admin_units import parse_bytes, parse_seconds
    from housekeeping.core.errors import InputError

    _check_target(ctx, target)
    if size is None and time is None:
        raise InputError(f"{target}: give --size, --time or both")
    changes: dict[str, Any] = {}
    if size is not None:
        changes["offload_threshold"] = parse_bytes(size, "--size")
    if time is not None:
        changes["offload_threshold_in_seconds"] = parse_seconds(time, "--time")
    _set(store, metadata_url, target, changes, at)


def set_offload_deletion_lag(
    ctx: typer.Context,
    target: TargetArg,
    store: StoreOpt,
    lag: Annotated[
        str, typer.Option("--lag", "-l", help="10m, 4h: an offloaded ledger's local copy goes after")
    ],
    at: AtOpt = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """How long an offloaded ledger keeps its local copy (-1: always)."""
    from housekeeping.core.admin_units import parse_seconds

    _check_target(ctx, target)
    seconds = parse_seconds(lag, "--lag")
    _set(
        store, metadata_url, target, {"offload_deletion_lag_ms": -1 if seconds == -1 else seconds * 1000}, at
    )


def _removal(key: str, doc: str) -> Callable[..., None]:
    def remove(
        ctx: typer.Context,
        target: TargetArg,
        store: StoreOpt,
        at: AtOpt = None,
        metadata_url: MetadataOpt = None,
    ) -> None:
        _check_target(ctx, target)
        _set(store, metadata_url, target, {key: None}, at)

    remove.__doc__ = doc
    return remove


# pulsar-admin's names; the same commands under both groups.
POLICY_COMMANDS: dict[str, Callable[..., None]] = {
    "set-retention": set_retention,
    "set-message-ttl": set_message_ttl,
    "set-backlog-quota": set_backlog_quota,
    "set-inactive-topic-policies": set_inactive_topic_policies,
    "set-offload-threshold": set_offload_threshold,
    "set-offload-deletion-lag": set_offload_deletion_lag,
    "remove-retention": _removal("retention_policies", "Remove its retention (the level below applies)."),
    "remove-message-ttl": _removal(
        "message_ttl_in_seconds", "Remove its message TTL (the level below applies)."
    ),
    "remove-backlog-quota": _removal(
        "backlog_quota_map", "Remove its backlog quotas (the level below applies)."
    ),
    "remove-inactive-topic-policies": _removal(
        "inactive_topic_policies", "Remove its inactive-topic policies (the level below applies)."
    ),
    "remove-offload-threshold": _removal("offload_threshold", "Remove its offload size threshold."),
    "remove-offload-deletion-lag": _removal("offload_deletion_lag_ms", "Remove its offload deletion lag."),
}
namespaces_app.command("policies")(show)
topic_policies_app.command("get")(show)
for _name, _command in POLICY_COMMANDS.items():
    namespaces_app.command(_name)(_command)
    topic_policies_app.command(_name)(_command)
