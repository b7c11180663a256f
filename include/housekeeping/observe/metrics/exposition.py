"""The store's metrics put together: every collector's families from one read of the store
(:func:`store_metrics`), read again at every scrape by a ``prometheus_client`` collector, as the text exposition
format (``housekeeping metrics``) or served on ``/metrics`` (``housekeeping serve-metrics``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.registry import Collector as PrometheusCollector
from prometheus_client.registry import CollectorRegistry

from housekeeping.core.settings import parse_lag_objectives
from housekeeping.mechanisms.registry import MECHANISMS
from housekeeping.observe.metrics.activity import applied, deletions
from housekeeping.observe.metrics.capacity import capacity
from housekeeping.observe.metrics.deletion_lag import runs_and_lag
from housekeeping.observe.metrics.families import Families, Family, StoreView, seconds
from housekeeping.observe.metrics.storage import storage
from housekeeping.store.store import Store

COLLECTORS = (storage, deletions, applied, capacity)


def store_metrics(
    store: Store, *, as_of_ms: int, per_topic: bool = False, objectives: Mapping[str, int] | None = None
) -> list[Family]:
    """Every family, read from the store at ``as_of_ms``. ``objectives``: the deletion-lag objectives
    (``HOUSEKEEPING_DELETION_LAG_OBJECTIVES``; default, the settings' default)."""
    objectives = objectives if objectives is not None else parse_lag_objectives(None)
    view = StoreView.read(store, as_of_ms=as_of_ms, per_topic=per_topic)
    families = [family for collect in COLLECTORS for family in collect(view)]
    families += runs_and_lag(view, objectives)
    made = Families()
    for mechanism in MECHANISMS.values():
        for name, help_text, value in mechanism.metric_samples(store, as_of_ms):
            made.family(name, help_text, ()).set((), value)
    as_of = made.family(
        "housekeeping_metrics_as_of_timestamp_seconds", "The time these metrics are measured at.", ()
    )
    as_of.set((), seconds(as_of_ms))
    return families + made


class StoreCollector(PrometheusCollector):
    """Reads the store at every scrape (``as_of_ms`` None: the scrape's clock time)."""

    def __init__(
        self, store: Store, *, as_of_ms: int | None, per_topic: bool, objectives: Mapping[str, int] | None
    ) -> None:
        self.store, self.as_of_ms, self.per_topic, self.objectives = store, as_of_ms, per_topic, objectives

    def describe(self) -> list[Metric]:
        return []  # no collection at registration: the first scrape reads the store

    def collect(self) -> Iterator[Metric]:
        as_of_ms = self.as_of_ms if self.as_of_ms is not None else int(time.time() * 1000)
        for made in store_metrics(
            self.store, as_of_ms=as_of_ms, per_topic=self.per_topic, objectives=self.objectives
        ):
            yield made.to_metric()


def registry_for(
    store: Store, *, as_of_ms: int | None, per_topic: bool, objectives: Mapping[str, int] | None = None
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives))
    return registry


def exposition(
    store: Store,
    *,
    as_of_ms: int | None,
    per_topic: bool = False,
    objectives: Mapping[str, int] | None = None,
) -> bytes:
    """The Prometheus text exposition format of the store's metrics."""
    from prometheus_client import generate_latest

    return generate_latest(registry_for(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives))


def serve(
    store: Store,
    *,
    host: str,
    port: int,
    as_of_ms: int | None,
    per_topic: bool = False,
    objectives: Mapping[str, int] | None = None,
    web_config: Path | None = None,
) -> None:
    """Serve ``/metrics`` until interrupted (prometheus_client's WSGI app and server; the store is read per scrape),
    over TLS and behind basic authentication as ``web_config`` says (``observe.metrics.web_config``)."""
    import ssl
    import sys
    from wsgiref.simple_server import make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

    from housekeeping.observe.metrics.web_config import WebConfig

    config = WebConfig.read(web_config) if web_config is not None else WebConfig()
    registry = registry_for(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives)
    # Read once before listening: a store that cannot be read fails here, not on the first scrape.
    store_metrics(
        store, as_of_ms=as_of_ms or int(time.time() * 1000), per_topic=per_topic, objectives=objectives
    )
    server = make_server(
        host, port, config.protect(make_wsgi_app(registry)), ThreadingWSGIServer, handler_class=_SilentHandler
    )
    if config.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(config.cert_file), str(config.key_file))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    scheme = "https" if config.tls else "http"
    auth = f", basic auth ({len(config.users)} users)" if config.users else ""
    print(
        f"housekeeping: serving metrics of {store.root} on {scheme}://{host}:{port}/metrics{auth}",
        file=sys.stderr,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
