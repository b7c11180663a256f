"""``housekeeping``: the command-line contract (documented in docs/cli.md; keep it stable).

Exit codes: 0 success; 1 unexpected failure; 2 bad input (nothing changed); 3 the gate rejected the plan
(nothing applied); 4 a path outside the store was refused.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Annotated

import typer

from housekeeping.errors import HousekeepingError, InputError
from housekeeping.registry import mechanism_names, mechanism_spec, what_if_mechanisms
from housekeeping.spark_connect import DEFAULT_PORT

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Pulsar-style storage housekeeping over a store of topics (ledgers in Parquet, metadata in SQL).",
)

StoreOpt = Annotated[Path, typer.Option("--store", help="store root directory")]
AsOfOpt = Annotated[
    str, typer.Option("--as-of", help="logical time, ISO 8601 with timezone (e.g. 2026-11-22T06:00:00Z)")
]
MetadataOpt = Annotated[
    str | None,
    typer.Option(
        "--metadata-url", help="SQLAlchemy URL (default: SQLite in the store, or HOUSEKEEPING_METADATA_URL)"
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", help="json or text")]
CompactTopicsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--compact-topic",
        help="compaction: also compact this topic whatever its backlog (repeatable; Pulsar's `topics compact`)",
    ),
]
ScopeOpt = Annotated[
    str | None,
    typer.Option("--scope", help="comma-separated globs: tenant, tenant/ns or persistent://... topics"),
]


def _emit(document: object, fmt: str) -> None:
    if fmt == "json":
        typer.echo(json.dumps(document, indent=2, sort_keys=False))
    elif fmt == "text":
        typer.echo(_as_text(document))
    else:
        raise typer.BadParameter(f"--format must be json or text, got {fmt!r}")


def _as_text(document: object) -> str:
    if isinstance(document, dict) and "sweep" in document:
        from housekeeping.policy_sweep import format_text

        return format_text(document)
    if isinstance(document, dict) and ("difference" in document or "mechanisms" in document):
        from housekeeping.what_if import format_text

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


def _open(store: Path, metadata_url: str | None):
    from housekeeping.store import Store

    return Store.open(store, metadata_url)


@app.command()
def load(
    store: StoreOpt,
    manifest: Annotated[Path, typer.Option("--manifest", help="manifest JSON file (docs/manifest.md)")],
    metadata_url: MetadataOpt = None,
) -> None:
    """Create or replace a store from a manifest. Validates everything before changing anything."""
    from housekeeping.manifest import load_manifest

    result = load_manifest(store, manifest, metadata_url)
    typer.echo(f"loaded {manifest} into store {result.root}", err=True)


@app.command()
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
) -> None:
    """Generate a deterministic synthetic store (demo size in seconds; benchmark size with more topics/entries)."""
    from housekeeping.generate import GenerateOptions, generate_store

    opts = GenerateOptions(
        topics, seed, entries_per_ledger, max_ledgers_per_topic, payload_bytes, reference, progress
    )
    result = generate_store(store, opts, metadata_url)
    typer.echo(
        f"generated {topics} topics (+1 system topic, +3 partitions of a partitioned topic) into store "
        f"{result.root}",
        err=True,
    )


@app.command()
def upgrade(store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Migrate a store's metadata schema to this version (idempotent; back up the metadata first). Every
    other command refuses a store an older version wrote, naming this command."""
    from housekeeping.store import Store

    _emit(Store.open(store, metadata_url, check_schema=False).upgrade_schema(), "json")


@app.command()
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
    from housekeeping.manifest import export_manifest

    opened = _open(store, metadata_url)
    if compacted:
        from housekeeping.compacted_view import compacted_view

        _emit({"compactedView": compacted_view(opened, topic or None)}, "json")
        return
    if topic:
        raise InputError("--topic is only used with --compacted")
    _emit(export_manifest(opened, with_messages=messages), fmt if fmt != "text" else "json")


def _plan(
    mechanism: str,
    opened,
    as_of: str,
    scope: str | None,
    run_dir: Path,
    run_id: str,
    max_deleted_share: float | None,
    max_deleted_topic_share: float | None = None,
    compact_topics: list[str] | None = None,
):
    from housekeeping.runner import plan_and_gate_in_process
    from housekeeping.settings import Settings
    from housekeeping.snapshot import take_snapshot
    from housekeeping.timeutil import parse_as_of

    mechanism_spec(mechanism)
    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of)
    share = settings.max_deleted_share if max_deleted_share is None else max_deleted_share
    topic_share = (
        settings.max_deleted_topic_share if max_deleted_topic_share is None else max_deleted_topic_share
    )
    if not 0.0 <= topic_share <= 1.0 or not 0.0 <= share <= 1.0:
        raise InputError("--max-deleted-share and --max-deleted-topic-share must be between 0 and 1")
    take_snapshot(
        opened,
        mechanism=mechanism,
        run_id=run_id,
        as_of_ms=as_of_ms,
        scope=scope,
        max_deleted_share=share,
        max_deleted_topic_share=topic_share,
        compact_topics=compact_topics or (),
        run_dir=run_dir,
    )
    gate = plan_and_gate_in_process(run_dir, mechanism, settings.spark_master)
    return settings, as_of_ms, gate


@app.command()
def plan(
    mechanism: Annotated[str, typer.Argument(help=" | ".join(mechanism_names()))],
    store: StoreOpt,
    as_of: AsOfOpt,
    fmt: FormatOpt = "text",
    scope: ScopeOpt = None,
    metadata_url: MetadataOpt = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="keep the run's artefacts here")] = None,
    compact_topic: CompactTopicsOpt = None,
) -> None:
    """Print the plan the DAG would compute (same Spark code and gate), changing nothing in the store."""
    from housekeeping.plan import plan_document

    with tempfile.TemporaryDirectory(prefix="housekeeping-plan-") as tmp:
        target = run_dir or Path(tmp)
        run_id = f"cli-plan-{uuid.uuid4().hex[:8]}"
        opened = _open(store, metadata_url)
        _, as_of_ms, gate = _plan(
            mechanism, opened, as_of, scope, target, run_id, None, compact_topics=compact_topic
        )
        document = plan_document(target, mechanism, as_of_ms, run_id, gate)
        _emit(document, fmt)


@app.command()
def apply(
    mechanism: Annotated[str, typer.Argument(help=" | ".join(mechanism_names()))],
    store: StoreOpt,
    as_of: AsOfOpt,
    scope: ScopeOpt = None,
    metadata_url: MetadataOpt = None,
    max_deleted_share: Annotated[
        float | None, typer.Option("--max-deleted-share", help="blast-radius override (0..1)")
    ] = None,
    max_deleted_topic_share: Annotated[
        float | None,
        typer.Option(
            "--max-deleted-topic-share", help="gc blast-radius override: share of a namespace's topics"
        ),
    ] = None,
    compact_topic: CompactTopicsOpt = None,
    fmt: FormatOpt = "json",
) -> None:
    """Plan -> gate -> apply -> report. Files are only removed later by `purge`, after the grace period."""
    from housekeeping.gate import raise_if_rejected
    from housekeeping.runner import apply_step, report_step

    mechanism_spec(mechanism)
    run_id = f"cli-{mechanism}-{uuid.uuid4().hex[:8]}"
    opened = _open(store, metadata_url)
    run_dir = opened.run_dir(mechanism, run_id)
    settings, _, gate = _plan(
        mechanism,
        opened,
        as_of,
        scope,
        run_dir,
        run_id,
        max_deleted_share,
        max_deleted_topic_share,
        compact_topics=compact_topic,
    )
    if not gate["success"]:
        report_step(run_dir, dry_run=True)
    raise_if_rejected(gate, run_dir)
    grace = getattr(settings, mechanism_spec(mechanism).purge_grace_setting)
    result = apply_step(opened, run_dir, purge_grace_seconds=grace)
    report = report_step(run_dir, dry_run=False)
    _emit({"runDir": str(run_dir), "report": str(report), **result}, fmt)


@app.command("what-if")
def what_if_command(
    mechanism: Annotated[str, typer.Argument(help=" | ".join(what_if_mechanisms()) + " | all")],
    store: StoreOpt,
    as_of: AsOfOpt,
    policies: Annotated[
        Path | None,
        typer.Option(
            "--policies",
            help="overlay JSON in the manifest's shape: broker, namespaces.<ns>.<policy>, "
            "topics.<topic>.policies.<policy> (null removes a policy); required unless --sweep is given",
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="retention-time=1h,1d,7d | retention-size=1G,5G | ttl=1h,1d: every value's bytes freed and kept "
            "per namespace (set in every namespace, on top of --policies), in one Spark application",
        ),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report-dir", help="also write report.json and an offline index.html (with the plot) here"
        ),
    ] = None,
    fmt: FormatOpt = "text",
    scope: ScopeOpt = None,
    metadata_url: MetadataOpt = None,
    compact_topic: CompactTopicsOpt = None,
) -> None:
    """What a policy change would delete, move or keep: the plan now, the plan with the overlay, and their
    difference per namespace (same Spark apps and gate), changing nothing in the store. With --sweep: bytes
    freed and kept per namespace at each value of one policy."""
    from housekeeping.policy_overlay import PolicyOverlay
    from housekeeping.what_if import run_what_if

    if fmt not in ("json", "text"):  # before minutes of planning, not after
        raise typer.BadParameter(f"--format must be json or text, got {fmt!r}")
    overlay = PolicyOverlay.read(policies) if policies is not None else None
    document = run_what_if(
        _open(store, metadata_url),
        mechanism,
        overlay,
        as_of=as_of,
        scope=scope,
        sweep=sweep,
        compact_topics=compact_topic,
        report_dir=report_dir,
    )
    _emit(document, fmt)


@app.command()
def purge(store: StoreOpt, as_of: AsOfOpt, metadata_url: MetadataOpt = None) -> None:
    """Delete the files of pending deletions whose grace period has passed as of the given time."""
    from housekeeping.purge import purge as purge_files
    from housekeeping.timeutil import parse_as_of

    result = purge_files(
        _open(store, metadata_url), as_of_ms=parse_as_of(as_of), run_id=f"cli-purge-{uuid.uuid4().hex[:8]}"
    )
    _emit(result.to_json(), "json")


@app.command()
def restore(
    topic: Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic")],
    store: StoreOpt,
    ledger: Annotated[int | None, typer.Option("--ledger", help="only this ledger id")] = None,
    as_of: Annotated[str, typer.Option("--as-of")] = "1970-01-01T00:00:00Z",
    metadata_url: MetadataOpt = None,
) -> None:
    """Put a topic's pending-deleted ledgers back (within the grace period, before purge)."""
    from housekeeping.names import TopicName
    from housekeeping.restore import restore as restore_ledgers
    from housekeeping.timeutil import parse_as_of

    TopicName.parse(topic)
    restored = restore_ledgers(
        _open(store, metadata_url),
        topic,
        ledger_id=ledger,
        as_of_ms=parse_as_of(as_of),
        run_id=f"cli-restore-{uuid.uuid4().hex[:8]}",
    )
    _emit({"topic": topic, "restoredLedgers": restored}, "json")


PerTopicOpt = Annotated[
    bool,
    typer.Option(
        "--per-topic",
        help="storage and backlog series per topic and subscription instead of per namespace (cardinality)",
    ),
]
MetricsAsOfOpt = Annotated[
    str | None,
    typer.Option("--as-of", help="measure ages at this time (ISO 8601); default: the clock at each scrape"),
]


def _metrics_options(as_of: str | None) -> tuple[int | None, dict[str, int]]:
    """The measuring time (None: each scrape's clock) and the deletion-lag objectives the DAGs use."""
    from housekeeping.settings import Settings
    from housekeeping.timeutil import parse_as_of

    return (parse_as_of(as_of) if as_of is not None else None), Settings.from_env().deletion_lag_objectives


@app.command()
def metrics(
    store: StoreOpt,
    as_of: MetricsAsOfOpt = None,
    per_topic: PerTopicOpt = False,
    metadata_url: MetadataOpt = None,
) -> None:
    """Print the store's metrics in the Prometheus text exposition format (docs/metrics.md)."""
    from housekeeping.metrics import exposition

    as_of_ms, objectives = _metrics_options(as_of)
    text = exposition(
        _open(store, metadata_url), as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives
    )
    typer.echo(text.decode("utf-8"), nl=False)


@app.command("serve-metrics")
def serve_metrics(
    store: StoreOpt,
    port: Annotated[int, typer.Option("--port", help="TCP port of the /metrics endpoint")],
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "0.0.0.0",
    as_of: MetricsAsOfOpt = None,
    per_topic: PerTopicOpt = False,
    metadata_url: MetadataOpt = None,
) -> None:
    """Serve the store's metrics on http://HOST:PORT/metrics for a Prometheus to scrape (read at each scrape)."""
    from housekeeping.metrics import serve

    as_of_ms, objectives = _metrics_options(as_of)
    serve(
        _open(store, metadata_url),
        host=host,
        port=port,
        as_of_ms=as_of_ms,
        per_topic=per_topic,
        objectives=objectives,
    )


erase_app = typer.Typer(
    no_args_is_help=True,
    help="Key erasure: forget one key everywhere a topic (or a namespace) stores it, raw and compacted ledgers.",
)
app.add_typer(erase_app, name="erase")


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
    from housekeeping.actor import current_actor
    from housekeeping.erasure_requests import add_request
    from housekeeping.timeutil import parse_as_of

    requested_at_ms = parse_as_of(requested_at) if requested_at is not None else None
    request = add_request(
        _open(store, metadata_url),
        key=key,
        key_sha256=key_sha256,
        topic=topic,
        namespace=namespace,
        reason=reason,
        requested_at_ms=requested_at_ms,
        actor=current_actor(),
    )
    _emit(request, "json")


@erase_app.command("list")
def erase_list(store: StoreOpt, metadata_url: MetadataOpt = None, fmt: FormatOpt = "text") -> None:
    """Every erasure request with its state: pending, held (and by what), done (and its proof), failed (and why)."""
    from housekeeping.erasure_requests import format_text, list_requests

    requests = list_requests(_open(store, metadata_url))
    if fmt == "text":
        typer.echo(format_text(requests))
    else:
        _emit({"requests": requests}, fmt)


hold_app = typer.Typer(
    no_args_is_help=True,
    help="Protect a namespace (tenant/ns) or topic (persistent://...) from every deleting or cursor-moving "
    "action: trim, expiry, backlog eviction, inactive-topic GC, compaction, purge.",
)
app.add_typer(hold_app, name="hold")
TargetArg = Annotated[str, typer.Argument(help="tenant/namespace or persistent://tenant/namespace/topic")]


@hold_app.command("add")
def hold_add(
    target: TargetArg,
    store: StoreOpt,
    reason: Annotated[str, typer.Option("--reason", help="why it is held (shown in plans and the journal)")],
    metadata_url: MetadataOpt = None,
) -> None:
    """Hold a namespace or topic (a partitioned topic's name holds its partitions)."""
    from housekeeping.actor import current_actor
    from housekeeping.holds import add_hold
    from housekeeping.journal import journal
    from housekeeping.store import write_transaction

    actor = current_actor()
    with write_transaction(_open(store, metadata_url).engine) as conn:
        hold = add_hold(conn, target, reason=reason, actor=actor)
        _journal_hold(journal, conn, hold, "hold_added", actor)
    _emit(hold.to_json(), "json")


@hold_app.command("remove")
def hold_remove(target: TargetArg, store: StoreOpt, metadata_url: MetadataOpt = None) -> None:
    """Remove a hold; the next runs treat the namespace or topic by the rules alone again."""
    from housekeeping.actor import current_actor
    from housekeeping.holds import remove_hold
    from housekeeping.journal import journal
    from housekeeping.store import write_transaction

    actor = current_actor()
    with write_transaction(_open(store, metadata_url).engine) as conn:
        hold = remove_hold(conn, target)
        _journal_hold(journal, conn, hold, "hold_removed", actor)
    _emit(hold.to_json(), "json")


@hold_app.command("list")
def hold_list(store: StoreOpt, metadata_url: MetadataOpt = None, fmt: FormatOpt = "json") -> None:
    """The holds in force."""
    from housekeeping.holds import load_holds
    from housekeeping.store import read_transaction

    with read_transaction(_open(store, metadata_url).engine) as conn:
        holds = [hold.to_json() for _, hold in sorted(load_holds(conn).items())]
    if fmt == "text":
        typer.echo(
            "\n".join(f"{h['scope']:<9} {h['target']}  by {h['createdBy']}: {h['reason']}" for h in holds)
            or "no holds"
        )
    else:
        _emit({"holds": holds}, fmt)


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


@app.command("journal")
def journal_command(
    store: StoreOpt,
    topic: Annotated[str | None, typer.Option("--topic", help="only this topic's entries")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="only this run's entries (its id, or part of it)")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="only the newest N entries")] = None,
    metadata_url: MetadataOpt = None,
    fmt: FormatOpt = "text",
) -> None:
    """Who did what, when and why, with the plan rows each applied action came from."""
    from housekeeping.journal_view import format_text, journal_entries
    from housekeeping.store import read_transaction

    with read_transaction(_open(store, metadata_url).engine) as conn:
        entries = journal_entries(conn, topic=topic, run=run, limit=limit)
    if fmt == "text":
        typer.echo(format_text(entries))
    else:
        _emit({"entries": entries}, fmt)


spark_connect_app = typer.Typer(
    no_args_is_help=True,
    help="A long-lived Spark Connect server the DAGs' Spark steps connect to (a spark_connect Airflow "
    "connection) instead of starting a Spark application per task.",
)
app.add_typer(spark_connect_app, name="spark-connect")
StateDirOpt = Annotated[
    Path,
    typer.Option("--state-dir", help="where the server's pid, port and log live (e.g. $AIRFLOW_HOME/spark)"),
]


@spark_connect_app.command("start")
def spark_connect_start(
    state_dir: StateDirOpt,
    port: Annotated[int, typer.Option("--port", help="gRPC port")] = DEFAULT_PORT,
    master: Annotated[str, typer.Option("--master", help="Spark master of the server's driver")] = "local[2]",
    driver_memory: Annotated[str, typer.Option("--driver-memory")] = "2g",
) -> None:
    """Start the server in the background (no-op when the one recorded in --state-dir runs); waits until it
    listens and prints its pid and URL."""
    from housekeeping import spark_connect

    pid = spark_connect.start(state_dir, port=port, master=master, driver_memory=driver_memory)
    _emit({"pid": pid, "url": f"sc://localhost:{port}", "log": str(state_dir / "server.log")}, "json")


@spark_connect_app.command("stop")
def spark_connect_stop(state_dir: StateDirOpt) -> None:
    """Stop the server recorded in --state-dir (exit 0 whether or not one ran)."""
    from housekeeping import spark_connect

    _emit({"stopped": spark_connect.stop(state_dir)}, "json")


@spark_connect_app.command("status")
def spark_connect_status(state_dir: StateDirOpt) -> None:
    """Whether the server recorded in --state-dir runs and listens; exit 1 when it does not."""
    from housekeeping import spark_connect

    document = spark_connect.status(state_dir)
    _emit(document, "json")
    if not document["listening"]:
        raise typer.Exit(1)


def main(argv: list[str] | None = None) -> int:
    try:
        # Outside standalone mode click returns a typer.Exit's code instead of raising it.
        result = app(args=argv, standalone_mode=False)
        if isinstance(result, int):
            return result
    except HousekeepingError as exc:
        typer.echo(f"housekeeping: error: {exc}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 1
    except Exception as exc:  # usage errors
        import click

        # Typer raises its own copy of click's exceptions (typer._click), which are not click's.
        if isinstance(exc, click.ClickException | typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
