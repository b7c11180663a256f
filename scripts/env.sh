# Environment for running this project's Airflow locally: `source scripts/env.sh` (used by the Makefile).
# Everything lives inside the checkout: the virtualenv (.venv), Airflow's home (.airflow), the demo store.
_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$_here/.venv/bin:$PATH"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$_here/.airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$_here/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$_here/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=True
# The Spark connection in JSON form (the URI form spark://local[2] is unparsable: the hook falls back to yarn).
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-{\"conn_type\": \"spark\", \"host\": \"local[2]\"}}"
# The local Spark Connect server (`housekeeping spark-connect start`; make demo and make airflow start it): the DAGs
# use it when HOUSEKEEPING_SPARK_CONN_ID=spark_connect_local (those two targets set it), spark_default otherwise.
export HOUSEKEEPING_SPARK_CONNECT_PORT="${HOUSEKEEPING_SPARK_CONNECT_PORT:-15002}"
export HOUSEKEEPING_SPARK_CONNECT_STATE="${HOUSEKEEPING_SPARK_CONNECT_STATE:-$AIRFLOW_HOME/spark-connect}"
export AIRFLOW_CONN_SPARK_CONNECT_LOCAL="{\"conn_type\": \"spark_connect\", \"host\": \"localhost\", \"port\": $HOUSEKEEPING_SPARK_CONNECT_PORT}"
export HOUSEKEEPING_STORE_ROOT="${HOUSEKEEPING_STORE_ROOT:-$_here/demo-store}"
export GX_ANALYTICS_ENABLED=False
export PYSPARK_PYTHON="$_here/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$_here/.venv/bin/python"
unset _here
