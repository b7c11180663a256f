"""``housekeeping hold add | remove | list``: protecting a namespace or topic from every deleting or
cursor-moving action (docs/cli.md)."""

from __future__ import annotations

import uuid
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
    from housekeeping.store.holds import add_hold
    from housekeeping.store.journal import journal
    from housekeeping.store.store import write_transaction

    actor = current_actor()
    with write_transaction(open_store(store, metadata_url).engine) as conn:
        hold = add_hold(conn, target, reason=reason, actor=actor)
        _journal_hold(journal, conn, hold, "hold_added", actor)
    emit(hold.to_json(), "json")


@hold_app.command("remove")
def hold_remove(target: TargetArg, store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Remove a hold; the next runs treat the namespace or topic by the rules alone again."""
    from housekeeping.core.actor import current_actor
    from housekeeping.store.holds import remove_hold
    from housekeeping.store.journal import journal
    from housekeeping.store.store import write_transaction

    actor = current_actor()
    with write_transaction(open_store(store, metadata_url).engine) as conn:
        hold = remove_hold(conn, target)
        _journal_hold(journal, conn, hold, "hold_removed", actor)
    emit(hold.to_json(), "json")


@hold_app.command("list")
def hold_list(store: StoreOpt, metadata_url: MetadataOpt = None, fmt: FormatOpt = "json") -> None:
    """The holds in force."""
    from housekeeping.store.holds import load_holds
    from housekeeping.store.store import read_transaction

    with read_transaction(open_store(store, metadata_url).engine) as conn:
        holds = [hold.to_json() for _, hold in sorted(load_holds(conn).items())]
    if fmt == "text":
        typer.echo(
            "\n".join(f"{h['scope']:<9} {h['target']}  by {h['createdBy']}: {h['reason']}" for h in holds)
            or "no holds"
        )
    else:
        emit({"holds": holds}, fmt)


def _journal_hold(journal, conn, hold, status: str, actor: str) -> None:
    # Logical time 0: a hold is not a decision made for a logical time (recordedAt says when).
    journal(
        conn,
        run_id=f"cli-hold-{uuid.uuid4().hex[:8]}",
        mechanism="hold",
        topic=hold.target if hold.scope == "topic" else None,
        action="hold",
        status=status,
        detail={**hold.to_json(), "why": hold.reason},
        as_of_ms=0,
        actor=actor,
    )
