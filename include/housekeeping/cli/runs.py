"""``housekeeping plan | apply | what-if | purge | restore``: a mechanism's run from the command line, the same
steps as its DAG (``housekeeping.mechanisms.steps``), and what follows an apply.

The options a mechanism declares for its runs (``Mechanism.options``: gc's ``--max-deleted-topic-share``,
compaction's ``--compact-topic``) are added to plan, apply and what-if from the registry; they reach the run request
by name (``registry.build_request``), as the DAG's params do, so nothing here names a mechanism's option.
"""

from __future__ import annotations

import inspect
import tempfile
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from housekeeping.cli.common import AsOfOpt, ScopeOpt, emit
from housekeeping.engine.documents import Intent
from housekeeping.mechanisms.registry import mechanism_names, run_options, what_if_mechanisms
from housekeeping.store.command_line import FormatOpt, MetadataOpt, StoreOpt, check_format, open_store

if TYPE_CHECKING:
    from housekeeping.store.store import Store

commands = typer.Typer()

MechanismArg = Annotated[str, typer.Argument(help=" | ".join(mechanism_names()))]


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` taking every registered run option as a keyword option (``**options``: name -> value, None
    when not given), typed and documented as the option declares."""
    signature = inspect.signature(command)
    # The command's own annotations resolved (they are strings under `from __future__ import annotations`, and Typer
    # reads a given signature as it is).
    hints = typing.get_type_hints(command, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    for option in run_options():
        kind = list[option.value_type] if option.repeatable else option.value_type  # type: ignore[valid-type]
        params.append(
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[kind | None, typer.Option(option.flag, help=option.help)],
            )
        )
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command


def plan_in_process(
    mechanism: str,
    store: Store,
    as_of: str,
    scope: str | None,
    run_dir: Path,
    run_id: str,
    values: dict[str, Any],
    intent: Intent,
) -> tuple[int, dict[str, Any]]:
    """Snapshot (the run request from ``values``), plan and gate on the in-process Spark: (as-of, verdict). The
    snapshot is read on a thread while Spark starts (the JVM's launch), a cold run's two longest waits at once;
    bad input it meets is raised when Spark is up, nothing changed."""
    from concurrent.futures import ThreadPoolExecutor

    # What the snapshot's thread imports, imported on this one first (not by two threads at once).
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step, start_local_spark

    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of)
    with ThreadPoolExecutor(1, thread_name_prefix="snapshot") as pool:
        taken = pool.submit(
            snapshot_step,
            store,
            mechanism,
            run_id=run_id,
            as_of_ms=as_of_ms,
            values=values,
            scope=scope,
            settings=settings,
            run_dir=run_dir,
            intent=intent,
        )
        spark = start_local_spark(settings.spark_master)
        taken.result()
    return as_of_ms, plan_and_gate_in_process(run_dir, mechanism, settings.spark_master, spark=spark)


@commands.command()
@with_run_options
def plan(
    mechanism: MechanismArg,
    store: StoreOpt,
    as_of: AsOfOpt,
    fmt: FormatOpt = "text",
    scope: ScopeOpt = None,
    metadata_url: MetadataOpt = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="keep the run's artefacts here")] = None,
    **options: Any,
) -> None:
    """Print the plan the DAG would compute (same Spark code and gate), changing nothing in the store."""
    from housekeeping.engine.plan import plan_document
    from housekeeping.mechanisms.registry import get_mechanism

    get_mechanism(mechanism)
    check_format(fmt)
    with tempfile.TemporaryDirectory(prefix="housekeeping-plan-") as tmp:
        target = run_dir or Path(tmp)
        run_id = f"cli-plan-{uuid.uuid4().hex[:8]}"
        opened = open_store(store, metadata_url)
        as_of_ms, gate = plan_in_process(
            mechanism, opened, as_of, scope, target, run_id, options, Intent.PLAN
        )
        emit(plan_document(target, mechanism, as_of_ms, run_id, gate), fmt)


@commands.command()
@with_run_options
def apply(
    mechanism: MechanismArg,
    store: StoreOpt,
    as_of: AsOfOpt,
    scope: ScopeOpt = None,
    metadata_url: MetadataOpt = None,
    max_deleted_share: Annotated[
        float | None, typer.Option("--max-deleted-share", help="blast-radius override (0..1)")
    ] = None,
    fmt: FormatOpt = "json",
    **options: Any,
) -> None:
    """Plan -> gate -> apply -> report. Files are only removed later by `purge`, after the grace period."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine.gate import raise_if_rejected
    from housekeeping.engine.guards import refuse_acting_in_the_future
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import apply_step, report_step

    get_mechanism(mechanism)
    check_format(fmt)
    refuse_acting_in_the_future(parse_as_of(as_of), param="--as-of")
    run_id = f"cli-{mechanism}-{uuid.uuid4().hex[:8]}"
    opened = open_store(store, metadata_url)
    run_dir = opened.run_dir(mechanism, run_id)
    values = {**options, "max_deleted_share": max_deleted_share}
    _, gate = plan_in_process(mechanism, opened, as_of, scope, run_dir, run_id, values, Intent.APPLY)
    if not gate.success:
        report_step(run_dir, dry_run=True)
    raise_if_rejected(gate, run_dir)
    result = apply_step(opened, run_dir)
    report = report_step(run_dir, dry_run=False)
    emit({"runDir": str(run_dir), "report": str(report), **result}, fmt)


@commands.command("what-if")
@with_run_options
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
            help="retention-time=1h,1d,7d | retention-size=1G,5G | ttl=1h,1d | offload-deletion-lag=0,4h,-1 (trim) | "
            "offload-threshold=0,1G,-1 (offload): every value's bytes freed and kept (offload: local bytes left) "
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
    **options: Any,
) -> None:
    """What a policy change would delete, move or keep: the plan now, the plan with the overlay, and their
    difference per namespace (same Spark apps and gate), changing nothing in the store. With --sweep: bytes
    freed and kept per namespace at each value of one policy."""
    from housekeeping.what_if.overlay import PolicyOverlay
    from housekeeping.what_if.what_if import run_what_if

    check_format(fmt)  # before minutes of planning, not after
    overlay = PolicyOverlay.read(policies) if policies is not None else None
    document = run_what_if(
        open_store(store, metadata_url),
        mechanism,
        overlay,
        as_of=as_of,
        scope=scope,
        sweep=sweep,
        values=options,
        report_dir=report_dir,
    )
    emit(document, fmt)


@commands.command()
def purge(store: StoreOpt, as_of: AsOfOpt, metadata_url: MetadataOpt = None) -> None:
    """Delete the files of pending deletions whose grace period has passed as of the given time."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine.guards import refuse_acting_in_the_future
    from housekeeping.engine.purge import purge as purge_files

    as_of_ms = parse_as_of(as_of)
    refuse_acting_in_the_future(as_of_ms, param="--as-of")
    result = purge_files(
        open_store(store, metadata_url),
        as_of_ms=as_of_ms,
        run_id=f"cli-purge-{uuid.uuid4().hex[:8]}",
    )
    emit(result.to_json(), "json")
    result.raise_on_failures()


@commands.command()
def restore(
    topic: Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic")],
    store: StoreOpt,
    ledger: Annotated[int | None, typer.Option("--ledger", help="only this ledger id")] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="the restore's time in the journal (default: now)")
    ] = None,
    metadata_url: MetadataOpt = None,
) -> None:
    """Put a topic's pending-deleted ledgers back (within the grace period, before purge)."""
    from housekeeping.core.names import TopicName
    from housekeeping.core.timeutil import parse_as_of, wall_clock_ms
    from housekeeping.engine.restore import restore as restore_ledgers

    TopicName.parse(topic)
    restored = restore_ledgers(
        open_store(store, metadata_url),
        topic,
        ledger_id=ledger,
        as_of_ms=parse_as_of(as_of) if as_of is not None else wall_clock_ms(),
        run_id=f"cli-restore-{uuid.uuid4().hex[:8]}",
    )
    emit({"topic": topic, "restoredLedgers": restored}, "json")
