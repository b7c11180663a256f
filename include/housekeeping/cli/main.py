"""``housekeeping``: the command-line contract (documented in docs/cli.md; keep it stable). The commands are in one
module per group (``store_commands``, ``runs``, ``metrics``, ``capacity``, ``holds``, ``journal``, ``spark_connect``,
``simulate``, ``admin``: the ``topics``, ``namespaces`` and ``topic-policies`` groups); a mechanism's
own group comes from its package (``Mechanism.command_group``: ``housekeeping erase``).

Exit codes: 0 success; 1 unexpected failure; 2 bad input (nothing changed); 3 the gate rejected the plan
(nothing applied); 4 a path outside the store was refused.
"""

from __future__ import annotations

import typer

from housekeeping.cli import (
    admin,
    capacity,
    holds,
    journal,
    metrics,
    runs,
    simulate,
    spark_connect,
    store_commands,
)
from housekeeping.core.errors import HousekeepingError
from housekeeping.core.process_exit import skip_garbage_collection_at_exit
from housekeeping.mechanisms.registry import MECHANISMS

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Pulsar-style storage housekeeping over a store of topics (ledgers in Parquet, metadata in SQL).",
)
for group in (store_commands, runs, metrics, capacity, simulate):
    app.registered_commands.extend(group.commands.registered_commands)
for mechanism in MECHANISMS.values():
    own = mechanism.command_group()
    if own is not None:
        app.add_typer(own[1], name=own[0])
app.add_typer(holds.hold_app, name="hold")
app.add_typer(admin.topics_app, name="topics")
app.add_typer(admin.namespaces_app, name="namespaces")
app.add_typer(admin.topic_policies_app, name="topic-policies")
app.registered_commands.extend(journal.commands.registered_commands)
app.add_typer(spark_connect.spark_connect_app, name="spark-connect")


def command() -> int:
    """The installed ``housekeeping`` and ``python -m housekeeping.cli``: :func:`main` as its process's own
    command, which ends without the interpreter's last garbage collections (nothing they free outlives the process)."""
    skip_garbage_collection_at_exit()
    return main()


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
