"""Backlog quota (Pulsar ``BacklogQuotaManager``): its planner (``plan``), per-topic rule (``rule``, over the quota rules of
``quota``), gate (``gate``) and checks (``checks``)."""
