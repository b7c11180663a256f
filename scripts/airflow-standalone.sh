#!/usr/bin/env bash
# Start Airflow locally (api-server, scheduler, dag-processor, triggerer) with the DAGs, a Spark Connect server for
# their Spark steps and a demo store ready. UI: http://localhost:8080, user admin (password printed below).
# HOUSEKEEPING_SPARK_CONN_ID=spark_default runs the Spark steps with spark-submit instead (no server).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin}"
# AIRFLOW_PORT moves the UI/API (default 8080). The task workers reach the execution API on the same server, so
# its URL must follow the port (otherwise every task dies with "connection refused" before it logs anything).
# Not 8793: that is the task-log server's port.
AIRFLOW_PORT="${AIRFLOW_PORT:-8080}"
export AIRFLOW__API__PORT="$AIRFLOW_PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://localhost:$AIRFLOW_PORT/execution/"
mkdir -p "$AIRFLOW_HOME"
# Safe defaults (docs/deployment.md, "Approval of unusual deletions"): each DAG's first apply on the store, and a plan
# over these conservative thresholds, waits for a person in Required Actions. The same values as docker-compose.yaml.
export HOUSEKEEPING_APPROVAL_FIRST_APPLY="${HOUSEKEEPING_APPROVAL_FIRST_APPLY:-true}"
export HOUSEKEEPING_APPROVAL_BYTES="${HOUSEKEEPING_APPROVAL_BYTES-53687091200}"
export HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE="${HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE-0.5}"
export HOUSEKEEPING_APPROVAL_TOPICS="${HOUSEKEEPING_APPROVAL_TOPICS-100}"
export HOUSEKEEPING_APPROVAL_CURSORS="${HOUSEKEEPING_APPROVAL_CURSORS-1000}"
if [ ! -d "$HOUSEKEEPING_STORE_ROOT" ]; then
  # Four weeks of history up to now (the generator never reads the clock: its reference is given here), so the
  # capacity forecast has growth to fit from the first report and the demo load below carries it on.
  housekeeping generate --store "$HOUSEKEEPING_STORE_ROOT" --topics 40 --seed 7 --history-days 28 \
    --reference "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi
airflow db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1
# The one-slot pool of the deleting steps (include/housekeeping/orchestration/dags.py DELETING_POOL).
airflow pools set housekeeping_deletes 1 "housekeeping: deleting steps on the store, one at a time" >/dev/null
export HOUSEKEEPING_SPARK_CONN_ID="${HOUSEKEEPING_SPARK_CONN_ID:-spark_connect_local}"
if [ "$HOUSEKEEPING_SPARK_CONN_ID" = spark_connect_local ]; then
  housekeeping spark-connect start --state-dir "$HOUSEKEEPING_SPARK_CONNECT_STATE" \
    --port "$HOUSEKEEPING_SPARK_CONNECT_PORT" >/dev/null
  echo "Spark Connect server: sc://localhost:$HOUSEKEEPING_SPARK_CONNECT_PORT (stopped with Airflow; log: $HOUSEKEEPING_SPARK_CONNECT_STATE/server.log)"
  # Warmed in the background while Airflow starts, so the first DAG runs meet a compiled planner; the warm-up gives
  # way as soon as a DAG run's Spark step starts on the server (the busy file), so no run waits behind it.
  export HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE="$HOUSEKEEPING_SPARK_CONNECT_STATE/dag-run-started"
  housekeeping spark-connect warm-up --url "sc://localhost:$HOUSEKEEPING_SPARK_CONNECT_PORT" \
    >"$HOUSEKEEPING_SPARK_CONNECT_STATE/warm-up.log" 2>&1 &
fi
# A living demo store: its clients at a gentle rate while Airflow runs (docs/cli.md, "Simulate"), so the store page,
# the scheduled runs and the capacity report show a store that moves. Producers on 12 topics, ledgers rolling every
# 2-15 minutes, one subscription each (a quarter stuck: acme/metrics' backlog fills toward its 64 KiB quota and is
# evicted; a quarter lagging), and now and then a subscription created, removed or replayed. No policy changes,
# topic deletions or holds: those stay the operator's. HOUSEKEEPING_DEMO_LOAD=false starts Airflow without it.
DEMO_LOAD_PID=
if [ "${HOUSEKEEPING_DEMO_LOAD:-true}" = true ]; then
  housekeeping simulate --store "$HOUSEKEEPING_STORE_ROOT" --duration 365d --rate 2 --batch 2 --topics 12 \
    --subscriptions 1 --stuck-share 0.25 --lagging-share 0.25 --max-lag 50 \
    --ops-per-minute 0.5 --ops subscribe,unsubscribe,reset-cursor --payload-bytes 512 \
    --ledger-max-entries 300 --ledger-min-rollover 2m --ledger-max-rollover 15m --progress 5m \
    >"$AIRFLOW_HOME/demo-load.log" 2>&1 &
  DEMO_LOAD_PID=$!
  echo "Demo load: housekeeping simulate on the store (log: $AIRFLOW_HOME/demo-load.log)"
fi
stop_helpers() {
  # SIGTERM: the simulation disconnects its clients before it exits.
  if [ -n "$DEMO_LOAD_PID" ]; then kill "$DEMO_LOAD_PID" 2>/dev/null && wait "$DEMO_LOAD_PID" 2>/dev/null; fi
  if [ "$HOUSEKEEPING_SPARK_CONN_ID" = spark_connect_local ]; then
    housekeeping spark-connect stop --state-dir "$HOUSEKEEPING_SPARK_CONNECT_STATE" >/dev/null
  fi
}
trap stop_helpers EXIT
echo "Airflow UI: http://localhost:$AIRFLOW_PORT  user: admin  password: see $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
echo "Store: $HOUSEKEEPING_STORE_ROOT   (DAGs start paused: unpause consumed_ledger_trim or trigger it with a dry run)"
airflow standalone
