"""What the command groups of ``housekeeping`` share beyond ``housekeeping.store.command_line`` (the store's
options): the logical-time and scope options, and printing a document as JSON or for a person."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from housekeeping.store.command_line import check_format, print_json

AsOfOpt = Annotated[
    str, typer.Option("--as-of", help="logical time, ISO 8601 with timezone (e.g. 2026-11-22T06:00:00Z)")
]
ScopeOpt = Annotated[
    str | None,
    typer.Option("--scope", help="comma-separated globs: tenant, tenant/ns or persistent://... topics"),
]


def emit(document: object, fmt: str) -> None:
    check_format(fmt)
    if fmt == "json":
        print_json(document)
    else:
        typer.echo(as_text(document))


def as_text(document: object) -> str:
    if isinstance(document, dict) and "sweep" in document:
        from housekeeping.what_if.sweep import format_text

        return format_text(document)
    if isinstance(document, dict) and ("difference" in document or "mechanisms" in document):
        from housekeeping.what_if.what_if import format_text

        return format_text(document)
    if isinstance(document, dict) and "actions" in document:
        lines = [f"{document['mechanism']} plan as of {document['asOf']}: {len(document['actions'])} actions"]
        lines += [
            f"  {a['action']:<14} {a['topic']} {a.get('ledgerId', a.get('subscription', ''))}  {a['reason']}"
            for a in document["actions"]
        ]
        lines.append(f"blockers: {len(document['blockers'])}")
        lines += [
            f"  {b['kind']:<20} {b['topic']} {b['bytes']} bytes  {b['detail']}" for b in document["blockers"]
        ]
        return "\n".join(lines)
    return json.dumps(document, indent=2)
