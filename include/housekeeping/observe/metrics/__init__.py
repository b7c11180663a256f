"""The store's metrics, for a Prometheus to scrape (``housekeeping metrics`` / ``housekeeping serve-metrics``).

Read from the store alone (metadata, journal, pending-deletion log and the run directories' plans and verdicts);
no Spark. Names follow Pulsar's broker metrics where Pulsar has the measure (``pulsar_storage_size``,
``pulsar_storage_backlog_size``, ``pulsar_storage_backlog_age_seconds``, quota limits and evictions,
``pulsar_subscription_back_log``); the rest are ``housekeeping_*``. docs/metrics.md lists every name and label.

One collector per family group, each a function of one read of the store (``StoreView``): ``storage`` (sizes,
backlogs, quota limits), ``activity`` (what housekeeping did: deletions, purges, restores, cursor moves, freed bytes),
``runs`` (verdicts and the deletion lag, ``deletion_lag``); ``exposition`` puts them together for
``prometheus_client``.

Time: every age is measured at ``as_of_ms``, which the caller gives (``--as-of``) or takes from the clock at the
scrape. A metric is an observation, not a decision: nothing here decides what to delete, and with ``--as-of`` the
same store answers the same text. Evidence from plans (deletion lag) only counts plans made at or before as-of.
"""
