"""``housekeeping scrub``: the store scrub from the command line, the same steps as the ``store_scrub`` DAG
(snapshot and listing, Spark plan, Great Expectations gate, then with ``--repair`` the apply and the purge's
pending-deletion log). Exit 0: clean; 1: findings a person must look at; 2: bad input (nothing changed). Without
``--repair`` nothing in the metadata or the storage changes; the run's report is written under
``runs/scrub/<run>/``."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

import typer

from housekeeping.store.command_line import (
    FormatOpt,
    MetadataOpt,
    StoreOpt,
    check_format,
    open_store,
    print_json,
)

ScopeOpt = Annotated[
    str | None,
    typer.Option("--scope", help="comma-separated globs: tenant, tenant/ns or persistent://... topics"),
]


RepairOpt = Annotated[
    bool, typer.Option("--repair", help="queue orphans for purge after the grace period (restorable)")
]
AsOfOpt = Annotated[
    str | None, typer.Option("--as-of", help="logical time for overdue purges (default: now)")
]
MinAgeOpt = Annotated[
    int | None, typer.Option("--min-age-seconds", help="minimum age of an orphan (default 3 days)")
]


def scrub_app_for(mechanism: Any) -> typer.Typer:
    """The ``housekeeping scrub`` command of ``mechanism`` (the scrub's own instance: no import back into its
    package)."""
    app = typer.Typer(
        invoke_without_command=True,
        no_args_is_help=False,
        help="Compare what the metadata says with what the storage holds (both tiers); --repair queues orphans.",
    )

    @app.callback()
    def scrub(
        store: StoreOpt,
        fmt: FormatOpt = "text",
        repair: RepairOpt = False,
        as_of: AsOfOpt = None,
        scope: ScopeOpt = None,
        min_age_seconds: MinAgeOpt = None,
        metadata_url: MetadataOpt = None,
    ) -> None:
        """Scrub the store: orphans, missing and mismatched ledgers, purges verified against the storage."""
        run_scrub(mechanism, store, fmt, repair, as_of, scope, min_age_seconds, metadata_url)

    return app


def run_scrub(
    mechanism: Any,
    store: str,
    fmt: str,
    repair: bool,
    as_of: str | None,
    scope: str | None,
    min_age_seconds: int | None,
    metadata_url: str | None,
) -> None:
    """Scrub the store: orphans, missing and mismatched ledgers, purges verified against the storage."""
    from housekeeping.core.errors import HousekeepingError
    from housekeeping.core.scope import parse_scope
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.gate import raise_if_rejected
    from housekeeping.engine.guards import refuse_acting_in_the_future
    from housekeeping.engine.plan import read_summary, read_table
    from housekeeping.engine.report import write_report
    from housekeeping.engine.request import RunRequest
    from housekeeping.engine.snapshot import take_snapshot
    from housekeeping.mechanisms.scrub.options import MIN_AGE_OPTION
    from housekeeping.mechanisms.scrub.tables import FINDINGS
    from housekeeping.store.fs import remove_tree
    from housekeeping.store.store import RUNS_DIR

    check_format(fmt)
    opened = open_store(store, metadata_url)
    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of) if as_of else int(time.time() * 1000)
    if repair:
        refuse_acting_in_the_future(as_of_ms, param="--as-of")
    run_id = f"cli-scrub-{uuid.uuid4().hex[:8]}"
    run_dir = opened.run_dir(mechanism.name, run_id)
    # The run as `housekeeping plan scrub` builds it (registry.build_request), with the one option a scrub reads.
    request = RunRequest(
        mechanism=mechanism,
        run_id=run_id,
        as_of_ms=as_of_ms,
        scope=tuple(parse_scope(scope)),
        options=((MIN_AGE_OPTION, MIN_AGE_OPTION.resolve(min_age_seconds)),),
    )
    try:
        take_snapshot(opened, request, run_dir=run_dir)
    except HousekeepingError:
        # Bad input found while listing (an unreadable directory, a bucket it may not list): leave nothing behind.
        remove_tree(run_dir, within=opened.root / RUNS_DIR)
        raise
    spark = launcher.local_spark(settings.spark_master)
    launcher.plan_in_process(spark, run_dir, mechanism)
    gate = launcher.gate_in_process(spark, run_dir, mechanism)
    if not gate.success:
        write_report(run_dir, mechanism, dry_run=True)
    raise_if_rejected(gate, run_dir)
    summary = read_summary(run_dir)
    repaired = (
        mechanism.apply(opened, run_dir, purge_grace_seconds=mechanism.purge_grace_seconds(settings))
        if repair
        else None
    )
    report = write_report(run_dir, mechanism, dry_run=not repair)
    findings = [
        {k: v for k, v in FINDINGS.read_row(row, str(run_dir)).items() if v is not None}
        for row in read_table(run_dir, FINDINGS.name)
    ]
    document: dict[str, Any] = {
        "runDir": str(run_dir),
        "report": str(report),
        "clean": summary["clean"],
        "summary": summary.as_json(),
        "findings": findings,
        "repair": repaired,
    }
    if fmt == "json":
        print_json(document)
    else:
        typer.echo(_text(document))
    raise typer.Exit(0 if summary["clean"] else 1)


def _text(document: dict[str, Any]) -> str:
    summary = document["summary"]
    lines = [
        f"store scrub: {'clean' if summary['clean'] else str(summary['errors']) + ' finding(s) need a person'}"
        f" ({summary['itemsListed']} items listed, {summary['ledgersChecked']} ledgers read)"
    ]
    lines += [
        f"  {f['kind']:<14} {f['location']}:{f['path']}  {f['reason']}"
        + ("" if f["repair"] == "none" else f"  [{f['repair']}]")
        for f in document["findings"]
    ]
    freed = summary["freed"]
    lines.append(
        f"purges verified: {freed['bytesVerifiedFreed']} of {freed['bytesRecordedFreed']} bytes recorded freed are gone; "
        f"{freed['deletionsNotFreed']} deletion(s) still stored"
    )
    if document["repair"] is not None:
        lines.append(f"repair: {len(document['repair']['orphansQueued'])} item(s) queued for purge")
    lines.append(f"report: {document['report']}")
    return "\n".join(lines)
