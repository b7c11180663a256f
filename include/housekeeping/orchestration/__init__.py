"""Airflow and Spark glue: the DAG factory, the operators, notifiers, the Spark Connect server."""
