"""
### empty_ledger_unlisting (Airflow DAG)

Closed ledgers that hold no entry leave their topic's ledger list (restorable until purge).
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("unlist_empty", doc_md=__doc__)
