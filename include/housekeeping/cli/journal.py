"""``housekeeping journal``: who did what, when and why, with the plan rows each applied action came from."""

from __future__ import annotations

from typing import Annotated

import typer

from housekeeping.cli.common import emit
from housekeeping.store.command_line import FormatOpt, MetadataOpt, StoreOpt, open_store

commands = typer.Typer()


@commands.command("journal")
def journal_command(
    store: StoreOpt,
    topic: Annotated[str | None, typer.Option("--topic", help="only this topic's entries")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="only this run's entries (its id, or part of it)")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="only the newest N entries")] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="only the entries of this namespace's topics")
    ] = None,
    mechanism: Annotated[
        str | None,
        typer.Option("--mechanism", help="only this mechanism's entries (or purge, restore, hold, admin)"),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", help="only the entries whose actor contains this")
    ] = None,
    metadata_url: MetadataOpt = None,
    fmt: FormatOpt = "text",
) -> None:
    """Who did what, when and why, with the plan rows each applied action came from (oldest first)."""
    from housekeeping.observe.journal_view import JournalFilter, format_text, journal_entries
    from housekeeping.store.store import read_transaction

    where = JournalFilter(topic=topic, namespace=namespace, mechanism=mechanism, run=run, actor=actor)
    with read_transaction(open_store(store, metadata_url).engine) as conn:
        entries = journal_entries(conn, where, limit=limit)
    if fmt == "text":
        typer.echo(format_text(entries))
    else:
        emit({"entries": entries}, fmt)
