"""What every ``housekeeping`` command group shares, the library's (``housekeeping.cli``) and a mechanism's own
(``housekeeping erase``): the options that name a store and its metadata database, the output format, and opening
the store they name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from housekeeping.store.store import Store

StoreOpt = Annotated[Path, typer.Option("--store", help="store root directory")]
MetadataOpt = Annotated[
    str | None,
    typer.Option(
        "--metadata-url", help="SQLAlchemy URL (default: SQLite in the store, or HOUSEKEEPING_METADATA_URL)"
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", help="json or text")]


def open_store(root: Path, metadata_url: str | None) -> Store:
    return Store.open(root, metadata_url)


def check_format(fmt: str) -> None:
    if fmt not in ("json", "text"):
        raise typer.BadParameter(f"--format must be json or text, got {fmt!r}")


def print_json(document: object) -> None:
    typer.echo(json.dumps(document, indent=2, sort_keys=False))
