"""``housekeeping usage | forecast``: chargeback and the capacity forecast from the store's own record
(docs/semantics.md §12, docs/cli.md)."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated

import typer

from housekeeping.cli.common import AsOfOpt
from housekeeping.store.command_line import MetadataOpt, StoreOpt, open_store, print_json

commands = typer.Typer()

TenantOpt = Annotated[str | None, typer.Option("--tenant", help="only this tenant")]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="only this namespace (tenant/ns)")]
USAGE_COLUMNS = ("tenant", "namespace", "topic", "tier", "byteHours", "avgBytes", "peakBytes")


def _check_output(fmt: str, allowed: tuple[str, ...]) -> None:
    from housekeeping.core.errors import InputError

    if fmt not in allowed:
        raise InputError(f"--format {fmt!r} is not one of {', '.join(allowed)}")


@commands.command("usage")
def usage_command(
    store: StoreOpt,
    from_: Annotated[str, typer.Option("--from", help="start of the period (ISO 8601, included)")],
    to: Annotated[
        str, typer.Option("--to", help="end of the period (ISO 8601, excluded); the record as of it")
    ],
    by: Annotated[str, typer.Option("--by", help="tenant, namespace or topic")] = "namespace",
    tier: Annotated[
        str | None,
        typer.Option(
            "--tier", help="local (disks, x write quorum), tier (object tier) or listed (the policies' view)"
        ),
    ] = None,
    tenant: TenantOpt = None,
    namespace: NamespaceOpt = None,
    metadata_url: MetadataOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="json or csv")] = "json",
) -> None:
    """Byte-hours, average and peak bytes per tenant, namespace or topic and tier over a period."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.record import read_record
    from housekeeping.observe.capacity.usage import usage

    _check_output(fmt, ("json", "csv"))
    from_ms, to_ms = parse_as_of(from_), parse_as_of(to)
    record = read_record(open_store(store, metadata_url), to_ms)
    document = usage(
        record, from_ms=from_ms, to_ms=to_ms, by=by, tier=tier, tenant=tenant, namespace=namespace
    )
    if fmt == "json":
        print_json(document)
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=USAGE_COLUMNS, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(document["rows"])
    typer.echo(out.getvalue(), nl=False)


@commands.command("forecast")
def forecast_command(
    store: StoreOpt,
    as_of: AsOfOpt,
    horizon: Annotated[str, typer.Option("--horizon", help="how far to look (1h to 5y), e.g. 30d")] = "30d",
    window: Annotated[str, typer.Option("--window", help="the ingest history fitted (3d to 365d)")] = "28d",
    backtest_days: Annotated[
        str, typer.Option("--backtest", help="the backtest's forecast is made this long before the as-of")
    ] = "7d",
    metadata_url: MetadataOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="json")] = "json",
) -> None:
    """When each namespace meets its limits and each tenant its budgets (HOUSEKEEPING_CAPACITY_BUDGETS)."""
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.forecast import ForecastOptions, forecast, kept_cursors
    from housekeeping.observe.capacity.record import read_record

    _check_output(fmt, ("json",))
    options = ForecastOptions.parse(horizon, window, backtest_days)
    budgets = Settings.from_env().capacity_budgets
    opened = open_store(store, metadata_url)
    record = read_record(opened, parse_as_of(as_of))
    print_json(
        forecast(
            record,
            horizon_s=options.horizon_s,
            window_days=options.window_days,
            backtest_days=options.backtest_days,
            budgets=budgets,
            cursor_history=kept_cursors(opened),
        )
    )


BACKTEST_COLUMNS = (
    "tenant",
    "namespace",
    "tier",
    "actualByteHours",
    "alternativeByteHours",
    "actualPeakBytes",
    "alternativePeakBytes",
    "deletedEarlierBytes",
    "keptLongerBytes",
    "skippedUnacknowledgedEntriesLow",
    "skippedUnacknowledgedEntriesHigh",
)


@commands.command("backtest")
def backtest_command(
    store: StoreOpt,
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            help="the alternative: a policy overlay (broker, namespaces, topics), as `what-if --policies` takes",
        ),
    ],
    from_: Annotated[
        str,
        typer.Option("--from", help="start of the period (ISO 8601): the alternative is in force from it"),
    ],
    to: Annotated[
        str, typer.Option("--to", help="end of the period (ISO 8601, excluded); the record as of it")
    ],
    metadata_url: MetadataOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="json or csv")] = "json",
    save: Annotated[
        bool,
        typer.Option(
            "--save",
            help="also write its page under <store>/reports/backtests/ (the storage report shows it)",
        ),
    ] = False,
) -> None:
    """What a policy change would have done over the store's own history: bytes held and byte-hours in fact and
    under the alternative, the deletions and expiries it would have made, and when."""
    from pathlib import Path

    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.backtest import backtest_store
    from housekeeping.what_if.overlay import PolicyOverlay

    _check_output(fmt, ("json", "csv"))
    from_ms, to_ms = parse_as_of(from_), parse_as_of(to)
    overlay = PolicyOverlay.read(Path(policies))
    opened = open_store(store, metadata_url)
    grace_ms = Settings.from_env().purge_grace_seconds * 1000
    document = backtest_store(opened, overlay, from_ms=from_ms, to_ms=to_ms, purge_grace_ms=grace_ms)
    if save:
        from housekeeping.observe.capacity.report import save_backtest

        typer.echo(
            f"saved: {save_backtest(opened, document, json.loads(Path(policies).read_text()))}", err=True
        )
    if fmt == "json":
        print_json(document)
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=BACKTEST_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in document["rows"]:
        skipped = row["skippedUnacknowledgedEntries"]
        flat = {k: v for k, v in row.items() if k != "skippedUnacknowledgedEntries"}
        writer.writerow(
            {
                **flat,
                "skippedUnacknowledgedEntriesLow": skipped["low"],
                "skippedUnacknowledgedEntriesHigh": skipped["high"],
            }
        )
    typer.echo(out.getvalue(), nl=False)
