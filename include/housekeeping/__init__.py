"""Pulsar-style broker storage housekeeping: the library behind the DAGs, the Spark apps and the CLI."""

from __future__ import annotations

__version__ = "0.1.0"
