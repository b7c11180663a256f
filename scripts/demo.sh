#!/usr/bin/env bash
# Generate a demo store and run the consumed_ledger_trim DAG on it through Airflow (real spark-submit on
# local[2], real Great Expectations gate, SQLite metadata), then print where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
LOGICAL_DATE="${DEMO_LOGICAL_DATE:-2026-11-01T00:00:00+00:00}"
LOG="$AIRFLOW_HOME/demo-dag-test.log"
mkdir -p "$AIRFLOW_HOME"

echo "==> generating the demo store in $HOUSEKEEPING_STORE_ROOT (40 topics, seed 7)"
rm -rf "$HOUSEKEEPING_STORE_ROOT"
housekeeping generate --store "$HOUSEKEEPING_STORE_ROOT" --topics 40 --seed 7

echo "==> preparing Airflow in $AIRFLOW_HOME"
airflow db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || { cat "$AIRFLOW_HOME/db-migrate.log"; exit 1; }

echo "==> airflow dags test consumed_ledger_trim $LOGICAL_DATE (log: $LOG)"
if ! airflow dags test consumed_ledger_trim "$LOGICAL_DATE" >"$LOG" 2>&1; then
  tail -40 "$LOG"; echo "the DAG run failed; full log: $LOG"; exit 1
fi
grep -q "state=success" "$LOG" || { tail -40 "$LOG"; echo "the DAG run did not succeed; full log: $LOG"; exit 1; }
REPORT="$(grep -o 'REPORT: .*' "$LOG" | tail -1 | cut -d' ' -f2)"
echo
sed -n '/^## Reclaimed/,/^## Why/p' "$REPORT" | sed '$d'
echo "==> DAG run succeeded."
echo "    report (Markdown): $REPORT"
echo "    report (JSON):     ${REPORT%.md}.json"
echo "    plan, gate result and snapshot: $(dirname "$(dirname "$REPORT")")"
