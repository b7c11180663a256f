"""The DAG files' one import (public: every file in dags/ and any DAG a user writes call these). The factory
itself is in ``housekeeping.orchestration.dags``; this name stays put so DAG files never change with the
library's layout."""

from __future__ import annotations

from housekeeping.orchestration.dags import (
    build_capacity_report_dag,
    build_housekeeping_dag,
    build_policy_what_if_dag,
    build_storage_report_dag,
)

__all__ = [
    "build_capacity_report_dag",
    "build_housekeeping_dag",
    "build_policy_what_if_dag",
    "build_storage_report_dag",
]
