"""Backlog quota (Pulsar ``BacklogQuotaManager``): planner, its per-topic rules and gate checks."""
