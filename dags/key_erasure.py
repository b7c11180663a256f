"""
### key_erasure (Airflow DAG)

Forget one key everywhere the store holds it (no Pulsar counterpart: apache/pulsar#5059). Requests are made with
`housekeeping erase request KEY (--topic T | --namespace NS) --reason TEXT` and count once their requested-at is at
or before the run's logical time. For each topic a request covers (the topic, its partitions, or the namespace)
and no hold covers, every raw ledger, the compacted ledger in force and every file waiting for purge is read;
entries whose key's SHA-256 is the request's are redacted (key and payload gone, a marker), every other entry and
every position, publish time and entry count stay as they were, so no cursor or backlog count moves.

**Flow:** `take_snapshot` -> `plan_key_erasure` (Spark: finds the entries, writes each affected ledger anew, staged)
-> `validate_erasure_plan` (Spark + Great Expectations re-derive the entries of requested keys, and check the staged
files entry by entry against the files in force) -> `approve_key_erasure` -> `apply_key_erasure` (per topic one
metadata transaction: compare-and-set, the staged files installed as the ledger's next files generation, the old
files to the pending-deletion log with `HOUSEKEEPING_ERASURE_GRACE_SECONDS`, never restorable) ->
`purge_pending_deletions` -> `write_erasure_report` (a proof per request: a final scan of every file of the target;
the request becomes done, pending until the old files are purged, held, or failed with the file named).

**Params:** `dry_run`, `scope`, `as_of` as every DAG; the blast-radius params are not used by erasure.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("erasure", doc_md=__doc__)
