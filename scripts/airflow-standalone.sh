#!/usr/bin/env bash
# Start Airflow locally (api-server, scheduler, dag-processor, triggerer) with the DAGs, the Spark
# connection and a demo store ready. UI: http://localhost:8080, user admin (password printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin}"
mkdir -p "$AIRFLOW_HOME"
if [ ! -d "$HOUSEKEEPING_STORE_ROOT" ]; then
  housekeeping generate --store "$HOUSEKEEPING_STORE_ROOT" --topics 40 --seed 7
fi
airflow db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1
echo "Airflow UI: http://localhost:8080  user: admin  password: see $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
echo "Store: $HOUSEKEEPING_STORE_ROOT   (DAGs start paused: unpause consumed_ledger_trim or trigger it with a dry run)"
exec airflow standalone
