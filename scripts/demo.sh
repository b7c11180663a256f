#!/usr/bin/env bash
# Generate a demo store and run the consumed_ledger_trim DAG on it through Airflow (its Spark steps on a local
# Spark Connect server started here, local[2]; real Great Expectations gate; SQLite metadata), then print where
# the report is. DEMO_SPARK=submit runs the Spark steps with spark-submit instead (one application per step).
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

if [ "${DEMO_SPARK:-connect}" = connect ]; then
  echo "==> starting the Spark Connect server (port $HOUSEKEEPING_SPARK_CONNECT_PORT, log: $HOUSEKEEPING_SPARK_CONNECT_STATE/server.log)"
  housekeeping spark-connect start --state-dir "$HOUSEKEEPING_SPARK_CONNECT_STATE" \
    --port "$HOUSEKEEPING_SPARK_CONNECT_PORT" >/dev/null
  trap 'housekeeping spark-connect stop --state-dir "$HOUSEKEEPING_SPARK_CONNECT_STATE" >/dev/null' EXIT
  export HOUSEKEEPING_SPARK_CONN_ID=spark_connect_local
fi

echo "==> airflow dags test consumed_ledger_trim $LOGICAL_DATE (log: $LOG)"
STARTED=$SECONDS
if ! airflow dags test consumed_ledger_trim "$LOGICAL_DATE" >"$LOG" 2>&1; then
  tail -40 "$LOG"; echo "the DAG run failed; full log: $LOG"; exit 1
fi
grep -q "state=success" "$LOG" || { tail -40 "$LOG"; echo "the DAG run did not succeed; full log: $LOG"; exit 1; }
REPORT="$(grep -o 'REPORT: .*' "$LOG" | tail -1 | cut -d' ' -f2)"
echo
sed -n '/^## Reclaimed/,/^## Why/p' "$REPORT" | sed '$d'
echo "==> DAG run succeeded in $((SECONDS - STARTED)) s (Spark steps: ${DEMO_SPARK:-connect})."
echo "    report (Markdown): $REPORT"
echo "    report (JSON):     ${REPORT%.md}.json"
echo "    plan, gate result and snapshot: $(dirname "$(dirname "$REPORT")")"
