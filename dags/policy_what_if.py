"""
### policy_what_if (Airflow DAG)

What a policy change would delete, move or keep, **before** anyone changes it; manual only, it changes nothing.

- **What-if:** the `policies` param is an overlay in the manifest's shape (`broker`, `namespaces.<tenant/ns>.<policy>`,
  `topics.<topic>.policies.<policy>`; `null` removes a policy), checked by the same rules as `housekeeping load`.
  For the `mechanism` (or `all`), the real planner and the real Great Expectations gate run twice, on the store
  as it is and with the overlay, and the report gives both plans, both verdicts and their difference per
  namespace (ledgers, bytes, topics, cursors, entries).
- **Sweep:** the `sweep` param (`retention-time=1h,6h,1d,3d,7d`, `retention-size=1G,5G,-1`, `ttl=1h,1d`) sets that
  policy in every namespace in scope at each value and measures every value in one Spark application: bytes
  freed and kept per namespace, drawn as one line per namespace.

**Flow:** `prepare_what_if` (checks the form, writes the request) -> `run_what_if` (Spark: the same code as
`housekeeping what-if`) -> `write_what_if_report` (`<store>/reports/what-if/<run>/index.html` and `report.json`,
offline; the storage report links the latest). No apply, no purge, no slot of the deleting pool.

**Params:** `mechanism`, `policies`, `as_of` (empty = the run's time), `sweep`, `scope`.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_policy_what_if_dag

dag = build_policy_what_if_dag(__doc__)
