"""``housekeeping load | generate | upgrade | inspect``: making a store and reading it back (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from housekeeping.cli.common import emit
from housekeeping.core.errors import InputError
from housekeeping.store.command_line import FormatOpt, MetadataOpt, StoreOpt, open_store

commands = typer.Typer()


@commands.command()
def load(
    store: StoreOpt,
    manifest: Annotated[Path, typer.Option("--manifest", help="manifest JSON file (docs/manifest.md)")],
    metadata_url: MetadataOpt = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="when the loaded policies are in force from, ISO 8601 with timezone (default: now): where the "
            "store's policy history begins",
        ),
    ] = None,
) -> None:
    """Create or replace a store from a manifest. Validates everything before changing anything."""
    from housekeeping.core.errors import InputError
    from housekeeping.core.timeutil import parse_as_of, wall_clock_ms
    from housekeeping.store.manifest.load import load_manifest

    try:
        at_ms = parse_as_of(at) if at is not None else wall_clock_ms()
    except InputError as bad:
        raise InputError(f"--at: {bad}") from None
    result = load_manifest(store, manifest, metadata_url, at_ms=at_ms)
    typer.echo(f"loaded {manifest} into store {result.root}", err=True)


@commands.command()
def generate(
    store: StoreOpt,
    topics: Annotated[int, typer.Option("--topics", help="number of topics")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="random seed (same seed, same store)")] = 7,
    entries_per_ledger: Annotated[int, typer.Option("--entries-per-ledger")] = 200,
    max_ledgers_per_topic: Annotated[int, typer.Option("--max-ledgers-per-topic")] = 12,
    payload_bytes: Annotated[int, typer.Option("--payload-bytes", help="mean payload size")] = 120,
    reference: Annotated[
        str, typer.Option("--reference", help="the generator's 'now' (ISO 8601)")
    ] = "2026-11-01T00:00:00Z",
    metadata_url: MetadataOpt = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = False,
    history_days: Annotated[
        int,
        typer.Option(
            "--history-days", help="stretch each topic's closed ledgers over this many days (0: hours)"
        ),
    ] = 0,
    metadata_only: Annotated[
        bool,
        typer.Option(
            "--metadata-only",
            help="describe the ledgers in the metadata only, no entry files (a million topics on one disk)",
        ),
    ] = False,
) -> None:
    """Generate a deterministic synthetic store (demo size in seconds; benchmark size with more topics/entries)."""
    from housekeeping.store.generate import GenerateOptions, generate_store

    opts = GenerateOptions(
        topics,
        seed,
        entries_per_ledger,
        max_ledgers_per_topic,
        payload_bytes,
        reference,
        progress,
        history_days,
        metadata_only,
    )
    result = generate_store(store, opts, metadata_url)
    typer.echo(
        f"generated {topics} topics (+1 system topic, +3 partitions of a partitioned topic) into store "
        f"{result.root}",
        err=True,
    )


@commands.command()
def upgrade(store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Migrate a store's metadata schema to this version (idempotent; back up the metadata first). Every
    other command refuses a store an older version wrote, naming this command."""
    from housekeeping.store.store import Store

    emit(Store.open(store, metadata_url, check_schema=False).upgrade_schema(), "json")


@commands.command()
def inspect(
    store: StoreOpt,
    fmt: FormatOpt = "json",
    messages: Annotated[bool, typer.Option("--messages/--no-messages", help="include entries")] = False,
    metadata_url: MetadataOpt = None,
    compacted: Annotated[
        bool,
        typer.Option(
            "--compacted",
            help="print the compacted view per key instead (compacted ledger + entries after its horizon)",
        ),
    ] = False,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="with --compacted: only these topics (repeatable)")
    ] = None,
) -> None:
    """Print the store's current state in the manifest's shape (or, with --compacted, the compacted view)."""
    from housekeeping.store.manifest.export import export_manifest

    opened = open_store(store, metadata_url)
    if compacted:
        from housekeeping.store.compacted_view import compacted_view

        emit({"compactedView": compacted_view(opened, topic or None)}, "json")
        return
    if topic:
        raise InputError("--topic is only used with --compacted")
    emit(export_manifest(opened, with_messages=messages), fmt if fmt != "text" else "json")
