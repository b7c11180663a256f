"""``housekeeping simulate``: a store's clients and operators at work, for a while (docs/cli.md, "Simulate")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from housekeeping.cli.common import ScopeOpt
from housekeeping.store.command_line import (
    FormatOpt,
    MetadataOpt,
    StoreOpt,
    check_format,
    open_store,
    print_json,
)

commands = typer.Typer()


# The work is in housekeeping.store.simulate, the summary's text in _text; this command
# must be one piece: typer reads its options from one signature.
@commands.command()
def simulate(
    store: StoreOpt,
    duration: Annotated[str, typer.Option("--duration", help="how long: 90 (s), 5m, 2h")] = "60s",
    seed: Annotated[int, typer.Option("--seed", help="random seed (same seed, same choices)")] = 1,
    rate: Annotated[
        float, typer.Option("--rate", help="entries published a second, over every topic")
    ] = 50.0,
    batch: Annotated[int, typer.Option("--batch", help="entries per publish call (a producer's batch)")] = 10,
    topics: Annotated[
        int, typer.Option("--topics", help="topics to drive: the store's (in --scope) first, then new ones")
    ] = 20,
    scope: ScopeOpt = None,
    subscriptions: Annotated[
        int, typer.Option("--subscriptions", help="durable subscriptions created on each topic it drives")
    ] = 2,
    stuck_share: Annotated[
        float, typer.Option("--stuck-share", help="share of subscriptions whose consumer never acknowledges")
    ] = 0.1,
    lagging_share: Annotated[
        float, typer.Option("--lagging-share", help="share that acknowledge a drawn number of entries behind")
    ] = 0.3,
    max_lag: Annotated[
        int, typer.Option("--max-lag", help="a lagging subscription's lag is drawn in 1..this")
    ] = 500,
    ack_interval: Annotated[
        str, typer.Option("--ack-interval", help="consumers acknowledge this often")
    ] = "1s",
    ops_per_minute: Annotated[
        float, typer.Option("--ops-per-minute", help="operator changes a minute (0: none)")
    ] = 6.0,
    ops: Annotated[
        str,
        typer.Option(
            "--ops",
            help="which changes: all, none, or a comma-separated list of subscribe, unsubscribe, reset-cursor, "
            "create-topic, delete-topic, set-policies, hold, release",
        ),
    ] = "all",
    payload_bytes: Annotated[int, typer.Option("--payload-bytes", help="each entry's payload size")] = 256,
    keys: Annotated[int, typer.Option("--keys", help="distinct message keys")] = 100,
    reset_back: Annotated[
        str, typer.Option("--reset-back", help="a cursor reset goes back up to this far")
    ] = "10m",
    ledger_max_entries: Annotated[
        int | None, typer.Option("--ledger-max-entries", help="default: managedLedgerMaxEntriesPerLedger")
    ] = None,
    ledger_max_size: Annotated[
        str | None, typer.Option("--ledger-max-size", help="default: managedLedgerMaxSizePerLedgerMbytes")
    ] = None,
    ledger_min_rollover: Annotated[
        str | None,
        typer.Option("--ledger-min-rollover", help="default: managedLedgerMinLedgerRolloverTimeMinutes"),
    ] = None,
    ledger_max_rollover: Annotated[
        str | None,
        typer.Option("--ledger-max-rollover", help="default: managedLedgerMaxLedgerRolloverTimeMinutes"),
    ] = None,
    clock: Annotated[
        str,
        typer.Option("--clock", help="real (the wall clock) or simulated (from --start, without waiting)"),
    ] = "real",
    start: Annotated[
        str | None, typer.Option("--start", help="the simulated clock's start, ISO 8601 with a timezone")
    ] = None,
    log: Annotated[
        Path | None, typer.Option("--log", help="append every event here (JSON Lines; docs/cli.md)")
    ] = None,
    progress: Annotated[str, typer.Option("--progress", help="a progress line this often (0: none)")] = "10s",
    metadata_url: MetadataOpt = None,
    fmt: FormatOpt = "text",
) -> None:
    """A store's clients and operators at work for --duration: producers publish, ledgers roll as a broker's do,
    consumers acknowledge (some caught up, some lagging, some stuck), and subscriptions, cursors, topics, policies
    and holds change at seeded times, through the client and admin paths only. Prints throughput and publish
    latency; --log keeps every entry published and every acknowledgement."""
    from housekeeping.core.errors import InputError
    from housekeeping.core.scope import parse_scope
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.core.units import parse_bytes, parse_seconds
    from housekeeping.store.simulate.log import SimulationLog
    from housekeeping.store.simulate.run import simulate as run
    from housekeeping.store.simulate.workload import Clock, Rollover, Workload, parse_operations

    check_format(fmt)
    if clock not in {c.value for c in Clock}:
        raise InputError(f"--clock must be real or simulated, got {clock!r}")

    def seconds(text: str | None, option: str) -> int | None:
        if text is None:
            return None
        value = parse_seconds(text, option)
        if value < 0:
            raise InputError(f"{option} {text!r} must not be negative")
        return value

    workload = Workload(
        duration_seconds=seconds(duration, "--duration") or 0,
        seed=seed,
        rate=rate,
        batch=batch,
        topics=topics,
        scope=tuple(parse_scope(scope)),
        subscriptions=subscriptions,
        stuck_share=stuck_share,
        lagging_share=lagging_share,
        max_lag=max_lag,
        ack_interval_seconds=seconds(ack_interval, "--ack-interval") or 0,
        operations_per_minute=ops_per_minute,
        operations=parse_operations(ops),
        payload_bytes=payload_bytes,
        keys=keys,
        reset_back_seconds=seconds(reset_back, "--reset-back") or 0,
        clock=Clock(clock),
        start_ms=None if start is None else parse_as_of(start),
        progress_seconds=seconds(progress, "--progress") or 0,
    )
    max_size = None if ledger_max_size is None else parse_bytes(ledger_max_size, "--ledger-max-size")
    store_ = open_store(store, metadata_url)
    rollover = Rollover.of(
        store_.broker_config(),
        max_entries=ledger_max_entries,
        max_bytes=max_size,
        min_seconds=seconds(ledger_min_rollover, "--ledger-min-rollover"),
        max_seconds=seconds(ledger_max_rollover, "--ledger-max-rollover"),
    )
    summary = run(store_, workload, rollover, SimulationLog(log), progress=sys.stderr)
    if fmt == "json":
        print_json(summary)
        return
    typer.echo(_text(summary))


def _text(summary: dict) -> str:
    latency = summary["publishLatencyMs"]
    lines = [
        f"simulated {summary['seconds']} s ({summary['clock']} clock, seed {summary['seed']}"
        f"{', interrupted' if summary['interrupted'] else ''}) on {summary['topics']} topics",
        f"  published      {summary['published']['entries']} entries, {summary['published']['bytes']} bytes "
        f"({summary['published']['perSecond']}/s)",
        f"  acknowledged   {summary['acknowledgements']} times; {summary['ledgersRolled']} ledgers rolled",
        f"  publish (ms)   p50 {latency['p50']}  p99 {latency['p99']}  max {latency['max']}  over {latency['count']} calls",
    ]
    for kind, counts in summary["operations"].items():
        lines.append(
            f"  {kind:<14} {counts['done']} done, {counts['refused']} refused, {counts['skipped']} skipped"
        )
    if summary["faults"]:
        lines.append("  faults         " + ", ".join(f"{k} {v}" for k, v in summary["faults"].items()))
    lines += [f"  ! {problem}" for problem in summary["lastProblems"]]
    return "\n".join(lines)
