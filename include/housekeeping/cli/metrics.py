"""``housekeeping metrics | serve-metrics``: the store's metrics for Prometheus (docs/metrics.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from housekeeping.store.command_line import MetadataOpt, StoreOpt, open_store

commands = typer.Typer()


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
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of

    return (parse_as_of(as_of) if as_of is not None else None), Settings.from_env().deletion_lag_objectives


@commands.command()
def metrics(
    store: StoreOpt,
    as_of: MetricsAsOfOpt = None,
    per_topic: PerTopicOpt = False,
    metadata_url: MetadataOpt = None,
) -> None:
    """Print the store's metrics in the Prometheus text exposition format (docs/metrics.md)."""
    from housekeeping.observe.metrics.exposition import exposition

    as_of_ms, objectives = _metrics_options(as_of)
    text = exposition(
        open_store(store, metadata_url), as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives
    )
    typer.echo(text.decode("utf-8"), nl=False)


@commands.command("serve-metrics")
def serve_metrics(
    store: StoreOpt,
    port: Annotated[int, typer.Option("--port", help="TCP port of the /metrics endpoint")],
    host: Annotated[
        str, typer.Option("--host", help="address to listen on (0.0.0.0: every interface)")
    ] = "127.0.0.1",
    as_of: MetricsAsOfOpt = None,
    per_topic: PerTopicOpt = False,
    metadata_url: MetadataOpt = None,
    web_config: Annotated[
        Path | None,
        typer.Option(
            "--web-config",
            help="a Prometheus web-config file (exporter-toolkit format): TLS certificate and key, basic-auth users",
        ),
    ] = None,
) -> None:
    """Serve the store's metrics on http://HOST:PORT/metrics for a Prometheus to scrape (read at each scrape)."""
    from housekeeping.observe.metrics.exposition import serve

    as_of_ms, objectives = _metrics_options(as_of)
    serve(
        open_store(store, metadata_url),
        host=host,
        port=port,
        as_of_ms=as_of_ms,
        per_topic=per_topic,
        objectives=objectives,
        web_config=web_config,
    )
