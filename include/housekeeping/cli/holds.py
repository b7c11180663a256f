"""``housekeeping hold add | remove | list``: protecting a namespace or topic from every deleting or
cursor-moving action (docs/cli.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from housekeeping.cli.common import emit
from housekeeping.store.command_line import FormatOpt, MetadataOpt, StoreOpt, open_store

hold_app = typer.Typer(
    no_args_is_help=True,
    help="Protect a namespace (tenant/ns) or topic (persistent://...) from every deleting or cursor-moving "
    "action: trim, expiry, backlog eviction, inactive-topic GC, compaction, purge.",
)
TargetArg = Annotated[str, typer.Argument(help="tenant/namespace or persistent://tenant/namespace/topic")]


@hold_app.command("add")
def hold_add(
    target: TargetArg,
    store: StoreOpt,
    reason: Annotated[str, typer.Option("--reason", help="why it is held (shown in plans and the journal)")],
    metadata_url: MetadataOpt = None,
) -> None:
    """Hold a namespace or topic (a partitioned topic's name holds its partitions)."""
    from housekeeping.core.actor import current_actor
    from housekeeping.store.holds import place_hold

    hold = place_hold(open_store(store, metadata_url), target, reason=reason, actor=current_actor())
    emit(hold.to_json(), "json")


@hold_app.command("remove")
def hold_remove(target: TargetArg, store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Remove a hold; the next runs treat the namespace or topic by the rules alone again."""
    from housekeeping.core.actor import current_actor
    from housekeeping.store.holds import lift_hold

    emit(lift_hold(open_store(store, metadata_url), target, actor=current_actor()).to_json(), "json")


@hold_app.command("list")
def hold_list(store: StoreOpt, metadata_url: MetadataOpt = None, fmt: FormatOpt = "json") -> None:
    """The holds in force."""
    from housekeeping.store.holds import list_holds

    holds = list_holds(open_store(store, metadata_url))
    if fmt == "text":
        typer.echo(
            "\n".join(f"{h['scope']:<9} {h['target']}  by {h['createdBy']}: {h['reason']}" for h in holds)
            or "no holds"
        )
    else:
        emit({"holds": holds}, fmt)
