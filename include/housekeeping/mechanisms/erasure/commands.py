"""``housekeeping erase``: key erasure's command group (docs/cli.md): record a request, list them with their
state. The key_erasure DAG (``plan|apply erasure``) acts on a request once its requested-at is at or before the
run's as-of."""

from __future__ import annotations

from typing import Annotated

import typer

from housekeeping.store.command_line import (
    FormatOpt,
    MetadataOpt,
    StoreOpt,
    check_format,
    open_store,
    print_json,
)

erase_app = typer.Typer(
    no_args_is_help=True,
    help="Key erasure: forget one key everywhere a topic (or a namespace) stores it, raw and compacted ledgers.",
)


@erase_app.command("request")
def erase_request(
    store: StoreOpt,
    reason: Annotated[str, typer.Option("--reason", help="why (kept with the request and in the journal)")],
    topic: Annotated[
        str | None, typer.Option("--topic", help="persistent://tenant/ns/topic (a partitioned topic: all)")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="tenant/namespace: every topic")
    ] = None,
    requested_at: Annotated[
        str | None,
        typer.Option(
            "--requested-at",
            help="when it takes effect, ISO 8601 (default: now); runs as of then or later act",
        ),
    ] = None,
    metadata_url: MetadataOpt = None,
    key: Annotated[str | None, typer.Argument(help="the message key to erase")] = None,
    key_sha256: Annotated[
        str | None,
        typer.Option(
            "--key-sha256", help="the key's SHA-256 in hex, instead of KEY (the key is then typed nowhere)"
        ),
    ] = None,
) -> None:
    """Record a request to erase KEY (or the key whose SHA-256 is --key-sha256) from a topic or a namespace;
    prints the request."""
    from housekeeping.core.actor import current_actor
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.mechanisms.erasure.requests import add_request

    requested_at_ms = parse_as_of(requested_at) if requested_at is not None else None
    request = add_request(
        open_store(store, metadata_url),
        key=key,
        key_sha256=key_sha256,
        topic=topic,
        namespace=namespace,
        reason=reason,
        requested_at_ms=requested_at_ms,
        actor=current_actor(),
    )
    print_json(request)


@erase_app.command("list")
def erase_list(store: StoreOpt, metadata_url: MetadataOpt = None, fmt: FormatOpt = "text") -> None:
    """Every erasure request with its state: pending, held (and by what), done (and its proof), failed (and why)."""
    from housekeeping.mechanisms.erasure.requests import format_text, list_requests

    check_format(fmt)
    requests = list_requests(open_store(store, metadata_url))
    if fmt == "text":
        typer.echo(format_text(requests))
    else:
        print_json({"requests": requests})
